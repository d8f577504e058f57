"""A batch's life: submit, resume after a crash, poll, collect. The vendor calls are `protocol.BatchAPI`'s,
the durable record `ledger`'s; nothing here stores answers (the caller does, with `store_collected`,
in the transaction that settles the batch's items).

    api = batch_api(client, flavour_of(deployment))   # BatchAPI, or AnthropicBatchAPI (no files)
    report = submit(store, api, deployment.name, {key: request, ...})    # rows first, then upload, create
    ...                                                                  # later, any process:
    resume(store, api, deployment.name)          # batches a killed process uploaded but did not see created
    for row in ledger.outstanding(store, deployment.name):
        status = poll(store, api, row)
        if status.ended:
            results = collect(store, api, row.batch_id)   # every key: answered / retry / failed
            store_collected(store, results, write)         # write(conn, results): the answers, same transaction
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from medhelm_core import owners
from medhelm_core.batch import ledger
from medhelm_core.batch.protocol import BatchAPI, BatchAPIError, BatchResults, BatchStatus, input_file
from medhelm_core.clients.base import Attempt
from medhelm_core.errors import MedhelmError


@dataclass
class SubmitReport:
    """What `submit` did with the requests it was given."""

    submitted: list[ledger.BatchRow] = field(default_factory=list)     # created at the vendor
    unacknowledged: list[str] = field(default_factory=list)            # batch ids: create sent, answer lost
    abandoned: dict[str, str] = field(default_factory=dict)            # batch id -> why (keys free again)
    invalid: dict[str, Attempt] = field(default_factory=dict)          # key -> fatal Attempt (HELM refuses it)
    skipped: list[str] = field(default_factory=list)                   # keys answered or held by a live batch
    online: list[str] = field(default_factory=list)     # keys too few for a batch (the vendor's minimum): online

    @property
    def batched_keys(self) -> int:
        return sum(b.num_requests for b in self.submitted)


def submit(store, api: BatchAPI, deployment: str, requests: dict[str, dict], owner: str | None = None,
           metadata: dict[str, str] | None = None) -> SubmitReport:
    """Submit the requests (key -> HELM request) not answered and not held by a live batch, in as many
    batches as the vendor's limits need. Each batch is a ledger row before its upload, has its file id
    recorded before it is created, and its vendor id once created. A vendor without files (Anthropic):
    the row ('creating') is there before the create call that carries the requests."""
    report = SubmitReport()
    lines, report.invalid = api.lines(requests)
    owner = owner or owners.new_owner_id()
    owners.register(owner)
    try:
        held = set(lines)
        chunks = list(api.chunks(lines))  # a vendor with a minimum (Bedrock) leaves out keys too few for one
        chunked = {k for chunk in chunks for k in chunk}
        report.online = [k for k in lines if k not in chunked]
        least = getattr(api, "min_requests", api.flavour.min_requests)
        for chunk in chunks:
            reserved = ledger.reserve(store, deployment, api.flavour.name, api.endpoint,
                                      {k: requests[k] for k in chunk}, owner,
                                      ledger.UPLOADING if api.flavour.uploads else ledger.CREATING)
            if reserved is None:
                continue
            batch_id, keys = reserved
            held -= set(keys)
            if len(keys) < least:  # another process took some meanwhile: too few left; nothing was sent
                ledger.abandon(store, batch_id, f"{len(keys)} requests, fewer than the {least} a batch must hold")
                report.online += keys
                continue
            if not api.flavour.uploads:
                _create_with_requests(store, api, batch_id, {k: lines[k] for k in keys}, report)
                continue
            try:
                input_file_id = api.upload(input_file({k: lines[k] for k in keys}, keys),
                                           ledger.input_file_name(batch_id))
            except BatchAPIError as e:  # nothing was created: the keys are free again
                ledger.abandon(store, batch_id, f"upload failed: {e}")
                report.abandoned[batch_id] = str(e)
                continue
            ledger.record_upload(store, batch_id, input_file_id)
            _create(store, api, batch_id, input_file_id, deployment, metadata, report)
        report.skipped = [k for k in lines if k in held and k in chunked]
    finally:
        owners.unregister(owner)
    return report


def _create(store, api: BatchAPI, batch_id: str, input_file_id: str, deployment: str,
            metadata: dict[str, str] | None, report: SubmitReport) -> None:
    meta = {"medhelm_batch_id": batch_id, "medhelm_deployment": deployment[:512], **(metadata or {})}
    _record_create(store, batch_id, report, lambda: api.create(input_file_id, meta))


def _create_with_requests(store, api, batch_id: str, lines: dict[str, bytes], report: SubmitReport) -> None:
    """Create a batch whose requests go in the create call (Anthropic), its row already 'creating'."""
    _record_create(store, batch_id, report, lambda: api.create_batch(lines))


def _record_create(store, batch_id: str, report: SubmitReport, create) -> None:
    """`create()` the vendor's batch and record what came of it: submitted (the vendor's id), refused
    (abandoned: nothing was created) or unanswered (it may exist: `resume` looks before creating again)."""
    try:
        status = create()
    except BatchAPIError as e:
        if e.transient:
            report.unacknowledged.append(batch_id)
        else:
            ledger.abandon(store, batch_id, f"batch refused: {e}")
            report.abandoned[batch_id] = str(e)
        return
    ledger.record_submitted(store, batch_id, status)
    report.submitted.append(ledger.get(store, batch_id))


def _resume_create(store, api, row: ledger.BatchRow, since: float | None) -> None:
    """A 'creating' batch (no files) whose create answer never came: found at the vendor (by size, time
    and custom_ids: `AnthropicBatchAPI.find_created`), else created, unless several batches could be
    it: then nothing is created and the row says why (it is looked for again at the next resume)."""
    requests = ledger.requests_of(store, row.batch_id)
    rivals = [ledger.requests_of(store, r.batch_id) for r in ledger.outstanding(store)
              if r.vendor == row.vendor and not r.acknowledged and r.batch_id != row.batch_id]
    found, candidates = api.find_created(requests, since, ledger.claimed_vendor_ids(store, api.flavour.name),
                                         rivals)
    if found is not None:
        ledger.record_submitted(store, row.batch_id, found)
    elif candidates:
        ledger.record_unresolved(store, row.batch_id, (
            f"create answer lost; batches at the vendor that could be this one: {', '.join(candidates)}; "
            f"nothing is created again until their results show which holds its requests (resume again "
            f"once they end)"))
    else:  # nothing at the vendor can be it: it was never created
        lines, _ = api.lines(requests)
        _create_with_requests(store, api, row.batch_id, lines, SubmitReport())


def resume(store, api: BatchAPI, deployment: str, lease_s: float = 120.0,
           include_alive: bool = False) -> list[ledger.BatchRow]:
    """Finish what dead submitters left (their owner's process is gone): a batch whose file was
    recorded is looked for at the vendor by its input file id, and created only if it is not there
    (the file is never uploaded twice); one whose upload was never recorded is looked for by file name,
    else abandoned (never created: its keys are free again). A vendor without files (Anthropic): a
    'creating' batch is looked for by `_resume_create`. `include_alive`: also this process's own
    (after a transient create failure). Returns the rows as they now are."""
    done = []
    for row in ledger.outstanding(store, deployment):
        if row.acknowledged or (not include_alive and row.owner and owners.owner_alive(row.owner, None, lease_s)):
            continue
        since = row.created_at.timestamp() if row.created_at else None
        if not api.flavour.uploads:
            _resume_create(store, api, row, since)
            done.append(ledger.get(store, row.batch_id))
            continue
        file_id = row.input_file_id
        if file_id is None:
            file_id = api.find_file(row.input_file_name or ledger.input_file_name(row.batch_id), since)
            if file_id is None:
                ledger.abandon(store, row.batch_id, "its upload never completed (the submitting process ended)")
                done.append(ledger.get(store, row.batch_id))
                continue
            ledger.record_upload(store, row.batch_id, file_id)
        found = api.find_batch(file_id, since)
        if found is not None:
            ledger.record_submitted(store, row.batch_id, found)
        else:
            report = SubmitReport()
            _create(store, api, row.batch_id, file_id, deployment, None, report)
        done.append(ledger.get(store, row.batch_id))
    return done


def poll(store, api: BatchAPI, row: ledger.BatchRow) -> BatchStatus:
    """The vendor's status of a created batch, recorded."""
    if not row.acknowledged:
        raise MedhelmError(f"batch {row.batch_id} was never created at the vendor (state {row.state}): resume it first")
    status = api.retrieve(row.vendor_batch_id)
    ledger.record_status(store, row.batch_id, status)
    return status


def collect(store, api: BatchAPI, batch_id: str, status: BatchStatus | None = None) -> BatchResults:
    """The outcome of every request of an ended batch (its results read; nothing stored).
    A batch still running raises."""
    row = ledger.get(store, batch_id)
    if row is None or not row.acknowledged:
        raise MedhelmError(f"batch {batch_id} is not a batch created at the vendor")
    if status is None:
        status = poll(store, api, row)
    if not status.ended:
        raise MedhelmError(f"batch {batch_id} ({status.vendor_batch_id}) is still {status.state}")
    return api.collect_results(status, ledger.requests_of(store, batch_id))


def store_collected(store, batch_id: str, results: BatchResults,
                    write: Callable[[object, BatchResults], None] | None = None) -> None:
    """In one transaction: `write(conn, results)` (the caller's answers, e.g. `completions` rows of the
    ANSWERED outcomes) and the batch's items settled (`ledger.record_collected`)."""
    with store.transaction() as conn:
        if write is not None:
            write(conn, results)
        ledger.record_collected(conn, batch_id, results.outcomes.values())


__all__ = ["SubmitReport", "collect", "poll", "resume", "store_collected", "submit"]
