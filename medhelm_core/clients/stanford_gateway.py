"""The Stanford Health Care gateway's clients that are not Azure OpenAI (see azure_openai.py for those).

* `StanfordHealthCareOpenAIClient`: OpenAI chat completions at `base_url.format(endpoint=<org>Endpoint)`
  (e.g. `{endpoint}/llama3370b/v1`), sent as HELM's `OpenAI(api_key="dummy", default_headers=
  {"Ocp-Apim-Subscription-Key": key})` sends them: `Authorization: Bearer dummy` plus the key header.
  Body and reply as `OpenAICompatibleClient` (deepseek-r1's `output_processor` included).
* `StanfordHealthCareClaudeClient` / `StanfordHealthCareGoogleClient` (HELM's
  `StanfordHealthCareHTTPModelClient`): a plain JSON POST to `{endpoint}/{deployment}` with the key
  header. Claude: `{"model_id", "prompt_text", "max_tokens", "temperature"}` (no stop sequences, top_p or
  n: HELM sends none and cuts nothing), one completion per item of the reply's `content`. Google:
  `{"contents": {...}, "generation_config": {...}}` (objects, not lists), the reply a list of
  streamGenerateContent chunks whose texts are concatenated. Neither has a finish reason; the result
  has no `request_datetime` (HELM's RequestResult gets only `request_time` here).
"""
from __future__ import annotations

import json
import time
from typing import Any

import httpx
import openai

from medhelm_core.clients.azure_openai import (GATEWAY_KEY_HEADER, _gateway_endpoint, _short, credentials_file,
                                               format_gateway_url, gateway_key)
from medhelm_core.clients.base import (Attempt, BlockingClient, RetryPolicy, endpoint_origin, model_api, redact,
                                       status_attempt)
from medhelm_core.clients.openai_compatible import (OpenAICompatibleClient, apply_edition_switches,
                                                    vision_language_models)
from medhelm_core.helm_config.deployments import resolve_base_url
from medhelm_core.errors import MedhelmError
from medhelm_core.ratelimit import (CONNECTION, FATAL, OK, SERVER_ERROR, TIMEOUT, rate_limit_headers,
                                    retry_after_seconds)

GATEWAY_OPENAI_CLIENT = "helm.clients.stanfordhealthcare_openai_client.StanfordHealthCareOpenAIClient"
GATEWAY_CLAUDE_CLIENT = "helm.clients.stanfordhealthcare_claude_client.StanfordHealthCareClaudeClient"
GATEWAY_GOOGLE_CLIENT = "helm.clients.stanfordhealthcare_google_client.StanfordHealthCareGoogleClient"

# The classes whose endpoint is `<org>Endpoint` (not a base URL): preflight checks it is set and a URL.
ENDPOINT_CLIENT_CLASSES = frozenset({GATEWAY_CLAUDE_CLIENT, GATEWAY_GOOGLE_CLIENT})


class GatewayOpenAIClient(OpenAICompatibleClient):
    """OpenAI chat at a gateway path: bearer `dummy`, the real key in `Ocp-Apim-Subscription-Key`."""

    def __init__(self, base_url: str, api_key: str, openai_model_name: str | None = None,
                 output_processor: str | None = None, timeout_s: float = 600.0, max_concurrency: int | None = None,
                 vision_language_models: frozenset[str] | None = None, http_client=None):
        sdk = openai.OpenAI(api_key="dummy", base_url=base_url, default_headers={GATEWAY_KEY_HEADER: api_key},
                            max_retries=0, timeout=timeout_s, http_client=http_client)
        super().__init__(base_url, api_key, openai_model_name=openai_model_name, output_processor=output_processor,
                         timeout_s=timeout_s, max_concurrency=max_concurrency,
                         vision_language_models=vision_language_models, sdk_client=sdk)

    def __repr__(self) -> str:
        return (f"StanfordHealthCareOpenAIClient(base_url={str(self._client.base_url)!r}, "
                f"model={self.openai_model_name!r})")


@model_api(GATEWAY_OPENAI_CLIENT)
def stanfordhealthcare_openai_client(deployment, credentials, max_concurrency: int | None = None,
                                     timeout_s: float = 600.0, edition_switches=None) -> GatewayOpenAIClient:
    """HELM checks, in this order: an endpoint (`<org>Endpoint`), a key (`<org>ApiKey`), a `base_url`."""
    args = deployment.client_spec.args
    endpoint = _gateway_endpoint(deployment, credentials, GATEWAY_OPENAI_CLIENT)
    key = gateway_key(deployment, credentials, GATEWAY_OPENAI_CLIENT)
    template = resolve_base_url(deployment, credentials)
    if not template:
        raise MedhelmError(f"deployment {deployment.name!r} (StanfordHealthCareOpenAIClient) needs "
                           f"client_spec.args.base_url (e.g. \"{{endpoint}}/llama3370b/v1\") in "
                           f"{deployment.source or 'model_deployments.yaml'}")
    base_url = format_gateway_url(template, endpoint)
    if not base_url.lower().startswith(("http://", "https://")):
        raise MedhelmError(f"deployment {deployment.name!r}: its base_url is not an http(s) URL "
                           f"({deployment.host_organization}Endpoint in {credentials_file(credentials)})")
    model_name = args.get("openai_model_name")
    client = GatewayOpenAIClient(base_url, key, openai_model_name=str(model_name) if model_name is not None else None,
                                 output_processor=args.get("output_processor"), timeout_s=timeout_s,
                                 max_concurrency=max_concurrency,
                                 vision_language_models=vision_language_models(deployment))
    return apply_edition_switches(client, edition_switches)


class GatewayHTTPClient(BlockingClient):
    """HELM's StanfordHealthCareHTTPModelClient: POST the body to `{endpoint}/{deployment}`."""

    class_name = ""

    def __init__(self, endpoint: str, deployment: str, api_key: str, model: str | None = None,
                 timeout_s: float = 600.0, retry: RetryPolicy | None = None, transport=None):
        self.url = f"{endpoint}/{deployment}"
        self.model = model
        self._secret = api_key
        self.retry = retry or RetryPolicy()
        # httpx.Client is thread-safe; the engine calls attempt() from many threads.
        self._http = httpx.Client(timeout=timeout_s, transport=transport, follow_redirects=False,
                                  headers={GATEWAY_KEY_HEADER: api_key})

    def __repr__(self) -> str:
        return f"{_short(self.class_name)}(url={self.url!r}, model={self.model!r})"

    def redact(self, text: str) -> str:
        return redact(text, self._secret)

    @property
    def endpoint(self) -> str:
        return endpoint_origin(self.url)

    def raw_request(self, request: dict) -> dict[str, Any]:  # pragma: no cover - interface
        raise NotImplementedError

    def parse(self, reply: dict) -> list[dict]:  # pragma: no cover - interface
        raise NotImplementedError

    def usage(self, reply: dict) -> dict | None:
        return None

    def attempt(self, request: dict) -> Attempt:
        try:
            raw = self.raw_request(request)
        except (KeyError, TypeError, ValueError) as e:
            return Attempt(FATAL, message=f"invalid request: {e}")
        # requests' `json=` serialization (json.dumps defaults), so the bytes on the wire are HELM's.
        content = json.dumps(raw, allow_nan=False).encode("utf-8")
        start = time.time()
        try:
            response = self._http.post(self.url, content=content, headers={"Content-Type": "application/json"})
        except httpx.TimeoutException:
            return Attempt(TIMEOUT, message="request timed out")
        except httpx.HTTPError as e:
            return Attempt(CONNECTION, message=self.redact(f"connection error: {e}"))
        elapsed = time.time() - start
        headers = rate_limit_headers(response.headers)
        status = response.status_code
        if status >= 400:
            return self._status_error(response, headers)
        try:
            reply = response.json()
        except ValueError:
            reply = None
        if isinstance(reply, list):  # HELM wraps a list reply as {"content": [...]}
            reply = {"content": reply}
        try:
            if not isinstance(reply, dict):
                raise TypeError("not a JSON object or list")
            completions = self.parse(reply)
        except (KeyError, IndexError, TypeError) as e:
            return Attempt(SERVER_ERROR, message=f"malformed response (HTTP {status}): {type(e).__name__} {e}",
                           status=status, headers=headers)
        result = {"success": True, "embedding": [], "completions": completions, "cached": False,
                  "request_time": elapsed}
        return Attempt(OK, result=result, status=status, headers=headers, usage=self.usage(reply))

    def _status_error(self, response: httpx.Response, headers: dict[str, str]) -> Attempt:
        status = response.status_code
        retry_after = retry_after_seconds(headers)
        detail = self.redact(response.text[:300].strip())
        return status_attempt(status, f"gateway error (HTTP {status}): {detail}", headers, retry_after)


class GatewayClaudeClient(GatewayHTTPClient):
    class_name = GATEWAY_CLAUDE_CLIENT

    def raw_request(self, request: dict) -> dict[str, Any]:
        return {"model_id": self.model, "prompt_text": request["prompt"], "max_tokens": request["max_tokens"],
                "temperature": request["temperature"]}

    def parse(self, reply: dict) -> list[dict]:
        return [{"text": item["text"], "logprob": 0, "tokens": []} for item in reply["content"]]

    def usage(self, reply: dict) -> dict | None:
        usage = reply.get("usage")
        if isinstance(usage, dict) and "input_tokens" in usage:
            return {"prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens")}
        return None


class GatewayGoogleClient(GatewayHTTPClient):
    class_name = GATEWAY_GOOGLE_CLIENT

    def raw_request(self, request: dict) -> dict[str, Any]:
        return {
            "contents": {"role": "user", "parts": {"text": request["prompt"]}},
            "generation_config": {
                "temperature": request["temperature"],
                "topP": request["top_p"],
                "topK": request["top_k_per_token"],
                "candidateCount": 1,
                "maxOutputTokens": request["max_tokens"],
                "stopSequences": request["stop_sequences"],
            },
        }

    def parse(self, reply: dict) -> list[dict]:
        text = ""
        for chunk in reply["content"]:
            candidate = chunk["candidates"][0]
            if "content" in candidate:
                text += candidate["content"]["parts"][0]["text"]
        return [{"text": text, "logprob": 0, "tokens": []}]

    def usage(self, reply: dict) -> dict | None:
        for chunk in reversed(reply.get("content") or []):
            meta = chunk.get("usageMetadata") if isinstance(chunk, dict) else None
            if isinstance(meta, dict):
                return {"prompt_tokens": meta.get("promptTokenCount"),
                        "completion_tokens": meta.get("candidatesTokenCount")}
        return None


def _http_client(cls, deployment, credentials, timeout_s: float):
    args = deployment.client_spec.args
    path = args.get("deployment")
    if not path:
        raise MedhelmError(f"deployment {deployment.name!r} ({_short(cls.class_name)}) needs "
                           f"client_spec.args.deployment (the gateway path) in "
                           f"{deployment.source or 'model_deployments.yaml'}")
    # HELM defaults the endpoint to http://localhost:8080; a missing one is almost always a forgotten
    # credentials key, so it stops here instead of sending to whatever listens there.
    endpoint = _gateway_endpoint(deployment, credentials, cls.class_name)
    if not endpoint.lower().startswith(("http://", "https://")):
        raise MedhelmError(f"deployment {deployment.name!r}: its endpoint ({deployment.host_organization}Endpoint in "
                           f"{credentials_file(credentials)}) is not an http(s) URL")
    key = gateway_key(deployment, credentials, cls.class_name)
    model = args.get("model")
    return cls(endpoint, str(path), key, model=str(model) if model is not None else None, timeout_s=timeout_s)


@model_api(GATEWAY_CLAUDE_CLIENT)
def stanfordhealthcare_claude_client(deployment, credentials, max_concurrency: int | None = None,
                                     timeout_s: float = 600.0) -> GatewayClaudeClient:
    return _http_client(GatewayClaudeClient, deployment, credentials, timeout_s)


@model_api(GATEWAY_GOOGLE_CLIENT)
def stanfordhealthcare_google_client(deployment, credentials, max_concurrency: int | None = None,
                                     timeout_s: float = 600.0) -> GatewayGoogleClient:
    return _http_client(GatewayGoogleClient, deployment, credentials, timeout_s)

