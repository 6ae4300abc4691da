"""A fake OpenAI-compatible model server: chat completions, embeddings, models, faults."""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import re
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flask import Response, request

from tests.fakes.server import FakeServer

CHAT_PATH = "/v1/chat/completions"
EMBEDDINGS_PATH = "/v1/embeddings"
# The length of the fake's own vectors unless a test asks for another (real ones: 384 to 3072).
EMBEDDING_DIMENSION = 64
RESPONSE_FORMATS = ("text", "json_object", "json_schema")


@dataclass
class Reply:
    """One answer of the fake model to one chat-completions request.

    ``content`` is the assistant message's text (``None`` for a message without content);
    a ``status`` other than 200 answers OpenAI's error shape instead; ``delay`` seconds pass
    before anything is sent; ``raw`` replaces the whole response body (a proxy's HTML page).
    """

    content: str | None = "{}"
    status: int = 200
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    error_type: str = "server_error"
    error_code: str | None = None
    message: str = "The server had an error while processing your request."
    finish_reason: str = "stop"
    raw: str | None = None
    # Embeddings only: answer vectors of this length instead of the server's own (a swapped model).
    dimension: int | None = None
    # A broken or hostile server: reports this usage instead of counting, and sends the whole
    # content past max_tokens.
    usage: dict[str, int] | None = None
    past_limit: bool = False


# What a test scripts: a Reply, a content string, or a dict sent as its JSON text.
Scripted = Reply | str | dict[str, Any]
# Decides the answer from the request's JSON body (model, messages, response_format, ...).
Responder = Callable[[dict[str, Any]], Scripted]


def answer(content: str | dict[str, Any] | None, **kwargs: Any) -> Reply:
    """A 200 answer with ``content`` (a dict becomes its JSON text)."""
    text = json.dumps(content) if isinstance(content, dict) else content
    return Reply(content=text, **kwargs)


def slow(seconds: float, content: str | dict[str, Any] = "{}") -> Reply:
    """The answer ``content``, after ``seconds`` (longer than the client's timeout: it gives up)."""
    return answer(content, delay=seconds)


def server_error(status: int = 500) -> Reply:
    """A 5xx in OpenAI's error shape (500 an error, 503 overloaded)."""
    message = (
        "The engine is currently overloaded, please try again later"
        if status == 503
        else "The server had an error while processing your request."
    )
    return Reply(status=status, message=message, error_type="server_error")


def rate_limited(retry_after: str | float | None = "7") -> Reply:
    """429 with ``Retry-After`` (seconds or an HTTP date; ``None`` leaves the header out)."""
    headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
    return Reply(
        status=429,
        headers=headers,
        error_type="requests",
        error_code="rate_limit_exceeded",
        message="Rate limit reached for requests. Please try again later.",
    )


def invalid_json(text: str = 'Sure! Here is the JSON you asked for: {"lessons": [') -> Reply:
    """A 200 whose message content is not JSON (what a model ignoring JSON mode writes)."""
    return Reply(content=text)


def broken_body(text: str = "<html><body>502 Bad Gateway</body></html>") -> Reply:
    """A 200 whose HTTP body is not JSON at all (a proxy in front of the server)."""
    return Reply(raw=text)


def wrong_dimension(dimension: int = 3) -> Reply:
    """An embeddings answer whose vectors have ``dimension`` values (another model's length)."""
    return Reply(dimension=dimension)


_WORD = re.compile(r"[a-z0-9]+")


def bag_of_words(text: str, dimension: int = EMBEDDING_DIMENSION) -> list[float]:
    """A deterministic unit vector: each word hashed to a signed slot, so texts sharing words
    are near and texts sharing none are (nearly) orthogonal."""
    vector = [0.0] * dimension
    for word in _WORD.findall(text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        slot = int.from_bytes(digest[:4], "little") % dimension
        vector[slot] += 1.0 if digest[4] & 1 else -1.0
    norm = sum(v * v for v in vector) ** 0.5
    if norm == 0:
        # A text without words still gets a vector, as a real model gives one.
        vector[0], norm = 1.0, 1.0
    return [v / norm for v in vector]


def _tokens(text: str) -> int:
    """About four characters a token, as the OpenAI tokenizer averages on English."""
    return max(1, (len(text) + 3) // 4)


def _error(message: str, status: int, type_: str, code: str | None = None, param: Any = None):
    """OpenAI's error body, which the client turns into ``APIStatusError`` subclasses."""
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return body, status


class FakeModel(FakeServer):
    """Enough of the OpenAI REST API for the official ``openai`` client: chat and models.

    Answers come from ``queue(...)`` in order, then from ``responder(request_json)``.
    """

    def __init__(
        self,
        *,
        models: tuple[str, ...] = ("test-model",),
        api_key: str | None = "model-key",
        require_json_word: bool = True,
    ) -> None:
        super().__init__("fake-model")
        self.models = list(models)
        # None: any key or none is accepted, as Ollama, llama.cpp and vLLM do by default.
        self.api_key = api_key
        # OpenAI answers 400 to JSON mode when no message says "JSON"; a prompt must.
        self.require_json_word = require_json_word
        self.replies: deque[Scripted] = deque()
        self.responder: Responder = lambda _body: "{}"
        # The usage object of each completion answered, for tests of token accounting.
        self.usages: list[dict[str, int]] = []
        # Embeddings: scripted replies first, then ``embedding_default`` (a lasting fault, when
        # set), else vectors: a planted one for its exact text, or the bag of words.
        self.embedding_replies: deque[Reply] = deque()
        self.embedding_default: Reply | None = None
        self.planted: dict[str, list[float]] = {}
        self.dimension = EMBEDDING_DIMENSION
        self.embedding_usages: list[dict[str, int]] = []
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._routes()

    @property
    def base_url(self) -> str:
        """What a client's ``base_url`` is set to: the server's URL and ``/v1``."""
        return f"{self.url}/v1"

    def queue(self, *replies: Scripted) -> None:
        """Answer the next chat requests with ``replies``, in order."""
        self.replies.extend(replies)

    def answer_with(self, responder: Responder) -> None:
        """Answer chat requests (once the queue is empty) with ``responder(request_json)``."""
        self.responder = responder

    def queue_embeddings(self, *replies: Reply) -> None:
        """Answer the next embeddings requests with ``replies`` (faults, wrong dimensions)."""
        self.embedding_replies.extend(replies)

    def embed_always(self, reply: Reply | None) -> None:
        """Answer each embeddings request (the queue once empty) with ``reply``; None: vectors."""
        self.embedding_default = reply

    def plant(self, text: str, vector: list[float]) -> None:
        """Answer ``vector`` for exactly ``text`` (instead of its bag of words)."""
        self.planted[text] = list(vector)

    def vector_of(self, text: str) -> list[float]:
        """The vector this server answers for ``text``."""
        return self.planted.get(text) or bag_of_words(text, self.dimension)

    def embedding_requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the embeddings requests received, in order."""
        return [r.json for r in self.calls("POST", EMBEDDINGS_PATH)]

    def embedded_texts(self) -> list[str]:
        """Every text the embeddings requests asked about, in order."""
        texts: list[str] = []
        for body in self.embedding_requests():
            given = (body or {}).get("input")
            texts.extend([given] if isinstance(given, str) else list(given or []))
        return texts

    def chat_requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the chat-completions requests received, in order."""
        return [r.json for r in self.calls("POST", CHAT_PATH)]

    def stop(self) -> None:
        """Release any slow answer still waiting, then stop serving."""
        self._stopping.set()
        super().stop()

    def _authorized(self) -> Any:
        """None when the bearer key is right, else OpenAI's 401 (which names the key it got)."""
        if self.api_key is None:
            return None
        given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if given == self.api_key:
            return None
        # OpenAI shows part of a wrong key; this fake echoes all of it, the harsher case for
        # a client that would copy the server's message into its own errors.
        return _error(
            f"Incorrect API key provided: {given}.", 401, "invalid_request_error", "invalid_api_key"
        )

    def _serves(self, model_id: str) -> bool:
        """Whether ``model_id`` is served; "name" means "name:latest", as in Ollama."""
        return model_id in self.models or f"{model_id}:latest" in self.models

    def _model_entry(self, model_id: str) -> dict[str, Any]:
        return {"id": model_id, "object": "model", "created": 1700000000, "owned_by": "fake"}

    def _unknown_model(self, model_id: str) -> Any:
        return _error(
            f"The model `{model_id}` does not exist or you do not have access to it.",
            404,
            "invalid_request_error",
            "model_not_found",
        )

    def _routes(self) -> None:
        app = self.app

        @app.get("/v1/models")
        def list_models() -> Any:
            if (denied := self._authorized()) is not None:
                return denied
            return {"object": "list", "data": [self._model_entry(m) for m in self.models]}

        # Model ids hold "/" (vLLM's "org/name") and ":" (Ollama's "name:tag").
        @app.get("/v1/models/<path:model_id>")
        def get_model(model_id: str) -> Any:
            if (denied := self._authorized()) is not None:
                return denied
            if not self._serves(model_id):
                return self._unknown_model(model_id)
            return self._model_entry(model_id)

        @app.post(CHAT_PATH)
        def chat() -> Any:
            if (denied := self._authorized()) is not None:
                return denied
            body = request.get_json(silent=True)
            if not isinstance(body, dict):
                return _error("We could not parse the JSON body.", 400, "invalid_request_error")
            if (invalid := self._invalid(body)) is not None:
                return invalid
            if not self._serves(body["model"]):
                return self._unknown_model(body["model"])
            scripted = self.replies.popleft() if self.replies else self.responder(body)
            reply = scripted if isinstance(scripted, Reply) else answer(scripted)
            if reply.delay and self._stopping.wait(reply.delay):
                return _error("shutting down", 503, "server_error")
            return self._reply(body, reply)

        @app.post(EMBEDDINGS_PATH)
        def embeddings() -> Any:
            if (denied := self._authorized()) is not None:
                return denied
            body = request.get_json(silent=True)
            if not isinstance(body, dict):
                return _error("We could not parse the JSON body.", 400, "invalid_request_error")
            if (invalid := self._invalid_embedding(body)) is not None:
                return invalid
            if not self._serves(body["model"]):
                return self._unknown_model(body["model"])
            if self.embedding_replies:
                reply: Reply | None = self.embedding_replies.popleft()
            else:
                reply = self.embedding_default
            reply = reply or Reply()
            if reply.delay and self._stopping.wait(reply.delay):
                return _error("shutting down", 503, "server_error")
            return self._embedding_reply(body, reply)

    def _invalid_embedding(self, body: dict[str, Any]) -> Any:
        """OpenAI's 400 for an embeddings request it would refuse, naming the parameter."""
        if not isinstance(body.get("model"), str) or not body["model"]:
            return _error("you must provide a model parameter", 400, "invalid_request_error")
        given = body.get("input")
        texts = [given] if isinstance(given, str) else given
        if (
            not isinstance(texts, list)
            or not texts
            or len(texts) > 2048
            or not all(isinstance(t, str) and t for t in texts)
        ):
            return _error(
                "'$.input' is invalid. Please check the API reference.",
                400,
                "invalid_request_error",
                None,
                "input",
            )
        if body.get("encoding_format", "float") not in ("float", "base64"):
            return _error(
                f"Invalid value: '{body.get('encoding_format')}'. Supported values are: "
                "'float' and 'base64'.",
                400,
                "invalid_request_error",
                "invalid_value",
                "encoding_format",
            )
        return None

    def _embedding_reply(self, body: dict[str, Any], reply: Reply) -> Any:
        """The embeddings list object (or the scripted error or raw body)."""
        if reply.raw is not None:
            return Response(reply.raw, status=reply.status, content_type="text/html")
        if reply.status != 200:
            error_body, status = _error(
                reply.message, reply.status, reply.error_type, reply.error_code
            )
            return error_body, status, reply.headers
        given = body["input"]
        texts = [given] if isinstance(given, str) else given
        data = []
        for index, text in enumerate(texts):
            vector = self.vector_of(text)
            if reply.dimension is not None:
                vector = (vector * (reply.dimension // len(vector) + 1))[: reply.dimension]
            encoded: Any = vector
            if body.get("encoding_format") == "base64":
                # What OpenAI sends for base64: the float32 values, little-endian.
                packed = struct.pack(f"<{len(vector)}f", *vector)
                encoded = base64.b64encode(packed).decode()
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        tokens = sum(_tokens(text) for text in texts)
        usage = reply.usage or {"prompt_tokens": tokens, "total_tokens": tokens}
        self.embedding_usages.append(usage)
        answer_ = {"object": "list", "data": data, "model": body["model"], "usage": usage}
        return answer_, 200, reply.headers

    def _invalid(self, body: dict[str, Any]) -> Any:
        """OpenAI's 400 for a request it would refuse, naming the parameter."""
        if not isinstance(body.get("model"), str) or not body["model"]:
            return _error("you must provide a model parameter", 400, "invalid_request_error")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _error(
                "'messages' must be a non-empty array",
                400,
                "invalid_request_error",
                None,
                "messages",
            )
        for i, message in enumerate(messages):
            if not isinstance(message, dict) or message.get("role") not in (
                "system",
                "developer",
                "user",
                "assistant",
            ):
                return _error(
                    f"Invalid value for 'messages[{i}].role'",
                    400,
                    "invalid_request_error",
                    None,
                    f"messages[{i}].role",
                )
        form = body.get("response_format") or {"type": "text"}
        if form.get("type") not in RESPONSE_FORMATS:
            return _error(
                f"Invalid value: '{form.get('type')}'. Supported values are: "
                "'json_object', 'json_schema', and 'text'.",
                400,
                "invalid_request_error",
                "invalid_value",
                "response_format.type",
            )
        if form["type"] == "json_schema" and not (form.get("json_schema") or {}).get("name"):
            return _error(
                "Missing required parameter: 'response_format.json_schema.name'.",
                400,
                "invalid_request_error",
                "missing_required_parameter",
                "response_format.json_schema.name",
            )
        text = json.dumps(messages).lower()
        if form["type"] == "json_object" and self.require_json_word and "json" not in text:
            return _error(
                "'messages' must contain the word 'json' in some form, to use 'response_format' "
                "of type 'json_object'.",
                400,
                "invalid_request_error",
                None,
                "messages",
            )
        return None

    def _reply(self, body: dict[str, Any], reply: Reply) -> Any:
        """The chat.completion object (or the scripted error or raw body)."""
        if reply.raw is not None:
            return Response(reply.raw, status=reply.status, content_type="text/html")
        if reply.status != 200:
            error_body, status = _error(
                reply.message, reply.status, reply.error_type, reply.error_code
            )
            return error_body, status, reply.headers
        content, finish = reply.content, reply.finish_reason
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        if (
            content is not None
            and isinstance(limit, int)
            and _tokens(content) > limit
            and not reply.past_limit
        ):
            # A real server stops mid-answer at the limit: the JSON is cut off.
            content, finish = content[: limit * 4], "length"
        prompt_tokens = _tokens(json.dumps(body["messages"]))
        completion_tokens = _tokens(content or "")
        usage = reply.usage or {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        self.usages.append(usage)
        completion = {
            "id": f"chatcmpl-fake{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "system_fingerprint": "fp_fake",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": None},
                    "logprobs": None,
                    "finish_reason": finish,
                }
            ],
            "usage": usage,
        }
        return completion, 200, reply.headers
