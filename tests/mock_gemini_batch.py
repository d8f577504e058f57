"""A loopback mock of the Gemini API's batch mode and Files API for tests, answered by the real google-genai
SDK pointed at it (`base_url`).

Follows Google's documented REST wire format (https://ai.google.dev/api/batch-api,
https://ai.google.dev/api/files, https://ai.google.dev/gemini-api/docs/batch-mode), as the SDK speaks it:

* every call but an upload session's needs `x-goog-api-key` (when `api_key` is set, another key is answered 400
  INVALID_ARGUMENT "API key not valid", as Google does); errors are `{"error": {"code", "message", "status"}}`;
* `POST /upload/v1beta/files` with `X-Goog-Upload-Protocol: resumable`, `X-Goog-Upload-Command: start`
  and `{"file": {"displayName", "mimeType", "sizeBytes"}}`: answered with an `x-goog-upload-url`; the bytes
  POSTed there (`X-Goog-Upload-Command: upload[, finalize]`, `X-Goog-Upload-Offset`) make the file
  (`{"file": File}`, `x-goog-upload-status: final`);
* `GET /v1beta/files/{id}`, `GET /v1beta/files?pageSize=&pageToken=` (newest first, `files`,
  `nextPageToken`); `GET /v1beta/files/{id}:download?alt=media` (the SDK's path) or
  `/download/v1beta/files/{id}:download?alt=media` (a File's `downloadUri`): generated files only;
* `POST /v1beta/models/{model}:batchGenerateContent` `{"batch": {"displayName", "inputConfig":
  {"fileName"}}}`: a long-running Operation `{"name": "batches/...", "metadata": GenerateContentBatch}`,
  BATCH_STATE_PENDING; the input file a JSONL of `{"key", "request"}` lines;
* `GET /v1beta/batches/{id}`: after `polls_per_state` polls in a state the batch moves on: PENDING →
  RUNNING → SUCCEEDED (its requests run; `metadata.output.responsesFile`, `done`, `response`);
  `POST /v1beta/batches/{id}:cancel` (→ CANCELLED, nothing run); `GET /v1beta/batches?pageSize=&pageToken=`
  (`operations`, newest first, `nextPageToken`).

The responses file has a line a request, in the reverse of the input order (Google promises none):
`{"key", "response": GenerateContentResponse}` or `{"key", "error": google.rpc.Status}` (a gRPC code).
Each request is answered by `answer(model, body_bytes) -> (status, body)`; `forward_to(origin)` POSTs it to
an online Gemini API (the repo's `shared/tools/mock_vendor_server.py`). `item_errors` {key: rpc status}
and `item_responses` {key: response} override; `expire` ends a batch EXPIRED with nothing run, `fail`
FAILED; `drop_keys` leaves keys out of the responses file.
"""
from __future__ import annotations

import datetime
import json
import threading
import time
import urllib.parse
from typing import Callable, Iterable

from tests.mock_server import JSONHandler, post_for_json, serve_loopback, sha

BATCH_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch"
OUTPUT_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput"
RPC_CODES = {"INVALID_ARGUMENT": 3, "NOT_FOUND": 5, "PERMISSION_DENIED": 7, "RESOURCE_EXHAUSTED": 8,
             "INTERNAL": 13, "UNAVAILABLE": 14, "UNAUTHENTICATED": 16, "DEADLINE_EXCEEDED": 4}
HTTP_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
               429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


def forward_to(origin: str, api_key: str = "mock-forward") -> Callable[[str, bytes], tuple[int, object]]:
    """Answer a GenerateContentRequest for `model` (`models/...`) as the online API at `origin` does."""
    def answer(model: str, body: bytes) -> tuple[int, object]:
        return post_for_json(f"{origin.rstrip('/')}/v1beta/{model}:generateContent", body,
                             {"Content-Type": "application/json", "x-goog-api-key": api_key})
    return answer


def _iso(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def _error(code: int, message: str, status: str) -> dict:
    return {"error": {"code": code, "message": message, "status": status}}


def _get(d: dict, camel: str, snake: str):
    return d.get(camel, d.get(snake))


class MockGeminiBatchServer:
    def __init__(self, answer: Callable[[str, bytes], tuple[int, object]] | None = None, upstream: str | None = None,
                 api_key: str | None = None, polls_per_state: int = 1, item_errors: dict[str, dict] | None = None,
                 item_responses: dict[str, dict] | None = None, expire: bool = False, fail: bool = False,
                 drop_keys: Iterable[str] = (), lose_create_answer: bool = False, create_delay_s: float = 0.0,
                 on_create: Callable[[], None] | None = None, page_size: int | None = None):
        if answer is None and upstream is None:
            raise ValueError("answer or upstream")
        self.answer = answer or forward_to(upstream)
        self.api_key = api_key
        self.polls_per_state = polls_per_state
        self.item_errors = dict(item_errors or {})
        self.item_responses = dict(item_responses or {})
        self.expire, self.fail = expire, fail
        self.drop_keys = set(drop_keys)
        self.lose_create_answer = lose_create_answer   # the batch is made, its answer never arrives
        self.create_delay_s = create_delay_s
        self.on_create = on_create                     # called when a create arrives, before the batch is made
        self.page_size = page_size                     # the most a list page holds (else the asked pageSize)
        self.lock = threading.Lock()
        self.files: dict[str, dict] = {}               # files/{id} -> File (+ "_data")
        self.uploads: dict[str, dict] = {}             # upload id -> {"file", "data"}
        self.batches: dict[str, dict] = {}             # batches/{id} -> the batch (+ private keys)
        self.log: list[tuple[str, str]] = []           # (method, path with query)
        self.keys: list[str | None] = []               # the x-goog-api-key of each call
        self.create_bodies: list[bytes] = []           # the raw body of every create accepted
        self.creates = 0
        self.answered: list[str] = []                  # keys run so far
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
                    server.keys.append(self.headers.get("x-goog-api-key"))
                # An upload URL (its upload_id) is its own authorization: the SDK sends no key there.
                session = parts.path == "/upload/v1beta/files" and "upload_id" in query
                if server.api_key is not None and not session and self.headers.get("x-goog-api-key") != server.api_key:
                    return self._send(400, _error(400, "API key not valid. Please pass a valid API key.",
                                                  "INVALID_ARGUMENT"))
                return server._dispatch(self, method, urllib.parse.unquote(parts.path), query, raw)

        self.httpd, self.thread = serve_loopback(Handler)
        self.origin = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.base_url = self.origin  # the SDK's base_url (it adds /v1beta/... and /upload/v1beta/...)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- routing ----------------------------------------------------------------------------------
    def _dispatch(self, h, method: str, path: str, query: dict, raw: bytes) -> None:
        not_found = lambda: h._send(404, _error(404, f"Unknown path {path}", "NOT_FOUND"))  # noqa: E731
        if method == "POST" and path == "/upload/v1beta/files":
            return self._upload(h, query, raw)
        if method == "GET" and path.startswith("/download/v1beta/files/") and path.endswith(":download"):
            return self._download(h, path[len("/download/v1beta/"):-len(":download")])
        if not path.startswith("/v1beta/"):
            return not_found()
        rest = path[len("/v1beta/"):]
        if method == "POST" and rest.startswith("models/") and rest.endswith(":batchGenerateContent"):
            return self._create(h, rest[:-len(":batchGenerateContent")], raw)
        if method == "GET" and rest == "batches":
            return self._list(h, query, self.batches, "operations", self._operation)
        if method == "GET" and rest == "files":
            return self._list(h, query, self.files, "files", self._file)
        if method == "GET" and rest.startswith("files/") and rest.endswith(":download"):
            return self._download(h, rest[:-len(":download")])
        if method == "GET" and rest.startswith("files/"):
            with self.lock:
                f = self.files.get(rest)
                return h._send(200, self._file(f)) if f else h._send(
                    403, _error(403, f"You do not have permission to access the File {rest[6:]} or it may not "
                                     "exist.", "PERMISSION_DENIED"))
        if method == "GET" and rest.startswith("batches/"):
            with self.lock:
                batch = self.batches.get(rest)
                if batch is None:
                    return h._send(404, _error(404, f"Batch {rest} not found", "NOT_FOUND"))
                self._advance(batch)
                return h._send(200, self._operation(batch))
        if method == "POST" and rest.startswith("batches/") and rest.endswith(":cancel"):
            with self.lock:
                batch = self.batches.get(rest[:-len(":cancel")])
                if batch is None:
                    return h._send(404, _error(404, "Batch not found", "NOT_FOUND"))
                if batch["state"] in ("BATCH_STATE_PENDING", "BATCH_STATE_RUNNING"):
                    self._end(batch, "BATCH_STATE_CANCELLED")
                return h._send(200, {})
        return not_found()

    def _list(self, h, query: dict, table: dict, field: str, public) -> None:
        size = max(1, min(1000, int(query.get("pageSize") or 50)))
        size = min(size, self.page_size or size)
        with self.lock:
            names = list(reversed(list(table)))  # newest first
            start = int(query.get("pageToken") or 0)
            page = names[start:start + size]
            body = {field: [public(table[n]) for n in page]}
            if start + size < len(names):
                body["nextPageToken"] = str(start + size)
        h._send(200, body)

    # -- files ------------------------------------------------------------------------------------
    def _file(self, f: dict) -> dict:
        return {k: v for k, v in f.items() if not k.startswith("_")}

    def _new_file(self, display_name: str | None, mime_type: str, data: bytes, source: str) -> dict:
        now = time.time()
        fid = "files/" + sha("file", len(self.files), now)[:12]
        f = {"name": fid, "mimeType": mime_type, "sizeBytes": str(len(data)), "createTime": _iso(now),
             "updateTime": _iso(now), "expirationTime": _iso(now + 48 * 3600), "sha256Hash": sha(data)[:44],
             "uri": f"{self.origin}/v1beta/{fid}", "state": "ACTIVE", "source": source, "_data": data}
        if display_name:
            f["displayName"] = display_name
        if source == "GENERATED":
            f["downloadUri"] = f"{self.origin}/download/v1beta/{fid}:download?alt=media"
        self.files[fid] = f
        return f

    def _upload(self, h, query: dict, raw: bytes) -> None:
        command = (h.headers.get("X-Goog-Upload-Command") or "").lower()
        if "upload_id" not in query:
            if h.headers.get("X-Goog-Upload-Protocol") != "resumable" or command != "start":
                return h._send(400, _error(400, "a resumable upload starts with X-Goog-Upload-Command: start",
                                           "INVALID_ARGUMENT"))
            meta = (json.loads(raw or b"{}").get("file") or {})
            with self.lock:
                upload_id = sha("upload", len(self.uploads), time.time())[:16]
                self.uploads[upload_id] = {"file": meta, "data": b"",
                                           "type": h.headers.get("X-Goog-Upload-Header-Content-Type")}
            url = f"{self.origin}/upload/v1beta/files?upload_id={upload_id}&upload_protocol=resumable"
            return self._send_headers(h, 200, b"", {"x-goog-upload-url": url, "x-goog-upload-status": "active"})
        with self.lock:
            upload = self.uploads.get(query["upload_id"])
            if upload is None:
                return h._send(404, _error(404, "no such upload", "NOT_FOUND"))
            if int(h.headers.get("X-Goog-Upload-Offset") or 0) != len(upload["data"]):
                return h._send(400, _error(400, "wrong X-Goog-Upload-Offset", "INVALID_ARGUMENT"))
            upload["data"] += raw
            if "finalize" not in command:
                return self._send_headers(h, 200, b"", {"x-goog-upload-status": "active"})
            meta = upload["file"]
            f = self._new_file(_get(meta, "displayName", "display_name"),
                               _get(meta, "mimeType", "mime_type") or upload["type"], upload["data"], "UPLOADED")
            del self.uploads[query["upload_id"]]
            body = json.dumps({"file": self._file(f)}).encode()
        self._send_headers(h, 200, body, {"x-goog-upload-status": "final"})

    def _send_headers(self, h, status: int, body: bytes, headers: dict[str, str]) -> None:
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        for k, v in headers.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)

    def _download(self, h, fid: str) -> None:
        with self.lock:
            f = self.files.get(fid)
        if f is None:
            return h._send(404, _error(404, f"File {fid} not found", "NOT_FOUND"))
        if f["source"] != "GENERATED":
            return h._send(400, _error(400, "Only generated files can be downloaded.", "INVALID_ARGUMENT"))
        h._send(200, f["_data"], "application/octet-stream")

    # -- batches ----------------------------------------------------------------------------------
    def _create(self, h, model: str, raw: bytes) -> None:
        if self.on_create is not None:
            self.on_create()
        try:
            batch_in = json.loads(raw).get("batch") or {}
        except (ValueError, AttributeError):
            return h._send(400, _error(400, "Invalid JSON payload", "INVALID_ARGUMENT"))
        file_name = (batch_in.get("inputConfig") or {}).get("fileName")
        if not batch_in.get("displayName"):
            return h._send(400, _error(400, "batch.display_name is required", "INVALID_ARGUMENT"))
        with self.lock:
            f = self.files.get(file_name or "")
            if f is None:
                return h._send(400, _error(400, f"Input file {file_name} not found", "INVALID_ARGUMENT"))
            lines = []
            for n, line in enumerate(f["_data"].split(b"\n")):
                if not line.strip():
                    continue
                item = json.loads(line)
                if not isinstance(item.get("request"), dict):
                    return h._send(400, _error(400, f"line {n + 1}: request is required", "INVALID_ARGUMENT"))
                lines.append((item.get("key"), item["request"]))
            now = time.time()
            name = "batches/" + sha("batch", len(self.batches), now)[:20]
            self.batches[name] = {"name": name, "model": model, "displayName": batch_in["displayName"],
                                  "inputConfig": {"fileName": file_name}, "createTime": _iso(now),
                                  "updateTime": _iso(now), "state": "BATCH_STATE_PENDING",
                                  "batchStats": {"requestCount": str(len(lines)), "pendingRequestCount": str(len(lines))},
                                  "_lines": lines, "_polls": 0}
            self.creates += 1
            self.create_bodies.append(raw)
            op = self._operation(self.batches[name])
        h._send_late(200, op, self.create_delay_s, lose=self.lose_create_answer)

    def _operation(self, batch: dict) -> dict:
        meta = {"@type": BATCH_TYPE, **{k: v for k, v in batch.items() if not k.startswith("_")}}
        op = {"name": batch["name"], "metadata": meta}
        if batch["state"] not in ("BATCH_STATE_PENDING", "BATCH_STATE_RUNNING"):
            op["done"] = True
            if batch["state"] == "BATCH_STATE_FAILED":
                op["error"] = {"code": 13, "message": "Batch failed: internal error"}
            elif "output" in batch:
                op["response"] = {"@type": OUTPUT_TYPE, **batch["output"]}
        return op

    def _advance(self, batch: dict) -> None:
        """One poll (under the lock): after `polls_per_state` polls in a state, the next one."""
        if batch["state"] not in ("BATCH_STATE_PENDING", "BATCH_STATE_RUNNING"):
            return
        batch["_polls"] += 1
        if batch["_polls"] < self.polls_per_state:
            return
        batch["_polls"] = 0
        if batch["state"] == "BATCH_STATE_PENDING":
            batch["state"] = "BATCH_STATE_RUNNING"
        elif self.expire:
            self._end(batch, "BATCH_STATE_EXPIRED")
        elif self.fail:
            self._end(batch, "BATCH_STATE_FAILED")
        else:
            self._run(batch)

    def _end(self, batch: dict, state: str) -> None:
        now = _iso(time.time())
        batch.update(state=state, endTime=now, updateTime=now)

    def _run(self, batch: dict) -> None:
        out, ok, failed = [], 0, 0
        for key, request in batch["_lines"]:
            if key in self.drop_keys:
                continue
            if key in self.item_errors:
                line = {"key": key, "error": self.item_errors[key]}
            elif key in self.item_responses:
                line = {"key": key, "response": self.item_responses[key]}
            else:
                status, body = self.answer(batch["model"], json.dumps(request).encode())
                if status == 200:
                    line = {"key": key, "response": body}
                else:
                    error = body.get("error") if isinstance(body, dict) else None
                    error = error if isinstance(error, dict) else {"message": str(body)}
                    name = error.get("status") or HTTP_STATUS.get(status, "INTERNAL")
                    line = {"key": key, "error": {"code": RPC_CODES.get(name, 13), "message": error.get("message"),
                                                  "status": name}}
            self.answered.append(key)
            ok, failed = (ok + 1, failed) if "response" in line else (ok, failed + 1)
            out.append(line)
        data = b"".join(json.dumps(line).encode() + b"\n" for line in reversed(out))
        f = self._new_file(f"batch-{batch['name'].split('/')[1]}", "application/jsonl", data, "GENERATED")
        batch["output"] = {"responsesFile": f["name"]}
        batch["batchStats"] = {"requestCount": str(len(batch["_lines"])), "successfulRequestCount": str(ok),
                               "failedRequestCount": str(failed)}
        self._end(batch, "BATCH_STATE_SUCCEEDED")
