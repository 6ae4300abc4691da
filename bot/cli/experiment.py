"""The holdout experiment's commands: its report, and starting and stopping it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from bot.cli.base import Context, echo_json, pass_context
from playbook import clock
from playbook.experiment import window


class WindowTime(click.ParamType):
    """A bound of the report's window: YYYY-MM-DD or an ISO time, read as UTC when naive."""

    name = "date"

    def __init__(self, *, end: bool = False) -> None:
        # The window ends before --until; a bare date there means "through that day", as
        # people mean it, so it ends when the next day begins.
        self.end = end

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> datetime:
        """The time, or a usage error naming the option."""
        if isinstance(value, datetime):
            return clock.to_utc(value)
        text = str(value).strip()
        try:
            parsed = clock.parse_time(text)
        except (ValueError, OverflowError):
            self.fail(f"{value!r} is not a date such as 2026-11-17 or an ISO time", param, ctx)
        if self.end and len(text) == 10:
            return window.through(parsed.date())
        return parsed


def _when(value: datetime | str | None) -> str:
    if value is None:
        return "now"
    moment = clock.parse_time(value) if isinstance(value, str) else clock.to_utc(value)
    return f"{moment:%Y-%m-%d %H:%M} UTC"


def _percent(rate: float | None) -> str:
    return "-" if rate is None else f"{100 * rate:.0f}%"


def _points(value: float) -> str:
    points = round(100 * value)
    return f"{points:+d}" if points else "0"


def _rate_ci(interval: list[float] | None) -> str:
    if interval is None:
        return ""
    return f" (95% CI {_percent(interval[0])} to {_percent(interval[1])})"


def _difference(value: float | None, interval: list[float] | None) -> str:
    if value is None:
        return "no difference yet: an arm has no ticket with an outcome"
    ci = "" if interval is None else f" (95% CI {_points(interval[0])} to {_points(interval[1])})"
    return f"{_points(value)} points{ci}"


def _counts(side: dict[str, Any]) -> str:
    tickets, outcomes, merged = side["tickets"], side["with_outcome"], side["merged"]
    return f"{tickets} tickets, {outcomes} with an outcome, {merged} merged"


def _arm(name: str, arm: dict[str, Any]) -> str:
    line = f"{name:<9} {_counts(arm)}; merge rate {_percent(arm['merge_rate'])}"
    line += _rate_ci(arm.get("merge_rate_ci"))
    hours = arm.get("median_hours_to_merge")
    if hours is not None:
        line += f"; median {hours:.1f} h to merge"
        interval = arm.get("median_hours_to_merge_ci")
        if interval is not None:
            line += f" (95% CI {interval[0]:.1f} to {interval[1]:.1f})"
    rounds = arm.get("mean_review_rounds")
    if rounds is not None:
        line += f"; {rounds:.1f} review rounds on average"
    return line


def _running(experiment: dict[str, Any]) -> str:
    running = experiment.get("running")
    if running is not None:
        return (
            f"experiment: running, {running['percent']}% of new tickets held out, since "
            f"{_when(running['started_at'])} (started by {running['started_by']})"
        )
    periods = experiment.get("periods") or []
    if not periods:
        return "experiment: never run (`playbook-bot experiment start --percent 10` starts it)"
    last = periods[-1]
    return (
        f"experiment: not running; it last held out {last['percent']}% of new tickets from "
        f"{_when(last['started_at'])} to {_when(last.get('stopped_at'))}"
    )


def describe_effect(effect: dict[str, Any]) -> str:
    """One lesson's measured effect as one line: both sides' counts, the difference, the verdict."""
    shown, held_out = effect["shown"], effect["held_out"]
    sides = f"shown on {_counts(shown)}; held out from {_counts(held_out)}"
    if effect["verdict"] == "not enough data":
        need = effect.get("min_tickets")
        each = f" ({need} tickets with an outcome needed on each side)" if need else ""
        return f"not enough data{each}: {sides}"
    return f"{effect['verdict']}, {_difference(effect['difference'], effect['ci'])}: {sides}"


def format_report(report: dict[str, Any]) -> str:
    """The report as text: a sample-ratio warning first, then the arms, the verdict, lessons."""
    lines = []
    srm = report.get("srm") or {}
    warning = srm.get("warning") if srm.get("mismatch") else None
    if warning:
        # Before any number: a broken split makes every effect below untrustworthy.
        lines.append(f"WARNING: {warning}")
    lines.append(_running(report["experiment"]))
    window = report.get("window") or {}
    if window.get("since") or window.get("until"):
        start = _when(window["since"]) if window.get("since") else "the start"
        lines.append(f"tickets assigned from {start} to {_when(window.get('until'))}")
    arms = report["arms"]
    lines.append(_arm("shown", arms["shown"]))
    lines.append(_arm("held out", arms["held_out"]))
    difference = report["difference"]
    lines.append(
        "difference (shown minus held out): "
        + _difference(difference["merge_rate"], difference["ci"])
    )
    verdict = report["verdict"]
    if warning and verdict.startswith(warning):
        verdict = verdict[len(warning) :].strip()  # the warning is already the first line
    lines.append(verdict)
    needed = [
        f"{n['tickets_per_arm']:,} for {n['points']} points"
        for n in report.get("needed", [])
        if n.get("tickets_per_arm") is not None
    ]
    if needed:
        lines.append(
            "tickets with an outcome needed in each arm to detect a difference (80% power): "
            + ", ".join(needed)
        )
    lessons = {lesson["id"]: lesson for lesson in report.get("lessons", [])}
    harmful = report.get("measured_harmful") or []
    if harmful:
        lines.append("measured harmful (prune --apply deprecates them):")
        lines.extend(_harmful_line(lessons.get(i, {"id": i})) for i in harmful)
    minimum = report.get("min_tickets")
    if lessons:
        lines.append(
            f"lessons with enough data ({minimum} tickets with an outcome each side), "
            "most harmful first:"
        )
        lines.extend(_lesson_line(lesson) for lesson in lessons.values())
    else:
        lines.append(f"no lesson has enough data yet ({minimum} tickets with an outcome each side)")
    return "\n".join(lines)


def _short(text: object, chars: int = 60) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= chars else f"{flat[: chars - 1]}…"


def _harmful_line(lesson: dict[str, Any]) -> str:
    if "verdict" not in lesson:
        return f"  {lesson['id']}"
    effect = _difference(lesson["difference"], lesson["ci"])
    return f"  {lesson['id']} {effect}: {_short(lesson.get('text'))}"


def _lesson_line(lesson: dict[str, Any]) -> str:
    return f"  {lesson['id']} {describe_effect(lesson)}\n    {_short(lesson.get('text'), 80)}"


@click.group(name="experiment", invoke_without_command=True)
@click.option(
    "--since",
    type=WindowTime(),
    default=None,
    help="Only tickets assigned from this date or ISO time (UTC).",
)
@click.option(
    "--until",
    type=WindowTime(end=True),
    default=None,
    help="Only tickets assigned before this ISO time, or through this date.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def experiment_group(
    click_ctx: click.Context, since: datetime | None, until: datetime | None, as_json: bool
) -> None:
    """The holdout experiment: its report, or `start` and `stop` it."""
    if click_ctx.invoked_subcommand is not None:
        return
    if since is not None and until is not None and since > until:
        raise click.BadParameter("must not be after --until", param_hint="'--since'")
    from playbook.experiment import report as experiment_report

    ctx = click_ctx.find_object(Context)
    assert ctx is not None  # the root group always sets it
    with ctx.transaction() as session:
        built = experiment_report.build(
            session, since=since, until=until, min_tickets=ctx.settings.effect_min_tickets
        )
    if as_json:
        echo_json(built)
    else:
        click.echo(format_report(built))


@experiment_group.command()
@click.option(
    "--percent",
    type=click.IntRange(1, 50),
    required=True,
    help="Share of new tickets held out (1-50): they get no lessons.",
)
@pass_context
def start(ctx: Context, percent: int) -> None:
    """Start holding out --percent of new tickets (a running period at another percent ends)."""
    from playbook.experiment import assignment

    with ctx.transaction() as session:
        before = assignment.running(session)
        period = assignment.start(session, percent, clock.now(), ctx.actor)
    if before is not None and before.id == period.id:
        click.echo(
            f"the experiment already holds out {percent}% of new tickets, since "
            f"{_when(period.started_at)}; nothing changed"
        )
        return
    ended = f" (the {before.percent}% period ended)" if before is not None else ""
    click.echo(
        f"experiment started{ended}: from now {percent}% of new tickets are held out and get "
        "no lessons; tickets already seen keep their arm or stay outside"
    )


@experiment_group.command()
@pass_context
def stop(ctx: Context) -> None:
    """Stop holding out new tickets; tickets already assigned keep their arm in the report."""
    from playbook.experiment import assignment

    with ctx.transaction() as session:
        period = assignment.stop(session, clock.now(), ctx.actor)
    if period is None:
        click.echo("no experiment was running; nothing changed")
        return
    setting = ctx.settings.holdout_percent
    kept = (
        f"; it stays stopped whatever PLAYBOOK_HOLDOUT_PERCENT ({setting}) says until "
        "`experiment start`"
        if setting
        else ""
    )
    click.echo(
        f"experiment stopped: new tickets get lessons again; the {period.percent}% period's "
        f"tickets keep their arm and still count in the report{kept}"
    )
