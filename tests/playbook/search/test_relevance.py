"""Relevance estimate: features a user would agree with, the model file, and the real search."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Engine

from playbook.db import transaction
from playbook.lessons import bulk
from playbook.search import relevance
from playbook.search.relevance import FEATURES, ModelError
from playbook.search.retrieval import Retriever
from playbook.search.text import Ticket, query_tokens


@dataclass(frozen=True)
class FakeHit:
    """What the extractor reads of a search hit."""

    bullet_id: str
    text: str
    bm25: float
    tags: tuple[str, ...] = ()
    freshness: float = 1.0


TICKET = Ticket.from_text(
    "KafkaConsumerRebalanceListener throws NullPointerException on shutdown\n"
    "The broker logs an error while the consumer closes.",
    labels=("consumer",),
    scope="OPS",
)


def idf_of(common: str = "error") -> dict[str, float]:
    """Idf by hand: every term rare except a common one."""
    return {t: 0.1 if t == common else 5.0 for t in query_tokens(TICKET)}


def test_a_lesson_sharing_the_rare_identifier_beats_one_sharing_a_common_word() -> None:
    hits = [
        # As the search ranks them: the rare word's idf lifts its match above the common one's.
        FakeHit("pb-1", "KafkaConsumerRebalanceListener must not touch closed offsets", 12.0),
        FakeHit("pb-2", "Log every error with its request id", 3.0),
    ]
    rare, common = relevance.extract(TICKET, hits, idf_of())
    assert rare["identifiers"] > common["identifiers"] == 0
    assert rare["idf_coverage"] > common["idf_coverage"]
    assert rare["rare_share"] > common["rare_share"]
    model = relevance.load_model()
    assert relevance.probability(rare, model) > relevance.probability(common, model)


def test_tags_rank_and_gap() -> None:
    hits = [
        FakeHit("pb-1", "Consumers close cleanly", 8.0, tags=("consumer",)),
        FakeHit("pb-2", "Brokers restart", 2.0, tags=("broker",)),
    ]
    first, second = relevance.extract(TICKET, hits, idf_of())
    assert (first["tag_match"], second["tag_match"]) == (1.0, 0.0)
    assert (first["rank_recip"], second["rank_recip"]) == (1.0, 0.5)
    assert first["top_ratio"] == 1.0 and second["top_ratio"] == 0.25
    assert first["gap_next"] == pytest.approx(0.75)
    assert relevance.extract(TICKET, [], {}) == []


def test_identifiers_are_classes_paths_keys_and_codes() -> None:
    found = relevance.identifiers(
        "See src/main/java/Foo.java, set broker.persistent.enabled, got ORA-00942 in getFooBar"
    )
    assert {
        "src/main/java/Foo.java",
        "broker.persistent.enabled",
        "ORA-00942",
        "getFooBar",
    } <= found
    assert not relevance.identifiers("the JMS consumer closes while the broker logs an error")


def test_probability_is_a_probability_even_at_the_extremes() -> None:
    model = relevance.load_model()
    for value in (-1e6, -1.0, 0.0, 1.0, 1e6):
        p = model.probability(dict.fromkeys(FEATURES, value))
        assert 0.0 <= p <= 1.0


def test_the_packaged_model_loads_and_names_the_extractors_features() -> None:
    model = relevance.load_model()
    assert model.version == relevance.MODEL_VERSION
    assert set(model.features) <= set(FEATURES) and model.features
    assert len(model.coefficients) == len(model.features)
    assert model.meta["fitted_on"]["dataset"] and model.meta["fitted_at"]
    (row,) = relevance.extract(TICKET, [FakeHit("pb-1", "Consumers close", 3.0)], idf_of())
    assert set(model.features) <= row.keys()
    assert relevance.probability(row) == model.probability(row)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        ("{not json", "not JSON"),
        ('{"version": 99}', "version 99"),
        ('{"version": 1, "features": ["bm25_norm"]}', "not a relevance model"),
        (
            '{"version": 1, "features": ["shoe_size"], "means": [0], "scales": [1],'
            ' "coefficients": [1], "intercept": 0}',
            "unknown features shoe_size",
        ),
        (
            '{"version": 1, "features": ["bm25_norm"], "means": [0, 1], "scales": [1],'
            ' "coefficients": [1], "intercept": 0}',
            "must match",
        ),
        (
            '{"version": 1, "features": ["bm25_norm"], "means": [0], "scales": [0],'
            ' "coefficients": [1], "intercept": 0}',
            "positive",
        ),
        ("[1, 2]", "not a relevance model"),
    ],
)
def test_a_missing_or_corrupt_model_file_is_a_clear_error_at_load(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "model.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ModelError, match=message):
        relevance.load_model(path)


def test_a_written_model_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "model.json"
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "features": ["bm25_norm"],
                "means": [0.0],
                "scales": [1.0],
                "coefficients": [2.0],
                "intercept": 0.0,
            }
        )
    )
    model = relevance.load_model(path)
    assert model.probability({"bm25_norm": 0.0}) == 0.5


FILLER = [
    f"Unrelated lesson number {n} about {word}"
    for n, word in enumerate(
        ["logging", "metrics", "tracing", "docker", "helm", "terraform", "kafka", "redis"]
    )
]


def test_through_the_real_search_a_related_lesson_is_more_probable(engine: Engine) -> None:
    with transaction(engine) as session:
        for n, text in enumerate(FILLER):
            bulk.put(session, {"id": f"filler-{n}", "text": text, "scope": "PAY"}, actor="t")
        bulk.put(
            session,
            {
                "id": "related",
                "text": "StripeWebhookHandler retries must be idempotent\n"
                "A retried payment.intent.succeeded event charged twice.",
                "tags": ["payments"],
                "scope": "PAY",
            },
            actor="t",
        )
        bulk.put(
            session,
            {
                "id": "unrelated",
                "text": "Product image cache is purged through the CDN purge API\n"
                "Purge the image after the product is saved.",
                "tags": ["cdn"],
                "scope": "PAY",
            },
            actor="t",
        )
    ticket = Ticket.from_text(
        "StripeWebhookHandler charges twice when payment.intent.succeeded is retried\n"
        "The product was saved, then the webhook retried and charged the customer again.",
        labels=("payments",),
        scope="PAY",
    )
    retriever = Retriever()
    with transaction(engine) as session:
        result = retriever.search(session, ticket, k=5)
        idf = retriever.idfs(query_tokens(ticket))
    found = {hit.bullet_id: hit for hit in result.hits}
    assert {"related", "unrelated"} <= found.keys()  # "product" and "saved" match the CDN one
    rows = relevance.extract(ticket, result.hits, idf)
    p = {
        hit.bullet_id: relevance.probability(row)
        for hit, row in zip(result.hits, rows, strict=True)
    }
    assert p["related"] > p["unrelated"]
    assert all(0.0 <= value <= 1.0 for value in p.values())


def test_search_json_carries_the_relevance_of_each_lesson(cli, engine: Engine) -> None:
    with transaction(engine) as session:
        for n, text in enumerate(FILLER):
            bulk.put(session, {"id": f"filler-{n}", "text": text, "scope": "PAY"}, actor="t")
        bulk.put(
            session,
            {"id": "related", "text": "StripeWebhookHandler retries must be idempotent"},
            actor="t",
        )
        bulk.put(session, {"id": "loose", "text": "Webhook dashboards load slowly"}, actor="t")
    done = cli("search", "StripeWebhookHandler retries charge twice\nwebhook", "--json")
    results = json.loads(done.stdout)["results"]
    by_id = {row["id"]: row["relevance"] for row in results}
    assert by_id.keys() >= {"related", "loose"}
    assert all(0.0 <= p <= 1.0 for p in by_id.values())
    assert by_id["related"] > by_id["loose"]


def test_search_explains_the_fit_in_words_and_min_relevance_leaves_out_the_rest(
    cli, engine: Engine
) -> None:
    with transaction(engine) as session:
        for n, text in enumerate(FILLER):
            bulk.put(session, {"id": f"filler-{n}", "text": text}, actor="t")
        bulk.put(
            session,
            {"id": "related", "text": "StripeWebhookHandler retries must be idempotent"},
            actor="t",
        )
        bulk.put(session, {"id": "loose", "text": "Webhook dashboards load slowly"}, actor="t")
    query = "StripeWebhookHandler retries charge twice\nwebhook"
    results = json.loads(cli("search", query, "--json").stdout)["results"]
    by_id = {row["id"]: row for row in results}
    related = by_id["related"]
    assert related["fit"] in ("strong", "possible")
    assert related["matched"][0] == "StripeWebhookHandler"  # as written, the rarest first
    table = cli("search", query, "--explain").stdout.splitlines()
    at = next(i for i, line in enumerate(table) if " related " in line)
    why = next(line.strip() for line in table[at + 1 :] if " fit" in line)
    assert why.startswith(f"{related['fit']} fit: matched StripeWebhookHandler")
    assert not any(ch.isdigit() for ch in why)  # words, never a raw number
    floor = related["relevance"] - 0.0001  # the answer rounds to 4 places
    kept = json.loads(cli("search", query, "--json", "--min-relevance", str(floor)).stdout)
    assert [row["id"] for row in kept["results"]] == ["related"]
    refused = cli("search", query, "--min-relevance", "1.5")
    assert refused.exit_code == 2 and "min-relevance" in refused.output


def test_an_unseen_word_weighs_as_the_rarest_so_one_common_word_covers_little(
    engine: Engine,
) -> None:
    with transaction(engine) as session:
        bulk.put(session, {"id": "one", "text": "Settings pages load slowly"}, actor="t")
        bulk.put(session, {"id": "two", "text": "Deploy workers after migrations"}, actor="t")
    retriever = Retriever()
    ticket = Ticket.from_text("Dark theme toggle in the account settings\nkeep contrast readable")
    with transaction(engine) as session:
        [hit] = retriever.search(session, ticket, k=5).hits
        idf = retriever.idfs(query_tokens(ticket))
    assert idf["dark"] == max(idf.values()) > idf["set"] if "set" in idf else True
    [row] = relevance.extract(ticket, [hit], idf)
    assert row["summary_coverage"] < 0.3  # one of the summary's words, not all it knows
    assert hit.relevance is not None and hit.relevance < relevance.default_model().floor
