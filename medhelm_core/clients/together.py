"""HELM's legacy `TogetherClient` (`helm/clients/together_client.py`, class TogetherClient): Together's
old inference API over plain HTTP (HELM uses `requests`; here httpx), no vendor SDK.

Wire (HELM 0.5.16, synchronous mode: `TOGETHER_SUPPORTS_ASYNC_REQUESTS = False`):
`POST https://api.together.xyz/api/inference`, header `Authorization: Bearer <togetherApiKey>`, JSON body
(serialized as `requests`' `json=` does: `json.dumps`, default separators, ASCII)

    {"request_type": "language-model-inference", "model": <together_model arg, else the request's full
     model name>, "prompt", "temperature", "n": num_completions, "max_tokens", "best_of": top_k_per_token,
     "stop": stop_sequences or null, "echo": echo_prompt, "top_p"}

rewritten per model engine (`_MODEL_TO_TAGS`): alpaca-7b, vicuna-7b-v1.3 and vicuna-13b-v1.3 get their
EOS token "</s>" appended to `stop` (a list even when the request had none); llama-65b and llama-2-70b
get `"details": true`.

Reply: `{"output": {"choices": [{"text", "logprobs"?: {"tokens", "token_logprobs"}, "finish_reason"?}],
"raw_compute_time"?, "usage"?}}` (no `output`, or an `output.error`: a failed request, which HELM retries
and then fails the run: here `server_error`). Each choice: text and token texts with "▁" -> " "
(`cleanup_str(..., "together")`); tokens from `logprobs` (a missing logprob counts 0), else the whole
text as one token of logprob 0; `finish_reason: {reason}` only when the API gave one; then HELM's
`truncate_sequence` (stop sequences of the request, not the EOS added on the wire; `max_tokens` tokens).
The result's `request_time` is the reply's `raw_compute_time` when present, else the call's duration;
HELM sets no `request_datetime` for this client.

Key: `api_key` arg, `<org>ApiKey` (`togetherApiKey`), the deployments table, `$MEDHELM_API_KEY_<ORG>`,
then `$TOGETHER_API_KEY` (the variable Together's own tools read). Without one HELM fails every
request ("togetherApiKey not set in credentials.conf"); here building the client fails, naming them.

Where requests go: HELM's class hard-codes api.together.xyz and has no base-URL argument. Ours, which
HELM's constructor never receives: a `base_url` client_spec arg or `<org>BaseUrl` in credentials.conf
(e.g. `togetherBaseUrl`, as for TogetherChatClient: `https://host[/v1]`) moves the endpoint to
`<base without /v1>/api/inference`.

Rate limits: Together's `x-ratelimit-remaining`/`x-ratelimit-reset` (requests) and
`x-tokenlimit-remaining` (tokens) are given the limiter's names; `retry-after` is kept.
"""
from __future__ import annotations

import copy
import json
import os
import time
from typing import Any, Mapping

import httpx
from pydantic import SecretStr

from medhelm_core.clients.base import Attempt, BlockingClient, endpoint_origin, model_api, redact, truncate_sequence
from medhelm_core.conf.deployments import resolve_api_key, resolve_base_url
from medhelm_core.errors import MedhelmError
from medhelm_core.ratelimit import (CONNECTION, FATAL, FATAL_ENDPOINT, OK, RATE_LIMITED, SERVER_ERROR, TIMEOUT,
                                    rate_limit_headers, retry_after_seconds)

CLASS_NAME = "helm.clients.together_client.TogetherClient"
INFERENCE_URL = "https://api.together.xyz/api/inference"
TOGETHER_API_KEY_ENV = "TOGETHER_API_KEY"
_ARGS = {"together_model", "api_key", "base_url"}

# HELM's _MODEL_TO_TAGS / _MODEL_TO_EOS_TOKEN, keyed by the request's model engine.
_EOS_STOP = {"alpaca-7b": "</s>", "vicuna-7b-v1.3": "</s>", "vicuna-13b-v1.3": "</s>"}
_DETAILS = {"llama-65b", "llama-2-70b"}


def _cleanup(text: str) -> str:
    return text.replace("▁", " ")


def inference_url(base_url: str | None) -> str:
    if not base_url:
        return INFERENCE_URL
    base = base_url.rstrip("/")
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    return base + "/api/inference"


def translate_rate_limit_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    lowered = {k.lower(): v for k, v in (headers or {}).items()}
    out = rate_limit_headers(lowered)
    for theirs, ours in (("x-ratelimit-remaining", "x-ratelimit-remaining-requests"),
                         ("x-ratelimit-reset", "x-ratelimit-reset-requests"),
                         ("x-tokenlimit-remaining", "x-ratelimit-remaining-tokens")):
        if theirs in lowered and ours not in out:
            out[ours] = lowered[theirs]
    return out


class TogetherClient(BlockingClient):
    """One deployment's client (thread-safe: one httpx client, no mutable state)."""

    def __init__(self, api_key: str, together_model: str | None = None, url: str = INFERENCE_URL,
                 timeout_s: float = 600.0, http_client: httpx.Client | None = None):
        self._secret = api_key or ""
        self._auth = {"Authorization": f"Bearer {api_key}"}
        self.together_model = together_model
        self.url = url
        # HELM's requests.post has no timeout; ours is the deployment's.
        self._http = http_client or httpx.Client(timeout=timeout_s, follow_redirects=True)

    def __repr__(self) -> str:
        return f"TogetherClient(url={self.url!r}, together_model={self.together_model!r})"

    def redact(self, text: str) -> str:
        return redact(text, self._secret)

    @property
    def endpoint(self) -> str:
        return endpoint_origin(self.url)

    def raw_request(self, request: dict) -> dict[str, Any]:
        """HELM's `convert_to_raw_request` (with its per-model rewrites)."""
        raw: dict[str, Any] = {
            "request_type": "language-model-inference",
            "model": self.together_model or request["model"],
            "prompt": request["prompt"],
            "temperature": request["temperature"],
            "n": request["num_completions"],
            "max_tokens": request["max_tokens"],
            "best_of": request["top_k_per_token"],
            "stop": request["stop_sequences"] or None,
            "echo": request["echo_prompt"],
            "top_p": request["top_p"],
        }
        raw = copy.deepcopy(raw)
        engine = request["model"].split("/", 1)[1] if "/" in request["model"] else request["model"]
        if engine in _EOS_STOP:
            raw["stop"] = [*raw["stop"], _EOS_STOP[engine]] if isinstance(raw["stop"], list) else [_EOS_STOP[engine]]
        if engine in _DETAILS:
            raw["details"] = True
        return raw

    def attempt(self, request: dict) -> Attempt:
        """Send the request once and classify. Never raises for HTTP outcomes."""
        try:
            body = json.dumps(self.raw_request(request), allow_nan=False).encode("utf-8")
        except (KeyError, TypeError, ValueError) as e:
            return Attempt(FATAL, message=f"invalid request: {e}")
        start = time.time()
        try:
            response = self._http.post(self.url, content=body,
                                       headers={**self._auth, "Content-Type": "application/json"})
        except httpx.TimeoutException:
            return Attempt(TIMEOUT, message="request timed out")
        except httpx.HTTPError as e:
            return Attempt(CONNECTION, message=self.redact(f"connection error: {e}"))
        elapsed = time.time() - start
        headers = translate_rate_limit_headers(response.headers)
        status = response.status_code
        if status >= 400:
            return self._status_error(response, headers)
        try:
            reply = response.json()
        except ValueError:
            reply = None
        if not isinstance(reply, dict) or "output" not in reply:
            return Attempt(SERVER_ERROR, message=self.redact(f"Could not get output from Together response "
                                                             f"(HTTP {status}): {response.text[:500]}"),
                           status=status, headers=headers)
        output = reply["output"]
        if isinstance(output, dict) and "error" in output:
            return Attempt(SERVER_ERROR, message=self.redact(f"Together request failed with error: "
                                                             f"{output['error']}"), status=status, headers=headers)
        try:
            completions = [self._completion(choice, request) for choice in output["choices"]]
        except (KeyError, TypeError, AttributeError) as e:  # HELM's parser raises: retried, then the run fails
            return Attempt(SERVER_ERROR, message=f"malformed Together response: {e!r}", status=status,
                           headers=headers)
        usage = output.get("usage") if isinstance(output.get("usage"), dict) else None
        result = {"success": True, "embedding": [], "completions": completions, "cached": False,
                  "request_time": output["raw_compute_time"] if "raw_compute_time" in output else elapsed}
        untruncated = [_cleanup(c["text"]) for c in output["choices"]] if request.get("stop_sequences") else None
        return Attempt(OK, result=result, status=status, headers=headers,
                       usage={"prompt_tokens": usage.get("prompt_tokens"),
                              "completion_tokens": usage.get("completion_tokens")} if usage else None,
                       untruncated=untruncated)

    @staticmethod
    def _completion(choice: dict, request: dict) -> dict:
        tokens, logprob = [], 0
        if "logprobs" in choice:
            data = choice["logprobs"]
            for text, lp in zip(data["tokens"], data["token_logprobs"]):
                tokens.append({"text": _cleanup(text), "logprob": lp or 0})
                logprob += lp or 0
        else:  # HELM: the whole text as one token, so that something shows in the frontend
            tokens.append({"text": _cleanup(choice["text"]), "logprob": 0})
        completion: dict[str, Any] = {"text": _cleanup(choice["text"]), "logprob": logprob, "tokens": tokens}
        if choice.get("finish_reason"):
            completion["finish_reason"] = {"reason": choice["finish_reason"]}
        return truncate_sequence(completion, request)

    def _status_error(self, response: httpx.Response, headers: dict[str, str]) -> Attempt:
        status = response.status_code
        message = self.redact(f"Together request failed with {status}: {response.text[:500]}")
        if status == 429:
            return Attempt(RATE_LIMITED, message=message, status=status,
                           retry_after_s=retry_after_seconds(headers), headers=headers)
        if status >= 500 or status in (408, 409):
            return Attempt(SERVER_ERROR, message=message, status=status,
                           retry_after_s=retry_after_seconds(headers), headers=headers)
        kind = FATAL_ENDPOINT if status in (401, 403, 404) else FATAL
        return Attempt(kind, message=message, status=status, headers=headers)


def _plain(value: Any) -> Any:
    return value.get_secret_value() if isinstance(value, SecretStr) else value


def _api_key(deployment, credentials, env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    try:
        return resolve_api_key(deployment, credentials, env).get_secret_value()
    except MedhelmError as e:
        if env.get(TOGETHER_API_KEY_ENV):
            return env[TOGETHER_API_KEY_ENV]
        raise MedhelmError(f"{e}, ${TOGETHER_API_KEY_ENV}") from None


@model_api(CLASS_NAME)
def together_client(deployment, credentials, max_concurrency: int | None = None,
                    timeout_s: float = 600.0) -> TogetherClient:
    """The client of a (legacy, non-chat) TogetherClient deployment."""
    args = deployment.client_spec.args
    unknown = sorted(set(args) - _ARGS)
    if unknown:
        raise MedhelmError(f"deployment {deployment.name!r}: TogetherClient has no argument {unknown[0]!r} "
                           f"(it takes {', '.join(sorted(_ARGS))})")
    return TogetherClient(
        api_key=_api_key(deployment, credentials),
        together_model=_plain(args.get("together_model")),
        url=inference_url(resolve_base_url(deployment, credentials)),
        timeout_s=timeout_s,
    )
