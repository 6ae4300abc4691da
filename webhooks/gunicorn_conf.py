"""gunicorn settings for the web process: `gunicorn -c python:webhooks.gunicorn_conf ...`.

Its workers are gevent's, with a deadline for a request's headers (below).

Each gunicorn worker counts the deliveries it receives; for `/metrics` to answer the same
sums whichever worker a scrape reaches, prometheus-client's multiprocess mode keeps every
worker's values in files of one directory. It must be chosen before prometheus-client is
first imported: here, in gunicorn's master, before the workers fork. PROMETHEUS_MULTIPROC_DIR
set by the operator (shared with `playbook-bot worker` processes on the same host) is used
as it is; unset, this run gets a fresh directory of its own, removed when gunicorn stops.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

_OWN_DIR: str | None = None
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    _OWN_DIR = tempfile.mkdtemp(prefix="playbook-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = _OWN_DIR

# After the environment is set: importing this starts prometheus-client in multiprocess mode.
from bot.metrics import child_exit  # noqa: E402

# One greenlet per connection instead of one worker (sync) or thread (gthread): a client that
# trickles its headers or body holds a greenlet, of which each worker has worker_connections
# (1000), so slow clients cannot take the answers to GitHub away. psycopg 3 waits on gevent's
# sockets by itself once they are patched.
worker_class = "gevent"
# The gevent worker reads a request's headers within this many seconds (from the connection's
# start or the end of the previous request), or closes the connection; it is also how long an
# idle keep-alive connection stays open. webhooks.wsgi bounds the body (BodyDeadline).
keepalive = 5


def on_exit(_server: Any) -> None:
    """gunicorn stops: the directory this run made for itself goes with it."""
    if _OWN_DIR is not None:
        shutil.rmtree(_OWN_DIR, ignore_errors=True)


__all__ = ["child_exit", "on_exit"]
