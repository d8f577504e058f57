"""Dagster's own UI process for the tests: a fresh copy of the checkout, `dg dev` on loopback, its
GraphQL API (what the UI's buttons call) and a clean stop."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def fresh_checkout(tmp: Path) -> Path:
    """The tracked files, as a clone has them, with the set-up's .venv beside them."""
    work = tmp / "checkout"
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        src = ROOT / name
        if src.is_file():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, work / name)
    (work / ".venv").symlink_to(ROOT / ".venv")
    return work


def ui_answers(port: int, timeout_s: float) -> bool:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=5) as r:
                if r.status == 200:
                    return True
        except OSError:
            time.sleep(1)
    return False


def stop_group(pgid: int, grace_s: float = 20.0) -> None:
    """Ctrl-C the process group (what `dg dev` waits for; it ignores SIGTERM), wait until it is gone
    (ports freed), then SIGKILL whatever is left."""
    for sig in (signal.SIGINT, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.time() + grace_s
        while time.time() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.5)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DagsterDev:
    """`dg dev` (webserver, daemon, code server) for a checkout, on a free loopback port."""

    def __init__(self, work: Path, env: dict[str, str], log: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        with open(log, "w") as sink:
            self.proc = subprocess.Popen([".venv/bin/dg", "dev", "--port", str(self.port), "--host", "127.0.0.1"],
                                         cwd=work, env=env, start_new_session=True, stdout=sink,
                                         stderr=subprocess.STDOUT)
        if not ui_answers(self.port, 180):
            self.stop()
            raise AssertionError(f"dg dev did not answer on {self.url}: {log.read_text()[-3000:]}")

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as r:
            answer = json.loads(r.read())
        assert "errors" not in answer, answer["errors"]
        return answer["data"]

    def stop(self) -> None:
        stop_group(self.proc.pid)
