"""HELM's `AnthropicMessagesClient` (`helm/clients/anthropic_client.py`): the Messages API through the
official `anthropic` SDK (the `[anthropic]` extra), so the wire (path `/v1/messages`, headers `x-api-key`,
`anthropic-version`, the SDK's `x-stainless-*`, body serialization) is the one HELM's call produces.

What HELM 0.5.16 sends (`messages.create(**raw_request)`, or `messages.stream(...)` with the `stream` arg):
`messages` (the prompt as one user message, or the request's `messages` with a leading system message
moved to `system`), `model` (`anthropic_model_name` arg, else the request's model engine), `stop_sequences`
(sent even when empty), `max_tokens`, `temperature`, `top_p`, `top_k` (= `top_k_per_token`); the
`thinking_budget_tokens` arg adds `thinking: {type: enabled, budget_tokens}` and drops `top_k`; models
`claude-<x>-4-5…`/`claude-<x>-4-6…` drop `top_p`. `max_tokens > 64000` fails before sending (HELM: a
non-retriable error, the run fails: here `fatal`).

Reply: text = the text blocks joined, thinking = the thinking blocks joined (`thinking: {text}` only when
there are some), `logprob` 0.0, `tokens` [], no `finish_reason`, no stop-sequence cut on HELM's side.
An empty content (or a last block without text) is HELM's non-retriable, non-fatal failure "Anthropic
response has empty content"; a 400 "Output blocked by content filtering policy" is the non-fatal failure
with that message and the request's times (both: `content_filter`, one empty completion as HELM's
executor stores it).
medhelm 0.8.0's client keeps only the last text (and thinking) block: where a reply has more than one,
the last ones go to `Attempt.untruncated` (`{"text", "thinking"}` per completion) for that edition's view.

`num_completions` > 1: HELM sends that many identical requests one after another (its cache key adds
the completion index); here they are sent one after another inside one `attempt()`, and a transient
failure of any of them fails the attempt (the engine's retry resends all of them; HELM's sqlite cache
would have kept the ones that had succeeded).

Where requests go: the SDK's own `ANTHROPIC_BASE_URL` (HELM's class has no base-URL argument), else
https://api.anthropic.com. Our additions, which HELM's constructor never receives (so they change
nothing a HELM yaml means): a `base_url` client_spec arg or `<org>BaseUrl` in credentials.conf win
over `ANTHROPIC_BASE_URL`. Key: `api_key` arg, `<org>ApiKey` (`anthropicApiKey`), the deployments
table, `$MEDHELM_API_KEY_<ORG>`, then the SDK's `$ANTHROPIC_API_KEY` (which HELM's `Anthropic(api_key=None)`
reads too).

Timeout: `httpx.Timeout(timeout_s, connect=5.0)`, which at the default 600 s equals the SDK's own default,
so the SDK keeps refusing non-streamed requests it estimates to take over 10 minutes (`max_tokens` >
21,333, or above a model's non-streaming limit) exactly as under HELM (`fatal` here). No SDK retries.

Rate limits: Anthropic's `anthropic-ratelimit-{requests,tokens}-{remaining,reset}` (resets in RFC 3339)
are translated into the limiter's `x-ratelimit-{remaining,reset}-{requests,tokens}` (reset in seconds);
`retry-after` is kept. 429 -> rate_limited; 529 (overloaded) and other 5xx, 408, 409 -> server_error.
"""
from __future__ import annotations

import datetime as _dt
import json
import re
import threading
import time
from typing import Any, Mapping

import httpx

from medhelm_core.clients.base import (Attempt, BlockingClient, endpoint_origin, headers_of, kind_of_status,
                                       model_api, plain, redact, require_extra)
from medhelm_core.helm_config.deployments import resolve_api_key, resolve_base_url
from medhelm_core.errors import MedhelmError
from medhelm_core.ratelimit import (CONNECTION, CONTENT_FILTER, FATAL, OK, RATE_LIMITED, SERVER_ERROR, TIMEOUT,
                                    TRANSIENT, rate_limit_headers, retry_after_seconds)

CLASS_NAME = "helm.clients.anthropic_client.AnthropicMessagesClient"
MAX_OUTPUT_TOKENS = 64000  # AnthropicMessagesClient.MAX_OUTPUT_TOKENS
CONTENT_FILTERED = "Output blocked by content filtering policy"
EMPTY_CONTENT = "Anthropic response has empty content"
_NO_TOP_P = re.compile(r"^claude-[^-]+-4-[56]")  # Claude 4.5/4.6 refuse temperature and top_p together
ANTHROPIC_API_KEY_ENV = "ANTHROPIC_API_KEY"
# The constructor arguments of HELM's class (an unknown one makes HELM fail), plus our base_url.
_ARGS = {"anthropic_model_name", "thinking_budget_tokens", "stream", "api_key", "base_url"}


def _non_fatal(error: str, request_time: float | None = None, request_datetime: int | None = None) -> dict:
    """HELM's failed, non-retriable, non-fatal RequestResult as its executor stores it (one empty
    completion); the content-filter one carries the request's times, the empty-content one none."""
    result: dict[str, Any] = {"success": False, "embedding": [], "completions": [{"text": "", "logprob": 0,
                                                                                   "tokens": []}],
                              "cached": False}
    if request_time is not None:
        result["request_time"] = request_time
        result["request_datetime"] = request_datetime
    result["error"] = error
    result["error_flags"] = {"is_retriable": False, "is_fatal": False}
    return result


def _seconds_until(rfc3339: str, now: float | None = None) -> float | None:
    try:
        when = _dt.datetime.fromisoformat(rfc3339.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.timezone.utc)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def translate_rate_limit_headers(headers: Mapping[str, str] | None, now: float | None = None) -> dict[str, str]:
    """The rate-limit headers of an Anthropic response, plus Anthropic's own in the names the limiter
    reads: `anthropic-ratelimit-requests-remaining` -> `x-ratelimit-remaining-requests`, the RFC 3339
    `...-reset` -> `x-ratelimit-reset-requests` in seconds from now; the same for tokens (the combined
    `tokens-*` limit, else the input-tokens one)."""
    lowered = {k.lower(): v for k, v in (headers or {}).items()}
    out = rate_limit_headers(lowered)
    for ours, theirs in (("requests", ("requests",)), ("tokens", ("tokens", "input-tokens"))):
        for name in theirs:
            remaining = lowered.get(f"anthropic-ratelimit-{name}-remaining")
            reset = lowered.get(f"anthropic-ratelimit-{name}-reset")
            if remaining is None and reset is None:
                continue
            if remaining is not None:
                out[f"x-ratelimit-remaining-{ours}"] = str(remaining)
            seconds = _seconds_until(reset, now) if reset else None
            if seconds is not None:
                out[f"x-ratelimit-reset-{ours}"] = f"{seconds:.3f}"
            break
    return out


class _Malformed(Exception):
    pass


class _Built(Exception):
    """Raised by the transport of `wire_body`'s SDK client: the request it was handed, never sent."""

    def __init__(self, body: bytes):
        super().__init__("built, not sent")
        self.body = body


def _stop_before_sending(request: httpx.Request) -> httpx.Response:
    raise _Built(request.read())


class AnthropicMessagesClient(BlockingClient):
    """One deployment's client (thread-safe: one SDK client; the last response's headers are kept per
    thread). The key is held only inside the SDK client and never shown."""

    def __init__(self, sdk: Any, api_key: str, base_url: str | None = None, anthropic_model_name: str | None = None,
                 thinking_budget_tokens: int | None = None, stream: bool | None = None, timeout_s: float = 600.0,
                 http_client: httpx.Client | None = None):
        self._sdk = sdk
        # The response headers (rate limits) of this thread's last call, caught by an httpx hook: the
        # SDK's `with_raw_response` would add a header HELM's call does not send.
        self._last = threading.local()
        if http_client is None:
            http_client = sdk.DefaultHttpxClient()  # what the SDK builds itself, with our hook
        hooks = dict(http_client.event_hooks)
        hooks["response"] = [*hooks.get("response", []), self._keep_headers]
        http_client.event_hooks = hooks
        self._client = sdk.Anthropic(api_key=api_key, base_url=base_url, max_retries=0,
                                     timeout=httpx.Timeout(timeout_s, connect=5.0), http_client=http_client)
        self._secret = api_key or ""
        self._builder = None  # `wire_body`'s copy of the SDK client, made on first use
        self._builder_lock = threading.Lock()
        self.anthropic_model_name = anthropic_model_name
        self.thinking_budget_tokens = thinking_budget_tokens
        self.stream = bool(stream)

    def __repr__(self) -> str:
        return (f"AnthropicMessagesClient(base_url={str(self._client.base_url)!r}, "
                f"model={self.anthropic_model_name!r}, thinking_budget_tokens={self.thinking_budget_tokens!r}, "
                f"stream={self.stream!r})")

    def redact(self, text: str) -> str:
        return redact(text, self._secret)

    @property
    def endpoint(self) -> str:
        return endpoint_origin(str(self._client.base_url))

    def raw_request(self, request: dict) -> dict[str, Any]:
        """The keyword arguments of HELM's `messages.create(**raw_request)`; ValueError where HELM raises
        before sending."""
        if request["max_tokens"] > MAX_OUTPUT_TOKENS:
            raise ValueError(f"Request.max_tokens must be <= {MAX_OUTPUT_TOKENS}")
        system = None
        if request.get("messages") is not None:
            if request.get("messages") and (request.get("prompt") or request.get("multimodal_prompt")):
                raise ValueError("Exactly one of the messages, prompt, multimodal_prompt fields should be set")
            messages = list(request["messages"])
            if messages[0]["role"] == "system":
                system, messages = messages[0], messages[1:]
        elif request.get("multimodal_prompt") is not None:
            raise ValueError("multimodal prompts are not supported by this client")
        else:
            messages = [{"role": "user", "content": request["prompt"]}]
        model = request["model"]
        raw: dict[str, Any] = {
            "messages": messages,
            "model": self.anthropic_model_name or (model.split("/", 1)[1] if "/" in model else model),
            "stop_sequences": request["stop_sequences"],
            "max_tokens": request["max_tokens"],
            "temperature": request["temperature"],
            "top_p": request["top_p"],
            "top_k": request["top_k_per_token"],
        }
        if system is not None:
            raw["system"] = system["content"]
        if self.thinking_budget_tokens:
            raw["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget_tokens}
            del raw["top_k"]  # the API refuses top_k with thinking
        if _NO_TOP_P.match(raw["model"]):
            del raw["top_p"]
        return raw

    def wire_body(self, raw: dict[str, Any]) -> bytes:
        """The bytes `_send` posts for `raw`: the same SDK call (`messages.create`, or `messages.stream`
        for a streaming deployment), made by a copy of the SDK client whose transport stops it in this
        process, so the SDK's own transform and serializer build it and nothing is sent. ValueError where
        the SDK refuses before sending, as it does online (e.g. a long non-streamed request). The
        vendors' batch API (`medhelm_core.batch.anthropic`) sends these bytes as a request's `params`."""
        with self._builder_lock:
            if self._builder is None:
                self._builder = self._client.with_options(
                    http_client=httpx.Client(transport=httpx.MockTransport(_stop_before_sending)))
            builder = self._builder
        try:
            if self.stream:
                with builder.messages.stream(**raw) as stream:
                    stream.get_final_message()
            else:
                builder.messages.create(**raw)
        except self._sdk.APIConnectionError as e:
            if isinstance(e.__cause__, _Built):
                return e.__cause__.body
            raise
        raise MedhelmError("the Anthropic SDK answered without sending a request")  # pragma: no cover

    def _keep_headers(self, response: httpx.Response) -> None:
        self._last.headers = response.headers

    def _send(self, raw: dict[str, Any]) -> tuple[dict, dict[str, str]]:
        """One SDK call as HELM makes it: (the Message as `model_dump()`, the response headers)."""
        self._last.headers = {}
        if self.stream:
            with self._client.messages.stream(**raw) as stream:
                message = stream.get_final_message()
        else:
            message = self._client.messages.create(**raw)
        headers = self._last.headers or {}
        if not hasattr(message, "model_dump"):  # not JSON (HELM's model_dump() raises: retried, then fails)
            raise _Malformed(f"malformed response: {str(message)[:200]!r}")
        return message.model_dump(), {k.lower(): v for k, v in headers.items()}

    def attempt(self, request: dict) -> Attempt:
        """Send the request (num_completions times) and classify. Never raises for API outcomes."""
        try:
            raw = self.raw_request(request)
        except (ValueError, KeyError, IndexError, TypeError) as e:  # HELM raises before sending: the run fails
            return Attempt(FATAL, message=f"invalid request: {e}")
        sdk = self._sdk
        completions, headers, kept = [], {}, []
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        start = elapsed = 0.0
        for _ in range(request.get("num_completions") or 1):
            start = time.time()
            try:
                message, response_headers = self._send(raw)
            except sdk.APIStatusError as e:
                return self._status_error(e, start)
            except sdk.APITimeoutError:
                return Attempt(TIMEOUT, message="request timed out")
            except sdk.APIConnectionError as e:
                return Attempt(CONNECTION, message=self.redact(f"connection error: {e.__cause__ or e}"))
            except ValueError as e:  # the SDK refuses before sending (e.g. a non-streamed long request)
                return Attempt(FATAL, message=self.redact(f"invalid request: {e}"))
            except (sdk.APIResponseValidationError, _Malformed) as e:
                return Attempt(SERVER_ERROR, message=self.redact(str(e)))
            except httpx.TransportError as e:  # e.g. a stream cut off mid-way
                return Attempt(CONNECTION, message=self.redact(f"connection error: {type(e).__name__}: {e}"))
            except sdk.APIError as e:
                return Attempt(SERVER_ERROR, message=self.redact(f"Anthropic error: {e}"))
            elapsed = time.time() - start
            headers = translate_rate_limit_headers(response_headers)
            failed = self._read_message(message, headers, usage, completions, kept)
            if failed is not None:
                return failed
        return self._answered(completions, kept, usage, headers, start, elapsed)

    def _read_message(self, message: dict, headers: dict[str, str], usage: dict[str, int], completions: list,
                      kept: list) -> Attempt | None:
        """One reply (a Message's `model_dump()`): its usage added to `usage` and its completion to
        `completions` (the last blocks to `kept`); or the Attempt the request ends with (HELM's
        failures of a reply)."""
        reported = message.get("usage") or {}
        usage["prompt_tokens"] += reported.get("input_tokens") or 0
        usage["completion_tokens"] += reported.get("output_tokens") or 0
        content = message.get("content") or []
        if not content or "text" not in content[-1]:
            return Attempt(CONTENT_FILTER, result=_non_fatal(EMPTY_CONTENT), message=EMPTY_CONTENT, status=200,
                           headers=headers, usage=usage)
        texts = [b["text"] for b in content if b.get("type") == "text"]
        thinking = [b["thinking"] for b in content if b.get("type") == "thinking"]
        if not texts:  # HELM raises a plain exception (retried, then the run fails)
            return Attempt(SERVER_ERROR, message="Anthropic response did not contain text blocks", status=200,
                           headers=headers, usage=usage)
        completion: dict[str, Any] = {"text": "".join(texts), "logprob": 0.0, "tokens": []}
        if thinking:
            completion["thinking"] = {"text": "".join(thinking)}
        completions.append(completion)
        # The last blocks, where they are not the whole: what medhelm 0.8.0's client keeps
        # (clients.edition_views), stored beside the answer.
        kept.append({**({"text": texts[-1]} if len(texts) > 1 else {}),
                     **({"thinking": thinking[-1]} if len(thinking) > 1 else {})} or None)
        return None

    @staticmethod
    def _answered(completions: list, kept: list, usage: dict[str, int], headers: dict[str, str], start: float,
                  elapsed: float) -> Attempt:
        result = {"success": True, "embedding": [], "completions": completions, "cached": False,
                  "request_time": elapsed, "request_datetime": int(start)}
        return Attempt(OK, result=result, status=200, headers=headers, usage=usage,
                       untruncated=kept if any(kept) else None)

    def answer_attempt(self, request: dict, messages: list[dict], start: float, elapsed: float) -> Attempt:
        """The Attempt `attempt()` makes of these replies (each a Message's `model_dump()`, one per
        completion, in order) to `request`, asked at `start` (epoch seconds) and answered `elapsed`
        seconds later, with no response headers: how a batch's succeeded results are read."""
        completions: list = []
        kept: list = []
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        for message in messages:
            failed = self._read_message(message, {}, usage, completions, kept)
            if failed is not None:
                return failed
        return self._answered(completions, kept, usage, {}, start, elapsed)

    def error_attempt(self, status: int, body: Any, start: float, elapsed: float) -> Attempt:
        """The Attempt `attempt()` makes when the API answers HTTP `status` with `body` (its JSON or
        text): the SDK builds its error from that answer, as online. A content-filter refusal keeps the
        request's times (`start`, `elapsed`)."""
        content = body if isinstance(body, (bytes, str)) else json.dumps(body)
        url = str(self._client.base_url).rstrip("/") + "/v1/messages"
        response = httpx.Response(status, content=content, headers={"content-type": "application/json"},
                                  request=httpx.Request("POST", url))
        return self._status_error(self._client._make_status_error_from_response(response), start,
                                  now=start + elapsed)

    def _status_error(self, e: Any, start: float, now: float | None = None) -> Attempt:
        headers = translate_rate_limit_headers(headers_of(e))
        retry_after = retry_after_seconds(headers)
        status = e.status_code
        message = self.redact(e.message)
        if status < 400:  # an `error` event inside a 200 stream: its type says what it is
            body = e.body if isinstance(e.body, dict) else {}
            error = body.get("error") if isinstance(body.get("error"), dict) else body
            kind = RATE_LIMITED if error.get("type") == "rate_limit_error" else SERVER_ERROR
            return Attempt(kind, message=f"Anthropic stream error ({error.get('type')}): {message}", status=status,
                           retry_after_s=retry_after, headers=headers)
        kind = kind_of_status(status)
        if kind in TRANSIENT:
            said = "rate limited" if kind == RATE_LIMITED else "server error"
            return Attempt(kind, message=f"{said} (HTTP {status}): {message}", status=status,
                           retry_after_s=retry_after, headers=headers)
        if status == 400:
            body = e.body if isinstance(e.body, dict) else {}
            error = body.get("error") if isinstance(body.get("error"), dict) else {}
            if error.get("message") == CONTENT_FILTERED:
                # HELM keeps this reply (cached) as a failed result with the request's times.
                result = _non_fatal(CONTENT_FILTERED, (time.time() if now is None else now) - start, int(start))
                return Attempt(CONTENT_FILTER, result=result,
                               message=CONTENT_FILTERED, status=status, headers=headers)
        return Attempt(kind, message=f"Anthropic error (HTTP {status}): {message}", status=status, headers=headers)


@model_api(CLASS_NAME)
def anthropic_messages_client(deployment, credentials, max_concurrency: int | None = None,
                              timeout_s: float = 600.0) -> AnthropicMessagesClient:
    """The client of an AnthropicMessagesClient deployment (SDK from the [anthropic] extra)."""
    sdk = require_extra("anthropic", "anthropic", deployment.name, CLASS_NAME)
    args = deployment.client_spec.args
    unknown = sorted(set(args) - _ARGS)
    if unknown:
        raise MedhelmError(f"deployment {deployment.name!r}: AnthropicMessagesClient has no argument "
                           f"{unknown[0]!r} (it takes {', '.join(sorted(_ARGS))})")
    budget = plain(args.get("thinking_budget_tokens"))
    return AnthropicMessagesClient(
        sdk,
        api_key=resolve_api_key(deployment, credentials).get_secret_value(),
        base_url=resolve_base_url(deployment, credentials),  # None: the SDK reads $ANTHROPIC_BASE_URL
        anthropic_model_name=plain(args.get("anthropic_model_name")),
        thinking_budget_tokens=int(budget) if budget is not None else None,
        stream=plain(args.get("stream")),
        timeout_s=timeout_s,
    )
