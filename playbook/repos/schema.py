"""The JSON Schema of `.github/playbook-bot.yml`, generated from its model, for editors.

The package ships the schema as ``playbook-bot.schema.json`` beside this module; `playbook-bot
config --schema` prints it from the model, and a test fails when the two disagree, so the file
an editor validates against is the one the bot checks with.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode
from pydantic_core import CoreSchema

from playbook.repos.settings import FILE_PATH, RepoSettings

FILE_NAME = "playbook-bot.schema.json"
# A name, not an address: the schema is found through the package, the docs or an editor's
# setting, and no host of ours would answer at an https:// $id.
SCHEMA_ID = "urn:playbook-bot:schema:repo-settings"
TITLE = f"playbook-bot settings ({FILE_PATH})"
DESCRIPTION = (
    "The settings of one repository (in its default branch), or an organisation's defaults "
    "(in its .github repository), for playbook-bot. Every key is optional. Numbers and "
    "booleans are read strictly: true is not 1, '3' is not 3, yes and on are not true."
)


class _Generator(GenerateJsonSchema):
    """pydantic's generator with the header editors look for: the dialect, an id, a title."""

    def generate(self, schema: CoreSchema, mode: JsonSchemaMode = "validation") -> Any:
        """The model's schema under ``$schema`` (draft 2020-12, pydantic's dialect) and ``$id``."""
        generated = super().generate(schema, mode)
        generated.pop("title", None)
        generated.pop("description", None)
        return {
            "$schema": self.schema_dialect,
            "$id": SCHEMA_ID,
            "title": TITLE,
            "description": DESCRIPTION,
            **generated,
        }


def settings_schema() -> dict[str, Any]:
    """The JSON Schema of a settings file, from RepoSettings."""
    return RepoSettings.model_json_schema(schema_generator=_Generator)


def schema_text() -> str:
    """The schema as the shipped file spells it: indented JSON ending with a line break."""
    return json.dumps(settings_schema(), indent=2, ensure_ascii=False) + "\n"


def shipped_text() -> str:
    """The schema file shipped in the package (regenerate it with `config --schema`)."""
    return (resources.files("playbook.repos") / FILE_NAME).read_text(encoding="utf-8")
