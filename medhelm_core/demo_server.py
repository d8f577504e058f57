"""A deterministic OpenAI-compatible model server for the shipped example (loopback only).

It lets anyone run the example end to end with no API key: the answer is a pure function of
(model, prompt). Multiple-choice prompts get an option letter, judge prompts that show a JSON
rubric get that rubric back with scores 1–5, anything else gets a slice of the prompt's words.
`GET /stats` counts requests, so "a second run makes zero calls" can be checked.

No fixed port: it listens on a free loopback port unless `--port N` names one, and prints its URL.
HELM reads a prod_env's `model_deployments.yaml` literally, so the example's deployments learn the
port from a prod_env written for it: a copy of `examples/prod_env` whose `base_url`s name the
server's URL (`--prod-env DIR`). In the background, as the docs and scripts/example.sh use it:

    medhelm-demo-server start DIR   # returns once it answers; prints its URL; DIR is the example's prod_env for it
    medhelm-demo-server status DIR  # prints its URL (exit 1 when none of DIR runs)
    medhelm-demo-server stop DIR    # stops the server that `start DIR` started, and only that one

In the foreground: `medhelm-demo-server [--port N] [--port-file F] [--prod-env DIR]`.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_OPTION = re.compile(r"^([A-Z])\. \S", re.M)
_RUBRIC = re.compile(r"<rubric_criteria>\s*(\{.*?\})\s*</rubric_criteria>", re.S)


def _h(*parts: str) -> int:
    return int(hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:12], 16)


def answer(model: str, prompt: str) -> str:
    rubric = _RUBRIC.findall(prompt)
    template = None
    if rubric:
        try:
            template = json.loads(rubric[-1])
        except json.JSONDecodeError:
            template = None
    if template is None:
        blocks = re.findall(r"\{\s*\"[^{}]+\":\s*\{[^{}]*\"score\"[^{}]*\}.*\}", prompt, re.S)
        try:
            template = json.loads(blocks[-1]) if blocks else None
        except json.JSONDecodeError:
            template = None
    if isinstance(template, dict) and template:
        scored = {k: {"score": _h(model, prompt, k) % 5 + 1, "explanation": f"Demo rationale for {k}."}
                  for k in template}
        body = json.dumps(scored, indent=2)
        return f"<rubric_criteria>\n{body}\n</rubric_criteria>" if rubric else body
    letters = _OPTION.findall(prompt)
    if len(letters) >= 2:
        return letters[_h(model, prompt) % len(letters)]
    if re.search(r"yes\"? or \"?no", prompt[-400:], re.I):
        return ("Yes", "No")[_h(model, prompt) % 2]
    words = prompt.split()
    start = _h(model, prompt, "w") % max(1, len(words) - 20)
    return " ".join(words[start:start + 20])


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    counts = {"total_requests": 0}
    lock = threading.Lock()

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, code: int, obj: dict) -> None:
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/stats":
            with self.lock:
                self._send(200, dict(self.counts))
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": "not found"}})
            return
        with self.lock:
            self.counts["total_requests"] += 1
        prompt = "\n".join(m.get("content", "") for m in body.get("messages", []) if isinstance(m.get("content"), str))
        model = str(body.get("model", ""))
        text = answer(model, prompt)
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        finish = "stop"
        if limit is not None and len(text.split()) > int(limit):
            text, finish = " ".join(text.split()[: int(limit)]), "length"
        self._send(200, {"id": "demo", "object": "chat.completion", "created": 0, "model": model,
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                      "finish_reason": finish}],
                         "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split()),
                                   "total_tokens": len(prompt.split()) + len(text.split())}})


def serve(port: int = 0) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# The state `start DIR` keeps beside the prod_env it writes.
PID_FILE = "demo-server.pid"
URL_FILE = "demo-server.url"
LOG_FILE = "demo-server.log"
_TEMPLATE = Path("examples") / "prod_env"
_LOOPBACK_BASE_URL = re.compile(r"""(base_url:\s*["']?)http://(?:127\.0\.0\.1|localhost):\d+(/v1)?""")


def default_template() -> Path | None:
    """The example's prod_env: `examples/prod_env` of the working folder, else of this checkout."""
    for base in (Path.cwd(), Path(__file__).resolve().parents[1]):
        if (base / _TEMPLATE / "model_deployments.yaml").is_file():
            return base / _TEMPLATE
    return None


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_prod_env(template: Path, out: Path, url: str) -> Path:
    """`out`: the files of `template` (a prod_env), with every loopback `base_url` of its
    model_deployments.yaml naming `url` (`http://127.0.0.1:PORT/v1`)."""
    template, out = Path(template), Path(out)
    deployments = template / "model_deployments.yaml"
    if not deployments.is_file():
        raise SystemExit(f"medhelm-demo-server: {deployments}: no such file (--template names the example's prod_env)")
    lines = deployments.read_text(encoding="utf-8").splitlines(keepends=True)
    while lines and lines[0].startswith("#"):   # the template's own header: replaced by ours
        lines.pop(0)
    text, n = _LOOPBACK_BASE_URL.subn(lambda m: m.group(1) + url.rstrip("/"), "".join(lines))
    if n == 0:
        raise SystemExit(f"medhelm-demo-server: {deployments}: no loopback base_url to point at {url}")
    out.mkdir(parents=True, exist_ok=True)
    for f in sorted(template.iterdir()):
        if f.is_file() and f.name != deployments.name and not f.name.startswith("demo-server."):
            _write_atomic(out / f.name, f.read_text(encoding="utf-8"))
    header = (f"# Written by medhelm-demo-server from {template}: its deployments, on the demo server at {url}.\n"
              f"# Rewritten at each `medhelm-demo-server start`; edit {template} instead.\n")
    _write_atomic(out / deployments.name, header + text)
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except FileNotFoundError:
        if Path("/proc/self").exists():
            return ""   # Linux: no such process
    except OSError:
        return ""
    r = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True)  # macOS
    return r.stdout.strip()


def running(state_dir: str | Path) -> tuple[int, str] | None:
    """(pid, URL) of the demo server `start state_dir` started, if it still runs: the pid file's
    process must be this module serving that very folder (a pid reused by another process, another
    user's server or a copied folder's pid file are not it)."""
    d = Path(state_dir).resolve()
    try:
        pid = int((d / PID_FILE).read_text().split()[0])
        url = (d / URL_FILE).read_text().strip()
    except (OSError, ValueError, IndexError):
        return None
    cmd = _cmdline(pid)
    if "medhelm_core.demo_server" not in cmd or f"--prod-env {d} " not in cmd + " ":
        return None
    return pid, url


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url.rstrip("/").removesuffix("/v1") + "/stats", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def start(state_dir: str | Path, port: int = 0, template: Path | None = None, timeout_s: float = 30.0) -> str:
    """Start the server in the background (unless `state_dir`'s is running), write the example's
    prod_env for it into `state_dir`, return its URL once it answers."""
    d = Path(state_dir).resolve()
    found = running(d)
    if found:
        print(f"medhelm-demo-server: already running for {state_dir} (pid {found[0]})", file=sys.stderr)
        return found[1]
    template = template or default_template()
    if template is None:
        raise SystemExit("medhelm-demo-server: no examples/prod_env here: run it from the checkout or pass --template DIR")
    d.mkdir(parents=True, exist_ok=True)
    for name in (PID_FILE, URL_FILE):
        (d / name).unlink(missing_ok=True)
    with open(d / LOG_FILE, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "medhelm_core.demo_server", "--port", str(port),
                                 "--template", str(Path(template).resolve()), "--prod-env", str(d)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, close_fds=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = (d / LOG_FILE).read_text(errors="replace").strip().splitlines()[-1:]
            raise SystemExit(f"medhelm-demo-server: the server exited ({tail[0] if tail else proc.returncode}); "
                             f"see {d / LOG_FILE}")
        try:
            url = (d / URL_FILE).read_text().strip()
        except FileNotFoundError:
            url = ""
        if url and _answers(url):
            _write_atomic(d / PID_FILE, f"{proc.pid}\n")
            return url
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"medhelm-demo-server: no answer within {timeout_s:.0f} s; see {d / LOG_FILE}")


def stop(state_dir: str | Path, timeout_s: float = 10.0) -> bool:
    """Stop the server `start state_dir` started (SIGTERM, then SIGKILL); False when none runs."""
    d = Path(state_dir).resolve()
    found = running(d)
    if found is None:
        return False
    pid = found[0]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and running(d):
            try:   # our own child (started in this process): reap it
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    break
            except ChildProcessError:
                pass
            time.sleep(0.05)
        if not running(d):
            break
    for name in (PID_FILE, URL_FILE):
        (d / name).unlink(missing_ok=True)
    return True


def _lifecycle(argv: list[str]) -> int:
    action = argv[0]
    p = argparse.ArgumentParser(prog=f"medhelm-demo-server {action}",
                                description={"start": "start the demo model server in the background and write "
                                                      "the example's prod_env for it into DIR; print its URL",
                                             "status": "print the URL of DIR's demo server (exit 1 if none runs)",
                                             "stop": "stop the demo server that `start DIR` started"}[action])
    p.add_argument("dir", metavar="DIR", help="its folder: the example's prod_env (--local-path DIR), pid and log")
    if action == "start":
        p.add_argument("--port", type=int, default=0, help="default: a free port")
        p.add_argument("--template", type=Path, default=None, metavar="DIR",
                       help="the prod_env to copy (default: examples/prod_env)")
    args = p.parse_args(argv[1:])
    if action == "start":
        url = start(args.dir, args.port, args.template)
        print(url, flush=True)
        print(f"medhelm-demo-server: the example's models on {url}; their prod_env: --local-path {args.dir} "
              f"(stop: medhelm-demo-server stop {args.dir})", file=sys.stderr)
        return 0
    if action == "status":
        found = running(args.dir)
        if found is None:
            print(f"medhelm-demo-server: none running for {args.dir}", file=sys.stderr)
            return 1
        print(found[1])
        return 0
    if not stop(args.dir):
        print(f"medhelm-demo-server: none running for {args.dir}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> None:
    # A process may inherit SIGTERM as ignored (a parent that set SIG_IGN: the server would then
    # outlive the `kill` of a script and hold its port); take the default back.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)   # likewise Ctrl-C (ignored by a script's `&`)
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("start", "status", "stop"):
        raise SystemExit(_lifecycle(argv))
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="In the background: medhelm-demo-server start DIR | status DIR | stop DIR (see --help of each).")
    parser.add_argument("--port", type=int, default=0, help="default: a free port (the URL is printed)")
    parser.add_argument("--port-file", type=Path, default=None, metavar="F", help="also write the port to F once listening")
    parser.add_argument("--prod-env", type=Path, default=None, metavar="DIR",
                        help="write the example's prod_env for this server into DIR (before it serves)")
    parser.add_argument("--template", type=Path, default=None, metavar="DIR",
                        help="the prod_env to copy (default: examples/prod_env)")
    args = parser.parse_args(argv)
    try:
        server = ThreadingHTTPServer(("127.0.0.1", args.port), _Handler)
    except OSError as e:
        raise SystemExit(f"medhelm-demo-server: cannot listen on 127.0.0.1:{args.port}: {e.strerror or e} "
                         f"(--port 0 picks a free port)") from None
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    if args.prod_env is not None:
        template = args.template or default_template()
        if template is None:
            raise SystemExit("medhelm-demo-server: no examples/prod_env here: pass --template DIR")
        write_prod_env(template, args.prod_env, url)
        _write_atomic(args.prod_env / URL_FILE, url + "\n")
    if args.port_file is not None:
        _write_atomic(args.port_file, f"{server.server_address[1]}\n")
    print(f"demo model server on {url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
