"""Start ../shared/tools/mock_openai_server.py (a real HTTP server on loopback) for a test; and the HTTP plumbing
the loopback mocks share (QuietHTTPServer, serve_loopback, JSONHandler, post_for_json, sha)."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.oracle import MOCK_SERVER



class QuietHTTPServer(ThreadingHTTPServer):
    """A loopback server for the mocks: a client that went away mid-answer (a submitter killed on
    purpose) is no error to print, since it would land in whichever test's captured stderr runs next."""

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


def serve_loopback(handler: type[BaseHTTPRequestHandler]) -> tuple[QuietHTTPServer, threading.Thread]:
    """`handler` served on a free loopback port from a daemon thread (one thread a connection)."""
    httpd = QuietHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    return httpd, thread


class JSONHandler(BaseHTTPRequestHandler):
    """The HTTP plumbing of the batch mocks: keep-alive HTTP/1.1, no request log, GET and POST handed to
    `_route(method)`, and `_send` of a JSON (or bytes) answer with a fresh request id in the header
    `request_id_header` (`request_id_chars` hex characters after `req_`)."""
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    request_id_header = "x-request-id"
    request_id_chars = 16

    def log_message(self, *a):
        pass

    def _route(self, method: str) -> None:
        raise NotImplementedError

    def do_GET(self):
        self._route("GET")

    def do_POST(self):
        self._route("POST")

    def _send(self, status: int, payload, content_type: str = "application/json") -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header(self.request_id_header, "req_" + sha(time.time())[:self.request_id_chars])
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client went away (a killed submitter)
            pass

    def _send_late(self, status: int, payload, delay_s: float, lose: bool = False) -> None:
        """`_send` after `delay_s` seconds; with `lose`, the connection is dropped instead (the answer never
        arrives)."""
        if delay_s:
            time.sleep(delay_s)
        if lose:
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self._send(status, payload)


def sha(*parts) -> str:
    """A hex SHA-256 of the parts (the mocks' ids)."""
    return hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()


def post_for_json(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, object]:
    """POST `body` to `url`: the status and the answer's JSON (its text when it is not JSON), an HTTP error's
    included."""
    req = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode("utf-8", "replace")


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
