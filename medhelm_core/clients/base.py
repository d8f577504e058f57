"""What every model client shares: the classified `Attempt`, `RequestFailed`, the retry policy of
direct callers, HELM's `truncate_sequence` (and the completion tokenization some editions add), and
the plug-in point.

A client is built by a factory `(deployment, credentials, max_concurrency=None, timeout_s=600.0)`
(plus, if it declares them, `tokenizer_config=` and `batch_size=`) marked with `@model_api(<HELM client class_name>, ...)` in a module of `medhelm_core.clients` (or of
a package named by the `medhelm.clients` entry-point group); `medhelm_core.clients` discovers the
marked factories. A client offers `attempt(request) -> Attempt` (one try, classified; the engine
schedules retries, limits and costs around it) and `complete(request)` (the blocking loop).
"""
from __future__ import annotations

import importlib
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

from medhelm_core.ratelimit import FATAL, FATAL_ENDPOINT, RATE_LIMITED, SERVER_ERROR, TRANSIENT

MODEL_API_ATTRIBUTE = "__medhelm_model_api__"
IN_PROCESS_ATTRIBUTE = "__medhelm_in_process__"


def model_api(*client_classes: str, in_process: bool = False) -> Callable:
    """Mark a client factory as the one for these HELM `client_spec.class_name`s (no global
    registry: the catalog of `medhelm_core.clients` finds marked factories by looking).
    `in_process`: its model runs in this process, so no text leaves the machine (`--offline`)."""
    def mark(factory: Callable) -> Callable:
        setattr(factory, MODEL_API_ATTRIBUTE, tuple(client_classes))
        setattr(factory, IN_PROCESS_ATTRIBUTE, in_process)
        return factory

    return mark


@dataclass
class RetryPolicy:
    """Retries of `complete()` (the engine uses the deployment settings instead)."""

    max_attempts: int = 6
    base_delay_s: float = 0.5
    max_delay_s: float = 60.0

    def delay(self, attempt: int, retry_after_s: float | None) -> float:
        if retry_after_s is not None:
            return min(retry_after_s, self.max_delay_s) * (1.0 + random.random() * 0.1)
        backoff = min(self.max_delay_s, self.base_delay_s * (2 ** (attempt - 1)))
        return backoff * (0.5 + random.random() / 2)  # jitter


def truncate_sequence(completion: dict, request: dict, end_of_text_token: str | None = None) -> dict:
    """HELM's `truncate_sequence`: cut at stop sequences (and the client's end-of-text token) and to
    max_tokens tokens.

    Quirk kept: for every stop sequence the completion is rebuilt without its finish_reason.
    """
    if request.get("echo_prompt"):
        return completion
    stops = list(request.get("stop_sequences") or []) + ([end_of_text_token] if end_of_text_token else [])
    for stop in stops:
        text = completion["text"]
        idx = text.find(stop)
        new_text = text[:idx] if idx >= 0 else text
        new_tokens = []
        for token in completion.get("tokens", []):
            if token["text"].startswith(stop):
                break
            new_tokens.append(token)
        completion = {"text": new_text, "logprob": sum(t["logprob"] for t in new_tokens), "tokens": new_tokens}
    tokens = completion.get("tokens", [])
    if len(tokens) > request["max_tokens"]:
        kept = tokens[: request["max_tokens"]]
        completion = {"text": "".join(t["text"] for t in kept), "logprob": sum(t["logprob"] for t in kept),
                      "tokens": kept}
    return completion


def tokenized_result(result: dict, request: dict, tokenize: Callable[[str], list[str]],
                     untruncated: list | None = None) -> dict:
    """A chat result as HELM v0.5.13's OpenAIClient (medhelm 0.8.0) makes it: each completion's
    text, as the API returned it, tokenized with the deployment's tokenizer (logprob 0 per token),
    then `truncate_sequence` (so a completion longer than max_tokens tokens is cut).

    `result` is the stored answer (0.5.16's: no tokens, already cut at stop sequences);
    `untruncated` the texts as the API returned them (needed when the request has stop sequences:
    `stop_cut_unknown`)."""
    if not result.get("success") or not result.get("completions"):
        return result
    completions = []
    for i, c in enumerate(result["completions"]):
        original = untruncated[i] if untruncated and i < len(untruncated) and untruncated[i] is not None else None
        full: dict = {"text": original if original is not None else c["text"], "logprob": 0}
        full["tokens"] = [{"text": t, "logprob": 0} for t in tokenize(full["text"])]
        # What the stored completion kept besides its text is what the API returned (kept by HELM
        # only when no stop sequence was asked for; then nothing was cut before).
        for key in ("finish_reason", "thinking"):
            if key in c:
                full[key] = c[key]
        completions.append(truncate_sequence(full, request))
    return {**result, "completions": completions}


def stop_cut_unknown(request: dict, untruncated: list | None) -> bool:
    """A stored answer whose text before HELM's stop cut is not known (stored before it was kept):
    a tokenizing edition cannot redo the cut exactly."""
    return bool(request.get("stop_sequences")) and not request.get("echo_prompt") and untruncated is None


def headers_of(obj) -> dict[str, str]:
    headers = getattr(getattr(obj, "response", obj), "headers", None)
    if not headers:
        return {}
    return {k.lower(): v for k, v in headers.items()}


@dataclass
class Attempt:
    """One HTTP attempt, classified.

    kind: `ok`; `content_filter` (HELM's non-fatal result: `result` is the empty completion HELM
    scores, never retried); `rate_limited` (429), `server_error` (5xx, 408, 409), `timeout`,
    `connection` (transient: retried with back-off); `fatal` (this request is bad: 400, 422, ...);
    `fatal_endpoint` (no request to this deployment can succeed: 401, 403, 404).
    """

    kind: str
    result: dict | None = None
    message: str = ""
    status: int | None = None
    retry_after_s: float | None = None
    headers: dict[str, str] = field(default_factory=dict)  # rate-limit headers only
    usage: dict | None = None
    # The completion texts as the API returned them, when the request has stop sequences (so HELM's
    # truncate_sequence may have cut them); None otherwise. See tokenized_result.
    untruncated: list | None = None
    # In-process models: per completion, the model's own log-probability of each generated token
    # (HELM's result holds the post-temperature ones, 0.0 at temperature 0). None for API clients.
    model_logprobs: list | None = None

    @property
    def prompt_tokens(self) -> int | None:
        return (self.usage or {}).get("prompt_tokens")

    @property
    def completion_tokens(self) -> int | None:
        return (self.usage or {}).get("completion_tokens")


class RequestFailed(Exception):
    def __init__(self, message: str, attempts: int):
        super().__init__(message)
        self.attempts = attempts


_SECRET_LIKE = re.compile(r"(sk|pk|rk|key)-[A-Za-z0-9_\-\*\.]{4,}", re.IGNORECASE)
_BEARER = re.compile(r"(?i)bearer\s+\S+")


def redact(text: str, secret: str = "") -> str:
    """Error texts without the key (nor anything key-shaped, nor Authorization values)."""
    text = str(text)
    if len(secret) >= 4:
        text = text.replace(secret, "***")
    text = _BEARER.sub("Bearer ***", text)
    return _SECRET_LIKE.sub(lambda m: m.group(1) + "-***", text)


def kind_of_status(status: int | None) -> str:
    """The attempt kind of an HTTP error status, the same for every client: 429 rate limited; 5xx,
    408 and 409 a transient server error; 401, 403 and 404 the deployment itself (no request to it can
    succeed); any other (or none) this request."""
    if status == 429:
        return RATE_LIMITED
    if status is not None and (status >= 500 or status in (408, 409)):
        return SERVER_ERROR
    return FATAL_ENDPOINT if status in (401, 403, 404) else FATAL


def status_attempt(status: int | None, message: str, headers: dict[str, str],
                   retry_after_s: float | None = None) -> Attempt:
    """The Attempt of an HTTP error status (`kind_of_status`); the server's retry hint only where the
    engine retries."""
    kind = kind_of_status(status)
    return Attempt(kind, message=message, status=status, headers=headers,
                   retry_after_s=retry_after_s if kind in (RATE_LIMITED, SERVER_ERROR) else None)


def plain(value: Any) -> Any:
    """A deployment arg or credentials value as written (secret-looking ones are held as SecretStr)."""
    return value.get_secret_value() if hasattr(value, "get_secret_value") else value


def require_extra(module: str, extra: str, deployment_name: str, class_name: str) -> Any:
    """Import a vendor SDK a client needs; without it, one line naming the pip extra (raised when the
    client is built, i.e. by the run's checks, before any call)."""
    from medhelm_core.errors import MedhelmError

    try:
        return importlib.import_module(module)
    except ImportError:
        raise MedhelmError(f"deployment {deployment_name!r}: client class {class_name.rsplit('.', 1)[-1]} needs the "
                           f"[{extra}] extra (Python module {module!r} is not installed): "
                           f"pip install 'medhelm-build[{extra}]'") from None


def endpoint_origin(url: str) -> str:
    """scheme://host[:port] of a URL: where requests go, without path, user or key."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    return f"{parts.scheme}://{host if ':' not in host else f'[{host}]'}" + (f":{parts.port}" if parts.port else "")


class BlockingClient:
    """`complete()` for direct callers, over a client's `attempt()`: retry transient outcomes with
    back-off (honouring the server's retry hint), raise `RequestFailed` on a fatal one. The engine
    does not use it: it calls `attempt()` and schedules retries, limits and costs itself.

    A client subclass offers `attempt(request) -> Attempt`, `redact(text)` and `endpoint` (the
    scheme://host[:port] its requests go to: shown before private-tier text is sent, and checked by
    `--offline`)."""

    retry: RetryPolicy

    def attempt(self, request: dict) -> Attempt:  # pragma: no cover - interface
        raise NotImplementedError

    def complete(self, request: dict, on_retry: Callable[[str], None] | None = None) -> dict:
        retry = getattr(self, "retry", None) or RetryPolicy()
        attempt = 0
        while True:
            attempt += 1
            got = self.attempt(request)
            if got.result is not None:
                return {**got.result, "_attempts": attempt}
            if got.kind not in TRANSIENT:
                raise RequestFailed(got.message, attempts=attempt)
            if attempt >= retry.max_attempts:
                raise RequestFailed(f"{got.message} (after {attempt} attempts)", attempts=attempt)
            if on_retry:
                on_retry(got.message)
            time.sleep(retry.delay(attempt, got.retry_after_s))


def _encode_truncated(tokenizer, text: str, max_length: int) -> list:
    """HELM's `tokenize(encode=True, truncation=True, max_length=...)` for our tokenizers. HELM's
    SimpleTokenizer (`simple/tokenizer1`) is no CachingTokenizer and ignores truncation: all ids."""
    from medhelm_core.tokenizers import SimpleTokenizer

    ids = list(tokenizer.encode(text))
    if isinstance(tokenizer, SimpleTokenizer):
        return ids
    n = max(max_length, 0)
    if getattr(getattr(tokenizer, "hf", None), "truncation_side", "right") == "left":
        return ids[len(ids) - n:] if n else []
    return ids[:n]


def truncate_and_tokenize_response_text(text: str, request: dict, tokenizer, end_of_text_token: str | None = None,
                                        original_finish_reason: str = "endoftext") -> dict:
    """HELM's `truncate_and_tokenize_response_text` (the Bedrock clients): cut the text at the first
    occurrence of each stop sequence in turn, then the end-of-text string (finish_reason "stop"); tokenize
    with the deployment's tokenizer (logprob 0.0 per token); past `max_tokens` tokens, encode with
    truncation, decode, tokenize again (finish_reason "length").

    Quirk kept: with `simple/tokenizer1` truncation is ignored, so a longer text keeps all its
    characters (one token each) but still gets finish_reason "length"."""
    if request.get("echo_prompt"):
        raise ValueError("truncate_and_tokenize_response_text() does not support requests with echo_prompt = True")
    finish_reason = original_finish_reason
    stops = list(request.get("stop_sequences") or []) + ([end_of_text_token] if end_of_text_token else [])
    for stop in stops:
        idx = text.find(stop)
        if idx >= 0:
            text, finish_reason = text[:idx], "stop"
    tokens = tokenizer.tokenize(text)
    if len(tokens) > request["max_tokens"]:
        text = tokenizer.decode(_encode_truncated(tokenizer, text, request["max_tokens"]))
        tokens = tokenizer.tokenize(text)
        finish_reason = "length"
    return {"text": text, "logprob": 0.0, "tokens": [{"text": t, "logprob": 0.0} for t in tokens],
            "finish_reason": {"reason": finish_reason}}
