"""The stats page of /ui: the loop per week as SVG charts, its totals, the holdout, the gaps."""

from __future__ import annotations

from flask import render_template

from bot.consolidate import budget_for
from playbook import activity, agents, clock, db, stats_answer
from playbook.anchors import stale as stale_flags
from playbook.gaps import report as gaps_report
from webhooks.runtime import runtime
from webhooks.ui import access, charts

WEEKS = 12
# The "Possibly stale" panel lists this many flagged lessons, oldest flag first.
STALE_SHOWN = 50


def stats() -> str:
    """Loads, cites, outcomes and demotions per week; coverage, cite rate, lessons by status;
    the holdout experiment's report; the week's gaps (recurring tickets without a lesson);
    the lessons flagged possibly stale."""
    # The whole report's statistics (scipy, statsmodels) load inside `report.build`.
    from playbook.experiment import report as holdout

    minimum = runtime().settings.effect_min_tickets
    # Read before the page's transaction: it opens its own (SQLite has one writer).
    budgets = budget_for(runtime())
    with db.transaction(runtime().engine) as session:
        weeks = activity.weekly(session, weeks=WEEKS)
        # The page is for maintainers (or public by choice): every scope.
        report = stats_answer.stats(
            session,
            agents.Caller(actor="ui", role="maintainer"),
            effect_min_tickets=minimum,
            budget_for=budgets,
        )
        experiment = holdout.build(session, min_tickets=minimum)
        # The last week's gaps at the defaults of `playbook-bot gaps`.
        gaps = gaps_report.find(session, now=clock.now())
        stale = stale_flags.flagged(session, limit=STALE_SHOWN)
    nonce = access.nonce()
    return render_template(
        "stats.html",
        report=report,
        experiment=experiment,
        gaps=gaps,
        stale=stale,
        weeks=weeks,
        charts={
            "weekly": charts.weekly_chart(weeks, nonce=nonce),
            "outcomes": charts.outcomes_chart(weeks, nonce=nonce),
            "coverage": charts.coverage_chart(weeks, nonce=nonce),
            "status": charts.status_chart(report.bullets.by_status, nonce=nonce),
        },
    )
