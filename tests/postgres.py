"""A throwaway PostgreSQL server for a test (scripts/postgres.sh: Debian's package, in a /tmp folder
the postgres user can reach when the tests run as root), and the environment of the DuckLake tests."""
from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAKE_PY = ROOT / ".venv-ducklake" / "bin" / "python"
HAS_PG = bool(list(Path("/usr/lib/postgresql").glob("*/bin/initdb")))


def skip_without_lake() -> None:
    if not HAS_PG:
        pytest.skip("no PostgreSQL server: bash scripts/setup.sh --with-postgres")
    if not LAKE_PY.exists():
        pytest.skip("no .venv-ducklake: bash scripts/setup.sh --with-ducklake")


@contextmanager
def running_postgres() -> Iterator[str]:
    """Start a server on a free port; yield its URL (postgresql://medhelm@127.0.0.1:PORT/medhelm)."""
    pg_dir = Path(tempfile.mkdtemp(prefix="medhelm-lake-pg-", dir="/tmp"))
    pg_dir.chmod(0o755)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    up = subprocess.run(["bash", "scripts/postgres.sh", "start", str(pg_dir), str(port)], cwd=ROOT,
                        capture_output=True, text=True, timeout=120)
    assert up.returncode == 0, up.stderr
    try:
        yield up.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run(["bash", "scripts/postgres.sh", "stop", str(pg_dir)], cwd=ROOT, capture_output=True, timeout=120)
        shutil.rmtree(pg_dir, ignore_errors=True)
