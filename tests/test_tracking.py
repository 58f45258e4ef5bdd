"""The nightly tracking issue: one issue found by its hidden marker, edited in place, against the fake GitHub."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fake_github import OUTSIDER, FakeGitHub, Fault

from tracker.github.client import GitHubClient
from tracker.github.tracking import MAX_BODY_CHARS, TRACKING_MARKER, tracking_body, upsert_issue

OWNER, REPO = "octo", "widgets"
TITLE = "Nightly: the best torch.compile baseline changed"


@pytest.fixture
def client(fake: FakeGitHub) -> GitHubClient:
    return GitHubClient(fake.url, fake.token, timeout=2.0, sleep=lambda s: None)


def env_for(fake: FakeGitHub) -> dict[str, str]:
    return {"GITHUB_TOKEN": fake.token, "GITHUB_API_URL": fake.url}


def test_creates_one_issue_with_the_marker_then_edits_it_in_place(fake: FakeGitHub, client: GitHubClient) -> None:
    first = upsert_issue(client, OWNER, REPO, TITLE, "## h100-torch-stable\nllm_rmsnorm decode: default -> eager")
    [issue] = fake.issue_list()
    assert (first.action, first.number, issue["title"]) == ("created", issue["number"], TITLE)
    assert issue["body"].startswith(TRACKING_MARKER + "\n## h100-torch-stable")
    second = upsert_issue(client, OWNER, REPO, TITLE + " (2)", "## h100-torch-nightly\nnew body")
    [issue] = fake.issue_list()
    assert (second.action, second.number) == ("updated", first.number)
    assert (issue["title"], issue["body"]) == (TITLE + " (2)", f"{TRACKING_MARKER}\n## h100-torch-nightly\nnew body")
    assert [c.method for c in fake.calls()] == ["GET", "POST", "GET", "GET", "PATCH"]


def test_finds_the_issue_on_a_later_page_and_ignores_prs_and_closed_issues(fake: FakeGitHub,
                                                                          client: GitHubClient) -> None:
    fake.add_issue(OWNER, REPO, "a PR quoting the marker", f"see {TRACKING_MARKER}", pull_request=True)
    fake.add_issue(OWNER, REPO, "old, closed", TRACKING_MARKER, state="closed")
    for i in range(150):
        fake.add_issue(OWNER, REPO, f"issue {i}", "unrelated")
    ours = fake.add_issue(OWNER, REPO, TITLE, f"{TRACKING_MARKER}\nold body")
    outcome = upsert_issue(client, OWNER, REPO, TITLE, "new body")
    assert (outcome.action, outcome.number) == ("updated", ours["number"])
    gets = [c.path for c in fake.calls("GET")]
    assert gets[0].endswith("/issues?state=open&per_page=100") and "page=2" in gets[1] and len(gets) == 2
    bodies = {i["title"]: i["body"] for i in fake.issue_list()}
    assert bodies["old, closed"] == TRACKING_MARKER and bodies["a PR quoting the marker"].startswith("see")


def test_an_outsiders_issue_carrying_the_marker_is_neither_edited_nor_makes_ours_close(
        fake: FakeGitHub, client: GitHubClient) -> None:
    """Anyone can open an issue on a public repository, the hidden marker included. Taken as ours, the nightly
    would write into it (theirs to edit back) and close the real one as its duplicate."""
    theirs = fake.add_issue(OWNER, REPO, "Nightly: nothing to see", f"{TRACKING_MARKER}\nall fine", by=OUTSIDER)
    ours = upsert_issue(client, OWNER, REPO, TITLE, "first")
    later = upsert_issue(client, OWNER, REPO, TITLE, "second")
    assert (ours.action, later.action, later.number, later.note) == ("created", "updated", ours.number, "")
    issues = {i["number"]: (i["state"], i["body"]) for i in fake.issue_list()}
    assert issues == {theirs["number"]: ("open", f"{TRACKING_MARKER}\nall fine"),
                      ours.number: ("open", f"{TRACKING_MARKER}\nsecond")}


def test_duplicate_tracking_issues_converge_on_the_oldest(fake: FakeGitHub, client: GitHubClient) -> None:
    older = fake.add_issue(OWNER, REPO, TITLE, TRACKING_MARKER)
    newer = fake.add_issue(OWNER, REPO, TITLE, TRACKING_MARKER)
    outcome = upsert_issue(client, OWNER, REPO, TITLE, "body")
    assert (outcome.number, outcome.note) == (older["number"], f"closed duplicate tracking issue(s) #{newer['number']}")
    states = {i["number"]: i["state"] for i in fake.issue_list()}
    assert states == {older["number"]: "open", newer["number"]: "closed"}


def test_a_run_whose_new_issue_the_other_run_closed_writes_to_the_survivor(fake: FakeGitHub,
                                                                          client: GitHubClient) -> None:
    other = fake.add_issue(OWNER, REPO, TITLE, f"{TRACKING_MARKER}\nother run")

    class OtherRunRacesAhead:  # our first listing predates the other run's issue; it closes ours before we re-list
        listed = False

        def list_issues(self, *args, **kwargs):
            issues = client.list_issues(*args, **kwargs)
            if not self.listed:
                self.listed = True
                return []
            return issues

        def create_issue(self, *args):
            created = client.create_issue(*args)
            client.update_issue(OWNER, REPO, created.number, state="closed")
            return created

        def __getattr__(self, name):
            return getattr(client, name)

    outcome = upsert_issue(OtherRunRacesAhead(), OWNER, REPO, TITLE, "this run")  # type: ignore[arg-type]
    assert (outcome.action, outcome.number) == ("updated", other["number"])
    [issue] = [i for i in fake.issue_list() if i["state"] == "open"]
    assert (issue["number"], issue["body"]) == (other["number"], f"{TRACKING_MARKER}\nthis run")


def test_a_body_over_githubs_limit_is_cut_at_a_line_keeping_the_marker() -> None:
    body = tracking_body("\n".join(f"| row {i} | {'x' * 60} |" for i in range(2000)))
    assert len(body) <= MAX_BODY_CHARS and body.startswith(TRACKING_MARKER)
    assert body.endswith("(cut at GitHub's issue size limit: the workflow log has the full comparison)\n")


def test_the_issue_command_posts_prints_without_a_token_and_fails_in_one_line(
        fake: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str], cli_run: Callable[..., int]) -> None:
    body = tmp_path / "issue.md"
    body.write_text("## h100\nchanged")

    def issue(repo: str, body_file: Path, env: dict[str, str]) -> int:
        return cli_run(["issue", "--repo", repo, "--title", TITLE, "--body-file", str(body_file)], env)

    assert issue(f"{OWNER}/{REPO}", body, env_for(fake)) == 0
    number = fake.issue_list()[0]["number"]
    assert capsys.readouterr().out.startswith(f"created tracking issue #{number} of octo/widgets")
    assert issue(f"{OWNER}/{REPO}", body, {}) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# {TITLE}\n\n{TRACKING_MARKER}\n## h100") and "GITHUB_TOKEN is not set" in out
    assert issue("not a repo", body, {}) == 2
    assert issue(f"{OWNER}/{REPO}", tmp_path / "missing.md", {}) == 2
    assert issue(f"{OWNER}/{REPO}", body, {**env_for(fake), "GITHUB_TOKEN": "wrong"}) == 1
    assert issue(f"{OWNER}/nope", body, env_for(fake)) == 1
    fake.inject(Fault(status=403, body={"message": "Resource not accessible by integration"}))
    assert issue(f"{OWNER}/{REPO}", body, env_for(fake)) == 1
    errors = capsys.readouterr().err.splitlines()
    assert len(errors) == 5 and all(e.startswith("compile-baselines issue: error: ") for e in errors)
    assert "401" in errors[2] and "404" in errors[3] and "issues: write" in errors[4]
    assert fake.token not in "".join(errors)
