"""HELM's `GoogleGenAIClient` (`helm/clients/google_genai_client.py`): Gemini through the official
`google-genai` SDK (the `[google]` extra), either the Gemini API (an API key) or Vertex AI (a Google
Cloud project, location and application-default credentials).

The request goes through the SDK's `client.models.generate_content(model, contents, config)` with the
same `Content`s and `GenerateContentConfig` HELM 0.5.16 builds, so the SDK serializes the body HELM
sends (`POST {base}/v1beta/models/{model}:generateContent` with `x-goog-api-key`; Vertex AI:
`POST {base}/v1beta1/projects/{p}/locations/{l}/publishers/google/models/{model}:generateContent` with
`Authorization: Bearer`): the prompt as one user content, or the request's messages (system messages
skipped; a first system message becomes `systemInstruction`; assistant -> `model`);
`generationConfig` = temperature, topP, topK (a float), candidateCount, maxOutputTokens, stopSequences
(sent even when empty), presence/frequency penalties, `seed` only with `request.random` (an int, else
HELM refuses), `responseJsonSchema` with a JSON-schema `response_format`, `thinkingConfig` from the
`thinking_config` arg (google-genai passes it through with its Python field names, e.g.
`{"thinking_budget": 0}`, for HELM too). Model: the `genai_model` arg, else the request's model engine.

Reply (HELM's parsing, on the SDK's own response objects): per candidate, text = its non-thought
text parts joined, `thinking: {text}` = its thought parts joined (only when not empty), `logprob`
0.0, `tokens` [], `finish_reason` STOP -> "stop", MAX_TOKENS -> "length", any other the API's enum
value, absent when the API gives none. No stop-sequence cut on HELM's side. A blocked prompt, no
candidates, a candidate finished by SAFETY/RECITATION/BLOCKLIST/PROHIBITED_CONTENT/SPII, or one
without parts (unless MAX_TOKENS) is HELM's non-retriable, non-fatal failure "Content blocked: ..."
(`content_filter`: one empty completion, as HELM's executor stores it). A candidate with no
`content` at all fails HELM's `assert candidate.content` (its retries then end the run): here a
`server_error` (retried, then the request fails). The reasons in those messages are the SDK's enums
formatted by this Python, as HELM's f-strings do (3.11+: `FinishReason.SAFETY`; 3.10: `SAFETY`).

Which API (HELM's order): the `genai_use_vertexai` arg (true: Vertex AI, false: Gemini API), else
Vertex AI when a project and location are configured, else the Gemini API when there is a key, else
the SDK's own environment (`GOOGLE_GENAI_USE_VERTEXAI`, `GOOGLE_API_KEY`/`GEMINI_API_KEY`,
`GOOGLE_CLOUD_PROJECT`/`GOOGLE_CLOUD_LOCATION`). Key: `api_key` arg, `googleApiKey` (the host
organization's `<org>ApiKey`) in credentials.conf, the deployments table, `$MEDHELM_API_KEY_GOOGLE`,
then the SDK's `$GOOGLE_API_KEY`/`$GEMINI_API_KEY`. Vertex AI: `project_id`/`location` args, else
`googleProjectId`/`googleLocation` in credentials.conf, else `$GOOGLE_CLOUD_PROJECT`/
`$GOOGLE_CLOUD_LOCATION` (no location: the SDK's "global"), and Google application-default
credentials (`gcloud auth application-default login`, or `$GOOGLE_APPLICATION_CREDENTIALS` = a
service-account key file, or the metadata server on Google Cloud), looked up when the client is built
so that a missing one stops the run's checks. Where requests go: the SDK's `$GOOGLE_GEMINI_BASE_URL`
(Vertex AI: `$GOOGLE_VERTEX_BASE_URL`), else Google's hosts; our addition (HELM's class takes none): a
`base_url` client_spec arg or `googleBaseUrl` in credentials.conf wins over those. (With a base URL
and no project+location the SDK posts to the bare base URL, its API-gateway mode.)

Batch mode (`medhelm_core.batch.gemini`) reuses this client: `wire_request` is the body the SDK's
`generate_content` would post (its HTTP call intercepted), `replay` the Attempt made of an answer the
batch gave (the SDK's own parsing and error raising, then HELM's reading, as above).

No SDK retries (the SDK's default without `retry_options`); the timeout is that of the httpx client
given to the SDK (`HttpOptions.timeout` would add an `X-Server-Timeout` header HELM does not send).
Errors: 429 / RESOURCE_EXHAUSTED -> rate_limited, with the
`google.rpc.RetryInfo` `retryDelay` of the error body as `retry-after`; 5xx, 408, 409 -> server_error;
401/403/404 -> fatal_endpoint; other 4xx -> fatal.
"""
from __future__ import annotations

import json
import os
import re
import time
from typing import Any, Mapping

import httpx

from medhelm_core.clients.base import (Attempt, BlockingClient, endpoint_origin, kind_of_status, model_api, plain,
                                       redact, require_extra)
from medhelm_core.clients.openai_compatible import _non_fatal
from medhelm_core.helm_config.deployments import resolve_api_key
from medhelm_core.errors import MedhelmError
from medhelm_core.ratelimit import (CONNECTION, CONTENT_FILTER, FATAL, FATAL_ENDPOINT, OK, RATE_LIMITED, SERVER_ERROR,
                                    TIMEOUT, rate_limit_headers, retry_after_seconds)

CLASS_NAME = "helm.clients.google_genai_client.GoogleGenAIClient"
# HELM's constructor arguments (cache_config aside), plus our `base_url`.
_ARGS = {"api_key", "project_id", "location", "thinking_config", "genai_model", "genai_use_vertexai", "base_url"}
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
RETRY_INFO_TYPE = "type.googleapis.com/google.rpc.RetryInfo"
_RATE_LIMITED_STATUSES = {"RESOURCE_EXHAUSTED"}
_SERVER_STATUSES = {"UNAVAILABLE", "INTERNAL", "DEADLINE_EXCEEDED", "ABORTED", "UNKNOWN", "DATA_LOSS"}
_ENDPOINT_STATUSES = {"UNAUTHENTICATED", "PERMISSION_DENIED", "NOT_FOUND"}
_ADC_HELP = ("run `gcloud auth application-default login`, or set $GOOGLE_APPLICATION_CREDENTIALS to a "
             "service-account key file")


# ------------------------------------------------------------------------------------------------
# Shared with vertexai.py: Google's error bodies, application-default credentials, settings lookup
# ------------------------------------------------------------------------------------------------
def setting(deployment, credentials, arg: str, key: str) -> str | None:
    """A client_spec arg, else credentials `<org><Key>` (HELM's auto_client bindings: yaml args win)."""
    explicit = deployment.client_spec.args.get(arg)
    if explicit is not None:
        return str(plain(explicit))
    value = credentials.get(f"{deployment.host_organization}{key}")
    return value.get_secret_value() if value is not None else None


def retry_delay_seconds(body: Any) -> float | None:
    """The `retryDelay` ("30s", "1.5s") of a google.rpc.RetryInfo in a Google error body's details."""
    error = body.get("error") if isinstance(body, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    for item in details if isinstance(details, list) else []:
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("google.rpc.RetryInfo"):
            delay = item.get("retryDelay")
            if isinstance(delay, dict):  # the proto form {"seconds", "nanos"}
                return float(delay.get("seconds") or 0) + float(delay.get("nanos") or 0) / 1e9
            m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)s\s*", str(delay or ""))
            if m:
                return float(m.group(1))
    return None


def classify_google_error(status: int | None, body: Any, headers: Mapping[str, str] | None, message: str,
                          what: str) -> Attempt:
    """An HTTP error of a Google API (error body `{"error": {"code", "message", "status", "details"}}`)."""
    error = body.get("error") if isinstance(body, dict) else None
    rpc_status = str(error.get("status") or "") if isinstance(error, dict) else ""
    if status is None and isinstance(error, dict) and isinstance(error.get("code"), int):
        status = error["code"]
    kept = rate_limit_headers(headers)
    delay = retry_delay_seconds(body)
    if delay is not None and "retry-after" not in kept and "retry-after-ms" not in kept:
        kept["retry-after"] = f"{delay:g}"
    retry_after = retry_after_seconds(kept)
    shown = f"{what} error (HTTP {status}{' ' + rpc_status if rpc_status else ''}): {message}"
    kind = kind_of_status(status)  # google.rpc's status name, where the reply has one, can say more
    if kind == RATE_LIMITED or rpc_status in _RATE_LIMITED_STATUSES:
        return Attempt(RATE_LIMITED, message=shown, status=status, retry_after_s=retry_after, headers=kept)
    if kind == SERVER_ERROR or rpc_status in _SERVER_STATUSES:
        return Attempt(SERVER_ERROR, message=shown, status=status, retry_after_s=retry_after, headers=kept)
    if kind == FATAL_ENDPOINT or rpc_status in _ENDPOINT_STATUSES:
        return Attempt(FATAL_ENDPOINT, message=shown, status=status, headers=kept)
    return Attempt(FATAL, message=shown, status=status, headers=kept)


def application_default_credentials(deployment, credentials, class_name: str, need_project: bool):
    """Google application-default credentials (and their project), or one line saying what to set."""
    google_auth = require_extra("google.auth", "google", deployment.name, class_name)
    try:
        return google_auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
    except google_auth.exceptions.DefaultCredentialsError:
        project = (f"; the project: {deployment.host_organization}ProjectId in {credentials.source} or "
                   "$GOOGLE_CLOUD_PROJECT") if need_project else ""
        raise MedhelmError(f"deployment {deployment.name!r}: {class_name.rsplit('.', 1)[-1]} calls Vertex AI, "
                           f"which needs Google application-default credentials: none found ({_ADC_HELP})"
                           f"{project}") from None


# ------------------------------------------------------------------------------------------------
# The client
# ------------------------------------------------------------------------------------------------
class _ContentBlocked(Exception):
    pass


class _HelmRaises(Exception):
    """Where HELM's client raises before sending (the run fails): a `fatal` attempt."""


class GoogleGenAIClient(BlockingClient):
    def __init__(self, genai, sdk_client, *, vertexai: bool, genai_model: str | None = None,
                 thinking_config: Any = None, secret: str = "", credentials: Any = None):
        self._genai = genai
        self._types = genai.types
        self._client = sdk_client
        self.vertexai = vertexai
        self.genai_model = genai_model
        self.thinking_config = thinking_config
        self._secret = secret
        self._google_credentials = credentials

    def __repr__(self) -> str:
        api = "vertex-ai" if self.vertexai else "gemini-api"
        return f"GoogleGenAIClient(api={api}, endpoint={self.endpoint!r}, genai_model={self.genai_model!r})"

    def redact(self, text: str) -> str:
        text = redact(text, self._secret)
        token = getattr(self._google_credentials, "token", None)
        return redact(text, token) if isinstance(token, str) else text

    @property
    def endpoint(self) -> str:
        base = getattr(getattr(getattr(self._client, "_api_client", None), "_http_options", None), "base_url", None)
        return endpoint_origin(base or ("https://aiplatform.googleapis.com" if self.vertexai
                                        else "https://generativelanguage.googleapis.com"))

    # -- request: HELM's _convert_request_to_contents / _convert_request_to_generate_content_config
    def model_name(self, request: dict) -> str:
        if self.genai_model is not None:
            return self.genai_model
        model = request["model"]
        return model.split("/", 1)[1] if "/" in model else model

    def contents(self, request: dict) -> list:
        t = self._types
        messages = request.get("messages")
        if request.get("multimodal_prompt") is not None:
            raise _HelmRaises("multimodal prompts are not supported by this client")
        if messages is not None:
            if request.get("prompt"):
                raise _HelmRaises("Only one of Request.prompt, Request.messages or Request.multimodal_prompt may "
                                  "be set")
            roles = {"user": "user", "assistant": "model"}
            out = []
            for message in messages:
                if message["role"] == "system":
                    continue
                if message["role"] not in roles:  # HELM: KeyError
                    raise _HelmRaises(f"unknown message role {message['role']!r}")
                out.append(t.Content(role=roles[message["role"]], parts=[t.Part.from_text(text=message["content"])]))
            return out
        return [t.Content(role="user", parts=[t.Part.from_text(text=request.get("prompt", ""))])]

    def config(self, request: dict):
        response_mime_type = response_json_schema = None
        response_format = request.get("response_format") or {}
        if response_format.get("json_schema"):
            response_mime_type, response_json_schema = "application/json", response_format["json_schema"]
        system_instruction = None
        messages = request.get("messages")
        if messages is not None:
            if not messages:  # HELM: IndexError on messages[0]
                raise _HelmRaises("the request has no messages")
            if messages[0]["role"] == "system":
                system_instruction = messages[0]["content"]
        seed = None
        if request.get("random") is not None:
            try:
                seed = int(request["random"])
            except ValueError:
                raise _HelmRaises("Request.random must be an int for GoogleGenAIClient") from None
        return self._types.GenerateContentConfig(
            system_instruction=system_instruction,
            temperature=request.get("temperature", 1.0),
            top_p=request.get("top_p", 1),
            top_k=request.get("top_k_per_token", 1),
            candidate_count=request.get("num_completions", 1),
            max_output_tokens=request.get("max_tokens", 100),
            stop_sequences=request.get("stop_sequences", []),
            presence_penalty=request.get("presence_penalty", 0),
            frequency_penalty=request.get("frequency_penalty", 0),
            seed=seed,
            response_mime_type=response_mime_type,
            response_json_schema=response_json_schema,
            thinking_config=self.thinking_config,
        )

    # -- one try
    def prepare(self, request: dict) -> tuple[str, list, Any]:
        """(model, contents, config) of HELM's request, as `attempt` hands them to the SDK. `_HelmRaises`
        (or KeyError, TypeError, ValueError: a malformed message, a config the SDK refuses) where the
        request is refused before sending."""
        if request.get("echo_prompt"):
            raise _HelmRaises("GoogleGenAIClient does not support Request.echo_prompt")
        return self.model_name(request), self.contents(request), self.config(request)

    def refused(self, e: Exception) -> Attempt:
        """The fatal Attempt of a request `prepare` refused."""
        if isinstance(e, _HelmRaises):
            return Attempt(FATAL, message=f"invalid request: {e}")
        return Attempt(FATAL, message=self.redact(f"invalid request: {type(e).__name__}: {e}"))

    def attempt(self, request: dict) -> Attempt:
        try:
            prepared = self.prepare(request)
        except (_HelmRaises, KeyError, TypeError, ValueError) as e:
            return self.refused(e)
        return self._ask(self._client.models, *prepared)

    # -- the batch API's view of the same call (medhelm_core.batch.gemini)
    def wire_request(self, request: dict) -> tuple[str, bytes]:
        """(model resource, body): the path's model (`models/gemini-...`) and the very JSON bytes the
        SDK's `generate_content` posts for `request`, taken from the SDK's own request building (its
        HTTP call intercepted before anything is sent). ValueError where the request is refused."""
        try:
            prepared = self.prepare(request)
        except (_HelmRaises, KeyError, TypeError, ValueError) as e:
            raise ValueError(self.refused(e).message.removeprefix("invalid request: ")) from None
        capture = _Capture(self._client._api_client)
        try:
            self._genai.models.Models(capture).generate_content(model=prepared[0], contents=prepared[1],
                                                                config=prepared[2])
        except _Captured:
            pass
        if capture.body is None:
            raise ValueError("the SDK sent no generateContent request")
        return capture.path.rsplit(":", 1)[0], capture.body

    def replay(self, request: dict, status: int, body: bytes, start: float, elapsed: float) -> Attempt:
        """The Attempt this client makes of `request` had the API answered `body` with HTTP `status`:
        the same SDK parsing and error classification as online, the clock fields the caller's."""
        prepared = self.prepare(request)
        return self._ask(self._genai.models.Models(_Replay(self._client._api_client, status, body)), *prepared,
                         clock=(start, elapsed))

    def _ask(self, models, model: str, contents: list, config: Any,
             clock: tuple[float, float] | None = None) -> Attempt:
        errors = self._genai.errors
        start = time.time()
        try:
            response = models.generate_content(model=model, contents=contents, config=config)
        except errors.APIError as e:
            response_obj = getattr(e, "response", None)
            return classify_google_error(e.code, e.details, getattr(response_obj, "headers", None),
                                         self.redact(str(e.message or e)), "Google GenAI")
        except httpx.TimeoutException:
            return Attempt(TIMEOUT, message="request timed out")
        except httpx.TransportError as e:
            return Attempt(CONNECTION, message=self.redact(f"connection error: {e}"))
        except Exception as e:  # noqa: BLE001 - auth refresh failures, malformed replies
            return self._other_error(e)
        elapsed = time.time() - start
        if clock is not None:
            start, elapsed = clock
        usage = _usage(getattr(response, "usage_metadata", None))
        try:
            completions = self.completions(response)
        except _ContentBlocked as e:
            error = f"Content blocked: {e}"
            return Attempt(CONTENT_FILTER, result=_non_fatal(error, 1), message=error, status=200, usage=usage)
        except AssertionError as e:
            return Attempt(SERVER_ERROR, message=f"unexpected Gemini reply (HELM's client fails it too): {e}",
                           status=200, usage=usage)
        result = {"success": True, "embedding": [], "completions": completions, "cached": False,
                  "request_time": elapsed, "request_datetime": int(start)}
        return Attempt(OK, result=result, status=200, usage=usage)

    def _other_error(self, e: Exception) -> Attempt:
        auth_exceptions = getattr(_google_auth_module(), "exceptions", None)
        if auth_exceptions is not None and isinstance(e, auth_exceptions.TransportError):
            return Attempt(CONNECTION, message=self.redact(f"Google credentials refresh failed: {e}"))
        if auth_exceptions is not None and isinstance(e, auth_exceptions.GoogleAuthError):
            return Attempt(FATAL_ENDPOINT, message=self.redact(f"Google credentials error: {type(e).__name__}: {e} "
                                                               f"({_ADC_HELP})"))
        return Attempt(SERVER_ERROR, message=self.redact(f"malformed Gemini reply: {type(e).__name__}: {e}"))

    # -- reply: HELM's _convert_generate_content_response_to_generated_outputs
    def completions(self, response) -> list[dict]:
        finish = self._types.FinishReason
        blocked = (finish.SAFETY, finish.RECITATION, finish.BLOCKLIST, finish.PROHIBITED_CONTENT, finish.SPII)
        reasons = {finish.STOP: "stop", finish.MAX_TOKENS: "length"}
        if response.prompt_feedback and response.prompt_feedback.block_reason:
            raise _ContentBlocked(f"Prompt blocked with reason: {response.prompt_feedback.block_reason}")
        if not response.candidates:
            raise _ContentBlocked(f"No candidates in response: {response}")
        out = []
        for candidate in response.candidates:
            # HELM's asserts (kept under `python -O` too)
            if not candidate.content:
                raise AssertionError("candidate without content")
            if candidate.content.role not in ("model", None):
                raise AssertionError(f"candidate content with role {candidate.content.role!r}")
            if candidate.finish_reason in blocked:
                raise _ContentBlocked(f"Content blocked with reason: {candidate.finish_reason}")
            if not candidate.content.parts and candidate.finish_reason != finish.MAX_TOKENS:
                raise _ContentBlocked(f"No content parts in candidate: {candidate}")
            thinking, text = [], []
            for part in candidate.content.parts or []:
                if part.text is not None:
                    (thinking if part.thought else text).append(part.text)
            completion: dict[str, Any] = {"text": "".join(text), "logprob": 0.0, "tokens": []}
            if candidate.finish_reason:
                reason = reasons.get(candidate.finish_reason, candidate.finish_reason)
                completion["finish_reason"] = {"reason": getattr(reason, "value", reason)}
            if "".join(thinking):
                completion["thinking"] = {"text": "".join(thinking)}
            out.append(completion)
        return out


class _Captured(Exception):
    pass


class _SDKClientView:
    """The SDK's API client as `Models` sees it, but for its `request` (the one HTTP call of
    `generate_content`): the subclasses decide what that call does."""

    def __init__(self, api_client):
        self._real = api_client

    def __getattr__(self, name: str):
        return getattr(self._real, name)


class _Capture(_SDKClientView):
    """Keeps the path and body `generate_content` would post, and posts nothing. The body is serialized
    as the SDK's `_request_once` does (`json.dumps` of the request dict less its `_url`/`_query` keys)."""
    path: str | None = None
    body: bytes | None = None

    def request(self, http_method, path, request_dict, http_options=None, *args, **kwargs):
        data = {k: v for k, v in request_dict.items() if not k.startswith("_")}
        self.path, self.body = path, json.dumps(data).encode("utf-8")
        raise _Captured()


class _Replay(_SDKClientView):
    """Answers `generate_content`'s HTTP call with a given status and body as the SDK's `request` does:
    its own error raising (`APIError.raise_for_response`), then the body with the response's headers."""

    def __init__(self, api_client, status: int, body: bytes):
        super().__init__(api_client)
        self._status, self._body = status, body

    def request(self, http_method, path, request_dict, http_options=None, *args, **kwargs):
        from google.genai import _api_client, errors, types

        response = httpx.Response(self._status, content=self._body, headers={"content-type": "application/json"},
                                  request=httpx.Request("POST", "https://batch.invalid/" + path))
        errors.APIError.raise_for_response(response)
        headers = _api_client.HttpResponse(response.headers).headers
        return types.HttpResponse(headers=headers, body=response.text)


class _TimeoutClient(httpx.Client):
    """The SDK's HTTP client with our timeout. Without `HttpOptions.timeout` the SDK asks httpx for no
    timeout at all (`timeout=None` per request); with it, it also sends an `X-Server-Timeout` header
    that HELM's requests do not have. So the SDK's `None` means this client's timeout here."""

    def __init__(self, **kwargs: Any):
        kwargs.setdefault("follow_redirects", True)  # as the SDK's own client
        super().__init__(**kwargs)

    def build_request(self, *args: Any, **kwargs: Any) -> httpx.Request:
        if "timeout" in kwargs and kwargs["timeout"] is None:
            kwargs["timeout"] = self.timeout
        return super().build_request(*args, **kwargs)


def _usage(meta) -> dict | None:
    if meta is None:
        return None
    prompt = getattr(meta, "prompt_token_count", None)
    candidates = getattr(meta, "candidates_token_count", None)
    thoughts = getattr(meta, "thoughts_token_count", None)  # billed as output
    completion = None if candidates is None and thoughts is None else (candidates or 0) + (thoughts or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion}


def _google_auth_module():
    try:
        import google.auth
        import google.auth.exceptions  # noqa: F401
        return google.auth
    except ImportError:  # pragma: no cover - google-auth comes with google-genai
        return None


def _env_flag(name: str) -> bool | None:
    value = os.environ.get(name)
    return None if value is None else value.lower() in ("true", "1")


def _bool_arg(value: Any) -> bool | None:
    """HELM tests `genai_use_vertexai is True` / `is False`: anything but a YAML boolean counts as unset."""
    value = plain(value)
    return value if isinstance(value, bool) else None


@model_api(CLASS_NAME)
def google_genai_client(deployment, credentials, max_concurrency: int | None = None,
                        timeout_s: float = 600.0, google_credentials: Any = None) -> GoogleGenAIClient:
    """The client of a GoogleGenAIClient deployment (SDK from the [google] extra). `google_credentials`:
    ready google-auth credentials for Vertex AI (tests), instead of the application-default ones."""
    genai = require_extra("google.genai", "google", deployment.name, CLASS_NAME)
    args = deployment.client_spec.args
    unknown = sorted(set(args) - _ARGS)
    if unknown:
        raise MedhelmError(f"deployment {deployment.name!r}: GoogleGenAIClient has no argument {unknown[0]!r} "
                           f"(it takes {', '.join(sorted(_ARGS - {'base_url'}))})")
    try:
        key = resolve_api_key(deployment, credentials).get_secret_value()
    except MedhelmError:
        key = None  # HELM's provide_api_key gives None; the SDK reads $GOOGLE_API_KEY / $GEMINI_API_KEY
    project = setting(deployment, credentials, "project_id", "ProjectId")
    location = setting(deployment, credentials, "location", "Location")
    base_url = setting(deployment, credentials, "base_url", "BaseUrl")
    use_vertexai = _bool_arg(args.get("genai_use_vertexai"))
    thinking = plain(args.get("thinking_config"))
    try:
        thinking_config = genai.types.ThinkingConfig.model_validate(thinking) if thinking else None
    except Exception as e:  # noqa: BLE001 - pydantic's ValidationError
        raise MedhelmError(f"deployment {deployment.name!r}: GoogleGenAIClient's thinking_config is not a "
                           f"ThinkingConfig: {str(e).splitlines()[0]}") from None

    # HELM's choice of API; its last branch (`Client()`) leaves it to the SDK's environment.
    if use_vertexai is None:
        if project and location:
            use_vertexai = True
        elif key:
            use_vertexai = False
        else:
            use_vertexai = bool(_env_flag("GOOGLE_GENAI_USE_ENTERPRISE") if _env_flag("GOOGLE_GENAI_USE_ENTERPRISE")
                                is not None else _env_flag("GOOGLE_GENAI_USE_VERTEXAI"))
    http_options = genai.types.HttpOptions(base_url=base_url, httpx_client=_TimeoutClient(timeout=timeout_s))
    where = credentials.source
    try:
        if use_vertexai:
            project = project or os.environ.get("GOOGLE_CLOUD_PROJECT")
            location = location or os.environ.get("GOOGLE_CLOUD_LOCATION")
            if google_credentials is None and not (key and not project):  # express mode: an API key, no project
                google_credentials, adc_project = application_default_credentials(
                    deployment, credentials, CLASS_NAME, need_project=not project)
                project = project or adc_project
            if google_credentials is not None:
                if not project:
                    raise MedhelmError(f"deployment {deployment.name!r}: GoogleGenAIClient on Vertex AI needs a "
                                       f"Google Cloud project: set googleProjectId in {where} or $GOOGLE_CLOUD_PROJECT")
                sdk_client = genai.Client(vertexai=True, project=project, location=location,
                                          credentials=google_credentials, http_options=http_options)
            else:
                sdk_client = genai.Client(vertexai=True, api_key=key, http_options=http_options)
        else:
            # $GOOGLE_API_KEY / $GEMINI_API_KEY come through resolve_api_key, and only for Google's own endpoint.
            if not key:
                raise MedhelmError(f"no API key for model deployment {deployment.name!r}: set "
                                   f"{deployment.host_organization}ApiKey in {where} (or $GOOGLE_API_KEY / "
                                   f"$GEMINI_API_KEY), or {deployment.host_organization}ProjectId and "
                                   f"{deployment.host_organization}Location there for Vertex AI")
            sdk_client = genai.Client(vertexai=False, api_key=key, http_options=http_options)
    except ValueError as e:  # the SDK's own checks (nothing secret in them)
        raise MedhelmError(f"deployment {deployment.name!r}: GoogleGenAIClient: {redact(str(e), key or '')}") from None
    return GoogleGenAIClient(genai, sdk_client, vertexai=bool(use_vertexai), genai_model=plain(args.get("genai_model")),
                             thinking_config=thinking_config, secret=key or "", credentials=google_credentials)
