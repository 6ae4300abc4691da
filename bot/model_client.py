"""The model endpoint's client: one JSON question to any OpenAI-compatible server, typed failures.

Settings-free on purpose: callers pass the base URL, key, model and timeout, so the job queue,
``doctor`` and tests use it the same way. ``openai`` takes ~0.4 s to import, so it is imported
inside the functions that need it and the CLI starts without it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, get_args

import pydantic

from bot.logs import add_secrets, redact
from playbook.lessons import secrets

if TYPE_CHECKING:
    from openai import OpenAI

log = logging.getLogger(__name__)

T = TypeVar("T", bound=pydantic.BaseModel)
Reason = Literal[
    "timeout", "rate_limited", "unavailable", "bad_answer", "auth", "not_found", "bad_request"
]
REASONS: tuple[Reason, ...] = get_args(Reason)
# Reasons worth another try later (by the job queue, not here): the endpoint may recover.
TRANSIENT: frozenset[Reason] = frozenset({"timeout", "rate_limited", "unavailable"})
# A bad answer is shown back to the model on the retry, bounded: it is the model's own text.
MAX_ECHOED_CHARS = 4000
# A server's own error text (a 400's "context length exceeded") is kept this long at most.
MAX_DETAIL_CHARS = 200
# A reasoning model's thoughts (<think>...</think>) and a Markdown fence around the JSON are
# what local models add most often even in JSON mode; neither is the answer. They are taken
# off with str.find and str.strip, never a regular expression: the answer is outside text, and
# the old fence pattern backtracked for seconds on "```json" and a few thousand newlines.
_THINK_OPEN, _THINK_CLOSE, _FENCE = "<think>", "</think>", "```"
# The longest answer parsed. Every prompt asks for at most 1,500 tokens, about 6,000
# characters; an answer far past that is a broken or hostile server, refused unread.
MAX_ANSWER_CHARS = 200_000
# What a token can hold at most when the count is checked against what was asked: byte-level
# tokenizers never put less than one byte in a token, so a prompt of N UTF-8 bytes is at most
# N tokens, plus a few for each message's role and separators.
TOKENS_PER_MESSAGE = 8


@dataclass(frozen=True)
class Usage:
    """What calls to the endpoint cost: requests made (failed ones too) and tokens counted."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Prompt and completion tokens together, what a token budget counts."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.calls + other.calls,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )


@dataclass(frozen=True)
class Answer(Generic[T]):
    """A parsed answer, with what it cost and how long it took (all attempts together)."""

    value: T
    usage: Usage
    latency_s: float
    model: str


class ModelError(Exception):
    """A call that gave no usable answer; ``reason`` is one of :data:`REASONS`.

    The message names the reason and a short detail, never the API key or the prompt.
    """

    def __init__(
        self,
        reason: Reason,
        detail: str,
        *,
        retry_after: float | None = None,
        usage: Usage | None = None,
        latency_s: float = 0.0,
    ) -> None:
        self.reason = reason
        self.detail = detail
        self.retry_after = retry_after
        self.usage = usage or Usage()
        self.latency_s = latency_s
        super().__init__(f"{reason}: {detail}")

    @property
    def transient(self) -> bool:
        """Whether trying again later may succeed."""
        return self.reason in TRANSIENT


@dataclass
class _Attempt:
    """One request's outcome: the content (or None) and what it cost."""

    content: str | None
    usage: Usage
    model: str
    finish_reason: str | None = None


def make_client(base_url: str, api_key: str | None, timeout: float) -> OpenAI:
    """An ``openai.OpenAI`` for ``base_url`` that never retries by itself (the job queue does)."""
    from openai import OpenAI

    # Any log line or stored error that ever carries the key is scrubbed of it.
    add_secrets([api_key])
    return OpenAI(
        base_url=base_url,
        # Local servers (Ollama, llama.cpp, vLLM) need no key, but the client insists on one;
        # passing ours always also stops it reading OPENAI_API_KEY from the environment.
        api_key=api_key or "unused",
        timeout=timeout,
        max_retries=0,
    )


def schema_instruction(schema: type[pydantic.BaseModel]) -> str:
    """The sentence telling the model the JSON shape wanted (JSON mode alone does not)."""
    shape = json.dumps(schema.model_json_schema(), separators=(",", ":"))
    return f"Answer with one JSON object and nothing else, matching this JSON Schema: {shape}"


def ask_json(
    client: OpenAI,
    model: str,
    messages: list[dict[str, str]],
    schema: type[T],
    *,
    max_tokens: int,
    temperature: float = 0.0,
    response_format: Literal["json_object", "json_schema"] = "json_object",
) -> Answer[T]:
    """Ask ``model`` for JSON shaped like ``schema``; one retry if the answer does not parse.

    The schema is added to the system message (merged into the first one, since some chat
    templates refuse a second). Raises :class:`ModelError`; its ``usage`` counts every call made.
    """
    asked = _with_instruction(messages, schema)
    form = _response_format(schema, response_format)
    started = time.monotonic()
    spent = Usage()
    problem = ""
    for attempt in (1, 2):
        try:
            got = _call(client, model, asked, form, max_tokens, temperature)
        except ModelError as error:
            # A refused or timed-out request still counts against a budget of calls.
            raise ModelError(
                error.reason,
                error.detail,
                retry_after=error.retry_after,
                usage=spent + Usage(calls=1),
                latency_s=time.monotonic() - started,
            ) from error
        spent += got.usage
        try:
            value = schema.model_validate_json(_json_text(got.content))
        except (pydantic.ValidationError, ValueError) as error:
            problem = _problem(error, got.finish_reason)
            log.warning(
                "model %s answered unusable JSON (attempt %d of 2): %s", model, attempt, problem
            )
            asked = [
                *asked,
                {"role": "assistant", "content": (got.content or "")[:MAX_ECHOED_CHARS]},
                {
                    "role": "user",
                    "content": f"That answer was not usable: {problem}. "
                    "Answer again with only the JSON object.",
                },
            ]
            continue
        latency = time.monotonic() - started
        log.info(
            "model %s answered in %.2fs (%d calls, %d tokens)",
            model,
            latency,
            spent.calls,
            spent.total_tokens,
        )
        return Answer(value=value, usage=spent, latency_s=latency, model=got.model)
    raise ModelError(
        "bad_answer",
        f"the answer was not the JSON asked for, twice: {problem}",
        usage=spent,
        latency_s=time.monotonic() - started,
    )


def check(client: OpenAI, model: str) -> str | None:
    """None when the endpoint is reachable, serves ``model`` and answers JSON; else the fix."""
    where = _where(client)
    from openai import NotFoundError, OpenAIError

    try:
        served = [m.id for m in client.models.list()]
    except NotFoundError:
        served = None  # Some servers have no model list; the call below still tells.
    except OpenAIError as error:
        return _fix(_model_error(error, client), model, where)
    if served is not None and not _served(model, served):
        shown = ", ".join(served[:10]) or "none"
        return (
            f"the model endpoint at {where} does not serve model {model!r} (it serves: {shown}); "
            "pull or load it there, or set PLAYBOOK_MODEL to one it serves"
        )
    probe = [
        {"role": "system", "content": "You answer with JSON only."},
        {"role": "user", "content": 'Answer with the JSON object {"ok": true}.'},
    ]
    try:
        got = _call(client, model, probe, {"type": "json_object"}, 64, 0.0)
    except ModelError as error:
        if error.reason == "not_found" and served is None:
            return (
                f"the model endpoint at {where} has no /models and no /chat/completions; "
                "check PLAYBOOK_MODEL_BASE_URL (it usually ends in /v1)"
            )
        return _fix(error, model, where)
    try:
        parsed = json.loads(_json_text(got.content))
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        return (
            f"model {model!r} at {where} answered, but not with a JSON object; "
            "set PLAYBOOK_MODEL to a model that follows JSON mode"
        )
    return None


def _fix(error: ModelError, model: str, where: str) -> str:
    """A doctor line for a failed check: what went wrong and the setting to change."""
    fixes = {
        "auth": "the endpoint refused the API key; check PLAYBOOK_MODEL_API_KEY",
        "not_found": f"the endpoint has no model {model!r}; pull it there or set PLAYBOOK_MODEL "
        "to one it serves",
        "timeout": "no answer within the timeout; check the model is loaded, or raise "
        "PLAYBOOK_MODEL_TIMEOUT_SECONDS",
        "unavailable": "check PLAYBOOK_MODEL_BASE_URL (it usually ends in /v1) and the server",
        "rate_limited": "the endpoint is rate limiting this key; try later, or check its limits",
        "bad_request": "the endpoint refused the request; check PLAYBOOK_MODEL_BASE_URL and "
        "PLAYBOOK_MODEL",
        "bad_answer": "the model's answer was unusable; set PLAYBOOK_MODEL to one that follows "
        "JSON mode",
    }
    return f"model endpoint at {where}: {error.detail} ({fixes[error.reason]})"


def _served(model: str, served: list[str]) -> bool:
    """Whether ``model`` is in the list; Ollama lists "llama3.2:latest" for "llama3.2"."""
    return model in served or f"{model}:latest" in served


def _where(client: OpenAI) -> str:
    """The endpoint's address for messages: no credentials in it, no query string."""
    url = client.base_url.copy_with(query=None, fragment=None)
    return redact(str(url).rstrip("/"))


def _with_instruction(
    messages: list[dict[str, str]], schema: type[pydantic.BaseModel]
) -> list[dict[str, str]]:
    """``messages`` with the schema sentence in the (first) system message, each masked.

    Every question to the model passes here: whatever a prompt builder quoted, no credential
    leaves in it, however it is written (`secrets.masked`, the rule of every other exit).
    """
    messages = [{**message, "content": secrets.masked(message["content"])} for message in messages]
    instruction = schema_instruction(schema)
    if messages and messages[0].get("role") == "system":
        first = {**messages[0], "content": f"{messages[0]['content']}\n\n{instruction}"}
        return [first, *messages[1:]]
    return [{"role": "system", "content": instruction}, *messages]


def _response_format(schema: type[pydantic.BaseModel], kind: str) -> dict[str, Any]:
    """JSON mode, or a (non-strict) JSON Schema for servers that only take that (LM Studio)."""
    if kind == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema()},
        }
    return {"type": "json_object"}


def _json_text(content: str | None) -> str:
    """The JSON in an answer: without a leading <think> block or a Markdown fence around it.

    Linear in the answer's length whatever its shape; ValueError for no content or one over
    MAX_ANSWER_CHARS (checked before anything reads it).
    """
    if content is None:
        raise ValueError("the answer had no content")
    if len(content) > MAX_ANSWER_CHARS:
        raise ValueError(
            f"the answer was {len(content):,} characters, over the {MAX_ANSWER_CHARS:,} "
            "an answer may have"
        )
    text = content.lstrip()
    if text.startswith(_THINK_OPEN):
        # Unclosed thoughts are left as they are: the JSON check then names the problem.
        end = text.find(_THINK_CLOSE, len(_THINK_OPEN))
        if end != -1:
            text = text[end + len(_THINK_CLOSE) :]
    return _unfenced(text.strip())


def _unfenced(text: str) -> str:
    """``text`` without a Markdown fence around all of it (```json ... ```), else as it is.

    ``text`` is stripped. The opening fence is three backticks, an optional ASCII language
    name, then blanks up to the end of that line; the closing one ends the text. What lies
    between, without the blanks before the closing fence, is the answer.
    """
    if len(text) < 2 * len(_FENCE) or not text.startswith(_FENCE) or not text.endswith(_FENCE):
        return text
    closing = len(text) - len(_FENCE)
    at = len(_FENCE)
    while at < closing and text[at].isascii() and text[at].isalpha():
        at += 1  # the language name
    blanks_end = at
    while blanks_end < closing and text[blanks_end].isspace():
        blanks_end += 1
    newline = text.rfind("\n", at, blanks_end)
    if newline == -1:
        return text  # "```json {...}```" on one line, or a name with other characters
    return text[newline + 1 : closing].rstrip()


def _problem(error: Exception, finish_reason: str | None) -> str:
    """What was wrong with an answer, in words safe to log: field names, never values."""
    cut = "it was cut off at the token limit; " if finish_reason == "length" else ""
    if isinstance(error, pydantic.ValidationError):
        for issue in error.errors(include_url=False, include_input=False):
            if issue["type"] == "json_invalid":
                return f"{cut}not valid JSON"
        fields = "; ".join(
            f"{'.'.join(str(p) for p in issue['loc']) or 'the object'}: {issue['msg']}"
            for issue in error.errors(include_url=False, include_input=False)[:5]
        )
        return f"{cut}not the shape asked for ({fields})"
    return f"{cut}{error}"


def _call(
    client: OpenAI,
    model: str,
    messages: list[dict[str, str]],
    response_format: dict[str, Any],
    max_tokens: int,
    temperature: float,
) -> _Attempt:
    """One chat-completions request; any failure becomes a :class:`ModelError`."""
    from openai import OpenAIError

    try:
        completion: Any = client.chat.completions.create(
            model=model,
            messages=messages,  # type: ignore[arg-type]
            response_format=response_format,  # type: ignore[arg-type]
            # max_tokens, not max_completion_tokens: every compatible server understands it.
            max_tokens=max_tokens,
            temperature=temperature,
        )
    except OpenAIError as error:
        raise _model_error(error, client) from None
    choices = getattr(completion, "choices", None)
    if not choices:
        # A proxy's HTML page or a wrong path answered 200: the client hands back text.
        raise ModelError(
            "unavailable",
            f"the endpoint at {_where(client)} did not answer with a chat completion",
        )
    usage = getattr(completion, "usage", None)
    asked = [str(message.get("content") or "") for message in messages]
    spent = charged(
        getattr(usage, "prompt_tokens", 0),
        getattr(usage, "completion_tokens", 0),
        # A JSON Schema sent as the response format is read as part of the prompt.
        most_prompt=most_prompt_tokens([*asked, json.dumps(response_format)]),
        max_tokens=max_tokens,
    )
    if spent.total_tokens < _tokens(usage):
        log.warning(
            "model %s reported %d tokens for one request, more than it could use; counted %d",
            model,
            _tokens(usage),
            spent.total_tokens,
        )
    choice = choices[0]
    return _Attempt(
        content=choice.message.content,
        usage=spent,
        model=completion.model or model,
        finish_reason=choice.finish_reason,
    )


def charged(
    prompt_tokens: object, completion_tokens: object, *, most_prompt: int, max_tokens: int
) -> Usage:
    """What one request counts against the budget: the usage the server reports, bounded by
    what the request could have used (``most_prompt`` from `most_prompt_tokens`).

    The server's numbers are outside input: a broken or hostile one reporting millions of
    tokens for one answer would spend the day's budget and stop every model job until the
    next day. No answer is longer than ``max_tokens``, and no prompt has more tokens than
    `most_prompt_tokens` says, so a request counts at most that, a refused answer too.
    """
    return Usage(
        1,
        min(_count(prompt_tokens), max(0, most_prompt)),
        min(_count(completion_tokens), max(0, max_tokens)),
    )


def most_prompt_tokens(texts: Iterable[str]) -> int:
    """The most tokens a prompt of ``texts`` (messages, or embedding inputs) can be counted as."""
    return sum(len(text.encode("utf-8", "surrogatepass")) + TOKENS_PER_MESSAGE for text in texts)


def _count(value: object) -> int:
    """A reported token count as a count: a non-negative int, anything else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _tokens(usage: Any) -> int:
    """The tokens a completion's usage object reports, as counts."""
    return _count(getattr(usage, "prompt_tokens", 0)) + _count(
        getattr(usage, "completion_tokens", 0)
    )


def _model_error(error: Exception, client: OpenAI) -> ModelError:
    """The typed error for an ``openai`` exception; the server's words only where harmless."""
    import openai

    timeout = client.timeout if isinstance(client.timeout, int | float) else None
    if isinstance(error, openai.APITimeoutError):
        after = f" after {timeout:g}s" if timeout is not None else ""
        return ModelError("timeout", f"no answer{after}")
    if isinstance(error, openai.APIConnectionError):
        return ModelError("unavailable", f"cannot connect to {_where(client)}")
    if isinstance(error, openai.RateLimitError):
        retry_after = retry_after_seconds(error.response.headers)
        said = f", retry after {retry_after:g}s" if retry_after is not None else ""
        return ModelError("rate_limited", f"HTTP 429{said}", retry_after=retry_after)
    if isinstance(error, openai.APIStatusError):
        status = error.status_code
        if status in (401, 403):
            # OpenAI's 401 quotes the key it was given: its message is never passed on.
            return ModelError("auth", f"HTTP {status}, the API key was refused")
        if status == 404:
            return ModelError("not_found", f"HTTP 404, {_server_says(error, client)}")
        if status >= 500:
            return ModelError("unavailable", f"HTTP {status}")
        return ModelError("bad_request", f"HTTP {status}, {_server_says(error, client)}")
    return ModelError("unavailable", type(error).__name__)


def _server_says(error: Any, client: OpenAI) -> str:
    """The server's own error message, short and scrubbed of the key and credentials."""
    body = error.body if isinstance(error.body, dict) else {}
    message = str(body.get("message") or "no message")
    if client.api_key and len(client.api_key) >= 4:
        message = message.replace(client.api_key, "***")
    return redact(message)[:MAX_DETAIL_CHARS]


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds a 429 asks to wait: ``retry-after-ms``, or ``Retry-After`` in seconds or a date."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
