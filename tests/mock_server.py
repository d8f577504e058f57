"""Start ../shared/tools/mock_openai_server.py (a real HTTP server on loopback) for a test."""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from tests.oracle import MOCK_SERVER


class MockServer:
    def __init__(self, *extra_args: str):
        self._dir = tempfile.TemporaryDirectory()
        port_file = Path(self._dir.name) / "port"
        self.proc = subprocess.Popen([sys.executable, str(MOCK_SERVER), "--port", "0", "--port-file", str(port_file),
                                      "--max-seconds", "3000", *extra_args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 20
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError("mock server did not start")
            time.sleep(0.05)
        self.port = int(port_file.read_text())
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def stats(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=10) as r:
            return json.loads(r.read())

    def reset(self) -> None:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/stats/reset", data=b"{}", method="POST")
        urllib.request.urlopen(req, timeout=10).read()

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._dir.cleanup()
