"""Anthropic's Message Batches, through the deployment's own `AnthropicMessagesClient` (its SDK client:
same base URL, `x-api-key`, `anthropic-version`).

Wire protocol (https://docs.anthropic.com/en/docs/build-with-claude/batch-processing):

* `POST /v1/messages/batches` `{"requests": [{"custom_id", "params": <a Messages API body>}, ...]}`:
  up to 100,000 requests or 256 MB; `custom_id` 1 to 64 characters of `[A-Za-z0-9_-]`, unique in the
  batch. There are no files: the requests go in the create call, which answers a MessageBatch;
* `GET /v1/messages/batches/{id}`: `processing_status` in_progress → (canceling →) ended;
  `request_counts` {processing, succeeded, errored, canceled, expired} (all but `processing` zero
  until the batch ends); `created_at`, `ended_at`, `expires_at` (24 hours), `cancel_initiated_at`,
  `results_url` once ended;
* `GET {results_url}` (`/v1/messages/batches/{id}/results`): JSONL, in no particular order, one line a
  request: `{"custom_id", "result": {"type": "succeeded", "message": <Message>} | {"type": "errored",
  "error": {"type": "error", "error": {"type", "message"}}} | {"type": "canceled"} | {"type": "expired"}}`;
* `POST /v1/messages/batches/{id}/cancel`; `GET /v1/messages/batches` (newest first, `after_id` pages).

What is sent: a request's `params` are the bytes the online client posts (`AnthropicMessagesClient.
wire_body`, the SDK's own serialization of HELM's `raw_request`), and the SDK serializes the create body
with the same encoder, so they stand in it byte for byte. A streaming deployment (HELM's `stream` arg)
posts the same body with `"stream": true` last; a batch cannot stream, so its params are that body
without that key (a batch has no client-side time limit to stream around).

`custom_id`: our request keys are SHA-256 hex digests, 64 characters, so a key is its own custom_id;
a key that does not fit, and each completion of a request asked `num_completions` > 1 times (HELM sends
it that many times, one after another), gets the SHA-256 hex of (key, completion index): a function of
the key that `batch_items.request_key` keeps, so any later process maps results back.

What comes back (`results`): succeeded messages are read by the online client's own parsing
(`answer_attempt`: the same RequestResult, modulo the clock fields: a batch's request_time is the
batch's); an errored result is turned back into the HTTP answer it stands for (its error type's status:
invalid_request_error 400, authentication_error 401, billing_error 402, permission_error 403,
not_found_error 404, request_too_large 413, rate_limit_error 429, api_error 500, timeout_error 504,
overloaded_error 529) and classified by the online client (`error_attempt`): rate limits, overload and
API errors are asked again, an invalid request fails as it does online, a content-filter refusal is HELM's
non-fatal result; expired and canceled requests are asked again. No key is dropped: a key missing from
the results is asked again too.

A lost create (`find_created`): Anthropic has no idempotency key and keeps no metadata on a batch, so a
create whose answer never came (a timeout, a dropped connection, a kill -9) is looked for by what the
batch is: created no earlier than its ledger row (an hour of slack for clocks), exactly as many requests,
held by no other row of the ledger, and, where it has ended, results whose custom_ids are exactly this
batch's. One that has ended and matches is it. Among the running ones (their custom_ids are not
readable until they end): none means the create never arrived, and the batch is created; one is taken
as it (if it is not, its results hold none of these custom_ids, and every key comes back to be asked
again: a wrong guess costs a wait, never a second payment), unless another lost create of the ledger
has as many requests (it could be that one's: taking it would leave the other to be created twice);
otherwise it is ambiguous: nothing is created, the row says which batches could be it, and a later
resume settles it once they have ended.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import re
import time
from typing import Any, Iterable, Iterator

from medhelm_core.batch.protocol import (ANTHROPIC, ANTHROPIC_ENDED, RETRY, BatchAPIError, BatchResults, BatchStatus,
                                         Flavour, ItemOutcome, call_vendor, item_outcome)
from medhelm_core.clients.base import Attempt
from medhelm_core.ratelimit import FATAL, SERVER_ERROR, TIMEOUT

_CUSTOM_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
# An errored result's error type -> the HTTP status the Messages API answers it with online.
ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
                "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
                "rate_limit_error": 429, "api_error": 500, "timeout_error": 504, "overloaded_error": 529}
CLOCK_SLACK_S = 3600.0  # how much earlier than its ledger row a lost create's batch may say it was made


def copies(request: dict) -> int:
    """How many times the online client sends `request` (`num_completions`)."""
    return int(request.get("num_completions") or 1)


def custom_id(key: str, index: int = 0, n: int = 1) -> str:
    """The custom_id of completion `index` (of `n`) of request `key`: the key itself where it fits and
    the request is asked once, else the SHA-256 hex of key and index."""
    if n == 1 and _CUSTOM_ID.fullmatch(key):
        return key
    return hashlib.sha256(f"{key}\x00{index}".encode("utf-8")).hexdigest()


def custom_ids(requests: dict[str, dict]) -> dict[str, tuple[str, int]]:
    """custom_id -> (request key, completion index) of a batch's requests."""
    out: dict[str, tuple[str, int]] = {}
    for key, request in requests.items():
        n = copies(request)
        for i in range(n):
            cid = custom_id(key, i, n)
            if cid in out:  # never for SHA-256 keys; a duplicate would make the vendor refuse the batch
                raise ValueError(f"two requests of a batch share the custom_id {cid}")
            out[cid] = (key, i)
    return out


def _epoch(value: Any) -> int | None:
    if value is None:
        return None
    if hasattr(value, "timestamp"):
        return int(value.timestamp())
    try:
        return int(datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp())
    except ValueError:
        return None


def status_of(batch: Any) -> BatchStatus:
    """A MessageBatch (the SDK's model, or its JSON) as a `BatchStatus`: Anthropic's own states; an
    ended batch's cancellation and expiry in `errors` (the ledger's `error`)."""
    data = batch.model_dump() if hasattr(batch, "model_dump") else dict(batch)
    counts = {k: int(v or 0) for k, v in dict(data.get("request_counts") or {}).items()}
    state = str(data.get("processing_status"))
    errors = []
    if state == ANTHROPIC_ENDED:
        total = sum(counts.values())
        if data.get("cancel_initiated_at"):
            errors.append(f"cancelled: {counts.get('canceled', 0)} of {total} requests not run")
        if counts.get("expired"):
            errors.append(f"expired: {counts['expired']} of {total} requests not run within 24 hours")
    created = _epoch(data.get("created_at"))
    return BatchStatus(vendor_batch_id=data["id"], state=state, request_counts=counts, errors=errors,
                       created_at=created, in_progress_at=created, ended_at=_epoch(data.get("ended_at")))


def _result_of(sdk, raw: str) -> dict | None:
    """One results line as `{"custom_id", "result"}`: a succeeded message read into the SDK's model as
    its JSONL decoder reads it, then dumped as the online client dumps its Message; an error as the JSON
    it came as (the online client reads an HTTP error from its raw JSON too). None: not a JSON object."""
    try:
        line = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(line, dict):
        return None
    result = line.get("result") if isinstance(line.get("result"), dict) else {}
    if result.get("type") == "succeeded" and isinstance(result.get("message"), dict):
        item = sdk._models.construct_type_unchecked(value=line, type_=sdk.types.messages.MessageBatchIndividualResponse)
        result = {**result, "message": item.result.message.model_dump()}
    return {"custom_id": line.get("custom_id"), "result": result}


class AnthropicBatchAPI:
    """The Message Batches endpoints of one deployment, through its online client's SDK client.
    `client` is an `AnthropicMessagesClient`."""

    def __init__(self, client, flavour: Flavour = ANTHROPIC, max_requests: int | None = None):
        self.client = client
        self.flavour = flavour
        self.max_requests = min(max_requests or flavour.max_requests, flavour.max_requests)
        self._sdk = client._client        # anthropic.Anthropic
        self._errors = client._sdk        # the anthropic module (its exception classes)

    def __repr__(self) -> str:
        return f"AnthropicBatchAPI({self.client!r})"

    @property
    def endpoint(self) -> str:
        """scheme://host[:port] the batch goes to (never a key)."""
        return self.client.endpoint

    # -- the requests ---------------------------------------------------------------------------
    def params(self, request: dict) -> bytes:
        """The `params` of `request`: the body the online client posts for it (without `stream`).
        ValueError (or KeyError, TypeError...) where HELM or the SDK refuses it before sending."""
        body = self.client.wire_body(self.client.raw_request(request))
        if self.client.stream:
            parsed = json.loads(body)
            parsed.pop("stream", None)
            body = json.dumps(parsed, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
        return body

    def line(self, key: str, request: dict) -> bytes:
        """The create body's entries of one request key (its `num_completions` copies, comma-joined):
        `{"custom_id":...,"params":<the online body>}`."""
        body = self.params(request)
        n = copies(request)
        return b",".join(json.dumps({"custom_id": custom_id(key, i, n)}, separators=(",", ":"))[:-1].encode()
                         + b',"params":' + body + b"}" for i in range(n))

    def lines(self, requests: dict[str, dict]) -> tuple[dict[str, bytes], dict[str, Attempt]]:
        """(key -> entries) of the requests that can be sent, and (key -> fatal Attempt) of those the
        online client refuses before sending (the same `invalid request: ...`)."""
        good: dict[str, bytes] = {}
        bad: dict[str, Attempt] = {}
        for key, request in requests.items():
            try:
                good[key] = self.line(key, request)
            except (ValueError, KeyError, IndexError, TypeError) as e:
                bad[key] = Attempt(FATAL, message=self.client.redact(f"invalid request: {e}"))
        return good, bad

    def chunks(self, lines: dict[str, bytes]) -> Iterator[list[str]]:
        """The keys split into batches within the vendor's limits (requests, counting each copy; bytes
        of the create body), in the given order. A batch may mix models."""
        chunk: list[str] = []
        count = size = 0
        overhead = len(b'{"requests":[]}')
        for key, line in lines.items():
            n = len(json.loads(b"[" + line + b"]"))
            b = len(line) + 1
            if chunk and (count + n > self.max_requests or overhead + size + b > self.flavour.max_bytes):
                yield chunk
                chunk, count, size = [], 0, 0
            chunk.append(key)
            count += n
            size += b
        if chunk:
            yield chunk

    # -- the vendor's endpoints -----------------------------------------------------------------
    def create_batch(self, lines: dict[str, bytes]) -> BatchStatus:
        """POST /v1/messages/batches with these keys' entries (the SDK serializes them back to the same
        bytes)."""
        requests = json.loads(b"[" + b",".join(lines.values()) + b"]")
        return status_of(self._call(lambda: self._sdk.messages.batches.create(requests=requests)))

    def retrieve(self, vendor_batch_id: str) -> BatchStatus:
        return status_of(self._call(lambda: self._sdk.messages.batches.retrieve(vendor_batch_id)))

    def cancel(self, vendor_batch_id: str) -> BatchStatus:
        return status_of(self._call(lambda: self._sdk.messages.batches.cancel(vendor_batch_id)))

    def result_lines(self, vendor_batch_id: str) -> list[dict]:
        """The results of an ended batch (`{"custom_id", "result"}` each): the SDK's `results` call, its
        lines read as they came (from the decoder's `http_response`, a stream not read yet)."""
        def read() -> list[dict]:
            decoder = self._sdk.messages.batches.results(vendor_batch_id)
            try:
                lines = [_result_of(self._errors, raw) for raw in decoder.http_response.iter_lines() if raw.strip()]
            finally:
                decoder.close()
            return [line for line in lines if line is not None]
        return self._call(read)

    def find_created(self, requests: dict[str, dict], since: float | None, claimed: Iterable[str] = (),
                     rivals: Iterable[dict[str, dict]] = ()) -> tuple[BatchStatus | None, list[str]]:
        """The batch a lost create made of `requests` (the module's docstring says how it is told):
        (it, []), or (None, []) when none at the vendor can be it, or (None, the ids of the batches
        that could be it) when it cannot be told yet. `claimed`: the vendor ids the ledger holds;
        `rivals`: the requests of the ledger's other lost creates."""
        ids = set(custom_ids(requests))
        total = len(ids)
        claimed = set(claimed)
        rivalled = any(len(custom_ids(r)) == total for r in rivals)

        def look() -> list[Any]:
            found = []
            for batch in self._sdk.messages.batches.list(limit=100):
                created = _epoch(batch.created_at)
                if since is not None and created is not None and created < since - CLOCK_SLACK_S:
                    break  # newest first: the rest are older still
                counts = batch.request_counts.model_dump()
                if batch.id not in claimed and sum(int(v or 0) for v in counts.values()) == total:
                    found.append(batch)
            return found

        running = []  # those whose custom_ids cannot be read (yet)
        for batch in self._call(look):
            if batch.processing_status != ANTHROPIC_ENDED or not batch.results_url or batch.archived_at:
                running.append(batch)
                continue
            try:
                if self._holds(batch.id, ids):
                    return status_of(batch), []
            except BatchAPIError as e:
                if e.transient:
                    raise
                running.append(batch)  # its results cannot be read: it cannot be ruled out
        if len(running) == 1 and not rivalled:
            return status_of(running[0]), []
        return None, [b.id for b in running]

    def _holds(self, vendor_batch_id: str, ids: set[str]) -> bool:
        """Whether an ended batch's results hold exactly these custom_ids (read until one is foreign)."""
        def read() -> bool:
            seen = set()
            for item in self._sdk.messages.batches.results(vendor_batch_id):
                if item.custom_id not in ids:
                    return False
                seen.add(item.custom_id)
            return seen == ids
        return self._call(read)

    def _call(self, fn):
        try:
            return call_vendor(fn, self._errors, self.flavour.name, self.client.redact)
        except self._errors.AnthropicError as e:  # e.g. results asked of a batch without a results_url
            raise BatchAPIError(self.client.redact(f"{self.flavour.name} batch API: {e}")) from None

    # -- the answers ----------------------------------------------------------------------------
    def collect_results(self, status: BatchStatus, requests: dict[str, dict]) -> BatchResults:
        """Every key of `requests` (an ended batch's) with its outcome: the results read."""
        return self.results(status, requests, self.result_lines(status.vendor_batch_id))

    def results(self, status: BatchStatus, requests: dict[str, dict], lines: Iterable[dict]) -> BatchResults:
        """Every key of `requests` with its outcome, from the batch's result lines."""
        start = float(status.created_at or time.time())
        elapsed = max(0.0, float(status.ended_at or time.time()) - start)
        ids = custom_ids(requests)
        got: dict[str, dict[int, dict]] = {}
        foreign = 0
        for line in lines:
            where = ids.get(line.get("custom_id"))
            if where is None:
                foreign += 1
                continue
            key, index = where
            got.setdefault(key, {}).setdefault(index, line.get("result") or {})
        problems = list(status.errors)
        if foreign and not got:
            problems.append(f"holds none of these requests (its results are {foreign} others'): it is not the "
                            f"batch they were sent in")
        batch_error = (f"batch {status.vendor_batch_id} " + "; ".join(problems)) if problems else None
        outcomes = {key: self._outcome(key, request, got.get(key, {}), status, batch_error, start, elapsed)
                    for key, request in requests.items()}
        return BatchResults(status.vendor_batch_id, status.state, outcomes, batch_error)

    def _outcome(self, key: str, request: dict, results: dict[int, dict], status: BatchStatus,
                 batch_error: str | None, start: float, elapsed: float) -> ItemOutcome:
        """One key from its completions' results, read in order as the online client reads its replies."""
        messages: list[dict] = []
        for index in range(copies(request)):
            result = results.get(index)
            kind = (result or {}).get("type")
            if kind == "succeeded":
                messages.append(result.get("message") or {})
                continue
            if messages:  # the replies before this one end the request first, as they would online
                before = self.client.answer_attempt(request, messages, start, elapsed)
                if before.result is None or before.kind != "ok":
                    return item_outcome(key, before)
            if kind == "errored":
                return item_outcome(key, self._error_attempt(result.get("error"), start, elapsed))
            if kind == "expired":
                return ItemOutcome(key, RETRY, Attempt(TIMEOUT, message=f"expired: batch {status.vendor_batch_id} "
                                                       f"ended (24 hours) before this request ran"))
            if kind == "canceled":
                return ItemOutcome(key, RETRY, Attempt(SERVER_ERROR, message=f"canceled: batch "
                                                       f"{status.vendor_batch_id} was cancelled before this "
                                                       f"request ran"))
            if result is None:
                message = (f"not in the results: {batch_error}" if batch_error
                           else f"missing from the results of batch {status.vendor_batch_id}")
            else:
                message = f"unknown result type {kind!r} in batch {status.vendor_batch_id}"
            return ItemOutcome(key, RETRY, Attempt(SERVER_ERROR, message=self.client.redact(message)))
        return item_outcome(key, self.client.answer_attempt(request, messages, start, elapsed))

    def _error_attempt(self, error: Any, start: float, elapsed: float) -> Attempt:
        """An errored result as the HTTP answer it stands for, classified by the online client."""
        body = error if isinstance(error, dict) else {"type": "error", "error": {"type": "api_error",
                                                                                 "message": str(error)}}
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        status = ERROR_STATUS.get(str(inner.get("type")), 500)
        return self.client.error_attempt(status, body, start, elapsed)


__all__ = ["AnthropicBatchAPI", "ERROR_STATUS", "copies", "custom_id", "custom_ids", "status_of"]
