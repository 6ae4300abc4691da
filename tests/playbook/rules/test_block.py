"""The managed block in AGENTS.md and friends: which lessons, in what order, within what budget,
and that splicing it in never touches a byte outside the markers."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, event
from sqlalchemy.orm import Session

from playbook.db import transaction
from playbook.models import Bullet
from playbook.rules import END, START
from playbook.rules.block import (
    DEFAULT_MAX_CHARS,
    PATHS,
    BlockProblem,
    Entry,
    choose,
    compare,
    current_block,
    ids_in,
    one_line,
    render,
    splice,
)
from playbook.search import ranking

REPO = "acme/api"
SCOPES = (REPO, "global")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
PROPERTY = settings(max_examples=200, deadline=None)


def put(
    session: Session,
    number: int,
    text: str | None = None,
    *,
    scope: str = REPO,
    status: str = "active",
    success: int = 0,
    failure: int = 0,
    loads: int = 0,
    bullet_id: str | None = None,
) -> str:
    """A lesson written straight to the table, so counters and odd texts need no history."""
    bullet_id = bullet_id or f"pb-{number}"
    session.add(
        Bullet(
            id=bullet_id,
            number=number if bullet_id == f"pb-{number}" else None,
            text=text if text is not None else f"Lesson number {number}",
            scope=scope,
            status=status,
            created_at=T0,
            updated_at=T0,
            loads=loads,
            cites=success + failure,
            cites_success=success,
            cites_failure=failure,
        )
    )
    return bullet_id


def chosen(engine: Engine, max_chars: int = DEFAULT_MAX_CHARS, **kwargs: object) -> list[Entry]:
    with transaction(engine) as session:
        return choose(session, SCOPES, max_chars, **kwargs)  # type: ignore[arg-type]


def ids(entries: list[Entry]) -> list[str]:
    return [entry.bullet_id for entry in entries]


def block_of(*pairs: tuple[str, str], scope: str = REPO) -> str:
    return render([Entry(i, t, "new, not used yet") for i, t in pairs], scope=scope)


# choose: which lessons, in which order


def test_only_active_lessons_of_the_repository_and_global(seeded: Engine) -> None:
    # The seeded playbook: pb-3 is acme/api's, pb-4 another repository's, pb-5 proposed.
    assert ids(chosen(seeded)) == ["pb-1", "pb-2", "pb-3"]


def test_demoted_proposed_archived_and_other_scopes_are_never_in(engine: Engine) -> None:
    with transaction(engine) as session:
        put(session, 1, status="deprecated", success=50)
        put(session, 2, status="archived", success=50)
        put(session, 3, status="proposed", success=50)
        put(session, 4, scope="other/web", success=50)
        put(session, 5, scope="acme/api-other", success=50)
        put(session, 6, scope="global")
        put(session, 7)
    assert ids(chosen(engine)) == ["pb-6", "pb-7"]
    with transaction(engine) as session:
        assert choose(session, [], 8000) == []
        assert ids(choose(session, ["global"], 8000)) == ["pb-6"]


def test_lessons_cited_in_merged_work_come_first(engine: Engine) -> None:
    with transaction(engine) as session:
        put(session, 1, loads=500)  # much loaded, never cited
        put(session, 2, success=1, failure=5)  # one merged, many rejected
        put(session, 3, success=3)
        put(session, 4, success=3, failure=1)  # same merged cites, lower confidence
        put(session, 5, failure=1)  # only rejected: below the unused ones
        put(session, 6, scope="global", loads=2)
        put(session, 7)
        put(session, 8)
        put(session, 9, success=3, loads=7)  # ties pb-3 on confidence, more loads
    assert ids(chosen(engine)) == [
        "pb-9",
        "pb-3",
        "pb-4",
        "pb-2",
        "pb-1",
        "pb-6",
        "pb-7",
        "pb-8",
        "pb-5",
    ]


def test_the_order_is_merged_cites_then_confidence_then_loads_then_number(engine: Engine) -> None:
    rows = []
    with transaction(engine) as session:
        number = 0
        for success in (0, 1, 4):
            for failure in (0, 2, 3):
                for loads in (0, 9):
                    for _ in range(2):
                        number += 1
                        put(session, number, success=success, failure=failure, loads=loads)
                        rows.append((number, success, failure, loads))
    expected = sorted(rows, key=lambda r: (-r[1], -ranking.confidence(r[1], r[2]), -r[3], r[0]))
    assert ids(chosen(engine)) == [f"pb-{row[0]}" for row in expected]


def test_ids_that_are_not_numbered_come_after_numbered_ones(engine: Engine) -> None:
    with transaction(engine) as session:
        put(session, 0, bullet_id="CTMS-L-1")
        put(session, 2)
        put(session, 0, bullet_id="bad]id")  # could not be read back from "[...]"
        put(session, 0, bullet_id="<!--x")  # could open a comment
    assert ids(chosen(engine)) == ["pb-2", "CTMS-L-1"]


def test_reasons_say_why_a_lesson_is_in(engine: Engine) -> None:
    with transaction(engine) as session:
        put(session, 1, success=3)
        put(session, 2, success=1)
        put(session, 3, failure=2)
        put(session, 4, loads=12)
        put(session, 5, loads=1)
        put(session, 6)
    assert [entry.reason for entry in chosen(engine)] == [
        "cited in 3 merged PRs",
        "cited in 1 merged PR",
        "loaded 12 times",
        "loaded 1 time",
        "new, not used yet",
        "confidence 0.25",
    ]


# choose: the budget


def test_the_block_fits_max_chars_exactly(engine: Engine) -> None:
    with transaction(engine) as session:
        for number in range(1, 10):
            put(session, number, "x" * 20)
    base = len(render([], scope=REPO))
    line = len("\n- [pb-1] ") + 20
    for fit in range(4):
        exactly = chosen(engine, base + fit * line)
        assert ids(exactly) == [f"pb-{n}" for n in range(1, fit + 1)]
        assert len(render(exactly, scope=REPO)) == base + fit * line
        assert len(chosen(engine, base + fit * line - 1)) == max(fit - 1, 0)
    assert chosen(engine, base) == [] and chosen(engine, 10) == []


@pytest.mark.parametrize("max_chars", [300, 555, 1000, 2345, 8000])
def test_the_rendered_block_is_never_over_max_chars(engine: Engine, max_chars: int) -> None:
    with transaction(engine) as session:
        for number in range(1, 400):
            put(session, number, f"Lesson {number} " + "word " * (number % 37), success=number % 5)
    entries = chosen(engine, max_chars)
    assert entries
    assert len(render(entries, scope=REPO)) <= max_chars


def test_a_lesson_too_long_for_the_room_left_is_skipped_and_shorter_ones_still_fit(
    engine: Engine,
) -> None:
    with transaction(engine) as session:
        put(session, 1, "short one")
        put(session, 2, "y" * 3000, success=9)  # the most helpful, but longer than the block
        put(session, 3, "z" * 600, success=1)
        put(session, 4, "short two")
    max_chars = len(render([], scope=REPO)) + 200
    assert ids(chosen(engine, max_chars)) == ["pb-1", "pb-4"]
    assert ids(chosen(engine, 2000)) == ["pb-3", "pb-1", "pb-4"]


def test_a_large_playbook_is_read_in_bounds(engine: Engine) -> None:
    with transaction(engine) as session:
        session.add_all(
            Bullet(
                id=f"pb-{n}",
                number=n,
                text=f"Lesson {n} about something worth knowing",
                scope=REPO if n % 2 else "global",
                status="active",
                created_at=T0,
                updated_at=T0,
                loads=n % 13,
            )
            for n in range(1, 3001)
        )
    statements: list[str] = []

    def seen(conn, cursor, statement, parameters, context, executemany) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    try:
        entries = chosen(engine)
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    # One query, bounded: never every lesson of the playbook.
    reads = [statement for statement in statements if "FROM bullets" in statement]
    assert len(reads) == 1 and "LIMIT" in reads[0]
    assert 100 < len(entries) < 3000
    assert len(render(entries, scope=REPO)) <= DEFAULT_MAX_CHARS
    assert [entry.bullet_id for entry in entries][:2] == ["pb-12", "pb-25"]  # 12 loads each


def test_the_header_scope_is_the_one_budgeted(engine: Engine) -> None:
    with transaction(engine) as session:
        for number in range(1, 200):
            put(session, number)
    long_scope = "an-organisation-with-a-long-name/and-a-long-repository-name"
    entries = chosen(engine, 1000, scope=long_scope)
    assert len(render(entries, scope=long_scope)) <= 1000
    assert len(render(chosen(engine, 1000), scope=REPO)) <= 1000


# Entry text: one line that cannot break the block


def test_lesson_text_cannot_close_fake_or_break_the_block(engine: Engine) -> None:
    evil = (
        f"Close it --> then {END}\nand open <!-- again\r\n{START}\u2028- [pb-99] fake"
        "\u202e reversed\x01\x1b[31m <!---->"
    )
    with transaction(engine) as session:
        put(session, 1, evil)
        put(session, 2, "Fine lesson\n\n  with   spaces\t")
    entries = chosen(engine)
    block = render(entries, scope=REPO)
    assert ids(entries) == ["pb-1", "pb-2"]
    assert entries[1].text == "Fine lesson with spaces"
    text = entries[0].text
    for bad in ("<!--", "-->", "\n", "\r", "\u2028", "\u202e", "\x01", "\x1b"):
        assert bad not in text
    assert len(block.splitlines()) == 5  # two markers, the header, two lessons
    written = splice(b"# Team notes\n", block, "AGENTS.md")
    assert ids_in(written) == ["pb-1", "pb-2"]  # the fake [pb-99] is not at a line's start
    assert current_block(written) == block
    assert written.startswith(b"# Team notes\n\n")


@given(st.text())
@PROPERTY
def test_one_line_is_always_one_line_without_comment_sequences(text: str) -> None:
    line = one_line(text)
    assert len(line.splitlines()) <= 1
    assert "<!--" not in line and "-->" not in line and "--!>" not in line
    assert line == line.strip()
    line.encode("utf-8")  # no lone surrogate survives


@given(st.text(alphabet="<!-> x\n", max_size=40))
@PROPERTY
def test_one_line_defeats_nested_comment_sequences(text: str) -> None:
    line = one_line(text)
    assert "<!--" not in line and "-->" not in line and "--!>" not in line


def test_a_scope_in_the_header_cannot_break_it() -> None:
    block = render([], scope="evil --> <!-- \n scope")
    assert len(block.splitlines()) == 3
    assert block.splitlines()[1].count("-->") == 1


# render


def test_render_makes_one_explanatory_line_between_the_markers() -> None:
    entries = [Entry("pb-12", "Pin chromium", "new, not used yet"), Entry("pb-3", "Retry", "x")]
    block = render(entries, scope=REPO)
    lines = block.split("\n")
    assert lines[0] == START and lines[-1] == END
    assert lines[2:4] == ["- [pb-12] Pin chromium", "- [pb-3] Retry"]
    header = lines[1]
    assert header.startswith("<!--") and header.endswith("-->") and header.count("-->") == 1
    assert REPO in header and "[pb-12]" in header and "rewritten by the bot" in header
    assert render(entries, scope=REPO, newline="\r\n") == block.replace("\n", "\r\n")
    assert not block.endswith("\n")


# splice: replacing, appending, creating


OLD = block_of(("pb-1", "old lesson"), ("pb-2", "another"))
NEW = block_of(("pb-3", "new lesson"))


def test_a_block_is_replaced_and_nothing_else_changes() -> None:
    before = f"# Rules\n\nKeep tests fast.\n\n{OLD}\n\n## More\nText after.\n".encode()
    after = splice(before, NEW, "AGENTS.md")
    assert after == f"# Rules\n\nKeep tests fast.\n\n{NEW}\n\n## More\nText after.\n".encode()
    assert ids_in(before) == ["pb-1", "pb-2"] and ids_in(after) == ["pb-3"]


def test_a_file_without_a_block_gets_it_after_one_blank_line() -> None:
    assert splice(b"# Rules\n", NEW, "AGENTS.md") == f"# Rules\n\n{NEW}\n".encode()
    assert splice(b"# Rules\n\n", NEW, "AGENTS.md") == f"# Rules\n\n{NEW}\n".encode()
    # No final line break before, none after.
    assert splice(b"# Rules", NEW, "AGENTS.md") == f"# Rules\n\n{NEW}".encode()
    assert splice(b"", NEW, "AGENTS.md") == f"{NEW}\n".encode()


def test_crlf_files_stay_crlf() -> None:
    before = f"# Rules\r\n\r\n{OLD}\r\nafter\r\n".replace("\n", "\r\n").replace("\r\r", "\r")
    after = splice(before.encode(), NEW, "CLAUDE.md")
    assert (
        after
        == f"# Rules\r\n\r\n{NEW}\r\nafter\r\n".replace("\n", "\r\n").replace("\r\r", "\r").encode()
    )
    assert b"\n" not in after.replace(b"\r\n", b"")
    appended = splice(b"# Rules\r\nline\r\n", NEW, "AGENTS.md")
    assert appended == b"# Rules\r\nline\r\n\r\n" + NEW.replace("\n", "\r\n").encode() + b"\r\n"


def test_a_block_last_in_a_file_without_a_final_line_break_keeps_none() -> None:
    assert splice(f"intro\n\n{OLD}".encode(), NEW, "AGENTS.md") == f"intro\n\n{NEW}".encode()


def test_a_byte_order_mark_stays() -> None:
    bom = "\ufeff".encode()
    assert splice(bom + OLD.encode() + b"\n", NEW, "AGENTS.md") == bom + NEW.encode() + b"\n"
    assert splice(bom + b"# Rules\n", NEW, "AGENTS.md") == bom + f"# Rules\n\n{NEW}\n".encode()
    assert splice(bom, NEW, "AGENTS.md") == bom + f"{NEW}\n".encode()


def test_invalid_utf8_and_indentation_outside_the_markers_survive() -> None:
    before = b"\xff\xfe bad \xc3(\n  " + OLD.encode() + b"  \n\x80tail"
    after = splice(before, NEW, "AGENTS.md")
    assert after == b"\xff\xfe bad \xc3(\n  " + NEW.encode() + b"  \n\x80tail"


def test_a_marker_mentioned_in_prose_is_not_a_marker() -> None:
    prose = f"Do not edit between `{START}` and `{END}`.\n".encode()
    assert current_block(prose) is None and ids_in(prose) == []
    after = splice(prose, NEW, "AGENTS.md")
    assert after == prose + f"\n{NEW}\n".encode()
    assert splice(after, OLD, "AGENTS.md") == prose + f"\n{OLD}\n".encode()


@pytest.mark.parametrize("path", PATHS)
def test_a_missing_file_is_created_with_a_title_and_the_block(path: str) -> None:
    created = splice(None, NEW, path).decode()
    assert created.endswith(f"\n\n{NEW}\n")
    assert current_block(created.encode()) == NEW
    if path.endswith(".mdc"):
        front, rest = created.split("---\n", 2)[1:]
        assert "description: " in front and "alwaysApply: true\n" in front
        assert created.startswith("---\n") and rest.startswith("\n# ")
    else:
        assert created.startswith("# ")
    assert splice(created.encode(), NEW, path) == created.encode()


def test_an_mdc_with_front_matter_and_no_block_gets_it_after_its_body() -> None:
    before = b"---\ndescription: Team rules\nglobs: '*.py'\nalwaysApply: false\n---\n\nUse ruff.\n"
    after = splice(before, NEW, ".cursor/rules/playbook.mdc")
    assert after == before + f"\n{NEW}\n".encode()


def test_splicing_is_idempotent_and_the_current_block_changes_nothing() -> None:
    for before in (b"a\r\nb\r\n", b"x", f"a\n{OLD}\nz".encode(), f"a\r\n{OLD}".encode()):
        once = splice(before, NEW, "AGENTS.md")
        assert splice(once, NEW, "AGENTS.md") == once
        assert splice(once, current_block(once) or "", "AGENTS.md") == once
    mixed = f"a\r\nb\n{OLD}\nc\n".encode()  # LF block in a file that starts CRLF
    assert splice(mixed, current_block(mixed) or "", "AGENTS.md") == mixed


def test_splice_refuses_something_that_is_not_a_block() -> None:
    with pytest.raises(ValueError, match="not a managed block"):
        splice(b"x\n", "- [pb-1] no markers", "AGENTS.md")
    with pytest.raises(ValueError, match="not a managed block"):
        splice(b"x\n", f"{NEW}\n{NEW}", "AGENTS.md")


# Malformed markers


MALFORMED = {
    "start without end": f"a\n{START}\n- [pb-1] x\n",
    "end without start": f"a\n- [pb-1] x\n{END}\n",
    "two blocks": f"{OLD}\nmiddle\n{NEW}\n",
    "end before start": f"{END}\nx\n{START}\n",
    "two starts": f"{START}\n{OLD}\n",
}


@pytest.mark.parametrize("name", MALFORMED)
def test_malformed_markers_raise_block_problem(name: str) -> None:
    existing = MALFORMED[name].encode()
    with pytest.raises(BlockProblem) as raised:
        splice(existing, NEW, "AGENTS.md")
    message = str(raised.value)
    assert "AGENTS.md" in message and "line" in message and "delete both" in message
    with pytest.raises(BlockProblem):
        current_block(existing)
    with pytest.raises(BlockProblem):
        ids_in(existing)


# Outside text is byte for byte the same, whatever it is


def _outside() -> st.SearchStrategy[bytes]:
    text = st.text().map(lambda s: s.encode("utf-8", "surrogatepass"))
    lines = st.lists(
        st.sampled_from(["line", "", "  ", "é ✓ 日本", "\ufeff", "<!-- note -->", "\t-->"]),
        max_size=6,
    ).map(lambda parts: "\r\n".join(parts).encode())
    return st.one_of(st.binary(), text, lines)


def _no_markers(data: bytes) -> bool:
    return START.encode() not in data and END.encode() not in data


@given(prefix=_outside(), suffix=_outside(), crlf=st.booleans(), final=st.booleans())
@PROPERTY
def test_outside_text_is_untouched_when_the_block_is_replaced(
    prefix: bytes, suffix: bytes, crlf: bool, final: bool
) -> None:
    assume(_no_markers(prefix) and _no_markers(suffix))
    nl = b"\r\n" if crlf else b"\n"
    # The first line break decides the file's line ending; the markers stand on their own lines.
    head = b"# Rules" + nl + prefix + nl
    tail = (nl + suffix) if final else b""
    before = head + OLD.encode().replace(b"\n", nl) + tail
    after = splice(before, NEW, "AGENTS.md")
    assert after == head + NEW.encode().replace(b"\n", nl) + tail
    assert splice(after, NEW, "AGENTS.md") == after
    assert splice(before, current_block(before) or "", "AGENTS.md") == before
    assert ids_in(after) == ["pb-3"]


@given(existing=_outside())
@PROPERTY
def test_outside_text_is_untouched_when_the_block_is_appended(existing: bytes) -> None:
    assume(_no_markers(existing))
    after = splice(existing, NEW, "AGENTS.md")
    assert after.startswith(existing)
    assert current_block(after) is not None
    assert current_block(after).replace("\r\n", "\n") == NEW  # type: ignore[union-attr]
    assert splice(after, NEW, "AGENTS.md") == after
    assert splice(after, OLD, "AGENTS.md").startswith(existing)


# ids_in and compare


def test_ids_in_reads_the_block_only() -> None:
    existing = f"- [pb-7] outside\n{block_of(('pb-1', 'a [pb-9]'), ('CTMS-L-2', 'b'))}\n"
    assert ids_in(existing.encode()) == ["pb-1", "CTMS-L-2"]
    assert ids_in(None) == [] and ids_in(b"no block\n") == []
    assert current_block(None) is None


def test_compare_tells_added_removed_and_kept() -> None:
    new = [Entry("pb-3", "c", "r"), Entry("pb-1", "a", "r"), Entry("pb-9", "n", "r")]
    change = compare(["pb-1", "pb-2", "pb-3", "pb-2"], new)
    assert change.added == [new[2]]
    assert change.removed == ["pb-2"]
    assert change.kept == ["pb-3", "pb-1"]
    assert compare([], []).added == [] and compare(["pb-1"], []).removed == ["pb-1"]
