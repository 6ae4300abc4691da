"""Proposals in batches on /ui: one PR's review proposals approved or rejected together."""

from __future__ import annotations

from typing import Any

from flask import flash, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from playbook import agents, db
from playbook.errors import BulletNotFound, InvalidInput, InvalidTransition
from playbook.lessons import fields
from playbook.reviews import batches
from webhooks.runtime import runtime
from webhooks.ui import access, consolidations

# A batch key is `owner/repo#n`: anything longer is not one.
KEY_CHARS = 300


def proposals() -> str:
    """Proposed lessons waiting for a maintainer, a PR's review proposals as one batch."""
    with db.transaction(runtime().engine) as session:
        found = batches.batches(session)
        return render_template(
            "proposals.html",
            batches=found,
            review=batches.is_review,
            count=sum(len(batch.proposals) for batch in found),
            **consolidations.section(session),
        )


def _chosen(session: Any) -> tuple[str, list[str]]:
    """The batch the form names and those of its proposals that were shown and still wait.

    Only what the maintainer saw is changed: a proposal that arrived after the page was drawn
    waits for the next look.
    """
    key = request.form.get("key", "")[:KEY_CHARS]
    batch = batches.batch(session, key)
    if batch is None:
        raise InvalidInput(f"no proposals wait in batch {key[:80]!r}; reload the page")
    shown = set(request.form.getlist("id"))
    ids = [bullet_id for bullet_id in batch.ids if bullet_id in shown]
    if not ids:
        raise InvalidInput(f"none of the proposals shown for {key} still waits; reload the page")
    return key, ids


def _reason(required: bool) -> str | None:
    reason = fields.text(request.form.get("reason", ""), "reason", fields.REASON_CHARS)
    if required and not reason:
        raise InvalidInput("say why: the reason is shown with each lesson and in its history")
    return reason or None


def _done(message: str) -> Response:
    flash(message, "ok")
    return redirect(url_for("ui.proposals"))


def approve_all() -> Response:
    """Approve every proposal of a PR's batch that the page showed."""
    try:
        with db.transaction(runtime().engine) as session:
            key, ids = _chosen(session)
            reason = _reason(required=False)
            for bullet_id in ids:
                agents.approve(session, access.caller(), bullet_id, reason)
    except (InvalidTransition, InvalidInput, BulletNotFound) as problem:
        flash(str(problem), "error")
        return redirect(url_for("ui.proposals"))
    return _done(f"approved {len(ids)} proposals of {key}: {', '.join(ids)}")


def reject_all() -> Response:
    """Reject every proposal of a PR's batch that the page showed, with one reason."""
    try:
        with db.transaction(runtime().engine) as session:
            key, ids = _chosen(session)
            reason = _reason(required=True) or ""
            for bullet_id in ids:
                agents.deprecate(session, access.caller(), bullet_id, reason)
    except (InvalidTransition, InvalidInput, BulletNotFound) as problem:
        flash(str(problem), "error")
        return redirect(url_for("ui.proposals"))
    return _done(f"rejected {len(ids)} proposals of {key}: {', '.join(ids)}")
