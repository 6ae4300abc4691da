"""The holdout's assignment: stable keyed arms, fixed once stored, one salt, recorded periods."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError
from sqlalchemy import Engine, func, select

from bot.cli.base import invalid_settings
from bot.config import Settings
from playbook import db
from playbook.experiment import assignment
from playbook.experiment.assignment import arm, assign, canonical
from playbook.models import ExperimentAssignment, ExperimentSalt

SALT = b"a fixed test salt"
OTHER_SALT = b"another test salt"
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
KEYS = [f"PROJ-{n}" for n in range(10_000)] + [f"acme/repo{n % 7}#{n}" for n in range(10_000)]


def _held_out_share(salt: bytes, percent: int) -> float:
    return sum(arm(salt, key, percent) == "held_out" for key in KEYS) / len(KEYS)


def _stored(engine: Engine) -> int:
    with db.transaction(engine) as session:
        return session.scalar(select(func.count()).select_from(ExperimentAssignment)) or 0


# The pure arm.


@pytest.mark.parametrize(
    "spellings",
    [
        ("PB-12", "pb-12", " Pb-12 "),
        ("acme/api#7", "Acme/API#7", "ACME/api#007", " acme/api#7\n"),
    ],
)
def test_equivalent_spellings_of_a_key_are_one_ticket_in_one_arm(spellings) -> None:
    assert len({canonical(key) for key in spellings}) == 1
    for percent in (1, 10, 25, 50):
        assert len({arm(SALT, key, percent) for key in spellings}) == 1


def test_canonical_forms() -> None:
    assert canonical("pb-12") == "PB-12"
    assert canonical("Acme/API#07") == "acme/api#7"


def test_the_arm_is_the_same_on_every_call_and_in_another_process() -> None:
    keys = KEYS[::997]
    here = [arm(SALT, key, 30) for key in keys]
    assert here == [arm(SALT, key, 30) for key in keys]
    code = (
        "import json, sys; from playbook.experiment.assignment import arm; "
        f"print(json.dumps([arm({SALT!r}, k, 30) for k in json.loads(sys.argv[1])]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(keys)], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == here
    assert set(here) == {"shown", "held_out"}


@pytest.mark.parametrize("percent", [1, 5, 10, 25, 50])
def test_the_held_out_share_is_within_a_point_of_the_percent(percent: int) -> None:
    assert abs(_held_out_share(SALT, percent) - percent / 100) <= 0.01


def test_percent_zero_holds_nothing_out_and_a_higher_percent_only_adds_to_it() -> None:
    assert _held_out_share(SALT, 0) == 0
    # Buckets nest: a ticket held out at 10% is held out at 20% too.
    at_10 = {key for key in KEYS if arm(SALT, key, 10) == "held_out"}
    at_20 = {key for key in KEYS if arm(SALT, key, 20) == "held_out"}
    assert at_10 < at_20


def test_another_salt_reshuffles_the_arms_so_keys_alone_predict_nothing() -> None:
    # With the other salt standing in for a guess made without ours, the guess is right for
    # about half the keys: no better than a coin.
    differ = sum(arm(SALT, key, 50) != arm(OTHER_SALT, key, 50) for key in KEYS) / len(KEYS)
    assert 0.45 <= differ <= 0.55


@pytest.mark.parametrize("percent", [-1, 51, 100])
def test_arm_refuses_a_percent_outside_0_to_50(percent: int) -> None:
    with pytest.raises(ValueError, match="0 to 50"):
        arm(SALT, "PB-1", percent)


# Stored assignments.


def test_a_ticket_seen_with_the_experiment_off_is_outside_it_and_nothing_is_stored(
    engine: Engine,
) -> None:
    with db.transaction(engine) as session:
        assert assign(session, "PB-1", 0, SALT, T0) is None
        assert assignment.assigned(session, "PB-1") is None
    assert _stored(engine) == 0


def test_the_first_assignment_is_stored_with_its_percent_and_kept(engine: Engine) -> None:
    with db.transaction(engine) as session:
        first = assign(session, "pb-7", 20, SALT, T0)
    assert first is not None
    assert (first.ticket_key, first.arm, first.percent) == ("PB-7", arm(SALT, "PB-7", 20), 20)
    assert first.assigned_at == T0
    with db.transaction(engine) as session:
        # Another spelling, a later time, another percentage, even the experiment off.
        for percent in (50, 5, 0):
            assert assign(session, "PB-7", percent, SALT, T0 + timedelta(days=1)) == first
    assert _stored(engine) == 1


def test_a_new_percent_never_moves_a_ticket_already_assigned(engine: Engine) -> None:
    # A ticket shown at 10% that 50% would hold out: it stays shown, at 10%.
    key = next(k for k in KEYS if arm(SALT, k, 10) == "shown" and arm(SALT, k, 50) == "held_out")
    with db.transaction(engine) as session:
        assert assign(session, key, 10, SALT, T0).arm == "shown"  # type: ignore[union-attr]
    with db.transaction(engine) as session:
        again = assign(session, key, 50, SALT, T0 + timedelta(hours=1))
    assert again is not None and (again.arm, again.percent, again.assigned_at) == ("shown", 10, T0)


def test_assign_refuses_a_percent_outside_0_to_50(engine: Engine) -> None:
    with db.transaction(engine) as session, pytest.raises(ValueError, match="0 to 50"):
        assign(session, "PB-1", 51, SALT, T0)


# The salt.


def test_a_configured_salt_is_used_as_given_and_nothing_is_stored(engine: Engine) -> None:
    with db.transaction(engine) as session:
        assert assignment.salt(session, "s3cret") == b"s3cret"
        assert session.scalar(select(func.count()).select_from(ExperimentSalt)) == 0


def test_without_a_configured_salt_one_is_generated_once_and_kept(engine: Engine) -> None:
    with db.transaction(engine) as session:
        first = assignment.salt(session, None)
    with db.transaction(engine) as session:
        assert assignment.salt(session, None) == first
        assert assignment.salt(session, "") == first
        assert session.scalar(select(func.count()).select_from(ExperimentSalt)) == 1
    assert len(first) == 32


def _first_uses_at_once(engine: Engine, count: int) -> list[bytes]:
    """The salt each of ``count`` threads gets when all ask at once, each in its own session."""
    barrier = threading.Barrier(count)
    found: list[bytes] = []
    errors: list[BaseException] = []

    def first_use() -> None:
        try:
            barrier.wait()
            with db.transaction(engine) as session:
                found.append(assignment.salt(session, None))
        except BaseException as error:  # collected: a thread's failure must fail the test
            errors.append(error)

    threads = [threading.Thread(target=first_use) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    return found


@pytest.mark.parametrize("attempt", range(3))
def test_concurrent_first_uses_of_the_salt_agree(engine: Engine, attempt: int) -> None:
    found = _first_uses_at_once(engine, 6)
    assert len(found) == 6 and len(set(found)) == 1
    with db.transaction(engine) as session:
        assert session.scalar(select(func.count()).select_from(ExperimentSalt)) == 1


# Periods.


def test_periods_are_recorded_in_order_with_who_and_when(engine: Engine) -> None:
    times = [T0 + timedelta(days=n) for n in range(5)]
    with db.transaction(engine) as session:
        assert assignment.stop(session, times[0], "ann") is None  # nothing running
        assert assignment.running(session) is None
        assignment.start(session, 10, times[0], "ann")
        assert assignment.start(session, 10, times[1], "bob").started_by == "ann"  # no-op
        assignment.stop(session, times[1], "bob")
        assignment.start(session, 20, times[2], "cy")
        assignment.start(session, 30, times[3], "dee")  # stops the 20% period first
        assert assignment.running(session).percent == 30  # type: ignore[union-attr]
    with db.transaction(engine) as session:
        found = [
            (p.percent, p.started_at, p.started_by, p.stopped_at, p.stopped_by)
            for p in assignment.periods(session)
        ]
    assert found == [
        (10, times[0], "ann", times[1], "bob"),
        (20, times[2], "cy", times[3], "dee"),
        (30, times[3], "dee", None, None),
    ]


@pytest.mark.parametrize("percent", [0, 51])
def test_start_refuses_a_percent_that_is_no_experiment(engine: Engine, percent: int) -> None:
    with db.transaction(engine) as session, pytest.raises(ValueError):
        assignment.start(session, percent, T0, "ann")


# Settings.


def test_the_holdout_is_off_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLAYBOOK_HOLDOUT_PERCENT", raising=False)
    monkeypatch.delenv("PLAYBOOK_EXPERIMENT_SALT", raising=False)
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.holdout_percent == 0
    assert settings.experiment_salt is None


@pytest.mark.parametrize("value", ["51", "-1"])
def test_a_percent_outside_0_to_50_is_a_settings_error_naming_it(value: str) -> None:
    with pytest.raises(ValidationError) as raised:
        Settings(PLAYBOOK_HOLDOUT_PERCENT=value, _env_file=None)  # type: ignore[call-arg]
    assert "PLAYBOOK_HOLDOUT_PERCENT" in invalid_settings(raised.value)


def test_the_salt_never_shows_in_the_settings_but_is_scrubbed_as_a_secret() -> None:
    settings = Settings(
        PLAYBOOK_HOLDOUT_PERCENT="50",
        PLAYBOOK_EXPERIMENT_SALT="pepper-xyzzy",
        _env_file=None,  # type: ignore[call-arg]
    )
    assert settings.holdout_percent == 50
    assert settings.experiment_salt is not None
    assert settings.experiment_salt.get_secret_value() == "pepper-xyzzy"
    for shown in (repr(settings), str(settings), str(settings.model_dump())):
        assert "pepper-xyzzy" not in shown
    assert "pepper-xyzzy" in settings.secret_values()
