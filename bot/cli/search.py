"""`playbook-bot search`: the lessons retrieval would show for a ticket's text."""

from __future__ import annotations

import textwrap

import click

from bot.cli.base import Context, UserError, echo_json, note, pass_context
from playbook import clock
from playbook.anchors import fields as anchor_fields
from playbook.experiment import holdout
from playbook.lessons import fields
from playbook.repos import stored
from playbook.scopes import EVERYTHING
from playbook.search import search_scope
from playbook.search.anchored import ANCHOR_BOOST
from playbook.search.floor import Floor
from playbook.search.ranking import RANK_MODES
from playbook.search.relevance import strength
from playbook.search.retrieval import ALL_SCOPES, Hit, Retriever, SearchResult
from playbook.search.text import Ticket


def fit_part(hit: Hit, bar: Floor) -> str:
    """Why a hit is here, in words: ``possible fit: matched deadlocks, handler``.

    Below the lessons' floor it reads "weak fit (a comment would leave it out)".
    """
    words = strength(hit.relevance or 0.0, bar.lesson)
    matched = f": matched {', '.join(hit.matched)}" if hit.matched else ": no word in common"
    left_out = " (a comment would leave it out)" if words == "weak" else ""
    return f"{words} fit{matched}{left_out}"


def rating_part(hit: Hit) -> str:
    """The ratings' part of a hit's multiplier, e.g. ``ratings x1.07 (1 rating, mean +1.00)``."""
    if not hit.ratings or hit.rating_mean is None:
        return "ratings x1.00 (not rated)"
    many = "rating" if hit.ratings == 1 else "ratings"
    return (
        f"ratings x{hit.rating_multiplier:.2f} ({hit.ratings} {many}, mean {hit.rating_mean:+.2f})"
    )


def rerank_part(hit: Hit) -> str:
    """Where the semantic rerank placed a hit, e.g. ``similarity 0.812, text rank 3 -> 1``."""
    similarity = (
        f"similarity {hit.similarity:.3f}"
        if hit.similarity is not None
        else "similarity - (no current embedding: median of the others)"
    )
    text = (
        f"text rank {hit.text_rank}"
        if hit.text_rank is not None
        else "no text rank (found by similarity)"
    )
    blended = f", blended {hit.blended:.3f}" if hit.blended is not None else ""
    return f"{similarity}, {text}{blended} -> rank {hit.rank}"


def rerank_line(result: SearchResult) -> str:
    """What the semantic rerank did for this search, and why when it did not."""
    if result.rerank == "used":
        return "rerank: used (text rank blended with the ticket's embedding similarity)"
    if result.rerank == "fallback":
        return f"rerank: fell back to the text ranking: {result.rerank_reason or 'no reason given'}"
    return "rerank: off (PLAYBOOK_EMBEDDING_MODEL is not set); ranked by text"


@click.command()
@click.argument("text")
@click.option("--labels", default="", help="Comma-separated labels or components.")
@click.option(
    "--scope",
    default=None,
    help="Search this scope's lessons and global ones (owner/repo, Jira project or global). "
    "Default: --ticket's scope and global, or every scope without --ticket.",
)
@click.option("-k", "k", default=5, show_default=True, type=click.IntRange(1, 100))
@click.option("--rank-by", type=click.Choice(RANK_MODES), default="feedback", show_default=True)
@click.option("--max-chars", type=click.IntRange(1), default=None, help="Character budget.")
@click.option(
    "--min-relevance",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    help="Leave out lessons whose estimated chance of fitting is below this (0..1).",
)
@click.option(
    "--paths",
    default=None,
    help="Comma-separated files the work is about: lessons anchored there rank first.",
)
@click.option("--explain", is_flag=True, help="Show the parts of each score and why each fits.")
@click.option("--json", "as_json", is_flag=True)
@click.option("--record", is_flag=True, help="Record the shown lessons as loads for --ticket.")
@click.option("--ticket", default=None, help="The ticket key the search is for.")
@pass_context
def search(
    ctx: Context,
    text: str,
    labels: str,
    scope: str | None,
    k: int,
    rank_by: str,
    max_chars: int | None,
    min_relevance: float | None,
    paths: str | None,
    explain: bool,
    as_json: bool,
    record: bool,
    ticket: str | None,
) -> None:
    """Rank the active lessons for a ticket's text (first line = summary)."""
    # Checked as every door checks a ticket key: it is looked up, recorded and searched by.
    if ticket is not None:
        ticket = fields.text(ticket, "--ticket", fields.TICKET_KEY_CHARS) or None
    if record and not ticket:
        raise UserError("--record needs --ticket KEY, the ticket the lessons are loaded for")
    if not text.strip():
        raise UserError("give the ticket's text to search for")
    named = anchor_fields.check_paths(paths, "--paths", anchor_fields.MAX_SEARCH_PATHS) or []
    bar = Floor.of(ctx.settings.min_relevance)
    with ctx.transaction() as session:
        # The rule every door follows: the ticket's scope, the scope named, or every scope.
        searched = search_scope.searched(
            session, EVERYTHING, ticket=ticket, scope=search_scope.checked_scope(scope, "--scope")
        )
        query = Ticket.from_text(
            text,
            labels=[label.strip() for label in labels.split(",") if label.strip()],
            scope=searched.primary,
            key=ticket,
            paths=named,
        )
        now = clock.now()
        share = stored.holdout_percent(session, ticket)
        arm = holdout.arm_for(session, ctx.settings.experiment, ticket, now, share)
        retriever = Retriever.shared(session)
        result = retriever.search(
            session,
            query,
            k=k,
            rank_by=rank_by,
            max_chars=max_chars,
            record=record and arm != "held_out",
            min_relevance=min_relevance,
            scopes=ALL_SCOPES if searched.scopes is None else searched.scopes,
        )
        if record and ticket and arm is not None:
            ranked = [(hit.bullet_id, hit.rank) for hit in result.hits]
            holdout.record_exposures(
                session, ticket, arm, ranked, query_id=result.query_id, consumer=ctx.actor, now=now
            )
    if arm == "held_out":
        # Held out from every door, this one too: the team's own search must not leak the
        # lessons an agent would then pass on.
        if as_json:
            echo_json(
                {
                    "query_id": result.query_id,
                    "recorded": False,
                    "held_out": True,
                    "searched": searched.model_dump(),
                    "reason": holdout.HELD_OUT_REASON,
                    "results": [],
                }
            )
        else:
            note(f"{ticket}: {holdout.HELD_OUT_REASON}")
        return
    if as_json:
        echo_json(
            {
                "query_id": result.query_id,
                "recorded": record,
                "searched": searched.model_dump(),
                "rerank": result.rerank,
                "rerank_reason": result.rerank_reason,
                "results": [
                    {
                        "rank": hit.rank,
                        "id": hit.bullet_id,
                        "score": round(hit.score, 6),
                        "text": hit.text,
                        "learned_from": hit.learned_from,
                        "scope": hit.scope,
                        "relevance": round(hit.relevance or 0.0, 4),
                        "fit": strength(hit.relevance or 0.0, bar.lesson),
                        "matched": list(hit.matched),
                        "anchor": hit.anchor,
                    }
                    | (
                        {
                            "bm25": round(hit.bm25, 6),
                            "multiplier": round(hit.multiplier, 6),
                            "freshness": round(hit.freshness, 6),
                            "confidence": round(hit.confidence, 6),
                            "rating_multiplier": round(hit.rating_multiplier, 6),
                            "ratings": hit.ratings,
                            "rating_mean": (
                                round(hit.rating_mean, 6) if hit.rating_mean is not None else None
                            ),
                            "similarity": _rounded(hit.similarity),
                            "text_rank": hit.text_rank,
                            "blended": _rounded(hit.blended),
                        }
                        if explain
                        else {}
                    )
                    for hit in result.hits
                ],
            }
        )
        return
    if explain:
        click.echo(rerank_line(result))
    click.echo(f"searched: {searched.words()}")
    if not result.hits:
        note("no active lesson in the scopes searched matches")
        return
    header = f"{'#':>2} {'id':<8} {'score':>8}"
    if explain:
        header += f" {'bm25':>8} {'mult':>5} {'fresh':>5} {'conf':>5}"
    click.echo(header + "  lesson")
    for hit in result.hits:
        line = f"{hit.rank:>2} {hit.bullet_id:<8} {hit.score:>8.3f}"
        if explain:
            line += f" {hit.bm25:>8.3f} {hit.multiplier:>5.2f} {hit.freshness:>5.2f}"
            line += f" {hit.confidence:>5.2f}"
        click.echo(line + "  " + textwrap.shorten(hit.text, 70, placeholder="..."))
        if explain:
            click.echo(f"{'':>12}{rating_part(hit)}")
            if result.rerank == "used":
                click.echo(f"{'':>12}{rerank_part(hit)}")
            click.echo(f"{'':>12}{fit_part(hit, bar)}")
            if hit.anchor:
                click.echo(f"{'':>12}{anchor_part(hit)}")
    if record:
        note(f"recorded {len(result.hits)} loads for {ticket} (query {result.query_id})")


def anchor_part(hit: Hit) -> str:
    """Why an anchored lesson was raised: ``anchored to orders/locking.py named in the ticket``."""
    return f"anchor x{ANCHOR_BOOST:g}: anchored to {hit.anchor} named in the ticket"


def _rounded(value: float | None) -> float | None:
    return round(value, 6) if value is not None else None
