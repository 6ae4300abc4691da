"""The settings file's rules: each problem with its line, nothing applied in part, the merge."""

from __future__ import annotations

import pytest

from playbook.outcomes.demote_policy import DemotePolicy
from playbook.repos.settings import (
    DEFAULT,
    MAX_FILE_BYTES,
    MAX_PROBLEMS,
    ORGANISATION,
    REPOSITORY,
    parse,
    resolve,
)

FILE = ".github/playbook-bot.yml"


def problems(content: bytes) -> list[tuple[str | None, int | None, str]]:
    parsed = parse(content, FILE, "octo-org")
    assert parsed.values is None, "a file with problems is never applied"
    return [(p.key, p.line, p.message) for p in parsed.problems]


def test_every_key_read() -> None:
    parsed = parse(
        b"enabled: false\nscope: octo-org/shared\ncomment: false\nmax_lessons: 3\n"
        b"demote_policy: needs-review\nholdout_percent: 10\nignore_labels: [wontfix]\n"
        b"agents_md:\n  enabled: true\n  path: CLAUDE.md\n  max_chars: 4000\n  pause_days: 7\n",
        FILE,
        "octo-org",
    )
    assert parsed.problems == []
    chosen, _ = resolve(None, parsed.values)
    assert (chosen.enabled, chosen.comment, chosen.max_lessons) == (False, False, 3)
    assert chosen.demote_policy is DemotePolicy.NEEDS_REVIEW
    assert chosen.scope_for("octo-org/app") == "octo-org/shared"
    assert chosen.agents_md.path == "CLAUDE.md" and chosen.agents_md.pause_days == 7
    assert chosen.ignores(["WontFix"]) == "WontFix"


def test_an_empty_file_is_every_default() -> None:
    parsed = parse(b"# nothing yet\n", FILE, "octo-org")
    assert parsed.values == {} and parsed.problems == []
    chosen, sources = resolve(None, parsed.values)
    assert chosen.enabled and chosen.comment and chosen.scope_for("octo-org/app") == "octo-org/app"
    assert set(sources.values()) == {DEFAULT}


def test_unknown_keys_and_bad_values_name_their_lines_and_what_is_allowed() -> None:
    found = problems(
        b"comment: true\ncommnet: false\nmax_lessons: 99\nagents_md:\n"
        b"  path: README.md\n  colour: blue\n"
    )
    by_key = {key: (line, message) for key, line, message in found}
    assert by_key["commnet"][0] == 2 and "the settings are enabled, scope" in by_key["commnet"][1]
    assert by_key["max_lessons"] == (3, "must be less than or equal to 20")
    assert by_key["agents_md.path"][0] == 5 and "'AGENTS.md'" in by_key["agents_md.path"][1]
    assert by_key["agents_md.colour"][0] == 6
    assert "the settings are enabled, path, max_chars, pause_days" in by_key["agents_md.colour"][1]


@pytest.mark.parametrize(
    ("content", "line", "words"),
    [
        (b"comment: [\n", 2, "is not valid YAML"),
        (b"- comment\n", 1, "must be a mapping"),
        (b"a: 1\n---\nb: 2\n", 2, "is not valid YAML"),
        (b"comment: !!python/object:os.system x\n", 1, "is not valid YAML"),
        (b"enabled: false\nenabled: true\n", 2, "is set twice (lines 1 and 2)"),
    ],
)
def test_files_that_are_not_settings(content: bytes, line: int, words: str) -> None:
    [(_, found_line, message)] = problems(content)
    assert found_line == line and words in message


def test_hostile_files_are_refused_quickly() -> None:
    assert "at most" in problems(b"#" * (MAX_FILE_BYTES + 1))[0][2]
    assert "not UTF-8" in problems(b"comment: \xff\n")[0][2]
    assert "nested too deeply" in problems(b"[" * 60_000)[0][2]
    # Aliases share one object: a "billion laughs" file is a few bad items, not a billion.
    bomb = b'a: &a ["x","x","x","x","x","x","x","x","x"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n'
    bomb += b"ignore_labels: [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    assert len(problems(bomb)) == 11  # a, b, and the nine items of ignore_labels
    many = b"ignore_labels: [" + b",".join([b"[1]"] * 50) + b"]\n"
    found = problems(many)
    assert len(found) == MAX_PROBLEMS and found[-1][2] == f"{50 - MAX_PROBLEMS + 1} more"


def test_a_scope_must_stay_within_the_owner() -> None:
    [(key, line, message)] = problems(b"comment: true\nscope: someone-else/private\n")
    assert (key, line) == ("scope", 2) and "must start with octo-org/" in message
    assert problems(b"scope: global\n")[0][0] == "scope"
    assert problems(b"scope: octo org/x\n")[0][0] == "scope"


def test_the_repository_file_is_merged_over_the_organisation_s() -> None:
    org = {"comment": False, "max_lessons": 2, "agents_md": {"enabled": True, "max_chars": 3000}}
    repo = {"max_lessons": 4, "agents_md": {"path": "CLAUDE.md"}}
    chosen, sources = resolve(org, repo)
    assert (chosen.comment, chosen.max_lessons) == (False, 4)
    assert chosen.agents_md.enabled and chosen.agents_md.max_chars == 3000
    assert chosen.agents_md.path == "CLAUDE.md"
    assert sources["comment"] == ORGANISATION and sources["max_lessons"] == REPOSITORY
    assert sources["agents_md.enabled"] == ORGANISATION
    assert sources["agents_md.path"] == REPOSITORY
    assert sources["agents_md.pause_days"] == DEFAULT


def test_scoped_names_each_agent_once_and_defaults_to_none() -> None:
    parsed = parse(b"agents_md:\n  scoped: [cursor, claude]\n", FILE, "octo-org")
    assert parsed.problems == []
    chosen, sources = resolve(None, parsed.values)
    assert chosen.agents_md.scoped == ["cursor", "claude"]
    assert sources["agents_md.scoped"] == REPOSITORY
    assert resolve(None, None)[0].agents_md.scoped == []
    for content, message in [
        (b"agents_md:\n  scoped: [cursor, cursor]\n", "names an agent twice"),
        (b"agents_md:\n  scoped: [vim]\n", "must be 'copilot', 'cursor' or 'claude'"),
        (b"agents_md:\n  scoped: cursor\n", "must be a valid list"),
    ]:
        ((key, line, said),) = problems(b"comment: true\n" + content)
        assert key is not None and key.startswith("agents_md.scoped") and line == 3
        assert message in said
