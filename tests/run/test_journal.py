"""The answer journal: every answer is durable as it arrives, whatever happens to the DuckDB commit.

The kill -9 tests through `medhelm-run` live in test_engine_cli.py; these check the journal's own
promises: an ended engine's segments are replayed (torn last line skipped with a warning), a live
engine's are left alone, a failed commit loses nothing, and nothing is left behind."""
import json
import logging
import os
import subprocess
import sys

import pytest

from medhelm_core import journal, owners
from medhelm_core.engine import CompletionEngine
from medhelm_core.store import COMPLETION_COLUMNS, Store
from tests.run.test_engine import CountingClient, _jobs


def _row(i: int) -> list:
    req = {"model": "m/x", "prompt": f"p{i}"}
    result = {"success": True, "completions": [{"text": f"P{i}"}]}
    # The row as journals wrote it before `untruncated` was added (12 columns): replay pads it.
    return [f"{i:064d}", "d/x", "m/x", json.dumps(req), json.dumps(result), True, 1, 3, 1, None, None, "ok"]


def _dead_owner() -> str:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return f"{owners.HOST}|{int(proc.stdout)}|-|deadbeef0000"  # that process has exited


def _count(store: Store) -> int:
    with store.connect() as conn:
        return conn.execute("SELECT count(*) FROM completions").fetchone()[0]


def test_an_ended_engines_answers_are_replayed_and_a_torn_last_record_skipped(tmp_path, caplog):
    db = tmp_path / "t.duckdb"
    answers = journal.Journal(db, _dead_owner())
    for i in range(5):
        answers.append(_row(i))
    segment = answers._segment.path
    with open(segment, "ab") as f:  # the process died inside its sixth write
        f.write(json.dumps(_row(5)).encode()[:40])
    caplog.set_level(logging.WARNING)

    store = Store(db)
    assert _count(store) == 5  # opening the store replayed the segment
    assert "torn last record skipped" in caplog.text and segment.name in caplog.text
    assert not segment.exists()
    with store.connect() as conn:
        row = conn.execute(f"SELECT {', '.join(COMPLETION_COLUMNS)} FROM completions WHERE request_key = ?",
                           [_row(3)[0]]).fetchone()
    assert json.loads(row[4]) == json.loads(_row(3)[4]) and row[COMPLETION_COLUMNS.index("outcome")] == "ok"
    assert row[COMPLETION_COLUMNS.index("untruncated")] is None


def test_a_live_engines_journal_is_left_alone(tmp_path):
    db = tmp_path / "t.duckdb"
    owner = owners.new_owner_id()
    owners.register(owner)
    try:
        answers = journal.Journal(db, owner)
        answers.append(_row(1))
        assert _count(Store(db)) == 0  # its owner runs: it will commit them itself
    finally:
        owners.unregister(owner)
    assert _count(Store(db)) == 1  # ended without committing: the next opener replays


def test_a_commit_that_fails_loses_no_answer(tmp_path, monkeypatch):
    store = Store(tmp_path / "t.duckdb")
    client = CountingClient()

    def broken(self, conn, rows, *rest):
        raise OSError("disk full")

    monkeypatch.setattr(CompletionEngine, "_commit_batch", broken)
    with pytest.raises(OSError):
        CompletionEngine(store, lambda d: client, num_threads=2).run(_jobs(12))
    assert len(client.calls) == 12 and _count(store) == 0
    assert len(list(journal.journal_dir(store.path).iterdir())) >= 1
    monkeypatch.undo()

    fresh = CountingClient()
    _, report = CompletionEngine(store, lambda d: fresh).run(_jobs(12))
    assert (report.reused, report.new, fresh.calls) == (12, 0, [])
    assert list(journal.journal_dir(store.path).iterdir()) == []


def test_a_run_leaves_no_segment_and_the_journal_is_synced(tmp_path, monkeypatch):
    synced = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(fd), real(fd)))
    store = Store(tmp_path / "t.duckdb")
    _, report = CompletionEngine(store, lambda d: CountingClient(), num_threads=4).run(_jobs(30))
    assert report.new == 30 and _count(store) == 30 and synced
    assert list(journal.journal_dir(store.path).iterdir()) == []
