"""GitHub REST client on `requests`: the issue-comment endpoints the PR comment needs and the issue endpoints the
tracking issue needs, with retries.

Transient failures (5xx, timeouts, connection errors) are retried with capped exponential backoff within a
deadline, so a server that never answers fails in under a minute. The deadline bounds each call whole, the body
included: a server that sends its headers and then drips its body fails at the deadline, not when a read stalls.
A listing follows at most `max_pages` pages. A write is never redirected (an answer of 3xx says where it would
have gone: a renamed repository, or a GITHUB_API_URL that is not the API root). Rate limits wait what GitHub's
REST guide asks: Retry-After or X-RateLimit-Reset when sent, else at least a minute, doubling while the limit
persists; a wait longer than `max_wait` fails at once, saying so. Writes are spaced by a second, as the guide asks
of mutating requests. Failures a retry cannot fix (401, 403 without rate limiting, 404, 410, 422, an answer of the
wrong shape) raise at once. Every failure is one `GitHubError` line saying what failed and what to do; the
token never appears in it.
"""

from __future__ import annotations

import email.utils
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any
from urllib.parse import urlsplit

import requests
import urllib3

from tracker.errors import ToolError, UsageError

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
SECONDARY_LIMIT_WAIT = 60.0  # GitHub: "wait at least one minute before retrying", then exponentially longer
WRITE_INTERVAL = 1.0  # GitHub: "wait at least one second between each" POST, PATCH, PUT or DELETE
MAX_PAGES = 100  # 10,000 comments or issues at 100 a page: far more than one PR or repository's open issues
MAX_BODY_BYTES = 64 * 2**20  # an answer larger than this is no answer of the endpoints we call
HINT_PR = "check --repo, --pr and the token's repository access"
HINT_REPO = "check --repo and the token's repository access"


def _user_agent() -> str:
    try:
        return f"compile-baselines/{metadata.version('compile-baselines')}"
    except metadata.PackageNotFoundError:
        return "compile-baselines"


class GitHubError(ToolError):
    """A GitHub API call failed; the message is one line saying what failed and what to do."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(" ".join(message.split()))  # one line, whatever GitHub's message held
        self.status = status


class TokenError(GitHubError, UsageError):
    """GITHUB_TOKEN holds what no token looks like: a mistake in the job's settings, before any call."""


@dataclass(frozen=True)
class Comment:
    id: int
    body: str
    html_url: str
    created_at: str
    trusted: bool = False  # by a bot or by someone with write access to the repository (`trusted_author`)


@dataclass(frozen=True)
class Issue:
    number: int
    title: str
    body: str
    html_url: str
    created_at: str
    state: str
    trusted: bool = False  # as Comment.trusted


class _Retry(Exception):
    """Internal: this attempt failed in a way worth retrying, after `wait` seconds (None: use backoff)."""

    def __init__(self, reason: str, wait: float | None = None, limited: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.wait = wait
        self.limited = limited


class GitHubClient:
    def __init__(
        self,
        api_url: str,
        token: str,
        session: requests.Session | None = None,
        timeout: float = 15.0,
        max_retries: int = 5,
        max_wait: float = 60.0,
        backoff: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        deadline: float = 45.0,
        write_interval: float = WRITE_INTERVAL,
        max_pages: int = MAX_PAGES,
    ) -> None:
        """`timeout`: seconds for one answer to start and between its reads; `deadline`: seconds one call may spend
        on attempts (each answer read whole) and backoff (rate-limit waits GitHub asks for are bounded by `max_wait`
        each, not by the deadline); `max_pages`: pages one listing may follow."""
        self.api_url = api_url.rstrip("/")
        self._token = token
        self.session = session or requests.Session()
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_wait = max_wait
        self.backoff = backoff
        self.sleep = sleep
        self.clock = clock
        self.deadline = deadline
        self.write_interval = write_interval
        self.max_pages = max_pages
        self._last_write: float | None = None  # time.monotonic() of the last mutating request

    def __repr__(self) -> str:  # never show the token
        return f"GitHubClient(api_url={self.api_url!r})"

    # -- endpoints -------------------------------------------------------------------------------------

    def list_issue_comments(self, owner: str, repo: str, number: int) -> list[Comment]:
        """All comments of an issue or PR, oldest first, following `Link: rel="next"` across pages."""
        what = f"{owner}/{repo}#{number}"
        url = f"{self.api_url}/repos/{owner}/{repo}/issues/{number}/comments?per_page=100"
        return [_comment(item, what) for item in self._pages(url, what, HINT_PR, "comments of ")]

    def create_issue_comment(self, owner: str, repo: str, number: int, body: str) -> Comment:
        url = f"{self.api_url}/repos/{owner}/{repo}/issues/{number}/comments"
        what = f"{owner}/{repo}#{number}"
        return _comment(_json(self._request("POST", url, what, {"body": body}, hint=HINT_PR), what), what)

    def update_issue_comment(self, owner: str, repo: str, comment_id: int, body: str) -> Comment:
        url = f"{self.api_url}/repos/{owner}/{repo}/issues/comments/{comment_id}"
        what = f"comment {comment_id} of {owner}/{repo}"
        return _comment(_json(self._request("PATCH", url, what, {"body": body}), what), what)

    def delete_issue_comment(self, owner: str, repo: str, comment_id: int) -> None:
        url = f"{self.api_url}/repos/{owner}/{repo}/issues/comments/{comment_id}"
        self._request("DELETE", url, f"comment {comment_id} of {owner}/{repo}")

    # -- issues (the nightly tracking issue) ---------------------------------------------------------------

    def list_issues(self, owner: str, repo: str, state: str = "open") -> list[Issue]:
        """The repository's issues in `state`, following pagination; pull requests (which GitHub lists among
        issues, marked by a "pull_request" key) are left out."""
        what = f"issues of {owner}/{repo}"
        url = f"{self.api_url}/repos/{owner}/{repo}/issues?state={state}&per_page=100"
        return [_issue(item, what) for item in self._pages(url, what, HINT_REPO)
                if not isinstance(item, dict) or "pull_request" not in item]

    def create_issue(self, owner: str, repo: str, title: str, body: str) -> Issue:
        url = f"{self.api_url}/repos/{owner}/{repo}/issues"
        what = f"issues of {owner}/{repo}"
        return _issue(_json(self._request("POST", url, what, {"title": title, "body": body}), what), what)

    def update_issue(self, owner: str, repo: str, number: int, **fields: str) -> Issue:
        """Edit an issue's `title`, `body` or `state` ("open", "closed")."""
        url = f"{self.api_url}/repos/{owner}/{repo}/issues/{number}"
        what = f"issue {owner}/{repo}#{number}"
        return _issue(_json(self._request("PATCH", url, what, dict(fields)), what), what)

    # -- transport -------------------------------------------------------------------------------------

    def _pages(self, url: str, what: str, hint: str, listing: str = "") -> list[Any]:
        """The items of a listing, following `Link: rel="next"` across pages."""
        items: list[Any] = []
        seen: set[str] = set()
        next_url: str | None = url
        while next_url:
            if next_url in seen:  # a server that links a page to itself would loop forever
                raise GitHubError(f"GitHub pagination loops at {_path(next_url)} while listing {listing}{what}")
            if len(seen) == self.max_pages:  # a `next` link that never ends
                raise GitHubError(f"GitHub still sent a next page after {self.max_pages} pages while listing "
                                  f"{listing}{what} ({len(items)} items so far); refusing to read more: is "
                                  "GITHUB_API_URL a GitHub REST API root?")
            seen.add(next_url)
            response = self._request("GET", next_url, what, hint=hint)
            items += _json_list(response, what)
            next_url = response.links.get("next", {}).get("url")
        return items

    def _request(self, method: str, url: str, what: str, payload: dict[str, Any] | None = None,
                 hint: str = HINT_REPO) -> requests.Response:
        # The token goes only to the configured API host, even if a Link header points elsewhere.
        if urlsplit(url)[:2] != urlsplit(self.api_url)[:2]:
            raise GitHubError(f"GitHub sent a link to another host ({urlsplit(url).netloc}); refusing to follow it")
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "Authorization": f"Bearer {self._token}",
            "User-Agent": _user_agent(),
        }
        call = f"{method} {_path(url)}"
        attempts = self.max_retries + 1
        spent = 0.0  # seconds of attempts and backoff so far, against the deadline
        limited = 0  # rate-limit answers without a wait named: each doubles the next wait
        for attempt in range(attempts):
            started = time.monotonic()
            try:
                if method != "GET":
                    self._space_writes()
                response = self._answer(method, url, headers, payload, call, self.deadline - spent)
                self._check(response, call, what, hint, limited)
                return response
            except _Retry as retry:
                spent += time.monotonic() - started
                if retry.limited:
                    limited += 1
                backoff = retry.wait is None
                wait = min(self.backoff * 2**attempt, self.max_wait) if backoff else retry.wait
                if attempt == attempts - 1 or (backoff and spent + wait > self.deadline):
                    raise self._error(
                        f"GitHub {call} still failing after {attempt + 1} attempts ({retry.reason}); "
                        "GitHub or the network may be down: retry the job later"
                    ) from None
                if backoff:
                    spent += wait
                self.sleep(wait)
        raise AssertionError("unreachable")

    def _answer(self, method: str, url: str, headers: dict[str, str], payload: dict[str, Any] | None, call: str,
                budget: float) -> requests.Response:
        """One attempt: the answer, its body read whole within `budget` seconds (GitHubError past it: the call's
        deadline is spent), or _Retry for what a retry may fix. Only GETs follow redirects."""
        stop = time.monotonic() + max(budget, 0.001)
        wait = max(min(self.timeout, budget), 0.001)
        try:
            response = self.session.request(method, url, headers=headers, json=payload, stream=True,
                                            timeout=(min(5.0, wait), wait), allow_redirects=method == "GET")
            _read_body(response, stop)
        except _Late:
            raise self._error(f"GitHub {call} sent no complete answer within the {self.deadline:g} s deadline (a "
                              "stalled or very slow server); GitHub or the network may be down: retry the job later"
                              ) from None
        except _TooLarge:
            raise self._error(f"GitHub {call} answered with more than {MAX_BODY_BYTES // 2**20} MiB; is "
                              "GITHUB_API_URL a GitHub REST API root?") from None
        except requests.Timeout:
            raise _Retry(f"no response within {wait:g} s") from None
        except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError,
                requests.exceptions.ContentDecodingError) as exc:
            raise _Retry(f"connection failed ({type(exc).__name__})") from None
        except requests.RequestException as exc:  # a malformed URL: retrying cannot help
            raise self._error(
                f"cannot call GitHub at {self.api_url} ({type(exc).__name__}): check GITHUB_API_URL") from None
        except (OSError, ValueError) as exc:  # a socket error or a bad header while reading the body
            raise _Retry(f"connection failed ({type(exc).__name__})") from None
        return response

    def _space_writes(self) -> None:
        now = time.monotonic()
        if self._last_write is not None and now - self._last_write < self.write_interval:
            self.sleep(self.write_interval - (now - self._last_write))
        self._last_write = time.monotonic()

    def _check(self, response: requests.Response, call: str, what: str, hint: str = HINT_REPO,
               limited_before: int = 0) -> None:
        """Return if the response succeeded, raise _Retry if worth retrying, GitHubError otherwise."""
        status = response.status_code
        if 300 <= status < 400:
            where = response.headers.get("Location")
            raise self._error(
                f"GitHub answered {call} with {status} {response.reason} ({'to ' + where if where else 'no Location'})"
                ": a write is not redirected; the repository may have been renamed or moved (use its new OWNER/NAME), "
                "or GITHUB_API_URL is not the API root", status)
        if status < 400:
            return
        message = _github_message(response)
        limited = response.headers.get("X-RateLimit-Remaining") == "0"
        rate_limited = limited or "Retry-After" in response.headers or "rate limit" in message.lower()
        if status == 429 or (status == 403 and rate_limited):
            wait = self._rate_limit_wait(response, call, limited, limited_before)
            raise _Retry(f"{status} rate limited", wait, limited=True)
        if status >= 500:
            raise _Retry(f"{status} {response.reason}")
        if status == 401:
            raise self._error(
                f"GitHub rejected the token on {call} (401 {message}): set GITHUB_TOKEN to a valid, unexpired token",
                status,
            )
        if status == 403:
            raise self._error(
                f"GitHub refused {call} (403 {message}): the token needs 'pull-requests: write' and 'issues: write' "
                "permission on the repository (in Actions: the workflow's `permissions:`; fork PRs get a read-only "
                "token)",
                status,
            )
        if status == 404:
            raise self._error(
                f"GitHub found no {what} ({call}: 404): it does not exist, or the token cannot see it; {hint}",
                status,
            )
        if status == 410:
            raise self._error(
                f"GitHub says {what} is gone ({call}: 410 {message}): issues are disabled on the repository or the "
                "issue was deleted; enable issues in the repository's settings",
                status,
            )
        if status == 422:
            raise self._error(f"GitHub rejected {call} as invalid (422 {message}): fix the request body", status)
        raise self._error(f"GitHub {call} failed ({status} {message})", status)

    def _rate_limit_wait(self, response: requests.Response, call: str, limited: bool, limited_before: int) -> float:
        """Seconds GitHub asks us to wait. Waiting less than asked only extends the block, so a demand above
        max_wait fails now, saying when to come back."""
        headers = response.headers
        wait = _retry_after_seconds(headers["Retry-After"], self.clock()) if "Retry-After" in headers else None
        if wait is None and limited and (reset := _finite(headers.get("X-RateLimit-Reset"))) is not None:
            wait = max(reset - self.clock(), 0.0) + 1.0  # +1: the reset second itself
        if wait is None:  # none said, or said unreadably ("nan", "soon"): GitHub's own advice
            wait = SECONDARY_LIMIT_WAIT * 2**limited_before
        if wait > self.max_wait:
            raise self._error(
                f"GitHub rate limit on {call}: GitHub asks to wait {wait:.0f} s (more than the {self.max_wait:g} s "
                "allowed): retry the job later or use a token with more quota",
                response.status_code,
            )
        return wait

    def _error(self, message: str, status: int | None = None) -> GitHubError:
        if self._token:
            message = message.replace(self._token, "***")  # belt and braces: GitHub could echo input back
        return GitHubError(message, status)


# GitHub's rules: an owner of up to 39 letters, digits and single hyphens, not at either end; a repository of up to 100
# letters, digits, '.', '-' and '_', never '.' or '..' (names of dots alone name a directory, not a repository).
_REPO = re.compile(r"([A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?)/([A-Za-z0-9._-]{1,100})")
_TOKEN = re.compile(r"[\x21-\x7e]+")  # printable ASCII without spaces: what every kind of GitHub token is made of


def parse_repo(repo: str) -> tuple[str, str] | None:
    """(owner, name) of an OWNER/NAME string as GitHub allows them, or None."""
    match = _REPO.fullmatch(repo)
    if match is None or not match[2].strip("."):
        return None
    return match[1], match[2]


def repository(repo: str) -> tuple[str, str]:
    """(owner, name) of `repo`; UsageError unless it is OWNER/NAME as GitHub allows them."""
    parsed = parse_repo(repo)
    if parsed is None:
        raise UsageError(f"must be OWNER/NAME, got {repo!r}", parameter="repo")
    return parsed


def check_pr(pr: int) -> int:
    """`pr` if it can be a pull request's number; UsageError otherwise."""
    if pr <= 0:
        raise UsageError(f"must be a positive PR number, got {pr}", parameter="pr")
    return pr


def from_env(env: Mapping[str, str], **options: Any) -> GitHubClient | None:
    """A client from GITHUB_TOKEN and GITHUB_API_URL (what Actions sets), or None when there is no token.
    TokenError for a token no GitHub token looks like (a line break inside, a space, a non-ASCII character): sent
    as a header it would fail as an unrelated error, or not at all."""
    token = env.get("GITHUB_TOKEN", "").strip()
    if not token:
        return None
    if not _TOKEN.fullmatch(token):
        raise TokenError("GITHUB_TOKEN holds a line break, a space or a character no GitHub token has (tokens are "
                         "printable ASCII): set it to the token alone")
    return GitHubClient(env.get("GITHUB_API_URL") or DEFAULT_API_URL, token, **options)


def _path(url: str) -> str:
    return urlsplit(url).path


class _Late(Exception):
    """Internal: the call's deadline passed while its answer was being read."""


class _TooLarge(Exception):
    """Internal: the answer passed MAX_BODY_BYTES."""


def _read_body(response: requests.Response, stop: float) -> None:
    """Read a streamed answer's body into it (`response.content`), at most one receive at a time and each limited
    to the time left before `stop` (time.monotonic()), so a server that drips its body cannot hold the call past
    it. _Late when it does, _TooLarge past MAX_BODY_BYTES."""
    raw, chunks, size = response.raw, [], 0
    while True:
        left = stop - time.monotonic()
        if left <= 0:
            response.close()
            raise _Late
        sock = getattr(getattr(raw, "connection", None), "sock", None)
        if sock is not None:
            sock.settimeout(left)
        try:  # urllib3 1.x has no read1: a read of a few KiB, each receive still limited by the read timeout
            chunk = raw.read1(65536, decode_content=True) if hasattr(raw, "read1") else raw.read(
                4096, decode_content=True)
        except (TimeoutError, urllib3.exceptions.ReadTimeoutError):
            response.close()
            raise (_Late if stop - time.monotonic() <= 0 else requests.Timeout) from None
        except urllib3.exceptions.HTTPError as e:  # a connection reset, a broken chunk, a bad gzip stream
            response.close()
            raise requests.ConnectionError(str(e)) from None
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            response.close()
            raise _TooLarge
    response._content = b"".join(chunks)  # what requests' own reading would have set
    response._content_consumed = True


def _json(response: requests.Response, what: str) -> Any:
    try:
        return response.json()
    except (ValueError, RecursionError):  # RecursionError: JSON nested deeper than the parser recurses
        raise GitHubError(
            f"GitHub answered {response.request.method} {_path(response.url)} for {what} with non-JSON "
            f"({response.status_code}); is GITHUB_API_URL the API root (e.g. https://HOST/api/v3)?"
        ) from None


def _json_list(response: requests.Response, what: str) -> list[Any]:
    data = _json(response, what)
    if not isinstance(data, list):
        raise _shape_error(what, f"a list, got {type(data).__name__}")
    return data


def _shape_error(what: str, detail: str) -> GitHubError:
    return GitHubError(f"GitHub answered for {what} with an unexpected shape ({detail}); is GITHUB_API_URL a "
                       "GitHub REST API root?")


# Who may have written a post of ours: its author has write access to the repository, or is an app's bot (which
# posts only where the repository's admins installed it: the Actions token's github-actions[bot], say).
_TRUSTED_ASSOCIATIONS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})


def trusted_author(item: Any) -> bool:
    """Whether a comment or issue of GitHub's API is by someone the tool's own posts can be: anyone can comment on
    a public repository's PRs and open issues, hidden markers included."""
    user = item.get("user") if isinstance(item.get("user"), dict) else {}
    return item.get("author_association") in _TRUSTED_ASSOCIATIONS or user.get("type") == "Bot"


def _comment(item: Any, what: str) -> Comment:
    try:
        return Comment(int(item["id"]), str(item.get("body") or ""), str(item.get("html_url") or ""),
                       str(item.get("created_at") or ""), trusted_author(item))
    except (TypeError, KeyError, ValueError, AttributeError):
        raise _shape_error(what, "a comment without an integer id") from None


def _issue(item: Any, what: str) -> Issue:
    try:
        return Issue(int(item["number"]), str(item.get("title") or ""), str(item.get("body") or ""),
                     str(item.get("html_url") or ""), str(item.get("created_at") or ""), str(item.get("state") or ""),
                     trusted_author(item))
    except (TypeError, KeyError, ValueError, AttributeError):
        raise _shape_error(what, "an issue without an integer number") from None


def _github_message(response: requests.Response) -> str:
    """GitHub's own error text: `message` plus any validation `errors`."""
    try:
        data = response.json()
    except (ValueError, RecursionError):
        return response.reason or ""
    if not isinstance(data, dict):
        return response.reason or ""
    parts = [str(data.get("message") or response.reason or "")]
    for error in data.get("errors") or []:
        parts.append(str(error.get("message") or error) if isinstance(error, dict) else str(error))
    return "; ".join(p for p in parts if p)


def _finite(value: str | None) -> float | None:
    """A header's number, or None when it is absent or not a finite number ("nan", "inf", "soon")."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _retry_after_seconds(value: str, now: float) -> float | None:
    """Retry-After is either delta-seconds or an HTTP date; None when it is neither, or not finite."""
    seconds = _finite(value)
    if seconds is not None:
        return max(seconds, 0.0)
    try:
        return max(email.utils.parsedate_to_datetime(value).timestamp() - now, 0.0)
    except (TypeError, ValueError, OverflowError, IndexError):
        return None
