"""The shared store (DuckLake on PostgreSQL + Parquet) against the embedded DuckDB file, side by side.

The full-size published suite of bench/bench_rebuild.py (182 runs, ~3 GB of JSON; `--scale M,K` for
smaller) imported and rebuilt by `medhelm-import`, once into a DuckDB file and once into a DuckLake
whose catalog is a throwaway PostgreSQL (scripts/postgres.sh, Debian's package) and whose Parquet
files are in a local folder. Both run in .venv-ducklake (scripts/setup.sh --with-ducklake), so the
same DuckDB (1.5.5) does the work on both sides; each row is one process, measured with wait4 (wall
time, peak RSS), in the order: tables only, + per-instance stats, + completions, re-run (nothing
fetched: the rebuild and comparison alone). Goal (issue 15): the DuckLake within 2x of the file.

    .venv/bin/python bench/bench_shared_store.py [--scale 13,1000] [--data-dir DIR] [--no-completions]
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
LAKE_PY = ROOT / ".venv-ducklake" / "bin" / "python"

from bench.bench_rebuild import prepare, suite_arguments  # noqa: E402


def run_import(python: Path, args: list[str]) -> tuple[float, float, str]:
    """(wall s, peak RSS GB, last stdout line) of one medhelm-import process."""
    cmd = [str(python), "-m", "medhelm_core.published.cli", *args, "-q"]
    env = {k: v for k, v in os.environ.items() if k != "MEDHELM_STORAGE"}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.time()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=err, text=True, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.time() - start
        out.seek(0)
        err.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"bench_shared_store: {' '.join(cmd)} failed:\n{err.read()[-3000:]}")
        lines = [ln for ln in out.read().splitlines() if ln.strip()]
    return wall, usage.ru_maxrss / 1e6, lines[-1] if lines else ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    a = suite_arguments(__doc__)
    if not LAKE_PY.exists():
        sys.exit("bench_shared_store: no .venv-ducklake: bash scripts/setup.sh --with-ducklake")
    models, instances = (int(x) for x in a.scale.split(","))
    data = Path(a.data_dir)
    suite = prepare(data, models, instances)
    runs = sum(1 for p in (data / "runs" / suite).iterdir() if (p / "run_spec.json").exists())
    print(f"suite {suite}: {runs} runs; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    work = Path(tempfile.mkdtemp(prefix="medhelm-bench-lake-", dir="/tmp"))   # reachable by the postgres user
    work.chmod(0o755)
    plans = [("tables only", ["--no-per-instance"]), ("+ per-instance stats", [])]
    if not a.no_completions:
        plans.append(("+ completions", ["--with-completions"]))
    rows, servers = [], []
    try:
        for label, extra in plans:   # each row: a fresh output folder and a fresh catalog (its own server)
            key = label.replace(" ", "_").replace("+", "p")
            pg = work / f"pg_{key}"
            servers.append(pg)
            up = subprocess.run(["bash", "scripts/postgres.sh", "start", str(pg), str(free_port())], cwd=ROOT,
                                capture_output=True, text=True, timeout=120)
            if up.returncode != 0:
                sys.exit(f"bench_shared_store: PostgreSQL did not start: {up.stderr}")
            lake = f"ducklake:{up.stdout.strip().splitlines()[-1]}?data_path={work / ('lake_' + key)}"
            common = ["--source", str(data), "--suite", suite, *extra]
            f = run_import(LAKE_PY, [*common, "-o", str(work / f"file_{key}")])
            k = run_import(LAKE_PY, [*common, "-o", str(work / f"out_{key}"), "--storage", lake])
            rows.append((label, f, k))
        f = run_import(LAKE_PY, [*common, "-o", str(work / f"file_{key}")])
        k = run_import(LAKE_PY, [*common, "-o", str(work / f"out_{key}"), "--storage", lake])
        rows.append(("re-run (nothing fetched)", f, k))
        sizes = (sum(p.stat().st_size for p in (work / f"file_{key}").glob("*.duckdb")),
                 sum(p.stat().st_size for p in (work / f"lake_{key}").rglob("*.parquet")))
    finally:
        for pg in servers:
            subprocess.run(["bash", "scripts/postgres.sh", "stop", str(pg)], cwd=ROOT, capture_output=True, timeout=120)
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{'import (DuckDB 1.5.5)':<26}{'file s':>8}{'peak GB':>9}{'lake s':>9}{'peak GB':>9}{'lake/file':>11}")
    for label, (fw, fp, _), (kw, kp, _) in rows:
        print(f"{label:<26}{fw:>8.1f}{fp:>9.2f}{kw:>9.1f}{kp:>9.2f}{kw / fw:>10.2f}x")
    print(f"\nstored ({rows[-1][0]}): DuckDB file {sizes[0] / 1e6:.0f} MB, DuckLake Parquet {sizes[1] / 1e6:.0f} MB")
    print("\ncomparison (each row, file | lake):")
    for label, (_, _, fl), (_, _, kl) in rows:
        print(f"  {label}: {fl.split('; rebuilt')[0]} | {kl.split('; rebuilt')[0]}")


if __name__ == "__main__":
    main()
