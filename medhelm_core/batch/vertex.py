"""Vertex AI batch prediction for Gemini, for the deployments of HELM's two Gemini-on-Vertex classes: a
`GoogleGenAIClient` in Vertex AI mode (through its own google-genai SDK client: same base URL, project,
location and Google credentials) and a `VertexAIChatClient` (raw REST; the jobs go through a google-genai
client in Vertex AI mode built from its project, location, Google credentials and host: its base URL, else
the host its online calls go to), with the files in Cloud Storage (gcsfs, with the same credentials;
`$STORAGE_EMULATOR_HOST` points it at an emulator).

Wire protocol (https://cloud.google.com/vertex-ai/generative-ai/docs/multimodal/batch-prediction-from-cloud-storage,
https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/batch-prediction-api; what is sent is the
SDK's `batches.py` in Vertex mode, which turns a `gs://` source into `inputConfig`):

* the input: one JSONL object in Cloud Storage, a line a request `{"request": <GenerateContentRequest>}`
  (Google documents no other field on a line: no key or custom id of ours goes with a request);
* `POST {base}/{v1|v1beta1}/projects/{p}/locations/{l}/batchPredictionJobs` `{"displayName", "model":
  "publishers/google/models/{model}", "inputConfig": {"instancesFormat": "jsonl", "gcsSource": {"uris":
  [...]}}, "outputConfig": {"predictionsFormat": "jsonl", "gcsDestination": {"outputUriPrefix"}}}`, answered
  with the BatchPredictionJob (`name` = `projects/.../batchPredictionJobs/{id}`, `state`);
* `GET .../batchPredictionJobs/{id}`: `state` JOB_STATE_QUEUED / PENDING → RUNNING → SUCCEEDED (or FAILED,
  CANCELLING → CANCELLED, EXPIRED, PARTIALLY_SUCCEEDED), `error` (google.rpc.Status), `completionStats`,
  `outputInfo.gcsOutputDirectory` (a folder the job made under the prefix); `GET .../batchPredictionJobs?
  filter=display_name="..."` lists them; `POST .../batchPredictionJobs/{id}:cancel`;
* the output: `predictions*.jsonl` in that folder, a line a request in no promised order:
  `{"status": "", "processed_time", "request": <the request as sent>, "response": <GenerateContentResponse>}`,
  or, where the request failed, `"status"` says why (text; an HTTP reason and Google's error JSON) and there
  is no `response`.

What is sent: a line's `request` is the body the online client posts to `:generateContent` for the same HELM
request, byte for byte (the client's `wire_request`: `GoogleGenAIClient`'s or `VertexAIChatClient`'s), and
the job's model the path's model (`publishers/google/models/{m}`; a VertexAIChatClient's path names the full
resource, `projects/{p}/locations/{l}/publishers/...`, which is shortened to that where {p} and {l} are the
job's own).

Which answer is whose: nothing of ours comes back but the echoed `request`, so an output line goes to the
request key whose body it echoes (compared as JSON, less empty lists, objects and nulls, and with whole
floats as integers, in case the service writes the echo back in its own form); keys with the very same body
(which the online API would answer alike) take the lines of that body in turn. A line matching no key left
is ignored; a key without a line is asked again.

What comes back: a `response` goes through the SDK's `generate_content` parsing and HELM's reading as if the
API had answered it online (the client's `replay`); a `status` is the HTTP error it stands for (its
error JSON's code, else its reason phrase's status) classified as online: rate limits and server errors are
asked again, an invalid request fails. A key without a line (the job expired, was cancelled, failed, or ran
out of time) is asked again. The clock fields are the job's (created to ended).

Durable: the ledger row exists before the upload (the object's name carries our batch id, its metadata the
model) and its gs:// URI before the create; the job's `displayName` is `medhelm-<batch id>`, so a create
whose answer was lost is found by `list(filter='display_name="medhelm-<batch id>"')` and its input URI, and
created only when it is not there.
"""
from __future__ import annotations

import http
import json
import re
import time
from collections import deque
from typing import Any, Iterator

import httpx

from medhelm_core.batch.gemini import _epoch, _json, call_genai, genai_results, http_error
from medhelm_core.batch.protocol import (VERTEX, BatchAPIError, BatchResults, BatchStatus, Flavour, ItemOutcome,
                                         chunks_by_model, item_outcome)
from medhelm_core.clients.base import Attempt
from medhelm_core.clients.vertexai import VertexAIChatClient, resource_name, vertex_host
from medhelm_core.errors import MedhelmError
from medhelm_core.ratelimit import FATAL

CLOCK_SLACK_S = 3600.0
MODEL_META = "medhelm-model"   # the input object's custom metadata: the job's model (read at create)
_GS_URI = re.compile(r"gs://([a-z0-9][-_.a-z0-9]{1,220}[a-z0-9])(/.*)?")
_PHRASES = {s.phrase.lower(): s.value for s in http.HTTPStatus}


def job_display_name(batch_id: str) -> str:
    """The displayName of a ledger batch's job (how a lost create is found again)."""
    return f"medhelm-{batch_id}"


def batch_id_of(uri: str) -> str | None:
    """The ledger batch id in an input object's name (`medhelm-<batch id>.jsonl`)."""
    m = re.search(r"medhelm-([A-Za-z0-9-]+)\.jsonl$", uri or "")
    return m.group(1) if m else None


def canonical(request: Any) -> str:
    """A request body as compared with an output line's echo: JSON with sorted keys, less empty lists,
    objects and nulls, whole floats as integers."""
    def norm(v):
        if isinstance(v, dict):
            out = {k: norm(x) for k, x in v.items()}
            return {k: x for k, x in out.items() if x not in (None, [], {})}
        if isinstance(v, list):
            return [norm(x) for x in v]
        if isinstance(v, float) and v.is_integer():
            return int(v)
        return v
    return json.dumps(norm(request), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def status_error(status: Any) -> tuple[int, dict]:
    """An output line's `status` (text: "Bad Request: {"error": {...}}", or a google.rpc.Status) as the HTTP
    error the online call gets for it."""
    if isinstance(status, dict):
        return http_error(status.get("error", status))
    text = str(status)
    brace = text.find("{")
    if brace >= 0:
        body = _json(text[brace:].encode("utf-8"))
        if body is not None:
            error = body.get("error", body)
            if isinstance(error, dict) and (error.get("code") is not None or error.get("status")):
                return http_error(error)
    head = text.split(":", 1)[0].strip().lower()   # "Service Unavailable: ..." -> its status
    code = _PHRASES.get(head, 500)
    return code, {"error": {"code": code, "message": text or "no message"}}


def status_of(job: Any) -> BatchStatus:
    """The SDK's BatchJob (Vertex AI) as a `BatchStatus`: its input URI, and its output folder (else the prefix)."""
    state = getattr(job.state, "value", job.state)
    src = job.src.gcs_uri if job.src is not None else None
    out_dir = job.output_info.gcs_output_directory if job.output_info is not None else None
    prefix = job.dest.gcs_uri if job.dest is not None else None
    error = getattr(job, "error", None)
    errors = [f"{error.code}: {error.message}"] if error is not None and (error.code or error.message) else []
    stats = job.completion_stats
    counts = {name: int(getattr(stats, field)) for name, field in (("succeeded", "successful_count"),
              ("failed", "failed_count"), ("incomplete", "incomplete_count")) if stats is not None
              and getattr(stats, field, None) is not None}
    created = _epoch(job.create_time)
    return BatchStatus(vendor_batch_id=job.name, state=str(state), input_file_id=src[0] if src else None,
                       output_file_id=out_dir or prefix, request_counts=counts, errors=errors, created_at=created,
                       in_progress_at=_epoch(job.start_time) or created, ended_at=_epoch(job.end_time),
                       metadata={"displayName": job.display_name or ""})


def job_model(resource: str, project: str | None, location: str | None) -> str:
    """A job's `model` for the model resource of its lines' path: `publishers/google/models/{m}` where the
    resource is a publisher model of the job's own project and location, else the resource as it is."""
    parent = f"projects/{project}/locations/{location}/"
    return resource[len(parent):] if resource.startswith(parent + "publishers/") else resource


def vertex_sdk(client) -> tuple[Any, Any, Any]:
    """(google-genai SDK client in Vertex AI mode, the SDK's `errors` module, the Google credentials) for a
    deployment's online client: a `GoogleGenAIClient`'s own; for a `VertexAIChatClient` one built from its
    project, location, credentials and host (its base URL, else the host its online calls go to), with its
    timeout. MedhelmError (one line) for a GoogleGenAIClient on the Gemini API, a VertexAIChatClient whose
    `vertexai_model` is not one of Google's Gemini models (Model Garden's Llama and the like: their batch jobs
    take another format), or without the SDK."""
    if isinstance(client, VertexAIChatClient):
        if client.vertexai_model is not None:
            try:
                name = resource_name(client.vertexai_model, client.project, client.location)
            except ValueError:
                name = client.vertexai_model
            if "/publishers/google/models/" not in name:
                raise MedhelmError(f"Vertex AI batch prediction here is for Google's Gemini models "
                                   f"(publishers/google/models/...); this deployment's model is {name}")
        try:
            from google import genai
        except ImportError:
            raise MedhelmError("Vertex AI batch prediction for a VertexAIChatClient deployment needs the "
                               "google-genai SDK: pip install 'medhelm-build[google]'") from None
        from medhelm_core.clients.google_genai import _TimeoutClient

        http_options = genai.types.HttpOptions(base_url=client.base_url or vertex_host(client.location),
                                               httpx_client=_TimeoutClient(timeout=client._http.timeout))
        try:
            sdk = genai.Client(vertexai=True, project=client.project, location=client.location,
                               credentials=client._credentials, http_options=http_options)
        except ValueError as e:  # the SDK's own checks (nothing secret in them)
            raise MedhelmError(f"Vertex AI batch prediction: {client.redact(str(e))}") from None
        return sdk, genai.errors, client._credentials
    if not getattr(client, "vertexai", False):
        raise MedhelmError("Vertex AI batch prediction is for a GoogleGenAIClient on Vertex AI; this deployment "
                           "calls the Gemini API (batch.gemini)")
    return client._client, client._genai.errors, getattr(client, "_google_credentials", None)


def gcs_filesystem(sdk, credentials=None):
    """A gcsfs filesystem with the deployment's Google credentials (else its SDK client's; `$STORAGE_EMULATOR_HOST`:
    the emulator)."""
    from gcsfs.core import GCSFileSystem   # never the zonal/HNS "extended" class

    api = sdk._api_client
    creds = credentials or getattr(api, "_credentials", None)
    return GCSFileSystem(token=creds if creds is not None else "google_default", project=api.project,
                         skip_instance_cache=True)


class VertexBatchAPI:
    """The batch prediction endpoints of one Vertex AI deployment. `client` is a `GoogleGenAIClient` in Vertex
    AI mode or a `VertexAIChatClient`; `gcs_uri` (setting `batch_gcs_uri`) the Cloud Storage prefix of the
    input and output files."""

    def __init__(self, client, flavour: Flavour = VERTEX, max_requests: int | None = None,
                 gcs_uri: str | None = None, fs=None):
        sdk, errors, credentials = vertex_sdk(client)
        if not gcs_uri or not _GS_URI.fullmatch(str(gcs_uri)):
            raise MedhelmError(f"Vertex AI batch needs batch_gcs_uri (gs://bucket[/prefix], where the job's input "
                               f"and output go) in the deployments settings; got {gcs_uri!r}")
        if not getattr(sdk._api_client, "project", None):
            raise MedhelmError("Vertex AI batch prediction needs a Google Cloud project and location (express mode, "
                               "an API key alone, has no batch jobs): set googleProjectId and googleLocation")
        self.client = client
        self.flavour = flavour
        self.max_requests = min(max_requests or flavour.max_requests, flavour.max_requests)
        self.prefix = str(gcs_uri).rstrip("/")
        self._sdk = sdk
        self._errors = errors
        self._fs = fs if fs is not None else gcs_filesystem(sdk, credentials)
        self._models: dict[str, str] = {}          # request key -> the model of its line
        self._line_models: dict[bytes, str] = {}   # a line -> its model (the file's first line: the job's)

    def __repr__(self) -> str:
        return f"VertexBatchAPI({self.client!r}, {self.prefix!r})"

    @property
    def endpoint(self) -> str:
        """scheme://host[:port] the jobs go to (never a key)."""
        return self.client.endpoint

    # -- the input file -------------------------------------------------------------------------
    def line(self, key: str, request: dict) -> bytes:
        """One JSONL line (no newline): `{"request": <the online body>}`. ValueError where the online client
        refuses the request before sending."""
        model, body = self.client.wire_request(request)
        api = self._sdk._api_client
        model = job_model(model, api.project, api.location)
        line = b'{"request": ' + body + b"}"
        self._models[key] = self._line_models[line] = model
        return line

    def lines(self, requests: dict[str, dict]) -> tuple[dict[str, bytes], dict[str, Attempt]]:
        """(key -> line) of the requests that can be sent, and (key -> fatal Attempt) of the others (the
        online client's `invalid request: ...`)."""
        good: dict[str, bytes] = {}
        bad: dict[str, Attempt] = {}
        for key, request in requests.items():
            try:
                good[key] = self.line(key, request)
            except ValueError as e:
                bad[key] = Attempt(FATAL, message=f"invalid request: {e}")
        return good, bad

    def chunks(self, lines: dict[str, bytes]) -> Iterator[list[str]]:
        """The keys split into input files of one model each (a job is for one model), within the request
        and byte limits, in the given order."""
        return chunks_by_model(lines, self._models.__getitem__, self.max_requests, self.flavour.max_bytes)

    # -- Cloud Storage --------------------------------------------------------------------------
    def _input_uri(self, filename: str) -> str:
        return f"{self.prefix}/input/{filename}"

    def output_prefix(self, batch_id: str) -> str:
        return f"{self.prefix}/output/{job_display_name(batch_id)}"

    def upload(self, data: bytes, filename: str) -> str:
        """The input file written to `<prefix>/input/<filename>` (its lines' model in the object's metadata);
        its gs:// URI is the file id."""
        model = self._line_models.get(data.split(b"\n", 1)[0])
        if model is None:
            raise BatchAPIError(f"vertex batch: no model known for the lines of {filename}")
        uri = self._input_uri(filename)
        self._gcs(lambda: self._fs.pipe_file(uri, data, content_type="application/jsonl",
                                             metadata={MODEL_META: model}))
        return uri

    def find_file(self, filename: str, since: float | None = None) -> str | None:
        """The gs:// URI of an uploaded input file of this name (an upload whose answer was lost)."""
        uri = self._input_uri(filename)
        self._fs.invalidate_cache()
        return uri if self._gcs(lambda: self._fs.exists(uri)) else None

    def _model_of_file(self, uri: str) -> str:
        self._fs.invalidate_cache()
        try:
            info = self._gcs(lambda: self._fs.info(uri))
        except FileNotFoundError:
            raise BatchAPIError(f"vertex batch: the input file {uri} is missing") from None
        model = (info.get("metadata") or {}).get(MODEL_META)
        if not model:
            raise BatchAPIError(f"vertex batch: the input file {uri} does not say its model")
        return model

    def _read_output(self, folder: str) -> bytes:
        """The `predictions*.jsonl` files under a job's output folder, one after another."""
        self._fs.invalidate_cache()
        base = folder.rstrip("/")
        try:
            paths = sorted(self._gcs(lambda: self._fs.find(base)))
        except FileNotFoundError:
            return b""
        data = b""
        for path in paths:
            name = path.rsplit("/", 1)[-1]
            if name.startswith("predictions") and name.endswith(".jsonl"):
                chunk = self._gcs(lambda: self._fs.cat_file(path))
                data += chunk if chunk.endswith(b"\n") or not chunk else chunk + b"\n"
        return data

    def _gcs(self, fn):
        """`fn()`, Cloud Storage errors as `BatchAPIError` (FileNotFoundError passes)."""
        try:
            return fn()
        except FileNotFoundError:
            raise
        except (OSError, httpx.HTTPError, ValueError) as e:
            code = getattr(e, "code", None)
            transient = not isinstance(code, int) or code in (408, 429) or code >= 500
            raise BatchAPIError(self.client.redact(f"vertex batch (Cloud Storage): {type(e).__name__}: {e}"),
                                status=code if isinstance(code, int) else None, transient=transient) from None
        except Exception as e:  # aiohttp's errors and the like, from gcsfs's event loop
            raise BatchAPIError(self.client.redact(f"vertex batch (Cloud Storage): {type(e).__name__}: {e}"),
                                transient=True) from None

    # -- the jobs -------------------------------------------------------------------------------
    def create(self, input_file_id: str, metadata: dict[str, str] | None = None) -> BatchStatus:
        """`batchPredictionJobs.create` of an uploaded input file, named after our batch id."""
        batch_id = (metadata or {}).get("medhelm_batch_id") or batch_id_of(input_file_id)
        if not batch_id:
            raise BatchAPIError(f"vertex batch: no batch id for {input_file_id}")
        model = self._model_of_file(input_file_id)
        job = self._call(lambda: self._sdk.batches.create(
            model=model, src=input_file_id,
            config={"display_name": job_display_name(batch_id), "dest": self.output_prefix(batch_id)}))
        return status_of(job)

    def retrieve(self, vendor_batch_id: str) -> BatchStatus:
        return status_of(self._call(lambda: self._sdk.batches.get(name=vendor_batch_id)))

    def cancel(self, vendor_batch_id: str) -> BatchStatus:
        self._call(lambda: self._sdk.batches.cancel(name=vendor_batch_id))
        return self.retrieve(vendor_batch_id)

    def find_batch(self, input_file_id: str, since: float | None = None) -> BatchStatus | None:
        """The job created of this input file (a create whose answer was lost): by its displayName, which
        carries the batch id, and its input URI."""
        batch_id = batch_id_of(input_file_id)
        if not batch_id:
            return None
        name = job_display_name(batch_id)

        def look():
            for job in self._sdk.batches.list(config={"page_size": 100, "filter": f'display_name="{name}"'}):
                created = _epoch(job.create_time)
                if since is not None and created is not None and created < since - CLOCK_SLACK_S:
                    continue
                if job.display_name == name and input_file_id in ((job.src.gcs_uri or []) if job.src else []):
                    return job
            return None
        found = self._call(look)
        return status_of(found) if found is not None else None

    def _call(self, fn):
        return call_genai(fn, self._errors, "vertex", self.client.redact)

    # -- the answers ----------------------------------------------------------------------------
    def collect_results(self, status: BatchStatus, requests: dict[str, dict]) -> BatchResults:
        """Every key of `requests` (an ended job's) with its outcome: the job's predictions files read."""
        output = self._read_output(status.output_file_id) if status.output_file_id else b""
        return self.results(status, requests, output)

    def results(self, status: BatchStatus, requests: dict[str, dict], output: bytes = b"") -> BatchResults:
        """Every key of `requests` with its outcome, from the predictions files (matched by their echoed request)."""
        start = float(status.created_at or time.time())
        elapsed = max(0.0, float(status.ended_at or time.time()) - start)
        waiting: dict[str, deque[str]] = {}
        for key, request in requests.items():
            try:
                _, body = self.client.wire_request(request)
            except ValueError:
                continue
            waiting.setdefault(canonical(json.loads(body)), deque()).append(key)
        outcomes: dict[str, ItemOutcome] = {}
        for raw in output.split(b"\n"):
            line = _json(raw)
            if not line or not isinstance(line.get("request"), dict):
                continue
            keys = waiting.get(canonical(line["request"]))
            if not keys:
                continue
            if isinstance(line.get("response"), dict) and not line.get("status"):
                key = keys.popleft()
                attempt = self.client.replay(requests[key], 200, json.dumps(line["response"]).encode(), start,
                                             elapsed)
            elif line.get("status"):
                key = keys.popleft()
                code, body = status_error(line["status"])
                attempt = self.client.replay(requests[key], code, json.dumps(body).encode(), start, elapsed)
            else:
                continue
            outcomes[key] = item_outcome(key, attempt)
        return genai_results(status, requests, outcomes, "job", self.client.redact)


__all__ = ["VertexBatchAPI", "batch_id_of", "canonical", "gcs_filesystem", "job_display_name", "job_model",
           "status_error", "status_of", "vertex_sdk"]
