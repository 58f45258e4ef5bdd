"""Headless Chromium for tests: load a page with no network, record every request, failed request and console
error, read the DOM, save a screenshot.

It speaks the Chrome DevTools Protocol over --remote-debugging-pipe (NUL-separated JSON on file descriptors
3 and 4), so it needs no websocket library.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# --host-resolver-rules makes every name but 127.0.0.1 unresolvable: a page that reaches for a CDN fails loudly
# here exactly as it would on a firewalled host, and the request is recorded.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--remote-debugging-pipe")


class BrowserError(RuntimeError):
    pass


@dataclass
class PageLoad:
    url: str
    requests: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # "URL: reason" for network errors and HTTP >= 400
    console_errors: list[str] = field(default_factory=list)  # console.error, uncaught exceptions, error log entries


class Browser:
    def __init__(self, user_data_dir: Path, width: int = 1400, height: int = 900) -> None:
        self.width, self.height = width, height
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # Chromium reads the protocol on fd 3 and writes on fd 4. posix_spawn puts the pipes there (no shell, and
        # safe beside the test's server thread, unlike preexec_fn); they are first moved above 9 so that placing
        # one cannot overwrite the other.
        child_r, child_w = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_chrome_r, from_chrome_w))
        for fd in (to_chrome_r, from_chrome_w):
            os.close(fd)
        Path(user_data_dir).mkdir(parents=True, exist_ok=True)
        self.log = Path(user_data_dir) / "chromium-stderr.log"
        argv = [CHROMIUM, *FLAGS, f"--user-data-dir={user_data_dir}", f"--window-size={width},{height}",
                "about:blank"]
        self._pid = os.posix_spawn(CHROMIUM, argv, dict(os.environ), file_actions=[
            (os.POSIX_SPAWN_DUP2, child_r, 3), (os.POSIX_SPAWN_DUP2, child_w, 4),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_OPEN, 2, str(self.log), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)])
        self._status: int | None = None
        os.close(child_r)
        os.close(child_w)
        self._buf = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def poll(self) -> int | None:
        """Chromium's exit status, or None while it runs."""
        if self._status is None:
            pid, status = os.waitpid(self._pid, os.WNOHANG)
            if pid:
                self._status = os.waitstatus_to_exitcode(status)
        return self._status

    def close(self) -> None:
        with contextlib.suppress(BrowserError, OSError):
            self.send("Browser.close", timeout=5)
        deadline = time.monotonic() + 10
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.poll() is None:
            os.kill(self._pid, signal.SIGKILL)
            self._status = os.waitstatus_to_exitcode(os.waitpid(self._pid, 0)[1])
        for fd in (self._to_chrome, self._from_chrome):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_chrome], [], [], left)[0]:
                raise BrowserError("timed out waiting for Chromium")
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                tail = self.log.read_text(errors="replace")[-2000:]
                raise BrowserError(f"Chromium exited (code {self.poll()}); its stderr ends:\n{tail}")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout: float = 30) -> dict[str, Any]:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def pump(self, seconds: float) -> None:
        """Collect events for a while (requests still in flight, late console messages)."""
        deadline = time.monotonic() + seconds
        try:
            while True:
                self.events.append(self._read(deadline))
        except BrowserError:
            if self.poll() is not None:
                raise

    def open(self, url: str, ready: str, timeout: float = 20) -> Page:
        """Load `url` in a new tab and wait until the JavaScript expression `ready` is true."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
                  session=session)
        self.events.clear()
        page = Page(self, session, url)
        self.send("Page.navigate", {"url": url}, session=session)
        deadline = time.monotonic() + timeout
        while not page.evaluate(ready):
            if time.monotonic() > deadline:
                raise BrowserError(f"{url}: not ready after {timeout} s ({ready}); "
                                   f"errors: {page.load().console_errors + page.load().failed}")
            self.pump(0.2)
        self.pump(0.5)
        return page


class Page:
    def __init__(self, browser: Browser, session: str, url: str) -> None:
        self.browser, self.session, self.url = browser, session, url

    def evaluate(self, expression: str) -> Any:
        r = self.browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                              session=self.session)
        if "exceptionDetails" in r:
            raise BrowserError(f"{expression}: {r['exceptionDetails'].get('text')}")
        return r["result"].get("value")

    def load(self) -> PageLoad:
        """What the page did so far, from the protocol's events."""
        out = PageLoad(self.url)
        urls: dict[str, str] = {}
        for e in self.browser.events:
            if e.get("sessionId") != self.session:
                continue
            p = e.get("params", {})
            method = e.get("method")
            if method == "Network.requestWillBeSent":
                urls[p["requestId"]] = p["request"]["url"]
                out.requests.append(p["request"]["url"])
            elif method == "Network.loadingFailed":
                out.failed.append(f"{urls.get(p['requestId'], '?')}: {p.get('errorText')} {p.get('blockedReason', '')}")
            elif method == "Network.responseReceived" and p["response"]["status"] >= 400:
                out.failed.append(f"{p['response']['url']}: HTTP {p['response']['status']}")
            elif method == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert"):
                out.console_errors.append(" ".join(str(a.get("value", a.get("description"))) for a in p["args"]))
            elif method == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                out.console_errors.append(d.get("exception", {}).get("description") or d.get("text", ""))
            elif method == "Log.entryAdded" and p["entry"]["level"] == "error":
                out.console_errors.append(f"{p['entry'].get('url', '')}: {p['entry']['text']}")
        return out

    def screenshot(self, path: Path, full_page: bool = True, max_height: int = 6000) -> Path:
        """A PNG of the page; the whole scrolling height (up to max_height px) when full_page."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.browser.send("Page.getLayoutMetrics", session=self.session)["cssContentSize"]
            height = min(int(size["height"]), max_height)
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": self.browser.width, "height": height, "scale": 1})
        data = self.browser.send("Page.captureScreenshot", params, session=self.session)["data"]
        path.write_bytes(base64.b64decode(data))
        return path
