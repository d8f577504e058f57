"""The durable record of vendor batches: the `batches` and `batch_items` tables (sql/ddl/batches.sql).

The order of writes is what makes a kill -9 safe (nothing paid twice, nothing lost):

1. `reserve`: in one store transaction, the keys neither answered (`completions`) nor queued in a live
   batch become a batch row in state 'uploading' with its items 'queued' (the file's lock orders two
   processes reserving at once, so no key is reserved twice);
2. `record_upload`: the input file id, before the batch is created ('uploaded');
3. `record_submitted`: the vendor's batch id and state, once `POST /batches` answered.

A batch left at 1 was never created (a batch is created only from a recorded file id); one left at 2
may have been: `lifecycle.resume` looks for it at the vendor by its input file id before creating it.

A vendor without files (Anthropic's Message Batches: the requests go in the create call) has no step 2:
`reserve` makes the row 'creating' (the create may be sent from then on), and `record_submitted` follows.
A batch left 'creating' may have been created; the vendor keeps no key or metadata of ours on a batch,
so `lifecycle.resume` matches it by its size, time and custom_ids (`batch.anthropic.AnthropicBatchAPI.
find_created`), creates it again only when no batch at the vendor can be it, and, where several could,
creates nothing and says so in the row's `error` (`record_unresolved`) until their results tell.
`record_collected` (in the transaction that stores the answers) settles the items, so a key is asked
again only when its item ended 'retry' or 'failed'.

Every function takes a store (`store.Store` or `lake_store.LakeStore`: `transaction()`, `connect()`),
or, where it says so, a connection inside the caller's transaction.
"""
from __future__ import annotations

import datetime
import json
import uuid
from dataclasses import dataclass
from typing import Iterable

from medhelm_core import owners
from medhelm_core.store import insert_values, upsert

UPLOADING, UPLOADED, COLLECTED, ABANDONED = "uploading", "uploaded", "collected", "abandoned"
CREATING = "creating"  # no file to upload (Anthropic): reserved, and the create may have been sent
# A batch whose items are still held (no other batch and no online call may take them).
SETTLED_STATES = (COLLECTED, ABANDONED)
QUEUED = "queued"
ITEM_COLUMNS = ["batch_id", "request_key", "state", "error", "request"]

BATCH_COLUMNS = ["batch_id", "vendor", "vendor_batch_id", "model_deployment", "endpoint", "state", "num_requests",
                 "input_file_name", "input_file_id", "output_file_id", "error_file_id", "request_counts", "error",
                 "owner", "created_at", "submitted_at", "last_polled_at", "ended_at", "collected_at"]


@dataclass(frozen=True)
class BatchRow:
    """One row of `batches`."""

    batch_id: str
    vendor: str
    vendor_batch_id: str | None
    model_deployment: str
    endpoint: str
    state: str
    num_requests: int
    input_file_name: str | None
    input_file_id: str | None
    output_file_id: str | None
    error_file_id: str | None
    request_counts: dict | None
    error: str | None
    owner: str | None
    created_at: datetime.datetime | None
    submitted_at: datetime.datetime | None
    last_polled_at: datetime.datetime | None
    ended_at: datetime.datetime | None
    collected_at: datetime.datetime | None

    @property
    def live(self) -> bool:
        return self.state not in SETTLED_STATES

    @property
    def acknowledged(self) -> bool:
        """The vendor created it (its id is recorded)."""
        return self.vendor_batch_id is not None


def _now() -> datetime.datetime:
    return datetime.datetime.now()


def _row(values: tuple) -> BatchRow:
    data = dict(zip(BATCH_COLUMNS, values))
    if isinstance(data["request_counts"], str):
        data["request_counts"] = json.loads(data["request_counts"])
    return BatchRow(**data)


def unbatched(conn, keys: Iterable[str]) -> list[str]:
    """Of `keys` (in order, once each), those neither answered nor queued in a live batch (a
    connection: the caller's transaction, or a read)."""
    keys = list(dict.fromkeys(keys))
    if not keys:
        return []
    taken = {k for (k,) in conn.execute(
        "SELECT request_key FROM completions WHERE request_key IN (SELECT unnest(?::VARCHAR[]))"
        " UNION SELECT request_key FROM batch_items WHERE state = ? AND request_key IN (SELECT unnest(?::VARCHAR[]))",
        [keys, QUEUED, keys]).fetchall()}
    return [k for k in keys if k not in taken]


def reserve(store, deployment: str, vendor: str, endpoint: str, requests: dict[str, dict],
            owner: str | None = None, state: str = UPLOADING) -> tuple[str, list[str]] | None:
    """Take the requests (key -> HELM request) no live batch holds and nobody answered into a new
    batch ('uploading'; 'creating' for a vendor without files, which has no input file name): its id
    and keys (in the given order), or None when none is left. The requests are kept with the items,
    so that any later process can collect the batch."""
    if state not in (UPLOADING, CREATING):
        raise ValueError(f"a batch is reserved 'uploading' or 'creating', not {state!r}")
    batch_id = "mb-" + uuid.uuid4().hex
    with store.transaction() as conn:
        free = unbatched(conn, requests)
        if not free:
            return None
        insert_values(conn, "batches", ["batch_id", "vendor", "model_deployment", "endpoint", "state", "num_requests",
                                        "input_file_name", "owner", "created_at"],
                      [(batch_id, vendor, deployment, endpoint, state, len(free),
                        input_file_name(batch_id) if state == UPLOADING else None,
                        owner or owners.new_owner_id(), _now())])
        insert_values(conn, "batch_items", ITEM_COLUMNS,
                      [(batch_id, k, QUEUED, None, json.dumps(requests[k], ensure_ascii=False)) for k in free])
    return batch_id, free


def input_file_name(batch_id: str) -> str:
    """The uploaded file's name: how a lost upload is found again."""
    return f"medhelm-{batch_id}.jsonl"


def record_upload(store, batch_id: str, input_file_id: str) -> None:
    with store.transaction() as conn:
        conn.execute("UPDATE batches SET state = ?, input_file_id = ? WHERE batch_id = ?",
                     [UPLOADED, input_file_id, batch_id])


def record_submitted(store, batch_id: str, status) -> None:
    """The vendor created the batch (`protocol.BatchStatus`)."""
    with store.transaction() as conn:
        conn.execute("UPDATE batches SET vendor_batch_id = ?, state = ?, input_file_id = coalesce(input_file_id, ?),"
                     " submitted_at = ?, request_counts = ? WHERE batch_id = ?",
                     [status.vendor_batch_id, status.state, status.input_file_id, _now(),
                      json.dumps(status.request_counts or {}), batch_id])


def record_status(store, batch_id: str, status) -> None:
    """What a poll said (`protocol.BatchStatus`); a collected batch keeps its state."""
    ended = datetime.datetime.fromtimestamp(status.ended_at) if status.ended_at else None
    with store.transaction() as conn:
        conn.execute("UPDATE batches SET state = CASE WHEN state IN (?, ?) THEN state ELSE ? END,"
                     " output_file_id = ?, error_file_id = ?, request_counts = ?, last_polled_at = ?,"
                     " ended_at = coalesce(ended_at, ?), error = ? WHERE batch_id = ?",
                     [COLLECTED, ABANDONED, status.state, status.output_file_id, status.error_file_id,
                      json.dumps(status.request_counts or {}), _now(), ended,
                      "; ".join(status.errors) or None, batch_id])


def record_unresolved(store, batch_id: str, error: str) -> None:
    """Why a batch whose create answer was lost is neither found nor created again (it stays held)."""
    with store.transaction() as conn:
        conn.execute("UPDATE batches SET error = ?, last_polled_at = ? WHERE batch_id = ? AND vendor_batch_id IS NULL",
                     [error, _now(), batch_id])


def claimed_vendor_ids(store, vendor: str) -> set[str]:
    """The vendor batch ids the ledger's rows of `vendor` already hold (a lost create is none of them)."""
    with store.connect(read_only=False) as conn:
        rows = conn.execute("SELECT vendor_batch_id FROM batches WHERE vendor = ? AND vendor_batch_id IS NOT NULL",
                            [vendor]).fetchall()
    return {v for (v,) in rows}


def abandon(store, batch_id: str, error: str) -> None:
    """A batch that was never created at the vendor: its items are asked again."""
    with store.transaction() as conn:
        conn.execute("UPDATE batches SET state = ?, error = ?, ended_at = ?"
                     " WHERE batch_id = ? AND vendor_batch_id IS NULL", [ABANDONED, error, _now(), batch_id])
        conn.execute("UPDATE batch_items SET state = 'retry', error = ? WHERE batch_id = ? AND state = ?"
                     " AND batch_id IN (SELECT batch_id FROM batches WHERE state = ?)",
                     [error, batch_id, QUEUED, ABANDONED])


def record_collected(conn, batch_id: str, outcomes: Iterable) -> None:
    """Settle the items (`protocol.ItemOutcome`s) and mark the batch collected, on `conn` inside the
    transaction that stores the answers (so either both are durable or neither)."""
    upsert(conn, "batch_items", ["batch_id", "request_key"], ["batch_id", "request_key", "state", "error"],
           [(batch_id, o.key, o.state, o.error) for o in outcomes])
    # A key of the batch no outcome names (there is none: `results` covers every key) would stay held.
    conn.execute("UPDATE batch_items SET state = 'retry', error = coalesce(error, 'not in the collected results')"
                 " WHERE batch_id = ? AND state = ?", [batch_id, QUEUED])
    conn.execute("UPDATE batches SET state = ?, collected_at = ? WHERE batch_id = ?", [COLLECTED, _now(), batch_id])


def get(store, batch_id: str) -> BatchRow | None:
    with store.connect(read_only=False) as conn:
        row = conn.execute(f"SELECT {', '.join(BATCH_COLUMNS)} FROM batches WHERE batch_id = ?", [batch_id]).fetchone()
    return _row(row) if row else None


def outstanding(store, deployment: str | None = None) -> list[BatchRow]:
    """The live batches (not collected nor abandoned), oldest first; of one deployment if given."""
    where, params = "state NOT IN (?, ?)", [COLLECTED, ABANDONED]
    if deployment is not None:
        where += " AND model_deployment = ?"
        params.append(deployment)
    with store.connect(read_only=False) as conn:
        rows = conn.execute(f"SELECT {', '.join(BATCH_COLUMNS)} FROM batches WHERE {where}"
                            " ORDER BY created_at, batch_id", params).fetchall()
    return [_row(r) for r in rows]


def item_keys(store, batch_id: str, state: str | None = None) -> list[str]:
    """The request keys a batch holds (in a given item state)."""
    sql = "SELECT request_key FROM batch_items WHERE batch_id = ?"
    params: list = [batch_id]
    if state is not None:
        sql += " AND state = ?"
        params.append(state)
    with store.connect(read_only=False) as conn:
        return [k for (k,) in conn.execute(sql + " ORDER BY request_key", params).fetchall()]


def requests_of(store, batch_id: str) -> dict[str, dict]:
    """request key -> the HELM request, of a batch's items."""
    with store.connect(read_only=False) as conn:
        rows = conn.execute("SELECT request_key, request FROM batch_items WHERE batch_id = ? ORDER BY request_key",
                            [batch_id]).fetchall()
    return {k: json.loads(r) for k, r in rows}


def items(store, batch_id: str) -> dict[str, tuple[str, str | None]]:
    """request key -> (item state, error) of a batch."""
    with store.connect(read_only=False) as conn:
        rows = conn.execute("SELECT request_key, state, error FROM batch_items WHERE batch_id = ?",
                            [batch_id]).fetchall()
    return {k: (s, e) for k, s, e in rows}


__all__ = ["ABANDONED", "BatchRow", "COLLECTED", "CREATING", "QUEUED", "UPLOADED", "UPLOADING", "abandon",
           "claimed_vendor_ids", "get", "input_file_name", "item_keys", "items", "outstanding", "record_collected",
           "record_status", "record_submitted", "record_unresolved", "record_upload", "requests_of", "reserve",
           "unbatched"]
