"""`Store.combined` and the claims made through it: the small transactions of many threads run as
one, each thread gets its own result or its own error, and a claim is still exact."""
import threading

import pytest

from medhelm_core.claims import TableClaims
from medhelm_core.combining import Combiner
from medhelm_core.store import Store


class CountingStore(Store):
    """A store that counts its transactions."""

    def __init__(self, path):
        super().__init__(path)
        self.transactions = 0

    def transaction(self):
        self.transactions += 1
        return super().transaction()


def _together(n, fn):
    """Run fn(i) in n threads released at once; returns results and errors by i."""
    barrier = threading.Barrier(n)
    results, errors = {}, {}

    def go(i):
        barrier.wait()
        try:
            results[i] = fn(i)
        except Exception as e:  # noqa: BLE001
            errors[i] = e

    threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results, errors


def test_pieces_of_many_threads_share_transactions_and_keep_their_own_results(tmp_path):
    store = CountingStore(tmp_path / "s.duckdb")
    with store.transaction() as conn:
        conn.execute("CREATE TABLE t (i INTEGER PRIMARY KEY)")
    store.transactions = 0
    gate = threading.Event()
    slow_first = {"done": False}

    def piece(i):
        def work(conn):
            if not slow_first["done"]:   # the first turn waits, so that the others queue behind it
                slow_first["done"] = True
                gate.wait(1.0)
            conn.execute("INSERT INTO t VALUES (?)", [i])
            return i * 10
        return store.combined(work)

    threading.Timer(0.3, gate.set).start()
    results, errors = _together(24, piece)
    assert not errors
    assert results == {i: i * 10 for i in range(24)}
    with store.connect() as conn:
        assert sorted(r[0] for r in conn.execute("SELECT i FROM t").fetchall()) == list(range(24))
    assert store.transactions < 24   # queued pieces went in together


def test_a_failing_piece_fails_only_its_own_thread(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    with store.transaction() as conn:
        conn.execute("CREATE TABLE t (i INTEGER PRIMARY KEY)")

    def piece(i):
        def work(conn):
            conn.execute("INSERT INTO t VALUES (?)", [0 if i == 5 else i + 100])   # 0 is there already
            return i
        return store.combined(work)

    with store.transaction() as conn:
        conn.execute("INSERT INTO t VALUES (0)")
    results, errors = _together(12, piece)
    assert set(errors) == {5}
    assert "PRIMARY KEY" in str(errors[5]) or "Duplicate key" in str(errors[5])
    assert set(results) == set(range(12)) - {5}
    with store.connect() as conn:
        got = sorted(r[0] for r in conn.execute("SELECT i FROM t").fetchall())
    assert got == [0] + [i + 100 for i in range(12) if i != 5]


def test_combined_inside_the_threads_own_use_of_the_store_runs_alone(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    with store.transaction() as conn:
        conn.execute("CREATE TABLE t (i INTEGER)")
    with store.connect() as conn:   # this thread holds the store: no wait for a turn it would block
        assert store.combined(lambda c: c.execute("INSERT INTO t VALUES (1)") and 7) == 7
        assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 1


def test_an_interrupted_turn_leaves_its_pieces_to_their_own_threads():
    """A turn cut short (an interrupt in the thread running it) settles nothing; a piece it had
    taken is run by its own thread when that thread gets the turn."""
    import time

    batches = []
    combiner = None

    def run_batch(pieces):
        batches.append([p.work for p in pieces])
        if len(batches) == 1:   # A's turn: wait until B and C are queued behind it
            while len(combiner._queue) < 2:
                time.sleep(0.01)
        elif len(batches) == 2:  # B's turn takes B and C, and is interrupted
            raise KeyboardInterrupt
        for p in pieces:
            p.settle(p.work * 2)

    combiner = Combiner(run_batch)
    got = {}

    def submit(i):
        try:
            got[i] = combiner.submit(i)
        except KeyboardInterrupt:
            got[i] = "interrupted"

    a = threading.Thread(target=submit, args=(1,))
    a.start()
    while not batches:
        time.sleep(0.01)
    b = threading.Thread(target=submit, args=(2,))
    b.start()
    while len(combiner._queue) < 1:
        time.sleep(0.01)
    c = threading.Thread(target=submit, args=(3,))
    c.start()
    for t in (a, b, c):
        t.join(5)
    assert batches[0] == [1] and sorted(batches[1]) == [2, 3]
    assert got[1] == 2 and got[2] == "interrupted"
    assert got[3] == 6 and batches[2] == [3]   # C ran its own piece once B's turn was cut short


def test_concurrent_claims_are_disjoint_and_skip_answered_keys(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    with store.transaction() as conn:
        conn.execute("INSERT INTO completions (request_key, model_deployment, result, success)"
                     " VALUES ('answered', 'd', '{}', true)")
    claims = TableClaims(store)
    keys = [f"k{i}" for i in range(40)] + ["answered"]

    def claim(i):
        from medhelm_core import owners
        owner = f"owner-{i}"
        owners.register(owner)
        return claims.claim(keys[i % 7:], owner, 120.0)

    results, errors = _together(16, claim)
    assert not errors
    won = [k for mine in results.values() for k in mine]
    assert len(won) == len(set(won))                 # no key claimed by two owners
    assert set(won) == set(keys) - {"answered"}       # every free key by someone, never the answered one
    with store.connect() as conn:
        rows = dict(conn.execute("SELECT request_key, owner FROM completion_claims").fetchall())
    assert {k: f"owner-{i}" for i, mine in results.items() for k in mine} == rows


@pytest.mark.parametrize("n", [1, 6])
def test_commits_settle_their_own_claims_only(tmp_path, n):
    store = Store(tmp_path / "s.duckdb")
    claims = TableClaims(store)
    from medhelm_core import owners
    for i in range(n):
        owners.register(f"o{i}")
        assert claims.claim([f"a{i}", f"b{i}"], f"o{i}", 120.0) == {f"a{i}", f"b{i}"}

    def commit(i):
        claims.commit(f"o{i}", [f"a{i}"], lambda conn: conn.execute(
            "INSERT INTO completions (request_key, model_deployment, result, success) VALUES (?, 'd', '{}', true)",
            [f"a{i}"]))

    _, errors = _together(n, commit)
    assert not errors
    with store.connect() as conn:
        left = sorted(conn.execute("SELECT request_key, owner FROM completion_claims").fetchall())
        answered = sorted(r[0] for r in conn.execute("SELECT request_key FROM completions").fetchall())
    assert left == sorted((f"b{i}", f"o{i}") for i in range(n))
    assert answered == sorted(f"a{i}" for i in range(n))
