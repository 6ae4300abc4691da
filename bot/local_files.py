"""Reading a file a user pointed at, without leaving the folder it was found in.

A checkout is outside input: its `AGENTS.md` may be a symbolic link to `/proc/self/environ` or
a key elsewhere on the machine, a loop of links, or a FIFO that blocks the first `open` until
someone writes to it. `read_inside` reads only regular files whose real path stays inside
the folder given, and says in one line why it read nothing else.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

# Chunks a file is read in; the caller's byte cap bounds the total.
_CHUNK = 1 << 16
# O_NOFOLLOW: a link swapped in after the check is refused by the kernel, not followed.
# O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer.
_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


class Refused(Exception):
    """A file that is not read: ``reason`` says why in a few words (no path in it)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def inside(path: Path, root: Path) -> bool:
    """Whether ``path``'s real location (links resolved) is ``root`` (resolved) or under it."""
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):  # a loop of links, or a path too long to resolve
        return False


def read_inside(
    path: Path, root: Path, max_bytes: int, *, shown_root: str = "its folder"
) -> tuple[bytes, os.stat_result]:
    """At most ``max_bytes + 1`` bytes of ``path`` and its status; Refused unless it is a
    regular file whose real path is inside ``root`` (a resolved folder, ``shown_root`` in
    the reason).

    The reading is bounded, so a file growing meanwhile costs no more than the cap.
    """
    real = _resolved(path)
    if not real.is_relative_to(root):
        raise Refused(f"a symbolic link to {_kind_of_target(real)} outside {shown_root}")
    try:
        fd = os.open(real, _FLAGS)
    except OSError as error:
        if error.errno == errno.ELOOP:  # replaced by a link since it was resolved
            raise Refused("a symbolic link that changed while it was read") from None
        raise Refused(f"cannot be read ({error.strerror})") from None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise Refused(f"not a regular file but {_kind(status.st_mode)}")
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(_CHUNK, left))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks), status
    except OSError as error:
        raise Refused(f"cannot be read ({error.strerror})") from None
    finally:
        os.close(fd)


def _resolved(path: Path) -> Path:
    """``path`` with every link resolved; Refused for a loop or a link to nothing."""
    try:
        return path.resolve(strict=True)
    except RuntimeError:  # Python 3.11 reports a loop of links so
        raise Refused("a loop of symbolic links") from None
    except FileNotFoundError:
        if path.is_symlink():
            raise Refused("a symbolic link to nothing") from None
        raise Refused("gone (deleted while it was read)") from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise Refused("a loop of symbolic links") from None
        raise Refused(f"cannot be read ({error.strerror})") from None


def _kind_of_target(real: Path) -> str:
    try:
        return "a folder" if real.is_dir() else "a file"
    except OSError:
        return "a file"


def _kind(mode: int) -> str:
    """What a file that is not a regular one is, for the reason given."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"
