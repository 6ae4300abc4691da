"""The deliveries page of /ui: what arrived, what became of it, and what the bot posted."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from flask import abort, flash, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from bot import repo_settings, repost
from bot.handlers import reposts
from bot.services import Services
from playbook import db
from playbook.deliveries import inbox, side_effects
from playbook.errors import PlaybookError
from playbook.lessons import ids
from playbook.models import DELIVERY_STATUSES, Delivery, SideEffect
from playbook.repos.settings import FILE_PATH, Problem
from webhooks.runtime import runtime
from webhooks.ui import access

PAGE_SIZE = 30
# The settings panel's bounds: a file of thousands of unknown keys must not make the page huge.
SETTINGS_REPOS_SHOWN = 20
SETTINGS_PROBLEMS_SHOWN = 10


@dataclass(frozen=True)
class Effect:
    """A side effect as the page shows it, with whether "Post now" can send it."""

    row: SideEffect
    unposted: bool
    blocked_by: str | None  # why it cannot be posted yet (the setting to set), or None


@dataclass(frozen=True)
class Card:
    """One delivery with its ticket (its side effects', else the one told when it arrived)."""

    delivery: Delivery
    ticket: str | None
    effects: list[Effect]
    queued: bool = False  # "Post now" was pressed: the worker posts its comments shortly


@dataclass(frozen=True)
class SettingsTrouble:
    """A repository whose settings files have problems or could not be read, as shown."""

    repo: str
    problems: list[Problem]
    more: int  # problems not shown (`config --repo` lists them all)
    error: str | None


def _settings_troubles() -> tuple[list[SettingsTrouble], int]:
    """The repositories to show in the settings panel, and how many more there are."""
    found = repo_settings.problems_everywhere(runtime().engine)
    shown = [
        SettingsTrouble(
            repo,
            problems[:SETTINGS_PROBLEMS_SHOWN],
            max(len(problems) - SETTINGS_PROBLEMS_SHOWN, 0),
            error,
        )
        for repo, problems, error in found[:SETTINGS_REPOS_SHOWN]
    ]
    return shown, max(len(found) - SETTINGS_REPOS_SHOWN, 0)


def _cards(session: Any, rows: list[Delivery]) -> list[Card]:
    effects = side_effects.for_deliveries(session, [row.delivery_id for row in rows])
    services = _services()
    queued = reposts.queued_for(session, [row.id for row in rows])
    cards = []
    for row in rows:
        mine = effects.get(row.delivery_id, [])
        waiting = {effect.id for effect in side_effects.unposted(session, row.delivery_id)}
        shown = [
            Effect(
                effect,
                effect.id in waiting,
                repost.can_post_now(services, effect) if effect.id in waiting else None,
            )
            for effect in mine
        ]
        ticket = next((e.ticket_key for e in mine if e.ticket_key), None) or row.ticket_key
        cards.append(Card(row, ticket, shown, row.id in queued))
    return cards


def _services() -> Services:
    runtime_ = runtime()
    return Services(engine=runtime_.engine, settings=runtime_.settings)


def deliveries() -> str | tuple[str, int]:
    """The newest deliveries, by outcome, with errors, tracebacks and side effects."""
    status = request.args.get("status", "").strip() or None
    before_arg = request.args.get("before", "").strip()
    problem = None
    if status is not None and status not in DELIVERY_STATUSES:
        problem, status = f"status must be one of {', '.join(DELIVERY_STATUSES)}", None
    before = ids.number(before_arg)  # ASCII digits only, within a 64-bit row id
    troubles, more_troubles = _settings_troubles()
    with db.transaction(runtime().engine) as session:
        rows = inbox.listing(session, status, PAGE_SIZE + 1, before=before)
        more = len(rows) > PAGE_SIZE
        rows = rows[:PAGE_SIZE]
        html = render_template(
            "deliveries.html",
            cards=_cards(session, rows),
            status=status,
            statuses=DELIVERY_STATUSES,
            older=rows[-1].id if more and rows else None,
            problem=problem,
            settings_troubles=troubles,
            more_troubles=more_troubles,
            settings_file=FILE_PATH,
        )
    return (html, 400) if problem else html


def delivery(delivery_id: str) -> str:
    """One delivery with its payload."""
    with db.transaction(runtime().engine) as session:
        try:
            row = inbox.get(session, delivery_id[:200])
        except PlaybookError:
            abort(404, f"there is no delivery {delivery_id[:64]!r}")
        card = _cards(session, [row])[0]
        try:
            payload = json.dumps(json.loads(row.payload), indent=2, ensure_ascii=False)
        except (ValueError, RecursionError):
            payload = row.payload
        return render_template("delivery.html", card=card, payload=payload[:200_000])


def post_now(delivery_id: str) -> Response:
    """Queue the comments a delivery could not post when it ran (credentials were missing):
    the worker posts them; this request never waits on GitHub or Jira."""
    try:
        queued = reposts.queue(_services(), delivery_id[:200])
    except PlaybookError as problem:
        flash(str(problem), "error")
    else:
        flash(queued.describe(), "ok")
    back = request.form.get("back", "")
    return redirect(
        access.safe_next(back) if back else url_for("ui.delivery", delivery_id=delivery_id)
    )
