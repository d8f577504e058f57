"""A loopback mock of Vertex AI's batchPredictionJobs REST API for Gemini, reading its input from and writing
its output to Cloud Storage (the project's GCS emulator, `tests/gcs_emulator.py`), for the real google-genai
SDK in Vertex AI mode pointed at it (`base_url`).

Follows Google's documented wire format (https://cloud.google.com/vertex-ai/generative-ai/docs/multimodal/
batch-prediction-from-cloud-storage, https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/
batch-prediction-api, the REST reference of projects.locations.batchPredictionJobs), as the SDK speaks it:

* every call needs `Authorization: Bearer <token>` (when `token` is set; another is answered 401
  UNAUTHENTICATED); errors are `{"error": {"code", "message", "status"}}`;
* `POST /{v1|v1beta1}/projects/{p}/locations/{l}/batchPredictionJobs` `{"displayName", "model",
  "inputConfig": {"instancesFormat": "jsonl", "gcsSource": {"uris"}}, "outputConfig": {"predictionsFormat":
  "jsonl", "gcsDestination": {"outputUriPrefix"}}}`: the BatchPredictionJob, JOB_STATE_PENDING; the input a
  JSONL of `{"request": GenerateContentRequest}` lines (another field on a line, or none, is refused 400);
* `GET .../batchPredictionJobs/{id}`: after `polls_per_state` polls in a state the job moves on: PENDING →
  RUNNING → SUCCEEDED (its requests run; `outputInfo.gcsOutputDirectory`, `completionStats`, `endTime`);
  `POST .../batchPredictionJobs/{id}:cancel` (`{}`; → CANCELLING, then CANCELLED at the next poll, nothing
  run); `GET .../batchPredictionJobs?filter=display_name="..."&pageSize=&pageToken=` (`batchPredictionJobs`,
  newest first, `nextPageToken`);
* the output: `<outputUriPrefix>/prediction-model-<time>/predictions.jsonl`, a line a request in the reverse
  of the input order (Google promises none): `{"status": "", "processed_time", "request", "response"}`, or
  for a failed request `{"status": "<HTTP reason>: <error JSON>", "processed_time", "request"}`.

Each request is answered by POSTing it to an online Vertex AI endpoint (`upstream`: the repo's
`shared/tools/mock_vendor_server.py`, which serves `.../publishers/google/models/{m}:generateContent`).
Overrides, by the request's last prompt text: `item_status` {prompt: status text}, `item_responses` {prompt:
response}, `drop_prompts` (left out of the output). `expire` ends a job EXPIRED with nothing run, `fail`
FAILED, `partial` PARTIALLY_SUCCEEDED (the dropped ones missing). `echo="proto"` writes each echoed request
back without its empty lists and with sorted keys (as a service that re-serializes it might).
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

_JOBS = re.compile(r"/(v1|v1beta1)/projects/([^/]+)/locations/([^/]+)/batchPredictionJobs(?:/([^/:]+))?(:cancel)?")
_FILTER = re.compile(r'\s*display_name\s*=\s*"([^"]*)"\s*')
REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 429: "Too Many Requests",
           500: "Internal Server Error", 503: "Service Unavailable", 504: "Gateway Timeout"}
RUNNING = ("JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_CANCELLING")


def _iso(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def _error(code: int, message: str, status: str) -> dict:
    return {"error": {"code": code, "message": message, "status": status}}


def prompt_of(request: dict) -> str:
    """The last content's first text part (how the overrides name a request)."""
    try:
        return request["contents"][-1]["parts"][0]["text"]
    except (KeyError, IndexError, TypeError):
        return ""


def _proto_echo(v):
    if isinstance(v, dict):
        return {k: _proto_echo(x) for k, x in sorted(v.items()) if x not in ([], {}, None)}
    if isinstance(v, list):
        return [_proto_echo(x) for x in v]
    return v


class MockVertexBatchServer:
    def __init__(self, fs, upstream: str | None = None, answer: Callable[[str, str, str, bytes], tuple[int, object]]
                 | None = None, token: str | None = None, polls_per_state: int = 1,
                 item_status: dict[str, str] | None = None, item_responses: dict[str, dict] | None = None,
                 drop_prompts: Iterable[str] = (), expire: bool = False, fail: bool = False, partial: bool = False,
                 echo: str = "same", lose_create_answer: bool = False, create_delay_s: float = 0.0,
                 on_create: Callable[[], None] | None = None, page_size: int | None = None):
        if answer is None and upstream is None:
            raise ValueError("answer or upstream")
        self.fs = fs                                   # a gcsfs filesystem on the emulator
        self.upstream = upstream
        self.answer = answer or self._forward
        self.token = token
        self.polls_per_state = polls_per_state
        self.item_status = dict(item_status or {})
        self.item_responses = dict(item_responses or {})
        self.drop_prompts = set(drop_prompts)
        self.expire, self.fail, self.partial, self.echo = expire, fail, partial, echo
        self.lose_create_answer = lose_create_answer
        self.create_delay_s = create_delay_s
        self.on_create = on_create
        self.page_size = page_size
        self.lock = threading.Lock()
        self.jobs: dict[str, dict] = {}                # full job name -> job (+ private keys)
        self.log: list[tuple[str, str]] = []
        self.auth: list[str | None] = []
        self.create_bodies: list[bytes] = []
        self.creates = 0
        self.answered: list[str] = []                  # prompts run so far
        server = self

        class Handler(JSONHandler):
            request_id_header, request_id_chars = "x-goog-request-id", 16

            def _route(self, method: str):
                parts = urllib.parse.urlsplit(self.path)
                query = {k: v[0] for k, v in urllib.parse.parse_qs(parts.query).items()}
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                with server.lock:
                    server.log.append((method, self.path))
                    server.auth.append(self.headers.get("Authorization"))
                if server.token is not None and self.headers.get("Authorization") != f"Bearer {server.token}":
                    return self._send(401, _error(401, "Request had invalid authentication credentials.",
                                                  "UNAUTHENTICATED"))
                return server._dispatch(self, method, urllib.parse.unquote(parts.path), query, raw)

        self.httpd, self.thread = serve_loopback(Handler)
        self.origin = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.base_url = self.origin

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _forward(self, project: str, location: str, model: str, body: bytes) -> tuple[int, object]:
        url = f"{self.upstream.rstrip('/')}/v1beta1/projects/{project}/locations/{location}/{model}:generateContent"
        return post_for_json(url, body, {"Content-Type": "application/json", "Authorization": "Bearer mock"})

    # -- routing ----------------------------------------------------------------------------------
    def _dispatch(self, h, method: str, path: str, query: dict, raw: bytes) -> None:
        m = _JOBS.fullmatch(path)
        if m is None:
            return h._send(404, _error(404, f"Unknown path {path}", "NOT_FOUND"))
        _, project, location, job_id, cancel = m.groups()
        parent = f"projects/{project}/locations/{location}"
        if method == "POST" and job_id is None:
            return self._create(h, parent, raw)
        if method == "GET" and job_id is None:
            return self._list(h, parent, query)
        name = f"{parent}/batchPredictionJobs/{job_id}"
        with self.lock:
            job = self.jobs.get(name)
            if job is None:
                return h._send(404, _error(404, f"BatchPredictionJob {name} not found", "NOT_FOUND"))
            if method == "POST" and cancel:
                if job["state"] in ("JOB_STATE_PENDING", "JOB_STATE_RUNNING"):
                    job["state"] = "JOB_STATE_CANCELLING"
                return h._send(200, {})
            if method == "GET" and not cancel:
                self._advance(job)
                return h._send(200, self._public(job))
        return h._send(404, _error(404, f"Unknown path {path}", "NOT_FOUND"))

    def _public(self, job: dict) -> dict:
        return {k: v for k, v in job.items() if not k.startswith("_")}

    def _list(self, h, parent: str, query: dict) -> None:
        wanted = None
        if query.get("filter"):
            f = _FILTER.fullmatch(query["filter"])
            if f is None:
                return h._send(400, _error(400, f"Unsupported filter {query['filter']!r}", "INVALID_ARGUMENT"))
            wanted = f.group(1)
        size = max(1, min(100, int(query.get("pageSize") or 100)))
        size = min(size, self.page_size or size)
        with self.lock:
            names = [n for n in reversed(list(self.jobs)) if n.startswith(parent + "/")
                     and (wanted is None or self.jobs[n]["displayName"] == wanted)]
            start = int(query.get("pageToken") or 0)
            body = {"batchPredictionJobs": [self._public(self.jobs[n]) for n in names[start:start + size]]}
            if start + size < len(names):
                body["nextPageToken"] = str(start + size)
        h._send(200, body)

    # -- jobs -------------------------------------------------------------------------------------
    def _create(self, h, parent: str, raw: bytes) -> None:
        if self.on_create is not None:
            self.on_create()
        try:
            body = json.loads(raw)
        except ValueError:
            return h._send(400, _error(400, "Invalid JSON payload", "INVALID_ARGUMENT"))
        inp, out = body.get("inputConfig") or {}, body.get("outputConfig") or {}
        uris = (inp.get("gcsSource") or {}).get("uris") or []
        prefix = (out.get("gcsDestination") or {}).get("outputUriPrefix")
        if not body.get("displayName") or not str(body.get("model", "")).startswith("publishers/google/models/"):
            return h._send(400, _error(400, "displayName and a publisher model are required", "INVALID_ARGUMENT"))
        if inp.get("instancesFormat") != "jsonl" or out.get("predictionsFormat") != "jsonl" or not uris or not prefix:
            return h._send(400, _error(400, "jsonl input and output in Cloud Storage expected", "INVALID_ARGUMENT"))
        lines = []
        for uri in uris:
            try:
                data = self.fs.cat_file(uri)
            except FileNotFoundError:
                return h._send(400, _error(400, f"Input {uri} not found", "INVALID_ARGUMENT"))
            for n, line in enumerate(data.split(b"\n")):
                if not line.strip():
                    continue
                item = json.loads(line)
                if set(item) != {"request"} or not isinstance(item["request"], dict):
                    return h._send(400, _error(400, f"{uri} line {n + 1}: a line is {{\"request\": ...}}",
                                               "INVALID_ARGUMENT"))
                lines.append(item["request"])
        with self.lock:
            now = time.time()
            job_id = str(int(sha("job", len(self.jobs), now)[:15], 16))
            name = f"{parent}/batchPredictionJobs/{job_id}"
            self.jobs[name] = {"name": name, "displayName": body["displayName"], "model": body["model"],
                               "inputConfig": inp, "outputConfig": out, "state": "JOB_STATE_PENDING",
                               "createTime": _iso(now), "updateTime": _iso(now), "_lines": lines, "_polls": 0,
                               "_parent": parent}
            self.creates += 1
            self.create_bodies.append(raw)
            job = self._public(self.jobs[name])
        h._send_late(200, job, self.create_delay_s, lose=self.lose_create_answer)

    def _advance(self, job: dict) -> None:
        if job["state"] == "JOB_STATE_CANCELLING":
            return self._end(job, "JOB_STATE_CANCELLED")
        if job["state"] not in RUNNING:
            return
        job["_polls"] += 1
        if job["_polls"] < self.polls_per_state:
            return
        job["_polls"] = 0
        if job["state"] == "JOB_STATE_PENDING":
            now = _iso(time.time())
            job.update(state="JOB_STATE_RUNNING", startTime=now, updateTime=now)
        elif self.expire:
            self._end(job, "JOB_STATE_EXPIRED")
        elif self.fail:
            job["error"] = {"code": 13, "message": "Internal error encountered."}
            self._end(job, "JOB_STATE_FAILED")
        else:
            self._run(job)

    def _end(self, job: dict, state: str) -> None:
        now = _iso(time.time())
        job.update(state=state, endTime=now, updateTime=now)

    def _run(self, job: dict) -> None:
        project, location = job["_parent"].split("/")[1::2]
        out, ok, failed, missing = [], 0, 0, 0
        for request in job["_lines"]:
            prompt = prompt_of(request)
            if prompt in self.drop_prompts:
                missing += 1
                continue
            echo = _proto_echo(request) if self.echo == "proto" else request
            line = {"status": "", "processed_time": _iso(time.time()), "request": echo}
            if prompt in self.item_status:
                line["status"] = self.item_status[prompt]
            elif prompt in self.item_responses:
                line["response"] = self.item_responses[prompt]
            else:
                status, body = self.answer(project, location, job["model"], json.dumps(request).encode())
                if status == 200:
                    line["response"] = body
                else:
                    line["status"] = f"{REASONS.get(status, 'Error')}: {json.dumps(body)}"
            self.answered.append(prompt)
            ok, failed = (ok + 1, failed) if "response" in line else (ok, failed + 1)
            out.append(line)
        folder = (f"{job['outputConfig']['gcsDestination']['outputUriPrefix'].rstrip('/')}/prediction-model-"
                  f"{_iso(time.time())}")
        data = b"".join(json.dumps(line).encode() + b"\n" for line in reversed(out))
        self.fs.pipe_file(f"{folder}/predictions.jsonl", data)
        self.fs.invalidate_cache()
        job["outputInfo"] = {"gcsOutputDirectory": folder}
        job["completionStats"] = {"successfulCount": str(ok), "failedCount": str(failed),
                                  "incompleteCount": str(missing)}
        self._end(job, "JOB_STATE_PARTIALLY_SUCCEEDED" if self.partial else "JOB_STATE_SUCCEEDED")
