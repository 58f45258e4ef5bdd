"""The GitHub client and the one-PR-comment logic, against a local fake of GitHub's REST API."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from fake_github import OUTSIDER, FakeGitHub, Fault

from tracker import cli
from tracker.github.client import DEFAULT_API_URL, GitHubClient, GitHubError, from_env
from tracker.github.comment import (
    MARKER,
    MAX_BODY_CHARS,
    BodyTooLargeError,
    changed_in_body,
    ensure_marker,
    upsert_comment,
)

OWNER, REPO, PR = "octo", "widgets", 7
NOW = 1_800_000_000.0  # the injected clock


@pytest.fixture
def client(fake: FakeGitHub, waits: list[float]) -> GitHubClient:
    return GitHubClient(fake.url, fake.token, timeout=2.0, sleep=waits.append, clock=lambda: NOW)


def upsert(client: GitHubClient | None, body: str, only_on_change: bool = False, changed: bool = True):
    return upsert_comment(client, OWNER, REPO, PR, body, only_on_change, changed)


def env_for(fake: FakeGitHub, token: str | None = None) -> dict[str, str]:
    return {"GITHUB_TOKEN": token or fake.token, "GITHUB_API_URL": fake.url}


def comment_command(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], body: Path, *options: str) -> int:
    """`compile-baselines comment` on the PR, with `env` as the environment's GitHub variables."""
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return cli.main(["comment", "--repo", f"{OWNER}/{REPO}", "--pr", str(PR), "--body-file", str(body), *options])


# -- posting and editing in place ---------------------------------------------------------------------------


def test_first_post_creates_one_comment_carrying_the_hidden_marker(fake, client):
    outcome = upsert(client, "best modes: unchanged")
    [comment] = fake.comments()
    assert outcome.action == "created"
    assert (outcome.comment_id, outcome.url) == (comment["id"], comment["html_url"])
    assert comment["body"] == f"{MARKER}\nbest modes: unchanged"


def test_second_post_edits_the_first_comment_in_place(fake, client):
    first = upsert(client, "run 1")
    second = upsert(client, "run 2")
    [comment] = fake.comments()
    assert second.action == "updated"
    assert second.comment_id == first.comment_id == comment["id"]
    assert comment["body"].endswith("run 2")
    assert len(fake.calls("POST")) == 1 and len(fake.calls("PATCH")) == 1


def test_comments_of_others_are_left_alone(fake, client):
    fake.add_comment(OWNER, REPO, PR, "LGTM")
    upsert(client, "run 1")
    upsert(client, "run 2")
    assert [c["body"] for c in fake.comments()] == ["LGTM", f"{MARKER}\nrun 2"]


@pytest.mark.parametrize("association", ["NONE", "CONTRIBUTOR", "FIRST_TIME_CONTRIBUTOR", "FIRST_TIMER"])
def test_a_marker_in_an_outsiders_comment_is_not_ours(fake, client, association):
    """Anyone can comment on a public repository's PR, the hidden marker included: that comment is neither edited
    (the report would show as theirs, and they could edit it back) nor removed, and ours stays the one."""
    forged = {**OUTSIDER, "author_association": association}
    theirs = fake.add_comment(OWNER, REPO, PR, f"{MARKER}\nall good, merge it", by=forged)
    first = upsert(client, "run 1")
    later = fake.add_comment(OWNER, REPO, PR, f"{MARKER}\nmine now", by=forged)
    second = upsert(client, "run 2")
    assert first.action == "created" and (second.action, second.comment_id) == ("updated", first.comment_id)
    bodies = {c["id"]: c["body"] for c in fake.comments()}
    assert bodies == {theirs["id"]: f"{MARKER}\nall good, merge it", later["id"]: f"{MARKER}\nmine now",
                      first.comment_id: f"{MARKER}\nrun 2"}


def test_a_collaborators_marked_comment_is_taken_as_an_earlier_run_of_theirs(fake, client):
    ours = fake.add_comment(OWNER, REPO, PR, f"{MARKER}\nposted with a maintainer's token",
                            by={**OUTSIDER, "author_association": "COLLABORATOR"})
    assert (upsert(client, "new").action, upsert(client, "newer").comment_id) == ("updated", ours["id"])


def test_marker_is_found_on_a_later_page_after_250_other_comments(fake, client):
    for i in range(250):
        fake.add_comment(OWNER, REPO, PR, f"comment {i}")
    ours = fake.add_comment(OWNER, REPO, PR, f"{MARKER}\nold numbers")
    outcome = upsert(client, "new numbers")
    assert (outcome.action, outcome.comment_id) == ("updated", ours["id"])
    gets = [r.path for r in fake.calls("GET")]
    assert gets[0].endswith("/issues/7/comments?per_page=100")
    assert [p.rsplit("page=", 1)[1] for p in gets[1:]] == ["2", "3"]
    assert len(fake.comments()) == 251


def test_several_marked_comments_update_the_oldest_and_say_so(fake, client):
    oldest = fake.add_comment(OWNER, REPO, PR, f"{MARKER}\na")
    fake.add_comment(OWNER, REPO, PR, f"{MARKER}\nb")
    outcome = upsert(client, "c")
    assert (outcome.action, outcome.comment_id) == ("updated", oldest["id"])
    assert "2 comments carry the marker" in outcome.note
    assert fake.comments()[0]["body"].endswith("c")


def test_several_marked_comments_leave_one_the_others_deleted(fake, client):
    oldest = fake.add_comment(OWNER, REPO, PR, f"{MARKER}\na")
    newer = fake.add_comment(OWNER, REPO, PR, f"{MARKER}\nb")
    outcome = upsert(client, "c")
    assert [c["id"] for c in fake.comments()] == [oldest["id"]]
    assert outcome.note == f"2 comments carry the marker; updated the oldest, removed duplicate(s) {newer['id']}"


def test_requests_carry_the_github_headers_and_a_bearer_token(fake, client):
    upsert(client, "x")
    for request in fake.requests:
        assert request.headers["accept"] == "application/vnd.github+json"
        assert request.headers["x-github-api-version"] == "2022-11-28"
        assert request.headers["authorization"] == f"Bearer {fake.token}"


def test_ensure_marker_adds_it_once():
    assert ensure_marker("x") == f"{MARKER}\nx"
    assert ensure_marker(ensure_marker("x")) == f"{MARKER}\nx"


# -- only on change -------------------------------------------------------------------------------------------


def test_only_on_change_without_a_change_creates_nothing(fake, client):
    outcome = upsert(client, "no change", only_on_change=True, changed=False)
    assert outcome.action == "skipped"
    assert fake.comments() == [] and fake.calls("POST") == []


def test_only_on_change_without_a_change_still_updates_an_existing_comment(fake, client):
    upsert(client, "changed", only_on_change=True, changed=True)
    outcome = upsert(client, "no change since", only_on_change=True, changed=False)
    assert outcome.action == "updated"
    assert fake.comments()[0]["body"].endswith("no change since")


def test_only_on_change_with_a_change_creates(fake, client):
    assert upsert(client, "changed", only_on_change=True, changed=True).action == "created"


def test_the_renderers_changed_marker_decides_and_its_absence_means_changed():
    assert changed_in_body("x <!-- compile-baselines:changed=false -->") is False
    assert changed_in_body("x <!-- compile-baselines:changed=true -->") is True
    assert changed_in_body("hand-written body") is True


def test_comment_command_reads_changed_from_the_body(fake, tmp_path, capsys, monkeypatch):
    body = tmp_path / "comment.md"
    body.write_text("same as base\n<!-- compile-baselines:changed=false -->\n")
    assert comment_command(monkeypatch, env_for(fake), body, "--only-on-change") == 0
    assert fake.comments() == []
    assert "skipped" in capsys.readouterr().out
    body.write_text("best mode changed\n<!-- compile-baselines:changed=true -->\n")
    assert comment_command(monkeypatch, env_for(fake), body, "--only-on-change") == 0
    assert len(fake.comments()) == 1
    assert capsys.readouterr().out.startswith("created comment ")


# -- no token -------------------------------------------------------------------------------------------------


def test_without_a_token_the_body_is_printed_and_nothing_is_posted(fake, tmp_path, capsys, monkeypatch):
    body = tmp_path / "comment.md"
    body.write_text("the numbers")
    assert upsert(None, "the numbers").action == "printed"
    assert comment_command(monkeypatch, {"GITHUB_API_URL": fake.url}, body) == 0
    out = capsys.readouterr().out
    assert "the numbers" in out and "not posted" in out and "GITHUB_TOKEN" in out
    assert fake.requests == []


def test_from_env_reads_token_and_api_root():
    assert from_env({}) is None
    assert from_env({"GITHUB_TOKEN": "  "}) is None
    assert from_env({"GITHUB_TOKEN": "t"}).api_url == DEFAULT_API_URL
    assert from_env({"GITHUB_TOKEN": "t", "GITHUB_API_URL": "https://ghe.example/api/v3/"}).api_url == (
        "https://ghe.example/api/v3"
    )


# -- body size guard ------------------------------------------------------------------------------------------


def test_a_body_over_githubs_limit_is_refused_before_any_request(fake, client):
    room = MAX_BODY_CHARS - len(MARKER) - 1
    upsert(client, "x" * room)  # exactly at the limit once marked: fine
    requests_before = len(fake.requests)
    with pytest.raises(BodyTooLargeError, match="65536"):
        upsert(client, "x" * (room + 1))
    assert len(fake.requests) == requests_before


def comment_argv(body_file, repo=f"{OWNER}/{REPO}", pr=PR):
    return ["comment", "--repo", repo, "--pr", str(pr), "--body-file", str(body_file)]


def test_comment_command_exits_2_on_a_too_large_body(fake, tmp_path, capsys, cli_run):
    body = tmp_path / "comment.md"
    body.write_text("x" * MAX_BODY_CHARS)
    assert cli_run(comment_argv(body), env_for(fake)) == 2
    assert capsys.readouterr().err.startswith("compile-baselines comment: error: comment body has")


# -- retries --------------------------------------------------------------------------------------------------

RETRYABLE = {
    "502": ([Fault(502, {"message": "Bad Gateway"})], [1.0]),
    "503 twice": ([Fault(503), Fault(503)], [1.0, 2.0]),
    "429 with Retry-After": ([Fault(429, {"message": "slow down"}, {"Retry-After": "7"})], [7.0]),
    "403 secondary rate limit": (
        [Fault(403, {"message": "You have exceeded a secondary rate limit. Please wait a few minutes."})],
        [60.0],
    ),
    "403 with Retry-After": ([Fault(403, {"message": "Forbidden"}, {"Retry-After": "3"})], [3.0]),
    "403 rate limit exhausted until reset": (
        [
            Fault(
                403,
                {"message": "API rate limit exceeded"},
                {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(NOW) + 20)},
            )
        ],
        [21.0],
    ),
    "429 rate limit exhausted until reset": (
        [Fault(429, {}, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(NOW) + 5)})],
        [6.0],
    ),
    "connection dropped": ([Fault(drop=True)], [1.0]),
}


@pytest.mark.parametrize("faults, expected_waits", RETRYABLE.values(), ids=RETRYABLE.keys())
def test_transient_failures_are_retried_with_the_wait_github_asks_for(fake, client, waits, faults, expected_waits):
    fake.inject(*faults)
    assert upsert(client, "x").action == "created"
    assert waits == expected_waits
    assert len(fake.comments()) == 1


def test_a_slow_response_times_out_and_is_retried(fake, waits):
    client = GitHubClient(fake.url, fake.token, timeout=0.1, sleep=waits.append)
    fake.inject(Fault(status=500, delay=0.5))
    assert upsert(client, "x").action == "created"
    assert waits == [1.0]


def test_a_create_retried_after_a_lost_response_leaves_one_comment(fake, waits):
    # The first POST takes effect but its answer comes too late; the retry creates a second comment.
    client = GitHubClient(fake.url, fake.token, timeout=0.1, sleep=waits.append)
    fake.inject(Fault(delay=0.5, method="POST"))
    outcome = upsert(client, "x")
    [comment] = fake.comments()
    assert (outcome.action, outcome.comment_id) == ("updated", comment["id"])
    assert "removed duplicate" in outcome.note


def test_backoff_doubles_and_each_wait_is_capped(fake, waits):
    client = GitHubClient(fake.url, fake.token, max_wait=3.0, sleep=waits.append)
    fake.inject(*[Fault(502)] * 4)
    upsert(client, "x")
    assert waits == [1.0, 2.0, 3.0, 3.0]


def test_gives_up_after_max_retries_with_one_clear_line(fake, waits):
    client = GitHubClient(fake.url, fake.token, max_retries=2, sleep=waits.append)
    fake.inject(*[Fault(502)] * 3)
    with pytest.raises(GitHubError) as error:
        upsert(client, "x")
    message = str(error.value)
    assert "\n" not in message
    assert "GET /repos/octo/widgets/issues/7/comments still failing after 3 attempts (502" in message
    assert "retry the job later" in message
    assert len(fake.requests) == 3 and waits == [1.0, 2.0]


def test_a_rate_limit_wait_beyond_the_cap_fails_now_saying_when(fake, client, waits):
    fake.inject(Fault(429, {"message": "slow down"}, {"Retry-After": "3600"}))
    with pytest.raises(GitHubError, match="asks to wait 3600 s"):
        upsert(client, "x")
    assert waits == [] and len(fake.requests) == 1


# -- failing fast ---------------------------------------------------------------------------------------------

BAD_TOKEN = "wrong-token-secret"
FAIL_FAST = {  # token, repo, injected fault, what the message names, what it tells you to do
    "401 bad token": (BAD_TOKEN, REPO, None, "rejected the token", "set GITHUB_TOKEN"),
    "403 permissions": (
        None,
        REPO,
        Fault(403, {"message": "Resource not accessible by integration"}),
        "Resource not accessible by integration",
        "'pull-requests: write' and 'issues: write'",
    ),
    "404 unknown repo": (None, "nope", None, "found no octo/nope#7", "check --repo, --pr"),
    "422 validation": (
        None,
        REPO,
        Fault(422, {"message": "Validation Failed", "errors": [{"message": "Too long"}]}),
        "422 Validation Failed; Too long",
        "fix the request body",
    ),
}


@pytest.mark.parametrize("token, repo, fault, what, hint", FAIL_FAST.values(), ids=FAIL_FAST.keys())
def test_unfixable_failures_fail_fast_with_one_clear_line(fake, waits, token, repo, fault, what, hint):
    client = GitHubClient(fake.url, token or fake.token, sleep=waits.append)
    if fault:
        fake.inject(fault)
    with pytest.raises(GitHubError) as error:
        upsert_comment(client, OWNER, repo, PR, "x", False, True)
    message = str(error.value)
    assert what in message and hint in message
    assert "\n" not in message and (token or fake.token) not in message
    assert len(fake.requests) == 1 and waits == []


def test_an_empty_body_is_a_validation_error_with_githubs_message(fake, client):
    with pytest.raises(GitHubError, match=r"422 Validation Failed.*missing_field") as error:
        client.create_issue_comment(OWNER, REPO, PR, "")
    assert error.value.status == 422


# -- the token stays secret -----------------------------------------------------------------------------------


def test_the_token_never_appears_in_errors_or_output(fake, tmp_path, capsys, cli_run):
    secret = "ghp_secretTOKENvalue123"
    body = tmp_path / "comment.md"
    body.write_text("x")
    assert cli_run(comment_argv(body), env_for(fake, secret)) == 1  # 401
    fake.token = secret
    fake.inject(Fault(422, {"message": f"Validation Failed: echoed {secret}"}))
    assert cli_run(comment_argv(body), env_for(fake, secret)) == 1
    fake.inject(*[Fault(502, {"message": secret})] * 6)
    client = GitHubClient(fake.url, secret, max_retries=1, sleep=lambda s: None)
    with pytest.raises(GitHubError) as error:
        upsert(client, "x")
    captured = capsys.readouterr()
    assert captured.err.count("error: ") == 2
    assert secret not in captured.out + captured.err + str(error.value) + repr(client)


def test_a_malformed_api_url_fails_fast_naming_the_variable(waits):
    client = GitHubClient("api.github.com", "t", sleep=waits.append)
    with pytest.raises(GitHubError, match="check GITHUB_API_URL"):
        upsert(client, "x")
    assert waits == []


def test_the_token_is_never_sent_to_another_host(fake, client):
    fake.inject(Fault(200, [], {"Link": '<https://elsewhere.example/page2>; rel="next"'}))
    with pytest.raises(GitHubError, match="another host"):
        upsert(client, "x")
    assert len(fake.requests) == 1


# -- the comment command --------------------------------------------------------------------------------------


def test_comment_command_prints_one_line_of_outcome(fake, tmp_path, capsys, monkeypatch):
    body = tmp_path / "comment.md"
    body.write_text("numbers")
    assert comment_command(monkeypatch, env_for(fake), body) == 0
    assert comment_command(monkeypatch, env_for(fake), body) == 0
    lines = capsys.readouterr().out.splitlines()
    comment_id = fake.comments()[0]["id"]
    assert lines[0].startswith(f"created comment {comment_id} on octo/widgets#7: https://github.com/")
    assert lines[1].startswith(f"updated comment {comment_id} on octo/widgets#7: ")


@pytest.mark.parametrize(
    "repo, pr, body_file, expected",
    [
        ("octo", PR, "comment.md", "--repo must be OWNER/NAME, got 'octo'"),
        ("octo/widgets/x", PR, "comment.md", "--repo must be OWNER/NAME"),
        (f"{OWNER}/{REPO}", 0, "comment.md", "--pr must be a positive PR number"),
        (f"{OWNER}/{REPO}", PR, "missing.md", "cannot read the comment body file"),
    ],
)
def test_comment_command_usage_errors_exit_2(fake, tmp_path, capsys, monkeypatch, cli_run, repo, pr, body_file,
                                            expected):
    monkeypatch.chdir(tmp_path)
    Path("comment.md").write_text("x")
    assert cli_run(comment_argv(body_file, repo, pr), env_for(fake)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"compile-baselines comment: error: {expected}") and err.count("\n") == 1
    assert fake.requests == []


def test_comment_command_exits_1_when_github_fails(fake, tmp_path, capsys, cli_run):
    body = tmp_path / "comment.md"
    body.write_text("x")
    assert cli_run(comment_argv(body, "octo/unknown"), env_for(fake)) == 1
    assert "found no octo/unknown#7" in capsys.readouterr().err


# -- concurrency ----------------------------------------------------------------------------------------------


class _InLockstep:
    """Wraps a client so two runs reach a point together: both list before either creates (and, optionally,
    both create before either lists again), the race the re-check must resolve."""

    def __init__(self, client: GitHubClient, barrier: threading.Barrier, after_create: bool) -> None:
        self.client, self.barrier, self.after_create = client, barrier, after_create
        self.listed = False

    def list_issue_comments(self, *args):
        comments = self.client.list_issue_comments(*args)
        if not self.listed:
            self.listed = True
            self.barrier.wait(timeout=5)
        return comments

    def create_issue_comment(self, *args):
        created = self.client.create_issue_comment(*args)
        if self.after_create:
            self.barrier.wait(timeout=5)
        return created

    def __getattr__(self, name):
        return getattr(self.client, name)


def test_a_run_whose_new_comment_the_other_run_removed_writes_to_the_survivor(fake, client):
    other = fake.add_comment(OWNER, REPO, PR, f"{MARKER}\nother run")

    class OtherRunRacesAhead:  # our first listing predates the other run's comment; it removes ours before we re-list
        listed = False

        def list_issue_comments(self, *args):
            comments = client.list_issue_comments(*args)
            if not self.listed:
                self.listed = True
                return []
            return comments

        def create_issue_comment(self, *args):
            created = client.create_issue_comment(*args)
            client.delete_issue_comment(OWNER, REPO, created.id)
            return created

        def __getattr__(self, name):
            return getattr(client, name)

    outcome = upsert_comment(OtherRunRacesAhead(), OWNER, REPO, PR, "this run", False, True)
    assert (outcome.action, outcome.comment_id) == ("updated", other["id"])
    assert [c["body"] for c in fake.comments()] == [f"{MARKER}\nthis run"]


@pytest.mark.slow
@pytest.mark.parametrize("after_create", [False, True], ids=["one sees the other", "both see both"])
def test_two_concurrent_runs_leave_exactly_one_comment(fake, after_create):
    barrier = threading.Barrier(2)
    outcomes, errors = [], []

    def run(text: str) -> None:
        client = _InLockstep(GitHubClient(fake.url, fake.token, timeout=5.0), barrier, after_create)
        try:
            outcomes.append(upsert_comment(client, OWNER, REPO, PR, text, False, True))
        except Exception as exc:  # surfaced below; a thread swallows it otherwise
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(f"run {i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert errors == []
    assert len(fake.calls("POST")) == 2  # both really raced
    [comment] = fake.comments()
    assert {o.comment_id for o in outcomes} == {comment["id"]}
    assert comment["body"] in (f"{MARKER}\nrun 0", f"{MARKER}\nrun 1")
