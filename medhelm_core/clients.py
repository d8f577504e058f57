"""Model clients: HELM `Request` dict → HELM `RequestResult` dict.

`OpenAICompatibleClient` talks to any OpenAI-compatible endpoint through the `openai` SDK and maps
the request exactly as HELM's `OpenAIClient._make_chat_raw_request` does: the prompt becomes one
user message; reasoning models (engine `o<digit>…` or `gpt-5…`) get `max_completion_tokens` and
no temperature/top_p/penalties; the answer goes through the deployment's output processor and
HELM's `truncate_sequence`. Transient failures (429, 5xx, timeouts, connection errors) are retried
with back-off honouring `Retry-After`/`retry-after-ms`; content-policy blocks become HELM's
non-fatal empty completion.
"""
from __future__ import annotations

import random
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import openai

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


OUTPUT_PROCESSORS: dict[str, Callable[[str], str]] = {
    "helm.benchmark.metrics.output_processors.remove_deepseek_r1_thinking": remove_deepseek_r1_thinking,
}


def truncate_sequence(completion: dict, request: dict) -> dict:
    """HELM's `truncate_sequence`: cut at stop sequences and to max_tokens tokens.

    Quirk kept: for every stop sequence the completion is rebuilt without its finish_reason.
    """
    if request.get("echo_prompt"):
        return completion
    for stop in request.get("stop_sequences") or []:
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


class TransientError(Exception):
    """A failure worth retrying (rate limit, server error, timeout, connection)."""

    def __init__(self, message: str, retry_after_s: float | None = None):
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass
class RetryPolicy:
    max_attempts: int = 6
    base_delay_s: float = 0.5
    max_delay_s: float = 60.0

    def delay(self, attempt: int, retry_after_s: float | None) -> float:
        if retry_after_s is not None:
            return min(retry_after_s, self.max_delay_s)
        backoff = min(self.max_delay_s, self.base_delay_s * (2 ** (attempt - 1)))
        return backoff * (0.5 + random.random() / 2)  # jitter


def _retry_after_seconds(err: openai.APIStatusError) -> float | None:
    headers = getattr(err.response, "headers", None) or {}
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    secs = headers.get("retry-after")
    if secs:
        try:
            return float(secs)
        except ValueError:
            return None
    return None


class OpenAICompatibleClient:
    """One deployment's client. `api_key` is held only in memory and never logged."""

    def __init__(self, base_url: str | None, api_key: str, openai_model_name: str | None = None,
                 output_processor: str | None = None, timeout_s: float = 600.0,
                 retry: RetryPolicy | None = None, max_concurrency: int = 8):
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout_s)
        self.openai_model_name = openai_model_name
        self.output_processor = OUTPUT_PROCESSORS.get(output_processor) if output_processor else None
        if output_processor and self.output_processor is None:
            raise ValueError(f"unknown output_processor {output_processor!r}")
        self.retry = retry or RetryPolicy()
        self.slots = threading.BoundedSemaphore(max_concurrency)

    def raw_request(self, request: dict) -> dict[str, Any]:
        engine = request["model"].split("/", 1)[1] if "/" in request["model"] else request["model"]
        raw: dict[str, Any] = {
            "model": self.openai_model_name or engine,
            "messages": [{"role": "user", "content": request["prompt"]}],
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
        return raw

    def _call_once(self, raw: dict[str, Any]) -> dict[str, Any]:
        try:
            with self.slots:
                return self._client.chat.completions.create(**raw).model_dump(mode="json")
        except openai.RateLimitError as e:
            raise TransientError(f"rate limited (HTTP 429): {e.message}", _retry_after_seconds(e)) from None
        except openai.InternalServerError as e:
            raise TransientError(f"server error (HTTP {e.status_code}): {e.message}",
                                 _retry_after_seconds(e)) from None
        except openai.APITimeoutError:
            raise TransientError("request timed out") from None
        except openai.APIConnectionError as e:
            raise TransientError(f"connection error: {e.__cause__ or e}") from None

    def complete(self, request: dict, on_retry: Callable[[str], None] | None = None) -> dict:
        """Returns a RequestResult dict; raises `RequestFailed` when retries are exhausted or the
        error is fatal (HELM aborts the run then)."""
        raw = self.raw_request(request)
        attempt = 0
        while True:
            attempt += 1
            start = time.time()
            try:
                response = self._call_once(raw)
                break
            except TransientError as e:
                if attempt >= self.retry.max_attempts:
                    raise RequestFailed(f"{e} (after {attempt} attempts)", attempts=attempt) from None
                if on_retry:
                    on_retry(str(e))
                time.sleep(self.retry.delay(attempt, e.retry_after_s))
            except openai.APIStatusError as e:
                return self._error_result(str(e), e.message, attempt)
        elapsed = time.time() - start
        completions = []
        for choice in response["choices"]:
            if choice.get("finish_reason") == "content_filter":
                return _non_fatal("Content blocked by OpenAI filter", attempt)
            content = choice["message"].get("content") or ""
            if self.output_processor:
                content = self.output_processor(content)
            text = request["prompt"] + content if request.get("echo_prompt") else content
            completion: dict[str, Any] = {"text": text, "logprob": 0, "tokens": [],
                                          "finish_reason": {"reason": choice.get("finish_reason")}}
            reasoning = choice["message"].get("reasoning_content")
            if reasoning is not None:
                completion["thinking"] = {"text": reasoning}
            completions.append(truncate_sequence(completion, request))
        return {"success": True, "embedding": [], "completions": completions, "cached": False,
                "request_time": elapsed, "request_datetime": int(start), "_attempts": attempt}

    def _error_result(self, full: str, message: str, attempt: int) -> dict:
        if any(s in full for s in _SAFETY_EMPTY_COMPLETION):
            empty = {"text": "", "logprob": 0, "tokens": [],
                     "finish_reason": {"reason": CONTENT_POLICY_VIOLATED_FINISH_REASON}}
            return {"success": True, "embedding": [], "completions": [empty], "cached": False,
                    "request_time": 0, "_attempts": attempt}
        for needle, error in _NON_FATAL_ERRORS.items():
            if needle in full:
                return _non_fatal(error, attempt)
        raise RequestFailed(f"OpenAI error: {message}", attempts=attempt)


def _non_fatal(error: str, attempt: int) -> dict:
    """HELM's executor turns a non-fatal failure into one empty completion."""
    return {"success": False, "embedding": [], "completions": [{"text": "", "logprob": 0, "tokens": []}],
            "cached": False, "error": error, "error_flags": {"is_retriable": False, "is_fatal": False},
            "_attempts": attempt}


class RequestFailed(Exception):
    def __init__(self, message: str, attempts: int):
        super().__init__(message)
        self.attempts = attempts


# HELM client classes whose wire protocol is OpenAI's chat completions API.
OPENAI_COMPATIBLE_CLIENTS = {
    "helm.clients.openai_client.OpenAIClient",
    "helm.clients.openai_client.OpenAILegacyCompletionsClient",
    "helm.clients.vllm_client.VLLMChatClient",
    "helm.clients.together_client.TogetherChatClient",
    "helm.clients.stanfordhealthcare_openai_client.StanfordHealthCareOpenAIClient",
}


def client_for_deployment(deployment, credentials, max_concurrency: int = 8) -> OpenAICompatibleClient:
    """Build the client a HELM `model_deployments.yaml` entry describes (key from credentials/env)."""
    from medhelm_core.conf.deployments import resolve_api_key, resolve_base_url
    from medhelm_core.registry import MedhelmError

    cls = deployment.client_spec.class_name
    if cls not in OPENAI_COMPATIBLE_CLIENTS:
        raise MedhelmError(f"deployment {deployment.name!r}: client class {cls} is not supported "
                           f"(supported: OpenAI-compatible endpoints: {', '.join(sorted(OPENAI_COMPATIBLE_CLIENTS))})")
    args = deployment.client_spec.args
    key = resolve_api_key(deployment, credentials)
    return OpenAICompatibleClient(
        base_url=resolve_base_url(deployment, credentials),
        api_key=key.get_secret_value(),
        openai_model_name=args.get("openai_model_name"),
        output_processor=args.get("output_processor"),
        max_concurrency=max_concurrency,
    )
