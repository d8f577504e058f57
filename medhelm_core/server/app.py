"""The HTTP side of `medhelm-server`: stdlib only.

    GET /                      the page (static/index.html), /static/* its CSS and JS
    GET /api/meta              target (suite or release), suites, tiers, notes
    GET /api/groups            the run-group tree (top group, categories, benchmarks)
    GET /api/group?name=G      G's leaderboard tables (HELM's groups/G.json, cells annotated with the
                               published value where leaderboard_comparison has one)
    GET /api/runs              the target's runs (suite, model, groups, tier)
    GET /api/run?run=R[&suite=S]  one run: instances with prompt, references, completion, scores, judges
    GET /api/comparison        leaderboard_comparison rows of the target, with a summary
    GET /api/plots             data of the plots (mean win rate, reproduced vs published, cost vs score)

Every answer is read from DuckDB read-only (see data.py). With `redact=True` the run endpoint
serves what the static export writes: private-tier text replaced.
"""
from __future__ import annotations

import gzip
import json
import logging
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs, urlparse

from medhelm_core.resources import SERVER_STATIC_DIR

from .data import DataError, Reader, redact_run

STATIC_DIR = SERVER_STATIC_DIR
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                 ".css": "text/css; charset=utf-8", ".json": "application/json", ".svg": "image/svg+xml"}
# The page loads nothing from anywhere else.
CSP = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; connect-src 'self'"
log = logging.getLogger(__name__)


def api_answer(reader: Reader, endpoint: str, params: dict[str, str], redact: bool = False) -> Any:
    """The JSON of one API endpoint (shared with the static export)."""
    if endpoint == "meta":
        meta = reader.meta()
        return {**meta, "redacted": redact}
    if endpoint == "groups":
        return reader.groups()
    if endpoint == "group":
        if not params.get("name"):
            raise DataError("group: missing ?name=")
        return reader.group(params["name"])
    if endpoint == "runs":
        return reader.runs()
    if endpoint == "run":
        if not params.get("run"):
            raise DataError("run: missing ?run=")
        run = reader.run(params["run"], params.get("suite") or None)
        return redact_run(run) if redact else run
    if endpoint == "comparison":
        return reader.comparison()
    if endpoint == "plots":
        return reader.plots()
    raise KeyError(endpoint)


def make_handler(reader: Reader, redact: bool = False) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "medhelm-server"
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            log.info("%s %s", self.address_string(), format % args)

        def _send(self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
            if len(body) > 2048 and "gzip" in (self.headers.get("Accept-Encoding") or ""):
                body = gzip.compress(body, compresslevel=5)
                extra = {**(extra or {}), "Content-Encoding": "gzip"}
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("Content-Security-Policy", CSP)
            self.send_header("X-Content-Type-Options", "nosniff")
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, status: int, obj: Any) -> None:
            self._send(status, json.dumps(obj, ensure_ascii=False, allow_nan=False).encode("utf-8"),
                       "application/json; charset=utf-8")

        def do_HEAD(self) -> None:  # noqa: N802
            self.do_GET()

        def do_GET(self) -> None:  # noqa: N802
            url = urlparse(self.path)
            path = url.path
            try:
                if path in ("/", "/index.html"):
                    return self._static("index.html")
                if path.startswith("/static/"):
                    return self._static(path[len("/static/"):])
                if path.startswith("/api/"):
                    params = {k: v[-1] for k, v in parse_qs(url.query).items()}
                    try:
                        return self._json(200, api_answer(reader, path[len("/api/"):], params, redact))
                    except KeyError:
                        return self._json(404, {"error": f"no endpoint {path}"})
                    except DataError as e:
                        return self._json(404, {"error": str(e)})
                if path == "/favicon.ico":
                    return self._send(204, b"", "image/x-icon")
                return self._json(404, {"error": f"not found: {path}"})
            except (BrokenPipeError, ConnectionResetError):
                return None
            except Exception as e:  # the page shows the message; the server keeps running
                log.exception("error serving %s", self.path)
                try:
                    return self._json(500, {"error": f"{type(e).__name__}: {e}"})
                except OSError:
                    return None

        def _static(self, name: str) -> None:
            target = (STATIC_DIR / name).resolve()
            if STATIC_DIR not in target.parents or not target.is_file():
                return self._json(404, {"error": f"not found: {name}"})
            self._send(200, target.read_bytes(), CONTENT_TYPES.get(target.suffix, "application/octet-stream"))

    return Handler


def make_server(reader: Reader, host: str = "127.0.0.1", port: int = 8000, redact: bool = False) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer((host, port), make_handler(reader, redact))
    server.daemon_threads = True
    return server


def serve_in_thread(reader: Reader, host: str = "127.0.0.1", port: int = 0,
                    redact: bool = False) -> tuple[ThreadingHTTPServer, threading.Thread]:
    """Start a server on a background thread (tests, notebooks); `server.shutdown()` stops it."""
    server = make_server(reader, host, port, redact)
    thread = threading.Thread(target=server.serve_forever, name="medhelm-server", daemon=True)
    thread.start()
    return server, thread


def run_forever(reader: Reader, host: str, port: int, redact: bool = False,
                announce: Callable[[str], None] = print) -> None:
    server = make_server(reader, host, port, redact)
    announce(f"medhelm-server: {reader.where} -> http://{host}:{server.server_address[1]}/  (Ctrl-C to stop)")
    # SIGTERM stops it as Ctrl-C does, even where it was inherited as ignored (a background job of a
    # script, PID 1 of a container).
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt
