"""HELM 0.5.16's Amazon Bedrock clients (`helm/clients/bedrock_client.py`, `bedrock_utils.py`), through `boto3`.

* `BedrockNovaClient`: the Converse API, `POST /model/<modelId>/converse` with
  `{messages: [{role: user, content: [{text: prompt}]}], inferenceConfig: {temperature, maxTokens, topP}}`
  (a request's `messages` are sent as they are; no stop sequences). modelId = `bedrock_model_id`, else the model
  name with "/" -> "." (`amazon/nova-pro-v1:0` -> `amazon.nova-pro-v1:0`). The Converse API serves every
  Bedrock chat model, so the same class with `bedrock_model_id: anthropic.claude-3-7-sonnet-20250219-v1:0` (or an
  inference profile such as `us.anthropic.claude-3-7-sonnet-20250219-v1:0`, or its ARN) is Claude on Bedrock.
  request_time = the reply's `metrics.latencyMs` / 1000; request_datetime = its HTTP `Date` header.
* `BedrockLlamaClient`, `BedrockMistralClient`, `BedrockTitanClient`, `BedrockPalmyraClient`: InvokeModel,
  `POST /model/<modelId>/invoke` with the JSON body HELM builds per model family (no stop sequences, except
  Palmyra's `stop`). modelId = `bedrock_model_id`, else `amazon.<name>` (Titan) or the name with `amazon-` ->
  `<provider>.` (`meta/amazon-llama3-8b-instruct-v1:0` -> `meta.llama3-8b-instruct-v1:0`). request_time is
  measured around the call.

The text (left-stripped, except Palmyra's) goes through `truncate_and_tokenize_response_text` with the
deployment's tokenizer, where HELM passes the stop reason (Converse: `end_turn`, `max_tokens`, ...; InvokeModel:
the mapped finish reason) as the *end-of-text string*: if it occurs in the text, the text is cut there and the
finish reason becomes "stop"; otherwise it is "endoftext", or "length" past max_tokens tokens (quirk §11.1: with
`simple/tokenizer1` the text is then not cut).

Connection (as HELM's `get_bedrock_client*`): region = args `region`, else credentials.conf `<org>Region`,
`$AWS_REGION`, `$AWS_DEFAULT_REGION`, the AWS profile's; role = args `assumed_role`, else `$BEDROCK_ASSUME_ROLE`
(STS AssumeRole, session name "crfm-helm"; the credentials are refreshed before they expire); keys =
credentials.conf `<org>AccessKeyId` + `<org>SecretAccessKey` (+ `<org>SessionToken`), else boto3's standard chain
(AWS_ACCESS_KEY_ID..., AWS_PROFILE, ~/.aws, SSO, instance/container roles). botocore itself honours
`AWS_ENDPOINT_URL_BEDROCK_RUNTIME` / `AWS_ENDPOINT_URL`. Requests are SigV4-signed by botocore; it does not retry
(the engine does). One boto3 client per deployment (boto3 clients are thread-safe, sessions are not).
"""
from __future__ import annotations

import json
import os
import re
import threading
import time
from datetime import datetime
from typing import Any, Callable

from medhelm_core.clients.base import (Attempt, BlockingClient, RetryPolicy, endpoint_origin, kind_of_status,
                                       model_api, plain, redact, require_extra, truncate_and_tokenize_response_text)
from medhelm_core.errors import MedhelmError
from medhelm_core.ratelimit import (CONNECTION, FATAL, FATAL_ENDPOINT, OK, RATE_LIMITED, SERVER_ERROR, TIMEOUT,
                                    rate_limit_headers, retry_after_seconds)

_PREFIX = "helm.clients.bedrock_client."
NOVA = _PREFIX + "BedrockNovaClient"
LLAMA = _PREFIX + "BedrockLlamaClient"
MISTRAL = _PREFIX + "BedrockMistralClient"
TITAN = _PREFIX + "BedrockTitanClient"
PALMYRA = _PREFIX + "BedrockPalmyraClient"

JSON_CONTENT_TYPE = "application/json"
ROLE_SESSION_NAME = "crfm-helm"  # HELM's RoleSessionName

# botocore ClientError codes -> attempt kinds (HTTP status decides the rest).
_RATE_LIMIT_CODES = {"ThrottlingException", "TooManyRequestsException", "ServiceQuotaExceededException",
                     "Throttling", "RequestLimitExceeded", "ProvisionedThroughputExceededException"}
_SERVER_CODES = {"ModelNotReadyException", "ServiceUnavailableException", "ServiceUnavailable",
                 "InternalServerException", "InternalFailure", "ModelTimeoutException", "ModelErrorException"}
_ENDPOINT_CODES = {"AccessDeniedException", "AccessDenied", "UnrecognizedClientException",
                   "ResourceNotFoundException", "InvalidSignatureException", "ExpiredTokenException",
                   "InvalidClientTokenId", "SignatureDoesNotMatch", "MissingAuthenticationTokenException"}

_ACCESS_KEY_ID = re.compile(r"\b(AKIA|ASIA)[A-Z0-9]{12,}\b")
_SECRET_SHAPED = re.compile(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")


def _text(value: Any) -> str | None:
    """A deployment arg or credentials value as plain text (secret-looking ones are SecretStr)."""
    if value is None:
        return None
    value = plain(value)
    return str(value) if str(value) else None


# --------------------------------------------------------------------------------------------
# Request bodies and replies, per HELM class
# --------------------------------------------------------------------------------------------
def _check_prompt(request: dict) -> None:
    if request.get("prompt") and request.get("messages"):
        raise ValueError("Only one of `prompt` and `messages` may be set in request")
    if request.get("multimodal_prompt"):
        raise ValueError("`multimodal_prompt` is not supported in request")


def converse_request(request: dict, bedrock_model_id: str | None) -> dict[str, Any]:
    """The keyword arguments of HELM's `bedrock_client.converse(**raw_request)`."""
    _check_prompt(request)
    if request.get("messages"):
        messages = [{"role": m["role"], "content": [{"text": m["content"]}]} for m in request["messages"]]
    else:
        messages = [{"role": "user", "content": [{"text": request["prompt"]}]}]
    return {
        "modelId": bedrock_model_id or request["model"].replace("/", "."),
        "inferenceConfig": {"temperature": request["temperature"], "maxTokens": request["max_tokens"],
                            "topP": request["top_p"]},
        "messages": messages,
    }


def _inst_prompt(request: dict) -> str:
    return f"[INST]{request['prompt']}[/INST]"


def _llama_body(request: dict) -> dict:
    return {"prompt": _inst_prompt(request), "temperature": request["temperature"], "top_p": request["top_p"],
            "max_gen_len": request["max_tokens"]}


def _mistral_body(request: dict) -> dict:
    return {"prompt": _inst_prompt(request), "temperature": request["temperature"], "top_p": request["top_p"],
            "max_tokens": request["max_tokens"]}


def _titan_body(request: dict) -> dict:
    # HELM always sends no stop sequences to Titan.
    return {"inputText": request["prompt"],
            "textGenerationConfig": {"maxTokenCount": request["max_tokens"], "stopSequences": [],
                                     "temperature": request["temperature"], "topP": request["top_p"]}}


def _palmyra_body(request: dict) -> dict:
    _check_prompt(request)
    if request.get("messages"):
        messages = [{"role": m["role"], "content": m["content"]} for m in request["messages"]]
    else:
        messages = [{"role": "user", "content": request["prompt"]}]
    return {"messages": messages, "temperature": request["temperature"], "top_p": request["top_p"],
            "max_tokens": request["max_tokens"], "stop": request.get("stop_sequences"), "seed": request.get("random"),
            "presence_penalty": request.get("presence_penalty"),
            "frequency_penalty": request.get("frequency_penalty")}


_LOWER_REASONS = {"length": "length", "stop": "endoftext"}


def _reason(raw: str, table: dict[str, str]) -> str:
    return table.get(raw, raw.lower())


def _llama_outputs(body: dict) -> list[tuple[str, str]]:
    return [(body["generation"].lstrip(), _reason(body["stop_reason"], _LOWER_REASONS))]


def _mistral_outputs(body: dict) -> list[tuple[str, str]]:
    return [(o["text"].lstrip(), _reason(o["stop_reason"], _LOWER_REASONS)) for o in body["outputs"]]


def _titan_outputs(body: dict) -> list[tuple[str, str]]:
    table = {"LENGTH": "length", "FINISH": "endoftext"}
    return [(r["outputText"].lstrip(), _reason(r["completionReason"], table)) for r in body["results"]]


def _palmyra_outputs(body: dict) -> list[tuple[str, str]]:
    if body.get("object") == "error":
        raise _VendorError(f"BedrockPalmyraClient request failed: {body.get('message')}")
    out = []
    for choice in body["choices"]:
        if choice["message"]["role"] != "assistant":
            raise KeyError("role")
        out.append((choice["message"]["content"], _reason(choice["finish_reason"], _LOWER_REASONS)))  # no lstrip
    return out


class _VendorError(Exception):
    """A reply HELM raises on (the request fails)."""


# class -> (model provider for the default model id, body builder, reply parser)
INVOKE_FAMILIES: dict[str, tuple[str, Callable[[dict], dict], Callable[[dict], list[tuple[str, str]]]]] = {
    LLAMA: ("meta", _llama_body, _llama_outputs),
    MISTRAL: ("mistral", _mistral_body, _mistral_outputs),
    TITAN: ("amazon", _titan_body, _titan_outputs),
    PALMYRA: ("writer", _palmyra_body, _palmyra_outputs),
}


def invoke_model_id(request: dict, provider: str, bedrock_model_id: str | None) -> str:
    """HELM's BedrockClient model id: `bedrock_model_id`, else from the model name."""
    if bedrock_model_id:
        return bedrock_model_id
    name = request["model"].split("/")[-1]
    return f"amazon.{name}" if provider == "amazon" else name.replace("amazon-", f"{provider}.")


def _date_header_timestamp(date: str) -> int:
    # As HELM: the naive datetime of the GMT Date header read as local time (exact where TZ is UTC).
    return int(datetime.strptime(date, "%a, %d %b %Y %H:%M:%S GMT").timestamp())


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


# --------------------------------------------------------------------------------------------
# The client
# --------------------------------------------------------------------------------------------
class BedrockClient(BlockingClient):
    """One Bedrock deployment (any of HELM's Bedrock classes): one boto3 `bedrock-runtime` client."""

    def __init__(self, class_name: str, runtime, tokenizer, bedrock_model_id: str | None = None,
                 secrets: tuple[str, ...] = (), region: str | None = None, retry: RetryPolicy | None = None,
                 max_concurrency: int | None = None, session=None, config=None):
        from botocore import exceptions as botocore_exceptions

        self.class_name = class_name
        self._runtime = runtime
        # The boto3 session and botocore config the runtime client was made with: the batch API's
        # `bedrock` and `s3` clients share its credentials, region and retry policy (`aws_client`).
        self._session = session
        self._config = config
        self._errors = botocore_exceptions
        self.tokenizer = tokenizer
        self.bedrock_model_id = bedrock_model_id
        self.region = region
        self._secrets = tuple(s for s in secrets if s)
        self.retry = retry or RetryPolicy()
        # Concurrency is the engine's job; `max_concurrency` only bounds direct callers of complete().
        self.slots = threading.BoundedSemaphore(max_concurrency) if max_concurrency else None

    def __repr__(self) -> str:
        return (f"BedrockClient(class={self.class_name.rsplit('.', 1)[-1]}, region={self.region!r}, "
                f"bedrock_model_id={self.bedrock_model_id!r}, endpoint={self.endpoint!r})")

    def redact(self, text: str) -> str:
        text = str(text)
        for secret in self._secrets:
            text = redact(text, secret)
        text = _ACCESS_KEY_ID.sub(lambda m: m.group(1) + "***", text)
        return redact(_SECRET_SHAPED.sub("***", text))

    @property
    def endpoint(self) -> str:
        return endpoint_origin(self._runtime.meta.endpoint_url)

    @property
    def is_converse(self) -> bool:
        return self.class_name == NOVA

    def raw_request(self, request: dict) -> dict[str, Any]:
        """What goes to boto3: Converse keyword arguments, or InvokeModel's modelId and JSON body (as a dict)."""
        if self.is_converse:
            return converse_request(request, self.bedrock_model_id)
        provider, body, _ = INVOKE_FAMILIES[self.class_name]
        return {"modelId": invoke_model_id(request, provider, self.bedrock_model_id), "body": body(request)}

    def wire_body(self, raw: dict[str, Any]) -> bytes:
        """The HTTP body the online call of `raw_request` sends: InvokeModel's JSON body as `_send` dumps it;
        Converse's as botocore serializes the keyword arguments (modelId goes in the path, not the body).
        A Bedrock batch record's `modelInput` is these bytes."""
        if self.is_converse:
            operation = self._runtime.meta.service_model.operation_model("Converse")
            return self._runtime._serializer.serialize_to_request(raw, operation)["body"]
        return json.dumps(raw["body"]).encode("utf-8")

    def aws_client(self, service_name: str):
        """A boto3 client of another AWS service (the batch API's `bedrock`, `s3`) with this deployment's
        credentials, region and config; botocore honours `AWS_ENDPOINT_URL_<SERVICE>` for it as well."""
        import boto3

        session = self._session or boto3.session.Session()
        return session.client(service_name, region_name=self.region, config=self._config)

    def attempt(self, request: dict) -> Attempt:
        """Send the request once and classify what came back. Never raises for SDK outcomes."""
        try:
            if request.get("echo_prompt"):  # HELM's truncate_and_tokenize_response_text raises on it
                raise ValueError("echo_prompt is not supported by the Bedrock clients")
            raw = self.raw_request(request)
        except (ValueError, KeyError, TypeError) as e:  # HELM raises before sending: the run fails
            return Attempt(FATAL, message=f"invalid request: {e}")
        try:
            if self.slots is not None:
                with self.slots:
                    return self._send(request, raw)
            return self._send(request, raw)
        except Exception as e:  # noqa: BLE001 - classified below, never raised
            return self._classify(e)

    def _send(self, request: dict, raw: dict) -> Attempt:
        if self.is_converse:
            response = self._runtime.converse(**raw)
            return self._converse_result(request, response)
        start = time.time()
        response = self._runtime.invoke_model(body=self.wire_body(raw), modelId=raw["modelId"],
                                              accept=JSON_CONTENT_TYPE, contentType=JSON_CONTENT_TYPE)
        body = response["body"].read()  # inside the timing, as HELM's wrap_request_time
        try:
            payload = json.loads(body)
        except ValueError:
            return Attempt(SERVER_ERROR, message="malformed response (not JSON)", status=200)
        elapsed = time.time() - start
        return self._invoke_result(request, response, payload, start, elapsed)

    def _converse_result(self, request: dict, response: dict, request_datetime: int | None = None) -> Attempt:
        """A Converse reply as HELM reads it; `request_datetime` given (a batch record has no Date header)
        or from the reply's HTTP Date header."""
        headers = (response.get("ResponseMetadata") or {}).get("HTTPHeaders") or {}
        try:
            text = response["output"]["message"]["content"][0]["text"]
            stop_reason = response["stopReason"]
            completion = truncate_and_tokenize_response_text(text.lstrip(), request, self.tokenizer, stop_reason)
            request_time = response["metrics"]["latencyMs"] / 1000
            if request_datetime is None:
                request_datetime = _date_header_timestamp(headers["date"])
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as e:
            return Attempt(SERVER_ERROR, message=f"malformed Converse response: {type(e).__name__}: {e}",
                           status=200, headers=rate_limit_headers(headers))
        usage = response.get("usage") or {}
        result = {"success": True, "embedding": [], "completions": [completion], "cached": False,
                  "request_time": request_time, "request_datetime": request_datetime}
        return Attempt(OK, result=result, status=200, headers=rate_limit_headers(headers),
                       usage={"prompt_tokens": _int_or_none(usage.get("inputTokens")),
                              "completion_tokens": _int_or_none(usage.get("outputTokens"))})

    def _invoke_result(self, request: dict, response: dict, payload: Any, start: float, elapsed: float) -> Attempt:
        headers = (response.get("ResponseMetadata") or {}).get("HTTPHeaders") or {}
        _, _, outputs = INVOKE_FAMILIES[self.class_name]
        try:
            completions = [truncate_and_tokenize_response_text(text, request, self.tokenizer, reason)
                           for text, reason in outputs(payload)]
        except _VendorError as e:
            return Attempt(FATAL, message=self.redact(str(e)), status=200)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as e:
            return Attempt(SERVER_ERROR, message=f"malformed InvokeModel response: {type(e).__name__}: {e}",
                           status=200, headers=rate_limit_headers(headers))
        result = {"success": True, "embedding": [], "completions": completions, "cached": False,
                  "request_time": elapsed, "request_datetime": int(start)}
        return Attempt(OK, result=result, status=200, headers=rate_limit_headers(headers),
                       usage=_invoke_usage(headers, payload))

    def _classify(self, e: Exception) -> Attempt:
        errors = self._errors
        if isinstance(e, errors.ClientError):
            return self._client_error(e)
        message = self.redact(f"{type(e).__name__}: {e}")
        if isinstance(e, (errors.ReadTimeoutError, errors.ConnectTimeoutError)):
            return Attempt(TIMEOUT, message=f"request timed out: {message}")
        if isinstance(e, (errors.ConnectionError, errors.HTTPClientError)):
            return Attempt(CONNECTION, message=f"connection error: {message}")
        if isinstance(e, (errors.NoCredentialsError, errors.PartialCredentialsError,
                          errors.CredentialRetrievalError, errors.NoRegionError)):
            return Attempt(FATAL_ENDPOINT, message=f"AWS credentials/region: {message}")
        if isinstance(e, errors.ParamValidationError):
            return Attempt(FATAL, message=f"invalid request: {message}")
        if isinstance(e, ValueError):  # e.g. truncate_and_tokenize_response_text on echo_prompt
            return Attempt(FATAL, message=message)
        return Attempt(SERVER_ERROR, message=f"Bedrock error: {message}")

    def _client_error(self, e) -> Attempt:
        response = getattr(e, "response", None) or {}
        error = response.get("Error") or {}
        meta = response.get("ResponseMetadata") or {}
        code = str(error.get("Code") or "")
        status = _int_or_none(meta.get("HTTPStatusCode"))
        headers = rate_limit_headers(meta.get("HTTPHeaders") or {})
        retry_after = retry_after_seconds(headers)
        message = self.redact(f"{code or 'error'} (HTTP {status}): {error.get('Message') or e}")
        # The error code first (ModelNotReadyException comes with HTTP 429, ServiceQuotaExceeded with 400).
        if code in _RATE_LIMIT_CODES:
            kind = RATE_LIMITED
        elif code in _SERVER_CODES:
            kind = SERVER_ERROR
        elif code in _ENDPOINT_CODES:
            kind = FATAL_ENDPOINT
        elif code == "ValidationException":
            kind = FATAL
        else:
            kind = kind_of_status(status)
        prefix = {RATE_LIMITED: "rate limited", SERVER_ERROR: "server error"}.get(kind, "Bedrock error")
        transient = kind in (RATE_LIMITED, SERVER_ERROR)
        return Attempt(kind, message=f"{prefix}: {message}", status=status,
                       retry_after_s=retry_after if transient else None, headers=headers)


def _invoke_usage(headers: dict, payload: Any) -> dict:
    """Token counts: Bedrock's x-amzn-bedrock-*-token-count headers, else the model family's own fields."""
    prompt = _int_or_none(headers.get("x-amzn-bedrock-input-token-count"))
    completion = _int_or_none(headers.get("x-amzn-bedrock-output-token-count"))
    if isinstance(payload, dict):
        if prompt is None:
            prompt = _int_or_none(payload.get("prompt_token_count", payload.get("inputTextTokenCount")))
        if completion is None:
            completion = _int_or_none(payload.get("generation_token_count"))
            if completion is None and isinstance(payload.get("results"), list):
                counts = [_int_or_none(r.get("tokenCount")) for r in payload["results"] if isinstance(r, dict)]
                completion = sum(counts) if counts and None not in counts else None
            usage = payload.get("usage")
            if completion is None and isinstance(usage, dict):  # Palmyra (OpenAI-shaped)
                prompt = prompt if prompt is not None else _int_or_none(usage.get("prompt_tokens"))
                completion = _int_or_none(usage.get("completion_tokens"))
    return {"prompt_tokens": prompt, "completion_tokens": completion}


# --------------------------------------------------------------------------------------------
# Factory
# --------------------------------------------------------------------------------------------
def _session(boto3, botocore_session_module, deployment, credentials, region: str | None, role: str | None,
             sts_config) -> tuple[Any, tuple[str, ...]]:
    """A boto3 Session with the deployment's credentials (static keys from credentials.conf, else the standard
    chain; then AssumeRole when asked). Returns it and the secrets to redact."""
    org = deployment.host_organization
    bs = botocore_session_module.Session()
    if region:
        bs.set_config_variable("region", region)
    key_id, secret = _text(credentials.get(f"{org}AccessKeyId")), _text(credentials.get(f"{org}SecretAccessKey"))
    token = _text(credentials.get(f"{org}SessionToken"))
    if key_id and secret:
        bs.set_credentials(key_id, secret, token)
    where = (f"set $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY (or $AWS_PROFILE, ~/.aws/credentials, an instance "
             f"role), or '{org}AccessKeyId' and '{org}SecretAccessKey' in {credentials.source}")
    try:
        base = bs.get_credentials()
    except Exception as e:  # noqa: BLE001 - a bad profile, an unreadable config file...
        raise MedhelmError(f"deployment {deployment.name!r}: AWS credentials could not be loaded "
                           f"({type(e).__name__}): {where}") from None
    if base is None:
        raise MedhelmError(f"deployment {deployment.name!r}: no AWS credentials for Bedrock: {where}")
    frozen = base.get_frozen_credentials() if not hasattr(base, "refresh_needed") else None
    secrets = (frozen.secret_key, frozen.token) if frozen is not None else ()
    if role:
        from botocore.credentials import AssumeRoleCredentialFetcher, DeferredRefreshableCredentials

        def sts_client(service_name, **kwargs):
            return bs.create_client(service_name, region_name=region, config=sts_config, **kwargs)

        fetcher = AssumeRoleCredentialFetcher(sts_client, base, str(role),
                                              extra_args={"RoleSessionName": ROLE_SESSION_NAME})
        # Refreshed before expiry (HELM assumes the role once; its keys expire after an hour).
        bs._credentials = DeferredRefreshableCredentials(refresh_using=fetcher.fetch_credentials,
                                                         method="assume-role")
    return boto3.session.Session(botocore_session=bs), secrets


@model_api(NOVA, LLAMA, MISTRAL, TITAN, PALMYRA)
def bedrock_client(deployment, credentials, max_concurrency: int | None = None, timeout_s: float = 600.0,
                   tokenizer_config=None) -> BedrockClient:
    """The client of a Bedrock deployment (HELM's args `region`, `assumed_role`, `bedrock_model_id`)."""
    class_name = deployment.client_spec.class_name
    boto3 = require_extra("boto3", "aws", deployment.name, class_name)
    botocore_config = require_extra("botocore.config", "aws", deployment.name, class_name)
    botocore_session = require_extra("botocore.session", "aws", deployment.name, class_name)
    from medhelm_core.tokenizers import get_tokenizer

    args = deployment.client_spec.args
    org = deployment.host_organization
    if not deployment.tokenizer_name:
        raise MedhelmError(f"deployment {deployment.name!r}: client class {class_name.rsplit('.', 1)[-1]} needs a "
                           f"tokenizer_name (HELM re-tokenizes Bedrock replies) in "
                           f"{deployment.source or 'model_deployments.yaml'}")
    tokenizer = get_tokenizer(deployment.tokenizer_name, tokenizer_config)
    region = (_text(args.get("region")) or _text(credentials.get(f"{org}Region"))
              or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None)
    role = _text(args.get("assumed_role")) or os.environ.get("BEDROCK_ASSUME_ROLE") or None
    timeouts = {"connect_timeout": min(float(timeout_s), 60.0), "read_timeout": float(timeout_s)}
    no_retries = {"total_max_attempts": 1, "mode": "standard"}  # the engine retries
    sts_config = botocore_config.Config(retries=no_retries, **timeouts)
    session, secrets = _session(boto3, botocore_session, deployment, credentials, region, role, sts_config)
    region = region or session.region_name
    if not region:
        raise MedhelmError(f"deployment {deployment.name!r}: no AWS region for Bedrock: set client_spec.args.region "
                           f"in {deployment.source or 'model_deployments.yaml'}, '{org}Region' in "
                           f"{credentials.source}, or $AWS_REGION")
    config = botocore_config.Config(retries=no_retries, max_pool_connections=max(10, max_concurrency or 64),
                                    **timeouts)
    runtime = session.client("bedrock-runtime", region_name=region, config=config)
    return BedrockClient(class_name, runtime, tokenizer, bedrock_model_id=_text(args.get("bedrock_model_id")),
                         secrets=secrets, region=region, max_concurrency=max_concurrency, session=session,
                         config=config)
