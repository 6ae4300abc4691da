"""The manifest flow's last step: trade GitHub's one-time code for the new App's credentials."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from bot.app_credentials import AppCredentials
from bot.settings_first_run import web_address

# GitHub's codes are short hex strings; anything else is not one of its codes.
CODE = re.compile(r"[A-Za-z0-9_-]{1,100}")
MAX_ANSWER_BYTES = 1024 * 1024
USED_OR_EXPIRED = (
    "GitHub no longer knows this code: it was used already or is more than an hour old. "
    "Register the App again from the setup page."
)


class ExchangeFailed(Exception):
    """The code could not be traded: the status to answer with and a sentence saying why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Owner(BaseModel):
    login: str = Field(max_length=100)


class _Conversion(BaseModel):
    """The fields of GitHub's answer the bot keeps (it sends client_id, client_secret, ... too)."""

    id: int = Field(gt=0)
    slug: str = Field(min_length=1, max_length=100)
    name: str = Field(max_length=200)
    owner: _Owner | None = None
    html_url: str = Field(max_length=500)
    webhook_secret: str | None = Field(None, max_length=1000)
    pem: str = Field(max_length=20_000)


def exchange(api_url: str, code: str, timeout: float) -> tuple[AppCredentials, str]:
    """The registered App's credentials and its owner's login, for ``code``; or ExchangeFailed."""
    import requests  # only the setup page's callback needs it

    url = f"{api_url.rstrip('/')}/app-manifests/{code}/conversions"
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
    try:
        with requests.post(url, headers=headers, timeout=timeout, stream=True) as answer:
            body = answer.raw.read(MAX_ANSWER_BYTES + 1, decode_content=True)
            status = answer.status_code
    except requests.RequestException as error:
        raise ExchangeFailed(
            502, f"cannot reach GitHub's API at {api_url} ({type(error).__name__}); retry"
        ) from None
    if status in (404, 422):
        raise ExchangeFailed(400, USED_OR_EXPIRED)
    if status != 201:
        raise ExchangeFailed(502, f"GitHub answered {status} to the code's exchange; retry later")
    return _credentials(body)


def _credentials(body: bytes) -> tuple[AppCredentials, str]:
    problem = "GitHub's answer to the code's exchange is not the App it registered"
    if len(body) > MAX_ANSWER_BYTES:
        raise ExchangeFailed(502, problem)
    try:
        answer = _Conversion.model_validate_json(body)
        html_url = web_address(answer.html_url, "https://github.com/apps/NAME")
    except (ValidationError, ValueError):
        raise ExchangeFailed(502, problem) from None
    if not answer.webhook_secret or "PRIVATE KEY" not in answer.pem or html_url is None:
        raise ExchangeFailed(502, problem)
    owner: Any = answer.owner.login if answer.owner else ""
    credentials = AppCredentials(
        app_id=answer.id,
        slug=answer.slug,
        html_url=html_url,
        webhook_secret=answer.webhook_secret,
        pem=answer.pem,
    )
    return credentials, str(owner)
