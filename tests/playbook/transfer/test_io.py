"""Import and export: every field round-trips, imports are idempotent and batched, and a bad file
is refused whole with its problems named by file line."""

from __future__ import annotations

import io as stdio
import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, delete, func, select, update

from playbook import clock
from playbook.db import transaction
from playbook.errors import InvalidInput
from playbook.lessons import bulk, lifecycle
from playbook.models import Base, Bullet, PlaybookMeta, Revision, UsageEvent
from playbook.outcomes import usage
from playbook.transfer import export, formats, imports, reports, usage_log
from tests.support import DATA


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
            b.id: export.bullet_record(b) | {f: getattr(b, f) for f in usage.COUNTER_FIELDS}
            for b in session.scalars(select(Bullet))
        }


def counts(engine: Engine) -> tuple[int, int, int]:
    """Bullets, revisions and usage events stored."""
    with transaction(engine) as session:
        return (
            session.scalar(select(func.count()).select_from(Bullet)),
            session.scalar(select(func.count()).select_from(Revision)),
            session.scalar(select(func.count()).select_from(UsageEvent)),
        )


def import_path(engine: Engine, path: Path, **kwargs) -> reports.ImportReport:
    with transaction(engine) as session:
        return imports.import_file(session, path, actor="import", **kwargs)


def refused(engine: Engine, path: Path, **kwargs) -> reports.ImportRefused:
    """Import ``path``, expect it refused whole, check nothing was written, return the refusal."""
    before = counts(engine)
    with pytest.raises(reports.ImportRefused) as caught:
        import_path(engine, path, **kwargs)
    assert counts(engine) == before
    return caught.value


def lines_and_fields(refusal: reports.ImportRefused) -> list[tuple[int, str]]:
    return [(p.line, p.message.split(":")[0]) for p in refusal.problems]


@pytest.mark.parametrize("fmt", ["yaml", "jsonl", "csv"])
def test_export_import_round_trips_every_field(engine: Engine, fmt: str, tmp_path: Path) -> None:
    build(engine)
    before = snapshot(engine)
    with transaction(engine) as session:
        bullets = export.export_bullets(session, fmt)  # type: ignore[arg-type]
        events = usage_log.export_usage(session)
    empty(engine)
    bullets_file = tmp_path / f"playbook.{fmt}"
    bullets_file.write_text(bullets)
    usage_file = tmp_path / ".lesson-usage.jsonl"
    usage_file.write_text(events)
    with transaction(engine) as session:
        first = imports.import_file(session, bullets_file, actor="restore")
        logged = imports.import_file(session, usage_file, actor="restore")
    assert first.created == 4
    assert logged.events_added == 5
    assert snapshot(engine) == before
    with transaction(engine) as session:
        assert usage.recount(session) == []
    stored = counts(engine)
    with transaction(engine) as session:
        again = imports.import_file(session, bullets_file, actor="restore")
        again_log = imports.import_file(session, usage_file, actor="restore")
    assert (again.created, again.updated, again.unchanged) == (0, 0, 4)
    assert (again_log.events_added, again_log.events_duplicate) == (0, 5)
    assert counts(engine) == stored
    assert snapshot(engine) == before


def test_yaml_export_is_in_the_teams_shape(engine: Engine) -> None:
    build(engine)
    with transaction(engine) as session:
        text = export.export_bullets(session, "yaml")
    first = text.split("\n- ")[0]
    assert first.startswith("- id: pb-1\n  text: Retry payment webhooks")
    assert "  deprecated: true\n" in first and "demoted_reason: pr_closed_unmerged" in first
    assert [entry["id"] for entry in yaml.safe_load(text)] == ["pb-1", "pb-2", "pb-3", "pb-4"]


def test_export_orders_numbered_ids_by_number_then_the_others(engine: Engine) -> None:
    with transaction(engine) as session:
        for bullet_id in ("pb-10", "zeta", "pb-2", "CTMS-L-1"):
            bulk.put(
                session,
                {"id": bullet_id, "text": f"lesson {bullet_id}", "learned_from": "A-1"},
                actor="t",
            )
        lifecycle.deprecate(session, "pb-10", reason="old", actor="t")
        out = stdio.StringIO()
        assert export.write_bullets(session, out, "jsonl") == 4
        only_active = export.export_bullets(session, "csv", ["active"])
        assert export.export_bullets(session, "yaml", ["proposed"]) == "[]\n"
    assert [json.loads(line)["id"] for line in out.getvalue().splitlines()] == [
        "pb-2",
        "pb-10",
        "CTMS-L-1",
        "zeta",
    ]
    assert [row.split(",")[0] for row in only_active.splitlines()] == [
        "id",
        "pb-2",
        "CTMS-L-1",
        "zeta",
    ]


def test_team_yaml_with_extra_keys_and_deprecated_flag(engine: Engine) -> None:
    with transaction(engine) as session:
        report = imports.import_file(session, DATA / "team-playbook.yaml", actor="import")
        assert report.created == 3
        kept = lifecycle.get(session, "CTMS-L-1")
        assert (kept.status, kept.tags, kept.learned_from) == (
            "active",
            ["payments", "webhooks"],
            "CTMS-4001",
        )
        old = lifecycle.get(session, "pb-7")
        assert (old.status, old.demoted_reason) == ("deprecated", "pr_closed_unmerged")
        assert old.demoted_on == clock.parse_time("2026-10-01T12:00:00Z")
        # The imported pb-7 reserves its number: the entry without an id gets pb-8.
        new = session.scalars(select(Bullet).where(Bullet.text.like("Never hold%"))).one()
        assert new.id == "pb-8" and new.tags == ["locks", "postgres"]
        assert (
            lifecycle.add(session, "Brand new lesson", learned_from="X-1", actor="t").bullet.id
            == "pb-9"
        )
    with transaction(engine) as session:
        again = imports.import_file(session, DATA / "team-playbook.yaml", actor="import")
    assert (again.created, again.updated, again.unchanged) == (0, 0, 3)


def test_an_edited_file_updates_with_a_revision(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("- id: pb-1\n  text: First wording\n  learned_from: A-1\n")
    import_path(engine, path)
    path.write_text("- id: pb-1\n  text: Second wording\n  learned_from: A-1\n  deprecated: true\n")
    assert import_path(engine, path).updated == 1
    with transaction(engine) as session:
        bullet = lifecycle.get(session, "pb-1")
        assert (bullet.text, bullet.status) == ("Second wording", "deprecated")
        last = lifecycle.history(session, "pb-1")[-1]
        assert (last.action, last.before["text"]) == ("import", "First wording")


# Six problems on known lines, for the refusals below and the CLI's.
BAD_YAML = (DATA / "bad-playbook.yaml").read_text(encoding="utf-8")


def test_a_bad_yaml_file_is_refused_whole_with_file_lines(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(BAD_YAML)
    refusal = refused(engine, path)
    # Lines of the file, each at the field that is wrong (or the entry, for a missing one).
    assert lines_and_fields(refusal) == [
        (5, "text"),
        (7, "learned_from"),
        (12, "status"),
        (13, "id"),
        (19, "created_at"),
    ]
    assert refusal.total == 6
    assert "'bogus' is not one of proposed, active, deprecated, archived" in str(refusal)
    assert "id: must be text, not a number (7); quote it" in str(refusal)
    assert str(refusal).startswith("p.yaml: 6 problems, nothing was imported: line 5: text:")


def test_one_problem_is_one_sentence(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    good = {"text": "Fine", "learned_from": "A-1"}
    path.write_text("\n".join(json.dumps(e) for e in [good, good | {"status": "retired"}]) + "\n")
    refusal = refused(engine, path)
    assert str(refusal) == (
        "p.jsonl: line 2: status: 'retired' is not one of proposed, active, deprecated, "
        "archived, superseded; nothing was imported"
    )


def test_jsonl_and_csv_problems_name_their_lines(engine: Engine, tmp_path: Path) -> None:
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text(
        '{"text": "Fine", "learned_from": "A-1"}\n'
        "\n"
        '{"text": "No provenance"}\n'
        "{oops\n"
        '{"id": 12, "text": "Numeric id", "learned_from": "A-1"}\n'
        '["a list"]\n'
    )
    assert lines_and_fields(refused(engine, jsonl)) == [
        (3, "learned_from"),
        (4, "not JSON (Expecting property name enclosed in double quotes)"),
        (5, "id"),
        (6, "an entry must be a mapping of fields such as text and learned_from, not a list"),
    ]
    csv_file = tmp_path / "p.csv"
    csv_file.write_text(
        "text,learned_from,status\n"
        '"A lesson over\ntwo lines",A-1,active\n'
        "Missing provenance,,active\n"
        "Bad status,A-1,bogus\n"
        "Retry, then give up,A-2,active\n"
    )
    assert lines_and_fields(refused(engine, csv_file)) == [
        (4, "learned_from"),
        (5, "status"),
        (6, "has 4 cells but the header has 3; put text holding commas in double quotes"),
    ]


def test_a_lesson_longer_than_the_limit_is_refused(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    long_text = "word " * 20_000  # 100 KB
    path.write_text(
        json.dumps({"text": "Short", "learned_from": "A-1"})
        + "\n"
        + json.dumps({"text": long_text, "learned_from": "A-1"})
        + "\n"
    )
    refusal = refused(engine, path)
    assert str(refusal.problems[0]) == (
        "line 2: text: is 99,999 characters long, over the 2,000 allowed "
        "(PLAYBOOK_MAX_LESSON_CHARS); shorten it or split it in two"
    )
    # The limit is the caller's (the CLI takes it from PLAYBOOK_MAX_LESSON_CHARS).
    assert import_path(engine, path, max_chars=100_000).created == 2


def test_only_the_first_problems_are_listed_and_all_are_counted(
    engine: Engine, tmp_path: Path
) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"text": f"lesson {n}"}) + "\n" for n in range(40)))
    refusal = refused(engine, path)
    assert refusal.total == 40
    assert [p.line for p in refusal.problems] == [1, 2, 3, 4, 5]
    assert str(refusal).endswith("; ...")


def test_an_id_used_twice_in_a_file_is_a_problem(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "- {id: pb-1, text: One, learned_from: A-1}\n"
        "- {id: pb-2, text: Two, learned_from: A-1}\n"
        "- {id: pb-1, text: Three, learned_from: A-1}\n"
    )
    assert [str(p) for p in refused(engine, path).problems] == [
        "line 3: id: pb-1 is already used on line 1"
    ]


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [
        ("- id: pb-1\n  text: [unclosed\n  learned_from: A-1\n", 3, "not valid YAML"),
        ("just: a mapping\n", 1, "list of bullets"),
        ("- {text: a, learned_from: A-1}\n---\n- {text: b, learned_from: A-1}\n", 2, "one YAML"),
        ("- text: ok\n  learned_from: A-1\n  created_at: 2026-13-45\n", 1, "not usable YAML"),
        ("- &a {text: x, learned_from: A-1}\n- *a\n", 2, "aliases such as *a are not read"),
        ("- text: !!python/name:os.system x\n  learned_from: A-1\n", 1, "tag"),
        ("- <<: {text: x}\n  learned_from: A-1\n", 1, "merge keys (<<) are not read"),
        # A "billion laughs": each line doubles the one above; refused at the first alias.
        ("- &a [x, x]\n" + "".join(f"- &a{n} [*a, *a]\n" for n in range(40)), 2, "aliases"),
    ],
)
def test_broken_yaml_is_refused_with_its_line(
    engine: Engine, tmp_path: Path, content: str, line: int, message: str
) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(content)
    problem = next(p for p in refused(engine, path).problems if message in p.message)
    assert problem.line == line


def test_bytes_that_are_not_utf8_name_their_line(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_bytes(b'{"text": "ok", "learned_from": "A-1"}\n{"text": "caf\xe9"}\n')
    assert str(refused(engine, path).problems[0]) == "line 2: is not UTF-8 text"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
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
        imports.import_file(session, path, actor="import")
    with transaction(engine) as session, pytest.raises(InvalidInput, match="does not exist"):
        imports.import_file(session, tmp_path / "missing.yaml", actor="import")
    with transaction(engine) as session, pytest.raises(InvalidInput, match="is a directory"):
        imports.import_file(session, _directory(tmp_path), actor="import")


def _directory(tmp_path: Path) -> Path:
    folder = tmp_path / "folder.yaml"
    folder.mkdir(exist_ok=True)
    return folder


def test_a_json_array_and_a_csv_with_a_byte_order_mark_import(
    engine: Engine, tmp_path: Path
) -> None:
    array = tmp_path / "p.json"
    array.write_text(json.dumps([{"text": "From an array", "learned_from": "A-1"}], indent=2))
    assert import_path(engine, array).created == 1
    spreadsheet = tmp_path / "p.csv"
    spreadsheet.write_bytes("\ufefftext,learned_from\nFrom a spreadsheet,A-2\n".encode())
    assert import_path(engine, spreadsheet).created == 1


def test_import_commits_in_batches_and_a_rerun_finishes_the_job(
    engine: Engine, tmp_path: Path
) -> None:
    path = tmp_path / "p.jsonl"
    entries = [{"id": f"pb-{n}", "text": f"lesson {n}", "learned_from": "A-1"} for n in range(1, 8)]
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    calls: list[tuple[int, int]] = []

    def interrupt(done: int, total: int) -> None:
        calls.append((done, total))
        if done == 4:
            raise KeyboardInterrupt  # the user pressed Ctrl-C after the second batch

    with pytest.raises(KeyboardInterrupt):
        import_path(engine, path, batch_size=2, progress=interrupt)
    assert calls == [(2, 7), (4, 7)]
    assert counts(engine)[0] == 4  # two committed batches stay
    calls.clear()
    report = import_path(engine, path, batch_size=2, progress=lambda d, t: calls.append((d, t)))
    assert (report.created, report.unchanged) == (3, 4)
    assert calls == [(2, 7), (4, 7), (6, 7), (7, 7)]
    assert counts(engine)[:2] == (7, 7)


def test_entries_without_ids_are_matched_by_text_and_near_duplicates_skipped(
    engine: Engine, tmp_path: Path
) -> None:
    with transaction(engine) as session:
        lifecycle.add(
            session, "Retry payment webhooks with an idempotency key", learned_from="A", actor="t"
        )
    path = tmp_path / "team.yaml"
    path.write_text(
        "- text: Retry payment webhooks with an idempotency key\n  learned_from: A-1\n"
        "- text: retry the payment webhooks with an idempotency key\n  learned_from: A-2\n"
        "- text: Old advice we no longer follow\n  learned_from: A-3\n  deprecated: true\n"
        "- text: A brand new lesson about caches\n  learned_from: A-4\n"
        "- text: A brand new lesson about caches\n  learned_from: A-4\n"
        "- id: pb-3\n  text: Named lesson\n  learned_from: A-5\n"
    )
    report = import_path(engine, path)
    assert (report.created, report.unchanged, report.near_duplicates) == (3, 2, 1)
    assert "1 skipped as near-duplicates" in report.summary()
    with transaction(engine) as session:
        rows = {b.text: (b.id, b.status) for b in session.scalars(select(Bullet))}
    # pb-3 is named later in the file, so the entries without ids are numbered above it.
    assert rows == {
        "Retry payment webhooks with an idempotency key": ("pb-1", "active"),
        "Old advice we no longer follow": ("pb-4", "deprecated"),
        "A brand new lesson about caches": ("pb-5", "active"),
        "Named lesson": ("pb-3", "active"),
    }
    again = import_path(engine, path)
    assert (again.created, again.updated) == (0, 0)


def test_near_duplicates_within_a_file_are_found_in_and_across_batches(
    engine: Engine, tmp_path: Path
) -> None:
    path = tmp_path / "team.jsonl"
    texts = [
        "Retry payment webhooks with an idempotency key",
        "retry the payment webhooks with an idempotency key",  # same batch as the first
        "Purge the CDN cache before deploying static assets",
        "Never hold a database row lock across an HTTP call",
        "purge the CDN cache before deploying the static assets",  # a later batch
        "Retry payment webhooks with an idempotency key",  # the same text, in another scope
    ]
    scopes = ["global"] * 5 + ["PAY"]
    path.write_text(
        "".join(
            json.dumps({"text": t, "learned_from": "A-1", "scope": s}) + "\n"
            for t, s in zip(texts, scopes, strict=True)
        )
    )
    report = import_path(engine, path, batch_size=2)
    assert (report.created, report.near_duplicates) == (4, 2)
    with transaction(engine) as session:
        kept = {(b.scope, b.text) for b in session.scalars(select(Bullet))}
    assert kept == {(s, t) for t, s in zip(texts, scopes, strict=True)} - {
        ("global", texts[1]),
        ("global", texts[4]),
    }


def test_usage_log_with_a_bad_line_records_nothing(engine: Engine, tmp_path: Path) -> None:
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
    refusal = refused(engine, path)
    assert [p.line for p in refusal.problems] == [2, 3, 4]
    assert "pb-404" in refusal.problems[1].message and "ts" in refusal.problems[2].message
    # Fixed, the same log imports whole.
    path.write_text("\n".join(json.dumps(line) for line in (lines[0], lines[4])))
    report = import_path(engine, path, batch_size=1)
    assert (report.events_added, report.events_duplicate) == (3, 0)
    with transaction(engine) as session:
        first = lifecycle.get(session, "pb-1")
        assert (first.loads, first.cites, first.cites_success) == (1, 1, 1)
        assert first.last_loaded_at == clock.parse_time(1793610891301)
    assert import_path(engine, path).events_duplicate == 3


# Values a YAML playbook may hold: hostile strings, numbers, nesting, nulls.
_scalars = st.one_of(
    st.text(max_size=30),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.booleans(),
    st.none(),
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=12), _values, max_size=5), max_size=6))
def test_streaming_yaml_reads_what_safe_load_reads(entries: list[dict]) -> None:
    text = yaml.safe_dump(entries, allow_unicode=True, default_flow_style=False)
    read = list(formats.read_entries(stdio.BytesIO(text.encode()), "yaml"))
    assert [entry.data for entry in read] == yaml.safe_load(text)
    lines = text.splitlines()
    for entry in read:
        # Each entry's line is where its `- ` item starts in the file.
        assert lines[entry.line - 1].startswith("-")
