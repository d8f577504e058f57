"""A whole suite against many endpoints: wall time of medhelm-run beside the physical lower bound.

    .venv/bin/python perf/bench_suite.py [--shared ../shared] [--instances 50] [--latency-ms 500]

Setup (issue 12's): 8 model deployments and 3 judge deployments, each its own mock server
(`mock_openai_server.py --latency-ms 500 --jitter-ms 200`), each `max_concurrency: 4`; 24 runs = 3
scenarios of the synthetic inputs (shc_ptbm_med, clear, and mental_health with a 3-judge jury) × 8
models, 50 instances each.

Reported: the lower bound, max over deployments d of (requests_d × mean latency_d / limit_d, the
latencies the mock logged), which
is what an invocation keeping every endpoint busy could reach; medhelm-run's wall time and its
ratio to the bound (process start-up shown apart); the peak in flight per deployment (never above
its limit); a rerun with nothing new; with `HELM_VENV` set, `helm-run --num-threads 4` on the same
suite in the same run.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

MODELS = [f"bench-m{i}" for i in range(8)]
JUDGES = [f"bench-j{i}" for i in range(3)]
LIMIT = 4


def deployment(name: str, port: int) -> str:
    return (f"  - name: mockai/{name}\n    model_name: mockai/{name}\n    tokenizer_name: simple/tokenizer1\n"
            f"    max_sequence_length: 128000\n    client_spec:\n"
            f"      class_name: \"helm.clients.openai_client.OpenAIClient\"\n"
            f"      args:\n        base_url: \"http://127.0.0.1:{port}/v1\"\n        openai_model_name: \"{name}\"\n")


def metadata(name: str) -> str:
    return (f"  - name: mockai/{name}\n    display_name: Mock {name}\n    description: mock\n"
            f"    creator_organization_name: MockAI\n    access: open\n    release_date: 2025-01-01\n"
            f"    tags: [TEXT_MODEL_TAG, FULL_FUNCTIONALITY_TEXT_MODEL_TAG, INSTRUCTION_FOLLOWING_MODEL_TAG]\n")


def start_mock(shared: Path, root: Path, name: str, latency_ms: int, jitter_ms: int):
    port_file = root / f"{name}.port"
    proc = subprocess.Popen([sys.executable, str(shared / "tools" / "mock_openai_server.py"), "--port", "0",
                             "--port-file", str(port_file), "--latency-ms", str(latency_ms),
                             "--jitter-ms", str(jitter_ms), "--max-seconds", "3600",
                             "--log-jsonl", str(root / f"{name}.jsonl")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not (port_file.exists() and port_file.read_text().strip()):
        time.sleep(0.05)
    return proc, int(port_file.read_text().strip())


def stats(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as r:
        return json.loads(r.read())


def reset(port: int) -> None:
    urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/stats/reset", data=b"", method="POST"),
                           timeout=10).read()


def peak_in_flight(records: list[dict]) -> int:
    """The most requests a mock was answering at once, from its log: each spans its latency from the
    moment it arrived (`t`). (The mock's own `max_in_flight` also counts a handler thread that has
    sent its answer but not yet returned, so it can read one above the client's limit.)"""
    events = sorted([(r["t"], 1) for r in records] + [(r["t"] + r["latency_ms"] / 1000.0, -1) for r in records])
    peak = now = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def lay_out_suite(shared: Path, root: Path, latency_ms: int, jitter_ms: int, mocks: list, ports: dict) -> Path:
    """The synthetic inputs copied to `root/work`, one mock server per deployment (appended to `mocks`,
    their ports in `ports`), prod_env pointing at them, and `work/conf/bench.conf`: the suite above."""
    work = root / "work"
    shutil.copytree(shared / "oracle" / "synthetic" / "inputs", work)
    for f in work.rglob("*"):
        f.chmod(f.stat().st_mode | stat.S_IWUSR)
    for name in MODELS + JUDGES:
        proc, ports[name] = start_mock(shared, root, name, latency_ms, jitter_ms)
        mocks.append(proc)
    env_dir = work / "prod_env"
    (env_dir / "model_deployments.yaml").write_text(
        "model_deployments:\n" + "".join(deployment(n, ports[n]) for n in MODELS + JUDGES))
    (env_dir / "model_metadata.yaml").write_text("models:\n" + "".join(metadata(n) for n in MODELS + JUDGES))
    (env_dir / "medhelm_deployments.yaml").write_text(
        "deployments:\n" + "".join(f"  mockai/{n}:\n    max_concurrency: {LIMIT}\n" for n in MODELS + JUDGES))
    (work / "private" / "bench_jury.yaml").write_text(
        "judges:\n" + "".join(f"  - name: \"{n}\"\n    model: \"mockai/{n}\"\n    model_deployment: \"mockai/{n}\"\n"
                              for n in JUDGES))
    entries = []
    for m in MODELS:
        model = f"model=mockai/{m},model_deployment=mockai/{m}"
        entries += [f"shc_ptbm_med:data_path=work/private/shc_ptbm_med.csv,{model}",
                    f"clear:condition=alcohol_dependence,data_path=work/private/clear/,{model}",
                    f"mental_health:data_path=work/private/mental_health.csv,"
                    f"jury_config_path=work/private/bench_jury.yaml,{model}"]
    (work / "conf" / "bench.conf").write_text(
        "entries: [\n" + ",\n".join(f'  {{description: "{e}", priority: 1}}' for e in entries) + "\n]\n")
    return work


def main() -> None:
    here = Path(__file__).resolve().parents[1]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shared", default=str(here.parent / "shared"))
    p.add_argument("--instances", type=int, default=50)
    p.add_argument("--latency-ms", type=int, default=500)
    p.add_argument("--jitter-ms", type=int, default=200)
    p.add_argument("--keep", metavar="DIR", help="work in DIR (kept: the output, the mocks' request logs) instead of "
                                                  "a temporary folder")
    args = p.parse_args()
    shared = Path(args.shared).resolve()
    bindir = Path(sys.executable).parent
    with (contextlib.nullcontext(args.keep) if args.keep else tempfile.TemporaryDirectory()) as tmp:
        root = Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        mocks, ports = [], {}
        try:
            lay_out_suite(shared, root, args.latency_ms, args.jitter_ms, mocks, ports)
            env = {**os.environ, "DAGSTER_HOME": str(root / "dh"), "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
            (root / "dh").mkdir()
            run = [str(bindir / "medhelm-run"), "--conf-paths", "work/conf/bench.conf", "--suite", "bench",
                   "--max-eval-instances", str(args.instances), "--num-threads", str(LIMIT), "--output-path", "out",
                   "--local-path", "work/prod_env", "--no-progress"]

            def timed(cmd: list[str]) -> float:
                start = time.perf_counter()
                done = subprocess.run(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                if done.returncode:
                    sys.exit(f"{' '.join(cmd)}: exit {done.returncode}\n{done.stderr[-4000:]}")
                return time.perf_counter() - start

            start_up = timed([str(bindir / "python"), "-c", "import medhelm_cli, medhelm_dagster.definitions"])
            launched = time.time()
            first = timed(run)
            ended = time.time()
            peak_rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the largest child so far
            per_dep = {n: stats(ports[n]) for n in MODELS + JUDGES}
            # Each deployment's busy time: the latencies it served (jitter is uniform in [0, jitter)).
            logged = {n: [json.loads(line) for line in (root / f"{n}.jsonl").open()] for n in MODELS + JUDGES}
            latency_s = {n: sum(r["latency_ms"] for r in rs) / 1000.0 for n, rs in logged.items()}
            # The mock logs when each request arrived (`t`) and how long it took to answer.
            first_call = min(r["t"] for rs in logged.values() for r in rs)
            last_answer = max(r["t"] + r["latency_ms"] / 1000.0 for rs in logged.values() for r in rs)
            for n in MODELS + JUDGES:
                reset(ports[n])
            again = timed(run)
            rerun_calls = sum(stats(ports[n])["total_requests"] for n in MODELS + JUDGES)
            helm_s = None
            helm_run = Path(os.environ.get("HELM_VENV", "/nonexistent")) / "bin" / "helm-run"
            if helm_run.exists():  # the same suite through HELM 0.5.16, side by side in this run
                # Offline, HELM's summarization metrics need their QAFactEval cache seeded (as the golden
                # runs had it) and spaCy's en_core_web_sm installed in HELM_VENV (a spacy.blank("en") stub).
                cache = root / "helm_output" / "runs" / "bench-helm" / "eval_cache"
                cache.mkdir(parents=True)
                shutil.copyfile(shared / "oracle" / "synthetic" / "benchmark_output" / "runs" / "oracle-private" /
                                "eval_cache" / "qafacteval.pk", cache / "qafacteval.pk")
                helm_s = timed([str(helm_run), "--conf-paths", "work/conf/bench.conf", "--suite", "bench-helm",
                                "--max-eval-instances", str(args.instances), "--num-threads", str(LIMIT),
                                "--output-path", "helm_output", "--local-path", "work/prod_env"])
        finally:
            for proc in mocks:
                proc.terminate()
    work_s = {n: latency_s[n] / LIMIT for n in per_dep}  # requests_d x mean latency_d / limit_d
    bound = max(work_s.values())
    busiest = max(work_s, key=work_s.get)
    calls = sum(s["total_requests"] for s in per_dep.values())
    print(f"{len(MODELS) * 3} runs x {args.instances} instances, {len(MODELS)} model + {len(JUDGES)} judge deployments,"
          f" limit {LIMIT} each, mock latency {args.latency_ms} ms + [0, {args.jitter_ms}) ms: {calls} calls")
    mean_ms = 1000 * latency_s[busiest] / per_dep[busiest]["total_requests"]
    print(f"lower bound (busiest deployment, {busiest}: {per_dep[busiest]['total_requests']} calls x {mean_ms:.0f} ms"
          f" / {LIMIT}): {bound:7.1f} s")
    print(f"medhelm-run, first run:                       {first:7.1f} s   ratio to the bound {first / bound:5.2f}"
          f"  (minus start-up {start_up:.1f} s: {(first - start_up) / bound:5.2f})")
    print(f"  of which: launch to first request {first_call - launched:5.1f} s, calls {last_answer - first_call:5.1f} s,"
          f" last answer to exit {ended - last_answer:5.1f} s")
    print(f"  peak memory of medhelm-run: {peak_rss_mb:.0f} MB")
    print(f"medhelm-run, rerun with nothing new:          {again:7.1f} s   ({rerun_calls} calls)")
    if helm_s is None:
        print("helm-run: skipped (set HELM_VENV to a crfm-helm 0.5.16 venv to run it side by side)")
    else:
        print(f"helm-run --num-threads {LIMIT}, same suite:       {helm_s:7.1f} s   ratio to the bound {helm_s / bound:5.2f}"
              f"  ({helm_s / first:.2f}x medhelm-run's time)")
    print("peak in flight per deployment (limit {}): ".format(LIMIT)
          + ", ".join(f"{n} {peak_in_flight(logged[n])}" for n in per_dep))


if __name__ == "__main__":
    main()
