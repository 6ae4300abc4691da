"""The anchors a rule file gives its lessons: front matter globs, or a nested AGENTS.md's folder."""

from __future__ import annotations

import pytest

from playbook.rules.anchors import Anchors, from_globs, of_file, raw_globs
from playbook.rules.parse import bots_own, parse


@pytest.mark.parametrize(
    ("where", "front", "paths"),
    [
        # Cursor: a comma-separated string, or a YAML list.
        (
            ".cursor/rules/react.mdc",
            {"globs": "src/components/**/*.tsx, src/hooks/*.ts"},
            ("src/components/**/*.tsx", "src/hooks/*.ts"),
        ),
        (
            ".cursor/rules/react.mdc",
            {"globs": ["src/**/*.tsx", "'web/*.ts'"]},
            ("src/**/*.tsx", "web/*.ts"),
        ),
        # An empty `globs:` (Cursor writes one) and a rule that always applies anchor nothing.
        (".cursor/rules/all.mdc", {"globs": None, "alwaysApply": False}, None),
        (".cursor/rules/all.mdc", {"globs": "src/**", "alwaysApply": True}, None),
        # Copilot's applyTo; Claude Code's paths, braces written out.
        (".github/instructions/py.instructions.md", {"applyTo": "**/*.py"}, ("**/*.py",)),
        (".claude/rules/ts.md", {"paths": "src/**/*.{ts,tsx}"}, ("src/**/*.ts", "src/**/*.tsx")),
        (
            ".claude/rules/api.md",
            {"paths": ["src/api/**/*.ts", "tests/**/*.test.ts"]},
            ("src/api/**/*.ts", "tests/**/*.test.ts"),
        ),
        # A nested AGENTS.md is about its folder; the root's about nothing.
        ("services/payments/AGENTS.md", {}, ("services/payments/**",)),
        ("AGENTS.md", {}, None),
        ("CLAUDE.md", {}, None),
        (
            "services/payments/AGENTS.md",
            {"globs": "services/payments/api/**"},
            ("services/payments/api/**",),
        ),
        (None, {}, None),  # a file whose place is unknown
    ],
)
def test_where_the_anchors_come_from(where, front, paths) -> None:
    assert of_file(where, front).paths == paths


def test_globs_the_validator_refuses_or_that_match_everything_are_dropped_with_a_note() -> None:
    found = from_globs(["../secrets/*.env", "/etc/*", "**", "**/*", "orders/**"])
    assert found.paths == ("orders/**",)
    assert len(found.notes) == 4
    assert "'..'" in found.notes[0] and "absolute" in found.notes[1]
    assert all("anchor" in note for note in found.notes)
    assert "matches every file" in found.notes[2]


def test_at_most_ten_anchors_the_rest_named() -> None:
    found = from_globs([f"pkg{n}/**" for n in range(14)])
    assert found.paths is not None and len(found.paths) == 10
    assert found.notes == (
        "4 globs over the 10 a lesson may have not used as anchors: "
        "'pkg10/**', 'pkg11/**', 'pkg12/**', ...",
    )


def test_hostile_values_are_bounded() -> None:
    assert raw_globs(12) is None and raw_globs({"a": 1}) is None
    assert raw_globs("," * 100_000) is None
    many = raw_globs("{" + ",".join("abcdefghij") + "}/{" + ",".join("abcdefghij") + "}")
    assert many is not None
    found = from_globs(many)
    assert found.paths is not None and len(found.paths) == 10  # 100 alternatives, 20 read
    assert of_file("AGENTS.md", {"globs": ["x/**"] * 1000 + [3]}) == Anchors(("x/**",))


def test_the_parser_keeps_cursors_unquoted_globs_for_the_anchors() -> None:
    parsed = parse(
        b"---\nglobs: *.ts,src/**/*.tsx\nalwaysApply: false\n---\n\n- Use strict mode in TS\n"
    )
    assert of_file(".cursor/rules/ts.mdc", parsed.scoping).paths == ("*.ts", "src/**/*.tsx")


def test_the_bots_own_rule_files() -> None:
    assert bots_own(".cursor/rules/playbook-orders.mdc")
    assert not bots_own(".cursor/rules/playbook.mdc")  # the managed block's file: skipped inside
    assert not bots_own(".cursor/rules/react.mdc")
    assert not bots_own("docs/playbook-notes.txt")
