"""Credentials of each kind the bot refuses, made up for tests, and where they are in a lesson.

Each value is random-looking but fake, built from a seeded generator so that no string in the
repository is a usable credential, and each lesson holds its value in words a person writes.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

from sqlalchemy import Engine, func, select

from playbook.db import transaction
from playbook.models import BotComment, Bullet, Delivery, Revision, SideEffect

_random = random.Random(29)


def _chars(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(_random.choice(alphabet) for _ in range(n))


def _jwt() -> str:
    def part(data: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part({'sub': _chars(8)})}.{_chars(43)}"


@dataclass(frozen=True)
class Sample:
    """A lesson holding one credential: its kind, the words the refusal uses, and the value."""

    kind: str
    what: str
    value: str
    text: str


_AWS = "AKIA" + _chars(16, string.ascii_uppercase + string.digits)
_GHP = "ghp_" + _chars(36)
_PAT = "github_pat_" + _chars(22) + "_" + _chars(59)
_SLACK = f"xoxb-{_chars(11, string.digits)}-{_chars(13, string.digits)}-{_chars(24).lower()}"
_KEY_BODY = _chars(64)
_JWT = _jwt()
_URL_PASSWORD = _chars(14)
_DB_PASSWORD = _chars(18) + "!"
_API_KEY = _chars(32, "0123456789abcdef")

SAMPLES = [
    Sample("aws_access_key", "an AWS access key", _AWS, f"Read the bucket with key {_AWS} only"),
    Sample("github_token", "a GitHub token", _GHP, f"Call the API as the bot: {_GHP}"),
    Sample("github_token", "a GitHub token", _PAT, f"The release job pushes with {_PAT}"),
    Sample("slack_token", "a Slack token", _SLACK, f"Post build news with {_SLACK} to #ci"),
    Sample(
        "private_key",
        "a private key",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        "Deploy with this key\n-----BEGIN OPENSSH PRIVATE KEY-----\n"
        f"{_KEY_BODY}\n-----END OPENSSH PRIVATE KEY-----",
    ),
    Sample("jwt", "a JSON Web Token", _JWT, f"Test the admin page with the session {_JWT}"),
    Sample(
        "url_password",
        "a password in a URL",
        _URL_PASSWORD,
        f"Clone the mirror from https://deploy:{_URL_PASSWORD}@git.example.com/acme.git",
    ),
    Sample(
        "assigned_secret",
        "a credential assigned to DB_PASSWORD",
        _DB_PASSWORD,
        f"The staging database wants DB_PASSWORD={_DB_PASSWORD} in its env",
    ),
    Sample(
        "assigned_secret",
        "a credential assigned to api_key",
        _API_KEY,
        f'Set "api_key": "{_API_KEY}" in the payments client config',
    ),
]
IDS = [f"{sample.kind}-{n}" for n, sample in enumerate(SAMPLES)]

# Lesson text that talks about credentials, hashes and ids without holding any.
ORDINARY = [
    "Use the v2 client; pin the v1 client only for the refunds job",
    "Commit 3feea97c1b2d4e5f60718293a4b5c6d7e8f90123 broke the retry loop; revert it first",
    "Set PASSWORD via the env, never in the settings file",
    "The token expires after an hour, so refresh it before a long import",
    "Request 3f2b9c1e-8d4a-4b6f-9e2d-1c0a7b5e3d9f in the logs shows the double charge",
    "Pass the token with --token=$GITHUB_TOKEN in CI, never inline",
    "password: <your password> is the template line; fill it from the vault",
    "api_key = os.environ['PAYMENTS_API_KEY'] keeps the key out of the code",
    "Password: reset it from the admin page when the login loops",
    "secret: configuration-management matters more than the tool",
    "token_ttl=86400 and token_expiry=2026-12-01T00:00:00Z are the defaults",
    "Bearer tokens must be rotated every 90 days",
    "The tokenizer splits identifiers like getHttpClient into words",
    "Reach the broker at https://user:PASSWORD@broker.internal with your own login",
    "Keep the credentials in ~/.aws/credentials, not in the repo",
    "See pb-12 and CTMS-4337; the cache key is sha256(ticket)",
]


def counts(engine: Engine) -> tuple[int, int]:
    """How many lessons and revisions are stored."""
    with transaction(engine) as session:
        lessons = session.scalar(select(func.count()).select_from(Bullet))
        revisions = session.scalar(select(func.count()).select_from(Revision))
    return lessons or 0, revisions or 0


def stored_anywhere(engine: Engine, value: str) -> list[str]:
    """Where the bot's own records hold ``value``: lessons, history, comments, logs, outcomes.

    The inbox's raw payloads are left out: a delivery is kept as GitHub sent it.
    """
    places = []
    with transaction(engine) as session:
        for text, url in session.execute(select(Bullet.text, Bullet.source_url)):
            if value in text or value in (url or ""):
                places.append("bullets")
        for before, after in session.execute(select(Revision.before, Revision.after)):
            if value in json.dumps([before, after]):
                places.append("revisions")
        for (body,) in session.execute(select(BotComment.body)):
            if value in (body or ""):
                places.append("bot_comments")
        for detail, body in session.execute(select(SideEffect.detail, SideEffect.body)):
            if value in (detail or "") + (body or ""):
                places.append("side_effects")
        for row in session.execute(
            select(Delivery.last_error, Delivery.reason, Delivery.last_traceback)
        ):
            if any(value in (part or "") for part in row):
                places.append("deliveries")
    return places
