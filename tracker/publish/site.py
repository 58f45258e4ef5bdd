"""`compile-baselines publish`: asv's HTML history, made to render with no network, and the tracker report beside it.

asv 0.6.6's pages load jQuery, flot, Bootstrap and others from CDNs; self-hosted runners are often firewalled
and our CI has no network. The same files, vendored from npm with their licenses (tracker/publish/vendor/), are copied
into the site and the tags pointed at them. The report goes to `<out>/report/`, linked both ways. Before anything
is written, tracker.publish.preflight checks the output directory (never a user's own folder) and the results; the
site is built in a folder beside the output directory and moved into its place when it is whole
(preflight.replacing), so an interrupted publish leaves the previous site, or none, never half of one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tracker.errors import ToolError
from tracker.paths import ASV_CONF
from tracker.publish import preflight
from tracker.publish.escape import shown
from tracker.publish.filesite import make_file_readable

VENDOR_DIR = Path(__file__).resolve().parent / "vendor"
SITE_VENDOR = "vendor"  # where the vendored files go inside the published site
REPORT_SUBDIR = "report"
DEFAULT_CONFIG = ASV_CONF
# A navigation entry asv's own pages do not have: the way from asv's history to our report.
REPORT_LINK = (f'<li id="nav-li-baseline-report"><a href="{REPORT_SUBDIR}/index.html" '
               'title="compile-baselines report: best mode per workload, wins, geomeans">Baseline report</a></li>')


class PublishError(ToolError):
    pass


def load_manifest(vendor_dir: Path = VENDOR_DIR) -> list[dict[str, Any]]:
    return json.loads((vendor_dir / "manifest.json").read_text())["files"]


def _check_vendored(path: Path, sha256_hex: str) -> None:
    """Refuse a vendored file that is not the one the manifest names (edited, truncated, replaced)."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha256_hex:
        raise PublishError(f"vendored {path} does not match tracker/publish/vendor/manifest.json "
                           f"(sha256 {digest[:12]}...)")


_TAG = re.compile(r"<(script|link)\b[^>]*>", re.IGNORECASE)
_URL = re.compile(r'\b(src|href)="(https?://[^"]+)"')
# Attributes that only make sense for a third-party host (see localize_html on integrity); crossorigin would
# make file:// loads fail (a file page has an opaque origin).
_DROP = re.compile(r'\s+(integrity|crossorigin|referrerpolicy)="[^"]*"')


def localize_html(html: str, local: dict[str, str]) -> tuple[str, list[str]]:
    """Point every CDN <script>/<link> of `html` at its local copy: `local` maps URL -> relative path.

    Returns the new html and the external URLs left that a page would load (none when all are vendored)."""
    missing: list[str] = []

    def fix(m: re.Match[str]) -> str:
        tag = m.group(0)
        u = _URL.search(tag)
        if u is None:
            return tag
        url = u.group(2)
        if url not in local:
            missing.append(url)
            return tag
        # No integrity attribute: a same-origin file is as trusted as the page itself, and on file:// Chromium
        # blocks any script that has one ("requires the request to be CORS enabled"). make_offline checks the
        # vendored bytes against the manifest's sha256 instead.
        return _DROP.sub("", tag).replace(u.group(0), f'{u.group(1)}="{local[url]}"')

    return _TAG.sub(fix, html), missing


def external_loads(html: str) -> list[str]:
    """URLs a page would fetch from elsewhere: src/href of <script> and <link> tags (plain <a> links excluded)."""
    return [u.group(2) for m in _TAG.finditer(html) if (u := _URL.search(m.group(0)))]


def make_offline(site: Path, vendor_dir: Path = VENDOR_DIR) -> list[Path]:
    """Copy the vendored libraries into `site` and rewrite its HTML pages to use them; returns the pages changed."""
    manifest = load_manifest(vendor_dir)
    shutil.copytree(vendor_dir, site / SITE_VENDOR, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("manifest.json", "README.md", "__pycache__"))
    for f in manifest:
        _check_vendored(vendor_dir / f["path"], f["sha256"])
    local = {f["cdn_url"]: f"{SITE_VENDOR}/{f['path']}" for f in manifest}
    changed = []
    for page in sorted(site.glob("*.html")):
        html = page.read_text(encoding="utf-8")
        new, missing = localize_html(html, local)
        if missing:
            raise PublishError(f"{page.name} loads {', '.join(missing)}, which tracker/publish/vendor/ lacks: "
                               "vendor it "
                               "(see tracker/publish/vendor/README.md) or pin asv to the version the manifest names")
        if new != html:
            page.write_text(new, encoding="utf-8")
            changed.append(page)
    return changed


def drop_benchmarks_without_results(site: Path) -> list[str]:
    """Remove from asv's index the benchmarks no result file measured (a suite newer than its results, e.g.
    kernels under test not yet run): asv's grid would request their summary graphs and get a 404 each."""
    index_path = site / "index.json"
    index = json.loads(index_path.read_text())
    summary = site / "graphs" / "summary"
    dropped = sorted(n for n in index["benchmarks"] if not (summary / f"{n}.json").is_file())
    if dropped:
        for name in dropped:
            del index["benchmarks"][name]
        index_path.write_text(json.dumps(index, separators=(",", ":")), encoding="utf-8")
    return dropped


# A name asv's pages put into HTML as it is (a benchmark's, a parameter's, a machine key's): letters, digits, _ . -
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def inert_index(site: Path) -> list[str]:
    """Make asv's index.json safe for its pages, which put parts of it into HTML unescaped: a benchmark's code and
    pretty name (tooltips), a machine's details (a tooltip of `key: value` lines), and names (a benchmark's, its
    parameters', the machine keys'). The results say those (a result file's or machine.json's fields, a
    benchmarks.json on the results branch), so the texts are HTML-escaped and a benchmark or machine key whose name
    is not a plain name is left out. What was left out, one line each."""
    from html import escape

    index_path = site / "index.json"
    index = json.loads(index_path.read_text())
    left_out = []
    for name, bench in list(index["benchmarks"].items()):
        names = [name, *(bench.get("param_names") or [])]
        if not all(isinstance(n, str) and _PLAIN_NAME.fullmatch(n) for n in names):
            del index["benchmarks"][name]
            left_out.append(f"benchmark {name!r} left out of asv's pages: a name of it is not a plain name")
            continue
        for key in ("code", "pretty_name"):
            if isinstance(bench.get(key), str):
                bench[key] = escape(bench[key])
    for key in [k for k in index.get("params", {}) if not _PLAIN_NAME.fullmatch(k)]:
        del index["params"][key]
        left_out.append(f"machine key {key!r} left out of asv's pages: not a plain name")
    index["machines"] = {machine: {escape(str(k)): escape(str(v)) for k, v in details.items()}
                         for machine, details in index.get("machines", {}).items()}
    index_path.write_text(json.dumps(index, separators=(",", ":")), encoding="utf-8")
    return left_out


def graphs_left_out(results_dir: Path, site: Path, dropped: list[str]) -> list[str]:
    """What asv's pages leave out, said: benchmarks of the newest result file that benchmarks.json (the suite's
    description asv publishes from) does not list, as a stale one does, and benchmarks listed with no result."""
    from tracker.store import asvjson, results

    index = json.loads((site / "index.json").read_text())
    runs, _ = results.list_runs(results_dir)
    measured: set[str] = set()
    for run in reversed(runs):
        try:
            measured = set(asvjson.read_result_file(run.path)["results"])
            break
        except (ValueError, OSError):
            continue
    out = []
    missing = sorted(measured - set(index["benchmarks"]) - set(dropped))
    if missing:
        out.append(f"{len(missing)} benchmark(s) with results have no graphs: {results_dir / 'benchmarks.json'} "
                   f"does not describe them (stale? delete it and publish again): {', '.join(missing)}")
    # A class the results never measured (a kernel repository's runs hold no study class) is no one's omission
    classes = {name.rsplit(".", 1)[0] for name in measured}
    dropped = [name for name in dropped if name.rsplit(".", 1)[0] in classes]
    if dropped:
        out.append(f"{len(dropped)} benchmark(s) of benchmarks.json have no results and no graphs: "
                   f"{', '.join(dropped)}")
    return out


def link_report(site: Path) -> None:
    """Add the report to asv's navigation bar (once)."""
    index = site / "index.html"
    html = index.read_text(encoding="utf-8")
    if REPORT_LINK in html:
        return
    anchor = '<li id="nav-li-regressions">'
    if anchor not in html:
        raise PublishError(f"{index}: asv's navigation bar has changed; cannot add the report link")
    at = html.index(anchor)
    end = html.index("</li>", at) + len("</li>")
    index.write_text(html[:end] + "\n\t" + REPORT_LINK + html[end:], encoding="utf-8")


# asv's graph page, opened without a parameter selection (from its grid, or a bare #benchmark URL), shows the first
# values of each parameter up to 8 lines: prefill/decode/tiny x two workloads x eager, whatever was measured. This
# script, run before asv's own, completes such a URL with the measured selection (`measured_selection`).
SELECTION_SCRIPT_ID = "cb-measured-selection"
_SELECTION_JS = """<script id="%s">
/* compile-baselines: open asv's graph of a benchmark on what was measured */
(function () {
  var selection = %s;
  function complete() {
    var hash = window.location.hash.replace(/^#\\/?/, "");
    var at = hash.indexOf("?");
    var name = decodeURIComponent(at < 0 ? hash : hash.slice(0, at));
    var query = at < 0 ? "" : hash.slice(at + 1);
    if (!selection[name] || /(^|&)p-/.test(query)) return;
    var parts = query ? [query] : [];
    var params = selection[name];
    Object.keys(params).forEach(function (key) {
      params[key].forEach(function (v) { parts.push(encodeURIComponent(key) + "=" + encodeURIComponent(v)); });
    });
    window.location.replace("#" + encodeURIComponent(name) + "?" + parts.join("&"));
  }
  complete();
  window.addEventListener("hashchange", complete);
})();
</script>"""


def measured_selection(site: Path) -> dict[str, dict[str, list[str]]]:
    """Per parameterised benchmark of asv's published `site`, the selection its graph page should open on, in asv's
    URL syntax (`{"p-preset": ["'tiny'"], ...}`): the first measured combination of all parameters but the last (in
    asv's parameter order: the first measured preset and workload), and every value of the last (the modes) measured
    with it. Measured: a value in any of the benchmark's graph files (asv lays them out in the order of
    itertools.product over the parameters)."""
    index = json.loads((site / "index.json").read_text())
    out: dict[str, dict[str, list[str]]] = {}
    for name, bench in index["benchmarks"].items():
        params, names = bench.get("params") or [], bench.get("param_names") or []
        if not params:
            continue
        measured: set[int] = set()
        for path in (site / "graphs").rglob(f"{name}.json"):
            if path.parent.name == "summary":
                continue
            for point in json.loads(path.read_text()):
                if len(point) == 2 and isinstance(point[1], list):
                    measured.update(i for i, v in enumerate(point[1]) if v is not None)
        if not measured:
            continue

        def coords(i: int, params: list[list[str]] = params) -> list[int]:
            out_ = []
            for values in reversed(params):
                i, j = divmod(i, len(values))
                out_.append(j)
            return out_[::-1]

        first = coords(min(measured))
        last = sorted({coords(i)[-1] for i in measured if coords(i)[:-1] == first[:-1]})
        out[name] = {f"p-{n}": [params[k][first[k]]] for k, n in enumerate(names[:-1])}
        out[name][f"p-{names[-1]}"] = [params[-1][j] for j in last]
    return out


def script_json(data: Any) -> str:
    """`data` as JSON to write inside a <script> element: no `</script>` or `<!--` in a string of the results ends
    the element early (<, > and & as JSON escapes)."""
    return json.dumps(data, sort_keys=True).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def open_graphs_on_measured(site: Path) -> dict[str, dict[str, list[str]]]:
    """Add to asv's index.html the script that opens a benchmark's graph on its measured selection (once)."""
    index = site / "index.html"
    html = index.read_text(encoding="utf-8")
    selection = measured_selection(site)
    html = re.sub(rf'\n?<script id="{SELECTION_SCRIPT_ID}">.*?</script>', "", html, flags=re.S)
    if "<head>" not in html:
        raise PublishError(f"{index}: no <head>; cannot add the graph selection script")
    script = _SELECTION_JS % (SELECTION_SCRIPT_ID, script_json(selection))
    index.write_text(html.replace("<head>", "<head>\n" + script, 1), encoding="utf-8")
    return selection


# asv's grid draws each benchmark over commits: with one commit measured, every box is empty. The first site says so
# on the grid, and where the values are (`note_single_commit`).
SINGLE_COMMIT_ID = "cb-one-commit"


def note_single_commit(site: Path, results_dir: Path, selection: dict[str, dict[str, list[str]]]) -> str | None:
    """When the results hold one commit, put at the top of asv's grid what it can show then: the commit, and links to
    the report and to a graph of the measured latencies by mode (asv plots one commit that way). Returns the commit,
    or None (several commits: the grid draws their history)."""
    from tracker.store.results import list_runs

    runs, _ = list_runs(results_dir)
    commits = sorted({r.commit for r in runs})
    if len(commits) != 1:
        return None
    machines = sorted({r.machine for r in runs})
    index = site / "index.html"
    html = re.sub(rf'\n?<div id="{SINGLE_COMMIT_ID}".*?</div>', "", index.read_text(encoding="utf-8"), flags=re.S)
    anchor = '<div id="summarygrid-display"'
    if anchor not in html:
        raise PublishError(f"{index}: asv's grid has changed; cannot say that it holds one commit")
    latency = next((n for n in sorted(selection) if n.endswith(".track_latency") and "p-mode" in selection[n]), None)
    graphs = ", ".join(f'<a href="#{escape(latency)}?machine={escape(quote(m))}&amp;x-axis=mode&amp;y-axis-scale=log">'
                       f"{escape(shown(m))}</a>" for m in machines) if latency else ""
    graph = f", and asv plots them by mode: latency per mode on {graphs}" if graphs else ""
    note = (f'\n<div id="{SINGLE_COMMIT_ID}" class="alert alert-info" style="margin: 10px 15px 0">'
            f"<strong>One commit measured so far</strong> ({escape(shown(commits[0][:8]))}): asv's grid plots each "
            "benchmark over commits, so its boxes stay empty until a second commit is measured. This commit's values "
            "are in "
            f'the <a href="{REPORT_SUBDIR}/index.html">baseline report</a>{graph}.</div>')
    at = html.index(">", html.index(anchor)) + 1
    index.write_text(html[:at] + note + html[at:], encoding="utf-8")
    return commits[0]


HISTORY_DVCS = "compile-baselines-results"
_history_class: type | None = None


def commit_history(results_dir: Path) -> dict[str, int]:
    """Commit -> commit date (ms) of every asv result file under `results_dir`."""
    from asv.results import iter_results

    return {r.commit_hash: int(r.date) for r in iter_results(str(results_dir))}


def use_results_history(conf: Any) -> None:
    """Make asv publish read commit order and dates from the results, not from a git checkout.

    asv publish plots only commits found on a branch of the git repository: a shallow CI checkout, a fixture
    measured elsewhere or a study point imported under a made-up hash would be dropped with a warning. The
    results record each commit's date; ordered by it, they are the main-branch history asv needs. asv picks a
    repository class by `conf.dvcs` among Repo subclasses, so this one is defined once and selected by name.
    """
    global _history_class
    if _history_class is None:
        _history_class = _define_history_class()
    conf.dvcs = HISTORY_DVCS
    conf.repo = conf.results_dir


def _define_history_class() -> type:
    from asv.repo import NoSuchNameError, Repo

    class ResultsHistory(Repo):
        dvcs = HISTORY_DVCS
        _default_branch = "main"

        def __init__(self, url: str, mirror_path: str) -> None:
            self._dates = commit_history(Path(url))
            # oldest first; ties (several runs of one date) by hash, so the order is stable
            self._order = sorted(self._dates, key=lambda h: (self._dates[h], h))

        @classmethod
        def url_match(cls, url: str) -> bool:
            return False  # chosen by conf.dvcs only

        def checkout(self, path: str, commit_hash: str) -> None:
            raise NotImplementedError("results history has no source tree")

        def pull(self) -> None:
            pass

        def get_range_spec(self, commit_a: str, commit_b: str) -> str:
            return f"{commit_a}..{commit_b}"

        def get_new_range_spec(self, latest_result: str, branch: str | None = None) -> str:
            return f"{latest_result}.."

        def get_hashes_from_range(self, range_spec: str) -> list[str]:
            """Commits after a up to b (git's a..b), newest first as git lists them."""
            a, _, b = range_spec.rpartition("..")
            lo = self._order.index(a) + 1 if a in self._dates else 0
            hi = self._order.index(b) + 1 if b in self._dates else len(self._order)
            return self._order[lo:hi][::-1]

        def get_hash_from_name(self, name: str) -> str:
            if name not in self._dates:
                raise NoSuchNameError(name)
            return name

        def get_name_from_hash(self, commit: str) -> None:
            return None

        def get_date(self, hash: str) -> int:
            return self._dates[hash]

        def get_date_from_name(self, name: str) -> int:
            return self._dates[self.get_hash_from_name(name)]

        def get_tags(self) -> dict[str, str]:
            return {}

        def get_branch_commits(self, branch: str | None) -> list[str]:
            return self._order[::-1]

        def get_revisions(self, commits: set[str]) -> dict[str, int]:
            return {h: i for i, h in enumerate(self._order) if h in commits}

    return ResultsHistory


def run_asv_publish(results_dir: Path, site: Path, config: Path = DEFAULT_CONFIG,
                    warn: Callable[[str], object] = lambda _: None) -> None:
    """asv's own publish, over the history the results record (see use_results_history), into `site`; `warn`: how
    the suite's description was written, when it was."""
    from asv.commands.publish import Publish
    from asv.console import log
    from asv.util import UserError

    from tracker.store import asvfiles

    preflight.check_results(results_dir)
    conf = asvfiles.load_conf(config)
    conf.results_dir = str(results_dir)
    if not (results_dir / "benchmarks.json").is_file():
        _write_benchmark_list(conf, warn)
    conf.html_dir = str(site)
    use_results_history(conf)
    log.enable(verbose=False)
    try:
        Publish.run(conf, pull=False)
    except UserError as e:
        raise PublishError(f"asv publish failed: {' '.join(str(e).split())}") from None
    except RecursionError:  # asv reads every file whole; ours skip the samples, so only asv met it
        raise PublishError(f"asv publish failed: {_too_deep(results_dir)} is JSON nested too deeply for asv to read: "
                           "fix or remove it") from None
    finally:
        log.flush()  # asv leaves its last progress line open: what we print next starts a line of its own


def _too_deep(results_dir: Path) -> str:
    """The first JSON file of `results_dir` that Python's parser cannot read for its nesting (asv's failure)."""
    for path in sorted(results_dir.rglob("*.json")):
        try:
            json.loads(path.read_bytes())
        except RecursionError:
            return str(path)
        except (OSError, ValueError):
            continue
    return "a file of the results"


def _write_benchmark_list(conf: Any, warn: Callable[[str], object]) -> None:
    """asv publish reads the suite's description from results/benchmarks.json, which `asv run` writes and our
    runner does not. Discover the suite as asv run does (one process importing it); when it cannot be imported
    here, describe the tracker's own benchmarks from the result files, which hold their parameters and versions."""
    from asv.benchmarks import Benchmarks

    from tracker.store import asvfiles

    path = Path(conf.results_dir) / "benchmarks.json"
    logging.disable(logging.CRITICAL)  # asv logs a failed import's whole traceback; one line below says it
    try:
        _save(asvfiles.discover(conf, asvfiles.existing_environment(conf, sys.executable), "HEAD"), path)
        warn(f"publish: wrote {path} (the suite's description, discovered)")
        return
    except asvfiles.AsvError as e:
        problem = str(e).splitlines()[0]
    finally:
        logging.disable(logging.NOTSET)
    described = describe_from_results(Path(conf.results_dir))
    if not described:
        raise PublishError(f"{conf.results_dir} has no benchmarks.json (asv publish needs the suite's description), "
                           f"discovering the suite failed ({problem}) and no result file names our benchmarks")
    _save(Benchmarks(conf, described), path)
    warn(f"publish: warning: discovering the suite failed ({problem}); wrote {path} describing "
         f"{', '.join(b['name'] for b in described)} from the result files")


def _save(benchmarks: Any, path: Path) -> None:
    """asv's Benchmarks.save, atomically (asv writes in place: a publish killed mid-write would leave a truncated
    benchmarks.json that every later publish refuses)."""
    from tracker.store import atomic

    atomic.write_text(path, json.dumps({**benchmarks._all_benchmarks, "version": benchmarks.api_version}, indent=4,
                                       sort_keys=True))


HOST_UNIT = "us"  # baselines.Host.track_launch_overhead.unit


def describe_from_results(results_dir: Path) -> list[dict[str, Any]]:
    """asv benchmark descriptions of the tracker's own benchmarks, from the newest result file holding each:
    parameters and version as recorded, units and parameter names as tracker.store.asvfiles writes them."""
    from tracker import metrics
    from tracker.store import asvfiles, asvjson, results

    units = {name: metrics.METRICS[metric].unit for cls in asvfiles.MODE_CLASSES for metric, name in
             metrics.benchmark_names(cls).items()}
    units[asvfiles.HOST_BENCHMARK] = HOST_UNIT
    found: dict[str, dict[str, Any]] = {}
    runs, _ = results.list_runs(results_dir)
    for run in reversed(runs):
        try:
            data = asvjson.read_result_file(run.path)
        except (ValueError, OSError):
            continue
        col = {c: i for i, c in enumerate(data["result_columns"])}
        for name, row in data["results"].items():
            if name in units and name not in found:
                params = row[col["params"]] if "params" in col else []
                found[name] = {"name": name, "type": "track", "unit": units[name], "params": params,
                               "param_names": ["preset", "workload", "mode"] if params else [],
                               "version": row[col["version"]] if "version" in col else None, "timeout": 1800,
                               "code": "(described from the result files: the suite could not be imported)"}
        if len(found) == len(units):
            break
    return [found[n] for n in units if n in found]


@dataclass(frozen=True)
class Published:
    site: Path  # the site's folder: asv's index.html, the report in REPORT_SUBDIR
    report_bytes: int  # the report's size


def publish(results_dir: str | os.PathLike[str], html_dir: str | os.PathLike[str] | None,
            out: str | os.PathLike[str] | None, *, config: str | os.PathLike[str] | None = None,
            warn: Callable[[str], object]) -> Published:
    """Publish asv's history (offline-ready) to `out`, or when None to asv.conf.json's `html_dir` (relative to
    the config file, as asv reads it), and the report to `<out>/report/`; what was left out or written besides said
    through `warn` as it happens."""
    from tracker.publish.report import write_report
    from tracker.store import asvfiles

    config_path = Path(config) if config else DEFAULT_CONFIG
    if out is None and html_dir is None:
        html_dir = asvfiles.load_conf(config_path).html_dir
    if out is not None:
        site = Path(out).resolve()
    elif html_dir:
        site = (config_path.resolve().parent / html_dir).resolve()
    else:
        raise PublishError("publish needs an output directory (--out, or html_dir in asv.conf.json)")
    results = Path(results_dir).resolve()
    if site == results or results.is_relative_to(site):
        raise preflight.UnusableOutput(f"output {site} would replace the results in {results}: asv publish empties "
                                       "it first")
    if site.is_relative_to(results):
        raise preflight.UnusableOutput(f"output {site} is inside the results directory {results}: choose another "
                                       "--out")
    with preflight.replacing(site) as build:  # built beside it, put in its place whole
        run_asv_publish(results, build, config_path, warn)
        preflight.mark(build)
        for warning in [*graphs_left_out(results, build, drop_benchmarks_without_results(build)), *inert_index(build)]:
            warn(f"publish: warning: {warning}")
        make_offline(build)
        make_file_readable(build)
        link_report(build)
        note_single_commit(build, results, open_graphs_on_measured(build))
        size = write_report(results, build / REPORT_SUBDIR, asv_index="../index.html", warn=warn)
    return Published(site, size)
