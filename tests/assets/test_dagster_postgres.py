"""Dagster on PostgreSQL (deploy/dagster.yaml): every command of the README's section, as printed, in
a fresh copy of the checkout. A real PostgreSQL server from Debian's package (scripts/postgres.sh)
holds the Dagster instance; the example's conf, a dataset and a benchmark x model partition range are
materialized with `dg launch` and `dagster asset materialize` (steps in their own processes: Dagster's
multiprocess executor); the runs are in PostgreSQL, and DAGSTER_HOME has no SQLite storage."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import duckdb
import pytest

from tests.dagster_dev import fresh_checkout, stop_group
from tests.readme import code_blocks, commands, strip_comment

PG_DIR = Path("/tmp/medhelm-pg")  # the README's (reachable by the postgres user when run as root)
PSQL = next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin/psql"))), None)

pytestmark = pytest.mark.skipif(PSQL is None, reason="no PostgreSQL server: bash scripts/setup.sh --with-postgres")


def test_the_readme_commands_for_dagster_on_postgresql_work_as_printed(tmp_path):
    [block] = code_blocks("Dagster on PostgreSQL", "bash")
    cmds = [strip_comment(c) for c in commands(block)]
    assert cmds[0].startswith("bash scripts/postgres.sh start") and cmds[-1].startswith("bash scripts/postgres.sh stop")
    assert any(c.startswith(".venv/bin/dagster asset materialize") and "--partition-range" in c for c in cmds)
    for port in (55432, 8765):
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0, f"port {port} is in use: stop what holds it"
    shutil.rmtree(PG_DIR, ignore_errors=True)
    work = fresh_checkout(tmp_path)
    script = ["set -uo pipefail"] + [f"{c}\n" if c.endswith("&") else
                                     f"{c} || {{ echo 'README command {i + 1} failed' >&2; exit 1; }}"
                                     for i, c in enumerate(cmds)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEDHELM_", "DAGSTER_"))}
    log = tmp_path / "commands.log"
    with open(log, "w") as sink:
        proc = subprocess.Popen(["bash", "-c", "\n".join(script)], cwd=work, env=env, start_new_session=True,
                                stdout=sink, stderr=subprocess.STDOUT, text=True)
    try:
        proc.wait(timeout=900)
        assert proc.returncode == 0, log.read_text()[-4000:]
        # the server's data outlives it: start it again and read Dagster's runs table
        up = subprocess.run(["bash", "scripts/postgres.sh", "start", str(PG_DIR), "55432"], cwd=work,
                            capture_output=True, text=True, timeout=120)
        assert up.returncode == 0, up.stderr
        url = up.stdout.strip().splitlines()[-1]
        runs = subprocess.run([str(PSQL), url, "-tAc", "SELECT status, count(*) FROM runs GROUP BY 1"],
                              capture_output=True, text=True, timeout=60, check=True).stdout.split()
        assert runs == ["SUCCESS|3"]
    finally:
        stop_group(proc.pid)  # the demo server
        subprocess.run(["bash", "scripts/postgres.sh", "stop", str(PG_DIR)], cwd=work, capture_output=True, timeout=120)
        shutil.rmtree(PG_DIR, ignore_errors=True)
    assert not list((work / ".dagster_pg").rglob("*.db"))  # no SQLite storage beside dagster.yaml
    with duckdb.connect(str(work / "benchmark_output" / "medhelm.duckdb"), read_only=True) as conn:
        cells = conn.execute("SELECT count(DISTINCT run_name) FROM run_stats WHERE suite = 'example'").fetchone()[0]
    assert cells == 2  # shc_ptbm_med for both models: the range's two cells
