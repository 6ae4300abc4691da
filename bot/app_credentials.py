"""The GitHub App credentials the setup page stores: a JSON file with 0600 rights in the data dir.

The setup page (webhooks/setup.py) writes the file once GitHub has registered the App; every
process reads it when its settings load (bot/settings_first_run.py), so the App's id, webhook
secret and private key never have to be copied into the environment by hand.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

FILE_NAME = "github-app.json"
TOKEN_FILE_NAME = "setup-token"
# A PEM key of 4096 bits is about 3.3 KB; anything much larger is not a file this page wrote.
MAX_FILE_BYTES = 64 * 1024


class CredentialsFileError(ValueError):
    """The credentials file exists but cannot be used; the message says how to fix it."""


@dataclass(frozen=True)
class AppCredentials:
    """What the bot needs of a registered GitHub App, and where people find it."""

    app_id: int
    slug: str
    html_url: str
    webhook_secret: str
    pem: str

    def as_json(self) -> str:
        """The file's text."""
        return json.dumps(self.__dict__, indent=2) + "\n"


def path_in(data_dir: str | os.PathLike[str]) -> Path:
    """Where the credentials file of ``data_dir`` lives."""
    return Path(data_dir) / FILE_NAME


def read(path: Path) -> AppCredentials | None:
    """The credentials in ``path``, None when there is no file; CredentialsFileError if unusable."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise CredentialsFileError(f"cannot read {path}: {error.strerror}") from None
    fix = f"{path} is not a credentials file the setup page wrote; delete it and set up again"
    if len(raw) > MAX_FILE_BYTES:
        raise CredentialsFileError(fix)
    try:
        data = json.loads(raw.decode("utf-8"))
        credentials = AppCredentials(
            app_id=int(data["app_id"]),
            slug=str(data["slug"]),
            html_url=str(data["html_url"]),
            webhook_secret=str(data["webhook_secret"]),
            pem=str(data["pem"]),
        )
    except (ValueError, KeyError, TypeError):
        raise CredentialsFileError(fix) from None
    if (
        credentials.app_id <= 0
        or not credentials.webhook_secret
        or "PRIVATE KEY" not in (credentials.pem)
    ):
        raise CredentialsFileError(fix)
    return credentials


def write(path: Path, credentials: AppCredentials) -> None:
    """Store ``credentials`` in ``path`` with 0600 rights, whole or not at all.

    FileExistsError if an App is stored there already: the first App set up stays the one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    # Created 0600 from the start: the key is never readable by others, not even for a moment.
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(credentials.as_json())
            handle.flush()
            os.fsync(handle.fileno())
        # A hard link appears whole, and fails if another tab or process stored an App first.
        os.link(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def setup_token(data_dir: str | os.PathLike[str]) -> str:
    """The one-time setup token, shared by every process serving ``data_dir``.

    The first process creates it (0600) and the others read it, so each gunicorn worker and a
    restart accept the same token until the App is set up.
    """
    path = Path(data_dir) / TOKEN_FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as handle:
        handle.write(secrets.token_urlsafe(32) + "\n")
    try:
        # A hard link appears whole or fails if the file exists: a second process never reads
        # a half-written token, and never replaces one already printed.
        os.link(partial, path)
    except FileExistsError:
        pass
    finally:
        partial.unlink(missing_ok=True)
    return path.read_text(encoding="ascii", errors="replace").strip()


def forget_setup_token(data_dir: str | os.PathLike[str]) -> None:
    """Remove the setup token once the App is set up: it opens nothing any more."""
    (Path(data_dir) / TOKEN_FILE_NAME).unlink(missing_ok=True)
