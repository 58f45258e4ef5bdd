"""The published site in a real browser with no network: headless Chromium loads the report and asv's pages
from 127.0.0.1 (and the report from file://); every request must stay on the site, none may fail, the console
must stay clean, and the tables and plots must be in the DOM. Screenshots are saved (into
$COMPILE_BASELINES_SCREENSHOTS too, when set: that is how docs/screenshots/ is made)."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import CHROMIUM, Browser, Page
from test_publish import h100_results, make_results

from tracker.publish import site as publish

pytestmark = [pytest.mark.slow, pytest.mark.skipif(  # slow: asv publish and a browser, end to end
    not Path(CHROMIUM).is_file(),
    reason=f"Chromium not found at {CHROMIUM}: install it (Debian: apt-get install -y chromium) to run this test")]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The H100 fixture published, when it is committed; else the small synthetic results of test_publish."""
    root = tmp_path_factory.mktemp("browser")
    results_dir = h100_results(root) or make_results(root)
    publish.publish(results_dir, None, root / "site", warn=print)
    return root / "site"


@pytest.fixture(scope="module")
def base_url(site: Path) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    thread.join()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    with Browser(tmp_path_factory.mktemp("chromium-profile")) as b:
        yield b


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


def _save(page: Page, shots: Path, name: str, full_page: bool, max_height: int = 6000) -> Path:
    path = page.screenshot(shots / name, full_page=full_page, max_height=max_height)
    assert path.stat().st_size > 10_000  # a blank page compresses to almost nothing
    if os.environ.get("COMPILE_BASELINES_SCREENSHOTS"):
        shutil.copy(path, Path(os.environ["COMPILE_BASELINES_SCREENSHOTS"]) / name)
    return path


def _clean(page: Page, origin: str) -> None:
    load = page.load()
    assert load.requests, "no request recorded"
    assert load.failed == []
    assert load.console_errors == []
    assert [u for u in load.requests if not u.startswith((origin, "data:"))] == []


REPORT_READY = ("document.querySelectorAll('table.cells tbody tr').length > 0"
                " && document.querySelectorAll('svg.plot').length > 0")


def test_report_renders_offline(browser: Browser, base_url: str, shots: Path) -> None:
    page = browser.open(base_url + "report/index.html", REPORT_READY)
    _clean(page, base_url)
    # one section per machine and preset (the H100 fixture has two machines, each with prefill and decode)
    count = page.evaluate("document.querySelectorAll('section.preset').length")
    assert count
    for i in range(count):
        q = f"document.querySelectorAll('section.preset')[{i}]"
        assert page.evaluate(f"{q}.querySelectorAll('table.cells tbody tr').length") >= 2
        assert page.evaluate(f"{q}.querySelectorAll('table.cells td.best').length") >= 2
        # real plots (over commits, [across PyTorch versions,] heat strip, compile cost): drawn marks (lines,
        # markers, the strip's image) and a visible size
        sizes = page.evaluate(f"[...{q}.querySelectorAll('svg.plot')].map(s => "
                              "[s.querySelectorAll('path, use, image').length, s.getBoundingClientRect().width])")
        assert len(sizes) in (3, 4) and all(marks > 8 and width > 300 for marks, width in sizes), sizes
    assert page.evaluate("document.querySelector('#asv-link').href") == base_url + "index.html"
    meta = page.evaluate("document.querySelector('dl.meta').innerText")
    for key in ("COMMIT", "GPU", "DRIVER", "CUDA", "TORCH", "TRITON", "LAUNCH FLOOR"):
        assert key in meta.upper()
    _save(page, shots, "report.png", full_page=True, max_height=1500)
    _save(page, shots, "report-full.png", full_page=True)


def test_asv_grid_renders_offline(browser: Browser, base_url: str, shots: Path) -> None:
    page = browser.open(base_url + "index.html",
                        "document.querySelectorAll('.benchmark-container canvas').length >= 3")
    _clean(page, base_url)
    assert page.evaluate("typeof jQuery.plot") == "function"
    report = page.evaluate("document.querySelector('#nav-li-baseline-report a').href")
    assert report == base_url + "report/index.html"
    _save(page, shots, "asv-grid.png", full_page=False)


def test_the_first_site_says_where_its_one_commit_s_values_are(browser: Browser, base_url: str, site: Path,
                                                              shots: Path) -> None:
    """A site of one commit (the H100 fixture's two runs are of one commit): asv's grid plots over commits, so its
    boxes are empty; the grid says so at the top, and its links lead to the report and to a graph of the commit's
    latencies by mode, five bars."""
    if publish.SINGLE_COMMIT_ID not in (site / "index.html").read_text(encoding="utf-8"):
        pytest.skip("no H100 fixture: the synthetic results have two commits")
    page = browser.open(base_url + "index.html", "document.querySelectorAll('.benchmark-container').length >= 3")
    _clean(page, base_url)
    note = f"document.getElementById('{publish.SINGLE_COMMIT_ID}')"
    assert page.evaluate(f"{note}.getBoundingClientRect().height") > 20
    assert page.evaluate(f"{note}.innerText").startswith("One commit measured so far (759ff183)")
    links = page.evaluate(f"[...{note}.querySelectorAll('a')].map(a => a.href)")
    assert links[0] == base_url + "report/index.html"
    _save(page, shots, "asv-grid-one-commit.png", full_page=False)
    graph = browser.open(links[1], "document.querySelectorAll('#main-graph canvas').length > 0"
                                   " && $('#main-graph').data('plot') !== undefined")
    _clean(graph, base_url)
    assert graph.evaluate("$('#main-graph').data('plot').getData().map(s => s.data.length)") == [5]


def test_asv_history_of_an_instance_from_the_report(browser: Browser, base_url: str, shots: Path) -> None:
    """Follow the report's link of its first instance to asv's graph of it: five modes plotted."""
    report = browser.open(base_url + "report/index.html", REPORT_READY)
    link = report.evaluate("document.querySelector('table.cells tbody th a').href")
    assert link.startswith(base_url + "index.html#baselines.Baseline.track_latency?")
    page = browser.open(link, "document.querySelectorAll('#main-graph canvas').length > 0"
                              " && document.querySelectorAll('#main-graph .legendLabel').length >= 5")
    _clean(page, base_url)
    labels = page.evaluate("[...document.querySelectorAll('#main-graph .legendLabel')].map(e => e.innerText)")
    workload = link.split("p-workload=%27", 1)[1].split("%27", 1)[0]
    assert all(workload in label for label in labels)
    # the same graph page with the modes on the x axis: what a single run shows best, so it is the screenshot
    # (several workloads at once would draw grouped bars through flot-orderbars, which asv 0.6.6 offsets wrongly)
    by_mode = browser.open(link + "&x-axis=mode&y-axis-scale=log",
        "document.querySelectorAll('#main-graph canvas').length > 0"
        " && $('#main-graph').data('plot') !== undefined")
    _clean(by_mode, base_url)
    points = by_mode.evaluate("$('#main-graph').data('plot').getData().map(s => s.data.length)")
    assert points == [5]  # one bar per mode
    _save(by_mode, shots, "asv-history.png", full_page=False)


def test_asv_graph_page_opens_on_what_was_measured(browser: Browser, base_url: str, shots: Path) -> None:
    """A benchmark's graph opened as asv's grid opens it (no parameter selection): every series plotted has data,
    one measured instance in all its measured modes, not asv's first values of each parameter."""
    page = browser.open(base_url + "index.html#baselines.Baseline.track_latency",
                        "document.querySelectorAll('#main-graph canvas').length > 0"
                        " && $('#main-graph').data('plot') !== undefined"
                        " && $('#main-graph').data('plot').getData().length > 0")
    _clean(page, base_url)
    assert "p-preset=" in page.evaluate("location.hash")
    series = page.evaluate("$('#main-graph').data('plot').getData().map(s => [s.label, s.data.length])")
    labels = page.evaluate("[...document.querySelectorAll('#main-graph .legendLabel')].map(e => e.innerText)")
    assert len(labels) == len(series) >= 2 and all(n > 0 for _, n in series), series
    # from the grid: the same selection
    grid = browser.open(base_url + "index.html",
                        "document.querySelectorAll('.benchmark-container canvas').length >= 3")
    grid.evaluate("document.querySelector('a.benchmark-container[href=\"#baselines.Baseline.track_latency\"]')"
                  ".click()")
    browser.pump(1.0)
    assert grid.evaluate("location.hash") == page.evaluate("location.hash")


def test_report_renders_from_file(browser: Browser, site: Path) -> None:
    url = (site / "report" / "index.html").as_uri()
    page = browser.open(url, REPORT_READY)
    load = page.load()
    assert load.failed == [] and load.console_errors == []
    assert [u for u in load.requests if not u.startswith(("file://", "data:"))] == []


def test_asv_pages_render_opened_as_a_file(browser: Browser, site: Path) -> None:
    """asv's grid, a graph and the regressions page from file://, no server: every request a local file, none
    failed (asv's own XMLHttpRequests are refused on file:// pages; the .json.js twins stand in for them)."""
    index = (site / "index.html").as_uri()
    pages = [(index, "document.querySelectorAll('.benchmark-container canvas').length >= 3"),
             (index + "#baselines.Baseline.track_latency",
              "document.querySelectorAll('#main-graph canvas').length > 0 && $('#main-graph').data('plot') !== "
              "undefined && $('#main-graph').data('plot').getData().length > 0"),
             (index + "#/regressions", "document.querySelector('#regressions-body') !== null"
                                       " && document.querySelector('#regressions-body').innerText.length > 0")]
    for url, ready in pages:
        page = browser.open(url, ready)
        load = page.load()
        assert load.failed == [] and load.console_errors == [], (url, load)
        assert [u for u in load.requests if not u.startswith(("file://", "data:"))] == []
        assert any(u.endswith(".json.js") for u in load.requests), url


def test_asv_list_and_regressions_pages_sort_offline(browser: Browser, base_url: str) -> None:
    """The benchmark list and regressions pages use the two vendored files that are not the CDN's bytes
    (stupid-table-plugin 1.1.3 for 1.0.1, flot's unminified sources): they load, and a click sorts the table."""
    page = browser.open(base_url + "index.html#/summarylist",
                        "document.querySelectorAll('#summarylist-body table tbody tr').length > 0")
    first = "document.querySelector('#summarylist-body table tbody tr').innerText"
    before = page.evaluate(first)
    page.evaluate("document.querySelector('#summarylist-body table thead th').click()")
    browser.pump(0.3)
    assert page.evaluate("typeof jQuery.fn.stupidtable") == "function"
    assert "sort=0" in page.evaluate("location.hash")  # asv's handler of stupidtable's aftertablesort event ran
    assert page.evaluate(first) != before  # the list was in name order: now the other way round
    _clean(page, base_url)
    regressions = browser.open(base_url + "index.html#/regressions",
                               "document.querySelector('#regressions-body') !== null"
                               " && document.querySelector('#regressions-body').innerText.length > 0")
    assert regressions.evaluate("typeof md5") == "function"
    _clean(regressions, base_url)
