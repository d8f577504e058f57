"""HELM's `VertexAIChatClient` (`helm/clients/vertexai_client.py`): Gemini on Vertex AI, as HELM 0.5.16
calls it through the `vertexai` SDK of google-cloud-aiplatform (`vertexai.init(project, location)`,
`vertexai.preview.generative_models.GenerativeModel(model).generate_content(contents,
generation_config=..., safety_settings=...)`), here without that SDK: the same GenerateContentRequest
sent to Vertex AI's documented REST endpoint with httpx and Google application-default credentials
(google-auth, which the `[google]` extra brings).

Wire: `POST https://{location}-aiplatform.googleapis.com/v1beta1/projects/{project}/locations/{location}/
publishers/google/models/{model}:generateContent` (the preview SDK's v1beta1 PredictionService; location
"global" -> aiplatform.googleapis.com, "us" -> aiplatform.us.rep.googleapis.com, as the SDK picks its
host), `Authorization: Bearer <token>` (+ `x-goog-user-project` for credentials with a quota
project). Body, the JSON form of the SDK's request: `contents` = the prompt as one user content, or
each of the request's messages (assistant -> `model`, any other role, system included, -> `user`);
`generationConfig` = temperature, topP, topK (floats), candidateCount, maxOutputTokens, and
stopSequences only when not empty (protobuf sends no empty repeated field); `safetySettings` = every
HarmCategory of the SDK's enum (UNSPECIFIED, HATE_SPEECH, DANGEROUS_CONTENT, HARASSMENT,
SEXUALLY_EXPLICIT, CIVIC_INTEGRITY, JAILBREAK) at BLOCK_NONE (the `safety_settings_preset` default,
"block_none"), none with preset "default". HELM's SDK speaks gRPC (REST for location "global", with
integer enums); the message content is the same. Model: the `vertexai_model` arg, else the request's
model engine (the SDK's resource-name rules: `models/x`, `publishers/...`, `projects/...`).

Reply (HELM's parsing): a blocked prompt, no candidates, a candidate finished by SAFETY (3),
RECITATION (4), BLOCKLIST (6), PROHIBITED_CONTENT (7) or SPII (8), or one without parts unless
MAX_TOKENS (2, then text "") is HELM's non-retriable, non-fatal failure "Content blocked: ..." (the
reasons as the SDK's enum numbers; the "No candidates"/"No content parts" texts carry the reply's JSON
where the SDK prints protobuf text): `content_filter`, one empty completion. Else text = the
candidate's one text part (more than one part, or a part without text, makes the SDK raise, HELM
retries and the run fails: here `server_error`), the prompt in front with `echo_prompt`, `logprob` 0,
`tokens` [], no `finish_reason`, then HELM's `truncate_sequence` (cut at the first stop sequence).

Configuration: `project_id`/`location` args, else `googleProjectId`/`googleLocation` in
credentials.conf, else the SDK's environment (`$GOOGLE_CLOUD_PROJECT`/`$CLOUD_ML_PROJECT_ID`,
`$GOOGLE_CLOUD_REGION`/`$CLOUD_ML_REGION`; ours: `$GOOGLE_CLOUD_LOCATION`), else the credentials'
project and "us-central1". Credentials: Google application-default credentials (`gcloud auth
application-default login`, or `$GOOGLE_APPLICATION_CREDENTIALS` = a service-account key file, or the
metadata server on Google Cloud), looked up when the client is built. Our addition (HELM's SDK takes no
URL): a `base_url` arg, `googleBaseUrl` in credentials.conf or `$GOOGLE_VERTEX_BASE_URL` replaces
`https://<host>` (e.g. a private endpoint or a test mock). Errors as google_genai.py: 429 /
RESOURCE_EXHAUSTED -> rate_limited (RetryInfo `retryDelay` -> `retry-after`), 5xx/408/409 ->
server_error, 401/403/404 -> fatal_endpoint, other 4xx -> fatal.

Batch (`medhelm_core.batch.vertex`, Vertex AI batch prediction): `wire_request` gives the model resource
and the very body bytes `attempt` posts, `replay` the Attempt `attempt` makes of an HTTP status and body;
both share `attempt`'s own request building and reply reading.
"""
from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

import httpx

from medhelm_core.clients.base import (Attempt, BlockingClient, endpoint_origin, model_api, plain, redact, require_extra,
                                       truncate_sequence)
from medhelm_core.clients.google_genai import (application_default_credentials, classify_google_error,
                                               setting)
from medhelm_core.clients.openai_compatible import _non_fatal
from medhelm_core.errors import MedhelmError
from medhelm_core.ratelimit import CONNECTION, CONTENT_FILTER, FATAL, FATAL_ENDPOINT, OK, SERVER_ERROR, TIMEOUT

CLASS_NAME = "helm.clients.vertexai_client.VertexAIChatClient"
_ARGS = {"project_id", "location", "safety_settings_preset", "vertexai_model", "base_url"}
DEFAULT_LOCATION = "us-central1"  # aiplatform's constants.DEFAULT_REGION
MREP_LOCATIONS = {"us"}  # aiplatform's MREP_JURISDICTIONS (google-cloud-aiplatform 1.165.1)

# google.cloud.aiplatform_v1beta1 HarmCategory, in enum order (google-cloud-aiplatform 1.165.1, the
# version HELM's [google] extra resolves to): HELM sets BLOCK_NONE for each of them.
HARM_CATEGORIES = ("HARM_CATEGORY_UNSPECIFIED", "HARM_CATEGORY_HATE_SPEECH", "HARM_CATEGORY_DANGEROUS_CONTENT",
                   "HARM_CATEGORY_HARASSMENT", "HARM_CATEGORY_SEXUALLY_EXPLICIT", "HARM_CATEGORY_CIVIC_INTEGRITY",
                   "HARM_CATEGORY_JAILBREAK")
BLOCK_NONE_PRESET, DEFAULT_PRESET = "block_none", "default"
# Candidate.FinishReason / PromptFeedback.BlockedReason numbers (the SDK's enums print as numbers).
FINISH_REASONS = {"FINISH_REASON_UNSPECIFIED": 0, "STOP": 1, "MAX_TOKENS": 2, "SAFETY": 3, "RECITATION": 4,
                  "OTHER": 5, "BLOCKLIST": 6, "PROHIBITED_CONTENT": 7, "SPII": 8, "MALFORMED_FUNCTION_CALL": 9,
                  "MODEL_ARMOR": 10}
BLOCKED_REASONS = {"BLOCKED_REASON_UNSPECIFIED": 0, "SAFETY": 1, "OTHER": 2, "BLOCKLIST": 3, "PROHIBITED_CONTENT": 4,
                   "MODEL_ARMOR": 5}
CONTENT_BLOCKED_FINISH_REASONS = (3, 4, 6, 7, 8)
MAX_TOKENS = 2


def safety_settings(preset: str | None) -> list[dict] | None:
    """HELM's `_get_safety_settings_for_preset`."""
    if preset is None or preset == BLOCK_NONE_PRESET:
        return [{"category": c, "threshold": "BLOCK_NONE"} for c in HARM_CATEGORIES]
    if preset == DEFAULT_PRESET:
        return None
    raise ValueError(f"Unknown safety_settings_preset: {preset}")


def resource_name(model: str, project: str, location: str) -> str:
    """The SDK's `_reconcile_model_name` + `_get_resource_name_from_model_name`."""
    if "/" not in model:
        model = f"publishers/google/models/{model}"
    elif model.startswith("models/"):
        model = f"publishers/google/{model}"
    elif not model.startswith(("publishers/", "projects/")):
        raise ValueError(f"model_name must be either a Model Garden model ID or a full resource name: {model}")
    if model.startswith("publishers/"):
        model = f"projects/{project}/locations/{location}/{model}"
    return model


def vertex_host(location: str) -> str:
    """The SDK's prediction endpoint for a location (aiplatform initializer.get_client_options)."""
    location = location.lower()
    if location == "global":
        return "https://aiplatform.googleapis.com"
    if location in MREP_LOCATIONS:
        return f"https://aiplatform.{location}.rep.googleapis.com"
    return f"https://{location}-aiplatform.googleapis.com"


def _enum_number(value: Any, table: dict[str, int]) -> Any:
    if value is None or isinstance(value, int):
        return value or 0
    return table.get(str(value), str(value))


class _ContentBlocked(Exception):
    pass


class _Unparseable(Exception):
    """Where the SDK raises on the reply (HELM retries, then its run fails)."""


class VertexAIChatClient(BlockingClient):
    def __init__(self, google_credentials, auth_request_factory, *, project: str, location: str,
                 base_url: str | None = None, vertexai_model: str | None = None,
                 safety_settings_preset: str | None = None, timeout_s: float = 600.0):
        self._credentials = google_credentials
        self._auth_request = auth_request_factory
        self._auth_lock = threading.Lock()
        self.project = project
        self.location = location
        self.base_url = base_url.rstrip("/") if base_url else None
        self.vertexai_model = vertexai_model
        self.safety_settings_preset = safety_settings_preset
        self.safety_settings = safety_settings(safety_settings_preset)
        self._http = httpx.Client(timeout=timeout_s)

    def __repr__(self) -> str:
        return (f"VertexAIChatClient(project={self.project!r}, location={self.location!r}, "
                f"endpoint={self.endpoint!r}, vertexai_model={self.vertexai_model!r})")

    def redact(self, text: str) -> str:
        token = getattr(self._credentials, "token", None)
        return redact(text, token if isinstance(token, str) else "")

    @property
    def endpoint(self) -> str:
        return endpoint_origin(self.base_url or vertex_host(self.location))

    # -- request
    def model_name(self, request: dict) -> str:
        if self.vertexai_model is not None:
            return self.vertexai_model
        model = request["model"]
        return model.split("/", 1)[1] if "/" in model else model

    def url(self, request: dict) -> str:
        return self._url_of(resource_name(self.model_name(request), self.project, self.location))

    def _url_of(self, name: str) -> str:
        # The SDK's client goes to the host of the resource's own location.
        parts = name.split("/")
        location = parts[3] if len(parts) > 3 and parts[0] == "projects" and parts[2] == "locations" else self.location
        return f"{self.base_url or vertex_host(location)}/v1beta1/{name}:generateContent"

    def body(self, request: dict) -> dict[str, Any]:
        """The JSON form of the SDK's GenerateContentRequest (no `model`: it is in the path)."""
        if request.get("multimodal_prompt") is not None:
            raise ValueError("multimodal prompts are not supported by this client")
        messages = request.get("messages")
        if messages is not None:
            roles = {"user": "user", "assistant": "model"}
            contents = [{"role": roles.get(m["role"], "user"), "parts": [{"text": m["content"]}]} for m in messages]
        else:
            contents = [{"role": "user", "parts": [{"text": request.get("prompt", "")}]}]
        config: dict[str, Any] = {}
        for key, field, kind in (("temperature", "temperature", float), ("top_p", "topP", float),
                                 ("top_k_per_token", "topK", float), ("num_completions", "candidateCount", int),
                                 ("max_tokens", "maxOutputTokens", int)):
            value = request.get(key, _REQUEST_DEFAULTS[key])
            if value is not None:
                config[field] = kind(value)
        stops = request.get("stop_sequences") or []
        if stops:
            config["stopSequences"] = list(stops)
        # protobuf's JSON field order: contents (2), safety_settings (3), generation_config (4)
        body: dict[str, Any] = {"contents": contents}
        if self.safety_settings is not None:
            body["safetySettings"] = self.safety_settings
        body["generationConfig"] = {k: config[k] for k in ("temperature", "topP", "topK", "candidateCount",
                                                            "maxOutputTokens", "stopSequences") if k in config}
        return body

    def _auth_headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        with self._auth_lock:  # one refresh at a time; google-auth credentials are not thread-safe
            if not self._credentials.valid:
                self._credentials.refresh(self._auth_request())
            self._credentials.apply(headers)
        return headers

    # -- one try
    def _wire(self, request: dict) -> tuple[str, str, bytes]:
        """(url, model resource, body bytes) of `request`'s generateContent call; KeyError, TypeError or
        ValueError where HELM raises before sending."""
        name = resource_name(self.model_name(request), self.project, self.location)
        url = self._url_of(name)
        return url, name, json.dumps(self.body(request)).encode()

    def attempt(self, request: dict) -> Attempt:
        try:
            url, _, data = self._wire(request)
        except (KeyError, TypeError, ValueError) as e:  # HELM raises before sending: the run fails
            return Attempt(FATAL, message=f"invalid request: {e}")
        start = time.time()
        try:
            headers = self._auth_headers()
        except Exception as e:  # noqa: BLE001 - google.auth's RefreshError / TransportError
            kind = CONNECTION if type(e).__name__ == "TransportError" else FATAL_ENDPOINT
            return Attempt(kind, message=self.redact(f"Google credentials error: {type(e).__name__}: {e}"))
        headers["content-type"] = "application/json"
        try:
            response = self._http.post(url, content=data, headers=headers)
        except httpx.TimeoutException:
            return Attempt(TIMEOUT, message="request timed out")
        except httpx.TransportError as e:
            return Attempt(CONNECTION, message=self.redact(f"connection error: {e}"))
        return self._answer(request, response.status_code, response.content, response.headers, start,
                            time.time() - start, text=response.text)

    # -- the batch API's view of the same call (medhelm_core.batch.vertex)
    def wire_request(self, request: dict) -> tuple[str, bytes]:
        """(model resource, body): the resource name in the path `attempt` posts to
        (`projects/{p}/locations/{l}/publishers/google/models/{m}`) and the very JSON bytes it posts for
        `request`. ValueError (the online `invalid request: ...` text) where the request is refused."""
        try:
            _, name, data = self._wire(request)
        except (KeyError, TypeError) as e:
            raise ValueError(str(e)) from None
        return name, data

    def replay(self, request: dict, status: int, body: bytes, start: float, elapsed: float) -> Attempt:
        """The Attempt `attempt` makes of `request` had Vertex AI answered `body` with HTTP `status` (no
        headers): the same reading and error classification, the clock fields the caller's."""
        return self._answer(request, status, body, None, start, elapsed)

    def _answer(self, request: dict, status: int, content: bytes, headers, start: float, elapsed: float,
                text: str | None = None) -> Attempt:
        """An HTTP answer to `request`'s generateContent call as HELM reads it."""
        try:
            reply = json.loads(content)
        except ValueError:
            reply = None
        if status >= 400:
            error = reply.get("error") if isinstance(reply, dict) else None
            if isinstance(error, dict):
                message = error.get("message")
            else:
                message = (text if text is not None else content.decode("utf-8", "replace"))[:500]
            return classify_google_error(status, reply, headers, self.redact(str(message)), "Vertex AI")
        if not isinstance(reply, dict):
            return Attempt(SERVER_ERROR, message=f"malformed Vertex AI reply (HTTP {status})", status=status)
        usage = _usage(reply.get("usageMetadata"))
        try:
            texts = self.texts(reply)
        except _ContentBlocked as e:
            error = f"Content blocked: {e}"
            return Attempt(CONTENT_FILTER, result=_non_fatal(error, 1), message=error, status=200, usage=usage)
        except _Unparseable as e:
            return Attempt(SERVER_ERROR, message=f"unexpected Vertex AI reply (HELM's client fails it too): {e}",
                           status=200, usage=usage)
        completions, untruncated = [], []
        for text in texts:
            text = request["prompt"] + text if request.get("echo_prompt") else text
            completions.append(truncate_sequence({"text": text, "logprob": 0, "tokens": []}, request))
            untruncated.append(text)
        result = {"success": True, "embedding": [], "completions": completions, "cached": False,
                  "request_time": elapsed, "request_datetime": int(start)}
        return Attempt(OK, result=result, status=200, usage=usage,
                       untruncated=untruncated if request.get("stop_sequences") else None)

    # -- reply: HELM's do_it checks, then `candidate.content.text`
    @staticmethod
    def texts(reply: dict) -> list[str]:
        feedback = reply.get("promptFeedback") or {}
        block = _enum_number(feedback.get("blockReason"), BLOCKED_REASONS)
        if block:
            raise _ContentBlocked(f"Prompt blocked with reason: {block}")
        candidates = reply.get("candidates") or []
        if not candidates:
            raise _ContentBlocked(f"No candidates in response: {json.dumps(reply)}")
        texts = []
        for candidate in candidates:
            finish = _enum_number(candidate.get("finishReason"), FINISH_REASONS)
            if finish in CONTENT_BLOCKED_FINISH_REASONS:
                raise _ContentBlocked(f"Content blocked with reason: {finish}")
            parts = (candidate.get("content") or {}).get("parts") or []
            if not parts:
                if finish == MAX_TOKENS:  # the tokens went to thinking: no text
                    texts.append("")
                    continue
                raise _ContentBlocked(f"No content parts in candidate: {json.dumps(candidate)}")
            if len(parts) > 1:
                raise _Unparseable("Multiple content parts are not supported.")
            if not isinstance(parts[0], dict) or "text" not in parts[0]:
                raise _Unparseable("Response candidate content part has no text.")
            texts.append(parts[0]["text"])
        return texts


# HELM Request defaults, for request dicts that omit a field.
_REQUEST_DEFAULTS = {"temperature": 1.0, "top_p": 1, "top_k_per_token": 1, "num_completions": 1, "max_tokens": 100}


def _usage(meta: Any) -> dict | None:
    if not isinstance(meta, dict):
        return None
    candidates, thoughts = meta.get("candidatesTokenCount"), meta.get("thoughtsTokenCount")
    completion = None if candidates is None and thoughts is None else (candidates or 0) + (thoughts or 0)
    return {"prompt_tokens": meta.get("promptTokenCount"), "completion_tokens": completion}


@model_api(CLASS_NAME)
def vertexai_chat_client(deployment, credentials, max_concurrency: int | None = None, timeout_s: float = 600.0,
                         google_credentials: Any = None) -> VertexAIChatClient:
    """The client of a VertexAIChatClient deployment (google-auth from the [google] extra).
    `google_credentials`: ready google-auth credentials (tests), instead of the application-default ones."""
    require_extra("google.auth", "google", deployment.name, CLASS_NAME)
    transport = require_extra("google.auth.transport.requests", "google", deployment.name, CLASS_NAME)
    args = deployment.client_spec.args
    unknown = sorted(set(args) - _ARGS)
    if unknown:
        raise MedhelmError(f"deployment {deployment.name!r}: VertexAIChatClient has no argument {unknown[0]!r} "
                           f"(it takes {', '.join(sorted(_ARGS - {'base_url'}))})")
    preset = plain(args.get("safety_settings_preset"))
    try:
        safety_settings(preset)
    except ValueError as e:
        raise MedhelmError(f"deployment {deployment.name!r}: VertexAIChatClient: {e} "
                           f"(use {BLOCK_NONE_PRESET!r} or {DEFAULT_PRESET!r})") from None
    project = (setting(deployment, credentials, "project_id", "ProjectId") or os.environ.get("GOOGLE_CLOUD_PROJECT")
               or os.environ.get("CLOUD_ML_PROJECT_ID"))
    location = (setting(deployment, credentials, "location", "Location") or os.environ.get("GOOGLE_CLOUD_REGION")
                or os.environ.get("CLOUD_ML_REGION") or os.environ.get("GOOGLE_CLOUD_LOCATION") or DEFAULT_LOCATION)
    if google_credentials is None:
        google_credentials, adc_project = application_default_credentials(deployment, credentials, CLASS_NAME,
                                                                           need_project=not project)
        project = project or adc_project
    if not project:
        raise MedhelmError(f"deployment {deployment.name!r}: VertexAIChatClient needs a Google Cloud project: set "
                           f"{deployment.host_organization}ProjectId in {credentials.source} or $GOOGLE_CLOUD_PROJECT")
    base_url = setting(deployment, credentials, "base_url", "BaseUrl") or os.environ.get("GOOGLE_VERTEX_BASE_URL")
    return VertexAIChatClient(google_credentials, transport.Request, project=project, location=location,
                              base_url=base_url, vertexai_model=plain(args.get("vertexai_model")),
                              safety_settings_preset=preset, timeout_s=timeout_s)
