"""Rebuild a full-size published suite from its files: time and peak memory, beside helm-summarize.

Data: a suite written by ../shared/tools/synth_release.py from the public-n50 golden suite
(default 13 models x 1,000 instances = 182 runs, ~3 GB; `--scale M,K` for smaller), made to look
published by summarizing it once (suite-level summary.json, schema.json, groups/*.json: the
"published" leaderboard the rebuild is compared with).  Generated once under --data-dir and
reused (free disk is checked first).

Each row is one `medhelm-import --source <data-dir> --suite <suite>` process into a fresh output
folder (process start included), measured with wait4 (wall time, peak RSS):

  tables only        run_spec.json + stats.json            (helm-summarize --skip-completed-run-display-json)
  + per-instance     + per_instance_stats.json              (helm-summarize, which reads every run's files)
  + completions      + scenario_state.json (--with-completions)
  re-run             same output folder again: nothing fetched, nothing rebuilt (its inputs unchanged)
  re-run, --rebuild  same again with --rebuild: the rebuild and comparison alone

helm-summarize on the same files: with HELM_VENV naming a crfm-helm 0.5.16 install
(../shared/tools/install_helm_venv.sh helm), it runs in the same session, twice in one folder whose run
directories link to the data's files (its display files land there, the data stays as it was): full,
writing every run's display files, then with --skip-completed-run-display-json once they are there
(tables only); each row's ratio is against it. Without HELM_VENV the ratios use figures of an earlier session on
this hardware (413-433 s and 1.7 GB full; 18-20 s and 0.87 GB without display files), marked so.

    [HELM_VENV=~/helm-venv] .venv/bin/python perf/bench_rebuild.py [--scale 13,1000] [--data-dir DIR] [--no-completions]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = Path(os.environ.get("MEDHELM_SHARED", ROOT.parent / "shared"))
TEMPLATE = SHARED / "oracle" / "public" / "benchmark_output" / "runs" / "public-n50"
SYNTH = SHARED / "tools" / "synth_release.py"
HELM_FULL = (413, 433, 1.7)        # seconds min, max, peak GB
HELM_TABLES = (18, 20, 0.87)
BYTES_PER_INSTANCE_RUN = 16_500     # ~3.0 GB for 182 runs x 1,000 instances


def prepare(data_dir: Path, models: int, instances: int) -> str:
    suite = f"synth-{models}x{instances}"
    suite_dir = data_dir / "runs" / suite
    if (suite_dir / "summary.json").exists():
        return suite
    need = models * 14 * instances * BYTES_PER_INSTANCE_RUN
    data_dir.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(data_dir).free
    if free < need * 1.3:
        sys.exit(f"bench_rebuild: {free / 1e9:.1f} GB free under {data_dir}, need ~{need / 1e9:.1f} GB; "
                 f"use --scale or --data-dir")
    if not (suite_dir.exists() and len(list(suite_dir.iterdir())) >= models * 14):
        print(f"writing {suite} ({models} models x {instances} instances, ~{need / 1e9:.1f} GB) ...", file=sys.stderr)
        subprocess.run([sys.executable, str(SYNTH), str(TEMPLATE), str(data_dir), "-m", str(models), "-k",
                        str(instances), "--jobs", "2", "--force"], check=True)
    print(f"summarizing {suite} once (its 'published' leaderboard) ...", file=sys.stderr)
    import duckdb

    from medhelm_core.summarize import load_benchmark_output_runs, summarize

    conn = duckdb.connect()
    load_benchmark_output_runs(conn, str(data_dir), suite)
    summarize(conn, str(data_dir), schema_path=ROOT / "schema" / "schema_medhelm.yaml", suite=suite)
    return suite


def run_one(args: list[str]) -> tuple[float, float, float, str]:
    """(wall seconds incl. process start, peak RSS GB, CPU seconds, stdout) of one medhelm-import process."""
    cmd = [sys.executable, "-m", "medhelm_cli.imports", *args, "-q"]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.time()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.time() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            sys.exit(f"bench_rebuild: {' '.join(cmd)} failed:\n{err.read()}")
        return wall, usage.ru_maxrss / 1e6, usage.ru_utime + usage.ru_stime, out.read()


def helm_summarize(helm_venv: Path, data_dir: Path, suite: str) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """HELM's own helm-summarize on the suite, twice in one scratch output folder whose run directories
    hold links to the data's files: full (it writes every run's display files), then again with
    --skip-completed-run-display-json (the display files are there: tables only). Returns
    ((wall s, peak GB, CPU s) full, (wall s, peak GB, CPU s) tables only)."""
    out = Path(tempfile.mkdtemp(prefix="medhelm-bench-helm-"))
    try:
        src = data_dir / "runs" / suite
        for run in src.iterdir():
            if run.is_dir() and run.name not in ("groups", "eval_cache"):
                (out / "runs" / suite / run.name).mkdir(parents=True)
                for f in run.iterdir():
                    if f.is_file():
                        (out / "runs" / suite / run.name / f.name).symlink_to(f)
        cmd = [str(helm_venv / "bin" / "helm-summarize"), "--suite", suite, "-o", str(out),
               "--schema-path", str(SHARED / "helm" / "schema_medhelm.yaml")]
        return _timed(cmd), _timed(cmd + ["--skip-completed-run-display-json"])
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _timed(cmd: list[str]) -> tuple[float, float, float]:
    with tempfile.TemporaryFile("w+") as log:
        start = time.time()
        proc = subprocess.Popen(cmd, stdout=log, stderr=log, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.time() - start
        if os.waitstatus_to_exitcode(status) != 0:
            log.seek(0)
            sys.exit(f"bench_rebuild: {' '.join(cmd)} failed:\n{log.read()[-3000:]}")
    return wall, usage.ru_maxrss / 1e6, usage.ru_utime + usage.ru_stime


def suite_arguments(doc: str, more=None) -> argparse.Namespace:
    """The command line of the benches on this suite: --scale, --data-dir, --no-completions (and what
    `more(parser)` adds)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="13,1000", help="models,instances (default 13,1000: 182 runs)")
    ap.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(), "medhelm-bench-rebuild"))
    ap.add_argument("--no-completions", action="store_true", help="skip the --with-completions row")
    if more is not None:
        more(ap)
    return ap.parse_args()


def main() -> None:
    a = suite_arguments(__doc__)
    models, instances = (int(x) for x in a.scale.split(","))
    data = Path(a.data_dir)
    suite = prepare(data, models, instances)
    files = [p for p in (data / "runs" / suite).rglob("*.json")]
    size = sum(p.stat().st_size for p in files) / 1e9
    print(f"suite {suite}: {sum(1 for p in (data / 'runs' / suite).iterdir() if (p / 'run_spec.json').exists())} "
          f"runs, {size:.2f} GB of JSON; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    rows = []
    helm_full, helm_tables, measured = HELM_FULL, HELM_TABLES, False
    helm_cpu = {}
    helm_venv = os.environ.get("HELM_VENV")
    if helm_venv:
        print("helm-summarize on the same files (full, then --skip-completed-run-display-json) ...", file=sys.stderr)
        (full_s, full_gb, full_cpu), (tables_s, tables_gb, tables_cpu) = helm_summarize(Path(helm_venv), data, suite)
        helm_full, helm_tables, measured = (full_s, full_s, full_gb), (tables_s, tables_s, tables_gb), True
        helm_cpu = {helm_full: full_cpu, helm_tables: tables_cpu}
    work = Path(tempfile.mkdtemp(prefix="medhelm-bench-out-"))
    try:
        plans = [("tables only", ["--no-per-instance"], helm_tables),
                 ("+ per-instance stats", [], helm_full)]
        if not a.no_completions:
            plans.append(("+ completions", ["--with-completions"], helm_full))
        last = None
        for label, extra, helm in plans:
            out = work / label.replace(" ", "_").replace("+", "p")
            wall, peak, cpu, stdout = run_one(["--source", str(data), "--suite", suite, "-o", str(out), *extra])
            rows.append((label, wall, peak, cpu, helm, stdout.strip().splitlines()[-1]))
            last = out
        again = ["--source", str(data), "--suite", suite, "-o", str(last),
                 "--with-completions" if not a.no_completions else "--no-per-instance"]
        for label, extra in (("re-run (nothing fetched)", []), ("re-run, --rebuild", ["--rebuild"])):
            wall, peak, cpu, stdout = run_one(again + extra)
            rows.append((label, wall, peak, cpu, helm_tables, stdout.strip().splitlines()[-1]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    source = "measured in this run" if measured else "an earlier session's figures (set HELM_VENV to measure)"
    print(f"\nhelm-summarize: {source}")
    cores = os.cpu_count() or 1
    print(f"{'rebuild':<26}{'wall s':>8}{'peak GB':>9}{'CPU s':>7}   {'helm-summarize':<22}{'speed-up':>9}{'memory':>8}"
          f"{'bound':>8}")
    for label, wall, peak, cpu, helm, _ in rows:
        lo, hi, gb = helm
        text = f"{lo:.0f} s, {gb:.2f} GB" if lo == hi else f"{lo}-{hi} s, {gb} GB"
        # the speed-up this row's CPU work allows on this machine's cores (helm-summarize is one thread)
        bound = f"{helm_cpu[helm] / (cpu / cores):.1f}x" if helm in helm_cpu and cpu > 0 else "-"
        print(f"{label:<26}{wall:>8.1f}{peak:>9.2f}{cpu:>7.1f}   {text:<22}{lo / wall:>8.1f}x{peak / gb:>7.0%}{bound:>8}")
    if helm_cpu:
        print(f"(CPU s: user + system of the process; bound: helm-summarize's CPU seconds over this row's spread "
              f"on all {cores} cores, the most this row's work allows here)")
    print("\ncomparison (each row):")
    for label, *_, line in rows:
        print(f"  {label}: {line}")


if __name__ == "__main__":
    main()
