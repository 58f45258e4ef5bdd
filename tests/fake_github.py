"""A local HTTP server that behaves like the parts of GitHub's REST API the PR comment and the tracking issue use.

In-memory comments per (owner, repo, issue) and issues per repository, real pagination (per_page, page, Link with
rel="next"/"last"), token check (401), 404 for unknown repos, issues and comments, 422 for empty or too long bodies,
and a queue of injected faults answered before normal handling (late, dropped, or with the body dripped a byte at a
time). `endless` makes every listing link a next page, forever. Every request is recorded for assertions.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

MAX_BODY = 65536
_ISSUE_COMMENTS = re.compile(r"^/repos/([^/]+)/([^/]+)/issues/(\d+)/comments$")
_COMMENT = re.compile(r"^/repos/([^/]+)/([^/]+)/issues/comments/(\d+)$")
_ISSUES = re.compile(r"^/repos/([^/]+)/([^/]+)/issues$")
_ISSUE = re.compile(r"^/repos/([^/]+)/([^/]+)/issues/(\d+)$")
# Who wrote a post, as GitHub says it: the Actions token's bot (what the tool posts as), or anyone at all
BOT = {"user": {"login": "github-actions[bot]", "type": "Bot"}, "author_association": "NONE"}
OUTSIDER = {"user": {"login": "mallory", "type": "User"}, "author_association": "NONE"}


@dataclass
class Fault:
    """One injected answer. status None: handle the request normally (it takes effect), then answer late."""

    status: int | None = None
    body: Any = None  # JSON; ignored if raw is set
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering: more than the client timeout makes a timeout
    drop: bool = False  # close the connection without answering
    raw: bytes | None = None
    method: str | None = None  # only for the next request with this method
    drip: float = 0.0  # seconds between the bytes of the body, sent after the headers


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str  # with the query
    headers: dict[str, str]
    body: Any


@dataclass
class _Response:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None


class FakeGitHub:
    def __init__(self, token: str = "fake-token-0123456789", repos: Iterable[tuple[str, str, int]] = ()) -> None:
        self.token = token
        self.issues: set[tuple[str, str, int]] = set(repos) or {("octo", "widgets", 7)}
        self.faults: list[Fault] = []
        self.endless = False  # every listing links a next page
        self.requests: list[Recorded] = []
        self._comments: dict[int, dict[str, Any]] = {}  # id -> comment, with its issue key under "_issue"
        self._next_id = 1000
        self._issues: dict[tuple[str, str, int], dict[str, Any]] = {}  # issues and PRs made by add_issue/POST
        self._next_number = 100
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.fake = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True)  # quick shutdown

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeGitHub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- test helpers ------------------------------------------------------------------------------------

    def inject(self, *faults: Fault) -> None:
        with self._lock:
            self.faults.extend(faults)

    def add_comment(self, owner: str, repo: str, issue: int, body: str, by: dict[str, Any] = BOT) -> dict[str, Any]:
        """A comment, by the Actions bot unless `by` (OUTSIDER: anyone, on a public repository)."""
        with self._lock:
            return self._add(owner, repo, issue, body, by)

    def add_issue(self, owner: str, repo: str, title: str, body: str, state: str = "open",
                  pull_request: bool = False, by: dict[str, Any] = BOT) -> dict[str, Any]:
        """An issue (or, with pull_request, a PR: GitHub lists both under /issues) of a known repository."""
        with self._lock:
            return self._add_issue(owner, repo, title, body, state, pull_request, by)

    def issue_list(self, owner: str = "octo", repo: str = "widgets") -> list[dict[str, Any]]:
        with self._lock:
            return [_public(i) for k, i in sorted(self._issues.items()) if k[:2] == (owner, repo)]

    def comments(self, owner: str = "octo", repo: str = "widgets", issue: int = 7) -> list[dict[str, Any]]:
        with self._lock:
            return [_public(c) for c in self._comments.values() if c["_issue"] == (owner, repo, issue)]

    def calls(self, method: str | None = None) -> list[Recorded]:
        return [r for r in self.requests if method is None or r.method == method]

    # -- request handling ----------------------------------------------------------------------------------

    def handle(self, method: str, target: str, headers: dict[str, str], body: Any) -> tuple[_Response, Fault | None]:
        with self._lock:
            self.requests.append(Recorded(method, target, headers, body))
            fault = next((f for f in self.faults if f.method in (None, method)), None)
            if fault:
                self.faults.remove(fault)
            if fault and fault.status is not None:
                return _Response(fault.status, fault.body, fault.headers, fault.raw), fault
            response = self._route(method, target, headers, body)
            if fault:
                response.headers.update(fault.headers)
            return response, fault

    def _route(self, method: str, target: str, headers: dict[str, str], body: Any) -> _Response:
        if headers.get("authorization") not in (f"Bearer {self.token}", f"token {self.token}"):
            return _Response(401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"})
        url = urlsplit(target)
        if m := _ISSUE_COMMENTS.match(url.path):
            owner, repo, issue = m.group(1), m.group(2), int(m.group(3))
            if (owner, repo, issue) not in self.issues:
                return _not_found()
            if method == "GET":
                return self._list(owner, repo, issue, url.path, parse_qs(url.query))
            if method == "POST":
                return _invalid(body) or _Response(201, _public(self._add(owner, repo, issue, body["body"])))
        elif m := _COMMENT.match(url.path):
            comment = self._comments.get(int(m.group(3)))
            if comment is None or comment["_issue"][:2] != (m.group(1), m.group(2)):
                return _not_found()
            if method == "PATCH":
                if error := _invalid(body):
                    return error
                comment["body"] = body["body"]
                return _Response(200, _public(comment))
            if method == "DELETE":
                del self._comments[comment["id"]]
                return _Response(204)
        elif m := _ISSUES.match(url.path):
            owner, repo = m.group(1), m.group(2)
            if (owner, repo) not in {k[:2] for k in self.issues}:
                return _not_found()
            if method == "GET":
                state = parse_qs(url.query).get("state", ["open"])[0]
                items = [_public(i) for k, i in sorted(self._issues.items())
                         if k[:2] == (owner, repo) and state in ("all", i["state"])]
                return self._page(items, url.path, parse_qs(url.query))
            if method == "POST":
                if not isinstance(body, dict) or not body.get("title"):
                    errors = [{"resource": "Issue", "code": "missing_field", "field": "title"}]
                    return _Response(422, {"message": "Validation Failed", "errors": errors})
                if len(body.get("body") or "") > MAX_BODY:
                    return _invalid({"body": body["body"]})
                return _Response(201, _public(self._add_issue(owner, repo, body["title"], body.get("body") or "")))
        elif m := _ISSUE.match(url.path):
            issue = self._issues.get((m.group(1), m.group(2), int(m.group(3))))
            if issue is None:
                return _not_found()
            if method == "PATCH" and isinstance(body, dict):
                if "body" in body and (error := _invalid(body)):
                    return error
                issue.update({k: body[k] for k in ("title", "body", "state") if k in body})
                return _Response(200, _public(issue))
        return _not_found()

    def _add_issue(self, owner: str, repo: str, title: str, body: str, state: str = "open",
                   pull_request: bool = False, by: dict[str, Any] = BOT) -> dict[str, Any]:
        self._next_number += 1
        number = self._next_number
        issue = {
            "number": number, "title": title, "body": body, "state": state, **by,
            "html_url": f"https://github.com/{owner}/{repo}/{'pull' if pull_request else 'issues'}/{number}",
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1_700_000_000 + number)),
        }
        if pull_request:
            issue["pull_request"] = {"url": f"{self.url}/repos/{owner}/{repo}/pulls/{number}"}
        self._issues[(owner, repo, number)] = issue
        return issue

    def _page(self, items: list[dict[str, Any]], path: str, query: dict[str, list[str]]) -> _Response:
        per_page = max(1, min(100, int(query.get("per_page", ["30"])[0])))
        page = max(1, int(query.get("page", ["1"])[0]))
        last = max(1, math.ceil(len(items) / per_page))
        links = {"first": 1, "prev": page - 1} if page > 1 else {}
        if page < last or self.endless:
            links |= {"next": page + 1, "last": max(last, page + 1)}
        extra = "".join(f"&{k}={v[0]}" for k, v in sorted(query.items()) if k not in ("per_page", "page"))
        link = ", ".join(f'<{self.url}{path}?per_page={per_page}&page={n}{extra}>; rel="{rel}"'
                         for rel, n in links.items())
        return _Response(200, items[(page - 1) * per_page : page * per_page], {"Link": link} if link else {})

    def _list(self, owner: str, repo: str, issue: int, path: str, query: dict[str, list[str]]) -> _Response:
        per_page = max(1, min(100, int(query.get("per_page", ["30"])[0])))
        page = max(1, int(query.get("page", ["1"])[0]))
        items = [_public(c) for c in self._comments.values() if c["_issue"] == (owner, repo, issue)]
        last = max(1, math.ceil(len(items) / per_page))
        links = {"first": 1, "prev": page - 1} if page > 1 else {}
        if page < last or self.endless:
            links |= {"next": page + 1, "last": max(last, page + 1)}
        link = ", ".join(f'<{self.url}{path}?per_page={per_page}&page={n}>; rel="{rel}"' for rel, n in links.items())
        return _Response(200, items[(page - 1) * per_page : page * per_page], {"Link": link} if link else {})

    def _add(self, owner: str, repo: str, issue: int, body: str, by: dict[str, Any] = BOT) -> dict[str, Any]:
        self._next_id += 1
        cid = self._next_id
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1_700_000_000 + cid))  # ordered like ids
        comment = {
            "id": cid,
            "body": body,
            "html_url": f"https://github.com/{owner}/{repo}/pull/{issue}#issuecomment-{cid}",
            "created_at": created,
            **by,
            "_issue": (owner, repo, issue),
        }
        self._comments[cid] = comment
        return comment


def _public(comment: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in comment.items() if not k.startswith("_")}


def _not_found() -> _Response:
    return _Response(404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})


def _invalid(body: Any) -> _Response | None:
    text = body.get("body") if isinstance(body, dict) else None
    if not text:
        errors = [{"resource": "IssueComment", "code": "missing_field", "field": "body"}]
        return _Response(422, {"message": "Validation Failed", "errors": errors})
    if len(text) > MAX_BODY:
        errors = [{"message": f"Body is too long (maximum is {MAX_BODY} characters)"}]
        return _Response(422, {"message": "Validation Failed", "errors": errors})
    return None


class _Handler(BaseHTTPRequestHandler):
    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        headers = {k.lower(): v for k, v in self.headers.items()}
        response, fault = self.server.fake.handle(self.command, self.path, headers, body)  # type: ignore[attr-defined]
        if fault and fault.delay:
            time.sleep(fault.delay)
        if fault and fault.drop:
            return
        payload = response.raw if response.raw is not None else b""
        if response.raw is None and response.body is not None:
            payload = json.dumps(response.body).encode()
        try:
            self.send_response(response.status)
            for key, value in response.headers.items():
                self.send_header(key, value)
            if response.raw is None:
                self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if fault and fault.drip:
                for k in range(len(payload)):
                    self.wfile.write(payload[k : k + 1])
                    self.wfile.flush()
                    time.sleep(fault.drip)
            else:
                self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)

    do_GET = do_POST = do_PATCH = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean
