"""A simulated model rater for bench/replay.py: right about a shown lesson with a given accuracy.

The replay's ground truth for "this lesson helps this issue" is the dataset's `Duplicate`
links: an issue's duplicate is the lesson it should find. A rater's truth widens that to the
link's cluster (two issues linked to the same third one describe the same failure too); every
other lesson shown is, by the file, no help. The rater gives the true sign (+1 helps, -1 does
not) with probability ``accuracy`` and the opposite one otherwise, and its ratings go through
`playbook.ratings.targets.to_rate` and `playbook.ratings.store.record` exactly as a model's do,
so they reach ranking only through `bullets.ratings` / `bullets.rating_sum`, never as cites.

Whether a rating is right is drawn from a hash of (seed, PR, lesson), not from a shared random
stream: runs at different accuracies then differ only in their accuracy (a rating right at 0.6
is right at 0.75 too), not in how the rankings they caused used up the stream.
"""

from __future__ import annotations

import argparse
import hashlib
from typing import Any

from sqlalchemy.orm import Session

from playbook.ratings import store, targets

DEFAULT_RATERS = "none,0.6,0.75,0.9"
PROMPT_VERSION = "simulated"


def accuracies(text: str) -> list[float | None]:
    """``none,0.6,0.75`` as [None, 0.6, 0.75]; each accuracy in [0, 1], none meaning no rater."""
    found: list[float | None] = []
    for raw in text.split(","):
        part = raw.strip().lower()
        if not part:
            continue
        if part == "none":
            value = None
        else:
            try:
                value = float(part)
            except ValueError:
                raise argparse.ArgumentTypeError(f"not an accuracy: {part!r}") from None
            if not 0.0 <= value <= 1.0:
                raise argparse.ArgumentTypeError(f"an accuracy is between 0 and 1: {part}")
        if value not in found:
            found.append(value)
    return found


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The replay's rater options: which raters, their seed, and a shorter replay."""
    parser.add_argument(
        "--rater",
        type=accuracies,
        default=accuracies(DEFAULT_RATERS),
        help=f"comma-separated rater accuracies, `none` for no ratings (default {DEFAULT_RATERS})",
    )
    parser.add_argument("--rater-seed", type=int, default=0, help="seed of the raters' mistakes")
    parser.add_argument(
        "--limit", type=int, default=None, help="replay only the oldest N issues (quick run)"
    )
    parser.add_argument(
        "--no-loop-off", action="store_true", help="skip the loop-off run (raters only)"
    )


def clusters(size: int, pairs: list[tuple[int, int]]) -> list[int]:
    """Each issue's duplicate cluster: issues joined by `Duplicate` links, directly or not."""
    parent = list(range(size))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for older, newer in pairs:
        parent[root(older)] = root(newer)
    return [root(i) for i in range(size)]


def draw(seed: int, pr_key: str, bullet_id: str) -> float:
    """A number in [0, 1) fixed by (seed, PR, lesson)."""
    digest = hashlib.blake2b(f"{seed}\0{pr_key}\0{bullet_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


class Rater:
    """Rates the lessons a closed PR's issue was shown and did not cite, right with ``accuracy``."""

    def __init__(
        self, accuracy: float, rows: list[dict[str, Any]], cluster: list[int], seed: int = 0
    ) -> None:
        self.accuracy = accuracy
        self.seed = seed
        self.model = f"simulated rater {accuracy:g}"
        self._position = {row["key"]: i for i, row in enumerate(rows)}
        self._cluster = cluster

    def helps(self, bullet_id: str, ticket_key: str) -> bool:
        """The truth: the lesson's issue and the ticket are duplicates of one another."""
        lesson, ticket = self._position.get(bullet_id), self._position.get(ticket_key)
        if lesson is None or ticket is None or lesson == ticket:
            return False
        return self._cluster[lesson] == self._cluster[ticket]

    def rate(self, session: Session, pr_key: str, ticket_key: str) -> tuple[int, int, int]:
        """Rate what the rating job would for this PR; (stored, how many right, how many up)."""
        scored, right = [], set()
        for bullet in targets.to_rate(session, pr_key, [ticket_key]):
            truth = 1.0 if self.helps(bullet.id, ticket_key) else -1.0
            correct = draw(self.seed, pr_key, bullet.id) < self.accuracy
            if correct:
                right.add(bullet.id)
            scored.append(store.Scored(bullet.id, truth if correct else -truth, "simulated rating"))
        added = store.record(
            session,
            scored,
            pr_key=pr_key,
            ticket_key=ticket_key,
            model=self.model,
            prompt_version=PROMPT_VERSION,
        )
        up = {item.bullet_id for item in scored if item.score > 0}
        return (
            len(added),
            sum(1 for bullet_id in added if bullet_id in right),
            sum(1 for bullet_id in added if bullet_id in up),
        )
