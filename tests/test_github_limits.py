"""The GitHub client keeps to GitHub's documented limits and never waits without bound (local fake of the API)."""

from __future__ import annotations

import time

import pytest
from fake_github import Fault

from tracker.github.client import GitHubClient, GitHubError

OWNER, REPO, PR = "octo", "widgets", 7
NOW = 1_800_000_000.0


def test_a_server_that_never_answers_fails_within_the_deadline(fake, waits):
    client = GitHubClient(fake.url, fake.token, timeout=0.2, deadline=1.0, backoff=0.1, sleep=waits.append)
    fake.inject(*[Fault(delay=0.6)] * 10)
    started = time.monotonic()
    with pytest.raises(GitHubError, match=r"no response within 0\.2 s"):
        client.list_issue_comments(OWNER, REPO, PR)
    # 0.2 s an attempt plus 0.1, 0.2, 0.4 s of backoff: the third attempt's wait would pass the 1 s deadline
    assert len(fake.requests) == 3 and waits == [0.1, 0.2]
    assert time.monotonic() - started < 3.0


def test_a_429_without_retry_after_waits_a_minute_then_longer(fake, waits):
    client = GitHubClient(fake.url, fake.token, max_wait=600, sleep=waits.append, clock=lambda: NOW)
    fake.inject(Fault(429, {"message": "slow down"}), Fault(429, {"message": "slow down"}))
    assert client.list_issue_comments(OWNER, REPO, PR) == []
    assert waits == [60.0, 120.0]


@pytest.mark.parametrize("header", [{"Retry-After": v} for v in ("nan", "NaN", "inf", "-inf", "", "soon",
                                                                   "Wed, 99 Foo 2026 25:61:61 GMT", "1e999")]
                         + [{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": v} for v in ("nan", "inf", "soon")]
                         + [{"Retry-After": "nan", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "nan"}])
def test_an_unreadable_or_endless_wait_falls_back_to_the_default_backoff(fake, waits, header):
    client = GitHubClient(fake.url, fake.token, max_wait=600, sleep=waits.append, clock=lambda: NOW)
    fake.inject(Fault(429, {"message": "slow down"}, header), Fault(429, {"message": "slow down"}, header))
    assert client.list_issue_comments(OWNER, REPO, PR) == []
    assert waits == [60.0, 120.0]


def test_an_unreadable_retry_after_defers_to_the_reset_time(fake, waits):
    client = GitHubClient(fake.url, fake.token, max_wait=600, sleep=waits.append, clock=lambda: NOW)
    fake.inject(Fault(429, {}, {"Retry-After": "nan", "X-RateLimit-Remaining": "0",
                                "X-RateLimit-Reset": str(int(NOW) + 5)}))
    assert client.list_issue_comments(OWNER, REPO, PR) == [] and waits == [6.0]


def test_repeated_secondary_limits_beyond_the_cap_fail_saying_how_long(fake, waits):
    client = GitHubClient(fake.url, fake.token, sleep=waits.append, clock=lambda: NOW)  # max_wait 60 s
    secondary = Fault(403, {"message": "You have exceeded a secondary rate limit."})
    fake.inject(secondary, secondary)
    with pytest.raises(GitHubError, match="asks to wait 120 s"):
        client.list_issue_comments(OWNER, REPO, PR)
    assert waits == [60.0] and len(fake.requests) == 2


def test_410_says_issues_are_disabled(fake, waits):
    client = GitHubClient(fake.url, fake.token, sleep=waits.append)
    fake.inject(Fault(410, {"message": "Issues are disabled for this repo"}))
    with pytest.raises(GitHubError, match=r"410 Issues are disabled.*enable issues") as error:
        client.list_issues(OWNER, REPO)
    assert error.value.status == 410 and waits == []


def test_a_404_on_issues_does_not_mention_a_pr_option(fake, waits):
    client = GitHubClient(fake.url, fake.token, sleep=waits.append)
    fake.inject(Fault(404, {"message": "Not Found"}))
    with pytest.raises(GitHubError) as error:
        client.create_issue(OWNER, REPO, "t", "b")
    assert "--pr" not in str(error.value) and "check --repo" in str(error.value)


def test_requests_name_the_application_in_the_user_agent(fake):
    GitHubClient(fake.url, fake.token).list_issue_comments(OWNER, REPO, PR)
    assert fake.requests[0].headers["user-agent"].startswith("compile-baselines")


def test_writes_are_spaced_by_a_second(fake, waits):
    client = GitHubClient(fake.url, fake.token, sleep=waits.append)
    first = client.create_issue_comment(OWNER, REPO, PR, "a")
    client.update_issue_comment(OWNER, REPO, first.id, "b")
    client.list_issue_comments(OWNER, REPO, PR)  # reads are not spaced
    assert len(waits) == 1 and 0.5 < waits[0] <= 1.0


@pytest.mark.parametrize("answer", [{"message": "not a list"}, [1, 2], [{"id": "x"}]],
                         ids=["object for a list", "numbers", "id not a number"])
def test_an_answer_of_the_wrong_shape_is_one_clear_error(fake, waits, answer):
    client = GitHubClient(fake.url, fake.token, sleep=waits.append)
    fake.inject(Fault(200, answer))
    with pytest.raises(GitHubError, match="unexpected shape"):
        client.list_issue_comments(OWNER, REPO, PR)


def test_json_nested_too_deep_is_one_clear_error(fake, waits):
    client = GitHubClient(fake.url, fake.token, sleep=waits.append)
    fake.inject(Fault(200, raw=b"[" * 100_000 + b"]" * 100_000))
    with pytest.raises(GitHubError, match="non-JSON"):
        client.list_issue_comments(OWNER, REPO, PR)


# -- every call ends by its deadline, every listing by its page cap -------------------------------------------

CALLS = {
    "list comments": lambda c: c.list_issue_comments(OWNER, REPO, PR),
    "create comment": lambda c: c.create_issue_comment(OWNER, REPO, PR, "x" * 400),
    "update issue": lambda c: c.update_issue(OWNER, REPO, c._made.number, body="y" * 400),
    "list issues": lambda c: c.list_issues(OWNER, REPO),
}


@pytest.mark.slow
@pytest.mark.parametrize("call", list(CALLS))
def test_a_server_dripping_its_body_fails_at_the_deadline(fake, waits, call):
    """Headers at once, then a byte every 50 ms: no read ever waits past the 0.5 s timeout, so only a deadline on
    the whole call ends it."""
    client = GitHubClient(fake.url, fake.token, timeout=0.5, deadline=1.0, sleep=waits.append, write_interval=0)
    for k in range(8):
        fake.add_comment(OWNER, REPO, PR, f"comment {k} " + "z" * 100)
    client._made = client.create_issue("octo", "widgets", "t", "b")  # type: ignore[attr-defined]
    fake.inject(Fault(drip=0.05))
    started = time.monotonic()
    with pytest.raises(GitHubError, match=r"sent no complete answer within the 1 s deadline") as error:
        CALLS[call](client)
    assert time.monotonic() - started < 2.5
    assert "\n" not in str(error.value) and fake.token not in str(error.value)


def test_a_body_dripped_within_the_deadline_is_read_whole(fake, waits):
    client = GitHubClient(fake.url, fake.token, timeout=0.5, deadline=5.0, sleep=waits.append)
    fake.add_comment(OWNER, REPO, PR, "hello")
    fake.inject(Fault(drip=0.002))
    (comment,) = client.list_issue_comments(OWNER, REPO, PR)
    assert comment.body == "hello"


@pytest.mark.parametrize("listing", ["list comments", "list issues"])
def test_a_next_link_that_never_ends_stops_at_the_page_cap(fake, waits, listing):
    client = GitHubClient(fake.url, fake.token, sleep=waits.append, max_pages=5)
    fake.endless = True
    with pytest.raises(GitHubError, match="still sent a next page after 5 pages while listing") as error:
        CALLS[listing](client)
    assert len(fake.calls("GET")) == 5 and "\n" not in str(error.value)


def test_the_comment_command_stops_an_endless_listing_in_one_line(fake, tmp_path, capsys, cli_run):
    from tracker.github.client import MAX_PAGES

    body = tmp_path / "c.md"
    body.write_text("hi")
    fake.endless = True
    env = {"GITHUB_TOKEN": fake.token, "GITHUB_API_URL": fake.url}
    assert cli_run(["comment", "--repo", f"{OWNER}/{REPO}", "--pr", str(PR), "--body-file", str(body)], env) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"after {MAX_PAGES} pages" in err
    assert len(fake.calls("GET")) == MAX_PAGES and not fake.calls("POST")


# -- redirects ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("status", [301, 302, 307, 308])
@pytest.mark.parametrize("write", ["create comment", "update issue"])
def test_a_redirected_write_says_what_happened_and_is_not_followed(fake, waits, status, write):
    client = GitHubClient(fake.url, fake.token, sleep=waits.append, write_interval=0)
    client._made = client.create_issue("octo", "widgets", "t", "b")  # type: ignore[attr-defined]
    moved = f"{fake.url}/repos/octo/renamed/issues/{PR}/comments"
    fake.inject(Fault(status, {"message": "Moved Permanently"}, headers={"Location": moved},
                      method="POST" if write == "create comment" else "PATCH"))
    before = len(fake.requests)
    with pytest.raises(GitHubError) as error:
        CALLS[write](client)
    message = str(error.value)
    assert f"with {status} " in message and f"to {moved}" in message and "renamed or moved" in message
    assert error.value.status == status and len(fake.requests) == before + 1  # nothing sent to the new place
    assert fake.comments() == [] or write == "update issue"


def test_a_redirected_read_on_the_same_host_is_followed(fake, waits):
    client = GitHubClient(fake.url, fake.token, sleep=waits.append)
    fake.add_comment(OWNER, REPO, PR, "here")
    target = f"{fake.url}/repos/{OWNER}/{REPO}/issues/{PR}/comments?per_page=100"
    fake.inject(Fault(301, None, headers={"Location": target}, method="GET"))
    assert [c.body for c in client.list_issue_comments(OWNER, REPO, PR)] == ["here"]


# -- the token and the repository name, refused before any request -------------------------------------------

BAD_TOKENS = {"a line break inside": "ghp_abc\nghp_def", "a space": "ghp_abc def", "a non-Latin-1 character":
              "ghp_abc\u2603", "a Latin-1 accent": "ghp_caf\u00e9", "a NUL": "ghp_abc\x00", "a tab": "ghp\tabc"}


@pytest.mark.parametrize("how", list(BAD_TOKENS))
@pytest.mark.parametrize("command", ["comment", "issue"])
def test_a_token_no_github_token_looks_like_is_refused_naming_github_token(fake, tmp_path, how, command):
    from tracker.errors import UsageError
    from tracker.github.forge import GitHubForge

    body = tmp_path / "c.md"
    body.write_text("hi")
    env = {"GITHUB_TOKEN": BAD_TOKENS[how], "GITHUB_API_URL": fake.url}  # some cannot be put in os.environ
    with pytest.raises(UsageError, match=r"^GITHUB_TOKEN holds") as refused:  # exit 2, in one line
        if command == "comment":  # the forge each command posts through, as it makes it from the environment
            GitHubForge.for_pr(f"{OWNER}/{REPO}", PR, env).comment(body.read_text(), True)
        else:
            GitHubForge.for_repo(f"{OWNER}/{REPO}", env).tracking_issue("title", body.read_text())
    assert "\n" not in str(refused.value) and BAD_TOKENS[how] not in str(refused.value) and fake.requests == []


def test_a_token_with_a_trailing_newline_is_the_token(fake, waits):
    from tracker.github.client import from_env

    client = from_env({"GITHUB_TOKEN": fake.token + "\n", "GITHUB_API_URL": fake.url}, sleep=waits.append)
    assert client is not None and client.list_issue_comments(OWNER, REPO, PR) == []


BAD_REPOS = ["octo/..", "octo/.", "../widgets", "octo/a b", "-octo/widgets", "octo-/widgets", "octo/wid/gets",
             "o" * 40 + "/widgets", "octo/" + "w" * 101, "octo/wid%2egets", "octo/wid\u00e9gets", "octo/widgets\n",
             "/widgets", "octo/"]


@pytest.mark.parametrize("repo", BAD_REPOS)
@pytest.mark.parametrize("command", ["comment", "issue", "pr"])
def test_a_repository_name_github_cannot_have_is_refused_before_any_request(fake, tmp_path, capsys, repo, command):
    from tracker import cli

    body = tmp_path / "c.md"
    body.write_text("hi")
    argv = {"comment": ["comment", f"--repo={repo}", "--pr", str(PR), "--body-file", str(body)],
            "issue": ["issue", f"--repo={repo}", "--title", "t", "--body-file", str(body)],
            "pr": ["pr", "--base", "HEAD", "--head", "HEAD", f"--repo={repo}", "--pr", str(PR)]}[command]
    with pytest.MonkeyPatch.context() as m:
        m.setenv("GITHUB_TOKEN", fake.token)
        m.setenv("GITHUB_API_URL", fake.url)
        assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--repo must be OWNER/NAME" in err and fake.requests == []


@pytest.mark.parametrize("repo", ["octo/.github", "octo/a.b", "octo/...x", "a/b", "o-c-t-o/w_i-d.g3ts",
                                  "o" * 39 + "/" + "w" * 100])
def test_repository_names_github_allows_are_taken(repo):
    from tracker.github.client import parse_repo

    assert parse_repo(repo) == tuple(repo.split("/"))


def test_pr_refuses_a_malformed_token_before_it_measures(fake, capsys, monkeypatch):
    from tracker import cli

    monkeypatch.setenv("GITHUB_TOKEN", "ghp_abc\nghp_def")
    monkeypatch.setenv("GITHUB_API_URL", fake.url)
    assert cli.main(["pr", "--base", "HEAD", "--head", "HEAD", "--repo", f"{OWNER}/{REPO}", "--pr", str(PR)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "GITHUB_TOKEN holds" in err and "pr: base" not in err
