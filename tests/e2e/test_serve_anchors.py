"""Lessons anchored to code, through `serve` as a user runs it: lessons added by the CLI, the
API and MCP; signed `pull_request` deliveries against a fake GitHub; the PR comment, the stale
flags and their clearing seen through the commands, the API and the web page."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from sqlalchemy import Engine, select

from playbook import db
from playbook.db import transaction
from playbook.models import Delivery
from playbook.repos.syncs import BRANCH
from tests.bot.processes import wait_for
from tests.fakes.github import FakeGitHub
from tests.loop_harness import _KEYS, APP_ID
from tests.payloads import INSTALLATION, REPO, fixture, pull_request, push
from tests.serve_process import clean_env, request, run_cli, serving
from tests.support import GITHUB_SECRET
from webhooks.signatures import sign

pytestmark = pytest.mark.slow

TOKEN = "maintainer-token-for-the-anchors-probe"
AGENT_TOKEN = "agent-token-for-the-anchors-probe"
HEAD = "### Lessons for the files this pull request changes"
NONE_ANY_MORE = "No lesson in the playbook applies to the files this pull request changes"
SETTINGS_FILE = ".github/playbook-bot.yml"
BOT = {"login": "playbook-bot[bot]", "type": "Bot"}
# A delivery is finished in one of these; "failed" is retried.
FINISHED = ("done", "ignored", "dead")


@dataclass
class World:
    """A `serve` process on SQLite in ``cwd``, its fake GitHub, and the doors a user has."""

    url: str
    cwd: Path
    env: dict[str, str]
    github: FakeGitHub
    engine: Engine  # polls delivery statuses only; everything asserted goes through doors
    answered: dict[str, Any] = field(default_factory=dict)  # the webhook's last answer

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(self.cwd, self.env, *args)

    def ok(self, *args: str) -> str:
        """A command that must succeed; its output."""
        done = self.cli(*args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        return done.stdout

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        data = json.dumps(body).encode() if body is not None else None
        return request(f"{self.url}/api/v1{path}", data, headers, method)

    def post(
        self, payload: dict[str, Any], delivery: str | None = None, event: str = "pull_request"
    ) -> str:
        """Send a signed delivery of ``event`` as GitHub does; its GUID."""
        payload.setdefault("installation", {"id": INSTALLATION})
        body = json.dumps(payload).encode()
        delivery = delivery or str(uuid.uuid4())
        headers = {
            "Content-Type": "application/json",
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery,
            "X-Hub-Signature-256": sign(GITHUB_SECRET, body),
        }
        status, self.answered = request(f"{self.url}/webhooks/github", body, headers)
        assert status in (200, 202), self.answered
        return delivery

    def settle(self, delivery: str) -> str:
        """Wait until serve finished ``delivery``; its status."""
        wait_for(lambda: self.status(delivery) in FINISHED, f"delivery {delivery} finished")
        return str(self.status(delivery))

    def status(self, delivery: str) -> str | None:
        with transaction(self.engine) as session:
            query = select(Delivery.status).where(Delivery.delivery_id == delivery)
            return session.scalar(query)

    def files(self, number: int, *changed: str | tuple[str, str, str | None]) -> None:
        """The PR's changed files from now on: a path (modified) or (status, path, previous)."""
        if (REPO, number) not in self.github.pulls:
            self.github.add_pull(REPO, number, title="CTMS-4337: dedupe webhook retries")
        self.github.pull_files[(REPO, number)] = []
        for one in changed:
            status, path, previous = ("modified", one, None) if isinstance(one, str) else one
            self.github.add_pull_file(REPO, number, path, "+x", status, previous=previous)

    def pr(self, action: str, number: int, *changed: Any, **fields: Any) -> str:
        """The PR's files are ``changed`` (when given); deliver ``action``; wait; its GUID."""
        if changed:
            self.files(number, *changed)
        closed = action == "merged"
        payload = pull_request(
            "closed" if closed else action, number=number, merged=closed, **fields
        )
        delivery = self.post(payload)
        status = self.settle(delivery)
        assert status in ("done", "ignored"), self.cli("deliveries", "show", delivery).stdout
        return delivery

    def comments(self, number: int) -> list[str]:
        """The bot's anchors comments on PR ``number``."""
        return [c["body"] for c in self.github.comments_on(REPO, number) if HEAD in c["body"]]

    def add(self, text: str, paths: str) -> str:
        """A lesson of the repository added by `playbook-bot add --paths`; its id."""
        out = self.ok("add", text, "--learned-from", "CTMS-1", "--scope", REPO, "--paths", paths)
        return re.findall(r"pb-\d+", out)[0]

    def stale(self) -> dict[str, dict[str, Any]]:
        """`playbook-bot stale --json`, by lesson id."""
        return {row["id"]: row for row in json.loads(self.ok("stale", "--json"))}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    github = FakeGitHub(app_id=APP_ID, public_key=_KEYS[1])
    github.start()
    github.add_installation(INSTALLATION)
    github.add_repo(REPO)
    env = clean_env() | {
        "GITHUB_WEBHOOK_SECRET": GITHUB_SECRET,
        "GITHUB_APP_ID": str(APP_ID),
        "GITHUB_APP_PRIVATE_KEY": _KEYS[0],
        "GITHUB_API_URL": github.url,
        "PLAYBOOK_GITHUB_SECONDS_BETWEEN_REQUESTS": "0",
        "PLAYBOOK_GITHUB_SECONDS_BETWEEN_WRITES": "0",
        "PLAYBOOK_WORKER_POLL_SECONDS": "0.1",
        "PLAYBOOK_RETRY_BASE_SECONDS": "1",
        "PLAYBOOK_API_TOKEN": TOKEN,
        "PLAYBOOK_AGENT_TOKENS": f"probe@{REPO}:{AGENT_TOKEN}",
        "PLAYBOOK_ACTOR": "maintainer",
        "PLAYBOOK_UI_PUBLIC_READ": "1",  # /ui/stats read as anyone may
        "LOG_FORMAT": "json",
    }
    engine = None
    try:
        with serving(tmp_path, env) as url:
            engine = db.make_engine(f"sqlite:///{tmp_path / 'playbook.db'}")
            yield World(url, tmp_path, env, github, engine)
    finally:
        if engine is not None:
            engine.dispose()
        github.stop()


def mcp_propose(world: World, text: str, paths: list[str]) -> str:
    """An agent proposes a lesson anchored to ``paths`` over MCP; its id."""

    async def call() -> str:
        with anyio.fail_after(60):
            async with (
                create_mcp_http_client(headers={"Authorization": f"Bearer {AGENT_TOKEN}"}) as http,
                Client(streamable_http_client(f"{world.url}/mcp", http_client=http)) as client,
            ):
                answer = await client.call_tool(
                    "propose_lesson", {"text": text, "learned_from": f"{REPO}#12", "paths": paths}
                )
                assert not answer.is_error, answer
                return answer.structured_content["lesson"]["id"]

    return anyio.run(call)


def listed(body: str) -> list[str]:
    """The lesson ids a comment lists, in order."""
    return re.findall(r"^- \*\*\[(pb-\d+)\]\*\*", body, re.MULTILINE)


def test_a_pull_request_through_serve_from_comment_to_stale_flag_and_clear(world: World) -> None:
    locking = world.add("Take the orders row lock once per transaction", "orders/**")
    status, made = world.api(
        "POST",
        "/lessons",
        {
            "text": "Retry confirmation emails with backoff",
            "learned_from": "CTMS-3",
            "scope": REPO,
            "paths": ["mail/**/*.py"],
        },
    )
    assert status == 201, made
    emails = made["lesson"]["id"]
    assert world.api("POST", f"/lessons/{emails}/approve", {})[0] == 200
    hooks = mcp_propose(world, "Dedupe webhook retries on the event id", ["web/hooks.py"])
    assert world.api("POST", f"/lessons/{hooks}/approve", {})[0] == 200
    world.add("Unanchored lessons stay out of the PR comment", "")

    # Opened: one comment, only the lessons anchored to the changed files.
    world.pr("opened", 2, "orders/locking.py", "README.md")
    [body] = world.comments(2)
    assert listed(body) == [locking]
    assert "anchored to orders/locking.py" in body

    # A push: the same comment, edited.
    world.pr("synchronize", 2, "orders/locking.py", "mail/send/retry.py", "web/hooks.py")
    [body] = world.comments(2)
    assert set(listed(body)) == {locking, emails, hooks}
    world.pr("ready_for_review", 2)
    assert len(world.comments(2)) == 1
    assert len(world.github.comments_on(REPO, 2)) == 1
    # What the comment showed counts as loads of the PR's ticket, once per lesson.
    status, detail = world.api("GET", f"/lessons/{locking}")
    loads = [(e["ticket"], e["pull_request"]) for e in detail["events"] if e["kind"] == "loaded"]
    assert (status, loads) == (200, [("CTMS-4337", f"{REPO}#2")])

    # A push that leaves every anchored file: the comment says so, still one.
    world.pr("synchronize", 2, "docs/index.md")
    [body] = world.comments(2)
    assert NONE_ANY_MORE in body and listed(body) == []

    # The bot's own sync PR gets nothing.
    world.pr("opened", 3, "orders/locking.py", branch=BRANCH, author=BOT)
    assert world.github.comments_on(REPO, 3) == []

    # Merged: a rename followed, a deletion flagged.
    world.pr(
        "merged",
        4,
        ("renamed", "orders/locks.py", "orders/locking.py"),
        ("removed", "web/hooks.py", None),
        "mail/send/retry.py",
    )
    flagged = world.stale()
    assert set(flagged) == {locking, hooks, emails}
    assert flagged[locking]["stale_detail"] == (
        f"{REPO}#4 renamed orders/locking.py -> orders/locks.py"
    )
    assert flagged[hooks]["stale_detail"] == (
        f"{REPO}#4 removed every file it is about (deleted web/hooks.py)"
    )
    assert (flagged[hooks]["files_gone"], flagged[locking]["files_gone"]) == (True, False)
    assert flagged[emails]["stale_pr"] == f"{REPO}#4"
    status, listing = world.api("GET", "/stale")
    assert status == 200
    assert {row["id"] for row in listing["lessons"]} == {locking, hooks, emails}
    status, page = request(f"{world.url}/ui/stats")
    assert status == 200 and "Possibly stale" in page, page
    assert f">{locking}</a>" in page and f">{hooks}</a>" in page
    assert "left out of AGENTS.md until looked at" in page
    assert "possibly stale: 3 lessons flagged (`playbook-bot stale`)" in world.ok("stats")
    status, page = request(f"{world.url}/ui/lessons/{hooks}")
    assert status == 200 and "Possibly stale since" in page
    assert f"{REPO}#4 removed every file it is about (deleted web/hooks.py)" in page

    # A clear by the CLI, a clear by the API, a confirmation by an edit.
    world.ok("stale", "--clear", locking, "--reason", "still true after the rename")
    status, cleared = world.api("POST", f"/lessons/{hooks}/clear-stale", {"reason": "checked"})
    assert (status, cleared["changed"]) == (200, True)
    assert world.api("POST", f"/lessons/{hooks}/clear-stale", {})[1]["changed"] is False
    world.ok("edit", emails, "--text", "Retry confirmation emails with jittered backoff")
    assert world.stale() == {}
    assert "stale flag cleared" in world.ok("history", emails)
    assert "still true after the rename" in world.ok("history", locking)


def api_lesson(world: World, text: str, paths: list[str]) -> str:
    """An active lesson of the repository anchored to ``paths``, proposed and approved by the
    maintainer through the API; its id."""
    body = {"text": text, "learned_from": "CTMS-5", "scope": REPO, "paths": paths}
    status, made = world.api("POST", "/lessons", body)
    assert status == 201, made
    assert world.api("POST", f"/lessons/{made['lesson']['id']}/approve", {})[0] == 200
    return made["lesson"]["id"]


def test_three_thousand_files_and_a_path_of_unicode_and_spaces(world: World) -> None:
    odd = "docs/Guía de estilo/naïve \u2013 ünïcode.md"
    styled = api_lesson(world, "Keep the style guide's headings in sentence case", [odd])
    many = [f"generated/{n:04}.py" for n in range(2999)]
    world.pr("opened", 7, *many, odd)
    [body] = world.comments(7)
    assert listed(body) == [styled]
    assert f"anchored to {odd}" in body
    pages = world.github.calls("GET", f"/repos/{REPO}/pulls/7/files")
    assert len(pages) == 30  # GitHub's 3,000 files, a hundred a page

    world.pr("merged", 7, *many, ("renamed", "docs/guide/naive.md", odd))
    status, got = world.api("GET", f"/lessons/{styled}")
    assert status == 200 and got["paths"] == ["docs/guide/naive.md"]
    assert world.stale()[styled]["stale_detail"] == (
        f"{REPO}#7 renamed {odd} -> docs/guide/naive.md"
    )


def test_a_rename_chain_across_two_merged_prs_is_followed_to_the_end(world: World) -> None:
    moved = world.add("Keep the order state machine pure", "orders/state.py")
    first = world.pr("merged", 8, ("renamed", "orders/machine.py", "orders/state.py"))
    world.ok("stale", "--clear", moved, "--reason", "the rename changed nothing")
    # The merge processed again (a replay, or GitHub sending it twice) flags nothing again.
    assert "queued 1 delivery" in world.ok("deliveries", "replay", first)
    assert world.settle(first) == "done"
    assert world.stale() == {}
    world.pr("merged", 9, ("renamed", "core/orders/machine.py", "orders/machine.py"))
    [flag] = world.stale().values()
    assert flag["paths"] == ["core/orders/machine.py"]
    assert flag["stale_detail"] == (f"{REPO}#9 renamed orders/machine.py -> core/orders/machine.py")
    # A new PR on the file's newest name lists the lesson, marked as flagged.
    world.pr("opened", 10, "core/orders/machine.py")
    [body] = world.comments(10)
    assert listed(body) == [moved]
    assert "flagged as possibly out of date" in body


def test_a_redelivery_and_a_files_read_failing_once(world: World) -> None:
    locking = world.add("Take the orders row lock once per transaction", "orders/**")
    opened = world.pr("opened", 11, "orders/locking.py")
    assert len(world.comments(11)) == 1
    # GitHub's "Redeliver" sends the same GUID again: nothing is done twice.
    world.post(pull_request("opened", number=11), delivery=opened)
    assert world.answered == {"status": "duplicate", "delivery": opened}
    assert world.settle(opened) == "done"
    assert len(world.github.comments_on(REPO, 11)) == 1

    # The files endpoint fails once: the delivery is retried and then comments.
    world.github.fail("GET", f"/repos/{REPO}/pulls/11/files", 500)
    world.files(11, "orders/locking.py", "orders/models.py")
    pushed = world.post(pull_request("synchronize", number=11))
    assert world.settle(pushed) == "done"
    shown = json.loads(world.ok("deliveries", "show", pushed))
    assert (shown["status"], shown["attempts"], shown["error_kind"]) == ("done", 2, "transient")
    assert shown["last_error"] == "GitHub answered HTTP 500: injected failure"
    [body] = world.comments(11)
    assert listed(body) == [locking] and "orders/models.py" in body


def test_pr_comment_false_keeps_the_pull_request_quiet(world: World) -> None:
    world.github.put_file(REPO, SETTINGS_FILE, b"pr_comment: false\n")
    world.add("Take the orders row lock once per transaction", "orders/**")
    opened = world.pr("opened", 12, "orders/locking.py")
    assert world.github.comments_on(REPO, 12) == []
    assert world.comments(12) == []
    # The delivery is done (its ticket is still tracked) and says what it skipped, and why.
    shown = json.loads(world.ok("deliveries", "show", opened))
    assert shown["status"] == "done"
    assert shown["reason"] == (
        f"{REPO} asked for no PR comment (pr_comment: false in {SETTINGS_FILE})"
    )
    assert f"{REPO} asked for no PR comment" in world.ok("deliveries", "list")


def test_anchors_edited_through_the_api_while_a_pr_is_open(world: World) -> None:
    moving = world.add("Send receipts after the commit, not inside it", "mail/**")
    world.pr("opened", 13, "billing/receipts.py")
    assert world.comments(13) == []
    status, changed = world.api(
        "POST", f"/lessons/{moving}/anchors", {"paths": ["billing/**"], "reason": "moved"}
    )
    assert (status, changed["lesson"]["paths"]) == (200, ["billing/**"]), changed
    world.pr("synchronize", 13, "billing/receipts.py")
    [body] = world.comments(13)
    assert listed(body) == [moving]
    assert world.api("POST", f"/lessons/{moving}/anchors", {"paths": []})[0] == 200
    world.pr("synchronize", 13, "billing/receipts.py")
    [body] = world.comments(13)
    assert NONE_ANY_MORE in body


def test_bad_anchors_and_bad_ids_get_one_line_answers_on_every_door(world: World) -> None:
    known = world.add("Take the orders row lock once per transaction", "orders/**")
    for bad in ("../secrets/*", "/etc/passwd", "a" * 5000, ",".join(f"d{n}/**" for n in range(40))):
        added = world.cli("add", "Another lesson", "--learned-from", "CTMS-1", "--paths", bad)
        edited = world.cli("edit", known, "--paths", bad)
        for done in (added, edited):
            assert done.returncode != 0 and "Traceback" not in done.stderr, done
            assert len(done.stderr.strip().splitlines()) == 1, done.stderr
            assert "paths" in done.stderr, done.stderr
        status, problem = world.api("POST", f"/lessons/{known}/anchors", {"paths": [bad]})
        assert status == 400 and problem["detail"].startswith("paths: "), (status, problem)
        assert "Value error" not in problem["detail"]
    for door in (world.cli("stale", "--clear", "pb-99999"), world.cli("stale", "--clear", "x")):
        assert door.returncode != 0 and "Traceback" not in door.stderr, door
    assert world.api("POST", "/lessons/pb-99999/clear-stale", {})[0] == 404
    assert world.api("POST", "/lessons/nonsense/clear-stale", {})[0] == 404
    assert request(f"{world.url}/api/v1/stale")[0] == 401
    # An agent's token reads the flags of its scope; clearing one is a maintainer's call.
    agent = {"Authorization": f"Bearer {AGENT_TOKEN}", "Content-Type": "application/json"}
    assert request(f"{world.url}/api/v1/stale", headers=agent) == (200, {"lessons": []})
    cleared = request(f"{world.url}/api/v1/lessons/{known}/clear-stale", b"{}", agent)
    assert cleared[0] == 403, cleared
    not_flagged = world.cli("stale", "--clear", known)
    assert "Traceback" not in not_flagged.stderr, not_flagged
    assert world.stale() == {}


def test_a_lesson_whose_files_are_gone_is_warned_of_and_left_out_of_agents_md(
    world: World,
) -> None:
    world.github.put_file(REPO, SETTINGS_FILE, b"agents_md:\n  enabled: true\n")
    gone = world.add("Spelling errors in the README: run codespell in CI", "README.md")
    kept = world.add("README spelling: commit has one t", "docs/**")
    world.pr("merged", 14, ("removed", "README.md", None), "docs/index.md")
    assert world.stale()[gone]["files_gone"] is True

    world.github.add_issue(REPO, 1, "Spelling error in the README file")
    opened = world.post(fixture("issues.opened"), event="issues")
    assert world.settle(opened) == "done"
    [comment] = world.github.comments_on(REPO, 1)
    body = comment["body"]
    assert f"**[{gone}]**" in body and f"**[{kept}]**" in body
    assert body.count("the files it is about were removed in") == 1

    block = world.ok("agents-md", "sync", "--repo", REPO, "--dry-run")
    assert f"[{kept}]" in block and f"[{gone}]" not in block
    world.ok("stale", "--clear", gone, "--reason", "codespell runs on docs now")
    block = world.ok("agents-md", "sync", "--repo", REPO, "--dry-run")
    assert f"[{kept}]" in block and f"[{gone}]" in block

    # The real sync PR, as GitHub tells of it: no lessons for its files, and its merge
    # flags no lesson anchored to AGENTS.md (the bot wrote it from the lessons).
    short = world.add("Keep AGENTS.md short and to the point", "AGENTS.md")
    assert "opened PR #" in world.ok("agents-md", "sync", "--repo", REPO)
    [(number, pull)] = [
        (number, pull)
        for (repo, number), pull in world.github.pulls.items()
        if repo == REPO and pull["head"]["ref"] == BRANCH
    ]
    world.github.add_pull_file(REPO, number, "AGENTS.md", "+x", "modified")
    opened = world.pr("opened", number, branch=BRANCH, author=pull["user"])
    assert world.github.comments_on(REPO, number) == []
    assert (
        "sync PR gets no lessons for its files"
        in json.loads(world.ok("deliveries", "show", opened))["reason"]
    )
    world.pr("merged", number, branch=BRANCH, author=pull["user"])
    assert short not in world.stale()


def test_max_lessons_in_the_settings_file_keeps_the_best_fitting(world: World) -> None:
    world.github.put_file(REPO, SETTINGS_FILE, b"max_lessons: 1\n")
    world.add("Keep the CDN purge list sorted", "web/**")
    fitting = world.add("Dedupe webhook retries on the provider's event id", "web/**")
    world.pr("opened", 15, "web/hooks.py", title="CTMS-4337: dedupe webhook retries")
    [body] = world.comments(15)
    # Both are anchored to the file; the cap keeps the one whose words fit the PR's title.
    assert listed(body) == [fitting]


def test_pr_comment_turned_off_by_a_push_while_a_pr_is_open(world: World) -> None:
    world.add("Take the orders row lock once per transaction", "orders/**")
    world.pr("opened", 16, "orders/locking.py")
    [before] = world.comments(16)
    world.github.put_file(REPO, SETTINGS_FILE, b"pr_comment: false\n")
    pushed = world.post(push(REPO, SETTINGS_FILE), event="push")
    assert world.settle(pushed) in ("done", "ignored")
    quiet = world.pr("synchronize", 16, "orders/locking.py", "orders/models.py")
    assert world.comments(16) == [before]  # left as it was, not edited
    assert "pr_comment: false" in json.loads(world.ok("deliveries", "show", quiet))["reason"]


def test_a_lesson_listed_on_a_pr_is_flagged_when_that_pr_merges(world: World) -> None:
    # One glob rule: a wildcard-free anchor names the file or the directory, for both.
    directory = world.add("Take the orders row lock once per transaction", "orders")
    world.pr("opened", 17, "orders/locking.py")
    assert [directory] == [i for body in world.comments(17) for i in listed(body)]
    world.pr("merged", 17)
    assert directory in world.stale()
