"""A deterministic OpenAI-compatible model server for the shipped example (loopback only).

It lets anyone run the example end to end with no API key: the answer is a pure function of
(model, prompt). Multiple-choice prompts get an option letter, judge prompts that show a JSON
rubric get that rubric back with scores 1–5, anything else gets a slice of the prompt's words.
`GET /stats` counts requests, so "a second run makes zero calls" can be checked.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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


def main() -> None:
    # A process may inherit SIGTERM as ignored (a parent that set SIG_IGN: the server would then
    # outlive the `kill` of scripts/example.sh and hold its port); take the default back.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), _Handler)
    print(f"demo model server on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
