"""The fake GitHub's contents, git database and PR writes, driven by PyGithub itself."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator

import pytest
from github import Auth, Github, GithubException, InputGitTreeElement
from github.Repository import Repository

from tests.fakes.github import FakeGitHub
from tests.loop_harness import _KEYS, APP_ID, INSTALLATION

REPO = "octo-org/agents"
TOKEN = "ghp_fakeGitTestToken"
BRANCH = "playbook-bot/agents-md"


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    """A started fake with one repository and a personal token."""
    server = FakeGitHub(app_id=APP_ID, public_key=_KEYS[1])
    server.start()
    server.add_installation(INSTALLATION)
    server.add_repo(REPO)
    server.personal_tokens.add(TOKEN)
    yield server
    server.stop()


# PyGithub's own pacing (a second between writes) would only slow the tests down.
OPTIONS = {
    "retry": None,
    "lazy": True,
    "seconds_between_requests": None,
    "seconds_between_writes": None,
}


def client(fake: FakeGitHub) -> Github:
    """A PyGithub client as the personal token's owner."""
    return Github(auth=Auth.Token(TOKEN), base_url=fake.url, **OPTIONS)


def repo(fake: FakeGitHub) -> Repository:
    """The repository, fetched the way the bot would."""
    return client(fake).get_repo(REPO)


def git_sha(data: bytes) -> str:
    """What ``git hash-object`` prints for ``data``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_a_new_repository_has_main_with_an_initial_commit(fake) -> None:
    head = fake.branch_sha(REPO, "main")
    assert head is not None and fake.commits_on(REPO, "main") == [head]
    branch = repo(fake).get_branch("main")
    assert branch.commit.sha == head
    assert repo(fake).get_git_commit(head).parents == []


def test_contents_read_files_and_directories_with_git_blob_shas(fake) -> None:
    data = "# Agents\r\n\r\nUnicode: é ✓ no final newline".encode()
    sha = fake.put_file(REPO, "docs/AGENTS.md", data)
    assert fake.commits_on(REPO, "main")[0] == sha
    found = repo(fake).get_contents("docs/AGENTS.md", ref="main")
    assert not isinstance(found, list)
    assert found.type == "file" and found.encoding == "base64"
    assert found.decoded_content == data
    assert found.sha == git_sha(data)
    assert (found.size, found.path, found.name) == (len(data), "docs/AGENTS.md", "AGENTS.md")
    listing = repo(fake).get_contents("docs")
    assert isinstance(listing, list)
    assert [(c.type, c.name) for c in listing] == [("file", "AGENTS.md")]
    root = repo(fake).get_contents("")
    assert isinstance(root, list)
    assert {(c.type, c.name) for c in root} == {("file", "README.md"), ("dir", "docs")}
    with pytest.raises(GithubException) as missing:
        repo(fake).get_contents("CLAUDE.md")
    assert missing.value.status == 404
    assert fake.file_at(REPO, "docs/AGENTS.md") == data
    assert fake.file_at(REPO, "CLAUDE.md") is None


def test_contents_api_creates_and_updates_only_with_the_current_sha(fake) -> None:
    created = repo(fake).create_file("AGENTS.md", "add", b"one\n", branch="main")
    assert fake.file_at(REPO, "AGENTS.md") == b"one\n"
    assert created["content"].sha == git_sha(b"one\n")
    with pytest.raises(GithubException) as stale:
        repo(fake).update_file("AGENTS.md", "edit", b"two\n", sha=git_sha(b"zero\n"))
    assert stale.value.status == 409
    with pytest.raises(GithubException) as no_sha:
        repo(fake).create_file("AGENTS.md", "again", b"three\n")
    assert no_sha.value.status == 422
    repo(fake).update_file("AGENTS.md", "edit", b"two\n", sha=git_sha(b"one\n"))
    assert fake.file_at(REPO, "AGENTS.md") == b"two\n"
    assert len(fake.commits_on(REPO, "main")) == 3  # initial, add, edit


def test_git_data_api_commits_exact_bytes_on_a_new_branch(fake) -> None:
    r = repo(fake)
    base = r.get_branch("main").commit.sha
    data = "line\r\nü no newline".encode()
    blob = r.create_git_blob(base64.b64encode(data).decode(), "base64")
    assert blob.sha == git_sha(data)
    text_blob = r.create_git_blob("plain ✓\n", "utf-8")
    assert text_blob.sha == git_sha("plain ✓\n".encode())
    base_tree = r.get_git_tree(r.get_git_commit(base).tree.sha)
    element = InputGitTreeElement(".github/copilot-instructions.md", "100644", "blob", sha=blob.sha)
    tree = r.create_git_tree([element], base_tree)
    assert {e.path for e in r.get_git_tree(tree.sha, recursive=True).tree} >= {
        "README.md",
        ".github",
        ".github/copilot-instructions.md",
    }
    commit = r.create_git_commit("sync", tree, [r.get_git_commit(base)])
    assert [p.sha for p in commit.parents] == [base]
    ref = r.create_git_ref(f"refs/heads/{BRANCH}", commit.sha)
    assert ref.object.sha == commit.sha
    assert fake.file_at(REPO, ".github/copilot-instructions.md", ref=BRANCH) == data
    assert fake.file_at(REPO, ".github/copilot-instructions.md") is None
    assert fake.commits_on(REPO, BRANCH) == [commit.sha, base]
    with pytest.raises(GithubException) as exists:
        r.create_git_ref(f"refs/heads/{BRANCH}", commit.sha)
    assert exists.value.status == 422
    assert exists.value.data["message"] == "Reference already exists"


def test_one_tree_writes_inline_text_and_deletes_with_a_null_sha(fake) -> None:
    fake.put_file(REPO, ".cursor/rules/playbook-old.mdc", b"old\n")
    fake.put_file(REPO, ".cursor/rules/mine.mdc", b"mine\n")
    r = repo(fake)
    parent = r.get_git_commit(r.get_branch("main").commit.sha)
    tree = r.create_git_tree(
        [
            InputGitTreeElement(".claude/rules/playbook-a.md", "100644", "blob", content="a ✓\n"),
            InputGitTreeElement(".cursor/rules/playbook-old.mdc", "100644", "blob", sha=None),
        ],
        parent.tree,
    )
    paths = {e.path for e in r.get_git_tree(tree.sha, recursive=True).tree}
    assert ".claude/rules/playbook-a.md" in paths and ".cursor/rules/mine.mdc" in paths
    assert ".cursor/rules/playbook-old.mdc" not in paths
    # As GitHub: deleting a path the base tree lacks, or giving neither sha nor content, fails.
    for element in (
        InputGitTreeElement("nowhere.md", "100644", "blob", sha=None),
        InputGitTreeElement("neither.md", "100644", "blob"),
    ):
        with pytest.raises(GithubException) as refused:
            r.create_git_tree([element], parent.tree)
        assert refused.value.status == 422


def test_a_ref_moves_forward_or_by_force_only(fake) -> None:
    r = repo(fake)
    base = r.get_branch("main").commit.sha
    fake.put_file(REPO, "AGENTS.md", b"a\n", branch=BRANCH)
    ahead = fake.branch_sha(REPO, BRANCH)
    assert ahead is not None and ahead != base
    ref = r.get_git_ref(f"heads/{BRANCH}")
    assert ref.object.sha == ahead
    with pytest.raises(GithubException) as not_ff:
        ref.edit(base)
    assert not_ff.value.status == 422
    ref.edit(base, force=True)
    assert fake.branch_sha(REPO, BRANCH) == base
    with pytest.raises(GithubException) as missing:
        _ = r.get_git_ref("heads/nope").object
    assert missing.value.status == 404


def test_pull_requests_open_once_per_head_and_follow_their_branch(fake) -> None:
    r = repo(fake)
    fake.put_file(REPO, "AGENTS.md", b"first\n", branch=BRANCH)
    pull = r.create_pull(base="main", head=BRANCH, title="sync", body="why")
    assert pull.user.login == "token-owner"
    assert (pull.head.ref, pull.base.ref) == (BRANCH, "main")
    assert pull.head.sha == fake.branch_sha(REPO, BRANCH)
    assert fake.issues[(REPO, pull.number)]["pull_request"]
    with pytest.raises(GithubException) as again:
        r.create_pull(base="main", head=f"octo-org:{BRANCH}", title="again")
    assert again.value.status == 422
    assert "A pull request already exists for octo-org:" in str(again.value.data)
    listed = list(r.get_pulls(state="open", head=f"octo-org:{BRANCH}"))
    assert [p.number for p in listed] == [pull.number]
    assert list(r.get_pulls(state="open", head="octo-org:other")) == []
    moved = fake.put_file(REPO, "AGENTS.md", b"second\n", branch=BRANCH)
    assert r.get_pull(pull.number).head.sha == moved
    pull.edit(title="sync (2)", body="new why")
    assert fake.issues[(REPO, pull.number)]["title"] == "sync (2)"
    pull.create_issue_comment("a comment on the PR")
    assert fake.comments_on(REPO, pull.number)[0]["body"] == "a comment on the PR"
    pull.edit(state="closed")
    assert list(r.get_pulls(state="open", head=f"octo-org:{BRANCH}")) == []
    assert [p.number for p in r.get_pulls(state="closed", head=f"octo-org:{BRANCH}")] == [
        pull.number
    ]


def test_a_pull_without_commits_ahead_is_refused(fake) -> None:
    r = repo(fake)
    r.create_git_ref(f"refs/heads/{BRANCH}", fake.branch_sha(REPO, "main") or "")
    with pytest.raises(GithubException) as empty:
        r.create_pull(base="main", head=BRANCH, title="nothing")
    assert empty.value.status == 422


def test_an_installation_writes_as_the_apps_bot_and_merging_moves_main(fake) -> None:
    auth = Auth.AppAuth(APP_ID, _KEYS[0]).get_installation_auth(INSTALLATION)
    r = Github(auth=auth, base_url=fake.url, **OPTIONS).get_repo(REPO)
    fake.put_file(REPO, "AGENTS.md", b"block\n", branch=BRANCH)
    pull = r.create_pull(base="main", head=BRANCH, title="sync", body="")
    assert (pull.user.login, pull.user.type) == ("playbook-bot[bot]", "Bot")
    fake.merge_pull(REPO, pull.number)
    assert fake.file_at(REPO, "AGENTS.md") == b"block\n"
    assert r.get_pull(pull.number).merged
