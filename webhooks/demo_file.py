"""`demo --keep PATH`: where the demo's playbook may be kept, and keeping it there.

The rule: the demo writes PATH only when nothing is there, the file is empty, or it is a
previous demo's playbook (a SQLite file whose header carries the demo's application id, set
when a demo keeps its playbook) that no process has open. A later
`demo --keep` on the same path replaces that playbook, lessons added since included; any
other file is never touched. The new playbook is built beside PATH and moved over it in one
rename once the demo has finished, so a demo that fails leaves PATH as it was.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy.engine import make_url

# SQLite's header field for "which application's file is this" (offset 68, big-endian):
# "PBdm", so a later demo knows a playbook it may replace.
APPLICATION_ID = int.from_bytes(b"PBdm", "big")
_HEADER = b"SQLite format 3\x00"
_APPLICATION_ID_AT = 68


def is_demo(path: Path) -> bool:
    """Whether ``path`` is a playbook a demo kept (read from its header, never opened by SQLite)."""
    try:
        with path.open("rb") as handle:
            header = handle.read(100)
    except OSError:
        return False
    return (
        len(header) == 100
        and header.startswith(_HEADER)
        and int.from_bytes(header[_APPLICATION_ID_AT : _APPLICATION_ID_AT + 4], "big")
        == APPLICATION_ID
    )


def refusal(path: Path) -> str | None:
    """Why the demo may not keep its playbook at ``path``, or None when it may."""
    url = database_url(path)
    if make_url(url).database != str(path):
        return f"{path} cannot be written in a database URL; choose a name without ? or #"
    if not path.parent.is_dir():
        return f"{path.parent} is not a folder; create it first"
    if path.is_symlink():
        return f"{path} is a link; give the path of the file itself"
    if not path.exists():
        return None
    if not path.is_file():
        return f"{path} is not a file; choose a new path"
    if path.stat().st_size and not is_demo(path):
        return (
            f"{path} holds something other than a playbook-bot demo; the demo replaces only "
            "its own playbook: choose a new path"
        )
    if path.stat().st_size and not _closed(path):
        return f"{path} is open in another process: stop the server using it first"
    return None


def _closed(path: Path) -> bool:
    """Whether no process has the demo playbook at ``path`` open; if so, it is left whole,
    without a -wal or -shm beside it (SQLite leaves WAL only with no other connection)."""
    try:
        connection = sqlite3.connect(path, timeout=0, isolation_level=None)
    except sqlite3.Error:
        return False
    try:
        mode = connection.execute("PRAGMA journal_mode = DELETE").fetchone()
    except sqlite3.Error:  # busy: a server holds it
        return False
    finally:
        connection.close()
    return bool(mode) and str(mode[0]).lower() == "delete"


def database_url(path: Path) -> str:
    """The SQLAlchemy URL of the SQLite file at ``path`` (absolute)."""
    return f"sqlite:///{path}"


@contextmanager
def building(path: Path) -> Iterator[Path]:
    """A fresh file name beside ``path`` to build the playbook in, removed if not kept."""
    folder = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        yield folder / path.name
    finally:
        for leftover in folder.iterdir():
            leftover.unlink()
        folder.rmdir()


def mark(built: Path) -> None:
    """Set the demo's application id, and leave the file whole without a -wal beside it.

    Run once the demo's engine is disposed: SQLite leaves WAL only with no other connection.
    """
    connection = sqlite3.connect(built, isolation_level=None)
    try:
        connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        connection.execute("PRAGMA journal_mode = DELETE")
    finally:
        connection.close()


def keep(built: Path, path: Path) -> None:
    """Move the finished playbook over ``path`` in one rename (checked again just before)."""
    problem = refusal(path)
    if problem is not None:
        raise FileExistsError(problem)
    built.replace(path)
