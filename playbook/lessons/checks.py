"""A bullet's values checked and normalised before any write: add, edit and import alike."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from typing import Any

from playbook import clock
from playbook.anchors import fields as anchors
from playbook.lessons import fields, secrets
from playbook.lessons.fields import FieldProblem
from playbook.models import STATUSES

TIME_FIELDS = ("demoted_on", "created_at", "updated_at")
# Free-text fields besides the lesson and its provenance, with their column sizes; None or ""
# clears the optional ones.
_OPTIONAL_TEXT = {
    "source": fields.SOURCE_CHARS,
    "source_url": fields.SOURCE_URL_CHARS,
    "demoted_reason": fields.REASON_CHARS,
}
_REQUIRED_TEXT = {"section": fields.SECTION_CHARS, "scope": fields.SCOPE_CHARS}
LEARNED_FROM_MISSING = "is missing; name the ticket the lesson was learned from, e.g. CTMS-4337"
_LEARNED_FROM_EMPTY = "is empty; name the ticket the lesson was learned from, e.g. CTMS-4337"


def normalize_tags(tags: Iterable[str] | str | None) -> list[str]:
    """Split comma-separated tags, strip them and drop empties and repeats, keeping order."""
    if tags is None:
        return []
    items = tags.split(",") if isinstance(tags, str) else list(tags)
    seen: dict[str, None] = {}
    for tag in items:
        cleaned = str(tag).strip()
        if cleaned:
            seen.setdefault(cleaned, None)
    return list(seen)


def check_tags(value: object) -> list[str]:
    """Tags from a list or comma-separated text, normalised; FieldProblem when they cannot be."""
    if isinstance(value, str):
        items: list[str] = value.split(",")
    elif isinstance(value, list | tuple):
        items = []
        for item in value:
            if not isinstance(item, str):
                raise FieldProblem("tags", f"each tag must be text, not {fields.describe(item)}")
            items.append(item)
    else:
        raise FieldProblem(
            "tags", f"must be a list or comma-separated text, not {fields.describe(value)}"
        )
    # Made visible before the repeats are dropped: "x" and "x" with a zero-width space are one.
    tags = normalize_tags(fields.text(item, "tags", len(item)) for item in items)
    if len(tags) > fields.MAX_TAGS:
        raise FieldProblem("tags", f"has {len(tags)} tags, over the {fields.MAX_TAGS} allowed")
    for tag in tags:
        fields.text(tag, "tags", fields.TAG_CHARS)
    return tags


def check_status(value: object, allowed: Sequence[str] = STATUSES) -> str:
    """``value`` if it is one of ``allowed``; else FieldProblem naming the choices."""
    if not isinstance(value, str) or value.strip() not in allowed:
        shown = repr(value) if isinstance(value, str) else fields.describe(value)
        raise FieldProblem("status", f"{shown} is not one of {', '.join(allowed)}")
    return value.strip()


def check_fields(
    values: Mapping[str, Any], *, max_chars: int = fields.MAX_LESSON_CHARS
) -> dict[str, Any]:
    """A bullet's fields checked and normalised; FieldProblem names the first that does not fit.

    Every write of a bullet comes through here (add, edit, import), whichever door it came in
    by, so a bad value is refused with its field named before anything is written. Text
    or a source_url holding a credential is refused too (`secrets.HoldsCredential`), with
    its kind and place named and never its value.
    ``max_chars`` is the longest lesson text (PLAYBOOK_MAX_LESSON_CHARS where settings apply).
    """
    cleaned: dict[str, Any] = {}
    for key, value in values.items():
        if key == "id":
            cleaned[key] = fields.bullet_id(value)
        elif key == "text":
            cleaned[key] = fields.text(
                value,
                "text",
                max_chars,
                required=True,
                empty="is empty; a bullet needs some text",
                limit_hint=" (PLAYBOOK_MAX_LESSON_CHARS); shorten it or split it in two",
            )
            # A lesson is posted in public comments and sent to every agent.
            secrets.refuse(key, cleaned[key])
        elif key == "learned_from":
            if value is None:
                raise FieldProblem(key, LEARNED_FROM_MISSING)
            cleaned[key] = fields.text(
                value, key, fields.TICKET_KEY_CHARS, required=True, empty=_LEARNED_FROM_EMPTY
            )
        elif key in _REQUIRED_TEXT:
            cleaned[key] = fields.text(value, key, _REQUIRED_TEXT[key], required=True)
        elif key in _OPTIONAL_TEXT:
            kept = None if value is None else fields.text(value, key, _OPTIONAL_TEXT[key])
            cleaned[key] = kept or None
            if key == "source_url":
                secrets.refuse(key, kept)  # shown as the lesson's link: no password in it
        elif key == "tags":
            cleaned[key] = check_tags(value)
        elif key == "paths":
            # None or "" leaves the lesson unanchored (an edit's `--paths ''` clears them).
            cleaned[key] = anchors.check_paths(value)
        elif key == "symbols":
            cleaned[key] = anchors.check_symbols(value)
        elif key == "status":
            cleaned[key] = check_status(value)
        elif key == "superseded_by":
            cleaned[key] = None if value in (None, "") else fields.bullet_id(value, key)
        elif key in TIME_FIELDS:
            cleaned[key] = (
                None if value is None and key == "demoted_on" else _check_time(key, value)
            )
        else:
            raise FieldProblem(key, "is not a field of a bullet")
    if "status" in cleaned or cleaned.get("superseded_by"):
        _check_replacement(cleaned)
    return cleaned


def _check_replacement(cleaned: dict[str, Any]) -> None:
    """A superseded lesson names its replacement, and only a superseded one does."""
    status, by = cleaned.get("status"), cleaned.get("superseded_by")
    if status == "superseded" and not by:
        raise FieldProblem(
            "superseded_by", "is missing; a superseded lesson names the lesson replacing it"
        )
    if by and status != "superseded":
        raise FieldProblem(
            "superseded_by", f"names {by} but status is {status or 'not given'}, not superseded"
        )
    if by and by == cleaned.get("id"):
        raise FieldProblem("superseded_by", f"{by} is the lesson itself")
    if status != "superseded":
        cleaned["superseded_by"] = None  # a new status ends any old replacement


def _check_time(field: str, value: object) -> datetime:
    if isinstance(value, datetime):
        return clock.to_utc(value)
    if isinstance(value, date):
        # YAML reads an unquoted 2026-11-02 as a date: midnight UTC of that day.
        value = value.isoformat()
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise FieldProblem(
            field, f"must be a date such as 2026-11-02, not {fields.describe(value)}"
        )
    try:
        return clock.parse_time(value)
    except (ValueError, TypeError, OverflowError, OSError):
        raise FieldProblem(field, f"{value!r} is not a date such as 2026-11-02") from None
