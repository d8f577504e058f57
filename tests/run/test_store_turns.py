"""The DuckDB file's turns between processes (medhelm_core.store): a process holding the file for
a suite keeps it open while nobody else asks (no close and checkpoint every few seconds), and gives
it up within a fraction of a second when another process asks for it."""
import subprocess
import sys
import time
from pathlib import Path

from medhelm_core.store import Store, _database

ROOT = Path(__file__).resolve().parents[2]

_OTHER = """
import sys, time
from medhelm_core.store import Store
start = time.monotonic()
with Store(sys.argv[1]).transaction() as conn:
    conn.execute("INSERT INTO turns VALUES ('other')")
print(f"{time.monotonic() - start:.3f}")
"""


def _use(store: Store, seconds: float, who: str = "holder") -> int:
    """Short transactions for `seconds`, as a suite's runs make them; returns how many."""
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        with store.transaction() as conn:
            conn.execute("INSERT INTO turns VALUES (?)", [who])
        n += 1
        time.sleep(0.002)
    return n


def test_a_held_file_stays_open_until_another_process_asks_then_that_one_gets_its_turn(tmp_path):
    store = Store(tmp_path / "medhelm.duckdb")
    with store.transaction() as conn:
        conn.execute("CREATE TABLE turns (who VARCHAR)")
    db = _database(store.path, store.lock_timeout_s)
    with store.held():
        opens = db.opens
        assert _use(store, 3.0) > 50
        assert db.opens == opens + 1  # opened once for 3 s of use: nobody asked

        other = subprocess.Popen([sys.executable, "-c", _OTHER, str(store.path)], cwd=ROOT,
                                 stdout=subprocess.PIPE, text=True)
        # The other process's interpreter starts, then asks; the holder keeps working meanwhile.
        _use(store, 4.0)
        out, _ = other.communicate(timeout=60)
        assert other.returncode == 0
        waited = float(out)
        assert waited < 2.0, waited  # it got the file while the holder was still using it
        assert db.opens >= opens + 2  # the holder gave it up, then took it back
    with store.connect(read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM turns WHERE who = 'other'").fetchone()[0] == 1
