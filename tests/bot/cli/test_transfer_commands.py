"""`playbook-bot import` and `export` as a user runs them: answers, refusals and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from playbook.lessons import checks
from tests.support import DATA


def test_cli_import_export(cli, tmp_path: Path) -> None:
    cli("add", "Retry payment webhooks with an idempotency key", "--learned-from", "CTMS-1")
    out = tmp_path / "out.yaml"
    written = cli("export", "-o", str(out))
    assert written.exit_code == 0 and "wrote 1 bullets" in written.stderr
    assert "Retry payment webhooks" in out.read_text()
    assert list(tmp_path.glob(".out.yaml.*")) == []  # no temporary file left behind
    assert cli("export", "--format", "csv").stdout.startswith("id,text,tags")
    result = cli("import", str(DATA / "team-playbook.yaml"))
    assert result.exit_code == 0
    assert result.stdout.strip() == "3 bullets created, 0 updated, 0 unchanged"
    assert cli("import", str(DATA / "team-playbook.yaml")).stdout.strip() == (
        "0 bullets created, 0 updated, 3 unchanged"
    )
    log = tmp_path / "log.jsonl"
    log.write_text('{"event": "cited", "lessonIds": ["pb-1"], "ticketId": "A"}\n')
    assert cli("import", str(log)).stdout.strip() == "1 usage events added, 0 already imported"
    assert cli("import", str(tmp_path / "nope.yaml")).exit_code == 2


def test_cli_refuses_a_bad_file_whole(cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text((DATA / "bad-playbook.yaml").read_text(encoding="utf-8"))
    result = cli("import", str(bad))
    assert result.exit_code == 2
    assert result.stdout == ""
    problems = result.stderr.splitlines()
    assert problems[:3] == [
        f"{bad}: line 5: text: is missing; a bullet needs some text",
        f"{bad}: line 7: learned_from: " + checks.LEARNED_FROM_MISSING,
        f"{bad}: line 12: status: 'bogus' is not one of proposed, active, deprecated, archived, "
        "superseded",
    ]
    assert problems[-1] == (f"error: 6 problems in {bad} (the first 5 above); nothing was imported")
    assert "Traceback" not in result.output
    assert cli("list", "--status", "all", "--json").stdout.strip() == "[]"
    one = tmp_path / "one.csv"
    one.write_text("text,learned_from\nFine,A-1\nNo provenance,\n")
    single = cli("import", str(one))
    assert single.exit_code == 2
    assert single.stderr == (
        f"error: {one}: line 3: learned_from: {checks.LEARNED_FROM_MISSING}; nothing was imported\n"
    )


def test_cli_import_uses_the_lesson_limit_setting(cli, tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"text": "x" * 2_500, "learned_from": "A-1"}) + "\n")
    assert "over the 2,000 allowed" in cli("import", str(path)).stderr
    monkeypatch.setenv("PLAYBOOK_MAX_LESSON_CHARS", "3000")
    assert cli("import", str(path)).exit_code == 0


def test_cli_export_to_a_bad_place_is_one_sentence(cli, tmp_path: Path) -> None:
    cli("add", "A lesson", "--learned-from", "A-1")
    missing = cli("export", "-o", str(tmp_path / "no" / "such" / "dir.yaml"))
    assert missing.exit_code == 2
    assert missing.stderr.startswith("error: cannot write") and "Traceback" not in missing.output
    folder = cli("export", "-o", str(tmp_path))
    assert folder.exit_code == 2 and "is a directory" in folder.stderr
