"""Consolidations on /ui/proposals: merge overlapping lessons after reading (and editing) it."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from flask import abort, current_app, flash, g, redirect, request, url_for
from sqlalchemy.orm import Session
from werkzeug.wrappers import Response

from playbook import db
from playbook.consolidation import store
from playbook.errors import BulletNotFound, ConsolidationNotFound, InvalidInput, InvalidTransition
from playbook.lessons import fields
from webhooks.runtime import runtime
from webhooks.ui import access

# Accepted ones stay on the page this long (by count) so a wrong accept can be undone there.
RECENT = 10
MAX_ID = 2**63 - 1
_DECIDE_ERRORS = (InvalidTransition, InvalidInput, BulletNotFound, ConsolidationNotFound)


def segments(text: str, terms: list[str]) -> list[tuple[str, bool]]:
    """``text`` cut into (piece, is a dropped term) pairs, so the page can mark the terms.

    The template escapes every piece: highlighting never makes lesson text markup.
    """
    wanted = sorted({term for term in terms if isinstance(term, str) and term.strip()}, key=len)
    if not wanted:
        return [(text, False)]
    pattern = re.compile(
        "|".join(rf"(?<!\w){re.escape(term)}(?!\w)" for term in reversed(wanted)), re.IGNORECASE
    )
    pieces: list[tuple[str, bool]] = []
    at = 0
    for found in pattern.finditer(text):
        if found.start() > at:
            pieces.append((text[at : found.start()], False))
        pieces.append((found.group(0), True))
        at = found.end()
    if at < len(text):
        pieces.append((text[at:], False))
    return pieces


def _shown(row: Any, edits: dict[int, str]) -> dict[str, Any]:
    """A consolidation as the page draws it: members with their dropped terms marked."""
    data = store.as_dict(row)
    dropped = data.get("dropped_terms") or {}
    for member in data.get("members") or []:
        terms = [str(term) for term in dropped.get(member["id"], [])]
        member["dropped"] = terms
        member["pieces"] = segments(member.get("text") or "", terms)
    data["text"] = edits.get(data["id"], data.get("draft") or "")
    for key in ("created_at", "decided_at"):
        if isinstance(data.get(key), str):
            data[key] = datetime.fromisoformat(data[key])
    return data


def section(session: Session) -> dict[str, Any]:
    """What the Consolidations section of /ui/proposals shows: open ones, recent accepts."""
    edits: dict[int, str] = g.get("consolidation_edits", {})
    waiting = [_shown(row, edits) for row in store.listing(session, status="open")]
    accepted = [_shown(row, {}) for row in store.listing(session, status="accepted")]
    accepted.sort(key=lambda item: (item.get("decided_at") is not None, item.get("decided_at")))
    return {"consolidations": waiting, "consolidated": list(reversed(accepted))[:RECENT]}


def _id(consolidation_id: str) -> int:
    """The path's id; one that cannot be an id names nothing (404)."""
    if not consolidation_id.isdigit() or not 1 <= int(consolidation_id) <= MAX_ID:
        abort(404)
    return int(consolidation_id)


def _reason() -> str | None:
    return fields.text(request.form.get("reason", ""), "reason", fields.REASON_CHARS) or None


def _back() -> Response:
    return redirect(url_for("ui.proposals") + "#consolidations")


def accept(consolidation_id: str) -> Response | tuple[str, int]:
    """Accept with the text as the maintainer left it in the form: the merged lesson."""
    number = _id(consolidation_id)
    sent = request.form.get("text", "")
    try:
        with db.transaction(runtime().engine) as session:
            row = store.accept(
                session,
                number,
                actor=access.caller().actor,
                text=sent,
                max_chars=runtime().settings.max_lesson_chars,
            )
            merged = row.merged_id
    except _DECIDE_ERRORS as problem:
        flash(f"consolidation {number} not accepted: {problem}", "error")
        if not isinstance(problem, InvalidInput):
            return _back()
        # The page again, the maintainer's edit still in the box, to fix and resend. Drawn by
        # its own view (looked up, not imported: that module imports this one).
        g.consolidation_edits = {number: sent[: fields.MAX_LESSON_CHARS * 2]}
        return current_app.view_functions["ui.proposals"](), 400
    flash(f"accepted consolidation {number}: merged lesson {merged}", "ok")
    return _back()


def reject(consolidation_id: str) -> Response:
    """Reject: the lessons stay; the group is not proposed again unless a member changes."""
    number = _id(consolidation_id)
    try:
        reason = _reason()
        with db.transaction(runtime().engine) as session:
            store.reject(session, number, actor=access.caller().actor, reason=reason)
    except _DECIDE_ERRORS as problem:
        flash(f"consolidation {number} not rejected: {problem}", "error")
        return _back()
    flash(f"rejected consolidation {number}", "ok")
    return _back()


def undo(consolidation_id: str) -> Response:
    """Undo an accept: the members come back, the merged lesson is archived."""
    number = _id(consolidation_id)
    try:
        reason = _reason()
        with db.transaction(runtime().engine) as session:
            row = store.undo(session, number, actor=access.caller().actor, reason=reason)
            merged = row.merged_id
    except _DECIDE_ERRORS as problem:
        flash(f"consolidation {number} not undone: {problem}", "error")
        return _back()
    flash(f"undid consolidation {number}: its lessons are back, {merged} archived", "ok")
    return _back()
