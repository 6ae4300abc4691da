"""The JSON Schema of `.github/playbook-bot.yml`: shipped as the model generates it, useful to an
editor (dialect, id, a description on every key, enums, bounds, no unknown key), and in step
with the bot: the documented examples pass both, and the files the bot refuses fail both."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import jsonschema
import pytest
import yaml

from playbook.repos.schema import FILE_NAME, schema_text, settings_schema, shipped_text
from playbook.repos.settings import AGENTS_MD_KEYS, KEYS, parse
from playbook.repos.strict_yaml import SettingsLoader

ROOT = Path(__file__).parents[3]
FILE = ".github/playbook-bot.yml"
REGENERATE = f"playbook-bot config --schema > playbook/repos/{FILE_NAME}"


def validator() -> jsonschema.protocols.Validator:
    schema = settings_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def schema_errors(text: str) -> list[str]:
    """What the shipped schema says of a file, read as the bot reads YAML."""
    loaded = yaml.load(text, Loader=SettingsLoader)
    errors = [error.message for error in validator().iter_errors(loaded or {})]
    # Several editors' YAML support validates as draft-07 whatever $schema says: the schema
    # uses nothing newer, so it means the same there.
    draft7 = jsonschema.Draft7Validator(settings_schema())
    assert bool(errors) == bool(list(draft7.iter_errors(loaded or {}))), text
    return errors


def bot_problems(text: str) -> list[str]:
    return [str(problem) for problem in parse(text.encode(), FILE, "octo-org").problems]


def test_the_shipped_schema_is_the_one_the_model_generates() -> None:
    assert shipped_text() == schema_text(), f"the schema file is stale: run `{REGENERATE}`"


def test_the_schema_ships_in_the_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert f"repos/{FILE_NAME}" in project["tool"]["setuptools"]["package-data"]["playbook"]


def test_the_schema_tells_an_editor_the_dialect_and_every_key() -> None:
    schema = settings_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"].startswith("urn:playbook-bot:")
    assert FILE in schema["title"]
    agents_md = schema["$defs"]["AgentsMd"]
    for block, keys in ((schema, KEYS), (agents_md, AGENTS_MD_KEYS)):
        assert block["additionalProperties"] is False
        assert tuple(block["properties"]) == keys
        undocumented = [key for key in keys if not block["properties"][key].get("description")]
        assert undocumented == []
    assert schema["$defs"]["DemotePolicy"]["enum"] == ["always", "needs-review"]
    assert schema["$defs"]["CaptureFrom"]["enum"] == ["off", "heuristic", "model"]
    assert "CLAUDE.md" in agents_md["properties"]["path"]["enum"]
    # Strict as the model: a whole number is an integer, a flag a boolean, with the bounds.
    assert agents_md["properties"]["max_chars"] | {"description": ""} == {
        "default": 8000,
        "description": "",
        "maximum": 32000,
        "minimum": 500,
        "title": "Max Chars",
        "type": "integer",
    }
    assert {"type": "integer", "minimum": 0, "maximum": 50} in (
        schema["properties"]["holdout_percent"]["anyOf"]
    )
    assert schema["properties"]["comment"]["type"] == "boolean"


# Put right before a settings block the docs show to demonstrate problems.
SHOWS_PROBLEMS = "<!-- settings file with problems -->"


def documented_examples(*, bad: bool = False) -> list[tuple[str, str]]:
    """Every YAML block of the README and the docs that is a settings file: each of its
    top-level keys is a setting. With ``bad``, those marked as showing problems instead."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        pattern = r"((?:^.*\n){0,3})^```ya?ml\n([\s\S]*?)^```"
        for before, block in re.findall(pattern, text, flags=re.M):
            keys = re.findall(r"^([A-Za-z_][\w-]*):", block, flags=re.M)
            if keys and set(keys) <= set(KEYS) and (SHOWS_PROBLEMS in before) == bad:
                found.append((str(page.relative_to(ROOT)), block))
    return found


def test_the_documented_examples_pass_the_schema_and_the_bot() -> None:
    examples = documented_examples()
    assert examples, "the README or docs/ show a settings file"
    for page, block in examples:
        assert schema_errors(block) == [], page
        assert bot_problems(block) == [], page


def test_a_documented_example_of_problems_fails_the_schema_and_the_bot() -> None:
    for page, block in documented_examples(bad=True):
        assert schema_errors(block) != [], page
        assert bot_problems(block) != [], page


GOOD = [
    "",
    "comment: false\n",
    "enabled: true\nscope: octo-org/shared\nmax_lessons: 20\n",
    "min_relevance: 0\n",
    "min_relevance: 0.05\n",
    "max_lessons:\n",  # null: the installation's setting
    "demote_policy: needs-review\ncapture_from_reviews: model\n",
    "holdout_percent: 0\ncontext_budget: 32000\n",
    "ignore_labels: [wontfix, question]\n",
    "agents_md:\n  enabled: true\n  path: .cursor/rules/playbook.mdc\n  pause_days: 365\n",
]

# Each refused by the bot; the schema refuses it too, so an editor underlines it first.
BAD = [
    "colour: blue\n",
    "agents_md:\n  colour: blue\n",
    "agents_md:\n  path: README.md\n",
    "agents_md:\n  max_chars: 499\n",
    "enabled: yes\n",
    "comment: 1\n",
    "max_lessons: '3'\n",
    "max_lessons: 21\n",
    "max_lessons: true\n",
    "holdout_percent: 51\n",
    "holdout_percent: 010\n",
    "context_budget: 1999\n",
    "min_relevance: true\n",
    "min_relevance: '0.1'\n",
    "min_relevance: 1.5\n",
    "demote_policy: sometimes\n",
    "capture_from_reviews: always\n",
    "scope: two words\n",
    "scope: ''\n",
    "ignore_labels: ['']\n",
    "ignore_labels: wontfix\n",
    "- comment: false\n",
]


@pytest.mark.parametrize("text", GOOD)
def test_a_file_the_bot_applies_passes_the_schema(text: str) -> None:
    assert bot_problems(text) == []
    assert schema_errors(text) == []


@pytest.mark.parametrize("text", BAD)
def test_a_file_the_bot_refuses_fails_the_schema(text: str) -> None:
    assert bot_problems(text) != []
    assert schema_errors(text) != []


def test_a_labels_list_too_long_fails_both() -> None:
    text = "ignore_labels: [" + ", ".join(f"l{n}" for n in range(101)) + "]\n"
    assert bot_problems(text) != []
    assert any("long" in message for message in schema_errors(text))
