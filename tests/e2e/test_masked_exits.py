"""A credential split by an invisible character is masked at every exit of the process.

A zero-width space, soft hyphen, word joiner, byte order mark or zero-width (non-)joiner in the
middle of a token hides it from a scanner reading the characters, but not from a person, a
terminal or a model reading the text. Every exit shows or sends the text as `secrets.masked`
gives it: the rating, merge and reflection prompts and any question to the model, the embedding
requests, `import-rules`' report, `playbook-bot gaps`, `/api/v1/gaps`, the gaps panel of /ui,
and log lines (text and JSON). None holds the token, whole or split, nor any long part of it.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from bot import embeddings, model_client
from bot.logs import configure_logging
from playbook.consolidation import prompt as merge_prompt
from playbook.lessons import characters, secrets
from playbook.ratings import prompt as rating_prompt
from playbook.reviews import reflection
from playbook.reviews.proposals import Feedback
from tests.fakes.model import FakeModel
from tests.gaps_world import CLUSTER, OTHERS, searched
from tests.secret_samples import IDS, SAMPLES, Sample

# The characters `characters.visible` drops (or keeps only between letters outside ASCII).
INVISIBLE = {
    "zero-width-space": "\u200b",
    "soft-hyphen": "\u00ad",
    "word-joiner": "\u2060",
    "byte-order-mark": "\ufeff",
    "zero-width-non-joiner": "\u200c",
    "zero-width-joiner": "\u200d",
}
CASES = [
    pytest.param(sample, char, id=f"{sample_id}-{name}")
    for sample, sample_id in zip(SAMPLES, IDS, strict=True)
    for name, char in INVISIBLE.items()
]
_ANY_INVISIBLE = re.compile(f"[{characters.INVISIBLE_CLASS}]")
KEY = "model-key"


def split(value: str, char: str) -> str:
    """``value`` with ``char`` written at a third and at two thirds of it."""
    third = len(value) // 3
    return f"{value[:third]}{char}{value[third : 2 * third]}{char}{value[2 * third :]}"


def written(sample: Sample, char: str) -> str:
    """The sample's text with its credential split by ``char``."""
    return sample.text.replace(sample.value, split(sample.value, char))


def secret_parts(sample: Sample, char: str) -> list[str]:
    """What must not leave: the value whole and split, its second half (no prefix kept), and a
    private key's body besides its first line."""
    value = sample.value
    parts = [value, split(value, char), value[len(value) // 2 :]]
    if sample.kind == "private_key":
        parts += sample.text.splitlines()[2:-1]  # the key's body
    return parts


def assert_masked(out: str, sample: Sample, char: str, where: str = "") -> None:
    """``out`` holds no part of the credential, as written or with invisible characters gone."""
    seen = _ANY_INVISIBLE.sub("", out)
    for part in secret_parts(sample, char):
        assert part not in out, f"{part!r} left the process {where}"
        assert part not in seen, f"{part!r} left the process {where}, split by invisible chars"


# -- the rule itself -------------------------------------------------------------------------


@pytest.mark.parametrize(("sample", "char"), CASES)
def test_masked_masks_a_split_credential_and_masking_twice_is_masking_once(
    sample: Sample, char: str
) -> None:
    text = written(sample, char)
    once = secrets.masked(text)
    assert_masked(once, sample, char)
    assert secrets.REMOVED in once
    assert secrets.masked(once) == once
    # Cut after masking: no cut leaves the start of a token to read.
    for limit in (5, len(text) // 2, len(text)):
        cut = secrets.masked(text, limit)
        assert len(cut) <= limit
        assert_masked(cut, sample, char)


def test_masked_text_without_credentials_is_its_visible_text() -> None:
    text = "Retry\u200b the webhook\r\nwith an idempotency key \u202eKafka"
    assert secrets.masked(text) == characters.visible(text)
    assert secrets.masked("") == secrets.masked(None) == ""


def test_a_credential_cut_off_by_invisible_padding_is_not_shown_in_part() -> None:
    """Only so much is read to find the visible text: a token that the read cuts, far behind
    invisible padding, is no token to the scanner, and its start is not shown either."""
    token = SAMPLES[1].value
    for padding in range(1, 60_000, 997):
        shown = secrets.masked("Retry the job " + "\u200b" * padding + token, 100)
        assert token[:6] not in shown
        assert shown.startswith("Retry the job")


# -- the model: every prompt, and the question itself ----------------------------------------


def _content(messages: list[dict[str, str]]) -> str:
    return "\n".join(message["content"] for message in messages)


@pytest.mark.parametrize(("sample", "char"), CASES)
def test_prompts_hold_no_split_credential(sample: Sample, char: str) -> None:
    text = written(sample, char)
    work = rating_prompt.Work.bounded(text, text, [text, "Lock the row"], text)
    rating = _content(rating_prompt.messages([("pb-1", "Lock the row first")], work))
    merge = _content(merge_prompt.messages([("pb-1", text), ("pb-2", "Lock the row first")]))
    feedback = Feedback("CONVERSATION", "reviewer", False, text, None)
    reflect = _content(reflection.messages([feedback], pr_title=text))
    for prompt in (rating, merge, reflect):
        assert_masked(prompt, sample, char)
        assert secrets.REMOVED in prompt


@pytest.fixture(scope="module")
def fake_model() -> Iterator[FakeModel]:
    server = FakeModel(models=("test-model", "embed-model"), api_key=KEY)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize(("sample", "char"), CASES)
def test_what_the_model_endpoint_receives_holds_no_split_credential(
    fake_model: FakeModel, sample: Sample, char: str
) -> None:
    """Any question, whoever built it, and any embedding: the endpoint reads them masked."""
    text = written(sample, char)
    client = model_client.make_client(fake_model.base_url, KEY, 10.0)
    before_chat = len(fake_model.chat_requests())
    before_embed = len(fake_model.embedded_texts())
    fake_model.queue({"ratings": []})
    model_client.ask_json(
        client,
        "test-model",
        [{"role": "system", "content": "Rate. JSON."}, {"role": "user", "content": text}],
        rating_prompt.RatingAnswer,
        max_tokens=100,
    )
    embeddings.embed(client, "embed-model", [text, "Lock the row first"])

    [asked] = fake_model.chat_requests()[before_chat:]
    sent = _content(asked["messages"])
    embedded = "\n".join(fake_model.embedded_texts()[before_embed:])
    for out in (sent, embedded):
        assert_masked(out, sample, char)
        assert secrets.REMOVED in out
    assert "Lock the row first" in embedded


def test_the_rating_job_sends_no_split_credential(engine: Engine, database_url: str) -> None:
    """The real rating job: a PR whose body, commits and diff hold split tokens."""
    from tests.bot.model_jobs_world import ratings_answer, start_world
    from tests.loop_harness import REPO

    world = start_world(engine, database_url, PLAYBOOK_MODEL_SEND_DIFFS=True)
    try:
        cases = [(SAMPLES[n], char) for n, char in zip((1, 0, 3), INVISIBLE.values(), strict=False)]
        body = "Fixes CTMS-4337. Applied [pb-1]. " + " ".join(written(*case) for case in cases)
        commits = tuple(written(*case) for case in cases)
        patch = "".join(f"+{written(*case)}\n" for case in cases) + "+lock_order_row(order)\n"
        world.github.add_pull_file(REPO, 2, "payments/settings.py", patch)
        world.seed()
        world.show_ticket()
        world.pull(2, title="CTMS-4337: lock the row", body=body, commits=commits)
        world.close(2, title="CTMS-4337: lock the row", body=body)
        world.model.answer_with(lambda _body: ratings_answer(("pb-2", 0.5)))
        assert world.run_model_jobs() == 1
        [prompt] = world.prompts()
        for case in cases:
            assert_masked(prompt, *case)
        assert "lock_order_row(order)" in prompt
        assert prompt.count(secrets.REMOVED) == 3 * len(cases)  # body, commits, diff
    finally:
        world.stop()


def test_a_ticket_searched_with_a_split_credential_is_embedded_masked(
    engine: Engine, settings: Any
) -> None:
    """The search's query embedding, as a ticket's text reaches it."""
    from tests.bot.embeddings_world import start_world

    world = start_world(engine, settings)
    try:
        world.add("A consumer group rebalances slowly when a member hangs")
        world.run_jobs()
        chars = list(INVISIBLE.values())
        cases = [(sample, chars[n % len(chars)]) for n, sample in enumerate(SAMPLES)]
        ticket = "the consumer hangs after failover\n" + "\n".join(written(*c) for c in cases)
        assert world.search(ticket).rerank == "used"
        asked = world.model.embedded_texts()[-1]
        for case in cases:
            assert_masked(asked, *case)
        assert asked.startswith("the consumer hangs after failover")
    finally:
        world.stop()


# -- what the command line prints ------------------------------------------------------------


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_import_rules_report_shows_no_split_credential(
    cli: Any, engine: Engine, tmp_path: Path, sample: Sample
) -> None:
    pieces = ["# Rules\n", "- Run the linter before every push.\n"]
    for char in INVISIBLE.values():
        pieces.append(f"- Deploy as the bot. {written(sample, char)}\n")
    for char in INVISIBLE.values():
        pieces.append(f"\n```sh\n{written(sample, char)}\n```\n")
    (tmp_path / "AGENTS.md").write_text("".join(pieces), encoding="utf-8")

    report = cli("import-rules", "AGENTS.md", "--dry-run")
    as_json = cli("import-rules", "AGENTS.md", "--dry-run", "--json")

    assert report.exit_code == 0 and as_json.exit_code == 0, report.output + as_json.output
    skipped = [line for line in report.stdout.splitlines() if ": skipped, " in line]
    assert len(skipped) == 2 * len(INVISIBLE), report.stdout
    items = [line for line in skipped if "remove the credential" in line]
    assert len(items) == len(INVISIBLE), report.stdout  # each refused at the lesson door
    assert all(line.endswith(f"(not shown: it holds {sample.what})") for line in items)
    for char in INVISIBLE.values():
        assert_masked(report.output, sample, char)
        assert_masked(as_json.output, sample, char)


# -- the gaps, wherever they are shown -------------------------------------------------------


@pytest.fixture(autouse=True)
def _jira_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JIRA_URL", "https://jira.example.com")


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_gaps_show_no_split_credential(
    cli: Any, engine: Engine, settings: Any, sample: Sample
) -> None:
    """A token pasted in the summary and text of recurring tickets: `gaps`, its JSON, the API
    and the /ui panel show the tickets (and their words) without it."""
    from webhooks import create_app

    chars = list(INVISIBLE.values())
    cluster = [
        (key, f"{title} {written(sample, chars[n])}", f"{body}\n{written(sample, chars[-1 - n])}")
        for n, (key, title, body) in enumerate(CLUSTER)
    ]
    searched(engine, OTHERS + cluster)
    text = cli("gaps")
    as_json = cli("gaps", "--json")
    changes = {"api_token": "maintainer-token", "ui_public_read": True}
    client = create_app(settings.model_copy(update=changes), engine=engine).test_client()
    api = client.get("/api/v1/gaps", headers={"Authorization": "Bearer maintainer-token"})
    page = client.get("/ui/stats")

    assert text.exit_code == 0 and as_json.exit_code == 0, text.output + as_json.output
    assert api.status_code == 200 and page.status_code == 200
    [gap] = json.loads(as_json.stdout)["gaps"]
    assert [ticket["key"] for ticket in gap["tickets"]] == [key for key, *_ in CLUSTER]
    assert api.get_json()["gaps"] == json.loads(api.get_data(as_text=True))["gaps"]
    assert "CTMS-101" in text.stdout and "CTMS-101" in page.get_data(as_text=True)
    shown = {
        "gaps": text.stdout,
        "gaps --json": as_json.stdout,
        "/api/v1/gaps": json.dumps(api.get_json(), ensure_ascii=False),
        "/ui/stats": page.get_data(as_text=True),
    }
    for where, out in shown.items():
        for char in chars:
            assert_masked(out, sample, char, where)
        assert "[cred" in out, where  # `gaps` cuts a title at 100 characters, the mask too
    # The token shared by every ticket is no telling word, in no part.
    assert not any(word in sample.value.lower() for word in gap["words"] if len(word) > 5)


# -- log lines -------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize(("sample", "char"), CASES)
def test_log_lines_hold_no_split_credential(
    capsys: pytest.CaptureFixture[str], fmt: str, sample: Sample, char: str
) -> None:
    text = written(sample, char)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    configure_logging("INFO", fmt)
    try:
        logging.getLogger("bot.test").warning("ticket said: %s", text)
        try:
            raise ValueError(f"cannot parse {text}")
        except ValueError:
            logging.getLogger("bot.test").exception("failed")
    finally:
        root.handlers[:], root.level = handlers, level
    logged = capsys.readouterr().err
    readable = logged
    if fmt == "json":
        readable = "\n".join(
            json.dumps(json.loads(line), ensure_ascii=False) for line in logged.splitlines()
        )
    assert "ticket said: " in readable and "ValueError: cannot parse" in readable
    assert_masked(readable, sample, char)
    # Twice: the message and the traceback (a URL's password is the older rule's to mask).
    assert readable.count(secrets.REMOVED) + readable.count("://***@") == 2


# -- bounded work, and what masking keeps ----------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "shape",
    [
        "ghp_" * 50_000,  # one token's start everywhere: each found token ran to the end
        "ghp_xxxx" * 25_000,  # ... in a masked-looking run, which was never a finding
        "AKIA" * 50_000,
        "eyJ" * 66_000,
        "token abcdefghijklmnop1234 " * 7_400,  # a finding every 27 characters on one line
        "password=" * 22_000,
        ("ghp_" + "a1" * 18 + "\n") * 5_000,
        "ghp_\u200b" * 40_000,  # invisible characters joining the run back
        "-----BEGIN RSA PRIVATE KEY-----\n" * 6_000,
    ],
    ids=lambda shape: f"{shape[:12]!r}x{len(shape)}",
)
def test_masking_the_worst_shapes_ends(shape: str) -> None:
    """Each took seconds to minutes when the end of every token found was looked for from its
    start (quadratic); the guard only fails on a hang, benches measure speed."""
    from bot.logs import redact
    from tests.support import hang_guard

    with hang_guard(60, "masking a hostile text"):
        shown = secrets.masked(shape)
        assert secrets.masked(shown) == shown
        redact(shape)


def test_a_private_key_is_masked_to_its_end_and_the_text_after_it_stays() -> None:
    key = SAMPLES[4]
    body = key.text.splitlines()[2]
    assert secrets.masked(f"before\n{key.text}\nafter") == (
        f"before\nDeploy with this key\n{secrets.REMOVED}\nafter"
    )
    one_line = key.text.replace("\n", " ")
    assert secrets.masked(f"{one_line} then") == f"Deploy with this key {secrets.REMOVED} then"
    quoted = "".join(f"+{line}\n" for line in key.text.splitlines()) + "+lock_order_row(order)\n"
    assert (
        secrets.masked(quoted)
        == f"+Deploy with this key\n+{secrets.REMOVED}\n+lock_order_row(order)\n"
    )
    # Without its END line (a paste cut short): the lines that can be a key's, no further.
    cut = f"{key.value}\n{body}\nDEK-Info: AES-128-CBC,00FF\nlock_order_row(order)\n"
    assert secrets.masked(cut) == f"{secrets.REMOVED}\nlock_order_row(order)\n"
    # An encrypted PEM key: its headers end with a blank line, and its body follows.
    encrypted = (
        "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00FF\n\n"
        f"{body}\n-----END RSA PRIVATE KEY-----\n\nThen run make."
    )
    assert secrets.masked(encrypted) == f"{secrets.REMOVED}\n\nThen run make."


def test_a_long_log_message_is_masked_and_cut(capsys: pytest.CaptureFixture[str]) -> None:
    from bot.logs import MAX_MASKED_CHARS

    sample, char = SAMPLES[1], INVISIBLE["word-joiner"]
    text = "filler " * (MAX_MASKED_CHARS // 7) + written(sample, char) + " end"
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    configure_logging("INFO", "text")
    try:
        logging.getLogger("bot.test").warning("%s / %s", written(sample, char), text)
    finally:
        root.handlers[:], root.level = handlers, level
    logged = capsys.readouterr().err
    assert_masked(logged, sample, char)
    assert "more characters not shown]" in logged
    assert len(logged) < MAX_MASKED_CHARS + 200


@pytest.mark.parametrize(("sample", "char"), CASES[::5])
def test_the_pages_visible_filter_masks_what_it_rejoins(
    app: Any, sample: Sample, char: str
) -> None:
    """Every outside text a /ui page shows (reasons, settings problems, drafts, gap titles)
    goes through the `visible` filter: dropping invisible characters must not rejoin a token."""
    shown = app.jinja_env.from_string("<p>{{ text | visible }}</p>").render(
        text=written(sample, char)
    )
    assert_masked(shown, sample, char)
    assert secrets.REMOVED in shown
