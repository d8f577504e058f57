"""A loopback mock of OpenAI's Batch API (and Azure OpenAI's global batch) for tests: files + batches.

Follows the vendors' documented wire format:

* `POST {prefix}/files` (multipart/form-data: `purpose=batch`, `file`): a FileObject;
  `GET {prefix}/files?purpose=batch` (list), `GET {prefix}/files/{id}/content` (the bytes);
* `POST {prefix}/batches` `{input_file_id, endpoint, completion_window: "24h", metadata}`: a Batch in
  `validating`; `GET {prefix}/batches/{id}` moves it on one state per `polls_per_state` polls:
  validating → in_progress → finalizing → completed (or failed, when its file does not validate or
  `fail_batch`; or expired, with `expire`); `POST {prefix}/batches/{id}/cancel`; `GET {prefix}/batches`;
* output lines `{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error": null}`
  (2xx in the output file, other statuses in the error file); requests never run (expired, cancelled)
  are error-file lines `{"response": null, "error": {"code": "batch_expired" | "batch_cancelled", ...}}`.

OpenAI flavour: prefix `/v1`, line url and endpoint `/v1/chat/completions`, `Authorization: Bearer`.
Azure flavour: prefix `/openai`, `?api-version=` required, `api-key` header, line url and endpoint
`/chat/completions`, the body's `model` a (global batch) deployment name, the same on every line.

Online chat completions at the same base URL (`POST {prefix}/chat/completions`, Azure's
`{prefix}/deployments/{name}/chat/completions`) are answered too, as the vendors serve both, and counted
in `online`.

Each request is answered by `answer(body_bytes) -> (status, body)`; `forward_to(base_url)` answers it
as an online OpenAI-compatible server does (the repo's mock: ../shared/tools/mock_openai_server.py), so
batch answers can be compared with online ones. `item_errors` {custom_id: (status, body)} overrides.
"""
from __future__ import annotations

import email.parser
import email.policy
import json
import threading
import urllib.parse
from typing import Callable, Iterable

from tests.mock_server import JSONHandler, post_for_json, serve_loopback, sha

STATES = ("validating", "in_progress", "finalizing")
EXPIRED_MESSAGE = "This request could not be executed before the completion window expired."
CANCELLED_MESSAGE = "This request was not executed because the batch was cancelled."


def forward_to(base_url: str) -> Callable[[bytes], tuple[int, object]]:
    """Answer a chat body as the online server at `base_url` (…/v1) answers it."""
    url = base_url.rstrip("/") + "/chat/completions"

    def answer(body: bytes) -> tuple[int, object]:
        return post_for_json(url, body, {"Content-Type": "application/json"})

    return answer


def _public(batch: dict) -> dict:
    """A Batch object as the API shows it (without the mock's own bookkeeping)."""
    return {k: v for k, v in batch.items() if not k.startswith("_")}


class MockBatchServer:
    def __init__(self, answer: Callable[[bytes], tuple[int, object]] | None = None, upstream: str | None = None,
                 flavour: str = "openai", api_key: str | None = None, polls_per_state: int = 1,
                 item_errors: dict[str, tuple[int, object]] | None = None, expire: bool | Iterable[str] = False,
                 fail_batch: str | None = None, lose_create_answer: bool = False, create_delay_s: float = 0.0,
                 deployments: Iterable[str] | None = None):
        if answer is None and upstream is None:
            raise ValueError("answer or upstream")
        self.answer = answer or forward_to(upstream)
        self.flavour = flavour
        self.prefix = "/v1" if flavour == "openai" else "/openai"
        self.line_url = "/v1/chat/completions" if flavour == "openai" else "/chat/completions"
        self.api_key = api_key
        self.polls_per_state = polls_per_state
        self.item_errors = dict(item_errors or {})
        self.expire = expire if isinstance(expire, bool) else set(expire)
        self.fail_batch = fail_batch
        self.lose_create_answer = lose_create_answer
        self.create_delay_s = create_delay_s
        self.deployments = set(deployments) if deployments is not None else None
        self.lock = threading.Lock()
        self.files: dict[str, dict] = {}
        self.batches: dict[str, dict] = {}
        self.log: list[tuple[str, str]] = []       # (method, path with query)
        self.auth: list[str] = []                  # the auth header of each call
        self.uploads: list[bytes] = []             # every uploaded file's bytes
        self.creates = 0                           # POST /batches accepted
        self.answered: list[str] = []              # custom_ids run (answered) so far
        self.online: list[bytes] = []              # bodies of online chat completions (not batched)
        self._clock = 1_700_000_000
        server = self

        class Handler(JSONHandler):
            def _error(self, status: int, message: str, code: str | None = None) -> None:
                self._send(status, {"error": {"message": message, "type": "invalid_request_error",
                                              "param": None, "code": code}})

            def _route(self, method: str):
                parts = urllib.parse.urlsplit(self.path)
                query = urllib.parse.parse_qs(parts.query)
                with server.lock:
                    server.log.append((method, self.path))
                    server.auth.append(self.headers.get("api-key") if server.flavour == "azure"
                                       else self.headers.get("Authorization", ""))
                if not parts.path.startswith(server.prefix + "/"):
                    return self._error(404, f"Unknown path {parts.path}", "not_found")
                if server.flavour == "azure" and not query.get("api-version"):
                    return self._error(404, "Resource not found (no api-version)", "404")
                if server.api_key is not None:
                    ok = (self.headers.get("api-key") == server.api_key if server.flavour == "azure"
                          else self.headers.get("Authorization") == f"Bearer {server.api_key}")
                    if not ok:
                        return self._error(401, "Incorrect API key provided (mock)", "invalid_api_key")
                rest = parts.path[len(server.prefix):].rstrip("/").split("/")[1:]
                return getattr(server, f"_{method.lower()}")(self, rest, query)

        self.httpd, self.thread = serve_loopback(Handler)
        origin = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.origin = origin
        self.base_url = origin + "/v1"          # OpenAI flavour: the SDK's base_url
        self.azure_endpoint = origin            # Azure flavour: the SDK's azure_endpoint

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- time -------------------------------------------------------------------------------------
    def _now(self) -> int:
        self._clock += 1
        return self._clock

    # -- GET --------------------------------------------------------------------------------------
    def _get(self, h, rest: list[str], query: dict) -> None:
        if rest == ["files"]:
            purpose = (query.get("purpose") or [None])[0]
            with self.lock:
                data = [self._file_object(i) for i in reversed(list(self.files))
                        if purpose is None or self.files[i]["purpose"] == purpose]
            return h._send(200, {"object": "list", "data": data, "has_more": False,
                                 "first_id": data[0]["id"] if data else None,
                                 "last_id": data[-1]["id"] if data else None})
        if len(rest) == 3 and rest[0] == "files" and rest[2] == "content":
            with self.lock:
                f = self.files.get(rest[1])
            if f is None:
                return h._error(404, f"No such File object: {rest[1]}", "not_found")
            return h._send(200, f["data"], "application/octet-stream")
        if rest == ["batches"]:
            with self.lock:
                data = [_public(self.batches[i]) for i in reversed(list(self.batches))]
            return h._send(200, {"object": "list", "data": data, "has_more": False,
                                 "first_id": data[0]["id"] if data else None,
                                 "last_id": data[-1]["id"] if data else None})
        if len(rest) == 2 and rest[0] == "batches":
            with self.lock:
                batch = self.batches.get(rest[1])
                if batch is None:
                    return h._error(404, f"No batch with id {rest[1]}", "not_found")
                self._advance(batch)
                return h._send(200, _public(batch))
        return h._error(404, "Unknown path", "not_found")

    # -- POST -------------------------------------------------------------------------------------
    def _post(self, h, rest: list[str], query: dict) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        if rest == ["files"]:
            return self._upload(h, raw)
        if rest == ["batches"]:
            return self._create(h, raw)
        if rest == ["chat", "completions"] or (len(rest) == 4 and rest[0] == "deployments"
                                               and rest[2:] == ["chat", "completions"]):
            return self._online(h, raw)
        if len(rest) == 3 and rest[0] == "batches" and rest[2] == "cancel":
            with self.lock:
                batch = self.batches.get(rest[1])
                if batch is None:
                    return h._error(404, f"No batch with id {rest[1]}", "not_found")
                if batch["status"] in ("validating", "in_progress", "finalizing"):
                    batch["status"] = "cancelling"
                    batch["cancelling_at"] = self._now()
                return h._send(200, _public(batch))
        return h._error(404, "Unknown path", "not_found")

    def _online(self, h, raw: bytes) -> None:
        """An online chat completion at the same base URL (a vendor serves both), answered as a batch
        line with this body would be; counted in `online`."""
        status, body = self.answer(raw)
        with self.lock:
            self.online.append(raw)
        h._send(status, body)

    def _upload(self, h, raw: bytes) -> None:
        ctype = h.headers.get("Content-Type", "")
        if not ctype.startswith("multipart/form-data"):
            return h._error(400, "Expected multipart/form-data")
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + raw)
        fields, filename, data = {}, None, None
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if name == "file":
                filename = part.get_filename()
                data = part.get_payload(decode=True)
            else:
                fields[name] = part.get_payload(decode=True).decode()
        if data is None or fields.get("purpose") != "batch":
            return h._error(400, "A file and purpose=batch are required", "invalid_request")
        with self.lock:
            file_id = "file-" + sha("file", len(self.files), filename)[:24]
            self.files[file_id] = {"data": data, "filename": filename, "purpose": "batch", "created_at": self._now()}
            self.uploads.append(data)
            obj = self._file_object(file_id)
        h._send(200, obj)

    def _file_object(self, file_id: str) -> dict:
        f = self.files[file_id]
        obj = {"id": file_id, "object": "file", "bytes": len(f["data"]), "created_at": f["created_at"],
               "filename": f["filename"], "purpose": f["purpose"]}
        if self.flavour == "azure":
            obj["status"] = "processed"
        return obj

    def _create(self, h, raw: bytes) -> None:
        try:
            params = json.loads(raw)
        except ValueError:
            return h._error(400, "Invalid JSON body")
        if params.get("completion_window") != "24h":
            return h._error(400, "completion_window must be 24h", "invalid_value")
        if params.get("endpoint") != self.line_url:
            return h._error(400, f"endpoint must be {self.line_url}", "invalid_value")
        with self.lock:
            f = self.files.get(params.get("input_file_id"))
            if f is None:
                return h._error(404, "No such File object", "not_found")
            batch_id = "batch_" + sha("batch", len(self.batches))[:24]
            now = self._now()
            self.batches[batch_id] = {
                "id": batch_id, "object": "batch", "endpoint": params["endpoint"], "errors": None,
                "input_file_id": params["input_file_id"], "completion_window": "24h", "status": "validating",
                "output_file_id": None, "error_file_id": None, "created_at": now, "in_progress_at": None,
                "expires_at": now + 86400, "finalizing_at": None, "completed_at": None, "failed_at": None,
                "expired_at": None, "cancelling_at": None, "cancelled_at": None,
                "request_counts": {"total": 0, "completed": 0, "failed": 0},
                "metadata": params.get("metadata"), "_polls": 0}
            self.creates += 1
            batch = _public(self.batches[batch_id])
        h._send_late(200, batch, self.create_delay_s, lose=self.lose_create_answer)  # lost: the batch exists

    # -- the batch's life -------------------------------------------------------------------------
    def _advance(self, batch: dict) -> None:
        """One poll: after `polls_per_state` polls in a state, the next state (under the lock)."""
        batch["_polls"] += 1
        if batch["_polls"] < self.polls_per_state:
            return
        batch["_polls"] = 0
        status = batch["status"]
        if status == "validating":
            problems = self._validate(batch)
            if problems:
                batch.update(status="failed", failed_at=self._now(),
                             errors={"object": "list", "data": problems})
            else:
                batch.update(status="in_progress", in_progress_at=self._now())
        elif status == "in_progress":
            batch.update(status="finalizing", finalizing_at=self._now())
        elif status == "finalizing":
            expired = self.expire is True or (isinstance(self.expire, set) and bool(self.expire))
            self._run(batch, expired)
            if expired:
                batch.update(status="expired", expired_at=self._now())
            else:
                batch.update(status="completed", completed_at=self._now())
        elif status == "cancelling":
            self._run(batch, False, cancelled=True)
            batch.update(status="cancelled", cancelled_at=self._now())

    def _lines(self, batch: dict) -> list:
        data = self.files[batch["input_file_id"]]["data"]
        return [raw for raw in data.split(b"\n") if raw.strip()]

    def _validate(self, batch: dict) -> list[dict]:
        if self.fail_batch:
            return [{"code": "invalid_request", "message": self.fail_batch, "param": None, "line": None}]
        problems, seen, models = [], set(), set()
        lines = self._lines(batch)
        if not lines:
            return [{"code": "empty_file", "message": "The input file is empty.", "param": None, "line": None}]
        for n, raw in enumerate(lines, 1):
            try:
                line = json.loads(raw)
            except ValueError:
                problems.append({"code": "invalid_json_line", "message": "This line is not parseable as valid JSON.",
                                 "param": None, "line": n})
                continue
            if line.get("custom_id") in seen:
                problems.append({"code": "duplicate_custom_id", "message": "The custom_id for this request is a "
                                 "duplicate of another request.", "param": "custom_id", "line": n})
            seen.add(line.get("custom_id"))
            if line.get("method") != "POST" or line.get("url") != self.line_url:
                problems.append({"code": "invalid_url", "message": f"The URL provided for this request does not "
                                 f"match the batch endpoint {self.line_url}.", "param": "url", "line": n})
            model = (line.get("body") or {}).get("model")
            models.add(model)
            if self.deployments is not None and model not in self.deployments:
                problems.append({"code": "model_not_found", "message": f"The deployment {model!r} is not a global "
                                 f"batch deployment.", "param": "body.model", "line": n})
        if len(models) > 1:
            problems.append({"code": "mismatched_model", "message": "All requests of a batch must use the same "
                             "model.", "param": "body.model", "line": None})
        return problems

    def _run(self, batch: dict, expired: bool, cancelled: bool = False) -> None:
        """Answer the batch's requests (those not expired / cancelled) into its output and error files."""
        out, err = [], []
        counts = {"total": 0, "completed": 0, "failed": 0}
        for raw in self._lines(batch):
            line = json.loads(raw)
            key = line["custom_id"]
            counts["total"] += 1
            rid = sha("item", batch["id"], key)
            entry = {"id": "batch_req_" + rid[:24], "custom_id": key}
            skip = cancelled or self.expire is True or (isinstance(self.expire, set) and key in self.expire)
            if skip:
                code, message = ("batch_cancelled", CANCELLED_MESSAGE) if cancelled else ("batch_expired",
                                                                                           EXPIRED_MESSAGE)
                err.append({**entry, "response": None, "error": {"code": code, "message": message}})
                counts["failed"] += 1
                continue
            if key in self.item_errors:
                status, body = self.item_errors[key]
            else:
                body_bytes = json.dumps(line["body"], ensure_ascii=False, separators=(",", ":")).encode()
                status, body = self.answer(body_bytes)
            self.answered.append(key)
            response = {"status_code": status, "request_id": "req_" + rid[24:48], "body": body}
            if 200 <= status < 300:
                out.append({**entry, "response": response, "error": None})
                counts["completed"] += 1
            else:
                err.append({**entry, "response": response, "error": None})
                counts["failed"] += 1
        for lines, field in ((out, "output_file_id"), (err, "error_file_id")):
            if lines:
                file_id = "file-" + sha(field, batch["id"])[:24]
                self.files[file_id] = {"data": b"".join(json.dumps(x).encode() + b"\n" for x in lines),
                                       "filename": f"{batch['id']}_{field.split('_')[0]}.jsonl",
                                       "purpose": "batch_output", "created_at": self._now()}
                batch[field] = file_id
        batch["request_counts"] = counts

