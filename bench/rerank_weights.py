"""The semantic rerank's weights, measured: text rank blended with embedding similarity.

Usage: python bench/rerank_weights.py [DATASET] [--embeddings URL|local] [--model NAME]

Replays the shared dataset as bench/dup_recall.py does (each issue a lesson when created, each
newer end of a `Duplicate` pair a ticket searched then), keeps the product's text ranking's top
100 for each ticket, and blends it in numpy the way the rerank does: candidates are the top N of
the text ranking joined with the top N lessons of the ticket's scope by cosine similarity, ranked
by (1 - w) * (1 - (rank - 1) / N) + w * similarity (a lesson outside the text's top N has text
part 0). w and N are chosen on half of the tickets (a split by key hash) and read on the other
half. Embeddings come from an OpenAI-compatible endpoint (`local`: bench/embedding_server.py
started here) and are cached in the temporary folder by model and text hash.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 1.0)
CANDIDATES = (50, 100)
CACHE_DIR = Path(tempfile.gettempdir()) / "playbook-bench-embeddings"
REQUEST_TEXTS = 64


def text_key(text: str) -> str:
    """The cache's key of a text: its SHA-256."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Embedder:
    """Vectors from an OpenAI-compatible embeddings endpoint, cached on disk by model and text."""

    def __init__(self, url: str, model: str | None = None, api_key: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.http = requests.Session()
        if api_key:
            self.http.headers["Authorization"] = f"Bearer {api_key}"
        self.model = model or self._first_model()
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", self.model)[:100]
        self.path = CACHE_DIR / f"{slug}.npz"
        self.vectors: dict[str, np.ndarray] = {}
        self._load()
        # Seconds of each single-text request (a ticket's embedding as a search asks for it).
        self.query_times: list[float] = []

    def _first_model(self) -> str:
        answer = self.http.get(f"{self.url}/models", timeout=30)
        answer.raise_for_status()
        return answer.json()["data"][0]["id"]

    def _load(self) -> None:
        if self.path.exists():
            with np.load(self.path) as stored:
                self.vectors = dict(zip(stored["keys"].tolist(), stored["vectors"], strict=True))

    def save(self) -> None:
        """Write the cache (atomically: a bench stopped halfway leaves the old file)."""
        if not self.vectors:
            return
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        keys = np.array(list(self.vectors))
        vectors = np.stack(list(self.vectors.values())).astype(np.float32)
        partial = self.path.with_suffix(".partial.npz")
        np.savez(partial, keys=keys, vectors=vectors)
        partial.replace(self.path)

    def request(self, texts: Sequence[str]) -> np.ndarray:
        """One embeddings request (base64, as OpenAI's own client asks), unit rows."""
        answer = self.http.post(
            f"{self.url}/embeddings",
            json={"model": self.model, "input": list(texts), "encoding_format": "base64"},
            timeout=300,
        )
        if answer.status_code != 200:
            raise SystemExit(f"embeddings endpoint: HTTP {answer.status_code}: {answer.text[:300]}")
        data = sorted(answer.json()["data"], key=lambda item: item["index"])
        rows = np.stack(
            [np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4") for item in data]
        )
        norms = np.clip(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12, None)
        return (rows / norms).astype(np.float32)

    def embed(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """Unit vectors of ``texts``, asking the endpoint only for texts not cached."""
        keys = [text_key(text or " ") for text in texts]
        missing = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in self.vectors:
                missing.setdefault(key, text or " ")
        if missing:
            # Like lengths in one request: the model pads each batch to its longest text.
            todo = sorted(missing.items(), key=lambda item: len(item[1]))
            started = time.perf_counter()
            for start in range(0, len(todo), REQUEST_TEXTS):
                chunk = todo[start : start + REQUEST_TEXTS]
                for (key, _), vector in zip(
                    chunk, self.request([t for _, t in chunk]), strict=True
                ):
                    self.vectors[key] = vector
                if (start // REQUEST_TEXTS) % 8 == 7:
                    self.save()  # a bench stopped halfway keeps what it has embedded
                    if progress:
                        print(
                            f"  embedded {start + len(chunk):,}/{len(todo):,} texts "
                            f"({time.perf_counter() - started:.0f} s)",
                            file=sys.stderr,
                        )
            self.save()
        return np.stack([self.vectors[key] for key in keys])

    def embed_query(self, text: str) -> np.ndarray:
        """One text in one request, timed (cached answers are not timed)."""
        key = text_key(text or " ")
        if key not in self.vectors:
            started = time.perf_counter()
            self.vectors[key] = self.request([text or " "])[0]
            self.query_times.append(time.perf_counter() - started)
        return self.vectors[key]


def connect(url: str, model: str | None = None, api_key: str | None = None) -> tuple[Any, Any]:
    """An Embedder for ``url``, or for a local server started here when ``url`` is `local`.

    Returns the embedder and the local server (None for a URL), whose stop() ends it.
    """
    if url != "local":
        return Embedder(url, model, api_key), None
    import embedding_server

    server = embedding_server.start()
    return Embedder(server.url, model), server


def split_of(key: str) -> str:
    """`dev` or `test`: half the tickets by a hash of the key (stable across runs)."""
    return "dev" if hashlib.sha256(key.encode()).digest()[0] % 2 == 0 else "test"


def text_rankings(
    rows: list[dict[str, Any]], pairs: list[tuple[int, int]], depth: int
) -> tuple[list[list[str]], set[str]]:
    """The product's default text ranking's top ``depth`` for each pair's ticket, in pair order.

    The replay of bench/dup_recall.py: a fresh SQLite playbook, each issue a lesson when it is
    created, the clock at each ticket's creation time. Also the keys of the issues refused as
    lessons (they hold a credential).
    """
    refused: set[str] = set()
    from datasets import lesson, ticket
    from dup_recall import scratch_playbook
    from sqlalchemy.orm import Session

    from playbook import clock
    from playbook.lessons import bulk, secrets
    from playbook.search.retrieval import Retriever

    by_ticket: dict[int, list[int]] = {}
    for n, (_, newer) in enumerate(pairs):
        by_ticket.setdefault(newer, []).append(n)
    ranked: list[list[str]] = [[] for _ in pairs]
    retriever = Retriever()
    with scratch_playbook("rerank") as engine:
        session = Session(engine)
        for i, row in enumerate(rows):
            created = clock.parse_time(row["created"])
            clock.set_clock(lambda at=created: at)
            if i in by_ticket:
                session.commit()
                result = retriever.search(session, ticket(row), k=depth)
                for n in by_ticket[i]:
                    ranked[n] = [hit.bullet_id for hit in result.hits]
            try:
                bulk.put(session, lesson(row, "rerank_weights"), actor="rerank_weights")
            except secrets.HoldsCredential:
                refused.add(row["key"])  # refused, as at any door
        session.close()
    return ranked, refused


def blend(
    text_ids: Sequence[str],
    ids: Sequence[str],
    similarity: np.ndarray,
    candidates: int,
    weight: float,
    k: int = 10,
) -> list[str]:
    """The rerank's top ``k``: top-N text joined with top-N cosine, ranked by the blend.

    ``ids`` and ``similarity`` are the lessons in the ticket's scope and their cosine to it.
    """
    text_rank = {bullet_id: r for r, bullet_id in enumerate(text_ids[:candidates], start=1)}
    position = {bullet_id: j for j, bullet_id in enumerate(ids)}
    nearest = np.argsort(-similarity, kind="stable")[:candidates]
    # As the product: a lesson found by similarity alone needs a cosine above 0.
    pool = set(text_rank) | {ids[j] for j in nearest if similarity[j] > 0}

    def score(bullet_id: str) -> tuple[float, int, str]:
        rank = text_rank.get(bullet_id)
        text_part = 1 - (rank - 1) / candidates if rank else 0.0
        j = position.get(bullet_id)
        sim = float(similarity[j]) if j is not None else 0.0
        return (-((1 - weight) * text_part + weight * sim), rank or candidates + 1, bullet_id)

    return sorted(pool, key=score)[:k]


def score(ranks: list[int | None]) -> tuple[float, float]:
    """Recall@5 and MRR@10 of the right answer's ranks (None = not in the top 10)."""
    if not ranks:
        return 0.0, 0.0
    recall = sum(1 for r in ranks if r is not None and r <= 5) / len(ranks)
    mrr = sum(1 / r for r in ranks if r is not None and r <= 10) / len(ranks)
    return recall, mrr


def rank_of(found: Sequence[str], target: str) -> int | None:
    """1-based position of ``target`` in the first 10 of ``found``."""
    top = list(found[:10])
    return top.index(target) + 1 if target in top else None


def sweep(
    rows: list[dict[str, Any]],
    pairs: list[tuple[int, int]],
    embedder: Embedder,
    ranked: list[list[str]],
    refused: set[str],
) -> dict[str, Any]:
    """Recall@5 and MRR@10 of text only and of every (w, N), on dev, test and all tickets."""
    from datasets import lesson_text, ticket

    from playbook.search.text import synthesize_query

    lessons = embedder.embed([lesson_text(row) for row in rows], progress=True)
    keys = [row["key"] for row in rows]
    projects = np.array([row["project"] for row in rows])
    playbook = np.array([row["key"] not in refused for row in rows])
    runs: dict[str, list[int | None]] = {"text": []}
    for n, (older, newer) in enumerate(pairs):
        query = embedder.embed_query(synthesize_query(ticket(rows[newer])))
        # The lessons a search at the ticket's time sees: older issues of its project.
        mask = np.flatnonzero((projects[:newer] == rows[newer]["project"]) & playbook[:newer])
        ids = [keys[j] for j in mask]
        similarity = lessons[mask] @ query
        target = keys[older]
        runs["text"].append(rank_of(ranked[n], target))
        for candidates in CANDIDATES:
            for weight in WEIGHTS:
                found = blend(ranked[n], ids, similarity, candidates, weight)
                runs.setdefault(f"w={weight:.1f} N={candidates}", []).append(rank_of(found, target))
    embedder.save()  # the tickets' vectors too
    return summarize(runs, [rows[newer]["key"] for _, newer in pairs])


def summarize(runs: dict[str, list[int | None]], tickets: list[str]) -> dict[str, Any]:
    """Recall@5 and MRR@10 of each ranking on the dev half, the test half and every ticket.

    ``runs`` maps a ranking's name (`text` for the text ranking) to its ranks, in ticket order;
    the best blend is the one with the best dev Recall@5 (then MRR@10).
    """
    split = [split_of(key) for key in tickets]
    table = {}
    for name, ranks in runs.items():
        parts = {
            "dev": [r for r, part in zip(ranks, split, strict=True) if part == "dev"],
            "test": [r for r, part in zip(ranks, split, strict=True) if part == "test"],
            "all": ranks,
        }
        table[name] = {
            part: dict(zip(("recall@5", "mrr@10"), score(r), strict=True))
            for part, r in parts.items()
        }
    blends = [name for name in table if name != "text"]
    best = max(
        blends, key=lambda name: (table[name]["dev"]["recall@5"], table[name]["dev"]["mrr@10"])
    )
    return {
        "table": table,
        "best_on_dev": best,
        "dev_tickets": split.count("dev"),
        "test_tickets": split.count("test"),
    }


def print_table(found: dict[str, Any]) -> None:
    """The sweep as a Markdown table."""
    print(
        "| ranking | dev R@5 | dev MRR@10 | test R@5 | test MRR@10 | all R@5 | all MRR@10 |\n"
        "| --- | --- | --- | --- | --- | --- | --- |"
    )
    for name, parts in found["table"].items():
        cells = " | ".join(
            f"{parts[p]['recall@5']:.3f} | {parts[p]['mrr@10']:.3f}" for p in ("dev", "test", "all")
        )
        label = "text only (today's ranking)" if name == "text" else name
        mark = " **(best on dev)**" if name == found["best_on_dev"] else ""
        print(f"| {label}{mark} | {cells} |")


def main() -> None:
    """Replay, embed, sweep; print the table and one JSON line."""
    import datasets
    from datasets import duplicate_pairs

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    datasets.add_arguments(parser, positional=True)
    parser.add_argument("--embeddings", default="local", help="endpoint base URL, or local")
    parser.add_argument("--model", default=None, help="embedding model (default: the first)")
    args = parser.parse_args()
    dataset = datasets.from_arguments(args)
    rows = dataset.rows
    pairs = duplicate_pairs(rows)
    embedder, server = connect(args.embeddings, args.model)
    try:
        started = time.perf_counter()
        ranked, refused = text_rankings(rows, pairs, max(CANDIDATES))
        print(f"replay: {time.perf_counter() - started:.1f} s", file=sys.stderr)
        started = time.perf_counter()
        found = sweep(rows, pairs, embedder, ranked, refused)
        print(f"embed and sweep: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    finally:
        if server is not None:
            server.stop()
    print(
        f"{dataset.name}: {len(rows)} issues, {len(pairs)} duplicate pairs; model {embedder.model}"
    )
    print_table(found)
    found["dataset"] = dataset.describe()
    found["model"] = embedder.model
    print(json.dumps(found))


if __name__ == "__main__":
    main()
