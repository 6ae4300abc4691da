"""The Jira edge: the `jira` library's public API we use, within the version pyproject allows,
and the REST shapes bot/jira_rest.py relies on. A library release or a path that changes
the shape fails here, not in production."""

from __future__ import annotations

import inspect
import tomllib
from collections.abc import Iterator
from importlib.metadata import version

import pytest
from jira import JIRA
from jira.exceptions import JIRAError
from jira.resources import Comment
from packaging.requirements import Requirement

from bot.config import Settings
from bot.jira import PROPERTY, JiraAuthor, JiraClient
from tests.fakes.jira import FakeJira
from tests.support import ROOT


def test_the_installed_jira_library_is_within_the_bound_pyproject_names() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    [spec] = [Requirement(r) for r in project["dependencies"] if r.startswith("jira")]
    assert any(s.operator == "<" for s in spec.specifier), "jira needs an upper bound"
    assert spec.specifier.contains(version("jira"))


def test_the_public_jira_methods_we_call_keep_their_parameters() -> None:
    comments = inspect.signature(JIRA.comments).parameters
    assert {"issue", "start_at", "max_results"} <= set(comments)
    assert {"issue", "comment"} <= set(inspect.signature(JIRA.comment).parameters)
    for name in ("myself", "issue", "fields"):
        assert callable(getattr(JIRA, name))
    assert "raw" in inspect.signature(Comment.__init__).parameters


@pytest.fixture
def jira() -> Iterator[tuple[FakeJira, JiraClient]]:
    fake = FakeJira()
    url = fake.start()
    settings = Settings(
        _env_file=None,
        JIRA_URL=url,
        JIRA_EMAIL="bot@example.com",
        JIRA_API_TOKEN="jira-token",
    )
    try:
        yield fake, JiraClient(settings)
    finally:
        fake.stop()


def test_a_comment_and_its_marker_travel_in_one_post(jira) -> None:
    fake, client = jira
    fake.add_issue("PB-1", "An issue")
    comment_id = client.add_comment("PB-1", "hello", "playbook:PB-1:lessons")
    [post] = fake.calls("POST", "/rest/api/2/issue/PB-1/comment")
    assert post.json == {
        "body": "hello",
        "properties": [{"key": PROPERTY, "value": {"marker": "playbook:PB-1:lessons"}}],
    }
    assert post.headers["Content-Type"] == "application/json"
    assert client.marker_of(comment_id) == "playbook:PB-1:lessons"
    assert client.marker_of(fake.add_comment("PB-1", "a person's")) is None


def test_comments_are_read_page_by_page_in_jiras_shape(jira) -> None:
    fake, client = jira
    fake.add_issue("PB-2", "An issue")
    ids = [fake.add_comment("PB-2", f"comment {n}") for n in range(130)]
    found = client.comments("PB-2")
    assert [c["id"] for c in found] == ids
    assert found[0]["author"]["accountId"] == "someone" and found[0]["body"] == "comment 0"
    one = client.comment("PB-2", ids[5])
    assert (one["id"], one["body"]) == (ids[5], "comment 5")


def test_project_permissions_are_asked_of_jira(jira) -> None:
    fake, client = jira
    fake.project_permissions[("PB", "acc-1")] = {"ADMINISTER_PROJECTS"}
    holder = JiraAuthor(frozenset({"acc-1"}), "acc-1", None, "Ann")
    other = JiraAuthor(frozenset({"acc-2"}), "acc-2", None, "Bob")
    assert client.has_permission("PB", holder, "ADMINISTER_PROJECTS")
    assert not client.has_permission("PB", other, "ADMINISTER_PROJECTS")
    nobody = JiraAuthor(frozenset(), None, None, "someone")
    assert not client.has_permission("PB", nobody, "ADMINISTER_PROJECTS")


def test_jira_errors_keep_the_librarys_error_type_and_status(jira) -> None:
    fake, client = jira
    with pytest.raises(JIRAError) as missing:
        client.add_comment("NOPE-1", "hello", "m")
    assert missing.value.status_code == 404
    assert "Issue does not exist" in (missing.value.text or "")
    fake.fail("GET", "/rest/api/2/user/permission/search", 429, headers={"Retry-After": "7"})
    with pytest.raises(JIRAError) as limited:
        client.has_permission("PB", JiraAuthor(frozenset({"a"}), "a", None, "A"), "X")
    assert limited.value.status_code == 429
    assert limited.value.response.headers["Retry-After"] == "7"
