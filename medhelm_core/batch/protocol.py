"""OpenAI's Batch API and Azure OpenAI's global batch, through the deployment's own SDK client.

Wire protocol (both vendors, https://platform.openai.com/docs/guides/batch and Azure's "global batch"):

* `POST /files` (multipart, `purpose=batch`): a JSONL file, one request a line:
  `{"custom_id": <our request key>, "method": "POST", "url": <line_url>, "body": <chat body>}`;
* `POST /batches` `{"input_file_id", "endpoint": <line_url>, "completion_window": "24h"}`;
* `GET /batches/{id}`: `status` validating → in_progress → finalizing → completed (or failed, expired,
  cancelling → cancelled), `output_file_id`, `error_file_id`, `request_counts`, `errors`;
* `GET /files/{id}/content`: output lines `{"id", "custom_id", "response": {"status_code",
  "request_id", "body"}, "error"}`. A request the API answered with an HTTP error is a line of the error
  file with its `response`; one never run (the batch expired or was cancelled first) has
  `"response": null` and an `error` (`batch_expired`, `batch_cancelled`).

Azure's differences: the SDK's `AzureOpenAI` client puts the paths under `{endpoint}/openai/` with
`?api-version=` (global batch needs 2024-07-01-preview or later) and sends `api-key`; the line `url` and
the batch `endpoint` are `/chat/completions`; the body's `model` is the deployment name, which must be
a Global Batch (or Data Zone Batch) deployment and the same on every line; up to 100,000 requests a
file (OpenAI: 50,000), 200 MB either way. Azure aims at 24 hours but says it does not expire jobs that
take longer (its status list still has `expired`, handled alike).

A line's body is the very body the online client sends (`raw_request`, serialized by the SDK's own
request builder: `OpenAICompatibleClient.wire_body`), and an output line becomes the Attempt the
online client makes of the same HTTP answer (`answer_attempt`, `error_attempt`).

Anthropic's Message Batches (`ANTHROPIC`, no files) are `medhelm_core.batch.anthropic`; `apis.batch_api`
gives the right class for a flavour.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import httpx
import openai

from medhelm_core.clients.base import Attempt
from medhelm_core.errors import MedhelmError
from medhelm_core.ratelimit import FATAL, FATAL_ENDPOINT, SERVER_ERROR, TIMEOUT, TRANSIENT

OPENAI_CLIENT = "helm.clients.openai_client.OpenAIClient"
AZURE_OPENAI_CLIENT = "helm.clients.azure_openai_client.AzureOpenAIClient"
ANTHROPIC_CLIENT = "helm.clients.anthropic_client.AnthropicMessagesClient"  # not the Stanford gateway's Claude
# HELM's Bedrock clients (medhelm_core.clients.bedrock): Nova = Converse, the others InvokeModel.
BEDROCK_PREFIX = "helm.clients.bedrock_client."
BEDROCK_CLIENTS = ("BedrockNovaClient", "BedrockLlamaClient", "BedrockMistralClient", "BedrockTitanClient",
                   "BedrockPalmyraClient")
GOOGLE_GENAI_CLIENT = "helm.clients.google_genai_client.GoogleGenAIClient"  # Gemini API mode (`batch.gemini`)

# The vendor's batch states, and ours around them (`ledger`).
VALIDATING, IN_PROGRESS, FINALIZING = "validating", "in_progress", "finalizing"
COMPLETED, FAILED, EXPIRED, CANCELLING, CANCELLED = "completed", "failed", "expired", "cancelling", "cancelled"
# Anthropic's Message Batches (`processing_status`): in_progress, canceling, then ended (whatever came of
# the requests: each result says; `batch.anthropic`).
ANTHROPIC_CANCELING, ANTHROPIC_ENDED = "canceling", "ended"
# Amazon Bedrock's model invocation jobs (`status`, botocore's ModelInvocationJobStatus; `batch.bedrock`).
BEDROCK_RUNNING = frozenset({"Submitted", "Validating", "Scheduled", "InProgress", "Stopping"})
BEDROCK_ENDED = frozenset({"Completed", "PartiallyCompleted", "Failed", "Stopped", "Expired"})
RUNNING_STATES = frozenset({VALIDATING, IN_PROGRESS, FINALIZING, CANCELLING, ANTHROPIC_CANCELING}) | BEDROCK_RUNNING
ENDED_STATES = frozenset({COMPLETED, FAILED, EXPIRED, CANCELLED, ANTHROPIC_ENDED}) | BEDROCK_ENDED
# Google's batch jobs, as the google-genai SDK names them (it maps the Gemini API's BATCH_STATE_* onto
# Vertex AI's JOB_STATE_*: `_transformers.t_job_state`; `batch.gemini`).
GEMINI_RUNNING = frozenset({"JOB_STATE_QUEUED", "JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_CANCELLING",
                            "JOB_STATE_PAUSED", "JOB_STATE_UPDATING"})
GEMINI_ENDED = frozenset({"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED",
                          "JOB_STATE_PARTIALLY_SUCCEEDED"})
RUNNING_STATES |= GEMINI_RUNNING
ENDED_STATES |= GEMINI_ENDED

# What a batch item came to (`ItemOutcome.state`).
ANSWERED = "answered"   # a result to store (ok, or HELM's non-fatal content-filter result)
RETRY = "retry"         # ask again (next batch or online): transient error, expired, cancelled, missing
FAILED_ITEM = "failed"  # the same request online fails too (HTTP 400, 401, 404...): the engine records it


@dataclass(frozen=True)
class Flavour:
    """One vendor's dialect of the batch protocol."""

    name: str
    line_url: str          # each JSONL line's `url`, and the batch's `endpoint`
    max_requests: int      # per input file
    max_bytes: int         # per input file
    sends_metadata: bool   # `metadata` on POST /batches (recovery matches input_file_id either way)
    discount: float        # the vendor's usual cut off the online price (settings' batch_discount wins)
    # True: a file is uploaded, then a batch created from it (OpenAI, Azure). False: the requests go in
    # the create call itself (Anthropic): no upload, and the ledger row waits in 'creating'.
    uploads: bool = True
    # Fewest requests a batch may hold (Bedrock's quota); fewer are left to the online path.
    min_requests: int = 1


OPENAI = Flavour("openai", "/v1/chat/completions", 50_000, 200 * 1024 * 1024, True, 0.5)
AZURE = Flavour("azure", "/chat/completions", 100_000, 200 * 1024 * 1024, False, 0.5)
# Anthropic's Message Batches: 100,000 requests or 256 MB a batch, half the online price
# (https://docs.anthropic.com/en/docs/build-with-claude/batch-processing); no metadata on a batch.
ANTHROPIC = Flavour("anthropic", "/v1/messages", 100_000, 256 * 1024 * 1024, False, 0.5, uploads=False)
# Amazon Bedrock batch inference: 50% of the on-demand price (https://aws.amazon.com/bedrock/pricing/,
# "Batch": https://docs.aws.amazon.com/bedrock/latest/userguide/capacity-limits-cost-optimization.html); its
# default quotas (https://docs.aws.amazon.com/general/latest/gr/bedrock.html, adjustable per account):
# 100 records a job at least, 50,000 at most, 1 GB an input file. No metadata on a job (its jobName
# carries our batch id). `line_url` is unused: a record's body is the model's own InvokeModel/Converse body.
BEDROCK = Flavour("bedrock", "", 50_000, 1024 * 1024 * 1024, False, 0.5, min_requests=100)
FLAVOURS = {OPENAI.name: OPENAI, AZURE.name: AZURE, ANTHROPIC.name: ANTHROPIC}
FLAVOURS[BEDROCK.name] = BEDROCK
# HELM client classes whose deployments have a batch API (the gateways' and vLLM's have none).
FLAVOUR_OF_CLIENT_CLASS = {OPENAI_CLIENT: OPENAI, AZURE_OPENAI_CLIENT: AZURE, ANTHROPIC_CLIENT: ANTHROPIC}
FLAVOUR_OF_CLIENT_CLASS.update({BEDROCK_PREFIX + name: BEDROCK for name in BEDROCK_CLIENTS})
# Gemini API batch mode: half the online price (https://ai.google.dev/gemini-api/docs/batch-mode, and
# https://ai.google.dev/gemini-api/docs/pricing, "Batch"); an input file (JSONL) of up to 2 GB. Google
# states no request count; 100,000 a file is ours. No metadata: the batch's display name carries our ids.
GEMINI = Flavour("gemini", ":generateContent", 100_000, 2 * 1024 ** 3, False, 0.5)
FLAVOURS[GEMINI.name] = GEMINI
FLAVOUR_OF_CLIENT_CLASS[GOOGLE_GENAI_CLIENT] = GEMINI
# Vertex AI batch prediction for Gemini (`batch.vertex`): the same client class in Vertex AI mode, told apart
# by its client (`apis.batch_api`), so `flavour_of` still says GEMINI for the deployment. 50% off the online
# price (https://cloud.google.com/vertex-ai/generative-ai/docs/multimodal/batch-prediction-gemini, "Batch
# processing costs 50% less than real-time inference"; https://cloud.google.com/vertex-ai/generative-ai/pricing);
# a JSONL input file in Cloud Storage of up to 200,000 requests and 1 GB (Google's stated job limits).
VERTEX = Flavour("vertex", ":generateContent", 200_000, 1024 ** 3, False, 0.5)
FLAVOURS[VERTEX.name] = VERTEX
# HELM's other Gemini-on-Vertex class (raw REST to generateContent): always Vertex AI, so VERTEX by its class.
FLAVOUR_OF_CLIENT_CLASS["helm.clients.vertexai_client.VertexAIChatClient"] = VERTEX


def flavour_of(deployment) -> Flavour | None:
    """The batch dialect of a deployment (a HELM ModelDeployment), or None: it runs online."""
    return FLAVOUR_OF_CLIENT_CLASS.get(deployment.client_spec.class_name)


class BatchAPIError(MedhelmError):
    """A files/batches call failed (the message carries no key). `transient`: worth trying again later."""

    def __init__(self, message: str, status: int | None = None, transient: bool = False):
        super().__init__(message)
        self.status = status
        self.transient = transient


@dataclass(frozen=True)
class BatchStatus:
    """What `GET /batches/{id}` said."""

    vendor_batch_id: str
    state: str
    input_file_id: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    request_counts: dict = field(default_factory=dict)   # total, completed, failed
    errors: list[str] = field(default_factory=list)      # the batch's own errors (validation)
    created_at: int | None = None
    in_progress_at: int | None = None
    ended_at: int | None = None                          # completed/failed/expired/cancelled at
    metadata: dict = field(default_factory=dict)

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES

    @classmethod
    def of(cls, batch: Any) -> "BatchStatus":
        data = batch.model_dump() if hasattr(batch, "model_dump") else dict(batch)
        errors = []
        for e in ((data.get("errors") or {}).get("data") or []):
            line = f" (line {e['line']})" if e.get("line") is not None else ""
            errors.append(f"{e.get('code') or 'error'}: {e.get('message') or ''}{line}".strip())
        ended = next((data.get(k) for k in ("completed_at", "failed_at", "expired_at", "cancelled_at")
                      if data.get(k)), None)
        return cls(vendor_batch_id=data["id"], state=str(data.get("status")), input_file_id=data.get("input_file_id"),
                   output_file_id=data.get("output_file_id"), error_file_id=data.get("error_file_id"),
                   request_counts=dict(data.get("request_counts") or {}), errors=errors,
                   created_at=data.get("created_at"), in_progress_at=data.get("in_progress_at"), ended_at=ended,
                   metadata=dict(data.get("metadata") or {}))


@dataclass
class ItemOutcome:
    """One request of a batch, as collected."""

    key: str
    state: str          # ANSWERED, RETRY or FAILED_ITEM
    attempt: Attempt    # what the online client would have made of the same HTTP answer

    @property
    def error(self) -> str | None:
        return None if self.state == ANSWERED else self.attempt.message


@dataclass
class BatchResults:
    """A batch that ended: every request key it held, with its outcome (none is dropped)."""

    vendor_batch_id: str
    state: str
    outcomes: dict[str, ItemOutcome]
    batch_error: str | None = None   # the whole batch failed, expired or was cancelled: why

    def by_state(self, state: str) -> list[str]:
        return [k for k, o in self.outcomes.items() if o.state == state]


def call_vendor(fn, sdk, vendor: str, redact):
    """`fn()`, a vendor SDK's errors (`sdk`: the openai or anthropic module, which share their
    exception names) turned into `BatchAPIError`, transient or not as the online clients classify
    them; the key redacted from every message."""
    try:
        return fn()
    except sdk.APIStatusError as e:
        status = e.status_code
        transient = status == 429 or status >= 500 or status in (408, 409)
        raise BatchAPIError(redact(f"{vendor} batch API: HTTP {status}: {e.message}"),
                            status=status, transient=transient) from None
    except sdk.APITimeoutError:
        raise BatchAPIError(f"{vendor} batch API: timed out", transient=True) from None
    except sdk.APIConnectionError as e:
        raise BatchAPIError(redact(f"{vendor} batch API: connection error: {e.__cause__ or e}"), transient=True) from None
    except httpx.TransportError as e:  # e.g. a results stream cut off mid-way
        raise BatchAPIError(redact(f"{vendor} batch API: connection error: {type(e).__name__}: {e}"),
                            transient=True) from None


def chunks_by_model(lines: dict[str, bytes], model_of: Callable[[str], str], max_requests: int,
                    max_bytes: int) -> Iterator[list[str]]:
    """The keys of `lines` split into input files of one model each (`model_of(key)`), each of at most
    `max_requests` lines and `max_bytes` (a line and its newline), in the given order."""
    by_model: dict[str, list[str]] = {}
    for key in lines:
        by_model.setdefault(model_of(key), []).append(key)
    for keys in by_model.values():
        chunk: list[str] = []
        size = 0
        for key in keys:
            n = len(lines[key]) + 1
            if chunk and (len(chunk) >= max_requests or size + n > max_bytes):
                yield chunk
                chunk, size = [], 0
            chunk.append(key)
            size += n
        if chunk:
            yield chunk


class BatchAPI:
    """The files and batches endpoints of one deployment, through its online client's SDK client
    (same base URL, auth, api-version and headers). `client` is an `OpenAICompatibleClient` (or
    `AzureOpenAIChatClient`)."""

    def __init__(self, client, flavour: Flavour, max_requests: int | None = None):
        self.client = client
        self.flavour = flavour
        self.max_requests = min(max_requests or flavour.max_requests, flavour.max_requests)
        self._sdk: openai.OpenAI = client._client

    def __repr__(self) -> str:
        return f"BatchAPI({self.flavour.name}, {self.client!r})"

    @property
    def endpoint(self) -> str:
        """scheme://host[:port] the batch goes to (never a key)."""
        return self.client.endpoint

    # -- the input file -------------------------------------------------------------------------
    def line(self, key: str, request: dict) -> bytes:
        """One JSONL line (no newline): the online body of `request` under `custom_id` = `key`.
        ValueError where HELM (and so the online client) refuses the request."""
        body = self.client.wire_body(self.client.raw_request(request))
        head = json.dumps({"custom_id": key, "method": "POST", "url": self.flavour.line_url},
                          ensure_ascii=False, separators=(",", ":"))
        return head[:-1].encode("utf-8") + b',"body":' + body + b"}"

    def lines(self, requests: dict[str, dict]) -> tuple[dict[str, bytes], dict[str, Attempt]]:
        """(key -> line) of the requests that can be sent, and (key -> fatal Attempt) of those HELM
        refuses before sending (the online client's `invalid request: ...`)."""
        good: dict[str, bytes] = {}
        bad: dict[str, Attempt] = {}
        for key, request in requests.items():
            try:
                good[key] = self.line(key, request)
            except ValueError as e:
                bad[key] = Attempt(FATAL, message=f"invalid request: {e}")
        return good, bad

    def chunks(self, lines: dict[str, bytes]) -> Iterator[list[str]]:
        """The keys split into input files within the vendor's limits (requests, bytes), each of one
        model (a batch file holds requests for a single model/deployment), in the given order."""
        return chunks_by_model(lines, lambda key: _model_of(lines[key]), self.max_requests, self.flavour.max_bytes)

    # -- the vendor's endpoints -----------------------------------------------------------------
    def upload(self, data: bytes, filename: str) -> str:
        """POST /files (purpose=batch); the file id."""
        return self._call(lambda: self._sdk.files.create(file=(filename, data, "application/jsonl"),
                                                         purpose="batch")).id

    def create(self, input_file_id: str, metadata: dict[str, str] | None = None) -> BatchStatus:
        """POST /batches."""
        extra = {"metadata": metadata} if metadata and self.flavour.sends_metadata else {}
        return BatchStatus.of(self._call(lambda: self._sdk.batches.create(
            input_file_id=input_file_id, endpoint=self.flavour.line_url, completion_window="24h", **extra)))

    def retrieve(self, vendor_batch_id: str) -> BatchStatus:
        return BatchStatus.of(self._call(lambda: self._sdk.batches.retrieve(vendor_batch_id)))

    def cancel(self, vendor_batch_id: str) -> BatchStatus:
        return BatchStatus.of(self._call(lambda: self._sdk.batches.cancel(vendor_batch_id)))

    def content(self, file_id: str) -> bytes:
        return self._call(lambda: self._sdk.files.content(file_id)).content

    def find_batch(self, input_file_id: str, since: float | None = None) -> BatchStatus | None:
        """The batch made of this input file (a create whose answer was lost), newest first, looking
        back to `since` (epoch seconds; an hour of slack for clocks)."""
        def look():
            for batch in self._sdk.batches.list(limit=100):
                if batch.input_file_id == input_file_id:
                    return batch
                if since is not None and (batch.created_at or 0) < since - 3600:
                    return None
            return None
        found = self._call(look)
        return BatchStatus.of(found) if found is not None else None

    def find_file(self, filename: str, since: float | None = None) -> str | None:
        """The id of an uploaded batch file of this name (an upload whose answer was lost)."""
        def look():
            for f in self._sdk.files.list(purpose="batch"):
                if f.filename == filename:
                    return f.id
                if since is not None and (f.created_at or 0) < since - 3600:
                    return None
            return None
        return self._call(look)

    def _call(self, fn):
        return call_vendor(fn, openai, self.flavour.name, self.client.redact)

    # -- the answers ----------------------------------------------------------------------------
    def collect_results(self, status: BatchStatus, requests: dict[str, dict]) -> BatchResults:
        """Every key of `requests` (an ended batch's) with its outcome: the output and error files read."""
        output = self.content(status.output_file_id) if status.output_file_id else b""
        errors = self.content(status.error_file_id) if status.error_file_id else b""
        return self.results(status, requests, output, errors)

    def results(self, status: BatchStatus, requests: dict[str, dict], output: bytes = b"",
                errors: bytes = b"") -> BatchResults:
        """Every key of `requests` (the batch's) with its outcome, from the output and error files."""
        start = float(status.in_progress_at or status.created_at or time.time())
        elapsed = max(0.0, float(status.ended_at or time.time()) - start)
        outcomes: dict[str, ItemOutcome] = {}
        for line in _jsonl(output, errors):
            key = line.get("custom_id")
            if key not in requests or key in outcomes:
                continue
            outcomes[key] = self._outcome(key, requests[key], line, start, elapsed)
        batch_error = None
        if status.state != COMPLETED:
            why = "; ".join(status.errors) if status.errors else "no reason given"
            batch_error = f"batch {status.vendor_batch_id} {status.state}" + (
                f": {why}" if status.state == FAILED else "")
        for key in requests:
            if key not in outcomes:
                message = (f"not run: {batch_error}" if batch_error
                           else f"missing from the output of batch {status.vendor_batch_id}")
                kind = TIMEOUT if status.state == EXPIRED else SERVER_ERROR
                outcomes[key] = ItemOutcome(key, RETRY, Attempt(kind, message=self.client.redact(message)))
        return BatchResults(status.vendor_batch_id, status.state, outcomes, batch_error)

    def _outcome(self, key: str, request: dict, line: dict, start: float, elapsed: float) -> ItemOutcome:
        response = line.get("response")
        if not isinstance(response, dict):
            error = line.get("error") or {}
            code = str(error.get("code") or "error")
            kind = TIMEOUT if code == "batch_expired" else SERVER_ERROR
            message = self.client.redact(f"{code}: {error.get('message') or 'no answer'}")
            return ItemOutcome(key, RETRY, Attempt(kind, message=message))
        status = int(response.get("status_code") or 0)
        body = response.get("body")
        if 200 <= status < 300:
            attempt = self.client.answer_attempt(request, status, body, {}, start, elapsed)
        else:
            attempt = self.client.error_attempt(status, body if body is not None else "")
        return item_outcome(key, attempt)


def item_outcome(key: str, attempt: Attempt) -> ItemOutcome:
    """A batch item's outcome from the Attempt the online path makes of the same answer: answered,
    asked again (what online would retry) or failed (what online would give up on)."""
    if attempt.result is not None:
        return ItemOutcome(key, ANSWERED, attempt)
    if attempt.kind in TRANSIENT:
        return ItemOutcome(key, RETRY, attempt)
    assert attempt.kind in (FATAL, FATAL_ENDPOINT), attempt.kind
    return ItemOutcome(key, FAILED_ITEM, attempt)


def input_file(lines: dict[str, bytes], keys: Iterable[str]) -> bytes:
    """The JSONL file of these keys' lines."""
    return b"".join(lines[k] + b"\n" for k in keys)


def _model_of(line: bytes) -> str:
    return str(json.loads(line).get("body", {}).get("model"))


def _jsonl(*files: bytes) -> Iterator[dict]:
    for data in files:
        for raw in (data or b"").split(b"\n"):
            if raw.strip():
                try:
                    obj = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(obj, dict):
                    yield obj


__all__ = ["ANSWERED", "ANTHROPIC", "AZURE", "BEDROCK", "BatchAPI", "BatchAPIError", "BatchResults", "BatchStatus",
           "ENDED_STATES", "FAILED_ITEM", "FLAVOURS", "Flavour", "ItemOutcome", "OPENAI", "RETRY", "RUNNING_STATES",
           "flavour_of", "input_file"]
