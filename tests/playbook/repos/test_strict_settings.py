"""A settings file means one thing: a number is a decimal whole number, a boolean is true or
false, and every other spelling is refused with its key and line, never read as something else."""

from __future__ import annotations

import pytest

from playbook.repos.settings import parse, resolve

FILE = ".github/playbook-bot.yml"

# Whole-number keys with a value in range, so only the spelling is under test.
NUMBERS = {
    "max_lessons": 3,
    "holdout_percent": 10,
    "context_budget": 4000,
    "agents_md.max_chars": 4000,
    "agents_md.pause_days": 7,
}
BOOLEANS = ("enabled", "comment", "agents_md.enabled")

# Spellings that YAML 1.1 (PyYAML) or pydantic's lax mode would turn into a number.
NOT_NUMBERS = [
    "true",
    "false",
    "yes",
    "no",
    "on",
    "off",
    "y",
    "'3'",
    '"3"',
    "0x10",
    "0X10",
    "0o10",
    "010",
    "0b11",
    "1_0",
    "1:20",
    "3.0",
    "3.5",
    "1e1",
    ".inf",
    ".nan",
    "!!int 0x10",
    "!!float 3",
    "!!str 3",
    "9" * 5000,  # Python refuses to convert it: must be a problem, not an exception
    "[3]",
    "{a: 3}",
    "2026-11-28",
]
# Spellings that YAML 1.1 or lax parsing would turn into a boolean.
NOT_BOOLEANS = [
    "yes",
    "no",
    "Yes",
    "NO",
    "on",
    "off",
    "y",
    "n",
    "1",
    "0",
    "'true'",
    '"false"',
    "!!bool yes",
    "t",
    "[true]",
    "~",
]


def _file(key: str, value: str) -> bytes:
    if key.startswith("agents_md."):
        return f"agents_md:\n  {key.split('.', 1)[1]}: {value}\n".encode()
    return f"{key}: {value}\n".encode()


def _only_problem(content: bytes) -> tuple[str | None, int | None, str]:
    parsed = parse(content, FILE, "octo-org")
    assert parsed.values is None, f"{content!r} was applied as {parsed.values}"
    [problem] = parsed.problems
    assert "\n" not in problem.message
    return problem.key, problem.line, problem.message


@pytest.mark.parametrize("value", NOT_NUMBERS)
@pytest.mark.parametrize("key", sorted(NUMBERS))
def test_a_number_key_refuses_every_other_spelling_naming_the_key(key: str, value: str) -> None:
    found_key, line, message = _only_problem(_file(key, value))
    assert found_key == key
    assert line == (2 if key.startswith("agents_md.") else 1)
    assert message.startswith("must be a whole number written in decimal"), message


@pytest.mark.parametrize("value", NOT_BOOLEANS)
@pytest.mark.parametrize("key", BOOLEANS)
def test_a_boolean_key_takes_only_true_or_false(key: str, value: str) -> None:
    found_key, _, message = _only_problem(_file(key, value))
    assert found_key == key
    assert message.startswith("must be true or false"), message


@pytest.mark.parametrize("key", sorted(NUMBERS))
def test_decimal_numbers_are_read(key: str) -> None:
    value = NUMBERS[key]
    for spelling in (str(value), f"+{value}"):
        parsed = parse(_file(key, spelling), FILE, "octo-org")
        assert parsed.problems == [], spelling
        chosen, _ = resolve(None, parsed.values)
        inner = chosen.agents_md if key.startswith("agents_md.") else chosen
        assert getattr(inner, key.rsplit(".", 1)[-1]) == value


@pytest.mark.parametrize(
    ("spelling", "value"), [("0.05", 0.05), (".5", 0.5), ("1.0", 1.0), ("5.0e-2", 0.05), ("0", 0)]
)
def test_the_relevance_floor_is_read_as_the_fraction_every_yaml_reads(
    spelling: str, value: float
) -> None:
    # The README's own example, `min_relevance: 0.05`, was once refused as the string '0.05'.
    parsed = parse(f"min_relevance: {spelling}\n".encode(), FILE, "octo-org")
    assert parsed.problems == []
    chosen, _ = resolve(None, parsed.values)
    assert chosen.min_relevance == value


@pytest.mark.parametrize("spelling", ["1_0.5", ".inf", ".nan", "1e-2", "!!float 1_0.5", "'0.05'"])
def test_a_fraction_spelt_as_only_yaml_1_1_reads_it_is_refused(spelling: str) -> None:
    found_key, _, message = _only_problem(f"min_relevance: {spelling}\n".encode())
    assert (found_key, message) == ("min_relevance", "must be a number from 0 to 1, such as 0.05")


def test_a_fraction_is_not_a_whole_number() -> None:
    found_key, _, message = _only_problem(b"max_lessons: 3.0\n")
    assert found_key == "max_lessons"
    assert message.startswith("must be a whole number"), message


@pytest.mark.parametrize("spelling", ["true", "True", "TRUE", "false", "False", "FALSE"])
def test_true_and_false_are_read_in_the_spellings_every_yaml_reads_alike(spelling: str) -> None:
    parsed = parse(f"comment: {spelling}\n".encode(), FILE, "octo-org")
    assert parsed.problems == []
    chosen, _ = resolve(None, parsed.values)
    assert chosen.comment is (spelling.lower() == "true")


def test_strings_that_yaml_1_1_turns_into_booleans_stay_strings_where_a_word_is_wanted() -> None:
    # `off` is a word of capture_from_reviews, and a label may be called `yes`.
    parsed = parse(
        b"capture_from_reviews: off\nignore_labels: [yes, no, on, 0x10]\nscope: octo-org/on\n",
        FILE,
        "octo-org",
    )
    assert parsed.problems == []
    chosen, _ = resolve(None, parsed.values)
    assert chosen.capture_from_reviews == "off"
    assert chosen.ignore_labels == ["yes", "no", "on", "0x10"]


def test_one_file_with_many_loose_values_names_each_and_applies_none() -> None:
    parsed = parse(
        b"holdout_percent: true\nmax_lessons: '3'\ncontext_budget: 0x1000\ncomment: yes\n",
        FILE,
        "octo-org",
    )
    assert parsed.values is None
    assert sorted((p.key, p.line) for p in parsed.problems) == [
        ("comment", 4),
        ("context_budget", 3),
        ("holdout_percent", 1),
        ("max_lessons", 2),
    ]


def test_values_stored_before_the_rules_were_strict_are_checked_again() -> None:
    # A row read by an older bot (`holdout_percent: yes` stored as true) is not good any more:
    # resolve refuses it (ValueError), and its callers fall back to the defaults.
    with pytest.raises(ValueError, match="holdout_percent"):
        resolve(None, {"holdout_percent": True})
