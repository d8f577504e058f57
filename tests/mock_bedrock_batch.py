"""A loopback mock of Amazon Bedrock's batch inference control plane for tests, answered to the real boto3
`bedrock` client (point it here with `AWS_ENDPOINT_URL_BEDROCK`), with S3 served by moto beside it.

Follows botocore's `bedrock` 2023-04-20 service model (REST-JSON) and AWS's batch inference pages:

* `POST /model-invocation-job` {jobName, roleArn, clientRequestToken, modelId, inputDataConfig.
  s3InputDataConfig.s3Uri, outputDataConfig.s3OutputDataConfig.s3Uri, modelInvocationType}: answers
  `{"jobArn"}`; the same clientRequestToken again answers the same job (idempotency), another job of the
  same name is a ConflictException; jobName and roleArn are checked against the model's patterns;
* `GET /model-invocation-job/{jobIdentifier}` (ARN or 12-character id): the job, moving one state a poll
  (after `polls_per_state` polls): Submitted → Validating → Scheduled → InProgress → Completed (or
  PartiallyCompleted with `unprocessed` records left out, Expired with `expire`, Failed when the input
  has fewer than `min_records` records or is not JSONL of `{recordId, modelInput}`);
* `POST /model-invocation-job/{id}/stop`: Stopping, then Stopped on the next poll (records not run);
* `GET /model-invocation-jobs?nameContains=&submitTimeAfter=&maxResults=&nextToken=`: newest first;
* errors: `x-amzn-ErrorType` header and `{"message"}` body with the shape's HTTP status.

A job's records are read from S3 when it runs; each `modelInput` is answered by POSTing it to the online
runtime mock (`upstream`, the repo's shared/tools/mock_vendor_server.py) at `/model/<modelId>/invoke`
or `/converse`, so batch and online answers can be compared; `item_errors` {recordId: (status, message)}
overrides. The output `<output s3Uri>/<job id>/<input file name>.out` (records in reverse order: AWS
promises none) and `manifest.json.out` are written back to S3.
"""
from __future__ import annotations

import datetime
import json
import re
import threading
import time
import urllib.parse
from typing import Callable, Iterable

from tests.mock_server import JSONHandler, post_for_json, serve_loopback, sha

ACCOUNT, REGION = "123456789012", "us-west-2"
JOB_NAME = re.compile(r"[a-zA-Z0-9]{1,63}(-*[a-zA-Z0-9\+\-\.]){0,63}")
ROLE_ARN = re.compile(r"arn:aws(-[^:]+)?:iam::([0-9]{12})?:role/.+")
TOKEN = re.compile(r"[a-zA-Z0-9]{1,256}(-*[a-zA-Z0-9]){0,256}")
FLOW = ["Submitted", "Validating", "Scheduled", "InProgress"]


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def _split(uri: str) -> tuple[str, str]:
    bucket, _, key = uri[len("s3://"):].partition("/")
    return bucket, key


class MockBedrockBatchServer:
    def __init__(self, s3_endpoint: str, upstream: str | None = None, polls_per_state: int = 1,
                 min_records: int = 100, item_errors: dict[str, tuple[int, str]] | None = None,
                 unprocessed: Iterable[str] = (), expire: bool = False, lose_create_answer: bool = False,
                 on_create: Callable[[], None] | None = None):
        import boto3

        self.s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name=REGION, aws_access_key_id="mock",
                               aws_secret_access_key="mock")
        self.upstream = upstream
        self.polls_per_state = polls_per_state
        self.min_records = min_records
        self.item_errors = dict(item_errors or {})
        self.unprocessed = set(unprocessed)       # records a PartiallyCompleted job did not get to
        self.expire = expire
        self.lose_create_answer = lose_create_answer
        self.on_create = on_create
        self.lock = threading.Lock()
        self.jobs: dict[str, dict] = {}           # job id -> job
        self.log: list[tuple[str, str]] = []      # (method, path with query)
        self.auth: list[str | None] = []          # each call's Authorization header (SigV4)
        self.create_bodies: list[dict] = []
        self.creates = 0                          # jobs made
        self.inputs: dict[str, bytes] = {}        # job id -> the input file as the job read it
        server = self

        class Handler(JSONHandler):
            request_id_header, request_id_chars = "x-amzn-RequestId", 32

            def _error(self, status: int, code: str, message: str) -> None:
                data = json.dumps({"message": message}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("x-amzn-ErrorType", code)
                self.end_headers()
                self.wfile.write(data)

            def _route(self, method: str):
                parts = urllib.parse.urlsplit(self.path)
                query = {k: v[0] for k, v in urllib.parse.parse_qs(parts.query).items()}
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                with server.lock:
                    server.log.append((method, self.path))
                    server.auth.append(self.headers.get("Authorization"))
                if not (self.headers.get("Authorization") or "").startswith("AWS4-HMAC-SHA256 "):
                    return self._error(403, "AccessDeniedException", "missing SigV4 authorization")
                path = urllib.parse.unquote(parts.path)
                if method == "POST" and path == "/model-invocation-job":
                    return server._create(self, raw)
                if method == "GET" and path == "/model-invocation-jobs":
                    return server._list(self, query)
                if path.startswith("/model-invocation-job/"):
                    ident = path[len("/model-invocation-job/"):]
                    stop = ident.endswith("/stop")
                    ident = ident[: -len("/stop")] if stop else ident  # an ARN or the 12-character id
                    job = server.jobs.get(ident.rsplit("/", 1)[-1])
                    if job is None:
                        return self._error(404, "ResourceNotFoundException", f"no job {ident}")
                    if method == "GET" and not stop:
                        with server.lock:
                            server._advance(job)
                            return self._send(200, server._public(job))
                    if method == "POST" and stop:
                        with server.lock:
                            if job["status"] not in FLOW:
                                return self._error(400, "ValidationException", f"job is {job['status']}")
                            job.update(status="Stopping", _polls=0)
                        return self._send(200, {})
                return self._error(404, "UnknownOperationException", f"{method} {parts.path}")

        self.httpd, self.thread = serve_loopback(Handler)
        self.endpoint = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- calls ------------------------------------------------------------------------------------
    def _create(self, h, raw: bytes) -> None:
        if self.on_create is not None:
            self.on_create()
        body = json.loads(raw or b"{}")
        for field in ("jobName", "roleArn", "modelId", "inputDataConfig", "outputDataConfig"):
            if not body.get(field):
                return h._error(400, "ValidationException", f"{field} is required")
        if not JOB_NAME.fullmatch(body["jobName"]) or len(body["jobName"]) > 63:
            return h._error(400, "ValidationException", "jobName: invalid")
        if not ROLE_ARN.fullmatch(body["roleArn"]):
            return h._error(400, "ValidationException", "roleArn: invalid")
        token = body.get("clientRequestToken")
        if token is not None and not TOKEN.fullmatch(token):
            return h._error(400, "ValidationException", "clientRequestToken: invalid")
        if body.get("modelInvocationType", "InvokeModel") not in ("InvokeModel", "Converse"):
            return h._error(400, "ValidationException", "modelInvocationType: invalid")
        input_uri = body["inputDataConfig"]["s3InputDataConfig"]["s3Uri"]
        output_uri = body["outputDataConfig"]["s3OutputDataConfig"]["s3Uri"]
        with self.lock:
            same = [j for j in self.jobs.values() if token and j["clientRequestToken"] == token]
            if same:  # idempotent: the same job again, nothing created
                return h._send_late(200, {"jobArn": same[0]["jobArn"]}, 0, lose=self.lose_create_answer)
            if any(j["jobName"] == body["jobName"] for j in self.jobs.values()):
                return h._error(400, "ConflictException", f"a job named {body['jobName']} exists")
            now = time.time()
            job_id = sha("job", len(self.jobs), now)[:12]
            self.jobs[job_id] = {
                "jobArn": f"arn:aws:bedrock:{REGION}:{ACCOUNT}:model-invocation-job/{job_id}",
                "jobName": body["jobName"], "modelId": body["modelId"], "clientRequestToken": token,
                "roleArn": body["roleArn"], "status": "Submitted", "submitTime": _iso(now),
                "lastModifiedTime": _iso(now), "inputDataConfig": body["inputDataConfig"],
                "outputDataConfig": body["outputDataConfig"], "timeoutDurationInHours": 24,
                "jobExpirationTime": _iso(now + 86400),
                "modelInvocationType": body.get("modelInvocationType", "InvokeModel"),
                "_input": input_uri, "_output": output_uri, "_polls": 0, "_submit": now}
            self.creates += 1
            self.create_bodies.append(body)
            arn = self.jobs[job_id]["jobArn"]
        h._send_late(200, {"jobArn": arn}, 0, lose=self.lose_create_answer)

    def _list(self, h, query: dict) -> None:
        name = query.get("nameContains") or ""
        after = query.get("submitTimeAfter")
        after_t = datetime.datetime.fromisoformat(after.replace("Z", "+00:00")).timestamp() if after else None
        limit = int(query.get("maxResults") or 100)
        with self.lock:
            jobs = [j for j in reversed(list(self.jobs.values())) if name in j["jobName"]
                    and (after_t is None or j["_submit"] > after_t)]
            start = int(query.get("nextToken") or 0)
            page = jobs[start:start + limit]
            body = {"invocationJobSummaries": [self._public(j) for j in page]}
            if start + limit < len(jobs):
                body["nextToken"] = str(start + limit)
        h._send(200, body)

    # -- a job's life -----------------------------------------------------------------------------
    def _public(self, job: dict) -> dict:
        return {k: v for k, v in job.items() if not k.startswith("_") and v is not None}

    def _advance(self, job: dict) -> None:
        job["_polls"] += 1
        if job["_polls"] < self.polls_per_state:
            return
        job["_polls"] = 0
        status = job["status"]
        if status == "Stopping":
            return self._end(job, "Stopped", run=False)
        if status not in FLOW:
            return
        if status == "Validating":
            try:
                records = self._records(job)
            except ValueError as e:
                return self._end(job, "Failed", run=False, message=str(e))
            if len(records) < self.min_records:
                return self._end(job, "Failed", run=False, message=(
                    f"The number of records in the input ({len(records)}) is below the minimum "
                    f"({self.min_records}) of the quota 'Minimum number of records per batch inference job'"))
        if status == "Scheduled" and self.expire:
            return self._end(job, "Expired", run=False)
        if status == "InProgress":
            return self._end(job, "PartiallyCompleted" if self.unprocessed else "Completed", run=True)
        job["status"] = FLOW[FLOW.index(status) + 1]

    def _records(self, job: dict) -> list[dict]:
        bucket, key = _split(job["_input"])
        data = self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        self.inputs[job["jobArn"].rsplit("/", 1)[-1]] = data
        records = []
        for n, raw in enumerate(data.split(b"\n")):
            if not raw.strip():
                continue
            record = json.loads(raw)
            if not isinstance(record, dict) or not isinstance(record.get("modelInput"), dict):
                raise ValueError(f"line {n + 1}: not a {{recordId, modelInput}} record")
            records.append(record)
        return records

    def _end(self, job: dict, status: str, run: bool, message: str | None = None) -> None:
        job_id = job["jobArn"].rsplit("/", 1)[-1]
        lines, ok, failed = [], 0, 0
        if run:
            kind = "converse" if job["modelInvocationType"] == "Converse" else "invoke"
            url = f"{self.upstream}/model/{urllib.parse.quote(job['modelId'], safe='')}/{kind}"
            for record in self._records(job):
                rid = record.get("recordId")
                if rid in self.unprocessed:
                    continue
                if rid in self.item_errors:
                    code, text = self.item_errors[rid]
                    lines.append({**record, "error": {"errorCode": code, "errorMessage": text}})
                    failed += 1
                    continue
                code, answer = post_for_json(url, json.dumps(record["modelInput"]).encode(),
                                             {"Content-Type": "application/json"})
                if 200 <= code < 300:
                    lines.append({**record, "modelOutput": answer})
                    ok += 1
                else:
                    lines.append({**record, "error": {"errorCode": code, "errorMessage": json.dumps(answer)}})
                    failed += 1
            bucket, prefix = _split(job["_output"].rstrip("/") + "/" + job_id)
            name = job["_input"].rsplit("/", 1)[-1]
            out = b"".join(json.dumps(line, ensure_ascii=False).encode() + b"\n" for line in reversed(lines))
            self.s3.put_object(Bucket=bucket, Key=f"{prefix}/{name}.out", Body=out)
            total = len(self.inputs.get(job_id, b"").strip().split(b"\n"))
            manifest = {"totalRecordCount": total, "processedRecordCount": ok + failed, "successRecordCount": ok,
                        "errorRecordCount": failed, "inputTokenCount": 0, "outputTokenCount": 0}
            self.s3.put_object(Bucket=bucket, Key=f"{prefix}/manifest.json.out", Body=json.dumps(manifest).encode())
            job.update(totalRecordCount=total, processedRecordCount=ok + failed, successRecordCount=ok,
                       errorRecordCount=failed)
        now = time.time()
        job.update(status=status, endTime=_iso(now), lastModifiedTime=_iso(now))
        if message:
            job["message"] = message
