"""asv's published pages, readable when opened as a file (file://), with no server.

asv's pages fetch their data (info.json, index.json, regressions.json, graphs/...) with jQuery's XMLHttpRequest, which
browsers refuse for file:// pages ("Cross origin requests are only supported for protocol schemes: http, https ...").
A page may still load scripts from beside it. So each JSON file of the site gets a twin, `X.json.js`, that hands its
data to the page, and a loader placed right after jQuery serves asv's JSON requests from the twins, on file:// pages
only (over http nothing changes).
"""

from __future__ import annotations

import re
from pathlib import Path

from tracker.errors import ToolError

LOADER_ID = "cb-file-loader"
TWIN_SUFFIX = ".js"
# Folders of the site that asv's pages never fetch JSON from: our report, the vendored libraries.
_SKIP = ("report", "vendor")
_JQUERY_TAG = re.compile(r'<script src="vendor/jquery-[^"]*/jquery\.min\.js"[^>]*></script>')
_LOADER = """<script id="%s">
/* compile-baselines: asv's JSON requests from the .json.js twins beside the files, when opened as a file */
(function ($) {
  if (window.location.protocol !== "file:" || !$) return;
  window.__cbFileData = function (script, data) { if (script && script.__cbDone) script.__cbDone(data); };
  function load(url, done) {
    var script = document.createElement("script");
    script.__cbDone = function (data) { done(200, "success", {json: data}); };
    script.onerror = function () { done(404, "not found"); };
    script.onload = function () { script.remove(); };
    script.src = url.split("?")[0] + "%s";
    document.head.appendChild(script);
    return script;
  }
  $.ajaxTransport("json", function (options) {
    var script;
    return {send: function (headers, done) { script = load(options.url, done); },
            abort: function () { if (script) { script.__cbDone = null; script.remove(); } }};
  });
  /* asv checks that its server is alive by fetching swallow.ico when no graph loads: a file is always there */
  $.ajaxTransport("text", function (options) {
    if (!/^swallow\\.ico(\\?|$)/.test(options.url)) return;
    return {send: function (headers, done) { done(200, "success", {text: ""}); }, abort: function () {}};
  });
})(window.jQuery);
</script>"""


class FileSiteError(ToolError):
    pass


def write_twins(site: Path) -> list[Path]:
    """A `.json.js` twin beside every JSON file asv's pages fetch: the same data, handed to the loader."""
    twins = []
    for path in sorted(site.rglob("*.json")):
        if path.relative_to(site).parts[0] in _SKIP:
            continue
        twin = path.with_name(path.name + TWIN_SUFFIX)
        twin.write_text("window.__cbFileData(document.currentScript, " + path.read_text(encoding="utf-8").strip()
                        + ");\n", encoding="utf-8")
        twins.append(twin)
    return twins


def add_loader(site: Path) -> None:
    """Place the loader in asv's index.html right after jQuery (once; a second publish replaces it)."""
    index = site / "index.html"
    html = re.sub(rf'\n?<script id="{LOADER_ID}">.*?</script>', "", index.read_text(encoding="utf-8"), flags=re.S)
    tag = _JQUERY_TAG.search(html)
    if tag is None:
        raise FileSiteError(f"{index}: no local jQuery <script> tag (make_offline first); cannot make it readable "
                            "from a file")
    loader = _LOADER % (LOADER_ID, TWIN_SUFFIX)
    index.write_text(html[:tag.end()] + "\n" + loader + html[tag.end():], encoding="utf-8")


def make_file_readable(site: Path) -> list[Path]:
    """asv's pages in `site` readable from file://: the twins and the loader. Returns the twins written."""
    twins = write_twins(site)
    add_loader(site)
    return twins


__all__ = ["LOADER_ID", "make_file_readable"]
