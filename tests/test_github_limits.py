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
