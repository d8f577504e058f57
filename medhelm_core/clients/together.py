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

Also here: HELM's TogetherChatClient and TogetherCompletionClient (Together's `/v1/chat/completions`
and `/v1/completions` as the `together` SDK 1.6.0 sends them, with the model's default stop tokens
from `GET /v1/models`): see the section below.
"""
from __future__ import annotations

import base64
import copy
import json
import os
import platform
import re
import threading
import time
from typing import Any, Mapping
from urllib.parse import urlsplit

import httpx

from medhelm_core.clients.base import (Attempt, BlockingClient, endpoint_origin, model_api, plain, redact,
                                       status_attempt, truncate_sequence)
from medhelm_core.helm_config.deployments import resolve_api_key, resolve_base_url
from medhelm_core.errors import MedhelmError
from medhelm_core.ratelimit import (CONNECTION, FATAL, FATAL_ENDPOINT, OK, SERVER_ERROR, TIMEOUT, rate_limit_headers,
                                    retry_after_seconds)

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
        return status_attempt(status, message, headers, retry_after_seconds(headers))


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
        api_key=resolve_api_key(deployment, credentials).get_secret_value(),
        together_model=plain(args.get("together_model")),
        url=inference_url(resolve_base_url(deployment, credentials)),
        timeout_s=timeout_s,
    )


# ---------------------------------------------------------------------------------------------
# TogetherChatClient / TogetherCompletionClient: Together's OpenAI-style API through its `together`
# SDK (HELM 0.5.16's [together] extra: together~=1.1, i.e. 1.6.0 on Python 3.11), sent here with
# httpx as that SDK puts it on the wire.
#
# Wire (together 1.6.0): `POST <base>/chat/completions` (`/completions` for the completion class),
# base = $TOGETHER_BASE_URL or https://api.together.xyz/v1 (HELM passes the SDK no base URL; ours also
# takes a `base_url` arg / `<org>BaseUrl`), with a trailing "/" enforced. Headers: Authorization
# (Bearer), User-Agent "Together/v1 PythonBindings/1.6.0", X-Together-Client-User-Agent (JSON
# metadata), Content-Type application/json. Body: `json.dumps` (default separators, ASCII) of the
# SDK's request model dumped with exclude_none, so keys in the model's field order:
#   chat:       messages, model, max_tokens, stop, temperature, top_p, top_k, stream(false), logprobs,
#               echo, n[, response_format]
#   completion: prompt, model, max_tokens, stop, temperature, top_p, top_k, stream(false), logprobs,
#               echo, n
# temperature/top_p as floats (pydantic coerces 0 -> 0.0), `logprobs` = 0 with `disable_logprobs`
# else min(top_k_per_token, 1), `top_k` = top_k_per_token, `echo` = echo_prompt, `n` = num_completions,
# `stop` = the request's stop sequences + the model's default stop tokens. Those HELM gets once per
# process from `GET <base>/models` (each model's `config["stop"]`, by lower-cased id; a model not in
# the list: HELM raises "Unknown together_model ..." and the run fails). Here: once per base URL.
#
# Result (HELM's make_request): per choice, tokens from `logprobs.tokens`/`token_logprobs` (up to the
# first missing token text; a missing logprob counts 0.0), logprob = their sum (0.0 without tokens),
# text = message content through the output processor, then `parse_thinking` (per model name) or the
# message's `reasoning_content` / `reasoning` as `thinking`. No finish_reason (HELM never sets it for
# this class) and no truncate_sequence. HELM's failed results (any SDK error) have no error_flags, so
# HELM retries them and then fails the run: here they are classified for the engine's retries.
# ---------------------------------------------------------------------------------------------
CHAT_CLASS_NAME = "helm.clients.together_client.TogetherChatClient"
COMPLETION_CLASS_NAME = "helm.clients.together_client.TogetherCompletionClient"
TOGETHER_BASE_URL = "https://api.together.xyz/v1"
TOGETHER_BASE_URL_ENV = "TOGETHER_BASE_URL"
TOGETHER_SDK_VERSION = "1.6.0"  # the SDK whose wire this reproduces (crfm-helm[together] resolves to it)
_CHAT_ARGS = {"together_model", "disable_logprobs", "output_processor", "parse_thinking", "api_key", "base_url"}
_COMPLETION_ARGS = {"together_model", "disable_logprobs", "api_key", "base_url"}
# together.types.common.FinishReason: any other value fails the SDK's response model.
_FINISH_REASONS = {"length", "stop", "eos", "tool_calls", "error", ""}
_ROLES = {"assistant", "system", "user", "tool"}
_CONTENT_TYPES = {"text", "image_url", "video_url", "audio_url"}


def sdk_base_url(base_url: str | None, env: Mapping[str, str] | None = None) -> str:
    """The SDK's base URL: the given one, else $TOGETHER_BASE_URL, else Together's; always ending in "/"."""
    env = os.environ if env is None else env
    base = base_url or env.get(TOGETHER_BASE_URL_ENV) or TOGETHER_BASE_URL
    return base if base.endswith("/") else base + "/"


def _sdk_headers(api_key: str) -> dict[str, str]:
    """together.utils.get_headers (a POST adds Content-Type)."""
    metadata = {
        "bindings_version": TOGETHER_SDK_VERSION,
        "httplib": "requests",
        "lang": "python",
        "lang_version": platform.python_version(),
        "platform": platform.platform(),
        "publisher": "together",
        "uname": " ".join(v for k, v in platform.uname()._asdict().items() if k != "node"),
    }
    return {"X-Together-Client-User-Agent": json.dumps(metadata), "Authorization": f"Bearer {api_key}",
            "User-Agent": f"Together/v1 PythonBindings/{TOGETHER_SDK_VERSION}"}


# -- the SDK's request models, dumped with exclude_none ------------------------------------------
def _dump_part(part: Any) -> dict:
    """ChatCompletionMessageContent: type, text, image_url, video_url, audio_url, then extra keys."""
    if not isinstance(part, dict) or part.get("type") not in _CONTENT_TYPES:
        raise ValueError(f"invalid message content part {part!r}")
    out: dict[str, Any] = {"type": part["type"]}
    for key in ("text", "image_url", "video_url", "audio_url"):
        value = part.get(key)
        if value is None:
            continue
        if key == "text":
            if not isinstance(value, str):
                raise ValueError(f"invalid message text {value!r}")
            out[key] = value
        else:
            if not isinstance(value, dict) or not isinstance(value.get("url"), str):
                raise ValueError(f"invalid {key} {value!r}")
            out[key] = {"url": value["url"], **{k: v for k, v in value.items() if k != "url" and v is not None}}
    out.update((k, v) for k, v in part.items() if k not in out and k not in ("text", "image_url", "video_url",
                                                                           "audio_url") and v is not None)
    return out


def _dump_message(message: Any) -> dict:
    """ChatCompletionMessage: role, content, tool_calls, then extra keys (None values dropped)."""
    if not isinstance(message, dict) or str(message.get("role")) not in _ROLES:
        raise ValueError(f"invalid message {message!r}")
    out: dict[str, Any] = {"role": str(message["role"])}
    content = message.get("content")
    if isinstance(content, str):
        out["content"] = content
    elif isinstance(content, list):
        out["content"] = [_dump_part(p) for p in content]
    elif content is not None:
        raise ValueError(f"invalid message content {content!r}")
    if message.get("tool_calls") is not None:
        out["tool_calls"] = message["tool_calls"]
    out.update((k, v) for k, v in message.items() if k not in ("role", "content", "tool_calls") and v is not None)
    return out


def _float(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"not a number: {value!r}")
    return float(value)


def _int(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise ValueError(f"not an integer: {value!r}")
    return int(value)


def _sampling(raw: dict, request: dict, stop: list[str], disable_logprobs: bool) -> None:
    """The keys after `model`, in the SDK models' order, None values left out."""
    for key, value in (("max_tokens", _int(request.get("max_tokens"))),
                       ("stop", [str(s) for s in stop]),
                       ("temperature", _float(request.get("temperature"))),
                       ("top_p", _float(request.get("top_p"))),
                       ("top_k", _int(request.get("top_k_per_token"))),
                       ("stream", False),
                       ("logprobs", 0 if disable_logprobs else _int(min(request["top_k_per_token"], 1))),
                       ("echo", None if request.get("echo_prompt") is None else bool(request["echo_prompt"])),
                       ("n", _int(request.get("num_completions")))):
        if value is not None:
            raw[key] = value


def _jpeg_base64(path: str) -> str:
    """HELM's encode_base64: the image re-encoded by Pillow as an RGB JPEG."""
    import io

    from PIL import Image

    buffer = io.BytesIO()
    with Image.open(path) as image:
        image.convert("RGB").save(buffer, format="JPEG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def helm_messages(request: dict) -> list[dict]:
    """TogetherChatClient's messages: the request's, else its multimodal prompt as one user message,
    else the prompt as one (after HELM's Request.validate)."""
    messages, prompt, multimodal = request.get("messages"), request.get("prompt"), request.get("multimodal_prompt")
    if (messages and prompt) or (messages and multimodal) or (prompt and multimodal):
        raise ValueError("Exactly one of the messages, prompt, multimodal_prompt fields should be set")
    if messages:
        return list(messages)
    if multimodal:
        contents = []
        for media in multimodal.get("media_objects") or []:
            kind = (media.get("content_type") or "").split("/")[0]
            if kind == "image" and media.get("location"):
                location = media["location"]
                if urlsplit(location).scheme not in ("http", "https"):  # a local file: sent inline
                    location = f"data:image/jpeg;base64,{_jpeg_base64(location)}"
                contents.append({"type": "image_url", "image_url": {"url": location}})
            elif kind == "text":
                if media.get("text") is None:
                    raise ValueError("Media object with text content type must have text set")
                contents.append({"type": "text", "text": media["text"]})
            else:
                raise ValueError(f"Unrecognized MediaObject type {media.get('content_type')}")
        return [{"role": "user", "content": contents}]
    return [{"role": "user", "content": request["prompt"]}]


# -- thinking parsers (HELM's _parse_thinking, chosen by the request's model name) ---------------
def _think_split(pattern_full: str, pattern_open: str, text: str) -> tuple[str, str]:
    match = re.match(pattern_full, text, re.DOTALL)
    if match:
        return match.group(1), match.group(2)
    match = re.match(pattern_open, text, re.DOTALL)
    if match:
        return match.group(1), ""
    return text, ""


def parse_thinking(text: str, model_name: str) -> tuple[str, str]:
    """(thinking, answer) as HELM splits a deepseek-r1 / qwen3 / glm-4.5 reply."""
    if "deepseek-r1" in model_name or "qwen3" in model_name:
        return _think_split(r"<think>\n(.*)\n</think>\n{0,2}(.*)", r"<think>\n?(.*)", text)
    if "glm-4.5" in model_name:
        return _think_split(r"\n<think>(.*)</think>(.*)", r"\n<think>(.*)", text)
    raise ValueError(f"No thinking parser available for model {model_name}")


def _sdk_error_text(error: dict) -> str:
    """The SDK's text of an API error (its TogetherErrorResponse dumped without None values)."""
    fields = {"message": error.get("message"), "type_": error.get("type"), "param": error.get("param"),
              "code": error.get("code")}
    fields.update((k, v) for k, v in error.items() if k not in ("message", "type", "param", "code"))
    return json.dumps({k: v for k, v in fields.items() if v is not None})


class _Failed(Exception):
    def __init__(self, attempt: Attempt):
        self.attempt = attempt


class _StopTokens:
    """HELM's default stop tokens: `GET <base>/models` once (per base URL here; per process in HELM),
    then each model's config["stop"] by lower-cased id. A failed fetch is not remembered."""

    _tables: dict[str, dict[str, list]] = {}
    _lock = threading.Lock()

    @classmethod
    def remember(cls, base_url: str, table: Mapping[str, list]) -> None:
        with cls._lock:
            cls._tables[sdk_base_url(base_url)] = {k.lower(): list(v) for k, v in table.items()}

    @classmethod
    def forget(cls) -> None:
        with cls._lock:
            cls._tables.clear()

    _fetching: dict[str, threading.Lock] = {}

    @classmethod
    def get(cls, client: "_TogetherSDKClient", together_model: str) -> list:
        with cls._lock:  # one fetch per base URL, not one per thread; a slow API holds up only its own
            fetching = cls._fetching.setdefault(client.base_url, threading.Lock())
        with fetching:
            with cls._lock:
                table = cls._tables.get(client.base_url)
            if table is None:
                table = client._fetch_stop_tokens()
                with cls._lock:
                    cls._tables[client.base_url] = table
        stop = table.get(together_model.lower())
        if stop is None:
            raise _Failed(Attempt(FATAL_ENDPOINT, message=f"Unknown together_model {together_model}"))
        return stop


def remember_stop_tokens(base_url: str, table: Mapping[str, list]) -> None:
    """Give the models list of an API (model id -> default stop tokens) without fetching it: for
    stand-ins that serve no `GET /models`."""
    _StopTokens.remember(base_url, table)


class _TogetherSDKClient(BlockingClient):
    """What the two SDK classes share: auth, base URL, the models list, HTTP and error classification."""

    _path = ""
    _name = ""

    def __init__(self, api_key: str, together_model: str | None = None, base_url: str | None = None,
                 disable_logprobs: bool = False, timeout_s: float = 600.0, http_client: httpx.Client | None = None):
        self._secret = api_key or ""
        self._headers = _sdk_headers(api_key)
        self.together_model = together_model
        self.disable_logprobs = bool(disable_logprobs)
        self.base_url = sdk_base_url(base_url)
        self.url = self.base_url + self._path
        # The SDK's requests session has the same timeout (600 s by default); no SDK-side retries here.
        self._http = http_client or httpx.Client(timeout=timeout_s, follow_redirects=True)

    def __repr__(self) -> str:
        return f"{self._name}(url={self.url!r}, together_model={self.together_model!r})"

    def redact(self, text: str) -> str:
        return redact(text, self._secret)

    @property
    def endpoint(self) -> str:
        return endpoint_origin(self.base_url)

    def model_for(self, request: dict) -> str:
        return self.together_model if self.together_model is not None else request["model"]

    # -- HTTP ---------------------------------------------------------------------------------
    def _send(self, method: str, url: str, body: bytes | None) -> httpx.Response:
        headers = dict(self._headers)
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            return self._http.request(method, url, content=body, headers=headers)
        except httpx.TimeoutException:
            raise _Failed(Attempt(TIMEOUT, message="Request timed out")) from None
        except httpx.HTTPError as e:
            raise _Failed(Attempt(CONNECTION, message=self.redact(f"Error communicating with API: {e}"))) from None

    def _reply(self, response: httpx.Response) -> tuple[Any, dict[str, str]]:
        """The SDK's _interpret_response_line: the JSON of a 2xx reply, or the classified error."""
        headers = translate_rate_limit_headers(response.headers)
        status = response.status_code
        text = response.text
        if "text/plain" in response.headers.get("content-type", ""):
            data: Any = {"message": text}
        else:
            try:
                data = json.loads(text) if status != 204 else {}
            except ValueError:
                data = None
        if 200 <= status < 300:
            if data is None:
                raise _Failed(Attempt(SERVER_ERROR, message=self.redact(f"Error code: {status} -{text[:500]}"),
                                      status=status, headers=headers))
            return data, headers
        error = data.get("error") if isinstance(data, dict) else None
        detail = _sdk_error_text(error) if isinstance(error, dict) else text[:500]
        message = self.redact(f"Error code: {status} - {detail}")
        raise _Failed(status_attempt(status, message, headers, retry_after_seconds(headers)))

    def _fetch_stop_tokens(self) -> dict[str, list]:
        data, _ = self._reply(self._send("GET", self.base_url + "models", None))
        try:
            # HELM reads `config["stop"]` of every model in the list (one without: HELM fails).
            return {str(m["id"]).lower(): list(m["config"]["stop"]) for m in data}
        except (KeyError, TypeError) as e:
            raise _Failed(Attempt(SERVER_ERROR, message=f"malformed Together models list: {e!r}")) from None

    # -- one attempt --------------------------------------------------------------------------
    def attempt(self, request: dict) -> Attempt:
        """Send the request once and classify. Never raises for HTTP outcomes."""
        try:
            try:
                raw = self.raw_request(request)
            except (KeyError, TypeError, ValueError, OverflowError, OSError, ImportError) as e:
                return Attempt(FATAL, message=f"invalid request: {e}")
            try:
                body = json.dumps(raw, allow_nan=False).encode()
            except (TypeError, ValueError) as e:
                return Attempt(FATAL, message=f"invalid request: {e}")
            start = time.time()
            data, headers = self._reply(self._send("POST", self.url, body))
            elapsed = time.time() - start
            try:
                completions = self._completions(data, request)
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                # HELM: the SDK's response model rejects it (a failed result, retried) or its parser raises
                return Attempt(SERVER_ERROR, message=self.redact(f"malformed Together response: {e}"),
                               status=200, headers=headers)
        except _Failed as failed:
            return failed.attempt
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else None
        result = {"success": True, "embedding": [], "completions": completions, "cached": False,
                  "request_time": elapsed, "request_datetime": int(start)}
        # HELM cuts nothing: the texts are as the API returned them.
        return Attempt(OK, result=result, status=200, headers=headers,
                       usage={"prompt_tokens": usage.get("prompt_tokens"),
                              "completion_tokens": usage.get("completion_tokens")} if usage else None,
                       untruncated=[c["text"] for c in completions] if request.get("stop_sequences") else None)

    def _stop(self, request: dict, model: str) -> list:
        return list(request.get("stop_sequences") or []) + _StopTokens.get(self, model)

    @staticmethod
    def _choices(data: Any) -> list:
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
            raise ValueError("no choices")
        for choice in data["choices"]:
            if not isinstance(choice, dict):
                raise ValueError(f"invalid choice {choice!r}")
            if choice.get("finish_reason") is not None and choice["finish_reason"] not in _FINISH_REASONS:
                raise ValueError(f"invalid finish_reason {choice['finish_reason']!r}")
        return data["choices"]

    @staticmethod
    def _tokens(choice: dict) -> tuple[list, float]:
        """Tokens from Together's logprobs ({tokens, token_logprobs}); a missing logprob counts 0.0."""
        logprobs = choice.get("logprobs")
        if logprobs is None:
            return [], 0.0
        if not isinstance(logprobs, dict):
            raise ValueError(f"invalid logprobs {logprobs!r}")
        texts, values = logprobs.get("tokens") or [], logprobs.get("token_logprobs") or []
        tokens = []
        for i in range(max(len(texts), len(values))):
            text = texts[i] if i < len(texts) else None
            if text is None:
                break
            value = values[i] if i < len(values) else None
            if not isinstance(text, str) or (value is not None and (isinstance(value, bool) or
                                                                    not isinstance(value, (int, float)))):
                raise ValueError(f"invalid logprobs {logprobs!r}")
            tokens.append({"text": text, "logprob": float(value) if value else 0.0})
        return tokens, (sum(t["logprob"] for t in tokens) if tokens else 0.0)


class TogetherChatClient(_TogetherSDKClient):
    """HELM's TogetherChatClient (thread-safe: one httpx client; the stop-token table behind a lock)."""

    _path = "chat/completions"
    _name = "TogetherChatClient"

    def __init__(self, api_key: str, together_model: str | None = None, base_url: str | None = None,
                 disable_logprobs: bool = False, output_processor: str | None = None, parse_thinking: bool = False,
                 timeout_s: float = 600.0, http_client: httpx.Client | None = None):
        super().__init__(api_key, together_model, base_url, disable_logprobs, timeout_s, http_client)
        from medhelm_core.clients.openai_compatible import OUTPUT_PROCESSORS

        self.output_processor = OUTPUT_PROCESSORS.get(output_processor) if output_processor else None
        if output_processor and self.output_processor is None:
            raise ValueError(f"unknown output_processor {output_processor!r}")
        self.parse_thinking = bool(parse_thinking)

    def raw_request(self, request: dict) -> dict[str, Any]:
        """HELM's convert_to_raw_chat_request as the SDK dumps it (may fetch the models list)."""
        messages = [_dump_message(m) for m in helm_messages(request)]
        model = self.model_for(request)
        raw: dict[str, Any] = {"messages": messages, "model": model}
        _sampling(raw, request, self._stop(request, model), self.disable_logprobs)
        schema = (request.get("response_format") or {}).get("json_schema")
        if schema:
            raw["response_format"] = {"type": "json_object", "schema": schema}
        return raw

    def _completions(self, data: Any, request: dict) -> list[dict]:
        completions = []
        for choice in self._choices(data):
            message = choice.get("message")
            if not isinstance(message, dict) or message.get("role") != "assistant":
                raise ValueError(f"no assistant message in {choice!r}")
            text = message.get("content")
            if not isinstance(text, str):  # HELM would store a null text (or fail parsing it)
                raise ValueError(f"no text content in {message!r}")
            tokens, logprob = self._tokens(choice)
            if self.output_processor:
                text = self.output_processor(text)
            thinking = None
            if self.parse_thinking:
                thinking, text = parse_thinking(text, request["model"])
            elif message.get("reasoning_content") is not None:
                thinking = message["reasoning_content"]
            elif message.get("reasoning") is not None:
                thinking = message["reasoning"]
            completion: dict[str, Any] = {"text": text, "logprob": logprob, "tokens": tokens}
            if thinking is not None:
                completion["thinking"] = {"text": thinking}
            completions.append(completion)
        return completions


class TogetherCompletionClient(_TogetherSDKClient):
    """HELM's TogetherCompletionClient (text completion models)."""

    _path = "completions"
    _name = "TogetherCompletionClient"

    def raw_request(self, request: dict) -> dict[str, Any]:
        model = self.model_for(request)
        if not isinstance(request.get("prompt"), str):
            raise ValueError("the completion API takes a text prompt")
        raw: dict[str, Any] = {"prompt": request["prompt"], "model": model}
        _sampling(raw, request, self._stop(request, model), self.disable_logprobs)
        return raw

    def _completions(self, data: Any, request: dict) -> list[dict]:
        completions = []
        for choice in self._choices(data):
            # CompletionChoicesData needs an index, a finish_reason and a text; HELM asserts a non-empty text.
            if not isinstance(choice.get("index"), int) or "finish_reason" not in choice:
                raise ValueError(f"invalid choice {choice!r}")
            if not isinstance(choice.get("text"), str) or not choice["text"]:
                raise ValueError(f"no text in {choice!r}")
            tokens, logprob = self._tokens(choice)
            completions.append({"text": choice["text"], "logprob": logprob, "tokens": tokens})
        return completions


def _sdk_client_args(deployment, credentials, allowed: set[str], class_label: str) -> dict[str, Any]:
    args = deployment.client_spec.args
    unknown = sorted(set(args) - allowed)
    if unknown:
        raise MedhelmError(f"deployment {deployment.name!r}: {class_label} has no argument {unknown[0]!r} "
                           f"(it takes {', '.join(sorted(allowed))})")
    model = plain(args.get("together_model"))
    return {"api_key": resolve_api_key(deployment, credentials).get_secret_value(),
            "together_model": str(model) if model is not None else None,
            "base_url": resolve_base_url(deployment, credentials),
            "disable_logprobs": bool(plain(args.get("disable_logprobs")))}


@model_api(CHAT_CLASS_NAME)
def together_chat_client(deployment, credentials, max_concurrency: int | None = None,
                         timeout_s: float = 600.0) -> TogetherChatClient:
    """The client of a TogetherChatClient deployment (key: togetherApiKey or $TOGETHER_API_KEY)."""
    kwargs = _sdk_client_args(deployment, credentials, _CHAT_ARGS, "TogetherChatClient")
    args = deployment.client_spec.args
    processor = plain(args.get("output_processor"))
    try:
        return TogetherChatClient(**kwargs, output_processor=processor,
                                  parse_thinking=bool(plain(args.get("parse_thinking"))), timeout_s=timeout_s)
    except ValueError as e:
        raise MedhelmError(f"deployment {deployment.name!r}: {e}") from None


@model_api(COMPLETION_CLASS_NAME)
def together_completion_client(deployment, credentials, max_concurrency: int | None = None,
                               timeout_s: float = 600.0) -> TogetherCompletionClient:
    """The client of a TogetherCompletionClient deployment."""
    return TogetherCompletionClient(**_sdk_client_args(deployment, credentials, _COMPLETION_ARGS,
                                                       "TogetherCompletionClient"), timeout_s=timeout_s)
