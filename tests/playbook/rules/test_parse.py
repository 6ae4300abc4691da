"""Rule files read as candidate lessons: each format, and the mess real files hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from playbook.rules import END, START
from playbook.rules.parse import (
    MAX_FILE_BYTES,
    ParsedRules,
    RuleFileTooLarge,
    kind_of,
    parse,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "rules"


def texts(parsed: ParsedRules) -> list[str]:
    return [item.text for item in parsed.items]


def skips(parsed: ParsedRules) -> list[tuple[int, str]]:
    return [(skip.line, skip.reason) for skip in parsed.skipped]


def read(name: str) -> ParsedRules:
    path = DATA / name
    return parse(path.read_bytes(), kind_of(path))


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("AGENTS.md", "agents"),
        ("services/api/AGENTS.md", "agents"),
        ("agents.md", "agents"),
        ("CLAUDE.md", "claude"),
        (".cursorrules", "cursorrules"),
        (".windsurfrules", "windsurfrules"),
        (".github/copilot-instructions.md", "copilot"),
        (".cursor/rules/react.mdc", "cursor-mdc"),
        ("README.md", None),
        ("AGENTS.md.bak", None),
        ("docs/", None),
        ("cursorrules", None),
    ],
)
def test_kind_of_tells_a_rule_file_by_its_name(path: str, kind: str | None) -> None:
    assert kind_of(path) == kind


def test_agents_md_lists_and_paragraphs_tagged_with_their_heading() -> None:
    parsed = read("AGENTS.md")
    by_line = {item.line: item for item in parsed.items}
    assert by_line[15].text == (
        "Format with `ruff format` and lint with `ruff check` before every commit."
    )
    assert by_line[15].tags == ("code style",)
    # A short lead-in ending in ':' above nested items is their topic: each item is a lesson.
    assert by_line[20].text == "Use snake_case for functions and modules."
    assert by_line[20].tags == ("code style", "naming")
    # A sentence leading in is joined with its steps: apart, each would lose what it is for.
    assert by_line[28].text == (
        "Before you open a pull request, make sure that: the migrations apply on a fresh "
        "database; `ruff check` and `pytest` pass"
    )
    assert by_line[47].text == (
        "Title pull requests as `[area] What changed`, in the imperative mood."
    )
    assert by_line[47].tags == ("pull requests",)
    assert "pb-3: Retry webhooks with an idempotency key" not in texts(parsed)
    assert skips(parsed) == [
        (3, "introduction (before the first section)"),
        (7, "lead-in ending in ':'"),
        (9, "code block"),
        (23, "HTML comment"),
        (33, "table"),
        (40, "managed block"),
        (49, "too short (3 < 6 characters)"),
    ]
    code = next(skip for skip in parsed.skipped if skip.reason == "code block")
    assert code.excerpt == "uv sync --all-extras"
    assert len(parsed.items) == 10


def test_claude_md_numbered_lists_and_paragraphs() -> None:
    parsed = read("CLAUDE.md")
    assert [(item.line, item.tags) for item in parsed.items] == [
        (7, ("commands",)),
        (8, ("commands",)),
        (12, ("architecture",)),
        (14, ("architecture",)),
        (18, ("gotchas",)),
        (19, ("gotchas",)),
    ]
    assert texts(parsed)[4] == (
        "The worker claims deliveries in lanes: one ticket is handled in order, never two at once."
    )
    assert skips(parsed) == [(3, "introduction (before the first section)")]


def test_cursorrules_plain_text_lines_above_lists_are_topics() -> None:
    parsed = read(".cursorrules")
    assert parsed.kind == "cursorrules"
    assert [(item.line, item.tags) for item in parsed.items][:2] == [
        (1, ()),
        (4, ("code style and structure",)),
    ]
    assert parsed.items[-1].text == "Avoid enums; use maps instead."
    assert parsed.items[-1].tags == ("typescript usage",)
    assert len(parsed.items) == 8
    assert parsed.skipped == ()


def test_mdc_front_matter_gives_tags_and_is_no_lesson() -> None:
    parsed = read(".cursor/rules/react-components.mdc")
    assert texts(parsed)[0] == (
        "Keep components pure: no data fetching inside presentational components."
    )
    # Cursor writes globs unquoted, which YAML refuses: they are read as written.
    assert parsed.items[0].tags == (
        "writing",
        "react",
        "components",
        "hooks",
        "tailwind",
        "src/components/**/*.tsx",
        "src/hooks/*.ts",
    )
    assert parsed.items[0].line == 9
    assert parsed.items[-1].text == "Never call hooks conditionally."
    assert parsed.items[-1].tags[0] == "hooks"  # the bold label of its list first
    assert parsed.skipped == ()


def test_mdc_front_matter_as_yaml_lists_and_bounded() -> None:
    globs = "\n".join(f"  - src/part{n}/**" for n in range(20))
    data = (
        f"---\ndescription: 'Database migrations: Alembic'\nglobs:\n{globs}\n"
        "alwaysApply: true\n---\n- Never edit a migration that has shipped.\n"
    ).encode()
    parsed = parse(data, "cursor-mdc")
    [item] = parsed.items
    assert item.tags == (
        "database",
        "migrations",
        "alembic",
        "src/part0/**",
        "src/part1/**",
        "src/part2/**",
        "src/part3/**",
        "src/part4/**",
    )
    assert item.line == 26  # the front matter's 25 lines keep their numbers


def test_copilot_instructions() -> None:
    parsed = read(".github/copilot-instructions.md")
    assert len(parsed.items) == 3
    assert parsed.items[2].text.startswith("Write commit messages in the imperative mood")
    # No section heading: the paragraph under the title is a rule, not an introduction.
    assert parsed.items[0].text.startswith("This is a Flask service")
    assert parsed.skipped == ()


def test_crlf_bom_and_no_trailing_newline() -> None:
    data = (
        "\ufeff# Rules\r\n\r\n## Style\r\n\r\n- Use tabs for Makefiles only.\r\n"
        "- Wrap lines at 100 characters."
    ).encode()
    parsed = parse(data, "agents")
    assert [(item.line, item.text, item.tags) for item in parsed.items] == [
        (5, "Use tabs for Makefiles only.", ("style",)),
        (6, "Wrap lines at 100 characters.", ("style",)),
    ]
    assert parsed.notes == ()


def test_invalid_utf8_is_replaced_and_said() -> None:
    data = b"- Keep the changelog in sync with every release.\n- Caf\xe9 names are fine here.\n"
    parsed = parse(data, "agents")
    assert texts(parsed) == [
        "Keep the changelog in sync with every release.",
        "Caf\N{REPLACEMENT CHARACTER} names are fine here.",
    ]
    assert parsed.notes == (
        "not valid UTF-8 (first at line 2): the bytes that are not were read as "
        "\N{REPLACEMENT CHARACTER}",
    )


def test_utf16_with_its_byte_order_mark() -> None:
    data = "- Run the linter before committing.\n".encode("utf-16")
    assert texts(parse(data, "agents")) == ["Run the linter before committing."]


def test_a_huge_file_is_refused_whole() -> None:
    with pytest.raises(RuleFileTooLarge, match="1,000,001 bytes, over the 1,000,000"):
        parse(b"x" * (MAX_FILE_BYTES + 1), "agents")


def test_code_fences_tables_html_and_comments_are_skipped_with_their_lines() -> None:
    data = b"""## Build

~~~sh
make all
~~~

    indented code is code too

<details>
<summary>Why</summary>
</details>

<!--
a comment over
several lines
-->

- Keep a rule even with a <!-- hidden note --> comment inside it.
- | not | a table inside a list item? it is text |

| a | b |
|---|---|
| 1 | 2 |
"""
    parsed = parse(data, "agents")
    assert skips(parsed) == [
        (3, "code block"),
        (7, "code block"),
        (9, "HTML block"),
        (13, "HTML comment"),
        (21, "table"),
    ]
    assert texts(parsed) == [
        "Keep a rule even with a comment inside it.",
        "| not | a table inside a list item? it is text |",
    ]


def test_the_managed_block_is_skipped_even_unterminated() -> None:
    data = f"- Keep the first rule here.\n{START}\n- pb-1: a lesson of the bot\n".encode()
    parsed = parse(data, "agents")
    assert texts(parsed) == ["Keep the first rule here."]
    assert skips(parsed) == [
        (2, "managed block (no end marker: skipped to the end of the file)"),
    ]
    data = f"{START}\n- pb-1: a lesson\n{END}\n\n- A rule after the block stays.\n".encode()
    parsed = parse(data, "agents")
    assert [(item.line, item.text) for item in parsed.items] == [
        (5, "A rule after the block stays.")
    ]


def test_long_and_short_items_are_skipped_with_the_numbers() -> None:
    long = "word " * 500
    items = ["Testing", "Use ruff.", "Ok", "[x] A task box is not part of the rule."]
    data = "".join(f"- {item}\n" for item in [long, *items]).encode()
    parsed = parse(data, "agents", max_chars=2000)
    assert skips(parsed) == [
        (1, "too long (2,499 > 2,000 characters)"),
        (2, "too short (one word)"),
        (4, "too short (2 < 6 characters)"),
    ]
    assert parsed.skipped[0].excerpt.endswith("…")
    assert len(parsed.skipped[0].excerpt) <= 60
    assert texts(parsed) == ["Use ruff.", "A task box is not part of the rule."]


def test_nested_items_under_a_rule_are_rules_of_their_own() -> None:
    data = b"""## Releases

- Ship behind a feature flag when the change is risky
  - Name flags `ff_<ticket>` so they can be found and removed.
  - Remove a flag within two releases of turning it on.
    1. Deeper items are leaves too, at any depth.
"""
    parsed = parse(data, "agents")
    assert [(item.line, item.text) for item in parsed.items] == [
        (3, "Ship behind a feature flag when the change is risky"),
        (4, "Name flags `ff_<ticket>` so they can be found and removed."),
        (5, "Remove a flag within two releases of turning it on."),
        (6, "Deeper items are leaves too, at any depth."),
    ]
    assert {item.tags for item in parsed.items} == {("releases",)}


def test_headings_give_the_two_nearest_tags_and_the_title_none() -> None:
    data = b"""# Project rules

## Backend, API

### Errors

- Return problem+json bodies for every 4xx answer.

# Second top-level section

- Rules under a second h1 are tagged with it.
"""
    parsed = parse(data, "agents")
    assert [item.tags for item in parsed.items] == [
        ("backend", "api", "errors"),
        ("second top-level section",),
    ]


def test_a_file_without_headings_has_no_introduction() -> None:
    data = b"Always answer in English.\n\nPrefer small pull requests over big ones.\n"
    parsed = parse(data, "windsurfrules")
    assert texts(parsed) == [
        "Always answer in English.",
        "Prefer small pull requests over big ones.",
    ]


def test_front_matter_without_its_closing_line_is_a_thematic_break() -> None:
    data = b"---\n- A rule after a thematic break.\n"
    assert texts(parse(data, "agents")) == ["A rule after a thematic break."]


def test_empty_and_blank_files_have_nothing() -> None:
    for data in (b"", b"\n\n", b"\xef\xbb\xbf", b"# Title only\n"):
        parsed = parse(data, "agents")
        assert (parsed.items, parsed.skipped) == ((), ())


def test_pathological_input_stays_linear() -> None:
    # An unclosed comment opener on every line, and brackets: read once each.
    data = ("- <!-- [[[[ " * 20_000).encode()
    parsed = parse(data, "agents")
    assert parsed.items == ()
