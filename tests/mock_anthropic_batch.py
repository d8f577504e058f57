"""A loopback mock of Anthropic's Message Batches API for tests.

Follows Anthropic's documented wire format (https://docs.anthropic.com/en/api/creating-message-batches
and the pages beside it):

* every call needs `x-api-key` (401 `authentication_error` when `api_key` is set and it differs) and
  `anthropic-version` (400 without); errors are `{"type": "error", "error": {"type", "message"}}`;
* `POST /v1/messages/batches` `{"requests": [{"custom_id", "params"}, ...]}`: 1 to 100,000 requests,
  custom_ids of 1 to 64 `[A-Za-z0-9_-]` characters, unique; `params` a Messages body (`model`,
  `max_tokens`, `messages`; no `stream`). Answers a MessageBatch `in_progress` with every request
  `processing`;
* `GET /v1/messages/batches/{id}`: after `polls_per_state` polls in a state the batch moves on:
  in_progress → ended (its requests run), canceling → ended (those not run canceled); once ended
  `request_counts` {processing, succeeded, errored, canceled, expired}, `ended_at`, `results_url`;
* `GET /v1/messages/batches/{id}/results`: JSONL, one `{"custom_id", "result"}` a request, in the
  reverse of the request order (the API promises no order); 404 before the batch has ended;
* `POST /v1/messages/batches/{id}/cancel`: in_progress → canceling (`cancel_initiated_at`);
* `GET /v1/messages/batches?limit=&after_id=&before_id=`: newest first, `has_more`, `first_id`, `last_id`.

Each `params` body is answered by `answer(params_bytes) -> (status, body)`; `forward_to(origin)` POSTs it
to an online Messages API (the repo's `shared/tools/mock_vendor_server.py`), so batch and online answers
can be compared: a 2xx body is a `succeeded` result's message, an error body an `errored` result.
`item_errors` {custom_id: error body} and `item_messages` {custom_id: message} override; `expire`
(True: every request; a set: those custom_ids) leaves requests unrun, `expired`, as when 24 hours pass.
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

CUSTOM_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_REQUESTS = 100_000
MAX_BYTES = 256 * 1024 * 1024


def forward_to(origin: str, api_key: str = "mock-forward") -> Callable[[bytes], tuple[int, object]]:
    """Answer a Messages body as the online server at `origin` (scheme://host:port) answers it."""
    url = origin.rstrip("/") + "/v1/messages"

    def answer(body: bytes) -> tuple[int, object]:
        return post_for_json(url, body, {"Content-Type": "application/json", "x-api-key": api_key,
                                         "anthropic-version": "2023-06-01"})

    return answer


def _iso(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def _error_body(error_type: str, message: str) -> dict:
    return {"type": "error", "error": {"type": error_type, "message": message}}


class MockAnthropicBatchServer:
    def __init__(self, answer: Callable[[bytes], tuple[int, object]] | None = None, upstream: str | None = None,
                 api_key: str | None = None, polls_per_state: int = 1, item_errors: dict[str, dict] | None = None,
                 item_messages: dict[str, dict] | None = None, expire: bool | Iterable[str] = False,
                 lose_create_answer: bool = False, refuse_create: bool = False, create_delay_s: float = 0.0,
                 on_create: Callable[[], None] | None = None):
        if answer is None and upstream is None:
            raise ValueError("answer or upstream")
        self.answer = answer or forward_to(upstream)
        self.api_key = api_key
        self.polls_per_state = polls_per_state
        self.item_errors = dict(item_errors or {})
        self.item_messages = dict(item_messages or {})
        self.expire = expire if isinstance(expire, bool) else set(expire)
        self.lose_create_answer = lose_create_answer   # the batch is made, its answer never arrives
        self.refuse_create = refuse_create             # the connection drops before anything is made
        self.create_delay_s = create_delay_s
        self.on_create = on_create                     # called when a create arrives, before the batch is made
        self.lock = threading.Lock()
        self.batches: dict[str, dict] = {}
        self.log: list[tuple[str, str]] = []           # (method, path with query)
        self.keys: list[str | None] = []               # the x-api-key of each call
        self.versions: list[str | None] = []           # the anthropic-version of each call
        self.create_bodies: list[bytes] = []           # the raw body of every create accepted
        self.creates = 0                               # batches made
        self.answered: list[str] = []                  # custom_ids run (answered) so far
        server = self

        class Handler(JSONHandler):
            request_id_header, request_id_chars = "request-id", 24

            def _error(self, status: int, error_type: str, message: str) -> None:
                self._send(status, _error_body(error_type, message))

            def _route(self, method: str):
                parts = urllib.parse.urlsplit(self.path)
                query = {k: v[0] for k, v in urllib.parse.parse_qs(parts.query).items()}
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                with server.lock:
                    server.log.append((method, self.path))
                    server.keys.append(self.headers.get("x-api-key"))
                    server.versions.append(self.headers.get("anthropic-version"))
                if server.api_key is not None and self.headers.get("x-api-key") != server.api_key:
                    return self._error(401, "authentication_error", "invalid x-api-key")
                if not self.headers.get("anthropic-version"):
                    return self._error(400, "invalid_request_error", "anthropic-version: header is required")
                rest = parts.path.rstrip("/").split("/")[1:]
                if rest[:3] != ["v1", "messages", "batches"]:
                    return self._error(404, "not_found_error", f"Unknown path {parts.path}")
                return getattr(server, f"_{method.lower()}")(self, rest[3:], query, raw)

        self.httpd, self.thread = serve_loopback(Handler)
        self.origin = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.base_url = self.origin  # the Anthropic SDK's base_url (it adds /v1/...)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- GET --------------------------------------------------------------------------------------
    def _get(self, h, rest: list[str], query: dict, raw: bytes) -> None:
        if rest == []:
            return self._list(h, query)
        with self.lock:
            batch = self.batches.get(rest[0])
            if batch is None:
                return h._error(404, "not_found_error", f"No batch with id {rest[0]}")
            if len(rest) == 1:
                self._advance(batch)
                return h._send(200, self._public(batch))
            if rest[1:] == ["results"]:
                if batch["processing_status"] != "ended":
                    return h._error(404, "not_found_error", "Batch results are not available until processing ends")
                data = b"".join(json.dumps(line, ensure_ascii=False).encode() + b"\n"
                                for line in reversed(batch["_results"]))
                return h._send(200, data, "application/binary")
        return h._error(404, "not_found_error", "Unknown path")

    def _list(self, h, query: dict) -> None:
        limit = max(1, min(1000, int(query.get("limit") or 20)))
        with self.lock:
            ids = list(reversed(list(self.batches)))  # newest first
            if query.get("after_id") in ids:
                ids = ids[ids.index(query["after_id"]) + 1:]
            elif query.get("before_id") in ids:
                ids = ids[:ids.index(query["before_id"])][-limit:]
            page = ids[:limit]
            data = [self._public(self.batches[i]) for i in page]
            more = len(ids) > len(page)
        h._send(200, {"data": data, "has_more": more, "first_id": page[0] if page else None,
                      "last_id": page[-1] if page else None})

    # -- POST -------------------------------------------------------------------------------------
    def _post(self, h, rest: list[str], query: dict, raw: bytes) -> None:
        if rest == []:
            return self._create(h, raw)
        if len(rest) == 2 and rest[1] == "cancel":
            with self.lock:
                batch = self.batches.get(rest[0])
                if batch is None:
                    return h._error(404, "not_found_error", f"No batch with id {rest[0]}")
                if batch["processing_status"] == "in_progress":
                    batch.update(processing_status="canceling", cancel_initiated_at=_iso(time.time()), _polls=0)
                return h._send(200, self._public(batch))
        return h._error(404, "not_found_error", "Unknown path")

    def _create(self, h, raw: bytes) -> None:
        if self.on_create is not None:
            self.on_create()
        if self.refuse_create:  # dropped before the vendor made anything
            h.close_connection = True
            h.connection.shutdown(2)
            return
        if len(raw) > MAX_BYTES:
            return h._error(413, "request_too_large", "Request exceeds the maximum allowed number of bytes.")
        try:
            body = json.loads(raw)
        except ValueError:
            return h._error(400, "invalid_request_error", "Invalid JSON body")
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list) or not 1 <= len(requests) <= MAX_REQUESTS:
            return h._error(400, "invalid_request_error", "requests: must hold 1 to 100000 items")
        seen = set()
        for n, r in enumerate(requests):
            cid = r.get("custom_id") if isinstance(r, dict) else None
            if not isinstance(cid, str) or not CUSTOM_ID.fullmatch(cid):
                return h._error(400, "invalid_request_error",
                                f"requests.{n}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'")
            if cid in seen:
                return h._error(400, "invalid_request_error", f"Duplicate custom_id: {cid}")
            seen.add(cid)
            params = r.get("params")
            if not isinstance(params, dict) or not {"model", "max_tokens", "messages"} <= set(params):
                return h._error(400, "invalid_request_error", f"requests.{n}.params: model, max_tokens and messages "
                                "are required")
            if params.get("stream"):
                return h._error(400, "invalid_request_error", f"requests.{n}.params.stream: streaming is not "
                                "supported in a batch")
        now = time.time()
        with self.lock:
            batch_id = "msgbatch_" + sha("batch", len(self.batches), now)[:24]
            self.batches[batch_id] = {
                "id": batch_id, "type": "message_batch", "processing_status": "in_progress",
                "request_counts": {"processing": len(requests), "succeeded": 0, "errored": 0, "canceled": 0,
                                   "expired": 0},
                "ended_at": None, "created_at": _iso(now), "expires_at": _iso(now + 86400), "archived_at": None,
                "cancel_initiated_at": None, "results_url": None,
                "_requests": [(r["custom_id"], r["params"]) for r in requests], "_results": [], "_polls": 0}
            self.creates += 1
            self.create_bodies.append(raw)
            batch = self._public(self.batches[batch_id])
        h._send_late(200, batch, self.create_delay_s, lose=self.lose_create_answer)  # lost: the batch exists

    # -- the batch's life -------------------------------------------------------------------------
    def _public(self, batch: dict) -> dict:
        return {k: v for k, v in batch.items() if not k.startswith("_")}

    def _advance(self, batch: dict) -> None:
        """One poll (under the lock): after `polls_per_state` polls in a state, the next one."""
        if batch["processing_status"] == "ended":
            return
        batch["_polls"] += 1
        if batch["_polls"] < self.polls_per_state:
            return
        self._run(batch, cancelled=batch["processing_status"] == "canceling")

    def _run(self, batch: dict, cancelled: bool) -> None:
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        results = []
        for cid, params in batch["_requests"]:
            if cancelled:
                result = {"type": "canceled"}
            elif self.expire is True or (isinstance(self.expire, set) and cid in self.expire):
                result = {"type": "expired"}
            elif cid in self.item_errors:
                result = {"type": "errored", "error": self.item_errors[cid]}
            elif cid in self.item_messages:
                result = {"type": "succeeded", "message": self.item_messages[cid]}
            else:
                status, body = self.answer(json.dumps(params, ensure_ascii=False, separators=(",", ":")).encode())
                if 200 <= status < 300:
                    result = {"type": "succeeded", "message": body}
                else:
                    error = body.get("error") if isinstance(body, dict) else None
                    if not isinstance(error, dict):
                        error = {"type": "api_error", "message": str(body)}
                    result = {"type": "errored", "error": {"type": "error", "error": error}}
            if result["type"] in ("succeeded", "errored"):
                self.answered.append(cid)
            counts[result["type"]] += 1
            results.append({"custom_id": cid, "result": result})
        batch.update(processing_status="ended", request_counts=counts, ended_at=_iso(time.time()),
                     results_url=f"{self.origin}/v1/messages/batches/{batch['id']}/results", _results=results)
