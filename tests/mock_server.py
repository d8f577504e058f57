"""Start ../shared/tools/mock_openai_server.py (a real HTTP server on loopback) for a test."""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from http.server import ThreadingHTTPServer
from pathlib import Path

from tests.oracle import MOCK_SERVER



class QuietHTTPServer(ThreadingHTTPServer):
    """A loopback server for the mocks: a client that went away mid-answer (a submitter killed on
    purpose) is no error to print, since it would land in whichever test's captured stderr runs next."""

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)

class MockServer:
    def __init__(self, *extra_args: str, script: Path = MOCK_SERVER):
        self._dir = tempfile.TemporaryDirectory()
        port_file = Path(self._dir.name) / "port"
        self.proc = subprocess.Popen([sys.executable, str(script), "--port", "0", "--port-file", str(port_file),
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


class ScriptedServer:
    """A loopback OpenAI-compatible endpoint whose every answer a test scripts:
    `behave(prompt, n, state) -> (status, body dict or None, headers, delay_s)` where n is the number
    of requests received so far (this one included) and state the server (in_flight, ...).
    A None body on 200 means a normal chat completion echoing the prompt."""

    def __init__(self, behave):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        server_self = self
        self.behave = behave
        self.lock = threading.Lock()
        self.count = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.prompts: list[str] = []
        self.models: list[str] = []  # the `model` of each request body
        self.auth: set[str] = set()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *a):
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                prompt = "\n".join(m.get("content", "") for m in body.get("messages", []))
                with server_self.lock:
                    server_self.count += 1
                    server_self.models.append(body.get("model"))
                    n = server_self.count
                    server_self.in_flight += 1
                    server_self.max_in_flight = max(server_self.max_in_flight, server_self.in_flight)
                    server_self.prompts.append(prompt)
                    server_self.auth.add(self.headers.get("Authorization", ""))
                try:
                    status, payload, headers, delay = server_self.behave(prompt, n, server_self)
                    if delay:
                        time.sleep(delay)
                finally:
                    with server_self.lock:
                        server_self.in_flight -= 1
                if payload is None:
                    payload = {"id": "x", "object": "chat.completion", "created": 0, "model": body.get("model"),
                               "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": f"answer to {prompt}"}}],
                               "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": 3,
                                         "total_tokens": len(prompt.split()) + 3}}
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def error_body(message: str, etype: str = "invalid_request_error", code: str | None = None) -> dict:
    return {"error": {"message": message, "type": etype, "param": None, "code": code}}
