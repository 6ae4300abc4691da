"""The lesson pages of /ui: the list with search, one lesson with its history, its actions."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from flask import abort, flash, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from playbook import agents, db
from playbook.anchors import stale
from playbook.errors import BulletNotFound, InvalidInput, InvalidTransition
from playbook.lessons import browse, fields, lifecycle, replacements
from playbook.models import STATUSES
from playbook.ratings import store as ratings
from webhooks.runtime import runtime
from webhooks.ui import access


def lessons() -> str | tuple[str, int]:
    """Lessons: search with the bot's retriever, filter, sort and page."""
    args = {key: request.args.get(key, "") for key in ("q", "status", "scope", "ticket", "sort")}
    args["page"] = request.args.get("page", "1")
    problem = None
    try:
        filters = browse.Filters.parse(args)
    except InvalidInput as bad:
        problem, filters = str(bad), browse.Filters()
    with db.transaction(runtime().engine) as session:
        page = browse.lessons(session, filters)
        scopes = browse.scopes(session)
        waiting = browse.proposal_count(session)
        html = render_template(
            "lessons.html",
            page=page,
            filters=filters,
            scopes=scopes,
            statuses=STATUSES,
            sorts=browse.SORTS,
            waiting=waiting,
            problem=problem,
            args={key: value for key, value in args.items() if value and key != "page"},
        )
    return (html, 400) if problem else html


def lesson(bullet_id: str) -> str:
    """One lesson: text, links, demotion, revisions with diffs, timeline, measured effect,
    and its model ratings."""
    from playbook.experiment import report  # a lesson's effect: closed forms, no scipy

    minimum = runtime().settings.effect_min_tickets
    with db.transaction(runtime().engine) as session:
        bullet = _bullet(session, bullet_id)
        revisions = browse.revisions(session, bullet.id)
        return render_template(
            "lesson.html",
            bullet=bullet,
            confidence=browse.confidence_of(bullet),
            effect=report.lesson_effect(session, bullet.id, min_tickets=minimum),
            revisions=[(revision, browse.changes(revision)) for revision in revisions],
            timeline=browse.timeline(session, bullet.id),
            successors=replacements.chain(session, bullet),
            supersedes=replacements.superseded_by_it(session, bullet.id),
            ratings=ratings.summary(session, bullet.id),
            # The panel of /ui/stats links here: the flag, and what clears it, are shown.
            files_gone=stale.files_gone(bullet.stale_detail) is not None,
        )


def _bullet(session: Any, bullet_id: str) -> Any:
    try:
        return agents.visible(session, agents.Caller(actor="ui", role="maintainer"), bullet_id)
    except (BulletNotFound, InvalidInput):
        abort(404, f"there is no lesson {bullet_id[:64]!r}")


def _act(bullet_id: str, action: Callable[[Any, str], Any], done: str) -> Response:
    """Run a change as the logged-in maintainer; say what happened, then show the lesson."""
    target = url_for("ui.lesson", bullet_id=bullet_id)
    try:
        with db.transaction(runtime().engine) as session:
            bullet = _bullet(session, bullet_id)
            change = action(session, bullet.id)
    except (InvalidTransition, InvalidInput, BulletNotFound) as problem:
        # BulletNotFound here is a lesson the form named (the replacement), not this page's.
        flash(str(problem), "error")
        return redirect(_back() or target)
    changed = getattr(change, "changed", True)
    flash(done if changed else f"{bullet_id} was already like that; nothing changed", "ok")
    return redirect(_back() or target)


def _back() -> str | None:
    back = request.form.get("back", "")
    return access.safe_next(back) if back else None


def _reason(required: bool = False) -> str | None:
    reason = fields.text(request.form.get("reason", ""), "reason", fields.REASON_CHARS)
    if required and not reason:
        raise InvalidInput("say why: the reason is shown with the lesson and in its history")
    return reason or None


def approve(bullet_id: str) -> Response:
    """Approve a proposed lesson."""
    return _act(
        bullet_id,
        lambda session, key: agents.approve(session, access.caller(), key, _reason()),
        f"approved {bullet_id}: it is active and shown on tickets",
    )


def deprecate(bullet_id: str) -> Response:
    """Deprecate a lesson with a reason."""
    return _act(
        bullet_id,
        lambda session, key: agents.deprecate(
            session, access.caller(), key, _reason(required=True) or ""
        ),
        f"deprecated {bullet_id}: it is no longer shown on tickets",
    )


def reject(bullet_id: str) -> Response:
    """Reject a proposal: it is deprecated, with the reason given or a default one."""
    who = access.actor() or "a maintainer"
    return _act(
        bullet_id,
        lambda session, key: agents.deprecate(
            session, access.caller(), key, _reason() or f"proposal rejected by {who}"
        ),
        f"rejected {bullet_id}",
    )


def supersede(bullet_id: str) -> Response:
    """Mark a lesson superseded by the lesson the form names."""
    by = request.form.get("by", "").strip()
    return _act(
        bullet_id,
        lambda session, key: agents.supersede(session, access.caller(), key, by, _reason()),
        f"superseded {bullet_id} by {by[:64]}: it is no longer shown on tickets",
    )


def restore(bullet_id: str) -> Response:
    """Bring a deprecated, archived or superseded lesson back."""
    return _act(
        bullet_id,
        lambda session, key: agents.restore(session, access.caller(), key, _reason()),
        f"restored {bullet_id}: it is active again",
    )


def clear_stale(bullet_id: str) -> Response:
    """Clear a lesson's stale flag: it still holds after the PR that flagged it."""
    who = access.caller()
    return _act(
        bullet_id,
        lambda session, key: SimpleNamespace(
            changed=stale.clear(session, key, actor=who.actor, reason=_reason())
        ),
        f"cleared the stale flag of {bullet_id}: it is listed as possibly stale no more",
    )


def edit_form(bullet_id: str) -> str:
    """The edit form of a lesson."""
    with db.transaction(runtime().engine) as session:
        bullet = _bullet(session, bullet_id)
        return render_template("edit.html", bullet=bullet, problem=None, values=None)


def edit(bullet_id: str) -> Response | tuple[str, int]:
    """Save an edit: a revision by the logged-in maintainer, exactly like `bullets edit`."""
    form = request.form
    values = {
        "text": form.get("text", ""),
        "scope": form.get("scope", ""),
        "learned_from": form.get("learned_from", ""),
        "tags": [tag for tag in form.get("tags", "").split(",") if tag.strip()],
        # Comma-separated, as typed: an emptied field clears the anchors, a form without the
        # field (a page from before anchors) leaves them.
        "paths": form.get("paths"),
        "symbols": form.get("symbols"),
    }
    try:
        with db.transaction(runtime().engine) as session:
            bullet = _bullet(session, bullet_id)
            change = lifecycle.edit(
                session,
                bullet.id,
                actor=access.caller().actor,
                reason=_reason(),
                max_chars=runtime().settings.max_lesson_chars,
                text=values["text"],
                scope=values["scope"] or None,
                learned_from=values["learned_from"],
                tags=values["tags"],
                paths=values["paths"],
                symbols=values["symbols"],
            )
            changed = change.changed
    except InvalidInput as problem:
        with db.transaction(runtime().engine) as session:
            bullet = _bullet(session, bullet_id)
            html = render_template("edit.html", bullet=bullet, problem=str(problem), values=values)
        return html, 400
    flash(f"saved {bullet_id}" if changed else "nothing changed", "ok")
    return redirect(url_for("ui.lesson", bullet_id=bullet_id))
