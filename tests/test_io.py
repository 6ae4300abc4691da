"""Import and export: every field round-trips, imports are idempotent, bad lines are reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import Engine, delete, func, select, update

from playbook import clock, io, lifecycle, usage
from playbook.db import transaction
from playbook.errors import InvalidInput
from playbook.models import Base, Bullet, PlaybookMeta, Revision, UsageEvent

DATA = Path(__file__).parent / "data"


def build(engine: Engine) -> None:
    """A playbook that has seen every kind of change and usage."""
    with transaction(engine) as session:
        for text, kwargs in [
            (
                "Retry payment webhooks with an idempotency key",
                {"tags": "payments,webhooks", "scope": "CTMS"},
            ),
            ("Never hold a row lock across an HTTP call", {"section": "error_resolution"}),
            (
                "Proposed lesson from a PR body, with ünïcode",
                {"status": "proposed", "source_url": "https://github.com/a/b/pull/1"},
            ),
            ("Lesson to be archived as unused", {}),
        ]:
            lifecycle.add(session, text, learned_from="CTMS-1", actor="alice", **kwargs)
        lifecycle.edit(
            session, "pb-2", actor="bob", text="Never hold a database row lock across HTTP"
        )
        lifecycle.deprecate(session, "pb-1", reason="pr_closed_unmerged", actor="bot")
        lifecycle.archive(session, "pb-4", reason="unused_30d", actor="prune")
        usage.record(
            session, "loaded", ["pb-1", "pb-2"], ticket_key="CTMS-9", ranks=[1, 2], query_id="q1"
        )
        usage.record(
            session, "cited", ["pb-2"], ticket_key="CTMS-9", success=True, phase="implement"
        )
        usage.record(session, "cited", ["pb-1"], ticket_key="CTMS-9", success=False)
        usage.record(session, "cited", ["pb-3"], ticket_key="CTMS-10")


def empty(engine: Engine) -> None:
    with engine.begin() as connection:
        for table in reversed(Base.metadata.sorted_tables):
            if table.name != PlaybookMeta.__tablename__:
                connection.execute(delete(table))
        connection.execute(update(PlaybookMeta).values(value=0))


def snapshot(engine: Engine) -> dict[str, dict]:
    with transaction(engine) as session:
        return {
            b.id: io.bullet_record(b) | {f: getattr(b, f) for f in usage.COUNTER_FIELDS}
            for b in session.scalars(select(Bullet))
        }


def counts(engine: Engine) -> tuple[int, int]:
    with transaction(engine) as session:
        return (
            session.scalar(select(func.count()).select_from(Revision)),
            session.scalar(select(func.count()).select_from(UsageEvent)),
        )


@pytest.mark.parametrize("fmt", ["yaml", "jsonl", "csv"])
def test_export_import_round_trips_every_field(engine: Engine, fmt: str, tmp_path: Path) -> None:
    build(engine)
    before = snapshot(engine)
    with transaction(engine) as session:
        bullets = io.export_bullets(session, fmt)  # type: ignore[arg-type]
        events = io.export_usage(session)
    empty(engine)
    bullets_file = tmp_path / f"playbook.{fmt}"
    bullets_file.write_text(bullets)
    usage_file = tmp_path / ".lesson-usage.jsonl"
    usage_file.write_text(events)
    with transaction(engine) as session:
        first = io.import_file(session, bullets_file, actor="restore")
        logged = io.import_file(session, usage_file, actor="restore")
    assert (first.created, first.errors) == (4, [])
    assert (logged.events_added, logged.errors) == (5, [])
    assert snapshot(engine) == before
    with transaction(engine) as session:
        assert usage.recount(session) == []
    revisions, event_count = counts(engine)
    with transaction(engine) as session:
        again = io.import_file(session, bullets_file, actor="restore")
        again_log = io.import_file(session, usage_file, actor="restore")
    assert (again.created, again.updated, again.unchanged) == (0, 0, 4)
    assert (again_log.events_added, again_log.events_duplicate) == (0, 5)
    assert counts(engine) == (revisions, event_count)
    assert snapshot(engine) == before


def test_yaml_export_is_in_the_teams_shape(engine: Engine) -> None:
    build(engine)
    with transaction(engine) as session:
        text = io.export_bullets(session, "yaml")
    first = text.split("\n- ")[0]
    assert first.startswith("- id: pb-1\n  text: Retry payment webhooks")
    assert "  deprecated: true\n" in first and "demoted_reason: pr_closed_unmerged" in first


def test_team_yaml_with_extra_keys_and_deprecated_flag(engine: Engine) -> None:
    with transaction(engine) as session:
        report = io.import_file(session, DATA / "team-playbook.yaml", actor="import")
        assert (report.created, report.errors) == (3, [])
        kept = lifecycle.get(session, "CTMS-L-1")
        assert (kept.status, kept.tags, kept.learned_from) == (
            "active",
            ["payments", "webhooks"],
            "CTMS-4001",
        )
        old = lifecycle.get(session, "pb-7")
        assert (old.status, old.demoted_reason) == ("deprecated", "pr_closed_unmerged")
        assert old.demoted_on == clock.parse_time("2026-10-01T12:00:00Z")
        # The imported pb-7 reserves its number: the next new bullet gets pb-8.
        new = session.scalars(select(Bullet).where(Bullet.text.like("Never hold%"))).one()
        assert new.id == "pb-8" and new.tags == ["locks", "postgres"]
        assert (
            lifecycle.add(session, "Brand new lesson", learned_from="X-1", actor="t").bullet.id
            == "pb-9"
        )
    with transaction(engine) as session:
        again = io.import_file(session, DATA / "team-playbook.yaml", actor="import")
    assert (again.created, again.updated, again.unchanged) == (0, 0, 3)


def test_an_edited_file_updates_with_a_revision(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("- id: pb-1\n  text: First wording\n")
    with transaction(engine) as session:
        io.import_file(session, path, actor="import")
    path.write_text("- id: pb-1\n  text: Second wording\n  deprecated: true\n")
    with transaction(engine) as session:
        report = io.import_file(session, path, actor="import")
        assert report.updated == 1
        bullet = lifecycle.get(session, "pb-1")
        assert (bullet.text, bullet.status) == ("Second wording", "deprecated")
        last = lifecycle.history(session, "pb-1")[-1]
        assert (last.action, last.before["text"]) == ("import", "First wording")


def test_bad_entries_are_reported_with_their_position(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "- id: pb-1\n  text: Fine\n- id: pb-2\n- just a string\n"
        "- id: pb-3\n  text: Bad status\n  status: retired\n"
        "- id: pb-4\n  text: Bad date\n  created_at: soon\n"
    )
    with transaction(engine) as session:
        report = io.import_file(session, path, actor="import")
    assert report.created == 1
    assert [position for position, _ in report.errors] == [2, 3, 4, 5]
    assert "no text" in report.errors[0][1]
    assert "retired" in report.errors[2][1]
    assert "not a date" in report.errors[3][1]


def test_usage_log_bad_lines_are_reported_and_skipped(engine: Engine, tmp_path: Path) -> None:
    with transaction(engine) as session:
        lifecycle.add(session, "A lesson", learned_from="A-1", actor="t")
        lifecycle.add(session, "Another lesson entirely", learned_from="A-2", actor="t")
    lines = [
        {
            "event": "loaded",
            "lessonIds": ["pb-1", "pb-2"],
            "ticketId": "A-9",
            "phase": "plan",
            "consumer": "claude",
            "ts": 1793610891301,
        },
        "{not json",
        {"event": "cited", "lessonIds": ["pb-404"], "ticketId": "A-9"},
        {"event": "cited", "lessonIds": ["pb-1"], "ticketId": "A-9", "ts": "next week"},
        {
            "event": "cited",
            "lessonIds": ["pb-1"],
            "ticketId": "A-9",
            "phaseSuccess": True,
            "ts": "2026-11-02T09:14:51Z",
        },
        "",
    ]
    path = tmp_path / ".lesson-usage.jsonl"
    path.write_text(
        "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    )
    with transaction(engine) as session:
        report = io.import_file(session, path, actor="import")
        assert report.events_added == 3
        assert [position for position, _ in report.errors] == [2, 3, 4]
        assert "pb-404" in report.errors[1][1] and "ts" in report.errors[2][1]
        first = lifecycle.get(session, "pb-1")
        assert (first.loads, first.cites, first.cites_success) == (1, 1, 1)
        assert first.last_loaded_at == clock.parse_time(1793610891301)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("p.yaml", "- id: [unclosed\n", "not valid YAML at line"),
        ("p.yaml", "just: a mapping\n", "list of bullets"),
        ("p.txt", "x", "unknown extension"),
        ("p.csv", "id,words\n1,x\n", "header row"),
    ],
)
def test_unreadable_files_raise_one_sentence(
    engine: Engine, tmp_path: Path, name: str, content: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    with transaction(engine) as session, pytest.raises(InvalidInput, match=message):
        io.import_file(session, path, actor="import")
    with transaction(engine) as session, pytest.raises(InvalidInput, match="does not exist"):
        io.import_file(session, tmp_path / "missing.yaml", actor="import")


def test_cli_import_export(cli, tmp_path: Path) -> None:
    cli("add", "Retry payment webhooks with an idempotency key", "--learned-from", "CTMS-1")
    out = tmp_path / "out.yaml"
    assert cli("export", "-o", str(out)).exit_code == 0
    assert "Retry payment webhooks" in out.read_text()
    assert cli("export", "--format", "csv").stdout.startswith("id,text,tags")
    result = cli("import", str(DATA / "team-playbook.yaml"))
    assert result.exit_code == 0
    assert result.stdout.strip() == "3 bullets created, 0 updated, 0 unchanged"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"event": "cited", "lessonIds": ["pb-1"], "ticketId": "A"}\n{oops\n')
    partial = cli("import", str(bad))
    assert partial.exit_code == 2
    assert f"{bad}:2: not JSON" in partial.stderr
    assert "1 usage events added" in partial.stdout
    assert cli("import", str(tmp_path / "nope.yaml")).exit_code == 2
