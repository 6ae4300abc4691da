"""The feedback replay: no reactions change nothing, 👎s on noise lower a scope's level and
raise its precision, and the people's dice are the same in every arm."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import feedback_replay  # noqa: E402
from feedback_replay import Arm, run_arm  # noqa: E402

from playbook.search.floor import Floor  # noqa: E402

FLOOR = Floor(comment=0.03, lesson=0.0075)


def world(n: int = 1000) -> tuple[list[dict[str, Any]], list[list[float]], list[str]]:
    """Replayed tickets in one scope whose estimates over-rate its noise: most tickets' lessons
    read 3-6% and almost never fit; one in six has lessons reading 15-30% of which 15% fit."""
    rng = random.Random(5)
    tickets, probs = [], []
    for i in range(n):
        good = rng.random() < 1 / 6
        lessons = [f"L-{i}-{j}" for j in range(3)]
        ps = [rng.uniform(0.15, 0.3) if good else rng.uniform(0.03, 0.06) for _ in lessons]
        labels = [int(rng.random() < (0.15 if good else 0.002)) for _ in lessons]
        tickets.append({"key": f"OPS-{i}", "lessons": lessons, "labels": labels})
        probs.append(ps)
    return tickets, probs, ["OPS"] * n


def arm(name: str, down: float, up: float) -> dict[str, Any]:
    tickets, probs, projects = world()
    dice = random.Random(9)
    draws = [dice.random() for _ in tickets]
    return run_arm(Arm(name, down, up), tickets, probs, projects, draws, 250, FLOOR, {})


def test_no_reactions_is_the_baseline_and_feedback_moves_the_level() -> None:
    baseline = arm("no feedback", 0.0, 0.0)
    assert arm("p=0", 0.0, 0.0)["windows"] == baseline["windows"]
    assert baseline["windows"][0]["comment_rate"] > 0.9
    taught = arm("p=0.7", 0.7, 0.7)
    assert taught["shifts"]["OPS"] < -0.3
    assert "OPS" in taught["first_fitted_at_ticket"]
    # The last window speaks less, and what it shows fits more often.
    last, before = taught["windows"][-1], baseline["windows"][-1]
    assert last["comment_rate"] < before["comment_rate"] / 2
    assert last["comment_precision"] > 2 * before["comment_precision"]
    assert last["lesson_precision"] > 2 * before["lesson_precision"]


def test_arms_for_each_p_and_the_thumbs_down_only_arm() -> None:
    names = [a.name for a in feedback_replay.arms_for([0.0, 0.3, 0.7])]
    assert names == ["no feedback", "p=0", "p=0.3", "p=0.7", "p=0.7 👎 only"]
