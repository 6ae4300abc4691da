"""The stats page's charts: inline SVG drawn by pygal, fit for a strict Content Security Policy."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import pygal
from markupsafe import Markup
from pygal.graph.graph import Graph
from pygal.style import Style

from playbook.activity import Week
from playbook.models import STATUSES

# pygal puts a finder for its map plugins on sys.meta_path that has no find_spec (Kozea/pygal
# #532): on Python 3.11 every later import of a missing module then warns, which the tests'
# filterwarnings turns into errors. No chart here draws a map, so the finder goes.
sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, pygal.PluginImportFixer)]

FONTS = (
    'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans", '
    '"Liberation Sans", sans-serif'
)
# The drawing's own units; the SVG scales to its container's width. Small enough that the
# text stays readable when a phone shrinks it, large enough for twelve weeks of labels.
WIDTH, HEIGHT = 480, 300
LOADS, CITES = "#4e79a7", "#f28e2b"
MERGED, REJECTED, DEMOTED = "#59a14f", "#e15759", "#9c755f"
STATUS_COLORS = {
    "proposed": "#e0a31a",
    "active": MERGED,
    "deprecated": REJECTED,
    "archived": "#9a9a9a",
    "superseded": DEMOTED,
}
OTHER_STATUS = "#b07aa1"

# Everything is drawn in the page's text colour, so the charts follow a dark theme too.
_BASE_STYLE = {
    "font_family": FONTS,
    "background": "transparent",
    "plot_background": "transparent",
    "foreground": "currentColor",
    "foreground_strong": "currentColor",
    "foreground_subtle": "#8a8a8a",
    # Grey at half strength reads as a faint line on a light page and on a dark one.
    "guide_stroke_color": "rgba(128, 128, 128, .5)",
    "major_guide_stroke_color": "rgba(128, 128, 128, .5)",
    "guide_stroke_dasharray": "3,3",
    "major_guide_stroke_dasharray": "3,3",
    "opacity": ".9",
    "opacity_hover": "1",
    "transition": "0ms",
    "legend_font_size": 15,
    "label_font_size": 14,
    "major_label_font_size": 14,
    "value_font_size": 14,
    "no_data_font_size": 18,
}


def weekly_chart(weeks: list[Week], *, nonce: str) -> Markup:
    """Lessons loaded and cited per week, as grouped bars."""
    return _weekly_bars(
        weeks,
        "Lessons loaded and cited per week",
        {"loaded": ("loads", LOADS), "cited": ("cites", CITES)},
        nonce=nonce,
    )


def outcomes_chart(weeks: list[Week], *, nonce: str) -> Markup:
    """Pull requests citing lessons merged or rejected, and lessons demoted, per week."""
    return _weekly_bars(
        weeks,
        "Pull requests citing lessons merged and rejected, and lessons demoted, per week",
        {
            "PRs merged": ("merged", MERGED),
            "PRs rejected": ("rejected", REJECTED),
            "lessons demoted": ("demotions", DEMOTED),
        },
        nonce=nonce,
    )


def coverage_chart(weeks: list[Week], *, nonce: str) -> Markup:
    """The share of each week's new tickets that were shown a lesson, in percent."""
    title = "Share of new tickets shown a lesson, per week"
    chart = pygal.Line(
        **_config((LOADS,)),
        range=(0, 100),
        value_formatter=lambda value: f"{value:.0f}%",
        allow_interruptions=True,
        show_legend=False,
        dots_size=4,
        no_data_text="No new tickets yet",
    )
    _label_weeks(chart, weeks)
    # A week without new tickets has no share: a gap in the line, not a drop to 0%.
    points = [
        _value(
            None if week.coverage is None else round(100 * week.coverage, 1),
            f"week of {_day(week)}: {week.covered} of {week.tickets} new tickets",
        )
        for week in weeks
    ]
    if any(point["value"] is not None for point in points):
        # Only with data: pygal 3.1 fails on y labels without a series to place them by.
        chart.y_labels = [0, 25, 50, 75, 100]
        # The last week's label sits on the plot's right edge: room for its second half.
        chart.margin_right = 24
        chart.add("coverage", points)
    return _render(chart, title, nonce)


def status_chart(by_status: dict[str, int], *, nonce: str) -> Markup:
    """How many lessons are in each status, as horizontal bars."""
    title = "Lessons by status"
    known = [status for status in STATUSES if status in by_status]
    names = known + sorted(set(by_status) - set(known))
    chart = pygal.HorizontalBar(
        **_config((OTHER_STATUS,)),
        show_legend=False,
        no_data_text="No lessons yet",
    )
    # pygal draws the first label at the bottom; reversed, the statuses read top to bottom.
    names.reverse()
    # The count goes in the label: a value printed at a bar's end overlaps it.
    chart.x_labels = [f"{name} ({by_status[name]})" for name in names]
    if any(by_status.values()):
        chart.y_labels = _count_ticks(max(by_status.values()))
        chart.add(
            "lessons",
            [
                _value(
                    by_status[name],
                    f"{name}: {by_status[name]}",
                    color=STATUS_COLORS.get(name, OTHER_STATUS),
                )
                for name in names
            ],
        )
    return _render(chart, title, nonce)


def _weekly_bars(
    weeks: list[Week], title: str, series: dict[str, tuple[str, str]], *, nonce: str
) -> Markup:
    chart = pygal.Bar(
        **_config([color for _, color in series.values()]),
        no_data_text="No activity yet",
    )
    _label_weeks(chart, weeks)
    # All zeros would draw an axis from 0 to 0: say there is nothing yet instead.
    top = max((getattr(week, field) for week in weeks for field, _ in series.values()), default=0)
    if top:
        chart.y_labels = _count_ticks(top)
        for name, (field, _) in series.items():
            chart.add(
                name,
                [
                    _value(
                        getattr(week, field),
                        f"{name}, week of {_day(week)}: {getattr(week, field)}",
                    )
                    for week in weeks
                ],
            )
    return _render(chart, title, nonce)


def _config(colors: Sequence[str]) -> dict[str, Any]:
    # No drawn title: the page's caption names the chart; the title is the SVG's <title>.
    return {
        "style": Style(**_BASE_STYLE, colors=tuple(colors)),
        "width": WIDTH,
        "height": HEIGHT,
        "margin": 8,
        "spacing": 8,
        "legend_at_bottom": True,
        # Nothing is cut short: dates are short, and a status has at most 16 characters.
        "truncate_legend": -1,
        "truncate_label": -1,
        # pygal's tooltips and legend toggles are a script from a CDN, which the policy blocks.
        "js": [],
        "disable_xml_declaration": True,
        "classes": ["pygal-chart", "playbook-chart"],
    }


def _value(value: float | None, tooltip: str, **extra: str) -> dict[str, Any]:
    # The tooltip becomes an SVG <title>, which browsers show on hover without any script.
    return {"value": value, "tooltip": tooltip, **extra}


def _count_ticks(top: int) -> list[int]:
    """Ticks from 0 past ``top`` in at most five round steps: counts have no 0.25 of a lesson."""
    magnitude = 1
    while True:
        for step in (magnitude, 2 * magnitude, 5 * magnitude):
            if top <= 5 * step:
                return list(range(0, -(-top // step) * step + 1, step))
        magnitude *= 10


def _label_weeks(chart: Graph, weeks: list[Week]) -> None:
    chart.x_labels = [_day(week) for week in weeks]
    # Twelve dates do not fit a phone's width: every other one, counted back from this week.
    chart.x_labels_major = chart.x_labels[::-2]
    chart.show_minor_x_labels = False


def _day(week: Week) -> str:
    return f"{week.start.day} {week.start:%b}"


def _render(chart: Graph, title: str, nonce: str) -> Markup:
    if not chart.raw_series:
        # Without data pygal still draws a 0-to-1 grid; the message alone says it better.
        chart.show_x_labels = chart.show_y_labels = chart.show_y_guides = False
    chart.add_xml_filter(partial(_fit_for_policy, title=title, nonce=nonce))
    # etree escaped every text and attribute (scope and status names come from the database).
    return Markup(chart.render(is_unicode=True))


def _fit_for_policy(root: Any, *, title: str, nonce: str) -> Any:
    """Remove scripts, comments and style attributes; give the styles the nonce; add labels."""
    chart_id = root.get("id")
    extra_css = [f"#{chart_id}{{display:block;width:100%;height:auto}}"]
    parents = {child: parent for parent in root.iter() for child in parent}
    for element in list(root.iter()):
        name = _local(element.tag)
        if name is None or name in ("script", "desc") or "tooltip" in _classes(element):
            # Comments carry the render date; descs and the tooltip box feed pygal's script.
            parents[element].remove(element)
            continue
        if element.get("id", "").startswith("activate-serie"):
            # Hooks for the script; four charts on one page would repeat them.
            del element.attrib["id"]
        style = element.attrib.pop("style", None)
        if style:
            # A style attribute is inline style, which the policy blocks: the same
            # declarations go to the nonce'd stylesheet, !important to keep their precedence.
            marker = f"inline-{len(extra_css)}"
            element.set("class", " ".join([*_classes(element), marker]))
            declarations = ";".join(
                f"{part.strip()} !important" for part in style.split(";") if part.strip()
            )
            extra_css.append(f"#{chart_id} .{marker}{{{declarations}}}")
    sheets = list(root.iter("style"))
    for sheet in sheets:
        sheet.set("nonce", nonce)
    sheets[0].text = (sheets[0].text or "") + "\n" + "".join(extra_css)
    for name_tag in root.findall("title"):
        name_tag.text = title
    root.set("role", "img")
    root.set("aria-label", title)
    root.set("width", "100%")
    return root


def _local(tag: str | Callable[..., Any]) -> str | None:
    # Comments' tags are the Comment factory, not a name, in xml.etree and in lxml alike.
    if not isinstance(tag, str):
        return None
    return tag.rsplit("}", 1)[-1]


def _classes(element: Any) -> list[str]:
    return (element.get("class") or "").split()
