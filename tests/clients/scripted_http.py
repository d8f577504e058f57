"""A loopback HTTP server that answers POSTs from a script (status, headers, JSON or raw body) and
records each request (path, query, headers, raw body): for the client tests' error paths and wire bytes."""
from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedServer:
    def __init__(self):
        self.requests: list[dict[str, Any]] = []
        self.replies: list[tuple[int, dict[str, str], Any]] = []
        self.default: tuple[int, dict[str, str], Any] = (200, {}, {})
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                split = urllib.parse.urlsplit(self.path)
                owner.requests.append({
                    "path": split.path, "query": dict(urllib.parse.parse_qsl(split.query)),
                    "headers": {k.lower(): v for k, v in self.headers.items()}, "raw": raw,
                    "body": json.loads(raw) if raw else None})
                status, headers, body = owner.replies.pop(0) if owner.replies else owner.default
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def reply(self, status: int = 200, body: Any = None, headers: dict[str, str] | None = None) -> None:
        self.replies.append((status, headers or {}, {} if body is None else body))

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
