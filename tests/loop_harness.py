"""The whole bot for end-to-end tests: webhook app, worker, real clients, fake GitHub and Jira."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import Engine

from bot.config import Settings
from bot.worker import Services, Worker
from tests.fakes.github import FakeGitHub
from tests.fakes.jira import FakeJira
from tests.payloads import INSTALLATION, REPO
from tests.support import GITHUB_SECRET, JIRA_SECRET
from webhooks import create_app
from webhooks.signatures import sign

APP_ID = 4242


def rsa_pair() -> tuple[str, str]:
    """A fresh App private key (PEM) and its public key."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


_KEYS = rsa_pair()  # RSA generation is slow; one key pair serves every test


@dataclass
class Loop:
    """Deliver events like GitHub and Jira do, then let the worker process them."""

    engine: Engine
    settings: Settings
    github: FakeGitHub
    jira: FakeJira
    client: Any
    worker: Worker
    sent: list[str] = field(default_factory=list)

    def github_event(self, name: str, payload: dict[str, Any], delivery: str | None = None) -> Any:
        """POST a GitHub delivery (signed, with the App's installation)."""
        payload.setdefault("installation", {"id": INSTALLATION})
        body = json.dumps(payload).encode()
        delivery = delivery or str(uuid.uuid4())
        self.sent.append(delivery)
        return self.client.post(
            "/webhooks/github",
            data=body,
            headers={
                "X-GitHub-Event": name.split(".", maxsplit=1)[0],
                "X-GitHub-Delivery": delivery,
                "X-Hub-Signature-256": sign(GITHUB_SECRET, body),
            },
            content_type="application/json",
        )

    def jira_event(self, payload: dict[str, Any], delivery: str | None = None) -> Any:
        """POST a Jira delivery."""
        body = json.dumps(payload).encode()
        headers = {
            "X-Atlassian-Webhook-Identifier": delivery or str(uuid.uuid4()),
            "X-Hub-Signature": sign(JIRA_SECRET, body),
        }
        return self.client.post(
            "/webhooks/jira", data=body, headers=headers, content_type="application/json"
        )

    def process(self) -> int:
        """Run the worker until nothing is due; returns how many deliveries it took."""
        total = 0
        while batch := self.worker.run_once():
            total += batch
        return total


def start_loop(engine: Engine, database_url: str, **overrides: Any) -> Loop:
    """Fake servers up, settings pointing at them, app and worker on the test database."""
    private, public = _KEYS
    github = FakeGitHub(app_id=APP_ID, public_key=public)
    github_url = github.start()
    github.add_installation(INSTALLATION)
    # The fixtures' sender closes PRs: a maintainer, unless a test says otherwise.
    github.permissions[(REPO, "Codertocat")] = "write"
    jira = FakeJira()
    jira_url = jira.start()
    values: dict[str, Any] = {
        "PLAYBOOK_DATABASE_URL": database_url,
        "GITHUB_WEBHOOK_SECRET": GITHUB_SECRET,
        "JIRA_WEBHOOK_SECRET": JIRA_SECRET,
        "GITHUB_APP_ID": APP_ID,
        "GITHUB_APP_PRIVATE_KEY": private,
        "GITHUB_API_URL": github_url,
        "PLAYBOOK_GITHUB_SECONDS_BETWEEN_REQUESTS": 0,
        "PLAYBOOK_GITHUB_SECONDS_BETWEEN_WRITES": 0,
        "JIRA_URL": jira_url,
        "JIRA_EMAIL": "bot@example.com",
        "JIRA_API_TOKEN": "jira-token",
        "PLAYBOOK_JIRA_ALLOWED_USERS": "5b10a2844c20165700ede21g",
        "PLAYBOOK_RETRY_BASE_SECONDS": 1,
    }
    values.update(overrides)
    settings = Settings(_env_file=None, **values)
    services = Services(engine=engine, settings=settings)
    return Loop(
        engine=engine,
        settings=settings,
        github=github,
        jira=jira,
        client=create_app(settings, engine=engine).test_client(),
        worker=Worker(services, name="test-worker"),
    )
