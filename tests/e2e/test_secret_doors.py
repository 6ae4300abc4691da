"""A lesson holding a credential is refused at every door that writes lesson text, with nothing
written and the value repeated nowhere: not in the answer, the logs or the bot's records."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from sqlalchemy import Engine

from bot.config import Settings
from bot.mcp_server import build_server, local_caller
from playbook.db import transaction
from playbook.lessons import lifecycle, secrets
from playbook.models import Bullet
from tests.loop_harness import REPO, Loop
from tests.payloads import issue_comment, pull_request
from tests.secret_samples import IDS, ORDINARY, SAMPLES, Sample, counts, stored_anywhere
from webhooks import create_app

AGENT = {"Authorization": "Bearer agent-token"}


@pytest.fixture(autouse=True)
def every_log_line(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Every log line of every logger, so a test can say the value is in none of them."""
    caplog.set_level(logging.DEBUG)
    return caplog


def refusal(sample: Sample) -> str:
    """The sentence every door answers with: kind and place, never the value."""
    [finding] = secrets.find(sample.text)
    return (
        f"text: holds {finding.describe()}; remove the credential (rotate it if it was real) "
        "and try again"
    )


def one_line(sample: Sample) -> str:
    """The sample as one line of a comment or a list item (a key block: its first line)."""
    first = sample.text.splitlines()[0]
    return first if "\n" not in sample.text else f"{first} {sample.value}"


def nowhere(engine: Engine, sample: Sample, caplog: pytest.LogCaptureFixture, *texts: str):
    """The value is in no answer given, no log line and none of the bot's records."""
    for text in texts:
        assert sample.value not in text
    assert sample.value not in caplog.text
    assert stored_anywhere(engine, sample.value) == []


# -- the command line --------------------------------------------------------------------------


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_cli_add_and_edit_refuse_in_one_line(cli, engine: Engine, sample: Sample, caplog):
    assert cli("add", "Keep this wording", "--learned-from", "CTMS-1").exit_code == 0
    before = counts(engine)
    added = cli("add", sample.text, "--learned-from", "CTMS-2")
    edited = cli("edit", "pb-1", "--text", sample.text)
    for result in (added, edited):
        assert result.exit_code == 2
        assert result.stderr == f"error: {refusal(sample)}\n"
        assert result.stdout == ""
    assert counts(engine) == before
    nowhere(engine, sample, caplog, added.output, edited.output)


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_cli_import_refuses_the_whole_file(cli, engine: Engine, tmp_path: Path, sample, caplog):
    path = tmp_path / "lessons.jsonl"
    entries = [
        {"text": "Retry webhooks with an idempotency key", "learned_from": "CTMS-1"},
        {"text": sample.text, "learned_from": "CTMS-2"},
    ]
    path.write_text("".join(json.dumps(entry) + "\n" for entry in entries), encoding="utf-8")
    result = cli("import", str(path))
    assert result.exit_code == 2
    assert result.stderr == f"error: {path}: line 2: {refusal(sample)}; nothing was imported\n"
    assert counts(engine) == (0, 0)
    nowhere(engine, sample, caplog, result.output)


def test_cli_import_rules_skips_the_item_and_shows_no_text(cli, engine, tmp_path: Path, caplog):
    sample = SAMPLES[1]
    path = tmp_path / "AGENTS.md"
    path.write_text(
        "# Rules\n\n"
        "- Run the linter before every push.\n"
        f"- {sample.text}\n\n"
        f"```sh\nexport GITHUB_TOKEN={sample.value}\n```\n",
        encoding="utf-8",
    )
    result = cli("import-rules", "AGENTS.md")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("AGENTS.md:3: added pb-1")
    assert lines[1] == (
        f"AGENTS.md:4: skipped, {refusal(sample)}: (not shown: it holds a GitHub token)"
    )
    assert lines[2] == "AGENTS.md:6: skipped, code block: (not shown: it holds a GitHub token)"
    as_json = cli("import-rules", "AGENTS.md", "--dry-run", "--json")
    assert [lesson["id"] for lesson in json.loads(cli("list", "--json").stdout)] == []  # proposed
    with transaction(engine) as session:
        assert [b.text for b in session.query(Bullet)] == ["Run the linter before every push."]
    nowhere(engine, sample, caplog, result.output, as_json.output)


# -- the HTTP API, MCP and the lesson page ----------------------------------------------------


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_api_answers_a_problem_naming_text(engine: Engine, settings, sample: Sample, caplog):
    api = create_app(
        settings.model_copy(update={"agent_tokens": "claude:agent-token"}), engine=engine
    ).test_client()
    answer = api.post(
        "/api/v1/lessons", json={"text": sample.text, "learned_from": "CTMS-1"}, headers=AGENT
    )
    assert answer.status_code == 400
    assert answer.mimetype == "application/problem+json"
    body = answer.get_json()
    assert body["field"] == "text" and body["detail"] == refusal(sample)
    assert counts(engine) == (0, 0)
    nowhere(engine, sample, caplog, answer.get_data(as_text=True))


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_mcp_propose_lesson_is_a_tool_error(engine: Engine, sample: Sample, caplog) -> None:
    settings = Settings(_env_file=None)
    server = build_server(settings, lambda: engine, local_caller(settings))
    shown: list[str] = []

    async def session() -> None:
        async with Client(server) as client:
            refused = await client.call_tool(
                "propose_lesson", {"text": sample.text, "learned_from": "CTMS-3"}
            )
            assert refused.is_error
            shown.append(" ".join(block.text for block in refused.content))

    anyio.run(session)
    assert refusal(sample) in shown[0]
    assert counts(engine) == (0, 0)
    nowhere(engine, sample, caplog, *shown)


def _signed_in(engine: Engine, settings: Any) -> Any:
    client = create_app(
        settings.model_copy(update={"api_token": "ui-token"}), engine=engine
    ).test_client()
    token = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/ui/login").text)
    assert token
    client.post("/ui/login", data={"token": "ui-token", "name": "c", "csrf_token": token[1]})
    return client


@pytest.mark.parametrize("sample", SAMPLES[:3], ids=IDS[:3])
def test_the_edit_form_shows_the_refusal_and_keeps_the_lesson(engine, settings, sample, caplog):
    with transaction(engine) as session:
        lifecycle.add(session, "Keep this wording", learned_from="CTMS-6", actor="t")
    before = counts(engine)
    client = _signed_in(engine, settings)
    token = re.search(
        r'name="csrf_token" value="([^"]+)"', client.get("/ui/lessons/pb-1/edit").text
    )
    assert token
    form = {"csrf_token": token[1], "text": sample.text, "scope": "global", "learned_from": "C-6"}
    answer = client.post("/ui/lessons/pb-1/edit", data=form)
    assert answer.status_code == 400
    assert f'<p class="flash error" role="alert">{refusal(sample)}</p>' in answer.text
    assert counts(engine) == before
    with transaction(engine) as session:
        assert session.get(Bullet, "pb-1").text == "Keep this wording"
    # The form keeps what the maintainer typed, to take the credential out; nothing else has it.
    nowhere(engine, sample, caplog)


@pytest.mark.parametrize("text", ORDINARY[:4])
def test_ordinary_text_gets_in_through_every_door(cli, engine: Engine, settings, text: str):
    assert cli("add", text, "--learned-from", "CTMS-1").exit_code == 0
    api = create_app(
        settings.model_copy(update={"agent_tokens": "claude:agent-token"}), engine=engine
    ).test_client()
    with transaction(engine) as session:
        lifecycle.deprecate(session, "pb-1", reason="room for the API's copy", actor="t")
    made = api.post("/api/v1/lessons", json={"text": text, "learned_from": "C-2"}, headers=AGENT)
    assert made.status_code == 201, made.get_json()


# -- the bot: Lessons sections and /lesson ----------------------------------------------------


def test_a_lessons_section_item_with_a_credential_is_skipped_and_the_pr_told(loop: Loop, caplog):
    loop.github.add_issue(REPO, 2, "CTMS-4337: dedupe webhook retries")
    kept = "Retry webhooks with an idempotency key, never twice"
    items = "".join(f"- {sample.text}\n" for sample in SAMPLES[:2])
    body = f"Fixes CTMS-4337.\n\n## Lessons\n- {kept}\n{items}"
    opened = pull_request("opened", body=body)
    loop.github_event("pull_request.opened", opened)
    loop.process()
    with transaction(loop.engine) as session:
        assert [b.text for b in session.query(Bullet)] == [kept]
    [reply] = loop.github.comments_on(REPO, 2)
    assert reply["body"].startswith("2 lessons in the Lessons section were not captured:\n")
    assert "- item 2 holds an AWS access key (line 1, characters " in reply["body"]
    assert "- item 3 holds a GitHub token (line 1, characters " in reply["body"]
    # A redelivery, and an edit that leaves one credential: the one reply is edited.
    loop.github_event("pull_request.opened", opened)
    one_left = body.replace(SAMPLES[0].value, "from the vault")
    loop.github_event("pull_request.edited", pull_request("edited", body=one_left))
    loop.process()
    [reply] = loop.github.comments_on(REPO, 2)
    assert reply["body"].startswith("1 lesson in the Lessons section was not captured: item 3")
    with transaction(loop.engine) as session:
        assert len(session.query(Bullet).all()) == 2  # item 2 is captured now
    clean = one_left.replace(SAMPLES[1].value, "from the vault")
    loop.github_event("pull_request.edited", pull_request("edited", body=clean))
    loop.process()
    [reply] = loop.github.comments_on(REPO, 2)
    assert reply["body"].startswith("The Lessons section no longer holds a credential")
    for sample in SAMPLES[:2]:
        nowhere(loop.engine, sample, caplog, reply["body"])


def test_lesson_commands_with_credentials_are_refused_in_the_reply(loop: Loop, caplog) -> None:
    loop.github.add_issue(REPO, 1, "Spelling error")
    loop.github.permissions[(REPO, "maintainer")] = "write"
    commands = "\n".join(f"/lesson {one_line(sample)}" for sample in SAMPLES)
    commands += "\n/lesson Run codespell in CI before merging docs"
    loop.github_event("issue_comment.created", issue_comment(commands, "maintainer"))
    loop.process()
    with transaction(loop.engine) as session:
        assert [b.text for b in session.query(Bullet)] == [
            "Run codespell in CI before merging docs"
        ]
    [reply] = loop.github.comments_on(REPO, 1)
    lines = [line for line in reply["body"].splitlines() if line and "<!--" not in line]
    assert len(lines) == len(SAMPLES) + 1
    for line, sample in zip(lines, SAMPLES, strict=False):
        assert line.startswith(f"Nothing changed: text: holds {sample.what} (line 1, characters ")
    assert lines[-1].startswith("Captured pb-1")
    for sample in SAMPLES:
        nowhere(loop.engine, sample, caplog, reply["body"])
