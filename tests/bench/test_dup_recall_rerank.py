"""The rerank bench: its embeddings endpoint speaks OpenAI's shapes; the rerank finds by meaning."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import openai
import pytest
import requests

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import dup_recall  # noqa: E402
import embedding_server  # noqa: E402
import rerank_weights  # noqa: E402
from datasets import duplicate_pairs  # noqa: E402

from playbook.search import retrieval  # noqa: E402

# Words of one meaning share an axis: "subscriber" is near "consumer" as a sentence model
# would place it, though BM25 sees two different words.
AXES = {
    "consumer": 0,
    "subscriber": 0,
    "hangs": 1,
    "stuck": 1,
    "failover": 2,
    "broker": 2,
    "typo": 3,
    "readme": 3,
    "disk": 4,
    "full": 4,
    "storage": 4,
}


class PlantedModel:
    """A stand-in for the sentence model: each known word adds to its meaning's axis."""

    name = "planted"
    dimension = 8

    def embed(self, texts: Sequence[str]) -> tuple[np.ndarray, int]:
        rows = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in zip(rows, texts, strict=True):
            for word in re.findall(r"\w+", text.lower()):
                row[AXES.get(word, 7)] += 1.0 if word in AXES else 0.1
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        return rows, sum(len(text.split()) for text in texts)


@pytest.fixture
def server() -> Iterator[embedding_server.RunningServer]:
    running = embedding_server.start(PlantedModel(), api_key="bench-key")
    yield running
    running.stop()


def test_the_endpoint_answers_the_openai_client_in_floats_and_in_base64(server: Any) -> None:
    client = openai.OpenAI(base_url=server.url, api_key="bench-key")
    texts = ["The consumer hangs after failover", "Fix the typo in the README"]
    # The official client asks for base64 unless told otherwise, and decodes it itself.
    packed = client.embeddings.create(model="planted", input=texts)
    floats = client.embeddings.create(model="planted", input=texts, encoding_format="float")
    assert [d.index for d in packed.data] == [0, 1]
    assert np.allclose([d.embedding for d in packed.data], [d.embedding for d in floats.data])
    assert len(floats.data[0].embedding) == 8
    assert floats.usage.prompt_tokens == 11
    assert [m.id for m in client.models.list().data] == ["planted"]


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"model": "other", "input": "a"}, 404, "model"),
        ({"model": "planted", "input": []}, 400, "input"),
        ({"model": "planted", "input": [[1, 2, 3]]}, 400, "input"),
        ({"model": "planted", "input": ["a", ""]}, 400, "input"),
        ({"model": "planted", "input": "a", "encoding_format": "int8"}, 400, "encoding_format"),
        ({"model": "planted", "input": "a", "dimensions": 4}, 400, "dimensions"),
        ({"input": "a"}, 400, "model"),
    ],
)
def test_a_request_the_endpoint_refuses_names_its_parameter(
    server: Any, body: dict[str, Any], status: int, param: str
) -> None:
    answer = requests.post(
        f"{server.url}/embeddings",
        json=body,
        headers={"Authorization": "Bearer bench-key"},
        timeout=10,
    )
    assert answer.status_code == status
    assert answer.json()["error"]["param"] == param


def test_the_endpoint_refuses_a_wrong_key_and_bad_json(server: Any) -> None:
    url = f"{server.url}/embeddings"
    wrong = requests.post(url, json={"model": "planted", "input": "a"}, timeout=10)
    assert wrong.status_code == 401
    assert wrong.json()["error"]["code"] == "invalid_api_key"
    broken = requests.post(url, data="{", headers={"Authorization": "Bearer bench-key"}, timeout=10)
    assert broken.status_code == 400
    assert "JSON" in broken.json()["error"]["message"]


def issue(key: str, day: int, summary: str, duplicate_of: str | None = None) -> dict[str, Any]:
    """A Jira issue in the dataset's shape."""
    return {
        "key": key,
        "project": "MQ",
        "created": f"2020-01-{day:02d}T10:00:00.000+0000",
        "summary": summary,
        "description": "",
        "labels": [],
        "components": [],
        "links": [{"type": "Duplicate", "key": duplicate_of}] if duplicate_of else [],
    }


# The duplicate says in other words what its older issue said: no word in common with it, but
# a word in common with eleven unrelated older issues, which fill the text ranking's top 10.
ROWS = [
    issue("MQ-1", 1, "Subscriber stuck when the broker changes"),
    *(issue(f"MQ-{n}", n, f"Typo: hangs misspelled on page {n}") for n in range(2, 13)),
    issue("MQ-13", 13, "Disk full on the storage node"),
    issue("MQ-14", 14, "The consumer hangs after failover", "MQ-1"),
]


def test_the_rerank_finds_the_duplicate_that_shares_no_word(
    server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rerank_weights, "CACHE_DIR", tmp_path)
    embedder = rerank_weights.Embedder(server.url, api_key="bench-key")
    semantic = dup_recall.Semantic(embedder, ROWS)
    runs = dup_recall.ours(ROWS, duplicate_pairs(ROWS), semantic)
    assert runs["feedback"] == [None]  # the text ranking cannot find it
    assert runs["w=0.0 N=100"] == [None]  # nor a blend that gives similarity no weight
    assert runs["w=1.0 N=50"] == [1]  # similarity alone puts it first
    assert semantic.fallbacks == 0
    assert len(semantic.endpoint_seconds) == 1  # the ticket's text asked once, then remembered
    assert retrieval.query_embedder is None  # the hook is put back for everything else
    # The vectors are cached by model and text: a second bench asks the endpoint nothing more.
    again = rerank_weights.Embedder(server.url, api_key="bench-key")
    before = len(server.app.timings)
    again.embed([dup_recall.stored_text(row) for row in ROWS])
    assert len(server.app.timings) == before
