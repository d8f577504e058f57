"""Dagster on PostgreSQL (deploy/dagster.yaml): every command of the README's section, as printed, in
a fresh copy of the checkout. A real PostgreSQL server from Debian's package (scripts/postgres.sh)
holds the Dagster instance; the example's conf, a dataset and a benchmark x model partition range are
materialized with `dg launch` and `dagster asset materialize` (steps in their own processes: Dagster's
multiprocess executor); the runs are in PostgreSQL, and DAGSTER_HOME has no SQLite storage. The server's
folder is inside the copy and its port a free one, with the README's old ports (55432, 8765, …) held
by another process."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import duckdb
import pytest

from tests.dagster_dev import stop_group
from tests.ports import readme_ports_taken  # noqa: F401  (a fixture)
from tests.readme import code_blocks, commands, readme_checkout, strip_comment

PG_DIR = ".postgres"  # the README's, inside the checkout
PSQL = next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin/psql"))), None)

pytestmark = [pytest.mark.skipif(PSQL is None, reason="no PostgreSQL server: bash scripts/setup.sh --with-postgres"),
              pytest.mark.usefixtures("readme_ports_taken")]


LAKE_BIN = Path(__file__).resolve().parents[2] / ".venv-ducklake" / "bin"
LAKE_EXPORT = 'export MEDHELM_STORAGE="ducklake:$PG?data_path=$PWD/.lake"'


def test_the_readme_commands_for_dagster_on_postgresql_work_as_printed(tmp_path):
    _run_dagster_block(tmp_path, lake=False)


@pytest.mark.skipif(not LAKE_BIN.exists(), reason="no .venv-ducklake: bash scripts/setup.sh --with-ducklake")
def test_the_same_commands_with_the_data_on_the_shared_store(tmp_path):
    """As the README says: the same commands from .venv-ducklake with MEDHELM_STORAGE naming a
    DuckLake (catalog in the same PostgreSQL): Dagster's step processes write the lake in turn."""
    _run_dagster_block(tmp_path, lake=True)


def _run_dagster_block(tmp_path: Path, lake: bool) -> None:
    block, lake_block = code_blocks("Dagster on PostgreSQL", "bash")
    cmds = [strip_comment(c) for c in commands(block)]
    assert cmds[0] == f"PG=$(bash scripts/postgres.sh start {PG_DIR})" and cmds[-1] == f"bash scripts/postgres.sh stop {PG_DIR}"
    assert not any(p in c for c in cmds for p in ("55432", "8765", "/tmp/"))   # no fixed port or shared folder
    assert any(c.startswith(".venv/bin/dagster asset materialize") and "--partition-range" in c for c in cmds)
    if lake:   # the README's sentence under the block, applied
        cmds = [c.replace(".venv/bin/dg ", ".venv-ducklake/bin/dg ").replace(".venv/bin/dagster ", ".venv-ducklake/bin/dagster ")
                for c in cmds]
        [export] = commands(lake_block)
        assert export == LAKE_EXPORT
        cmds.insert(1, export)
    with readme_checkout() as work:
        _run_in(work, tmp_path, cmds, lake)


def _run_in(work: Path, tmp_path: Path, cmds: list[str], lake: bool) -> None:
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
        up = subprocess.run(["bash", "scripts/postgres.sh", "start", PG_DIR], cwd=work,
                            capture_output=True, text=True, timeout=120)
        assert up.returncode == 0, up.stderr
        url = up.stdout.strip()
        assert url.startswith("postgresql://medhelm@127.0.0.1:") and ":55432/" not in url, up.stdout
        runs = subprocess.run([str(PSQL), url, "-tAc", "SELECT status, count(*) FROM runs GROUP BY 1"],
                              capture_output=True, text=True, timeout=60, check=True).stdout.split()
        assert runs == ["SUCCESS|3"]
        if lake:   # the range's two cells (shc_ptbm_med for both models), in the lake's tables
            count = ("import sys; from medhelm_core.lake_store import open_store; from medhelm_core.storage import parse_storage\n"
                     "with open_store(parse_storage(sys.argv[1]), 'benchmark_output').connect(read_only=True) as c:\n"
                     "    print(c.execute(\"SELECT count(DISTINCT run_name) FROM run_stats WHERE suite = 'example'\").fetchall()[0][0])")
            r = subprocess.run([str(LAKE_BIN / "python"), "-c", count, f"ducklake:{url}?data_path={work}/.lake"], cwd=work,
                               capture_output=True, text=True, timeout=120)
            assert r.stdout.strip() == "2", r.stdout + r.stderr
    finally:
        stop_group(proc.pid)  # the demo server
        subprocess.run(["bash", "scripts/postgres.sh", "stop", PG_DIR], cwd=work, capture_output=True, timeout=120)
    assert not list((work / ".dagster_pg").rglob("*.db"))  # no SQLite storage beside dagster.yaml
    if lake:
        assert not (work / "benchmark_output" / "medhelm.duckdb").exists() and list((work / ".lake").rglob("*.parquet"))
        return
    with duckdb.connect(str(work / "benchmark_output" / "medhelm.duckdb"), read_only=True) as conn:
        cells = conn.execute("SELECT count(DISTINCT run_name) FROM run_stats WHERE suite = 'example'").fetchone()[0]
    assert cells == 2  # shc_ptbm_med for both models: the range's two cells
