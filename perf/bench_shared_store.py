"""The shared store (DuckLake on PostgreSQL + Parquet) against the embedded DuckDB file, side by side.

The full-size published suite of perf/bench_rebuild.py (182 runs, ~3 GB of JSON; `--scale M,K` for
smaller) imported and rebuilt by `medhelm-import`, once into a DuckDB file and once into a DuckLake
whose catalog is a throwaway PostgreSQL (scripts/postgres.sh, Debian's package) and whose Parquet
files are in a local folder. Both run in .venv-ducklake (scripts/setup.sh --with-ducklake), so the
same DuckDB (1.5.5) does the work on both sides; each row is one process, measured with wait4 (wall
time, peak RSS), in the order: tables only, + per-instance stats, + completions, re-run (nothing
fetched, nothing rebuilt), re-run with --rebuild (the rebuild and comparison alone). Goal (issue 15):
the DuckLake within 2x of the file.

Then medhelm-run's throughput with 1 and with 2 processes on the suite of perf/bench_suite.py (24
runs, 8 model and 3 judge deployments, each its own mock server), mock latency 0 so the client side is
the bottleneck: the 2 processes split the models (4 each) and write one store at once, each with its
own output path (as two machines would). On the DuckDB file they take turns on its lock; on the
DuckLake they take turns on its PostgreSQL advisory lock, and call at the same time. Goal (issue 15):
2 processes at >= 1.6x one.

    .venv/bin/python perf/bench_shared_store.py [--scale 13,1000] [--data-dir DIR] [--no-completions]
                                                 [--only import|runs] [--instances 50]
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
    cmd = [str(python), "-m", "medhelm_cli.imports", *args, "-q"]
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


def start_postgres(where: Path) -> str:
    up = subprocess.run(["bash", "scripts/postgres.sh", "start", str(where), str(free_port())], cwd=ROOT,
                        capture_output=True, text=True, timeout=120)
    if up.returncode != 0:
        sys.exit(f"bench_shared_store: PostgreSQL did not start: {up.stderr}")
    return up.stdout.strip().splitlines()[-1]


def stop_postgres(where: Path) -> None:
    subprocess.run(["bash", "scripts/postgres.sh", "stop", str(where)], cwd=ROOT, capture_output=True, timeout=120)


def catalog_bytes(url: str) -> int:
    """The catalog database's size (DuckLake keeps small inserts inlined there, besides the metadata)."""
    import psycopg2

    with psycopg2.connect(url) as pg, pg.cursor() as cur:
        cur.execute("SELECT pg_database_size(current_database()) - pg_database_size('template1')")
        return cur.fetchone()[0]


def machine_busy(since: tuple[int, int] | None = None):
    """The (busy, total) jiffies of all cores now, or the busy fraction since `since`."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    now = (sum(fields) - fields[3] - fields[4], sum(fields))   # idle and iowait are not busy
    if since is None:
        return now
    return (now[0] - since[0]) / max(1, now[1] - since[1])


def runs_throughput(instances: int) -> None:
    """medhelm-run with 1 and 2 processes on bench_suite's suite, into a DuckDB file and a DuckLake."""
    from bench.bench_suite import JUDGES, MODELS, lay_out_suite, reset, stats

    work = Path(tempfile.mkdtemp(prefix="medhelm-bench-runs-", dir="/tmp"))
    work.chmod(0o755)
    mocks, ports, servers, rows = [], {}, [], []
    try:
        lay_out_suite(ROOT.parent / "shared", work, 0, 0, mocks, ports)
        for kind in ("DuckDB file", "DuckLake"):
            for n in (1, 2):
                key = f"{kind.split()[-1].lower()}{n}"
                if kind == "DuckLake":
                    servers.append(work / f"pg_{key}")
                    catalog = start_postgres(servers[-1])
                    storage = f"ducklake:{catalog}?data_path={work / ('lake_' + key)}"
                else:
                    storage = f"duckdb:{work / key / 'medhelm.duckdb'}"
                groups = [MODELS] if n == 1 else [MODELS[:len(MODELS) // 2], MODELS[len(MODELS) // 2:]]
                for name in MODELS + JUDGES:
                    reset(ports[name])
                procs = []
                busy_before, cpu = machine_busy(), 0.0
                start = time.perf_counter()
                for i, models in enumerate(groups):
                    out = work / f"{key}_out{i}"
                    env = {**{k: v for k, v in os.environ.items() if k != "MEDHELM_STORAGE"},
                           "DAGSTER_HOME": str(out / "dh")}
                    procs.append(subprocess.Popen(
                        [str(LAKE_PY.parent / "medhelm-run"), "--conf-paths", "work/conf/bench.conf", "--suite", "bench",
                         "--max-eval-instances", str(instances), "--num-threads", "4", "--output-path", str(out),
                         "--local-path", "work/prod_env", "--no-progress", "--storage", storage,
                         "--models-to-run", *[f"mockai/{m}" for m in models]],
                        cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=open(work / f"{key}_out{i}.err", "w")))
                for i, proc in enumerate(procs):
                    _, status, usage = os.wait4(proc.pid, 0)
                    if os.waitstatus_to_exitcode(status):
                        err = (work / f"{key}_out{i}.err").read_text()
                        sys.exit(f"bench_shared_store: medhelm-run ({kind}, {n} processes) failed:\n{err[-3000:]}")
                    cpu += usage.ru_utime + usage.ru_stime
                wall = time.perf_counter() - start
                busy = machine_busy(busy_before)
                counts = [stats(ports[name]) for name in MODELS + JUDGES]
                calls = sum(c["total_requests"] for c in counts)
                twice = calls - sum(c["distinct_requests"] for c in counts)
                stored = (sum(f.stat().st_size for f in (work / ("lake_" + key)).rglob("*.parquet")) + catalog_bytes(catalog)
                          if kind == "DuckLake" else (work / key / "medhelm.duckdb").stat().st_size)
                rows.append((kind, n, wall, calls, twice, cpu, busy, stored))
    finally:
        for proc in mocks:
            proc.terminate()
        for pg in servers:
            stop_postgres(pg)
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nmedhelm-run on bench_suite's suite ({len(MODELS) * 3} runs x {instances} instances, mock latency 0; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    print(f"{'store':<13}{'processes':>10}{'wall s':>9}{'calls':>8}{'calls/s':>9}{'paid twice':>12}{'vs 1':>7}"
          f"{'client CPU ms/call':>20}{'machine busy':>14}{'stored KB/instance':>20}")
    one = {}
    for kind, n, wall, calls, twice, cpu, busy, stored in rows:
        one.setdefault(kind, calls / wall)
        print(f"{kind:<13}{n:>10}{wall:>9.1f}{calls:>8}{calls / wall:>9.1f}{twice:>12}{(calls / wall) / one[kind]:>6.2f}x"
              f"{1000 * cpu / calls:>20.1f}{busy:>13.0%}{stored / 1024 / (len(MODELS) * 3 * instances):>20.2f}")
    print("(client CPU: user + system seconds of the medhelm-run processes; machine busy: all cores, from /proc/stat,"
          " the mock servers included; stored: the DuckDB file, or the lake's Parquet files plus its catalog database"
          " beyond an empty one)")
    # The physical bound: the cores are shared by the clients, the mock servers and PostgreSQL, so at
    # one process's CPU per call (all of it: client, mocks, catalog) the machine does at most
    # 1 / busy times that process's throughput, whatever the number of processes.
    for kind in one:
        (_, _, w1, c1, _, _, b1, _), (_, _, w2, c2, _, _, b2, _) = [r for r in rows if r[0] == kind]
        print(f"{kind}: 1 process kept the machine {b1:.0%} busy, so the cores bound any number of processes to"
              f" {1 / b1:.2f}x it; 2 processes reached {(c2 / w2) / (c1 / w1):.2f}x with the machine {b2:.0%} busy")


def main() -> None:
    a = suite_arguments(__doc__, more=lambda ap: (
        ap.add_argument("--only", choices=("import", "runs"), help="one part of the bench"),
        ap.add_argument("--instances", type=int, default=50, help="instances per run of the runs part (default 50)")))
    if not LAKE_PY.exists():
        sys.exit("bench_shared_store: no .venv-ducklake: bash scripts/setup.sh --with-ducklake")
    if a.only != "runs":
        import_and_rebuild(a)
    if a.only != "import":
        runs_throughput(a.instances)


def import_and_rebuild(a) -> None:
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
            lake = f"ducklake:{start_postgres(pg)}?data_path={work / ('lake_' + key)}"
            common = ["--source", str(data), "--suite", suite, *extra]
            f = run_import(LAKE_PY, [*common, "-o", str(work / f"file_{key}")])
            k = run_import(LAKE_PY, [*common, "-o", str(work / f"out_{key}"), "--storage", lake])
            rows.append((label, f, k))
        for label, extra in (("re-run (nothing fetched)", []), ("re-run, --rebuild", ["--rebuild"])):
            f = run_import(LAKE_PY, [*common, *extra, "-o", str(work / f"file_{key}")])
            k = run_import(LAKE_PY, [*common, *extra, "-o", str(work / f"out_{key}"), "--storage", lake])
            rows.append((label, f, k))
        sizes = (sum(p.stat().st_size for p in (work / f"file_{key}").glob("*.duckdb")),
                 sum(p.stat().st_size for p in (work / f"lake_{key}").rglob("*.parquet")))
    finally:
        for pg in servers:
            stop_postgres(pg)
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
