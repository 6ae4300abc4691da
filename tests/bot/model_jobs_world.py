"""The bot with a model for model-job tests: fake GitHub, Jira and model, both workers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, select

from bot.worker import Services, Worker
from playbook.db import transaction
from playbook.lessons import lifecycle
from playbook.models import Bullet, Delivery, ModelUsage, Rating
from tests.fakes.model import FakeModel
from tests.loop_harness import REPO, Loop, start_loop
from tests.payloads import fixture, pull_request

AGENT = {"login": "coding-agent", "type": "User"}  # the PRs' author
MODEL = "test-model"
MODEL_KEY = "sk-model-" + "Q7wE9rT1yU3iO5pA7sD9fG1h"  # the shape of an API key
TICKET = "CTMS-4337"
SUMMARY = "Checkout times out when the payment webhook retries"

# Lessons of the CTMS project that the ticket's comment shows (each shares its words):
# pb-1, which the PRs cite, and two that match a search about deadlocks almost equally
# (pb-3 a little better), so that one rating each is enough to swap them.
CITED = "Payment webhook retries must be idempotent: dedupe on the event id"
LOCK = "Webhook retries deadlock the orders row: take its lock before calling Stripe, then commit"
ONE_TX = "Webhook retries deadlock the orders row: keep one transaction per retry handler"
LESSONS = ((CITED, "CTMS-4001"), (LOCK, "CTMS-4100"), (ONE_TX, "CTMS-4200"))


def pr_key(number: int) -> str:
    """A PR's key as the bot stores it."""
    return f"{REPO}#{number}"


def job_id(number: int) -> str:
    """The delivery id of a PR's rating job."""
    return f"rate:{pr_key(number)}"


@dataclass
class World:
    """The loop (webhooks, worker, fake GitHub and Jira) with a fake model and its worker."""

    loop: Loop
    model: FakeModel
    model_worker: Worker

    @property
    def engine(self) -> Engine:
        """The test database."""
        return self.loop.engine

    @property
    def github(self) -> Any:
        """The fake GitHub."""
        return self.loop.github

    def stop(self) -> None:
        """Stop the fake servers."""
        self.model.stop()
        self.loop.github.stop()
        self.loop.jira.stop()

    def seed(self, *lessons: tuple[str, str]) -> None:
        """Active CTMS lessons (text, learned from), numbered pb-1, pb-2, ... in order."""
        with transaction(self.engine) as session:
            for text, learned_from in lessons or LESSONS:
                lifecycle.add(session, text, learned_from=learned_from, scope="CTMS", actor="seed")

    def show_ticket(self) -> None:
        """CTMS-4337 is created in Jira: its comment shows (loads) the lessons matching it."""
        self.loop.jira.add_issue(TICKET, SUMMARY)
        assert self.loop.jira_event(fixture("jira.issue_created")).status_code == 202
        self.loop.process()

    def pull(
        self,
        number: int = 2,
        *,
        title: str = f"{TICKET}: dedupe webhook retries",
        body: str = f"Fixes {TICKET}. Applied [pb-1].",
        commits: tuple[str, ...] = ("Dedupe the webhook on its event id",),
    ) -> None:
        """PR ``number`` on GitHub (what the rating job reads back), opened by the agent."""
        self.github.add_pull(REPO, number, title=title, body=body, user="coding-agent")
        self.github.pull_commits[(REPO, number)] = list(commits)

    def close(
        self,
        number: int = 2,
        *,
        merged: bool = True,
        delivery: str | None = None,
        title: str = f"{TICKET}: dedupe webhook retries",
        body: str = f"Fixes {TICKET}. Applied [pb-1].",
    ) -> None:
        """GitHub says PR ``number`` closed (merged); the default worker takes the delivery."""
        payload = pull_request(
            "closed", number=number, title=title, body=body, merged=merged, author=AGENT
        )
        response = self.loop.github_event("pull_request.closed", payload, delivery=delivery)
        assert response.status_code in (200, 202), response.get_data(as_text=True)
        self.loop.process()

    def run_model_jobs(self) -> int:
        """The model's worker, until no job is due; how many it claimed."""
        total = 0
        while claimed := self.model_worker.run_once():
            total += claimed
        return total

    def prompts(self) -> list[str]:
        """The text of each chat request the model received (all its messages)."""
        return [
            "\n".join(message["content"] for message in body["messages"])
            for body in self.model.chat_requests()
        ]


def start_world(engine: Engine, database_url: str, **overrides: Any) -> World:
    """The bot on the test database with the fake model as its endpoint.

    The timeout is short, but long enough for a busy machine's fast answer; the slow-answer
    tests set their own.
    """
    model = FakeModel(models=(MODEL,), api_key=MODEL_KEY)
    model.start()
    values: dict[str, Any] = {
        "PLAYBOOK_MODEL_BASE_URL": model.base_url,
        "PLAYBOOK_MODEL": MODEL,
        "PLAYBOOK_MODEL_API_KEY": MODEL_KEY,
        "PLAYBOOK_MODEL_TIMEOUT_SECONDS": 5,
    }
    values.update(overrides)
    loop = start_loop(engine, database_url, **{k: v for k, v in values.items() if v is not None})
    services = Services(engine=engine, settings=loop.settings)
    return World(loop, model, Worker(services, name="model-worker", queue="model"))


def ratings_answer(*scores: tuple[str, float], reason: str = "the work shows it") -> str:
    """The model's JSON answer rating each (lesson id, score)."""
    return json.dumps(
        {"ratings": [{"id": lesson, "score": score, "reason": reason} for lesson, score in scores]}
    )


def jobs(engine: Engine) -> list[Delivery]:
    """The model's jobs in the inbox, oldest first."""
    with transaction(engine) as session:
        rows = session.scalars(
            select(Delivery).where(Delivery.source == "playbook").order_by(Delivery.id)
        ).all()
        session.expunge_all()
        return list(rows)


def deliveries(engine: Engine, event: str) -> list[Delivery]:
    """The inbox rows of one event (``pull_request``, ``model.rate``), oldest first."""
    with transaction(engine) as session:
        rows = session.scalars(
            select(Delivery).where(Delivery.event == event).order_by(Delivery.id)
        ).all()
        session.expunge_all()
        return list(rows)


def ratings(engine: Engine) -> list[tuple[str, str, float, str, str, str]]:
    """Every rating: (lesson, PR, score, reason, model, prompt version), by lesson."""
    with transaction(engine) as session:
        rows = session.scalars(select(Rating).order_by(Rating.bullet_id, Rating.pr_key))
        return [(r.bullet_id, r.pr_key, r.score, r.reason, r.model, r.prompt_version) for r in rows]


def lesson(engine: Engine, bullet_id: str) -> dict[str, Any]:
    """A lesson's columns as `show` gives them, with its rating counters."""
    with transaction(engine) as session:
        bullet = session.get(Bullet, bullet_id)
        assert bullet is not None
        shown = lifecycle.as_dict(bullet)
        shown.update(ratings=bullet.ratings, rating_sum=bullet.rating_sum)
        return shown


def usage(engine: Engine) -> list[tuple[str, int, int, int]]:
    """The model's use per UTC day: (day, calls, tokens, failures)."""
    with transaction(engine) as session:
        rows = session.scalars(select(ModelUsage).order_by(ModelUsage.day))
        return [(r.day, r.calls, r.tokens, r.failures) for r in rows]


def posted(world: World) -> list[Any]:
    """Every write the bot made on GitHub (comments, labels, edits), not its token requests."""
    return [
        r
        for r in world.github.requests
        if r.method in ("POST", "PATCH", "PUT", "DELETE") and not r.path.startswith("/app/")
    ]
