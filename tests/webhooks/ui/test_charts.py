"""The stats charts: inline SVG that a strict Content Security Policy lets render, data or not."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from datetime import date, timedelta
from xml.etree import ElementTree

import pytest
from markupsafe import Markup

from playbook.activity import Week
from webhooks.ui import charts

NONCE = "n0nce-4-test"
SVG = "{http://www.w3.org/2000/svg}"
START = date(2026, 3, 2)


def busy_weeks() -> list[Week]:
    return [
        Week(
            START + timedelta(weeks=n),
            loads=10 * n,
            cites=n,
            merged=n % 3,
            rejected=n % 2,
            demotions=n % 4,
            tickets=n % 5,
            covered=(n % 5) // 2,
        )
        for n in range(12)
    ]


def empty_weeks() -> list[Week]:
    return [Week(START + timedelta(weeks=n)) for n in range(12)]


def draw_all(weeks: list[Week], by_status: dict[str, int]) -> list[Markup]:
    return [
        charts.weekly_chart(weeks, nonce=NONCE),
        charts.outcomes_chart(weeks, nonce=NONCE),
        charts.coverage_chart(weeks, nonce=NONCE),
        charts.status_chart(by_status, nonce=NONCE),
    ]


CASES: dict[str, Callable[[], list[Markup]]] = {
    "busy": lambda: draw_all(busy_weeks(), {"active": 40, "proposed": 3, "archived": 7}),
    "all zeros": lambda: draw_all(empty_weeks(), {"active": 0, "deprecated": 0}),
    "nothing": lambda: draw_all([], {}),
}


@pytest.fixture(params=list(CASES))
def drawn(request: pytest.FixtureRequest) -> list[Markup]:
    return CASES[request.param]()


def test_each_chart_is_one_inline_svg_element(drawn: list[Markup]) -> None:
    for svg in drawn:
        assert isinstance(svg, Markup)
        root = ElementTree.fromstring(str(svg))
        assert root.tag == f"{SVG}svg"
        assert root.get("viewBox") == f"0 0 {charts.WIDTH} {charts.HEIGHT}"
        assert not svg.startswith("<?xml")


def test_nothing_the_policy_blocks(drawn: list[Markup]) -> None:
    for svg in drawn:
        assert "<script" not in svg
        root = ElementTree.fromstring(str(svg))
        for element in root.iter():
            assert "style" not in element.attrib, element.tag
            assert not any(name.endswith("href") for name in element.attrib), element.tag
        sheets = list(root.iter(f"{SVG}style"))
        assert sheets and all(sheet.get("nonce") == NONCE for sheet in sheets)
        css = "".join(sheet.text or "" for sheet in sheets)
        assert "@import" not in css and "url(" not in css
        # The only address left is the SVG namespace.
        assert svg.replace('xmlns="http://www.w3.org/2000/svg"', "").count("http") == 0


def test_each_chart_is_a_labelled_image(drawn: list[Markup]) -> None:
    titles = []
    for svg in drawn:
        root = ElementTree.fromstring(str(svg))
        title = root.find(f"{SVG}title")
        assert title is not None and title.text
        assert root.get("role") == "img" and root.get("aria-label") == title.text
        titles.append(title.text)
    assert len(set(titles)) == 4


def test_fonts_are_sans_serif_and_the_width_follows_the_page(drawn: list[Markup]) -> None:
    for svg in drawn:
        assert "monospace" not in svg and "sans-serif" in svg
        root = ElementTree.fromstring(str(svg))
        assert root.get("width") == "100%"
        assert f"#{root.get('id')}{{display:block;width:100%;height:auto}}" in svg


def test_ids_stay_unique_with_four_charts_on_one_page(drawn: list[Markup]) -> None:
    ids = [
        element.get("id")
        for svg in drawn
        for element in ElementTree.fromstring(str(svg)).iter()
        if element.get("id")
    ]
    assert len(ids) == len(set(ids)) == 4


def test_without_data_the_charts_say_so() -> None:
    weekly, outcomes, coverage, status = CASES["all zeros"]()
    assert "No activity yet" in weekly and "No activity yet" in outcomes
    assert "No new tickets yet" in coverage
    assert "No lessons yet" in status
    assert "No lessons yet" in charts.status_chart({}, nonce=NONCE)


def test_names_from_the_database_are_escaped() -> None:
    svg = charts.status_chart({"<script>alert(1)</script>": 2, "a&b": 1}, nonce=NONCE)
    assert "<script" not in svg
    assert "&lt;script&gt;alert(1)&lt;/script&gt; (2)" in svg
    assert "a&amp;b (1)" in svg
    ElementTree.fromstring(str(svg))  # still well-formed


def test_statuses_read_in_lifecycle_order_with_their_counts() -> None:
    svg = charts.status_chart({"archived": 7, "zzz": 1, "active": 40, "proposed": 3}, nonce=NONCE)
    labels = ["proposed (3)", "active (40)", "archived (7)", "zzz (1)"]
    # Drawn bottom up, so the first status is the last label in the document.
    positions = [svg.index(f">{label}<") for label in labels]
    assert positions == sorted(positions, reverse=True)


def test_counts_are_ticked_in_whole_numbers() -> None:
    weeks = empty_weeks()
    weeks[-1] = Week(weeks[-1].start, merged=1, rejected=2)
    svg = charts.outcomes_chart(weeks, nonce=NONCE)
    assert ">1<" in svg and ">2<" in svg
    assert ">0.5<" not in svg and ">1.5<" not in svg


def test_values_have_tooltips_without_a_script() -> None:
    weeks = busy_weeks()
    assert "cited, week of 30 Mar: 4" in charts.weekly_chart(weeks, nonce=NONCE)
    assert "week of 16 Mar: 1 of 2 new tickets" in charts.coverage_chart(weeks, nonce=NONCE)


def test_a_week_without_new_tickets_is_a_gap_not_zero() -> None:
    weeks = empty_weeks()
    weeks[-1] = Week(weeks[-1].start, tickets=4, covered=3)
    svg = charts.coverage_chart(weeks, nonce=NONCE)
    assert "3 of 4 new tickets" in svg
    assert "0 of 0" not in svg
    assert svg.count('class="dot ') == 1


def test_imports_after_the_charts_stay_quiet() -> None:
    # pygal's finder for map plugins made every failed import warn on Python 3.11.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module("no_such_module_after_pygal")
