"""The HTTP side of `medhelm-server`: stdlib only.

    GET /                      the page (static/index.html), /static/* its CSS and JS
    GET /api/meta              target (suite or release), suites, tiers, notes
    GET /api/groups            the run-group tree (top group, categories, benchmarks) and the page's one
                               model order (the main leaderboard's mean win rate, best first)
    GET /api/group?name=G      G's leaderboard tables (HELM's groups/G.json, cells annotated with the
                               published value where leaderboard_comparison has one; per table `order`,
                               its rows in that model order, and `metrics`, each header's schema metric)
                               and the schema's words for those metrics (the page's glossary)
    GET /api/runs              the target's runs (suite, model, groups, tier)
    GET /api/run?run=R[&suite=S]  one run: instances with prompt, references, completion, scores, judges
    GET /api/comparison        leaderboard_comparison rows of the target, with a summary
    GET /api/plots             data of the plots (mean win rate, reproduced vs published, cost vs score)
    GET /api/jury              the judge ablation: each model's rank per jury variant (all, without:<judge>,
                               only:<judge>) on the main leaderboard and per jury benchmark, rank stability,
                               and the (benchmark, model) pairs with verdicts (jury.py)
    GET /api/verdicts?benchmark=B&model=M  per instance of M on jury benchmark B: every judge's score and
                               explanation per criterion, beside the clinicians' ratings of the item

Every answer is read from DuckDB read-only (see data.py). With `redact=True` the run and
verdicts endpoints serve what the static export writes: private-tier text replaced.

Before anything else every request's `Host` and `Origin` are checked (guard.py: DNS rebinding and
cross-origin reads); a refused one gets 403 with a one-line plain-text reason and no data. No answer
carries an `Access-Control-Allow-*` header, and every answer says `Cross-Origin-Resource-Policy:
same-origin`. Methods other than GET and HEAD get 405 (after the same checks).
"""
from __future__ import annotations

import gzip
import json
import logging
import signal
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable
from urllib.parse import parse_qs, urlparse

from medhelm_core.resources import SERVER_STATIC_DIR

from .data import DataError, Reader, redact_run
from .guard import HostGuard
from .jury import jury_view, redact_verdicts, verdicts_view

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
    if endpoint == "jury":
        return jury_view(reader)
    if endpoint == "verdicts":
        if not params.get("benchmark") or not params.get("model"):
            raise DataError("verdicts: missing ?benchmark= or ?model=")
        verdicts = verdicts_view(reader, params["benchmark"], params["model"])
        return redact_verdicts(verdicts) if redact else verdicts
    raise KeyError(endpoint)


def make_handler(reader: Reader, redact: bool = False, guard: HostGuard | None = None) -> type[BaseHTTPRequestHandler]:
    guard = guard or HostGuard()

    class Handler(BaseHTTPRequestHandler):
        server_version = "medhelm-server"
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            log.info("%s %s", self.address_string(), format % args)

        def parse_request(self) -> bool:
            """The stdlib's parsing, then the Host/Origin check: a refused request ends here, for every
            method, before any handler runs."""
            if not super().parse_request():
                return False
            try:
                local = self.connection.getsockname()[0]
            except OSError:
                local = None
            reason = guard.check(self.command, self.headers, self.headers.get_all("Host") or [], local)
            if reason is None:
                return True
            shown = "".join(ch if " " <= ch <= "~" else "?" for ch in self.path[:200])
            log.warning("medhelm-server: refused %s %s from %s: %s", self.command, shown, self.client_address[0], reason)
            self.close_connection = True
            try:
                self._send(403, f"medhelm-server: refused: {reason}\n".encode("utf-8"), "text/plain; charset=utf-8",
                           {"Connection": "close"})
            except OSError:
                pass
            return False

        def _not_allowed(self) -> None:
            self.close_connection = True
            self._send(405, f"medhelm-server: {self.command} is not supported (GET only)\n".encode("utf-8"),
                       "text/plain; charset=utf-8", {"Allow": "GET, HEAD", "Connection": "close"})

        do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _not_allowed  # noqa: N815

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
            self.send_header("Cross-Origin-Resource-Policy", "same-origin")
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


def make_server(reader: Reader, host: str = "127.0.0.1", port: int = 8000, redact: bool = False,
                allowed_hosts: Iterable[str] = ()) -> ThreadingHTTPServer:
    """The server; requests are answered only for loopback names, `host` and `allowed_hosts` (guard.py)."""
    guard = HostGuard(host, allowed_hosts)
    server_class = _IPv6Server if ":" in host else ThreadingHTTPServer
    server = server_class((host, port), make_handler(reader, redact, guard))
    server.daemon_threads = True
    return server


class _IPv6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def serve_in_thread(reader: Reader, host: str = "127.0.0.1", port: int = 0, redact: bool = False,
                    allowed_hosts: Iterable[str] = ()) -> tuple[ThreadingHTTPServer, threading.Thread]:
    """Start a server on a background thread (tests, notebooks); `server.shutdown()` stops it."""
    server = make_server(reader, host, port, redact, allowed_hosts)
    thread = threading.Thread(target=server.serve_forever, name="medhelm-server", daemon=True)
    thread.start()
    return server, thread


def run_forever(reader: Reader, host: str, port: int, redact: bool = False,
                announce: Callable[[str], None] = print, allowed_hosts: Iterable[str] = ()) -> None:
    server = make_server(reader, host, port, redact, allowed_hosts)
    shown = f"[{host}]" if ":" in host else host
    announce(f"medhelm-server: {reader.where} -> http://{shown}:{server.server_address[1]}/  (Ctrl-C to stop)")
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
