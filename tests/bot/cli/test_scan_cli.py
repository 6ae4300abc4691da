"""`playbook-bot scan` and doctor: stored lessons holding a credential, listed for a clean-up."""

from __future__ import annotations

import json

from sqlalchemy import Engine, update

from playbook.db import transaction
from playbook.models import Bullet
from tests.secret_samples import SAMPLES


def plant(engine: Engine) -> None:
    """Three lessons, two holding credentials as rows from before the rule would."""
    with transaction(engine) as session:
        session.execute(update(Bullet).where(Bullet.id == "pb-1").values(text=SAMPLES[1].text))
        session.execute(
            update(Bullet)
            .where(Bullet.id == "pb-3")
            .values(status="deprecated", text=f"{SAMPLES[0].text}\n{SAMPLES[5].text}")
        )


def add_three(cli) -> None:
    for text in ("Retry with a key", "Close the HTTP client", "Pin chromium in CI"):
        assert cli("add", text, "--learned-from", "CTMS-1").exit_code == 0


def test_a_clean_playbook_scans_clean(cli) -> None:
    add_three(cli)
    clean = cli("scan")
    assert (clean.exit_code, clean.stdout) == (0, "")
    assert clean.stderr == "no lesson holds a credential\n"
    as_json = cli("scan", "--json")
    assert (as_json.exit_code, json.loads(as_json.stdout)) == (0, [])


def test_planted_rows_are_listed_by_kind_and_place_and_fail_the_run(cli, engine) -> None:
    add_three(cli)
    plant(engine)
    found = cli("scan")
    assert found.exit_code == 1
    assert found.stdout.splitlines() == [
        "pb-1 [active]: a GitHub token (line 1, characters 26-65)",
        "pb-3 [deprecated]: an AWS access key (line 1, characters 26-45) and 1 more credential",
    ]
    assert found.stderr.startswith("2 lessons hold a credential; deprecate each")
    as_json = cli("scan", "--json")
    assert as_json.exit_code == 1
    rows = json.loads(as_json.stdout)
    assert [(row["id"], row["status"], row["field"]) for row in rows] == [
        ("pb-1", "active", "text"),
        ("pb-3", "deprecated", "text"),
    ]
    assert [f["kind"] for f in rows[1]["findings"]] == ["aws_access_key", "jwt"]
    assert rows[1]["findings"][1] | {"line": 2} == rows[1]["findings"][1]
    for sample in (SAMPLES[0], SAMPLES[1], SAMPLES[5]):
        assert sample.value not in found.output + as_json.output


def test_doctor_warns_with_the_count_and_the_fix(cli, engine) -> None:
    add_three(cli)
    assert "[ok  ] credentials: no lesson holds a credential" in cli("doctor").output
    plant(engine)
    result = cli("doctor")
    assert result.exit_code == 0  # a warning: the lessons still work
    assert (
        "[WARN] credentials: 2 lessons hold a credential; run `playbook-bot scan` to list them, "
        "then deprecate and edit each (and rotate any credential that was real)"
    ) in result.output
    assert SAMPLES[1].value not in result.output
