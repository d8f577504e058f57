"""Model clients: HELM `Request` dict → HELM `RequestResult` dict.

`OpenAICompatibleClient` talks to any OpenAI-compatible endpoint through the `openai` SDK and maps
the request exactly as HELM's `OpenAIClient._make_chat_raw_request` does: the prompt becomes one
user message, or a request's `messages` (HELM's ChatAdapter) are sent as they are, after HELM's
checks (not both a prompt and messages; every message has a role and a content; the last one is
the user's: otherwise HELM raises and the run fails, here a `fatal` attempt); reasoning models
(engine `o<digit>…` or `gpt-5…`) get `max_completion_tokens` and no temperature/top_p/penalties;
the answer goes through the deployment's output processor and HELM's `truncate_sequence`.
`attempt()` sends a request once and classifies the outcome (`Attempt`:
ok / content_filter / rate_limited / server_error / timeout / connection / fatal / fatal_endpoint),
with the rate-limit headers and the token usage the API reported; the completion engine schedules
retries, limits and costs around it. Content-policy blocks become HELM's non-fatal empty
completion. `complete()` is the simple blocking loop (retry with back-off honouring
`Retry-After`/`retry-after-ms`) for direct callers. No error text carries the API key.
"""
from __future__ import annotations

import functools
import json
import re
import threading
import time
from pathlib import Path
from typing import Any, Callable

import httpx
import openai

from medhelm_core.clients.base import (Attempt, BlockingClient, RequestFailed, RetryPolicy, endpoint_origin,
                                       headers_of, kind_of_status, model_api, redact, truncate_sequence)
from medhelm_core.helm_config.deployments import resolve_api_key, resolve_base_url, resolve_org_id
from medhelm_core.ratelimit import (CONNECTION, CONTENT_FILTER, FATAL, OK, RATE_LIMITED, SERVER_ERROR, TIMEOUT,
                                    TRANSIENT, rate_limit_headers, retry_after_seconds)

# HELM's OpenAIClientUtils error texts whose requests end as a non-fatal result.
_SAFETY_EMPTY_COMPLETION = (
    "Your input image may contain content that is not allowed by our safety system",
    "Invalid prompt: your prompt was flagged",
)
_NON_FATAL_ERRORS = {
    "Invalid prompt: we've limited access to this content for safety reasons. This type of "
    "information may be used to benefit or to harm people.": "Prompt blocked by OpenAI's safety filter",
    "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.":
        "Content blocked by Azure's content management filter",
    "The response was filtered due to the prompt triggering Microsoft's content management policy.":
        "Content blocked by Azure's content management filter",
}
CONTENT_POLICY_VIOLATED_FINISH_REASON = (
    "The prompt violates OpenAI's content policy. See https://openai.com/policies/usage-policies "
    "for more information."
)


def is_reasoning_model(model_engine: str) -> bool:
    return bool(re.match(r"^o\d+", model_engine)) or bool(re.match(r"^gpt-5", model_engine))


def remove_deepseek_r1_thinking(text: str) -> str:
    """HELM's `output_processors.remove_deepseek_r1_thinking`."""
    if "<think>" not in text:
        return text
    if "</think>\n\n" in text:
        return text.split("</think>\n\n", 1)[1]
    if "</think>" in text:
        return text.split("</think>", 1)[1]
    return ""


def chat_messages(request: dict) -> list[dict[str, Any]]:
    """The `messages` HELM's OpenAIClient sends: the request's own (ChatAdapter), checked as HELM
    checks them, or the prompt as one user message."""
    messages = request.get("messages")
    if messages is None:
        return [{"role": "user", "content": request["prompt"]}]
    if request.get("prompt"):
        raise ValueError("More than one of `prompt`, `messages` and `multimodal_prompt` was set in request")
    for message in messages:
        if not message.get("role") or not message.get("content"):
            raise ValueError("All messages must have a role and content")
    if not messages or messages[-1]["role"] != "user":  # HELM: IndexError on [], ValueError otherwise
        raise ValueError("Last message must have role 'user'")
    return messages


OUTPUT_PROCESSORS: dict[str, Callable[[str], str]] = {
    "helm.benchmark.metrics.output_processors.remove_deepseek_r1_thinking": remove_deepseek_r1_thinking,
}


class OpenAICompatibleClient(BlockingClient):
    """One deployment's client. `api_key` is held only in memory and never logged."""

    # An edition's client (`apply_edition_switches`): more API errors that end as a non-fatal result,
    # and body fields its requests add (a subclass that sends them puts them where HELM's does).
    edition_non_fatal_errors: dict[str, str] = {}
    edition_request_fields: dict[str, Any] = {}

    def __init__(self, base_url: str | None, api_key: str, openai_model_name: str | None = None,
                 output_processor: str | None = None, timeout_s: float = 600.0,
                 retry: RetryPolicy | None = None, max_concurrency: int | None = None, http_client=None,
                 vision_language_models: frozenset[str] | None = None, sdk_client: openai.OpenAI | None = None,
                 organization: str | None = None):
        # `sdk_client`: an SDK client built by a subclass (Azure's URL and `api-key`, a gateway's headers).
        # `organization`: HELM's org_id, sent by the SDK as the OpenAI-Organization header.
        self._client = sdk_client or openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0,
                                                   timeout=timeout_s, http_client=http_client,
                                                   organization=organization)
        self._secret = api_key or ""
        self.openai_model_name = openai_model_name
        # HELM's `is_vlm(request.model)`: these models get no `"stop": null`.
        self.vision_language_models = vision_language_models or frozenset()
        self.output_processor = OUTPUT_PROCESSORS.get(output_processor) if output_processor else None
        if output_processor and self.output_processor is None:
            raise ValueError(f"unknown output_processor {output_processor!r}")
        self.retry = retry or RetryPolicy()
        # Concurrency is the engine's job (ratelimit.EndpointLimiter); `max_concurrency` only
        # bounds direct callers of complete().
        self.slots = threading.BoundedSemaphore(max_concurrency) if max_concurrency else None

    def __repr__(self) -> str:
        return f"OpenAICompatibleClient(base_url={str(self._client.base_url)!r}, model={self.openai_model_name!r})"

    def redact(self, text: str) -> str:
        return redact(text, self._secret)

    @property
    def endpoint(self) -> str:
        return endpoint_origin(str(self._client.base_url))

    def raw_request(self, request: dict) -> dict[str, Any]:
        """The body of HELM's `chat.completions.create(**raw_request)`; ValueError where HELM raises."""
        engine = request["model"].split("/", 1)[1] if "/" in request["model"] else request["model"]
        raw: dict[str, Any] = {
            "model": self.openai_model_name or engine,
            "messages": chat_messages(request),
            "temperature": request["temperature"],
            "top_p": request["top_p"],
            "n": request["num_completions"],
            "stop": request["stop_sequences"] or None,
            "max_tokens": request["max_tokens"],
            "presence_penalty": request["presence_penalty"],
            "frequency_penalty": request["frequency_penalty"],
        }
        if is_reasoning_model(engine):
            if raw["max_tokens"]:
                raw["max_completion_tokens"] = raw.pop("max_tokens")
            if raw["stop"] is None:
                raw.pop("stop")
            for key in ("temperature", "top_p", "frequency_penalty", "presence_penalty"):
                raw.pop(key, None)
        elif request["model"] in self.vision_language_models and raw["stop"] is None:
            raw.pop("stop")
        if engine.startswith(("gpt-4o-audio-preview", "gpt-4o-mini-audio-preview")):
            raw["modalities"] = ["text"]
            if raw.get("stop", "absent") is None:
                raw.pop("stop")
        return raw

    def attempt(self, request: dict, raw: dict[str, Any] | None = None) -> Attempt:
        """Send the request once and classify what came back. Never raises for HTTP outcomes."""
        if raw is None:
            try:
                raw = self.raw_request(request)
            except ValueError as e:  # HELM raises before sending: the run fails
                return Attempt(FATAL, message=f"invalid request: {e}")
        start = time.time()
        sent = self._exchange(raw)
        if isinstance(sent, Attempt):
            return sent
        response, body, headers = sent
        return self.answer_attempt(request, response.status_code, body, headers, start, time.time() - start)

    def answer_attempt(self, request: dict, status: int, body: Any, headers: dict[str, str],
                       start: float, elapsed: float) -> Attempt:
        """The Attempt of a successful HTTP answer: `body` its JSON (None when it was none), `start` when
        it was asked (epoch seconds), `elapsed` how long it took. `attempt()` and a batch's output lines
        (`medhelm_core.batch`) both read answers here."""
        if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
            return Attempt(SERVER_ERROR, message=f"malformed response (HTTP {status})",
                           status=status, headers=headers)
        usage = body.get("usage")
        for choice in body.get("choices") or []:
            if choice.get("finish_reason") == "content_filter":
                return Attempt(CONTENT_FILTER, result=_non_fatal("Content blocked by OpenAI filter", 1),
                               message="Content blocked by OpenAI filter", status=200, headers=headers, usage=usage)
        completions, untruncated = [], []
        for choice in body.get("choices") or []:
            message = choice.get("message") or {}
            content = message.get("content") or ""
            if self.output_processor:
                content = self.output_processor(content)
            text = request["prompt"] + content if request.get("echo_prompt") else content
            completion: dict[str, Any] = {"text": text, "logprob": 0, "tokens": [],
                                          "finish_reason": {"reason": choice.get("finish_reason")}}
            reasoning = message.get("reasoning_content")
            if reasoning is not None:
                completion["thinking"] = {"text": reasoning}
            completions.append(truncate_sequence(completion, request))
            untruncated.append(text)
        result = {"success": True, "embedding": [], "completions": completions, "cached": False,
                  "request_time": elapsed, "request_datetime": int(start)}
        # The texts as the API returned them, for a request whose texts HELM cuts at a stop sequence
        # (an edition that tokenizes completions redoes that cut itself: clients.base.tokenized_result).
        return Attempt(OK, result=result, status=200, headers=headers, usage=usage,
                       untruncated=untruncated if request.get("stop_sequences") else None)

    def _exchange(self, raw: dict[str, Any]):
        """POST the body once: (response, its JSON or None, its rate-limit headers), or the Attempt of an
        exchange that failed (an HTTP error status, a timeout, no connection)."""
        try:
            if self.slots is not None:
                with self.slots:
                    response = self._post(raw)
            else:
                response = self._post(raw)
        except openai.APIStatusError as e:
            return self._status_error(e)
        except openai.APITimeoutError:
            return Attempt(TIMEOUT, message="request timed out")
        except openai.APIConnectionError as e:
            return Attempt(CONNECTION, message=self.redact(f"connection error: {e.__cause__ or e}"))
        try:
            body = response.json()
        except ValueError:
            body = None
        return response, body, rate_limit_headers(response.headers)

    def _post(self, raw: dict[str, Any]):
        """POST /chat/completions through the SDK's client (auth, base URL, headers, timeouts and its
        error classes) with the body HELM's `chat.completions.create(**raw_request)` sends; the raw
        httpx response is read as JSON. (Going through the typed resource method costs ~2 ms more
        CPU per request for parameter transforms and pydantic models: a third of the client's cost.)"""
        return self._client.post("/chat/completions", body=raw, cast_to=httpx.Response)

    def wire_body(self, raw: dict[str, Any]) -> bytes:
        """The bytes `_post` sends for this body: the SDK's own request, built (never sent)."""
        from openai._compat import model_copy
        from openai._models import FinalRequestOptions

        options = FinalRequestOptions.construct(method="post", url="/chat/completions", json_data=raw)
        options = self._client._prepare_options(model_copy(options))
        request = self._client._build_request(options)
        return request.read() if hasattr(request, "read") else request.content

    def error_attempt(self, status: int, body: Any) -> Attempt:
        """The Attempt of an HTTP error answer (status >= 400, `body` its JSON or text) as `attempt()`
        makes it when the SDK raises on that answer: the SDK builds the error from the answer, as online."""
        content = body if isinstance(body, (bytes, str)) else json.dumps(body)
        response = httpx.Response(status, content=content, headers={"content-type": "application/json"},
                                  request=httpx.Request("POST", str(self._client.base_url)))
        return self._status_error(self._client._make_status_error_from_response(response))

    def _status_error(self, e: openai.APIStatusError) -> Attempt:
        headers = rate_limit_headers(headers_of(e))
        retry_after = retry_after_seconds(headers)
        status = e.status_code
        message = self.redact(e.message)
        kind = kind_of_status(status)
        if kind in TRANSIENT:
            said = "rate limited" if kind == RATE_LIMITED else "server error"
            return Attempt(kind, message=f"{said} (HTTP {status}): {message}", status=status,
                           retry_after_s=retry_after, headers=headers)
        non_fatal = self._error_result(str(e), 1)
        if non_fatal is not None:
            return Attempt(CONTENT_FILTER, result=non_fatal, message=non_fatal.get("error") or "content filtered",
                           status=status, headers=headers)
        return Attempt(kind, message=f"OpenAI error (HTTP {status}): {message}", status=status, headers=headers)

    def complete(self, request: dict, on_retry: Callable[[str], None] | None = None) -> dict:
        """Returns a RequestResult dict (with `_attempts`); raises `RequestFailed` when retries are
        exhausted or the error is fatal (HELM aborts the run then). The engine does not use this:
        it calls `attempt()` and schedules retries itself."""
        try:
            raw = self.raw_request(request)
        except ValueError as e:
            raise RequestFailed(f"invalid request: {e}", attempts=0) from None
        attempt = 0
        while True:
            attempt += 1
            got = self.attempt(request, raw)
            if got.result is not None:
                return {**got.result, "_attempts": attempt}
            if got.kind not in TRANSIENT:
                raise RequestFailed(got.message, attempts=attempt)
            if attempt >= self.retry.max_attempts:
                raise RequestFailed(f"{got.message} (after {attempt} attempts)", attempts=attempt)
            if on_retry:
                on_retry(got.message)
            time.sleep(self.retry.delay(attempt, got.retry_after_s))

    def _error_result(self, full: str, attempt: int) -> dict | None:
        if any(s in full for s in _SAFETY_EMPTY_COMPLETION):
            empty = {"text": "", "logprob": 0, "tokens": [],
                     "finish_reason": {"reason": CONTENT_POLICY_VIOLATED_FINISH_REASON}}
            return {"success": True, "embedding": [], "completions": [empty], "cached": False,
                    "request_time": 0}
        for needle, error in (*_NON_FATAL_ERRORS.items(), *self.edition_non_fatal_errors.items()):
            if needle in full:
                return _non_fatal(error, attempt)
        return None


def apply_edition_switches(client: OpenAICompatibleClient, switches=None) -> OpenAICompatibleClient:
    """`client` as an edition's client of its class (`editions.ClientSwitches`; None: the default
    edition's): its extra non-fatal API errors and request body fields. Factories of subclasses call it
    with their `edition_switches` argument."""
    if switches is not None:
        client.edition_non_fatal_errors = dict(switches.non_fatal_errors)
        client.edition_request_fields = dict(switches.request_fields)
    return client


def _non_fatal(error: str, attempt: int) -> dict:
    """HELM's executor turns a non-fatal failure into one empty completion."""
    return {"success": False, "embedding": [], "completions": [{"text": "", "logprob": 0, "tokens": []}],
            "cached": False, "error": error, "error_flags": {"is_retriable": False, "is_fatal": False}}


# HELM client classes whose wire protocol is OpenAI's chat completions API.
VLLM_CHAT_CLIENT = "helm.clients.vllm_client.VLLMChatClient"
OPENAI_COMPATIBLE_CLIENTS = {
    "helm.clients.openai_client.OpenAIClient",
    "helm.clients.openai_client.OpenAILegacyCompletionsClient",
    VLLM_CHAT_CLIENT,
}  # HELM's TogetherChatClient: clients/together.py (Together's SDK wire, not OpenAI's)


@functools.lru_cache(maxsize=16)
def _vision_language_models_of(local_path: str | None) -> frozenset[str]:
    from medhelm_core.helm_config.deployments import load_model_registry
    from medhelm_core.helm_config.expand import VISION_LANGUAGE_MODEL_TAG

    return frozenset(load_model_registry(local_path).model_names_with_tag(VISION_LANGUAGE_MODEL_TAG))


def vision_language_models(deployment) -> frozenset[str]:
    """The model names HELM's `is_vlm` is true for, in the registry the deployment was read into
    (built-in metadata, plus the `model_metadata.yaml` beside the deployment's own file)."""
    from medhelm_core.helm_config.deployments import BUILTIN_CONFIG_DIR

    source = Path(deployment.source).parent if deployment.source else None
    local = str(source) if source is not None and source != Path(BUILTIN_CONFIG_DIR) else None
    return _vision_language_models_of(local)


@model_api(*sorted(OPENAI_COMPATIBLE_CLIENTS))
def openai_compatible_client(deployment, credentials, max_concurrency: int | None = None,
                             timeout_s: float = 600.0, edition_switches=None) -> OpenAICompatibleClient:
    """The client of an OpenAI-compatible deployment (base URL and key from the deployment, credentials or env)."""
    args = deployment.client_spec.args
    if deployment.client_spec.class_name == VLLM_CHAT_CLIENT:
        # HELM's VLLMChatClient: api_key "EMPTY" (a vLLM server wants none), vllm_model_name as the model,
        # no organization.
        key, model_name, organization = "EMPTY", args.get("vllm_model_name"), None
    else:  # HELM's OpenAIClient (and its legacy-completions subclass) takes org_id: args, else `<org>OrgId`
        key, model_name = resolve_api_key(deployment, credentials).get_secret_value(), args.get("openai_model_name")
        organization = resolve_org_id(deployment, credentials)
    base_url = resolve_base_url(deployment, credentials)
    return apply_edition_switches(OpenAICompatibleClient(
        base_url=base_url,
        api_key=key,
        openai_model_name=model_name,
        output_processor=args.get("output_processor"),
        max_concurrency=max_concurrency,
        timeout_s=timeout_s,
        vision_language_models=vision_language_models(deployment),
        organization=organization,
    ), edition_switches)
