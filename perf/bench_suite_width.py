"""MedHELM's own conf at its real width against mocks: time to the first call, wall vs the bound, CPU per call.

    .venv/bin/python perf/bench_suite_width.py [--instances 5|20|100] [--conf CONF] [--profile] [--keep DIR]

Setup (issue 40's): HELM's `run_entries_medhelm_public.conf` as printed, minus the benchmarks whose
data `../shared/data/public` lacks (med_dialog, medhelm_med_mcqa): 182 runs over its 13 models and
the default jury (HELM's judges.yaml: gpt-4o, llama-3.3-70b and claude-3-7-sonnet, three of the 13
models' own `stanfordhealthcare/*` deployments, so the judges' calls share those deployments'
limits, as they do at Stanford). The prod_env is examples/prod_env_public_apis (same deployment
names, so each replaces the built-in gateway one) with every `base_url` pointed at a mock of its own
(`mock_openai_server.py --latency-ms 300`), `max_concurrency: 8` each; the data is read from the
mirror (MEDHELM_DATA_MIRROR=../shared/data/public).

Printed:
* time to the first call: from medhelm-run's launch to the first request any mock logged;
* wall time against the endpoints' bound, max over deployments d of (sum of d's logged
  latencies / limit), what an invocation keeping every endpoint busy could reach;
* CPU seconds (user+sys of medhelm-run, getrusage of the child) per call and per run, and the cores
  it held on average;
* calls per second over time (10 s buckets of the mocks' logs);
* peak RSS of medhelm-run;
* with `--rerun`, a rerun with nothing new; with `HELM_VENV` (a crfm-helm 0.5.16 venv), the same
  suite through helm-run, offline as the golden public run (perf/helm_offline.py), with
  `--num-threads` = `--limit`, its wall time and the runs it completed (logs: helm-run.{out,err}).

Measured on the 2-core dev machine, shared with two other workers (load average in brackets; the
figures move by +-20% with it), one run each:

| instances | code | calls | wall (bound) | ratio | first call (CPU by then) | CPU, ms per call | peak RSS |
|---|---|---:|---:|---:|---:|---:|---:|
| 5  | before [3.5] | 1,582 | 149.0 s (11.2 s) | 13.3x | 55.0 s | 135.5 s, 85.7 | 1.89 GB |
| 5  | after  [6.5] | 1,582 |  80.0 s (11.3 s) |  7.1x | 17.8 s (16.4 s) | 76.1 s, 48.1 (main 43.2) | 1.27 GB + 0.37 GB scoring worker |
| 20 | before [5.8] | 6,267 | 193.2 s (44.4 s) | 4.35x | 67.7 s (37.9 s) | 144.6 s, 23.1 | 2.01 GB |
| 20 | after  [6.1] | 6,267 | 112.0 s (44.2 s) | 2.53x | 17.5 s (17.0 s) | 112.3 s, 17.9 (main 15.4) | 1.24 GB + 0.52 GB scoring worker |
| 5  | now    [2.2] | 1,582 |  45.9 s (11.1 s) |  4.13x |  6.8 s (7.2 s) | 53.1 s, 33.6 (main 29.1) | 1.47 GB + 0.72 GB scoring worker |
| 20 | now    [4.5] | 6,267 |  77.8 s (43.9 s) | 1.77x |  7.2 s (7.6 s) | 91.0 s, 14.5 (main 12.4) | 1.52 GB + 0.71 GB scoring worker |
| 100 | now  [14.8] | 31,031 | 334.7 s (219.8 s) | 1.52x | 10.9 s (10.4 s) | 284.5 s, 9.2 (main 7.8) | 1.61 GB + 0.73 GB scoring worker |

| 20 | 9f2236d [2.8] | 6,267 |  86.6 s (44.0 s) | 1.97x |  8.3 s (9.0 s) | 113.1 s, 18.1 (main 15.3) | 1.47 GB + 0.58 GB scoring worker |
| 20 | e73d4a5 [4.1] | 6,267 |  76.4 s (43.9 s) | 1.74x |  7.3 s (8.0 s) |  96.7 s, 15.4 (main 12.9) | 1.49 GB + 0.58 GB scoring worker |
| 100 | 9f2236d [3.7] | 31,031 | 285.1 s (215.5 s) | 1.32x |  9.4 s (10.3 s) | 380.0 s, 12.2 (main 10.4) | 1.57 GB + 0.63 GB scoring worker |
| 100 | e73d4a5 [6.8] | 31,031 | 284.0 s (215.6 s) | 1.32x |  9.2 s (10.6 s) | 340.5 s, 11.0 (main 8.9) | 1.55 GB + 0.63 GB scoring worker |

| 20 | 918cdd7 | 6,267 |  81.8 s (44.0 s) | 1.86x |  9.2 s (9.9 s) | 107.4 s, 17.1 (main 14.3) | 1.46 GB, 2.07 GB with the scoring worker |
| 20 | a0a805a | 6,267 |  80.7 s (44.0 s) | 1.83x |  7.9 s (7.5 s) | 106.1 s, 16.9 (main 14.5) | 0.99 GB, 1.26 GB with the scoring worker |
| 100 | 918cdd7 | 31,031 | 286.6 s (215.5 s) | 1.33x |  7.9 s (8.9 s) | 314.8 s, 10.1 (main 8.2) | 1.62 GB, 2.25 GB with the scoring worker |
| 100 | a0a805a | 31,031 | 293.3 s (215.5 s) | 1.36x |  9.9 s (11.4 s) | 345.3 s, 11.1 (main 9.3) | 1.10 GB, 1.35 GB with the scoring worker |

| 20 | f2d3d12 [16.2] | 6,267 |  64.9 s (44.0 s) | 1.48x |  6.4 s (7.1 s) |  86.2 s, 13.7 (main 12.0) | 0.97 GB, 1.21 GB with the scoring worker |
| 100 | f2d3d12 [5.5] | 31,031 | 251.7 s (216.5 s) | 1.16x |  8.6 s (9.7 s) | 308.3 s, 9.9 (main 8.1) | 1.12 GB, 1.39 GB with the scoring worker |

(f2d3d12: the lane for the runs without a jury and the collector's freeze; with HELM_VENV at 20
instances, helm-run --num-threads 8 took 480.0 s, 10.92x the bound, against 71.6 s for medhelm-run.
The 9f2236d and e73d4a5 rows: the same session, the two trees alternated; a second round at 20
instances gave 2.09x and 1.86x. The 918cdd7 and a0a805a rows, memory: alternated in a later session.)
A rerun with nothing new: 4.8 s (after), 2.6 s (now). "now", 9f2236d, e73d4a5: see docs/performance.md.
"before": the tree before issue 40's first slice (the Dagster run planned every cell of the suite's
rectangle, 1,820 events, and materialized its 182 holes before the first call; each run parsed every
instance of its benchmark).

`--profile`: medhelm-run sampled by py-spy (`pip install py-spy`; on PATH, in the venv, or
`--py-spy PATH`) in two recordings split at the first request a mock sees: (a) before the first
call, the main thread's wall time (idle included: waits on the disk count); (b) the steady state,
in GIL mode (what holds the one core). For each, the functions that appear in the most samples
(cumulative: anywhere on the stack) and the leaf functions (self).
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from helm_offline import prepare  # perf/helm_offline.py: HELM offline, as the golden public run

HERE = Path(__file__).resolve().parents[1]
EXAMPLE_ENV = HERE / "examples" / "prod_env_public_apis"
JUDGES = HERE / "medhelm_core" / "resources" / "settings" / "judges.yaml"
DROPPED = ("med_dialog", "medhelm_med_mcqa")  # no data in ../shared/data/public
BUCKET_S = 10


def filtered_conf(conf: Path, drop: tuple[str, ...]) -> tuple[str, list[str]]:
    """The conf's text without the entries of dropped benchmarks, and the descriptions kept."""
    kept, descriptions = [], []
    for line in conf.read_text().splitlines():
        m = re.search(r'description:\s*"([^"]+)"', line)
        if m and m.group(1).split(":", 1)[0] in drop:
            continue
        if m:
            descriptions.append(m.group(1))
        kept.append(line)
    return "\n".join(kept) + "\n", descriptions


def deployments_of(descriptions: list[str]) -> list[str]:
    names = []
    for d in descriptions:
        m = re.search(r"model_deployment=([^,]+)", d)
        if m and m.group(1) not in names:
            names.append(m.group(1))
    for judge in yaml.safe_load(JUDGES.read_text())["judges"]:
        if judge["model_deployment"] not in names:
            names.append(judge["model_deployment"])
    return names


def start_mock(shared: Path, root: Path, tag: str, latency_ms: int):
    port_file = root / f"{tag}.port"
    proc = subprocess.Popen([sys.executable, str(shared / "tools" / "mock_openai_server.py"), "--port", "0",
                             "--port-file", str(port_file), "--latency-ms", str(latency_ms),
                             "--max-seconds", "7200", "--log-jsonl", str(root / f"{tag}.jsonl")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not (port_file.exists() and port_file.read_text().strip()):
        time.sleep(0.05)
    return proc, int(port_file.read_text().strip())


def lay_out(shared: Path, root: Path, conf: Path, drop: tuple[str, ...], latency_ms: int, limit: int,
            mocks: list) -> tuple[list[str], dict[str, str], int]:
    """work/conf/suite.conf, work/prod_env (a mock per deployment); returns (deployments, their
    log tags, number of runs)."""
    work = root / "work"
    (work / "conf").mkdir(parents=True)
    text, descriptions = filtered_conf(conf, drop)
    (work / "conf" / "suite.conf").write_text(text)
    names = deployments_of(descriptions)
    tags = {n: n.replace("/", "__") for n in names}
    example = {d["name"]: d for d in yaml.safe_load((EXAMPLE_ENV / "model_deployments.yaml").read_text())
               ["model_deployments"]}
    deps = []
    for n in names:
        proc, port = start_mock(shared, root, tags[n], latency_ms)
        mocks.append(proc)
        dep = json.loads(json.dumps(example[n]))
        dep["client_spec"]["args"]["base_url"] = f"http://127.0.0.1:{port}/v1"
        deps.append(dep)
    env = work / "prod_env"
    env.mkdir()
    (env / "model_deployments.yaml").write_text(yaml.safe_dump({"model_deployments": deps}, sort_keys=False))
    (env / "credentials.conf").write_text(
        "deployments {\n" + "".join(f'  "{n}": "mock-key"\n' for n in names) + "}\n")
    (env / "medhelm_deployments.yaml").write_text(
        "deployments:\n" + "".join(f"  {n}:\n    max_concurrency: {limit}\n" for n in names))
    return names, tags, len(descriptions)


def helm_prod_env(root: Path) -> None:
    """work/helm_prod_env: work/prod_env's deployments, with the mock key as `stanfordhealthcareApiKey`.
    HELM reads credentials.conf with pyhocon, which keeps the quotes of a quoted key holding a dot
    (`"stanfordhealthcare/llama-3.3-70b-instruct"`), so its per-deployment lookup misses every
    deployment with a dot in its name (llama-3.3, the gemini ones); HELM looks up the host
    organization's key first."""
    helm_env = root / "work" / "helm_prod_env"
    helm_env.mkdir(exist_ok=True)
    shutil.copyfile(root / "work" / "prod_env" / "model_deployments.yaml", helm_env / "model_deployments.yaml")
    (helm_env / "credentials.conf").write_text('stanfordhealthcareApiKey: "mock-key"\n')


def helm_outcome(root: Path, output_path: str, suite: str) -> tuple[int, str | None, int]:
    """(runs HELM completed: run directories with a stats.json; its first failed run with the last
    line of its traceback; the judge annotations it logged as failed) from helm-run.out."""
    suite_dir = root / output_path / "runs" / suite
    done = sum(1 for d in suite_dir.iterdir() if d.is_dir() and (d / "stats.json").exists()) \
        if suite_dir.is_dir() else 0
    lines = (root / "helm-run.out").read_text(errors="replace").splitlines()
    error = None
    for i, line in enumerate(lines):
        if "Error when running" in line:
            block = []
            for after in lines[i + 1:]:
                if re.match(r"\d{4}-\d\d-\d\d \d\d:", after):  # HELM's next log line ends the traceback
                    break
                block.append(after)
            last = next((b.strip() for b in reversed(block) if b.strip()), "")
            error = f"{line.split('Error when running', 1)[1].strip().rstrip(':')}: {last}"
            break
    if error is None:
        error = next((ln.strip() for ln in reversed((root / "helm-run.err").read_text(errors="replace").splitlines())
                      if ln.strip()), None)
    judge_errors = sum("ERROR annotating with" in ln for ln in lines)
    return done, error, judge_errors


def find_py_spy(given: str | None) -> str:
    for cand in [given, shutil.which("py-spy"), str(Path(sys.executable).parent / "py-spy")]:
        if cand and Path(cand).exists():
            return cand
    sys.exit("--profile needs py-spy: pip install py-spy (or give --py-spy PATH)")


def logged_calls(root: Path, tags: dict[str, str]) -> int:
    """Requests the mocks have logged so far, all deployments together."""
    total = 0
    for tag in tags.values():
        with (root / f"{tag}.jsonl").open() as f:
            total += sum(1 for _ in f)
    return total


def first_logged(root: Path, tags: dict[str, str]) -> float | None:
    times = []
    for tag in tags.values():
        f = root / f"{tag}.jsonl"
        if f.exists() and f.stat().st_size:
            with f.open() as fh:
                line = fh.readline()
            if line.endswith("\n"):
                times.append(json.loads(line)["t"])
    return min(times) if times else None


def process_cpu(pid: int) -> float | None:
    """user+sys seconds of a live process so far (/proc), None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and its descendants (/proc), in MB."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            total += int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("VmRSS:"))) / 1024
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, StopIteration, ValueError):
            continue
    return total


def spy(py_spy: str, pid: int, out: Path, mode: str) -> subprocess.Popen:
    return subprocess.Popen([py_spy, "record", "--pid", str(pid), "--rate", "100", mode, "--format", "raw",
                             "--output", str(out), "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def top_functions(raw: Path, n: int = 25, main_thread: bool = False) -> str:
    """From py-spy's collapsed stacks: functions by samples anywhere on the stack, and by self
    (`main_thread`: only the stacks of the command's main thread, idle or not: its wall time)."""
    if not raw.exists():
        return "  (no samples)"
    cum, own, total = collections.Counter(), collections.Counter(), 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        count = int(count)
        if main_thread and not stack.startswith("<module> (medhelm-run"):
            continue
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
        total += count
        for f in set(frames):
            cum[f] += count
        own[frames[-1]] += count
    if not total:
        return "  (no samples)"
    what = "of the main thread's wall time" if main_thread else "holding the GIL"
    lines = [f"  {total} samples ({total / 100:.1f} s {what} at 100 Hz); cumulative:"]
    lines += [f"    {100 * c / total:5.1f}%  {f}" for f, c in cum.most_common(n)]
    lines.append("  self:")
    lines += [f"    {100 * c / total:5.1f}%  {f}" for f, c in own.most_common(n // 2)]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shared", default=str(HERE.parent / "shared"))
    p.add_argument("--conf", default=None, help="a HELM conf (default: shared/helm/run_entries_medhelm_public.conf)")
    p.add_argument("--drop", default=",".join(DROPPED), help="benchmarks left out (comma-separated)")
    p.add_argument("--instances", type=int, default=5)
    p.add_argument("--latency-ms", type=int, default=300)
    p.add_argument("--limit", type=int, default=8, help="max_concurrency of each deployment")
    p.add_argument("--num-threads", type=int, default=8)
    p.add_argument("--rerun", action="store_true", help="also time a rerun with nothing new")
    p.add_argument("--profile", action="store_true", help="sample medhelm-run with py-spy (see above)")
    p.add_argument("--py-spy", default=None)
    p.add_argument("--steady", choices=("gil", "idle"), default="gil",
                   help="profile (b): what holds the GIL (gil), or every thread's wall time, waits included (idle)")
    p.add_argument("--keep", metavar="DIR", help="work in DIR (kept) instead of a temporary folder")
    args = p.parse_args()
    shared = Path(args.shared).resolve()
    conf = Path(args.conf or shared / "helm" / "run_entries_medhelm_public.conf").resolve()
    drop = tuple(d for d in args.drop.split(",") if d)
    py_spy = find_py_spy(args.py_spy) if args.profile else None
    bindir = Path(sys.executable).parent
    with (contextlib.nullcontext(args.keep) if args.keep else tempfile.TemporaryDirectory()) as tmp:
        root = Path(tmp).resolve()
        root.mkdir(parents=True, exist_ok=True)
        mocks: list = []
        try:
            names, tags, n_runs = lay_out(shared, root, conf, drop, args.latency_ms, args.limit, mocks)
            (root / "dh").mkdir()
            env = {**os.environ, "DAGSTER_HOME": str(root / "dh"), "MEDHELM_DATA_MIRROR": str(shared / "data" / "public"),
                   "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "HF_DATASETS_OFFLINE": "1",
                   "HF_HUB_OFFLINE": "1"}
            run = [str(bindir / "medhelm-run"), "--conf-paths", "work/conf/suite.conf", "--suite", "width",
                   "--max-eval-instances", str(args.instances), "--num-threads", str(args.num_threads),
                   "--output-path", "out", "--local-path", "work/prod_env", "--no-progress"]
            launched = time.time()
            proc = subprocess.Popen(run, cwd=root, env=env, stdout=subprocess.DEVNULL,
                                    stderr=open(root / "medhelm-run.err", "w"))
            first_seen, waited = None, None

            def reap(block: bool):  # medhelm-run's own rusage (py-spy's CPU is not counted)
                pid, status, usage = os.wait4(proc.pid, 0 if block else os.WNOHANG)
                return (os.waitstatus_to_exitcode(status), usage) if pid else None

            recorder = spy(py_spy, proc.pid, root / "before_first_call.txt", "--idle") if py_spy else None
            cpu_first, tree_peak = 0.0, 0.0
            while waited is None and first_seen is None:
                time.sleep(0.05)
                cpu_first = process_cpu(proc.pid) or cpu_first
                tree_peak = max(tree_peak, tree_rss_mb(proc.pid))
                first_seen = first_logged(root, tags)
                waited = reap(False)
            if recorder is not None:
                recorder.send_signal(signal.SIGINT)
                recorder.wait()
                recorder = spy(py_spy, proc.pid, root / "steady_state.txt", f"--{args.steady}") if waited is None else None
            cpu_main = cpu_first
            while waited is None:  # medhelm-run's own threads, apart from the processes it starts
                cpu_main = process_cpu(proc.pid) or cpu_main
                tree_peak = max(tree_peak, tree_rss_mb(proc.pid))
                waited = reap(False)
                if waited is None:
                    time.sleep(0.2)
            code, usage = waited
            ended = time.time()
            proc.returncode = code
            if recorder is not None:
                recorder.wait()
            if code:
                sys.exit(f"medhelm-run: exit {code}\n{(root / 'medhelm-run.err').read_text()[-4000:]}")
            cpu = usage.ru_utime + usage.ru_stime
            peak_rss_mb = usage.ru_maxrss / 1024
            logged = {n: [json.loads(line) for line in (root / f"{tags[n]}.jsonl").open()] for n in names}
            again = None
            if args.rerun:
                start = time.perf_counter()
                subprocess.run(run, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
                again = time.perf_counter() - start
                rerun_calls = logged_calls(root, tags) - sum(len(v) for v in logged.values())
            helm_s = None
            helm_run = Path(os.environ.get("HELM_VENV", "/nonexistent")) / "bin" / "helm-run"
            if helm_run.exists():  # the same suite through HELM 0.5.16, side by side in this run
                helm_env = {**os.environ, **prepare(shared, root, "helm_output", "width-helm")}
                helm_prod_env(root)
                calls_before = logged_calls(root, tags)
                start = time.perf_counter()
                # --num-threads = the deployments' limit: HELM runs one run at a time, so at most that many
                # requests are in flight, to that run's deployment (and the judges'), never over the limit
                # that medhelm-run keeps per deployment.
                with open(root / "helm-run.out", "w") as out, open(root / "helm-run.err", "w") as err:
                    helm_code = subprocess.run(
                        [str(helm_run), "--conf-paths", "work/conf/suite.conf", "--suite", "width-helm",
                         "--max-eval-instances", str(args.instances), "--num-threads", str(args.limit),
                         "--output-path", "helm_output", "--local-path", "work/helm_prod_env"],
                        cwd=root, env=helm_env, stdout=out, stderr=err).returncode
                helm_s = time.perf_counter() - start
                helm_calls = logged_calls(root, tags) - calls_before
                helm_done, helm_error, helm_judge_errors = helm_outcome(root, "helm_output", "width-helm")
        finally:
            for m in mocks:
                m.terminate()
        records = [r for rs in logged.values() for r in rs]
        calls = len(records)
        busy = {n: sum(r["latency_ms"] for r in rs) / 1000.0 / args.limit for n, rs in logged.items()}
        bound = max(busy.values())
        busiest = max(busy, key=busy.get)
        first_call = min(r["t"] for r in records)
        last_answer = max(r["t"] + r["latency_ms"] / 1000.0 for r in records)
        wall = ended - launched
        print(f"{n_runs} runs x {args.instances} instances ({conf.name}, minus {', '.join(drop) or 'nothing'}), "
              f"{len(names)} deployments (mocks at {args.latency_ms} ms, max_concurrency {args.limit} each): "
              f"{calls} calls   [load: {os.getloadavg()[0]:.2f}]")
        print(f"endpoints' bound (busiest, {busiest}: {len(logged[busiest])} calls): {bound:7.1f} s")
        print(f"medhelm-run wall:                       {wall:7.1f} s   ratio to the bound {wall / bound:5.2f}")
        print(f"  launch to first call {first_call - launched:5.1f} s ({cpu_first:.1f} s CPU), calls {last_answer - first_call:5.1f} s,"
              f" last answer to exit {ended - last_answer:5.1f} s")
        print(f"  CPU (user+sys) {cpu:6.1f} s = {cpu / wall:.2f} cores;  {1000 * cpu / calls:5.1f} ms per call,"
              f" {cpu / n_runs:5.2f} s per run;  of which the main process {cpu_main:.1f} s"
              f" ({1000 * cpu_main / calls:.1f} ms per call), its worker processes {cpu - cpu_main:.1f} s")
        print(f"  peak RSS {peak_rss_mb:.0f} MB (largest process); {tree_peak:.0f} MB with its worker processes"
              f" (sampled every 0.2 s)")
        buckets = collections.Counter(int((r["t"] - launched) // BUCKET_S) for r in records)
        print(f"  calls/s per {BUCKET_S} s since launch: " + " ".join(
            f"{buckets.get(b, 0) / BUCKET_S:.0f}" for b in range(int(wall // BUCKET_S) + 1)))
        if again is not None:
            print(f"rerun with nothing new: {again:5.1f} s ({rerun_calls} calls)")
        if helm_s is not None:
            print(f"helm-run --num-threads {args.limit}, same suite: {helm_s:7.1f} s   "
                  f"ratio to the bound {helm_s / bound:5.2f} ({helm_done}/{n_runs} runs completed, {helm_calls} calls)")
            logs = f"{root}/helm-run.{{out,err}}" if args.keep else "--keep DIR keeps helm-run.{out,err}"
            if helm_done < n_runs or helm_code:
                print(f"  helm-run: exit {helm_code}, {n_runs - helm_done} runs not completed; first error: "
                      f"{helm_error or '(none logged)'}  [{logs}]")
            if helm_judge_errors:
                print(f"  helm-run: {helm_judge_errors} failed judge annotations logged [{logs}]")
        if py_spy:
            print(f"\nprofile (a), launch to the first call ({(first_seen or ended) - launched:.1f} s):")
            print(top_functions(root / "before_first_call.txt", main_thread=True))
            print(f"\nprofile (b), first call to exit ({'GIL' if args.steady == 'gil' else 'all threads, waits included'}):")
            print(top_functions(root / "steady_state.txt"))


if __name__ == "__main__":
    main()
