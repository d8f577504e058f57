"""Completion-engine throughput against a slow endpoint, side by side with HELM's default.

Starts ../shared/tools/mock_openai_server.py on loopback with `--latency-ms 200` (every request
takes 200 ms at the server), then, in one run:

1. `helm-run default`: what helm-run does with its default `--num-threads 4`, a fixed pool of 4
   threads each sending one request at a time (HELM's `parallel_map` over the executor), here
   without HELM's SQLite cache writes (which only slow it down);
2. `medhelm engine @4`: our engine limited to 4 in flight (the engine itself costs nothing);
3. for each --concurrency N: `medhelm engine @N` (`CompletionEngine`, adaptive limiter with
   max_concurrency N, every answer committed to a fresh DuckDB file as it arrives) beside
   `bare SDK threads @N`: N plain threads calling the same client, no limiter, no DuckDB, which
   is the most one Python process gets out of this machine at that concurrency (the openai SDK
   costs ~3-4 ms of CPU per request; on a shared 2-core box with the mock server on it, that,
   not the engine, caps the high rows).

Each row is sized to take about --seconds at its limit.
Little's law: at most `concurrency / latency` requests per second can complete. The goal is
>= 90% of that for the engine. Prints one table and the ratios.

Every row uses the same client, with a fresh HTTP connection per request by default: the stdlib
mock writes headers and body in two writes without TCP_NODELAY, so on a kept-alive connection
Nagle's algorithm meets the client's delayed ACK and adds ~40 ms to every request (measured:
~245 ms instead of 200 on one connection, ~204 ms with fresh ones). `--keepalive` shows that case.

    .venv/bin/python perf/bench_engine.py [--latency-ms 200] [--concurrency 8,16,32] [--seconds 10]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from medhelm_core.clients.openai_compatible import OpenAICompatibleClient  # noqa: E402
from medhelm_core.engine import CompletionEngine, Job  # noqa: E402
from medhelm_core.ratelimit import DeploymentSettings  # noqa: E402
from medhelm_core.store import Store, request_key  # noqa: E402
from tests.oracle import MOCK_SERVER  # noqa: E402


def start_mock(latency_ms: float, workdir: Path) -> tuple[subprocess.Popen, str]:
    port_file = workdir / "port"
    proc = subprocess.Popen([sys.executable, str(MOCK_SERVER), "--port", "0", "--port-file", str(port_file),
                             "--latency-ms", str(latency_ms), "--max-seconds", "1800"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while not (port_file.exists() and port_file.read_text().strip()):
        if time.time() > deadline or proc.poll() is not None:
            raise RuntimeError("mock server did not start")
        time.sleep(0.05)
    return proc, f"http://127.0.0.1:{int(port_file.read_text())}/v1"


def requests_for(tag: str, n: int) -> list[dict]:
    return [{"model": "mockai/bench", "model_deployment": "mockai/bench", "prompt": f"{tag} request {i}: say hello",
             "temperature": 0.0, "top_p": 1, "num_completions": 1, "stop_sequences": [], "max_tokens": 8,
             "presence_penalty": 0, "frequency_penalty": 0, "top_k_per_token": 1, "echo_prompt": False,
             "embedding": False} for i in range(n)]


def make_client(base_url: str, keepalive: bool) -> OpenAICompatibleClient:
    import httpx
    import pandas  # noqa: F401 - a real run has it imported already (the first commit would import it)

    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=100 if keepalive else 0)
    return OpenAICompatibleClient(base_url, "sk-bench", openai_model_name="bench",
                                  http_client=httpx.Client(limits=limits, timeout=60))


def bench_engine(base_url: str, workdir: Path, tag: str, n: int, concurrency: int, keepalive: bool) -> float:
    client = make_client(base_url, keepalive)
    settings = DeploymentSettings(max_concurrency=concurrency)
    store = Store(workdir / f"{tag}.duckdb")
    with store.connect():
        pass
    engine = CompletionEngine(store, lambda d: client, settings_for=lambda d: settings)
    jobs = [Job(request_key("mockai/bench", r), "mockai/bench", r) for r in requests_for(tag, n)]
    start = time.perf_counter()
    results, report = engine.run(jobs)
    elapsed = time.perf_counter() - start
    assert report.new == n and report.failed == 0 and len(results) == n, report
    with store.connect() as conn:
        assert conn.execute("SELECT count(*) FROM completions").fetchone()[0] == n
    return elapsed


def bench_helm_threads(base_url: str, tag: str, n: int, threads: int, keepalive: bool) -> float:
    client = make_client(base_url, keepalive)
    reqs = requests_for(tag, n)
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        out = list(pool.map(client.complete, reqs))
    elapsed = time.perf_counter() - start
    assert len(out) == n
    return elapsed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--latency-ms", type=float, default=200.0)
    p.add_argument("--concurrency", default="8,16,32", help="comma-separated in-flight limits to measure")
    p.add_argument("--seconds", type=float, default=10.0,
                   help="size each row to take about this long at the Little's-law limit")
    p.add_argument("--helm-threads", type=int, default=4)
    p.add_argument("--keepalive", action="store_true",
                   help="reuse HTTP connections (the stdlib mock then adds ~40 ms per request: it writes headers "
                        "and body separately without TCP_NODELAY, and Nagle meets delayed ACK)")
    args = p.parse_args(argv)
    latency = args.latency_ms / 1000.0
    levels = [int(c) for c in args.concurrency.split(",")]

    def size(conc: int) -> int:
        return max(conc * 4, int(round(args.seconds * conc / latency / conc)) * conc)

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        proc, base_url = start_mock(args.latency_ms, workdir)
        try:
            ka = args.keepalive
            bench_helm_threads(base_url, "warmup", 8, 4, ka)  # imports, first connections
            h = args.helm_threads
            t = bench_helm_threads(base_url, "helm", size(h), h, ka)
            rows.append((f"helm-run default ({h} threads)", h, size(h), t))
            t = bench_engine(base_url, workdir, f"engine{h}", size(h), h, ka)
            rows.append((f"medhelm engine @{h}", h, size(h), t))
            for conc in levels:
                t = bench_engine(base_url, workdir, f"engine{conc}x", size(conc), conc, ka)
                rows.append((f"medhelm engine @{conc}", conc, size(conc), t))
                t = bench_helm_threads(base_url, f"bare{conc}", size(conc), conc, ka)
                rows.append((f"bare SDK threads @{conc} (no DB)", conc, size(conc), t))
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    print(f"endpoint latency {args.latency_ms:.0f} ms (mock_openai_server --latency-ms {args.latency_ms:g}); "
          f"Little's-law limit = in flight / latency; HTTP connections "
          f"{'kept alive' if args.keepalive else 'fresh per request (see --keepalive)'}")
    print(f"{'':36} {'in flight':>9} {'requests':>8} {'seconds':>8} {'req/s':>8} {'limit':>8} {'% limit':>8}")
    rate = {}
    for name, conc, n, t in rows:
        rate[name] = n / t
        print(f"{name:36} {conc:>9} {n:>8} {t:>8.2f} {n / t:>8.1f} {conc / latency:>8.1f} "
              f"{100 * n / t / (conc / latency):>7.1f}%")
    helm = rate[rows[0][0]]
    print(f"engine @{args.helm_threads} vs helm-run default: {rate[rows[1][0]] / helm:.2f}x")
    for conc in levels:
        ours = rate[f"medhelm engine @{conc}"]
        print(f"engine @{conc}: {100 * ours / (conc / latency):.1f}% of Little's-law limit (goal >= 90%), "
              f"{ours / rate[f'bare SDK threads @{conc} (no DB)']:.2f}x bare SDK threads, "
              f"{ours / helm:.2f}x helm-run default")
    return 0


if __name__ == "__main__":
    sys.exit(main())
