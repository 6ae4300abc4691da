"""A repository's `.github/playbook-bot.yml`: the allowed keys, each problem with its line.

As Probot apps do, an organisation's defaults live in the same file in its `.github`
repository and a repository's own file is merged over them. A file that does not parse or
holds an unknown key or a bad value is never applied in part: the bot keeps the last good
values of that file (or the defaults) and records each problem with the file, the key, the
line and what is allowed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal, get_args

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    field_validator,
)

from playbook.outcomes.demote_policy import DemotePolicy
from playbook.repos.strict_yaml import SettingsLoader
from playbook.reviews.capture_from import CaptureSetting

FILE_PATH = ".github/playbook-bot.yml"
# The repository of organisation-wide defaults, as GitHub and Probot name it.
ORG_REPO = ".github"
# A settings file is a few lines; anything this big is a mistake or an attack.
MAX_FILE_BYTES = 64 * 1024
RULE_FILE_PATHS = (
    "AGENTS.md",
    "CLAUDE.md",
    ".github/copilot-instructions.md",
    ".cursor/rules/playbook.mdc",
)
REPOSITORY = "repository"
ORGANISATION = "organisation"
DEFAULT = "default"
# A file with a hundred bad list items needs its first few named, not a hundred rows kept.
MAX_PROBLEMS = 20


# The agents whose path-scoped rule files the sync can write (see playbook/rules/scoped.py).
ScopedFormat = Literal["copilot", "cursor", "claude"]
SCOPED_FORMATS: tuple[str, ...] = get_args(ScopedFormat)


class AgentsMd(BaseModel):
    """The `agents_md` block: keep the playbook's best lessons in a rule file agents read."""

    model_config = ConfigDict(extra="forbid")

    # Strict: `true` is not 1, `'3'` is not 3 (see strict_yaml for what YAML reads as what).
    # Each description is the key's help in an editor (the JSON Schema, playbook/repos/schema).
    enabled: StrictBool = Field(
        False,
        description="true: the bot keeps a block of the playbook's best lessons in the rule file "
        "at `path`, proposed in one pull request.",
    )
    path: Literal[
        "AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md", ".cursor/rules/playbook.mdc"
    ] = Field("AGENTS.md", description="The rule file the block of lessons is kept in.")
    max_chars: StrictInt = Field(
        8000,
        ge=500,
        le=32_000,
        description="The most characters the block may take, markers included (500 to 32,000).",
    )
    pause_days: StrictInt = Field(
        30,
        ge=1,
        le=365,
        description="Days the sync pauses after someone closes its pull request unmerged "
        "(1 to 365).",
    )
    scoped: list[ScopedFormat] = Field(
        default_factory=list,
        max_length=len(SCOPED_FORMATS),
        description="Agents whose path-scoped rule files the sync also writes, in the same pull "
        "request: copilot (.github/instructions/playbook-<area>.instructions.md), cursor "
        "(.cursor/rules/playbook-<area>.mdc), claude (.claude/rules/playbook-<area>.md). Lessons "
        "anchored to paths go there, grouped by area; the others stay in the block. Empty: none.",
        json_schema_extra={"uniqueItems": True},
    )

    @field_validator("scoped")
    @classmethod
    def _once_each(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("names an agent twice; list each of copilot, cursor, claude once")
        return value


class RepoSettings(BaseModel):
    """The settings of one repository; None means the installation's own setting applies."""

    model_config = ConfigDict(extra="forbid")

    # Strict numbers and booleans: a file saying `holdout_percent: true` or `max_lessons: '3'`
    # is refused with the key named, not read as 1 or 3. "Unset" in a description is None: the
    # installation's own setting applies.
    enabled: StrictBool = Field(
        True, description="false: the bot leaves this repository's issues and pull requests alone."
    )
    scope: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="The lessons scope of this repository's tickets, one word starting with the "
        "repository's owner, such as octo-org/shared (repositories of one owner may share "
        "lessons). Unset: the repository itself, owner/name.",
        # What the validator below and parse()'s owner check ask, as far as a schema can say.
        json_schema_extra={"pattern": r"^[^\s/]+/\S*$"},
    )
    comment: StrictBool = Field(
        True, description="false: no lessons comment on new issues (outcomes still count)."
    )
    pr_comment: StrictBool = Field(
        True,
        description="false: no comment on pull requests listing the lessons anchored to the "
        "files they change.",
    )
    max_lessons: StrictInt | None = Field(
        None,
        ge=1,
        le=20,
        description="Lessons in a comment, 1 to 20. Unset: PLAYBOOK_LESSONS_PER_TICKET.",
    )
    # The relevance floor a comment's best lesson must reach (0: speak on every ticket).
    min_relevance: float | None = Field(
        None,
        ge=0,
        le=1,
        description="The relevance a comment's best lesson must reach, a number from 0 to 1 "
        "such as 0.05 (0: comment on every ticket a lesson shares a word with). Unset: "
        "PLAYBOOK_MIN_RELEVANCE.",
    )
    demote_policy: DemotePolicy | None = Field(
        None,
        description="When a pull request closed unmerged demotes its tickets' lessons: always, "
        "or needs-review (only when the pull request or a ticket is flagged for human review). "
        "Unset: PLAYBOOK_DEMOTE_POLICY.",
    )
    capture_from_reviews: CaptureSetting | None = Field(
        None,
        description="Where proposed lessons from review feedback come from: off, heuristic, or "
        "model (the heuristic when no model is set). Unset: PLAYBOOK_CAPTURE_FROM_REVIEWS.",
    )
    holdout_percent: StrictInt | None = Field(
        None,
        ge=0,
        le=50,
        description="This repository's share of tickets held out (shown no lessons) while the "
        "installation's experiment runs, 0 to 50; 0 keeps its tickets out of it. Unset: the "
        "experiment's share.",
    )
    context_budget: StrictInt | None = Field(
        None,
        ge=2000,
        le=32_000,
        description="Characters of lessons this repository's scope may fill, 2,000 to 32,000 "
        "(past 75%, consolidation is proposed). Unset: PLAYBOOK_CONTEXT_BUDGET.",
    )
    ignore_labels: list[str] = Field(
        default_factory=list,
        max_length=100,
        description="Issues with one of these labels (compared without case) get no comment.",
        # The items' bounds are the validator's below.
        json_schema_extra={"items": {"type": "string", "minLength": 1, "maxLength": 100}},
    )
    agents_md: AgentsMd = Field(
        default_factory=AgentsMd,
        description="Keep the playbook's best lessons in a rule file agents read (AGENTS.md, "
        "CLAUDE.md, ...), through one pull request.",
    )

    @field_validator("scope")
    @classmethod
    def _scope_spelling(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip()
        if not value or any(c.isspace() or not c.isprintable() for c in value):
            raise ValueError("must be one word such as octo-org/shared, without spaces")
        return value

    @field_validator("min_relevance", mode="before")
    @classmethod
    def _a_number(cls, value: object) -> object:
        # As strict as the other numbers: `true` or '0.1' is refused, not read as 1 or 0.1.
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ValueError("must be a number from 0 to 1, such as 0.05")
        return value

    @field_validator("ignore_labels")
    @classmethod
    def _labels(cls, value: list[str]) -> list[str]:
        for label in value:
            if not label.strip() or len(label) > 100:
                raise ValueError("each label must be 1 to 100 characters")
        return [label.strip() for label in value]

    def scope_for(self, repo: str) -> str:
        """The lessons scope of ``repo``'s tickets: this setting, else the repository itself."""
        return self.scope or repo

    def ignores(self, labels: list[str] | tuple[str, ...]) -> str | None:
        """The first of ``labels`` that `ignore_labels` names (compared without case)."""
        ignored = {label.casefold() for label in self.ignore_labels}
        return next((label for label in labels if label.casefold() in ignored), None)


KEYS = tuple(RepoSettings.model_fields)
AGENTS_MD_KEYS = tuple(AgentsMd.model_fields)


@dataclass(frozen=True)
class Problem:
    """What is wrong in a settings file: where (file, key, line) and what is allowed."""

    file: str
    key: str | None
    line: int | None
    message: str

    def __str__(self) -> str:
        where = self.file + (f":{self.line}" if self.line else "")
        return f"{where}: {self.key + ': ' if self.key else ''}{self.message}"

    def as_dict(self) -> dict[str, Any]:
        """For the database and JSON answers."""
        return asdict(self)

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> Problem:
        """Back from the database."""
        return cls(
            str(value.get("file") or ""),
            value.get("key"),
            value.get("line"),
            str(value.get("message") or ""),
        )


@dataclass(frozen=True)
class Parsed:
    """One file read: its values when the file is good (None when not), and its problems."""

    values: dict[str, Any] | None
    problems: list[Problem]


def parse(content: bytes, file: str, owner: str | None) -> Parsed:
    """Check one settings file; ``owner`` is the repository's owner (a scope must be its own),
    None when it is not known (a local file checked alone): a scope's owner is not checked."""
    if len(content) > MAX_FILE_BYTES:
        return too_big(file, len(content))
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        return _bad(file, None, None, f"is not UTF-8 text (byte {error.start})")
    try:
        node = yaml.compose(text, Loader=SettingsLoader)
        loaded = yaml.load(text, Loader=SettingsLoader)  # a SafeLoader subclass
    except RecursionError:
        return _bad(file, None, None, "is nested too deeply to be a settings file")
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        reason = getattr(error, "problem", None) or "is not valid YAML"
        return _bad(file, None, line, f"is not valid YAML ({reason})")
    if loaded is None:
        return Parsed({}, [])  # an empty file: every default
    if not isinstance(loaded, dict) or not isinstance(node, yaml.MappingNode):
        return _bad(file, None, 1, "must be a mapping of settings such as `comment: false`")
    lines, twice = _key_lines(node)
    problems = [
        Problem(file, key, line, f"is set twice (lines {first} and {line}); keep one")
        for key, first, line in twice
    ]
    problems += [
        Problem(file, key, lines.get(key) or _nearest(lines, key), message)
        for key, message in _errors(loaded)
    ]
    if len(problems) > MAX_PROBLEMS:
        more = len(problems) - MAX_PROBLEMS + 1
        problems = [*problems[: MAX_PROBLEMS - 1], Problem(file, None, None, f"{more} more")]
    scope = loaded.get("scope")
    if (
        isinstance(scope, str)
        and owner is not None
        and not problems
        and not scope.strip().startswith(f"{owner}/")
    ):
        problems.append(
            Problem(
                file,
                "scope",
                lines.get("scope"),
                f"must start with {owner}/ (a repository shares lessons only within its owner)",
            )
        )
    if problems:
        return Parsed(None, problems)
    return Parsed(loaded, [])


def too_big(file: str, size: int) -> Parsed:
    """The problem of a file over MAX_FILE_BYTES (``size`` bytes), read whole or not."""
    return _bad(file, None, None, f"is {size:,} bytes; at most {MAX_FILE_BYTES:,}")


def _bad(file: str, key: str | None, line: int | None, message: str) -> Parsed:
    return Parsed(None, [Problem(file, key, line, message)])


def _errors(values: dict[Any, Any]) -> list[tuple[str, str]]:
    """Each bad key with what is allowed, in the words a person editing the file needs."""
    try:
        RepoSettings.model_validate(values)
    except ValidationError as error:
        found = []
        for item in error.errors(include_url=False, include_input=False):
            location = [str(part) for part in item["loc"]]
            key = ".".join(location)
            if item["type"] == "extra_forbidden":
                allowed = AGENTS_MD_KEYS if location[0] == "agents_md" else KEYS
                message = f"is not a setting; the settings are {', '.join(allowed)}"
            elif item["type"] in _STRICT_MESSAGES:
                message = _STRICT_MESSAGES[item["type"]]
            else:
                message = item["msg"].replace("Input should be", "must be")
                message = message.removeprefix("Value error, ")
            found.append((key, message))
        return found
    return []


# What a person must write instead, for a value of the wrong kind (the value is not echoed:
# it is outside text, and the line already points at it).
_WHOLE_NUMBER = (
    "must be a whole number written in decimal, such as 5 (not true, not quoted, not 0x10)"
)
_STRICT_MESSAGES = {
    "int_type": _WHOLE_NUMBER,
    "int_parsing": _WHOLE_NUMBER,
    "int_from_float": _WHOLE_NUMBER,
    "bool_type": "must be true or false (yes, no, on, off, 1 and 0 are not read as either)",
    "bool_parsing": "must be true or false (yes, no, on, off, 1 and 0 are not read as either)",
}


def _key_lines(node: yaml.MappingNode) -> tuple[dict[str, int], list[tuple[str, int, int]]]:
    """Top-level keys and the `agents_md` block's keys with their 1-based lines, and the keys
    set twice (YAML forbids it; PyYAML would quietly keep the last)."""
    lines: dict[str, int] = {}
    twice: list[tuple[str, int, int]] = []

    def note(key: str, line: int) -> None:
        if key in lines:
            twice.append((key, lines[key], line))
        lines.setdefault(key, line)

    for key_node, value_node in node.value:
        key = str(key_node.value)
        note(key, key_node.start_mark.line + 1)
        if key == "agents_md" and isinstance(value_node, yaml.MappingNode):
            for inner, _ in value_node.value:
                note(f"agents_md.{inner.value}", inner.start_mark.line + 1)
    return lines, twice


def _nearest(lines: dict[str, int], key: str) -> int | None:
    """The line of ``key``'s closest parent that has one (a list item's, its list's)."""
    parts = key.split(".")
    while parts:
        parts.pop()
        joined = ".".join(parts)
        if joined in lines:
            return lines[joined]
    return None


def merge(org: dict[str, Any] | None, repo: dict[str, Any] | None) -> dict[str, Any]:
    """The repository's values over the organisation's; the `agents_md` block key by key."""
    merged: dict[str, Any] = dict(org or {})
    for key, value in (repo or {}).items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


def resolve(
    org: dict[str, Any] | None, repo: dict[str, Any] | None
) -> tuple[RepoSettings, dict[str, str]]:
    """The effective settings from two good files, and where each value comes from.

    Each file was checked alone; merged, they still are (a block is merged key by key).
    """
    merged = merge(org, repo)
    settings = RepoSettings.model_validate(merged)
    sources: dict[str, str] = {}
    for key in KEYS:
        if key == "agents_md":
            continue
        sources[key] = _source(key, org, repo)
    for key in AGENTS_MD_KEYS:
        inner_org = (org or {}).get("agents_md")
        inner_repo = (repo or {}).get("agents_md")
        sources[f"agents_md.{key}"] = _source(
            key,
            inner_org if isinstance(inner_org, dict) else None,
            inner_repo if isinstance(inner_repo, dict) else None,
        )
    return settings, sources


def _source(key: str, org: dict[str, Any] | None, repo: dict[str, Any] | None) -> str:
    if repo and key in repo:
        return REPOSITORY
    if org and key in org:
        return ORGANISATION
    return DEFAULT
