"""Fixtures of the batch tests: HELM requests (the golden suite's and a few edge cases), a store, the
mock batch server in front of the repo's online mock."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from medhelm_core.store import COMPLETION_COLUMNS, Store, insert_answers, request_key
from tests.mock_openai_batch import MockBatchServer
from tests.oracle import SYNTHETIC, load, run_dirs

ROOT = Path(__file__).resolve().parents[2]
DEPLOYMENT = "openai/gpt-4o-mini-2024-07-18"
KEY = "sk-batch-SECRET-1234"


def base_request(prompt: str, **kw) -> dict:
    return {"model": "openai/gpt-4o-mini-2024-07-18", "embedding": False, "prompt": prompt, "temperature": 0.0,
            "num_completions": 1, "top_k_per_token": 1, "max_tokens": 40, "stop_sequences": [], "echo_prompt": False,
            "top_p": 1, "presence_penalty": 0, "frequency_penalty": 0, **kw}


def golden_requests(n: int = 24) -> list[dict]:
    """The first requests of each golden run (HELM 0.5.16's own), plus edge cases of the body mapping."""
    out: list[dict] = []
    for run in run_dirs(SYNTHETIC, "oracle-private"):
        out += [st["request"] for st in load(run / "scenario_state.json")["request_states"][:3]]
        if len(out) >= n:
            break
    out = out[:n]
    out += [
        base_request("Réponds: « oui » ou « non »?\u2028 yes or no", stop_sequences=["\n"]),
        base_request("Think, then answer A. first\nB. second\nC. third", model="openai/o3-mini-2025-01-31"),
        base_request("", messages=[{"role": "system", "content": "Be brief."},
                                   {"role": "user", "content": "Say something about hearts."}]),
        base_request("List three words", num_completions=2, max_tokens=5),
        base_request("Echo me please", echo_prompt=True),
    ]
    return out


def keyed(requests: list[dict], deployment: str = DEPLOYMENT) -> dict[str, dict]:
    return {request_key(deployment, r): r for r in requests}


def without_clock(result: dict | None) -> dict | None:
    """A RequestResult without its wall-clock fields (no two calls share them, online or batch)."""
    if result is None:
        return None
    return {k: v for k, v in result.items() if k not in ("request_time", "request_datetime")}


def store_answers(deployment: str):
    """`write` for lifecycle.store_collected: the answered outcomes as `completions` rows."""
    def write(conn, results):
        rows = []
        for key, o in results.outcomes.items():
            if o.state != "answered":
                continue
            a = o.attempt
            row = {"request_key": key, "model_deployment": deployment, "model": deployment, "request": None,
                   "result": json.dumps(a.result), "success": bool(a.result.get("success")), "attempts": 1,
                   "prompt_tokens": a.prompt_tokens, "completion_tokens": a.completion_tokens,
                   "usage": json.dumps(a.usage), "cost_usd": None, "outcome": a.kind, "untruncated": None,
                   "model_logprobs": None}
            rows.append(tuple(row[c] for c in COMPLETION_COLUMNS))
        insert_answers(conn, rows)
    return write


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "medhelm.duckdb")


@pytest.fixture
def batch_server(mock_server):
    servers = []

    def make(**kw) -> MockBatchServer:
        kw.setdefault("upstream", mock_server.base_url)
        server = MockBatchServer(**kw)
        servers.append(server)
        return server

    yield make
    for s in servers:
        s.close()


def batch_polls(server: MockBatchServer) -> int:
    """How many times the batch server was polled for a batch (`GET .../batches/{id}`)."""
    return sum(1 for m, p in list(server.log) if m == "GET" and "/batches/" in p)


# -- a child process killed with SIGKILL ---------------------------------------------------------------
def spawn_python(code: str, *args: str, cwd: Path) -> subprocess.Popen:
    """`python -c code args...` in `cwd` with the repo importable, its stdout and stderr piped."""
    return subprocess.Popen([sys.executable, "-c", code, *args], cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def kill_9_when(child: subprocess.Popen, ready: Callable[[], bool], timeout_s: float, poll_s: float = 0.05) -> None:
    """Wait (the child alive all along, within `timeout_s`) until `ready()`, then kill -9 the child and reap
    it; the child is killed whatever happens."""
    try:
        deadline = time.time() + timeout_s
        while not ready():
            assert child.poll() is None, child.stderr.read().decode()[-3000:]
            assert time.time() < deadline
            time.sleep(poll_s)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
