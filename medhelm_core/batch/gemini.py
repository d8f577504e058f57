"""The Gemini API's batch mode, through the deployment's own `GoogleGenAIClient` (its google-genai SDK
client: same base URL, `x-goog-api-key`). Gemini API mode only: a Vertex AI deployment (batch prediction
jobs, files in Cloud Storage) is `batch.vertex`'s.

Wire protocol (https://ai.google.dev/gemini-api/docs/batch-mode, https://ai.google.dev/api/batch-api,
https://ai.google.dev/api/files; the SDK's `batches.py`, `files.py` and `_api_client.py` are what is sent):

* the input file, uploaded through the Files API's resumable upload: `POST /upload/v1beta/files`
  (`X-Goog-Upload-Protocol: resumable`, `X-Goog-Upload-Command: start`, body `{"file": {"displayName",
  "mimeType", "sizeBytes"}}`), answered with an `x-goog-upload-url`, then the bytes POSTed there with
  `X-Goog-Upload-Command: upload, finalize` (answer `{"file": File}`, `x-goog-upload-status: final`).
  JSONL, a line a request: `{"key": <our request key>, "request": <GenerateContentRequest>}`, up to 2 GB;
* `POST /v1beta/models/{model}:batchGenerateContent` `{"batch": {"displayName", "inputConfig":
  {"fileName": "files/..."}}}`: one model a batch, answered with a long-running Operation `{"name":
  "batches/...", "metadata": GenerateContentBatch}`;
* `GET /v1beta/batches/{id}`: the Operation again; `metadata.state` BATCH_STATE_PENDING → RUNNING →
  SUCCEEDED (or FAILED, CANCELLED, EXPIRED), `metadata.output.responsesFile` once done. The SDK reads
  these as JOB_STATE_* (Vertex AI's names), which the ledger keeps; `GET /v1beta/batches` lists them
  (`operations`, `nextPageToken`); `POST /v1beta/batches/{id}:cancel`;
* `GET /v1beta/files/{id}:download?alt=media`: the responses file, a line a request in no promised order:
  `{"key", "response": <GenerateContentResponse>}` or `{"key", "error": <google.rpc.Status>}`.

What is sent: a line's `request` is the body the online client posts to `:generateContent` for the same
HELM request, byte for byte (`GoogleGenAIClient.wire_request`: the SDK's own `generate_content` request
building, its HTTP call intercepted), and the batch's model the path's model (`models/...`).

What comes back: a `response` goes through the SDK's `generate_content` parsing and HELM's reading as if
the API had answered it online (`GoogleGenAIClient.replay`): the same text, finish reason, usage and
content-filter result; an `error` is the HTTP error it stands for (its google.rpc code's HTTP status,
`{"error": {...}}`) classified as online: rate limits and server errors are asked again, an invalid
request fails. A key without a line (an expired, cancelled or failed batch, or one missing) is asked
again. The clock fields are the batch's (created to ended).

Durable: a batch is created from a recorded file, and a create whose answer was lost is found again by
name: the uploaded file's display name is `<ledger file name> <model>` (so a later process knows the
model to create the batch for), the batch's `medhelm-<our batch id> <input file id>` (so `find_batch`
tells it among the project's batches: the SDK's BatchJob does not give its input file back).
"""
from __future__ import annotations

import datetime
import io
import json
import time
from typing import Any, Iterator

import httpx

from medhelm_core.batch.protocol import (GEMINI, RETRY, BatchAPIError, BatchResults, BatchStatus, Flavour,
                                         ItemOutcome, chunks_by_model, item_outcome)
from medhelm_core.clients.base import Attempt
from medhelm_core.errors import MedhelmError
from medhelm_core.ratelimit import FATAL, SERVER_ERROR, TIMEOUT

SUCCEEDED, EXPIRED = "JOB_STATE_SUCCEEDED", "JOB_STATE_EXPIRED"
CLOCK_SLACK_S = 3600.0
# google.rpc.Code -> the HTTP status Google's REST APIs answer it with (google/rpc/code.proto).
RPC_HTTP = {1: 499, 2: 500, 3: 400, 4: 504, 5: 404, 6: 409, 7: 403, 8: 429, 9: 400, 10: 409, 11: 400, 12: 501,
            13: 500, 14: 503, 15: 500, 16: 401}
RPC_NAMES = {"CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4, "NOT_FOUND": 5,
             "ALREADY_EXISTS": 6, "PERMISSION_DENIED": 7, "RESOURCE_EXHAUSTED": 8, "FAILED_PRECONDITION": 9,
             "ABORTED": 10, "OUT_OF_RANGE": 11, "UNIMPLEMENTED": 12, "INTERNAL": 13, "UNAVAILABLE": 14,
             "DATA_LOSS": 15, "UNAUTHENTICATED": 16}


def batch_display_name(batch_id: str, input_file_id: str) -> str:
    return f"medhelm-{batch_id} {input_file_id}"


def _epoch(value: Any) -> int | None:
    if value is None:
        return None
    if hasattr(value, "timestamp"):
        return int(value.timestamp())
    try:
        return int(datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp())
    except ValueError:
        return None


def status_of(job: Any) -> BatchStatus:
    """The SDK's BatchJob as a `BatchStatus` (its JOB_STATE_* name; the input file from its display name)."""
    state = getattr(job.state, "value", job.state)
    name = job.display_name or ""
    input_file = name.split(" ", 1)[1] if name.startswith("medhelm-") and " " in name else None
    output = job.dest.file_name if job.dest is not None else None
    error = getattr(job, "error", None)
    errors = [f"{error.code}: {error.message}"] if error is not None and (error.code or error.message) else []
    created = _epoch(job.create_time)
    return BatchStatus(vendor_batch_id=job.name, state=str(state), input_file_id=input_file, output_file_id=output,
                       errors=errors, created_at=created, in_progress_at=created, ended_at=_epoch(job.end_time))


def http_error(error: Any) -> tuple[int, dict]:
    """A line's `error` (a google.rpc.Status) as the HTTP error the online call gets for it."""
    error = error if isinstance(error, dict) else {"message": str(error)}
    code, name = error.get("code"), str(error.get("status") or "")
    if isinstance(code, int) and 100 <= code < 600:   # already an HTTP status
        status = code
    else:
        status = RPC_HTTP.get(code if isinstance(code, int) else RPC_NAMES.get(name, 2), 500)
    if not name:
        name = next((n for n, c in RPC_NAMES.items() if c == code), "")
    body = {"code": status, "message": str(error.get("message") or "no message"), **({"status": name} if name else {})}
    if error.get("details"):
        body["details"] = error["details"]
    return status, {"error": body}


def call_genai(fn, errors, vendor: str, redact):
    """`fn()`, the google-genai SDK's errors (`errors`: its `errors` module) as `BatchAPIError`,
    transient as the online client classifies them, secrets redacted (the Gemini API's and Vertex AI's
    batch calls alike)."""
    try:
        return fn()
    except errors.APIError as e:
        code = int(e.code or 0)
        transient = code in (408, 409, 429) or code >= 500
        status = f" {e.status}" if e.status else ""
        raise BatchAPIError(redact(f"{vendor} batch API: HTTP {code}{status}: {e.message}"), status=code,
                            transient=transient) from None
    except httpx.TimeoutException:
        raise BatchAPIError(f"{vendor} batch API: timed out", transient=True) from None
    except httpx.TransportError as e:
        raise BatchAPIError(redact(f"{vendor} batch API: connection error: {type(e).__name__}: {e}"),
                            transient=True) from None


class GeminiBatchAPI:
    """The batch and files endpoints of one Gemini API deployment, through its online client's SDK client.
    `client` is a `GoogleGenAIClient`."""

    def __init__(self, client, flavour: Flavour = GEMINI, max_requests: int | None = None):
        if getattr(client, "vertexai", False):
            raise MedhelmError("Gemini batch mode is for the Gemini API; this deployment calls Vertex AI, whose "
                               "batch prediction is batch.vertex.VertexBatchAPI (apis.batch_api picks it)")
        self.client = client
        self.flavour = flavour
        self.max_requests = min(max_requests or flavour.max_requests, flavour.max_requests)
        self._sdk = client._client
        self._errors = client._genai.errors
        self._models: dict[str, str] = {}        # request key -> the model of its line
        self._file_models: dict[str, str] = {}   # uploaded file id -> its lines' model

    def __repr__(self) -> str:
        return f"GeminiBatchAPI({self.client!r})"

    @property
    def endpoint(self) -> str:
        """scheme://host[:port] the batch goes to (never a key)."""
        return self.client.endpoint

    # -- the input file -------------------------------------------------------------------------
    def line(self, key: str, request: dict) -> bytes:
        """One JSONL line (no newline): `{"key": key, "request": <the online body>}`. ValueError where the
        online client refuses the request before sending."""
        model, body = self.client.wire_request(request)
        self._models[key] = model
        return b'{"key": ' + json.dumps(key).encode() + b', "request": ' + body + b"}"

    def lines(self, requests: dict[str, dict]) -> tuple[dict[str, bytes], dict[str, Attempt]]:
        """(key -> line) of the requests that can be sent, and (key -> fatal Attempt) of the others (the
        online client's `invalid request: ...`)."""
        good: dict[str, bytes] = {}
        bad: dict[str, Attempt] = {}
        for key, request in requests.items():
            try:
                good[key] = self.line(key, request)
            except ValueError as e:  # the message is the online Attempt's, less its prefix
                bad[key] = Attempt(FATAL, message=f"invalid request: {e}")
        return good, bad

    def chunks(self, lines: dict[str, bytes]) -> Iterator[list[str]]:
        """The keys split into input files of one model each (a batch is for one model), within the
        request and byte limits, in the given order."""
        return chunks_by_model(lines, self._models.__getitem__, self.max_requests, self.flavour.max_bytes)

    # -- the vendor's endpoints -----------------------------------------------------------------
    def upload(self, data: bytes, filename: str) -> str:
        """The Files API's resumable upload of an input file; its id (`files/...`). Its display name
        carries the model its lines are for."""
        first = json.loads(data.split(b"\n", 1)[0])["key"]
        model = self._models[first]
        file = self._call(lambda: self._sdk.files.upload(
            file=io.BytesIO(data), config={"display_name": f"{filename} {model}", "mime_type": "jsonl"}))
        self._file_models[file.name] = model
        return file.name

    def create(self, input_file_id: str, metadata: dict[str, str] | None = None) -> BatchStatus:
        """`models/{model}:batchGenerateContent` of an uploaded file, named after our batch id and the file."""
        batch_id = (metadata or {}).get("medhelm_batch_id")
        if not batch_id:
            raise BatchAPIError("gemini batch API: a batch is created with its medhelm_batch_id")
        model = self._file_models.get(input_file_id) or self._model_of_file(input_file_id)
        job = self._call(lambda: self._sdk.batches.create(
            model=model, src=input_file_id, config={"display_name": batch_display_name(batch_id, input_file_id)}))
        return status_of(job)

    def _model_of_file(self, input_file_id: str) -> str:
        name = self._call(lambda: self._sdk.files.get(name=input_file_id)).display_name or ""
        if " " not in name:
            raise BatchAPIError(f"gemini batch API: file {input_file_id} does not say its model (display name "
                                f"{name!r})")
        return name.rsplit(" ", 1)[1]

    def retrieve(self, vendor_batch_id: str) -> BatchStatus:
        return status_of(self._call(lambda: self._sdk.batches.get(name=vendor_batch_id)))

    def cancel(self, vendor_batch_id: str) -> BatchStatus:
        self._call(lambda: self._sdk.batches.cancel(name=vendor_batch_id))
        return self.retrieve(vendor_batch_id)

    def content(self, file_id: str) -> bytes:
        return self._call(lambda: self._sdk.files.download(file=file_id))

    def find_batch(self, input_file_id: str, since: float | None = None) -> BatchStatus | None:
        """The batch made of this input file (a create whose answer was lost): its display name ends with
        the file id. Those created before `since` (less an hour of slack for clocks) are passed over."""
        def look():
            for job in self._sdk.batches.list(config={"page_size": 100}):
                created = _epoch(job.create_time)
                if since is not None and created is not None and created < since - CLOCK_SLACK_S:
                    continue
                name = job.display_name or ""
                if name.startswith("medhelm-") and name.endswith(" " + input_file_id):
                    return job
            return None
        found = self._call(look)
        return status_of(found) if found is not None else None

    def find_file(self, filename: str, since: float | None = None) -> str | None:
        """The id of an uploaded input file of this name (an upload whose answer was lost)."""
        def look():
            for f in self._sdk.files.list(config={"page_size": 100}):
                created = _epoch(f.create_time)
                if since is not None and created is not None and created < since - CLOCK_SLACK_S:
                    continue
                if (f.display_name or "").split(" ", 1)[0] == filename:
                    self._file_models[f.name] = (f.display_name or "").rsplit(" ", 1)[-1]
                    return f.name
            return None
        return self._call(look)

    def _call(self, fn):
        return call_genai(fn, self._errors, "gemini", self.client.redact)

    # -- the answers ----------------------------------------------------------------------------
    def collect_results(self, status: BatchStatus, requests: dict[str, dict]) -> BatchResults:
        """Every key of `requests` (an ended batch's) with its outcome: the responses file read."""
        output = self.content(status.output_file_id) if status.output_file_id else b""
        return self.results(status, requests, output)

    def results(self, status: BatchStatus, requests: dict[str, dict], output: bytes = b"") -> BatchResults:
        """Every key of `requests` with its outcome, from the responses file."""
        start = float(status.created_at or time.time())
        elapsed = max(0.0, float(status.ended_at or time.time()) - start)
        outcomes: dict[str, ItemOutcome] = {}
        for raw in output.split(b"\n"):
            line = _json(raw)
            key = line.get("key") if line else None
            if key not in requests or key in outcomes:
                continue
            if isinstance(line.get("response"), dict):
                body = json.dumps(line["response"]).encode()
                attempt = self.client.replay(requests[key], 200, body, start, elapsed)
            elif "error" in line:
                code, body = http_error(line["error"])
                attempt = self.client.replay(requests[key], code, json.dumps(body).encode(), start, elapsed)
            else:
                continue
            outcomes[key] = item_outcome(key, attempt)
        return genai_results(status, requests, outcomes, "batch", self.client.redact)


def genai_results(status: BatchStatus, requests: dict[str, dict], outcomes: dict[str, ItemOutcome], what: str,
                  redact) -> BatchResults:
    """The outcomes read from an ended batch (or Vertex job, `what`), and every other key of `requests`
    to ask again: not run (the batch did not succeed) or missing from its output."""
    batch_error = None
    if status.state != SUCCEEDED:
        short = status.state.removeprefix("JOB_STATE_").lower()
        why = "; ".join(status.errors)
        batch_error = f"{what} {status.vendor_batch_id} {short}" + (f": {why}" if why else "")
    for key in requests:
        if key not in outcomes:
            message = (f"not run: {batch_error}" if batch_error
                       else f"missing from the output of {what} {status.vendor_batch_id}")
            kind = TIMEOUT if status.state == EXPIRED else SERVER_ERROR
            outcomes[key] = ItemOutcome(key, RETRY, Attempt(kind, message=redact(message)))
    return BatchResults(status.vendor_batch_id, status.state, outcomes, batch_error)


def _json(raw: bytes) -> dict | None:
    if not raw.strip():
        return None
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


__all__ = ["GeminiBatchAPI", "batch_display_name", "http_error", "status_of"]
