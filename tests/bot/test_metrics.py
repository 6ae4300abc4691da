"""`/metrics`: what a scrape shows after real deliveries, who may scrape, and several processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine

from bot import metrics
from bot.config import Settings
from bot.worker import Services, Worker
from playbook.db import transaction
from playbook.lessons import lifecycle
from tests.payloads import fixture_body
from tests.support import GITHUB_SECRET, wait_until_up
from webhooks import create_app
from webhooks.signatures import sign

TOKEN = {"Authorization": "Bearer agent-token"}  # the maintainer token of the `settings` fixture
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape(client, headers: dict[str, str] = TOKEN) -> Samples:
    answer = client.get("/metrics", headers=headers)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert answer.content_type.startswith("text/plain")
    return parse(answer.get_data(as_text=True))


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_a_processed_delivery_is_counted_from_receipt_to_side_effect(
    client, deliver, engine: Engine, settings: Settings
) -> None:
    with transaction(engine) as session:
        lifecycle.add(
            session,
            "Run a spell checker over the README before each commit",
            learned_from="DOC-1",
            actor="tester",
        )
    before = scrape(client)
    assert deliver("issues.opened").status_code == 202
    queued = scrape(client)
    assert value(queued, "playbook_queue_depth") == 1
    assert value(queued, "playbook_queue_oldest_age_seconds") >= 0

    # The settings have no GitHub credentials: the lessons comment is logged as skipped.
    assert Worker(Services(engine=engine, settings=settings)).run_once() == 1
    after = scrape(client)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    issues = {"source": "github", "event": "issues"}
    assert grew("playbook_deliveries_received_total", **issues) == 1
    assert grew("playbook_deliveries_finished_total", **issues, outcome="done") == 1
    assert grew("playbook_delivery_processing_seconds_count", **issues) == 1
    assert grew("playbook_delivery_processing_seconds_bucket", **issues, le="+Inf") == 1
    assert grew("playbook_delivery_processing_seconds_sum", **issues) > 0
    effect = {"target": "github", "action": "comment", "status": "skipped"}
    assert grew("playbook_side_effects_total", **effect) == 1
    assert grew("playbook_search_seconds_count", consumer="retrieval") == 1
    # Read from the database at scrape time.
    assert value(after, "playbook_queue_depth") == 0
    assert value(after, "playbook_queue_oldest_age_seconds") == 0
    assert value(after, "playbook_deliveries_dead") == 0
    assert value(after, "playbook_lessons", status="active") == 1
    assert ("playbook_lessons", frozenset({("status", "archived")})) in after
    assert value(after, "playbook_database_up") == 1
    assert value(after, "playbook_build_info", version=metrics.package_version()) == 1


def test_a_redelivery_is_not_received_twice(client, deliver) -> None:
    before = scrape(client)
    delivery = str(uuid.uuid4())
    assert deliver("issues.opened", delivery=delivery).status_code == 202
    assert deliver("issues.opened", delivery=delivery).status_code == 200
    after = scrape(client)
    labels = {"source": "github", "event": "issues"}
    received = "playbook_deliveries_received_total"
    assert value(after, received, **labels) - value(before, received, **labels) == 1


def test_an_agent_search_is_timed_by_its_kind_of_caller(client) -> None:
    before = scrape(client)
    assert client.get("/api/v1/search?q=retry+webhooks", headers=TOKEN).status_code == 200
    after = scrape(client)
    name = "playbook_search_seconds_count"
    assert value(after, name, consumer="api") - value(before, name, consumer="api") == 1


def test_repositories_with_bad_or_unread_settings_files_are_counted(client, engine: Engine) -> None:
    from playbook.models import RepoSettingsRow

    samples = scrape(client)
    assert ("playbook_repo_settings_problems", frozenset()) in samples
    assert value(samples, "playbook_repo_settings_problems") == 0
    assert value(samples, "playbook_repo_settings_unreadable") == 0
    bad = [{"file": ".github/playbook-bot.yml", "key": "x", "line": 1, "message": "no"}]
    with transaction(engine) as session:
        session.add(RepoSettingsRow(repo="octo-org/a", problems=bad))
        session.add(RepoSettingsRow(repo="octo-org/b", problems=bad, error="GitHub answered 502"))
        session.add(RepoSettingsRow(repo="octo-org/c", error="GitHub answered 502"))
        session.add(RepoSettingsRow(repo="octo-org/d", repo_values={"comment": False}))
    samples = scrape(client)
    # One number each, never a series per repository: their count has no bound.
    assert value(samples, "playbook_repo_settings_problems") == 2
    assert value(samples, "playbook_repo_settings_unreadable") == 2
    assert not any(name.startswith("playbook_repo_settings") and labels for name, labels in samples)


def test_a_failed_side_effect_is_counted(engine: Engine, settings: Settings) -> None:
    from bot.effects import TicketRef
    from bot.handlers.context import effect

    def refused() -> None:
        raise ConnectionError("reset by peer")

    labels = ("jira", "comment", "failed")
    before = metrics.SIDE_EFFECTS.labels(*labels)._value.get()
    services = Services(engine=engine, settings=settings)
    with pytest.raises(ConnectionError):
        effect(services, TicketRef.jira("A-1"), "comment", refused)
    assert metrics.SIDE_EFFECTS.labels(*labels)._value.get() == before + 1


def test_a_rolled_back_effect_is_not_counted(engine: Engine) -> None:
    from bot.effects import TicketRef, record_effect

    labels = ("jira", "comment", "done")
    before = metrics.SIDE_EFFECTS.labels(*labels)._value.get()
    with pytest.raises(RuntimeError), transaction(engine) as session:
        record_effect(session, TicketRef.jira("A-1"), "comment", "done")
        raise RuntimeError("the delivery failed after logging")
    assert metrics.SIDE_EFFECTS.labels(*labels)._value.get() == before
    with transaction(engine) as session:
        record_effect(session, TicketRef.jira("A-1"), "comment", "done")
    assert metrics.SIDE_EFFECTS.labels(*labels)._value.get() == before + 1


def app_with(engine: Engine | None, database_url: str, **tokens: str | None):
    values: dict[str, str | None] = {"PLAYBOOK_API_TOKEN": None, "PLAYBOOK_METRICS_TOKEN": None}
    values |= tokens
    settings = Settings(PLAYBOOK_DATABASE_URL=database_url, _env_file=None, **values)
    return create_app(settings, engine=engine)


def test_without_a_token_setting_metrics_are_off(engine: Engine, database_url: str) -> None:
    answer = app_with(engine, database_url).test_client().get("/metrics", headers=TOKEN)
    assert answer.status_code == 503
    message = answer.get_json()["message"]
    assert "PLAYBOOK_METRICS_TOKEN" in message and "PLAYBOOK_API_TOKEN" in message


def test_the_api_token_opens_metrics_until_a_metrics_token_is_set(
    engine: Engine, database_url: str
) -> None:
    client = app_with(engine, database_url, PLAYBOOK_API_TOKEN="maint").test_client()
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic maint"}):
        answer = client.get("/metrics", headers=headers)
        assert answer.status_code == 401
        assert "PLAYBOOK_API_TOKEN" in answer.get_json()["message"]
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/metrics", headers={"Authorization": "Bearer maint"}).status_code == 200

    client = app_with(
        engine, database_url, PLAYBOOK_API_TOKEN="maint", PLAYBOOK_METRICS_TOKEN="scrape"
    ).test_client()
    answer = client.get("/metrics", headers={"Authorization": "Bearer maint"})
    assert answer.status_code == 401
    assert "PLAYBOOK_METRICS_TOKEN" in answer.get_json()["message"]
    assert client.get("/metrics", headers={"Authorization": "bearer scrape"}).status_code == 200


def test_the_metrics_token_is_a_secret_scrubbed_from_logs() -> None:
    settings = Settings(PLAYBOOK_METRICS_TOKEN="scrape-me-not", _env_file=None)
    assert "scrape-me-not" in settings.secret_values()


def test_a_scrape_reports_a_database_outage_instead_of_failing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'missing' / 'playbook.db'}"
    client = app_with(None, url, PLAYBOOK_METRICS_TOKEN="scrape").test_client()
    samples = scrape(client, {"Authorization": "Bearer scrape"})
    assert value(samples, "playbook_database_up") == 0
    assert ("playbook_queue_depth", frozenset()) not in samples


def test_healthz_names_the_version(client) -> None:
    from importlib.metadata import version

    assert client.get("/healthz").get_json() == {"status": "ok", "version": version("playbook-bot")}


# -- several processes -------------------------------------------------------------------

COUNTING = """
import os, sys, time
from prometheus_client import Gauge
from bot import metrics
for _ in range(int(sys.argv[1])):
    metrics.received("github", "issues")
metrics.finished("github", "issues", "done", time.perf_counter())
# A live gauge, as prometheus-client's multiprocess mode keeps one per process.
Gauge("playbook_test_live", "test", multiprocess_mode="livesum").set(1)
print(os.getpid())
"""


def count_in_processes(directory: Path, *times: int) -> list[int]:
    """Count in one process per item of ``times`` (run side by side); their pids, in order."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", COUNTING, str(n)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in times
    ]
    pids = []
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        pids.append(int(out))
    return pids


@pytest.mark.slow
def test_processes_sharing_a_directory_are_summed_in_one_scrape(
    client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "metrics"  # not there yet: the processes make it
    first, second = count_in_processes(directory, 2, 3)
    assert {p.name for p in directory.glob("counter_*.db")} == {
        f"counter_{first}.db",
        f"counter_{second}.db",
    }
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(directory))
    samples = scrape(client)
    labels = {"source": "github", "event": "issues"}
    assert value(samples, "playbook_deliveries_received_total", **labels) == 5
    assert value(samples, "playbook_deliveries_finished_total", **labels, outcome="done") == 2
    assert value(samples, "playbook_delivery_processing_seconds_count", **labels) == 2
    assert value(samples, "playbook_test_live") == 2
    # The database's gauges come with every scrape, whichever process answers it.
    assert value(samples, "playbook_database_up") == 1

    # gunicorn's child_exit hook: a dead process's live gauge leaves, its counts stay.
    metrics.child_exit(None, SimpleNamespace(pid=first))
    samples = scrape(client)
    assert value(samples, "playbook_test_live") == 1
    assert value(samples, "playbook_deliveries_received_total", **labels) == 5


def test_serve_forgets_its_live_gauges_when_it_stops(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from webhooks.server import EmbeddedServer

    dead: list[int] = []
    monkeypatch.setattr(metrics, "child_exit", lambda _server, worker: dead.append(worker.pid))
    # With no App, serve makes its setup token in the data dir: here, not where tests run.
    server = EmbeddedServer(settings.model_copy(update={"data_dir": str(tmp_path)}), "127.0.0.1", 0)
    server.stop()
    assert dead == [os.getpid()]


@pytest.mark.slow
def test_the_gunicorn_settings_make_a_directory_of_their_own_and_remove_it(
    tmp_path: Path,
) -> None:
    script = textwrap.dedent(
        """
        import os
        from webhooks import gunicorn_conf
        from prometheus_client import values
        path = os.environ["PROMETHEUS_MULTIPROC_DIR"]
        print(os.path.isdir(path), values.ValueClass._multiprocess)
        gunicorn_conf.on_exit(None)
        print(os.path.exists(path))
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    # A directory the operator set (shared with worker processes) is theirs: kept.
    shared = tmp_path / "shared"
    own, operators = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for environment in (env, {**env, "PROMETHEUS_MULTIPROC_DIR": str(shared)})
    ]
    out, err = own.communicate(timeout=120)
    assert own.returncode == 0, err
    assert out.split() == ["True", "True", "False"]
    out, err = operators.communicate(timeout=120)
    assert operators.returncode == 0, err
    assert out.split() == ["True", "True", "True"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.mark.slow
def test_gunicorn_workers_answer_the_same_sums(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAYBOOK_", "GITHUB_"))}
    env |= {
        "PLAYBOOK_DATABASE_URL": database_url,
        "GITHUB_WEBHOOK_SECRET": GITHUB_SECRET,
        "PLAYBOOK_METRICS_TOKEN": "scrape",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"),
    }
    gunicorn = Path(sys.executable).with_name("gunicorn")
    process = subprocess.Popen(
        [
            str(gunicorn),
            "-c",
            "python:webhooks.gunicorn_conf",
            "-w",
            "2",
            "-b",
            f"127.0.0.1:{port}",
            "webhooks.wsgi:app",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, process)
        body = fixture_body("issues.opened")
        for _ in range(6):
            request = urllib.request.Request(
                f"{url}/webhooks/github",
                data=body,
                headers={
                    "Content-Type": "application/json",
                    "X-GitHub-Event": "issues",
                    "X-GitHub-Delivery": str(uuid.uuid4()),
                    "X-Hub-Signature-256": sign(GITHUB_SECRET, body),
                },
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                assert response.status == 202
        # Each scrape reaches either worker; every one sums both.
        for _ in range(4):
            status, text = get(f"{url}/metrics", {"Authorization": "Bearer scrape"})
            assert status == 200, text
            samples = parse(text)
            labels = {"source": "github", "event": "issues"}
            assert value(samples, "playbook_deliveries_received_total", **labels) == 6
            assert value(samples, "playbook_queue_depth") == 6
    finally:
        process.terminate()
        process.communicate(timeout=30)
