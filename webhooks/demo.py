"""`playbook-bot demo`: the whole loop on a temporary playbook, no credentials, no network."""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from bot.config import Settings
from bot.effects import DryRunEffects
from bot.services import Services
from bot.worker import Worker
from playbook import db, upkeep
from playbook.lessons import lifecycle
from webhooks import create_app, demo_file
from webhooks.signatures import sign

SECRET = "demo-secret"
REPO = "acme/checkout"
LESSONS = [
    (
        "Payment webhooks are retried by the provider: dedupe on the event id before changing the order.",
        "CTMS-3012",
        "CTMS",
        "payments,webhooks",
    ),
    (
        "Take the orders row lock once per transaction; a retry handler that opens a second transaction on the same row deadlocks.",
        "CTMS-3250",
        "CTMS",
        "postgres,deadlock",
    ),
    (
        "Never call the payment provider while holding a database row lock: its API can take 30 s.",
        "CTMS-3301",
        "CTMS",
        "payments,locks",
    ),
    (
        "Checkout totals are computed in cents as integers; floats drift on currency conversion.",
        "CTMS-2877",
        "CTMS",
        "money",
    ),
    (
        "Product image cache is purged through the CDN purge API, not by renaming files.",
        "CTMS-2990",
        "CTMS",
        "cdn,cache",
    ),
    (
        "Feature flags for checkout live in LaunchDarkly; default them off in tests.",
        "CTMS-3105",
        "CTMS",
        "flags,tests",
    ),
    (
        "Run database migrations before deploying workers that read the new columns.",
        "OPS-88",
        "global",
        "deploy,migrations",
    ),
    (
        "Use SELECT ... FOR UPDATE SKIP LOCKED for job queues in PostgreSQL.",
        "OPS-91",
        "global",
        "postgres,queues",
    ),
    (
        "Pin the API version of third-party SDKs; unpinned upgrades changed webhook payloads before.",
        "OPS-102",
        "global",
        "dependencies",
    ),
    (
        "Flaky end-to-end tests: wait for the network to be idle, not for fixed sleeps.",
        f"{REPO}#41",
        REPO,
        "tests,flaky",
    ),
    (
        "The README's build badge points at the main branch workflow; update it when renaming workflows.",
        f"{REPO}#57",
        REPO,
        "docs,ci",
    ),
    (
        "Retry the order-confirmation email with exponential backoff; the mail API rate-limits bursts.",
        "CTMS-3320",
        "CTMS",
        "email,retries",
    ),
]


def _jira_issue(key: str, summary: str, description: str, labels: list[str]) -> dict[str, Any]:
    return {
        "id": str(abs(hash(key)) % 100000),
        "self": f"https://example.atlassian.net/rest/api/2/issue/{key}",
        "key": key,
        "fields": {
            "summary": summary,
            "description": description,
            "labels": labels,
            "project": {"key": key.split("-", maxsplit=1)[0], "name": "Checkout"},
            "issuetype": {"name": "Bug"},
        },
    }


def _pull(
    number: int, title: str, body: str, *, state: str, merged: bool, updated: str
) -> dict[str, Any]:
    return {
        "action": "closed" if state == "closed" else "opened",
        "number": number,
        "pull_request": {
            "number": number,
            "title": title,
            "body": body,
            "state": state,
            "merged": merged,
            "merged_at": updated if merged else None,
            "closed_at": updated if state == "closed" else None,
            "updated_at": updated,
            "html_url": f"https://github.com/{REPO}/pull/{number}",
            "head": {"ref": f"agent/{title.split(':', maxsplit=1)[0].lower()}"},
            "labels": [],
            "user": {"login": "coding-agent[bot]", "type": "Bot"},
        },
        "repository": {"full_name": REPO, "name": REPO.split("/")[1]},
        "installation": {"id": 1},
        "sender": {"login": "coding-agent[bot]", "type": "Bot"},
    }


def deliveries() -> list[tuple[str, str, dict[str, Any]]]:
    """(source, GitHub event, payload) in the order the demo sends them."""
    first = _jira_issue(
        "CTMS-4337",
        "Checkout times out when the payment webhook retries",
        "When the provider retries payment_intent.succeeded, the order service deadlocks on the "
        "orders row. The retry handler opens a second transaction on the same row.",
        ["payments", "webhooks"],
    )
    second = _jira_issue(
        "CTMS-4338",
        "Order confirmation emails are sometimes sent twice",
        "Customers receive two confirmation emails when the mail API is slow.",
        ["email"],
    )
    return [
        (
            "jira",
            "jira:issue_created",
            {
                "webhookEvent": "jira:issue_created",
                "issue_event_type_name": "issue_created",
                "issue": first,
            },
        ),
        (
            "jira",
            "jira:issue_created",
            {
                "webhookEvent": "jira:issue_created",
                "issue_event_type_name": "issue_created",
                "issue": second,
            },
        ),
        (
            "github",
            "pull_request",
            _pull(
                101,
                "CTMS-4337: dedupe payment webhook retries",
                "Fixes CTMS-4337. Followed [pb-1] and [pb-2].\n\n## Lessons\n"
                "- A retried payment webhook must reuse the first attempt's transaction outcome, not open a new one.\n",
                state="closed",
                merged=True,
                updated="2026-11-03T10:00:00Z",
            ),
        ),
        (
            "jira",
            "comment_created",
            {
                "webhookEvent": "comment_created",
                "issue": second,
                "comment": {
                    "id": "10071",
                    "body": "/lesson Confirmation emails go through the outbox table; only the outbox worker calls the mail API.",
                    "author": {"accountId": "dana", "displayName": "Dana Reyes"},
                },
            },
        ),
        (
            "github",
            "pull_request",
            _pull(
                102,
                "CTMS-4338: send confirmation email from the webhook handler",
                "Fixes CTMS-4338. Used [pb-12].\n\n## Lessons\n"
                "- Send the confirmation email inside the payment webhook handler so it is sent once.\n",
                state="closed",
                merged=False,
                updated="2026-11-04T10:00:00Z",
            ),
        ),
        (
            "github",
            "pull_request",
            _pull(
                103,
                "CTMS-4338: dedupe confirmation emails on the order id",
                "Fixes CTMS-4338.",
                state="closed",
                merged=True,
                updated="2026-11-05T10:00:00Z",
            ),
        ),
        (
            "jira",
            "comment_created",
            {
                "webhookEvent": "comment_created",
                "issue": first,
                "comment": {
                    "id": "10077",
                    "body": "/lesson Log the provider's event id with every order state change; it makes duplicate deliveries obvious.",
                    "author": {"accountId": "dana", "displayName": "Dana Reyes"},
                },
            },
        ),
    ]


def run(echo: bool = True, keep: Path | None = None) -> dict[str, Any]:
    """Run the demo on a temporary playbook, or one kept at ``keep`` (an absolute path that
    demo_file.refusal allowed); returns the final stats."""
    with _playbook_file(keep) as path:
        report = _run(echo, path, kept=keep is not None)
        if keep is not None:
            demo_file.mark(path)
            demo_file.keep(path, keep)
    return report


@contextmanager
def _playbook_file(keep: Path | None) -> Iterator[Path]:
    """Where the demo builds its playbook: beside ``keep``, else in a temporary folder."""
    if keep is not None:
        with demo_file.building(keep) as path:
            yield path
        return
    with tempfile.TemporaryDirectory(prefix="playbook-demo-") as folder:
        yield Path(folder) / "playbook.db"


def _run(echo: bool, path: Path, *, kept: bool) -> dict[str, Any]:
    """The demo's deliveries on a new playbook at ``path``; its engine is closed after."""
    url = demo_file.database_url(path)
    settings = Settings(
        _env_file=None,
        PLAYBOOK_DATABASE_URL=url,
        GITHUB_WEBHOOK_SECRET=SECRET,
        JIRA_WEBHOOK_SECRET=SECRET,
        PLAYBOOK_JIRA_ALLOWED_USERS="dana",
    )
    engine = db.make_engine(url)
    try:
        db.ensure_schema(engine)
        with db.transaction(engine) as session:
            for text, learned_from, scope, tags in LESSONS:
                lifecycle.add(
                    session, text, learned_from=learned_from, scope=scope, tags=tags, actor="demo"
                )
        click.echo(
            f"Seeded a {'new' if kept else 'temporary'} playbook with {len(LESSONS)} lessons "
            f"(pb-1 .. pb-{len(LESSONS)})."
        )
        effects = DryRunEffects(echo=echo, writers={"dana"})
        worker = Worker(Services(engine=engine, settings=settings, effects=effects), name="demo")
        client = create_app(settings, engine=engine).test_client()
        for source, event, payload in deliveries():
            body = json.dumps(payload).encode()
            if source == "github":
                headers = {
                    "X-GitHub-Event": event,
                    "X-GitHub-Delivery": str(uuid.uuid4()),
                    "X-Hub-Signature-256": sign(SECRET, body),
                }
                response = client.post(
                    "/webhooks/github", data=body, headers=headers, content_type="application/json"
                )
            else:
                response = client.post(
                    "/webhooks/jira",
                    data=body,
                    headers={"X-Hub-Signature": sign(SECRET, body)},
                    content_type="application/json",
                )
            click.echo(
                f"POST /webhooks/{source} {event}: {response.status_code} {response.get_json()['status']}"
            )
            while worker.run_once():
                pass
        with db.transaction(engine) as session:
            changes = lifecycle.changes_of(session, ("deprecate", "restore", "approve"))
            click.echo("\nWhat the outcomes changed:")
            for revision in changes:
                click.echo(f"  {revision.bullet_id}: {revision.action} ({revision.reason})")
            report = upkeep.stats(session)
    finally:
        engine.dispose()
    return report
