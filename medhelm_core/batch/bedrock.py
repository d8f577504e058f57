"""Amazon Bedrock batch inference, through the deployment's own `BedrockClient` (its boto3 session:
same credentials, assumed role, region and config; `bedrock` control plane and `s3` clients beside its
`bedrock-runtime` one).

Wire protocol (botocore's `bedrock` 2023-04-20 service model; https://docs.aws.amazon.com/bedrock/latest/
userguide/batch-inference-data.html, batch-inference-create.html, batch-inference-results.html):

* the input is a JSONL object in S3 (name ending `.jsonl`), one record a line: `{"recordId": <id>,
  "modelInput": <body>}`, the body being the model's InvokeModel body, or, for a job of
  `modelInvocationType` `Converse`, the Converse request body;
* `CreateModelInvocationJob` (`POST /model-invocation-job`): `jobName` (1 to 63 characters),
  `roleArn` (the service role Bedrock reads and writes S3 with), `clientRequestToken` (idempotency: the
  same token again creates nothing), `modelId`, `inputDataConfig.s3InputDataConfig` {`s3Uri`,
  `s3InputFormat`: JSONL}, `outputDataConfig.s3OutputDataConfig.s3Uri`, `modelInvocationType`; answers
  `jobArn`;
* `GetModelInvocationJob` (`GET /model-invocation-job/{jobIdentifier}`): `status` Submitted → Validating →
  Scheduled → InProgress → Completed, or PartiallyCompleted (not every record processed in time), Failed
  (`message` says why), Stopping → Stopped (`StopModelInvocationJob`, `POST .../stop`), Expired (never
  started within its timeout); `submitTime`, `endTime`, `totalRecordCount`, `successRecordCount`,
  `errorRecordCount`, ...;
* `ListModelInvocationJobs` (`GET /model-invocation-jobs?nameContains=&submitTimeAfter=&nextToken=`);
* the output: `<output s3Uri>/<job id>/<input file name>.out`, JSONL in no promised order, each line
  `{"recordId", "modelInput", "modelOutput": <the InvokeModel or Converse response body>}` or, where
  the record failed, `{"recordId", "modelInput", "error": {"errorCode": <HTTP status>, "errorMessage"}}`;
  and `manifest.json.out` (counts).

Quotas (adjustable per account): 100 records a job at least, 50,000 at most (`protocol.BEDROCK`). A
deployment's requests too few to make a job are not batched (`chunks` leaves them out): `lifecycle.submit`
reports them, and the online runs of the same invocation ask them.

What is sent: a record's `modelInput` is `BedrockClient.wire_body` of the online `raw_request`, the very
bytes the online call sends: InvokeModel's JSON body (Llama, Mistral, Titan, Palmyra), and, for HELM's
BedrockNovaClient, the Converse body botocore serializes, in a job of `modelInvocationType` Converse
(supported since 2026-02-27; every model the Converse API serves, Claude through an inference profile
included), so no body is re-derived in another schema. A job holds one modelId (a deployment's
`bedrock_model_id`, or the request's model mapped as online).

What comes back: a `modelOutput` is read by the online client's own parsing (`_invoke_result`,
`_converse_result`: the same text, truncation at the stop reason, finish reason, tokens). Clock fields:
request_datetime is the job's submit time; request_time is the Converse reply's own `metrics.latencyMs`
(as online), and for InvokeModel (no latency in its body) the job's time from submit to end, as the
other vendors' batches give theirs. Token counts come from the body (no `x-amzn-bedrock-*-token-count`
headers in a file): Mistral's InvokeModel body has none. An `error` record is the HTTP answer it stands
for, classified by the online client (400 fails as online; 429, 5xx are asked again); a record missing
from the output (the job expired, stopped, failed or ran out of time) is asked again. No key is dropped.

Durable: the ledger row exists before the upload (the input object's name carries our batch id) and its
S3 URI before the create; the create's `jobName` is `medhelm-<batch id>` and its `clientRequestToken`
derives from the batch id, so a create whose answer was lost is found by `ListModelInvocationJobs
(nameContains=...)`, and one created again with the same token is the same job, never a second one.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import math
import re
import time
from typing import Any, Iterator

from medhelm_core.batch.protocol import (BEDROCK, RETRY, BatchAPIError, BatchResults, BatchStatus, Flavour,
                                         ItemOutcome, item_outcome)
from medhelm_core.clients.base import Attempt, endpoint_origin
from medhelm_core.errors import MedhelmError
from medhelm_core.ratelimit import FATAL, SERVER_ERROR, TIMEOUT

_RECORD_ID = re.compile(r"[A-Za-z0-9]{1,64}")
_S3_URI = re.compile(r"s3://([a-z0-9][-.a-z0-9]{1,61}[a-z0-9])(/.*)?")
_ROLE_ARN = re.compile(r"arn:aws(-[^:]+)?:iam::([0-9]{12})?:role/.+")
MODEL_ID_META = "medhelm-model-id"   # the input object's S3 metadata: the job's modelId (read at create)
CLOCK_SLACK_S = 3600.0
# A batch record's `error.errorCode` (an HTTP status) -> the error code Bedrock answers it with online.
ERROR_CODE = {400: "ValidationException", 403: "AccessDeniedException", 404: "ResourceNotFoundException",
              408: "ModelTimeoutException", 424: "ModelErrorException", 429: "ThrottlingException",
              500: "InternalServerException", 503: "ServiceUnavailableException"}
# botocore error codes of control-plane calls worth trying again later.
_TRANSIENT_CODES = {"ThrottlingException", "InternalServerException", "ServiceUnavailableException",
                    "ServiceUnavailable", "InternalFailure", "RequestTimeout", "SlowDown", "ConflictException"}


def record_id(key: str) -> str:
    """The recordId of a request key: the key itself (our keys are SHA-256 hex), else its SHA-256 hex."""
    return key if _RECORD_ID.fullmatch(key) else hashlib.sha256(key.encode("utf-8")).hexdigest()


def job_name(batch_id: str) -> str:
    """The jobName of a ledger batch (how a lost create is found again)."""
    return f"medhelm-{batch_id}"[:63]


def request_token(batch_id: str) -> str:
    """The clientRequestToken of a ledger batch's create: a second create of it is the same job."""
    return "medhelm" + hashlib.sha256(batch_id.encode("utf-8")).hexdigest()[:48]


def batch_id_of(uri: str) -> str | None:
    """The ledger batch id in an input object's name (`medhelm-<batch id>.jsonl`)."""
    m = re.search(r"medhelm-([A-Za-z0-9-]+)\.jsonl$", uri or "")
    return m.group(1) if m else None


def _epoch(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        return int(value.timestamp())
    try:
        return int(datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp())
    except ValueError:
        return None


def output_uri(output_prefix: str, job_arn: str, input_uri: str) -> str:
    """Where a job writes the output of its input file: `<prefix>/<job id>/<input file name>.out`."""
    return f"{output_prefix.rstrip('/')}/{job_arn.rsplit('/', 1)[-1]}/{input_uri.rsplit('/', 1)[-1]}.out"


def status_of(job: dict) -> BatchStatus:
    """A GetModelInvocationJob answer (or a ListModelInvocationJobs summary) as a `BatchStatus`."""
    input_uri = ((job.get("inputDataConfig") or {}).get("s3InputDataConfig") or {}).get("s3Uri")
    output_prefix = ((job.get("outputDataConfig") or {}).get("s3OutputDataConfig") or {}).get("s3Uri")
    counts = {name: int(job[field]) for name, field in (("total", "totalRecordCount"), ("processed",
              "processedRecordCount"), ("succeeded", "successRecordCount"), ("failed", "errorRecordCount"))
              if job.get(field) is not None}
    out = output_uri(output_prefix, job["jobArn"], input_uri) if input_uri and output_prefix else None
    return BatchStatus(vendor_batch_id=job["jobArn"], state=str(job.get("status") or "Submitted"),
                       input_file_id=input_uri, output_file_id=out, request_counts=counts,
                       errors=[job["message"]] if job.get("message") else [],
                       created_at=_epoch(job.get("submitTime")), ended_at=_epoch(job.get("endTime")),
                       metadata={"jobName": job.get("jobName") or ""})


def _split_s3(uri: str) -> tuple[str, str]:
    bucket, _, key = uri[len("s3://"):].partition("/")
    return bucket, key


class BedrockBatchAPI:
    """The batch inference endpoints of one Bedrock deployment. `client` is a `BedrockClient`; `s3_uri`
    (setting `batch_s3_uri`) the S3 prefix of the input and output files; `role_arn` (`batch_role_arn`)
    the service role Bedrock runs the job with."""

    def __init__(self, client, flavour: Flavour = BEDROCK, max_requests: int | None = None,
                 s3_uri: str | None = None, role_arn: str | None = None, min_requests: int | None = None):
        if not s3_uri or not _S3_URI.fullmatch(str(s3_uri)):
            raise MedhelmError(f"Bedrock batch needs batch_s3_uri (s3://bucket[/prefix], where the "
                               f"job's input and output go) in the deployments settings; got {s3_uri!r}")
        if not role_arn or not _ROLE_ARN.fullmatch(str(role_arn)):
            raise MedhelmError(f"Bedrock batch needs batch_role_arn (arn:aws:iam::<account>:role/"
                               f"<name>, the service role Bedrock reads and writes S3 with) in the deployments "
                               f"settings; got {role_arn!r}")
        self.client = client
        self.flavour = flavour
        self.max_requests = min(max_requests or flavour.max_requests, flavour.max_requests)
        self.min_requests = max(1, min_requests or flavour.min_requests)
        self.prefix = str(s3_uri).rstrip("/")
        self.role_arn = str(role_arn)
        self._bedrock = client.aws_client("bedrock")
        self._s3 = client.aws_client("s3")
        self._errors = client._errors            # botocore.exceptions
        self._model_of: dict[str, str] = {}      # recordId -> modelId, of the lines made by this object

    def __repr__(self) -> str:
        return f"BedrockBatchAPI({self.client!r}, {self.prefix!r})"

    @property
    def endpoint(self) -> str:
        """scheme://host[:port] of the Bedrock control plane (never a key)."""
        return endpoint_origin(self._bedrock.meta.endpoint_url)

    @property
    def invocation_type(self) -> str:
        return "Converse" if self.client.is_converse else "InvokeModel"

    # -- the records ----------------------------------------------------------------------------
    def line(self, key: str, request: dict) -> bytes:
        """One JSONL record (no newline): the online body of `request` as its `modelInput`.
        ValueError (KeyError, TypeError) where HELM refuses the request before sending."""
        if request.get("echo_prompt"):  # as the online client: HELM's Bedrock clients raise on it
            raise ValueError("echo_prompt is not supported by the Bedrock clients")
        raw = self.client.raw_request(request)
        body = self.client.wire_body(raw)
        rid = record_id(key)
        self._model_of[rid] = raw["modelId"]
        return b'{"recordId":"' + rid.encode() + b'","modelInput":' + body + b"}"

    def lines(self, requests: dict[str, dict]) -> tuple[dict[str, bytes], dict[str, Attempt]]:
        """(key -> record) of the requests that can be sent, and (key -> fatal Attempt) of those the
        online client refuses before sending (the same `invalid request: ...`)."""
        good: dict[str, bytes] = {}
        bad: dict[str, Attempt] = {}
        for key, request in requests.items():
            try:
                good[key] = self.line(key, request)
            except (ValueError, KeyError, TypeError) as e:
                bad[key] = Attempt(FATAL, message=self.client.redact(f"invalid request: {e}"))
        return good, bad

    def chunks(self, lines: dict[str, bytes]) -> Iterator[list[str]]:
        """The keys split into jobs of one modelId each, within the quotas: as few and as even as can be,
        each of `min_requests` to `max_requests` records and at most `max_bytes`. The keys of a model too
        few for a job, and any beyond what whole jobs can hold, are left out: they are asked online."""
        by_model: dict[str, list[str]] = {}
        for key in lines:
            by_model.setdefault(self._model_of.get(record_id(key), ""), []).append(key)
        for keys in by_model.values():
            jobs = min(math.ceil(len(keys) / self.max_requests), len(keys) // self.min_requests)
            if jobs < 1:
                continue
            taken = min(len(keys), jobs * self.max_requests)
            bounds = [round(i * taken / jobs) for i in range(jobs + 1)]  # even sizes, each >= min_requests
            for i in range(jobs):
                yield from self._by_bytes(keys[bounds[i]:bounds[i + 1]], lines)

    def _by_bytes(self, keys: list[str], lines: dict[str, bytes]) -> Iterator[list[str]]:
        """`keys` cut where the input file would pass `max_bytes` (a piece below the minimum stays out)."""
        chunk: list[str] = []
        size = 0
        for key in keys:
            n = len(lines[key]) + 1
            if chunk and size + n > self.flavour.max_bytes:
                if len(chunk) >= self.min_requests:
                    yield chunk
                chunk, size = [], 0
            chunk.append(key)
            size += n
        if len(chunk) >= self.min_requests:
            yield chunk

    # -- S3 -------------------------------------------------------------------------------------
    def _input_uri(self, filename: str) -> str:
        return f"{self.prefix}/input/{filename}"

    @property
    def output_prefix(self) -> str:
        return f"{self.prefix}/output/"

    def upload(self, data: bytes, filename: str) -> str:
        """PUT the input file (its modelId in the object's metadata); its S3 URI is the file id."""
        first = json.loads(data.split(b"\n", 1)[0])
        model_id = self._model_of.get(first.get("recordId"))
        if model_id is None:
            raise BatchAPIError(f"bedrock batch: no modelId known for the records of {filename}")
        uri = self._input_uri(filename)
        bucket, key = _split_s3(uri)
        self._call(lambda: self._s3.put_object(Bucket=bucket, Key=key, Body=data, ContentType="application/jsonl",
                                               Metadata={MODEL_ID_META: model_id}), "s3")
        return uri

    def find_file(self, filename: str, since: float | None = None) -> str | None:
        """The S3 URI of an uploaded input file of this name (an upload whose answer was lost)."""
        uri = self._input_uri(filename)
        return uri if self._head(uri) is not None else None

    def _head(self, uri: str) -> dict | None:
        bucket, key = _split_s3(uri)
        try:
            return self._call(lambda: self._s3.head_object(Bucket=bucket, Key=key), "s3")
        except BatchAPIError as e:
            if e.status == 404:
                return None
            raise

    def _read(self, uri: str) -> bytes:
        """An S3 object's bytes; b"" where there is none (a job that wrote no output)."""
        bucket, key = _split_s3(uri)
        try:
            return self._call(lambda: self._s3.get_object(Bucket=bucket, Key=key)["Body"].read(), "s3")
        except BatchAPIError as e:
            if e.status == 404:
                return b""
            raise

    # -- the jobs -------------------------------------------------------------------------------
    def create(self, input_file_id: str, metadata: dict[str, str] | None = None) -> BatchStatus:
        """CreateModelInvocationJob of an uploaded input file (its modelId from the object's metadata)."""
        batch_id = (metadata or {}).get("medhelm_batch_id") or batch_id_of(input_file_id)
        if not batch_id:
            raise BatchAPIError(f"bedrock batch: no batch id for {input_file_id}")
        head = self._head(input_file_id)
        model_id = ((head or {}).get("Metadata") or {}).get(MODEL_ID_META)
        if not model_id:
            raise BatchAPIError(f"bedrock batch: the input file {input_file_id} is missing or has no modelId")
        answer = self._call(lambda: self._bedrock.create_model_invocation_job(
            jobName=job_name(batch_id), roleArn=self.role_arn, clientRequestToken=request_token(batch_id),
            modelId=model_id, modelInvocationType=self.invocation_type,
            inputDataConfig={"s3InputDataConfig": {"s3Uri": input_file_id, "s3InputFormat": "JSONL"}},
            outputDataConfig={"s3OutputDataConfig": {"s3Uri": self.output_prefix}}))
        arn = answer["jobArn"]
        return BatchStatus(vendor_batch_id=arn, state="Submitted", input_file_id=input_file_id,
                           output_file_id=output_uri(self.output_prefix, arn, input_file_id),
                           created_at=int(time.time()), metadata={"jobName": job_name(batch_id)})

    def retrieve(self, vendor_batch_id: str) -> BatchStatus:
        return status_of(self._call(lambda: self._bedrock.get_model_invocation_job(jobIdentifier=vendor_batch_id)))

    def cancel(self, vendor_batch_id: str) -> BatchStatus:
        self._call(lambda: self._bedrock.stop_model_invocation_job(jobIdentifier=vendor_batch_id))
        return self.retrieve(vendor_batch_id)

    def find_batch(self, input_file_id: str, since: float | None = None) -> BatchStatus | None:
        """The job created of this input file (a create whose answer was lost): by its jobName, which
        carries the batch id, and its input URI."""
        batch_id = batch_id_of(input_file_id)
        if not batch_id:
            return None
        name = job_name(batch_id)
        args: dict[str, Any] = {"nameContains": name, "maxResults": 100}
        if since is not None:
            args["submitTimeAfter"] = datetime.datetime.fromtimestamp(since - CLOCK_SLACK_S, datetime.timezone.utc)

        def look():
            token = None
            while True:
                page = self._bedrock.list_model_invocation_jobs(**args, **({"nextToken": token} if token else {}))
                for job in page.get("invocationJobSummaries") or []:
                    if job.get("jobName") == name and status_of(job).input_file_id == input_file_id:
                        return job
                token = page.get("nextToken")
                if not token:
                    return None
        found = self._call(look)
        return status_of(found) if found is not None else None

    def _call(self, fn, service: str = "bedrock"):
        """`fn()`, botocore's errors turned into `BatchAPIError` (transient: throttling, 5xx, timeouts,
        connection errors), keys redacted."""
        errors = self._errors
        try:
            return fn()
        except errors.ClientError as e:
            response = getattr(e, "response", None) or {}
            error = response.get("Error") or {}
            code = str(error.get("Code") or "")
            status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
            if code in ("NoSuchKey", "NotFound", "404"):
                status = 404
            transient = code in _TRANSIENT_CODES or status in (408, 409, 429) or (status or 0) >= 500
            raise BatchAPIError(self.client.redact(f"bedrock batch ({service}): {code or 'error'} (HTTP {status}): "
                                                   f"{error.get('Message') or e}"), status=status,
                                transient=transient) from None
        except (errors.ReadTimeoutError, errors.ConnectTimeoutError, errors.ConnectionError,
                errors.HTTPClientError) as e:
            raise BatchAPIError(self.client.redact(f"bedrock batch ({service}): connection error: "
                                                   f"{type(e).__name__}: {e}"), transient=True) from None
        except (errors.NoCredentialsError, errors.PartialCredentialsError, errors.NoRegionError,
                errors.ParamValidationError) as e:
            raise BatchAPIError(self.client.redact(f"bedrock batch ({service}): {type(e).__name__}: {e}")) from None

    # -- the answers ----------------------------------------------------------------------------
    def collect_results(self, status: BatchStatus, requests: dict[str, dict]) -> BatchResults:
        """Every key of `requests` (an ended job's) with its outcome: the job's output file read."""
        output = self._read(status.output_file_id) if status.output_file_id else b""
        return self.results(status, requests, output)

    def results(self, status: BatchStatus, requests: dict[str, dict], output: bytes) -> BatchResults:
        """Every key of `requests` with its outcome, from the job's output file."""
        start = float(status.created_at or time.time())
        elapsed = max(0.0, float(status.ended_at or time.time()) - start)
        keys = {record_id(k): k for k in requests}
        outcomes: dict[str, ItemOutcome] = {}
        for raw in output.split(b"\n"):
            try:
                line = json.loads(raw) if raw.strip() else None
            except ValueError:
                continue
            key = keys.get(line.get("recordId")) if isinstance(line, dict) else None
            if key is None or key in outcomes:
                continue
            outcomes[key] = self._outcome(key, requests[key], line, start, elapsed)
        batch_error = None
        if status.state != "Completed":
            why = f": {'; '.join(status.errors)}" if status.errors else ""
            batch_error = f"job {status.vendor_batch_id} {status.state}{why}"
        for key in requests:
            if key not in outcomes:
                message = (f"not run: {batch_error}" if batch_error
                           else f"missing from the output of job {status.vendor_batch_id}")
                kind = TIMEOUT if status.state in ("Expired", "PartiallyCompleted") else SERVER_ERROR
                outcomes[key] = ItemOutcome(key, RETRY, Attempt(kind, message=self.client.redact(message)))
        return BatchResults(status.vendor_batch_id, status.state, outcomes, batch_error)

    def _outcome(self, key: str, request: dict, line: dict, start: float, elapsed: float) -> ItemOutcome:
        output = line.get("modelOutput")
        if isinstance(output, dict):
            if self.client.is_converse:
                if not isinstance(output.get("metrics"), dict):  # the reply's own latency, else the job's
                    output = {**output, "metrics": {"latencyMs": elapsed * 1000}}
                return item_outcome(key, self.client._converse_result(request, output, int(start)))
            return item_outcome(key, self.client._invoke_result(request, {}, output, start, elapsed))
        if isinstance(line.get("error"), dict):
            return item_outcome(key, self._error_attempt(line["error"]))
        return ItemOutcome(key, RETRY, Attempt(SERVER_ERROR, message="bedrock batch: a record with neither "
                                               "modelOutput nor error"))

    def _error_attempt(self, error: dict) -> Attempt:
        """An error record as the botocore error the online call would have raised, classified as online."""
        raw = error.get("errorCode")
        try:
            status = int(raw)
            code = ERROR_CODE.get(status, "")
        except (TypeError, ValueError):
            code = str(raw or "")
            status = next((s for s, c in ERROR_CODE.items() if c == code), 500)
        e = self._errors.ClientError({"Error": {"Code": code, "Message": str(error.get("errorMessage") or "")},
                                      "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {}}},
                                     "Converse" if self.client.is_converse else "InvokeModel")
        return self.client._client_error(e)


__all__ = ["BedrockBatchAPI", "ERROR_CODE", "batch_id_of", "job_name", "output_uri", "record_id", "request_token",
           "status_of"]
