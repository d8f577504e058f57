"""The batch ledger across processes: rows before uploads, no key in two live batches, and a killed
submitter's batch found again rather than uploaded or created twice."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from medhelm_core import owners
from medhelm_core.batch import OPENAI, BatchAPI, collect, input_file, ledger, poll, resume, store_collected, submit
from medhelm_core.clients.openai_compatible import OpenAICompatibleClient
from tests.batch.conftest import DEPLOYMENT, KEY, base_request, keyed, kill_9_when, spawn_python, store_answers

ROOT = Path(__file__).resolve().parents[2]


def dead_owner() -> str:
    """The owner id of a process that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return f"{owners.HOST}|{proc.pid}|-|deadbeef0000"


def _finish(store, api, batch_id):
    for _ in range(10):
        status = poll(store, api, ledger.get(store, batch_id))
        if status.ended:
            break
    results = collect(store, api, batch_id, status)
    store_collected(store, batch_id, results, store_answers(DEPLOYMENT))
    return results


def test_reserve_takes_only_keys_no_live_batch_holds(store):
    requests = keyed([base_request(f"q{i}") for i in range(5)])
    keys = list(requests)
    first = ledger.reserve(store, DEPLOYMENT, "openai", "http://x", {k: requests[k] for k in keys[:3]})
    second = ledger.reserve(store, DEPLOYMENT, "openai", "http://x", {k: requests[k] for k in keys[1:]})
    assert first[1] == keys[:3] and second[1] == keys[3:]
    assert ledger.reserve(store, DEPLOYMENT, "openai", "http://x", requests) is None
    row = ledger.get(store, first[0])
    assert (row.state, row.num_requests, row.vendor_batch_id) == ("uploading", 3, None)
    kept = ledger.requests_of(store, first[0])
    assert kept == {k: requests[k] for k in keys[:3]}  # kept as given, to the byte of the line
    api = BatchAPI(OpenAICompatibleClient("http://127.0.0.1:9/v1", KEY), OPENAI)
    assert all(api.line(k, kept[k]) == api.line(k, requests[k]) for k in kept)
    ledger.abandon(store, first[0], "upload failed")
    with store.connect() as conn:
        assert ledger.unbatched(conn, keys) == keys[:3]
    assert [r.batch_id for r in ledger.outstanding(store, DEPLOYMENT)] == [second[0]]


def test_a_crash_between_upload_and_create_never_uploads_twice(store, batch_server):
    server = batch_server()
    api = BatchAPI(OpenAICompatibleClient(server.base_url, KEY), OPENAI)
    requests = keyed([base_request(f"Question {i}: yes or no?") for i in range(4)])
    # A process reserved, uploaded and recorded the file, then died before POST /batches.
    batch_id, keys = ledger.reserve(store, DEPLOYMENT, "openai", api.endpoint, requests, owner=dead_owner())
    lines, _ = api.lines(requests)
    file_id = api.upload(input_file(lines, keys), ledger.input_file_name(batch_id))
    ledger.record_upload(store, batch_id, file_id)
    # The next process submits the same requests: all held by the dead process's batch.
    report = submit(store, api, DEPLOYMENT, requests)
    assert report.submitted == [] and sorted(report.skipped) == sorted(keys)
    assert (len(server.uploads), server.creates) == (1, 0)
    # ... and resumes it: created from the recorded file, not uploaded again.
    (row,) = resume(store, api, DEPLOYMENT)
    assert row.batch_id == batch_id and row.acknowledged and row.input_file_id == file_id
    assert (len(server.uploads), server.creates) == (1, 1)
    assert resume(store, api, DEPLOYMENT) == []
    results = _finish(store, api, batch_id)
    assert {o.state for o in results.outcomes.values()} == {"answered"}
    assert submit(store, api, DEPLOYMENT, requests).submitted == []
    assert (len(server.uploads), server.creates) == (1, 1)


def test_a_lost_create_answer_is_found_at_the_vendor_not_created_again(store, batch_server):
    server = batch_server(lose_create_answer=True)
    api = BatchAPI(OpenAICompatibleClient(server.base_url, KEY), OPENAI)
    requests = keyed([base_request(f"q{i}") for i in range(3)])
    report = submit(store, api, DEPLOYMENT, requests)
    assert report.submitted == [] and len(report.unacknowledged) == 1 and server.creates == 1
    assert ledger.get(store, report.unacknowledged[0]).state == "uploaded"
    assert submit(store, api, DEPLOYMENT, requests).submitted == []  # still held
    (row,) = resume(store, api, DEPLOYMENT)
    assert row.vendor_batch_id in server.batches and (len(server.uploads), server.creates) == (1, 1)


def test_an_upload_never_recorded_is_found_by_name_or_abandoned(store, batch_server):
    server = batch_server()
    api = BatchAPI(OpenAICompatibleClient(server.base_url, KEY), OPENAI)
    requests = keyed([base_request(f"q{i}") for i in range(4)])
    keys = list(requests)
    # Died after the upload, before recording its id: the file is found by its name.
    found_id, found_keys = ledger.reserve(store, DEPLOYMENT, "openai", api.endpoint,
                                          {k: requests[k] for k in keys[:2]}, owner=dead_owner())
    lines, _ = api.lines(requests)
    api.upload(input_file(lines, found_keys), ledger.input_file_name(found_id))
    # Died before the upload: nothing at the vendor, so the batch is abandoned and its keys freed.
    lost_id, _ = ledger.reserve(store, DEPLOYMENT, "openai", api.endpoint, {k: requests[k] for k in keys[2:]},
                                owner=dead_owner())
    rows = {r.batch_id: r for r in resume(store, api, DEPLOYMENT)}
    assert rows[found_id].acknowledged and rows[lost_id].state == "abandoned"
    assert (len(server.uploads), server.creates) == (1, 1)
    with store.connect() as conn:
        assert ledger.unbatched(conn, keys) == keys[2:]


def test_a_live_submitter_is_left_alone(store, batch_server):
    server = batch_server()
    api = BatchAPI(OpenAICompatibleClient(server.base_url, KEY), OPENAI)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        owner = f"{owners.HOST}|{other.pid}|{owners.process_start(other.pid)}|abc"
        ledger.reserve(store, DEPLOYMENT, "openai", api.endpoint, keyed([base_request("q")]), owner=owner)
        assert resume(store, api, DEPLOYMENT) == [] and server.log == []
    finally:
        other.kill()
        other.wait()


CHILD = textwrap.dedent("""
    import sys
    from medhelm_core.batch import OPENAI, BatchAPI, submit
    from medhelm_core.clients.openai_compatible import OpenAICompatibleClient
    from medhelm_core.store import Store
    from tests.batch.conftest import DEPLOYMENT, KEY, base_request, keyed
    api = BatchAPI(OpenAICompatibleClient(sys.argv[2], KEY, timeout_s=120), OPENAI)
    submit(Store(sys.argv[1]), api, DEPLOYMENT, keyed([base_request(f"Question {i}: yes or no?") for i in range(5)]))
    print("submitted")
""")


def test_kill_9_while_the_batch_is_being_created_pays_nothing_twice(store, batch_server, tmp_path):
    server = batch_server(create_delay_s=30)  # the vendor creates the batch; its answer is slow
    child = spawn_python(CHILD, str(store.path), server.base_url, cwd=ROOT)
    kill_9_when(child, lambda: server.creates > 0, timeout_s=60)
    server.create_delay_s = 0
    api = BatchAPI(OpenAICompatibleClient(server.base_url, KEY), OPENAI)
    (before,) = ledger.outstanding(store, DEPLOYMENT)
    assert before.state == "uploaded" and before.vendor_batch_id is None  # the row was there first
    requests = keyed([base_request(f"Question {i}: yes or no?") for i in range(5)])
    assert submit(store, api, DEPLOYMENT, requests).submitted == []  # held, not submitted again
    (row,) = resume(store, api, DEPLOYMENT)
    assert row.vendor_batch_id in server.batches
    results = _finish(store, api, row.batch_id)
    assert set(results.outcomes) == set(requests) and {o.state for o in results.outcomes.values()} == {"answered"}
    assert (len(server.uploads), server.creates) == (1, 1)
    with store.connect() as conn:
        assert conn.execute("SELECT count(*) FROM completions").fetchone()[0] == 5
        counts = json.loads(conn.execute("SELECT request_counts FROM batches").fetchone()[0])
    assert counts == {"total": 5, "completed": 5, "failed": 0}
