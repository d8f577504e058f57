"""A deployment's max_concurrency across processes (medhelm_core.slots): request slots on files for
the processes of one machine; two medhelm-run processes on one DuckDB file never have more requests
in flight to a deployment than its max_concurrency, summed."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from medhelm_core.slots import FileSlots
from tests.mock_server import MockServer
from tests.oracle import SYNTHETIC
from tests.parity import lay_out_inputs

ROOT = Path(__file__).resolve().parents[2]


def test_slots_are_exclusive_between_holders_and_freed_by_a_dead_process(tmp_path):
    here, there, stop = FileSlots(tmp_path), FileSlots(tmp_path), threading.Event()
    first, second = here.acquire("d", 2, stop), here.acquire("d", 2, stop)
    assert {first, second} == {("d", 0), ("d", 1)}
    stop_soon = threading.Event()
    threading.Timer(0.2, stop_soon.set).start()
    assert there.acquire("d", 2, stop_soon) is None            # both taken: it waits, then gives up
    assert there.acquire("other", 2, stop) == ("other", 0)    # another deployment has its own
    here.release(first)
    assert there.acquire("d", 2, stop) == first
    # a process that holds a slot and dies (kill -9) frees it at once
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, threading, time; from medhelm_core.slots import FileSlots\n"
        f"print(FileSlots({str(tmp_path)!r}).acquire('e', 1, threading.Event()), flush=True); time.sleep(60)")],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "('e', 0)"
    stop_soon = threading.Event()
    threading.Timer(0.2, stop_soon.set).start()
    assert here.acquire("e", 1, stop_soon) is None
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert here.acquire("e", 1, stop) == ("e", 0)


def peak_in_flight(log: Path) -> dict[str, int]:
    """The most requests each model had in flight at once, from the mock's request log."""
    events: dict[str, list] = {}
    for line in log.read_text().splitlines():
        r = json.loads(line)
        events.setdefault(r["model"], []).extend([(r["t"], 1), (r["t"] + r["latency_ms"] / 1000.0, -1)])
    peaks = {}
    for model, ev in events.items():
        now = peak = 0
        for _, step in sorted(ev):
            now += step
            peak = max(peak, now)
        peaks[model] = peak
    return peaks


def two_runs_on_one_store(root: Path, env: dict, python: Path) -> None:
    """Two medhelm-run processes at once, 4 threads each, on different suites that call the same two
    deployments; each writes to `root/out_<suite>` and to the store `env` names."""
    (root / "work" / "prod_env" / "medhelm_deployments.yaml").write_text(
        "deployments:\n  mockai/mock-gpt-a:\n    max_concurrency: 2\n  mockai/mock-gpt-b:\n    max_concurrency: 2\n")
    procs = [subprocess.Popen([str(python.parent / "medhelm-run"), "--conf-paths", f"work/conf/{conf}.conf", "--suite", suite,
                               "--max-eval-instances", "20", "--num-threads", "4", "--output-path", f"out_{suite}",
                               "--local-path", "work/prod_env"],
                              cwd=root, env={**env, "DAGSTER_HOME": str(root / f"dh_{suite}")},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for conf, suite in (("configurable", "cfg"), ("private", "priv"))]
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, out[-3000:]


def test_two_processes_on_one_file_keep_each_deployment_within_its_max_concurrency(tmp_path):
    server = MockServer("--latency-ms", "60", "--log-jsonl", str(tmp_path / "requests.jsonl"))
    try:
        lay_out_inputs(SYNTHETIC / "inputs", tmp_path, server.base_url)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MEDHELM_", "DAGSTER_"))}
        env["MEDHELM_STORAGE"] = f"duckdb:{tmp_path / 'shared.duckdb'}"
        start = time.monotonic()
        two_runs_on_one_store(tmp_path, env, Path(sys.executable))
        assert time.monotonic() - start < 600
    finally:
        server.close()
    peaks = peak_in_flight(tmp_path / "requests.jsonl")
    # capped deployments at their max_concurrency; the judge, uncapped, shows the processes overlapped
    assert peaks["mock-gpt-a"] == peaks["mock-gpt-b"] == 2 and peaks["mock-judge"] > 2, peaks
