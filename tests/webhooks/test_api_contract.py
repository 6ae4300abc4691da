"""Schemathesis against the live API, from its own OpenAPI document, with both kinds of token.

Every check schemathesis has: no server errors, every response (status, content type, body)
as documented, schema-valid requests accepted, schema-violating ones refused, 401 without a
token and 405 for undocumented methods. Every operation of the document is tested with each
token, with a bounded number of generated examples per operation (schemathesis runs without
hypothesis deadlines).

The maintainer run walks every phase: the documented examples, the coverage phase (each
parameter's boundary and invalid values, missing fields, undocumented methods, generated
from the schema), random fuzzing and stateful sequences. The agent run skips the coverage
phase: its cases test input validation, which is the same code whatever the token and is the
maintainer run's; random and stateful requests still reach every operation as an agent (403
where a maintainer is needed, what an agent may read and write).

CI runs 10 examples per operation. Run it deeper with more:
`PLAYBOOK_FUZZ_EXAMPLES=200 pytest tests/webhooks/test_api_contract.py`; a run with more than
CI's examples gives the agent the coverage phase too.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from playbook.consolidation import store as consolidations
from playbook.consolidation.groups import Group
from playbook.db import transaction
from playbook.lessons import lifecycle
from tests.support import serving
from webhooks import create_app

pytestmark = pytest.mark.slow

MAINTAINER = "maintainer-token"
AGENT = "agent-token-1"
# Fixed, so CI fails the same way twice; `PLAYBOOK_FUZZ_SEED=` (empty) draws a new one.
SEED = os.environ.get("PLAYBOOK_FUZZ_SEED", "20261123")
# Generated examples per operation and phase in CI; PLAYBOOK_FUZZ_EXAMPLES asks for more.
CI_EXAMPLES = 10
EXAMPLES = int(os.environ.get("PLAYBOOK_FUZZ_EXAMPLES") or CI_EXAMPLES)
ALL_PHASES = "examples,coverage,fuzzing,stateful"
# The coverage phase is most of a run (about 1,000 fixed cases over the document) and checks
# validation, which does not depend on the token: the agent gets it only in a deeper run.
PHASES = {
    MAINTAINER: ALL_PHASES,
    AGENT: ALL_PHASES if EXAMPLES > CI_EXAMPLES else "examples,fuzzing,stateful",
}


@pytest.fixture
def live_api(engine: Engine, settings) -> Iterator[str]:
    """The real app on a free port, with lessons in each status to find and act on."""
    with transaction(engine) as session:
        lifecycle.add(
            session, "Retry webhooks with an idempotency key", learned_from="CTMS-1", actor="t"
        )
        lifecycle.add(
            session,
            "Never hold a lock across HTTP",
            learned_from="CTMS-2",
            actor="t",
            status="proposed",
        )
        lifecycle.add(
            session,
            "Pin the chromium version in CI",
            learned_from="acme/api#3",
            actor="t",
            scope="acme/api",
        )
        lifecycle.deprecate(session, "pb-3", reason="superseded", actor="t")
        # A consolidation (id 1) to read, accept, reject and undo.
        members = tuple(
            lifecycle.add(session, text, learned_from="CTMS-4", actor="t").bullet.id
            for text in ("Close the consumer before a failover", "Reconnect subscribers later")
        )
        consolidations.propose(session, "global", [Group(member_ids=members, similarity=0.9)])
    app = create_app(
        settings.model_copy(update={"api_token": MAINTAINER, "agent_tokens": f"ci:{AGENT}"}),
        engine=engine,
    )
    with serving(app) as url:
        yield url


@pytest.mark.parametrize("token", [MAINTAINER, AGENT], ids=["maintainer", "agent"])
def test_the_api_keeps_its_openapi_contract(live_api: str, token: str, tmp_path) -> None:
    command = [
        sys.executable,
        "-c",
        "import sys; from schemathesis.cli import schemathesis; sys.exit(schemathesis())",
        "run",
        f"{live_api}/api/v1/openapi.json",
        "--checks",
        "all",
        "--header",
        f"Authorization: Bearer {token}",
        "--max-examples",
        str(EXAMPLES),
        "--phases",
        PHASES[token],
        # Nothing to reuse in a fresh directory; a failure prints its own reproduction.
        "--generation-database",
        "none",
        "--no-color",
    ]
    if SEED:
        command += ["--seed", SEED]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=900, cwd=tmp_path, check=False
    )
    report = done.stdout + done.stderr
    assert done.returncode == 0, report[-8000:]
    # Every operation of the document was tested, none skipped.
    operations = re.search(r"Operations:\s+(\d+) selected / \1 total", report)
    assert operations and f"Tested: {operations.group(1)}" in report, report[-3000:]
    # Each phase asked for ran and passed (a phase with nothing to do would not say so).
    summary = report.split("Test Phases:", 1)[-1]
    for phase in PHASES[token].split(","):
        assert f"✅ {phase.capitalize()}" in summary, report[-3000:]
