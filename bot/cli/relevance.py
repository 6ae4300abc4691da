"""`playbook-bot relevance`: what people's verdicts taught the estimate, per scope, and refits."""

from __future__ import annotations

from typing import Any

import click

from bot.cli.base import Context, echo_json, note, pass_context

# A scope is an owner/repo or a Jira project: a name, not a text (`fields.SCOPE_CHARS`).
SCOPE_CHARS = 200  # playbook.fit.report.SCOPE_CHARS, without importing SQLAlchemy for --help


def _scope(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    name = value.strip()
    if not name or len(name) > SCOPE_CHARS or not name.isprintable():
        raise click.BadParameter(
            f"must be a scope name such as acme/api or CTMS, at most {SCOPE_CHARS} characters",
            ctx,
            param,
        )
    return name


def format_relevance(answer: dict[str, Any]) -> str:
    """The report as a short human text: each scope's verdicts, shift, floor and off-topic list."""
    scopes = answer["scopes"]
    if not scopes:
        return (
            "no verdicts yet: 👍/👎 on the bot's comments and `/playbook helpful|unhelpful ID` "
            f"replies teach a scope's level once it has {answer['min_labels']}"
        )
    lines = []
    for fit in scopes:
        lines.append(
            f"{fit['scope']}: {fit['labels']} verdicts ({fit['helpful']} helpful, "
            f"{fit['unhelpful']} not)"
        )
        lines.append(f"  {fit['words']}")
        if fit["fitted"]:
            lines.append(
                f"  floor {fit['floor']:.3g} -> {fit['raw_floor']:.3g} of the packaged estimate "
                f"for {fit['scope']}"
            )
        else:
            lines.append(f"  floor {fit['floor']:.3g} (the packaged estimate's)")
        lines.extend(_off_topic_lines(fit["off_topic"], "  "))
    if len(scopes) > 1 and answer["off_topic"]:
        lines.append("across scopes:")
        lines.extend(_off_topic_lines(answer["off_topic"], "  "))
    return "\n".join(lines)


def _off_topic_lines(rows: list[dict[str, Any]], indent: str) -> list[str]:
    if not rows:
        return []
    lines = [f"{indent}often marked off-topic:"]
    for row in rows:
        # A reason is a person's text: one line, so it cannot fake a row of its own.
        said = " ".join((row["last_reason"] or "").split())[:80]
        lines.append(
            f"{indent}  {row['bullet_id']} -{row['unhelpful']}/+{row['helpful']} "
            f"by {row['people']} people on {row['tickets']} tickets: {row['text']}"
            + (f' (last reason: "{said}")' if said else "")
        )
    return lines


@click.command()
@click.option(
    "--scope",
    default=None,
    callback=_scope,
    help="Only this scope (owner/repo or Jira project); default: every scope with verdicts.",
)
@click.option(
    "--refit",
    is_flag=True,
    help="Fit again every scope with verdicts (or --scope) before showing them.",
)
@click.option("--json", "as_json", is_flag=True)
@pass_context
def relevance(ctx: Context, scope: str | None, refit: bool, as_json: bool) -> None:
    """What people's 👍/👎 and replies taught the relevance estimate, per scope."""
    from playbook.fit import calibration
    from playbook.fit import report as fit_report

    # PLAYBOOK_MIN_RELEVANCE where the settings have it (a repository's file may set its own).
    floor = fit_report.comment_floor(ctx.settings.min_relevance)
    with ctx.transaction() as session:
        if refit:
            scopes = [scope] if scope is not None else calibration.labelled_scopes(session)
            for name in scopes:
                calibration.refit(session, name)
            note(f"refitted {len(scopes)} scope{'s' if len(scopes) != 1 else ''}")
        answer = fit_report.as_dict(session, floor, scope=scope)
    if as_json:
        echo_json(answer)
    else:
        click.echo(format_relevance(answer))
