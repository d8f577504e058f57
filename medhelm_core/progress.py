"""One progress display for a whole invocation: a line per deployment with its requests in flight
against its current limit, requests per second, done / sent, and cost so far.

The engine tells the board what it sends and what comes back (`sent`, `finished`); a thread
redraws the lines on stderr every half second. The command line decides whether to show it
(`--progress`, or stderr is a terminal) before Dagster runs anything: inside a Dagster step
stderr is captured and never a terminal.
"""
from __future__ import annotations

import contextlib
import sys
import threading
import time
from dataclasses import dataclass
from typing import IO, Any, Iterator


@dataclass
class _Deployment:
    limiter: Any = None
    sent: int = 0
    done: int = 0
    failed: int = 0
    cost_usd: float = 0.0
    first: float = 0.0


class ProgressBoard:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.deployments: dict[str, _Deployment] = {}

    def _get(self, name: str) -> _Deployment:
        d = self.deployments.get(name)
        if d is None:
            d = self.deployments[name] = _Deployment(first=time.monotonic())
        return d

    def lane(self, name: str, limiter: Any) -> None:
        with self._lock:
            self._get(name).limiter = limiter

    def sent(self, name: str) -> None:
        with self._lock:
            self._get(name).sent += 1

    def finished(self, name: str, cost_usd: float | None, failed: bool = False) -> None:
        with self._lock:
            d = self._get(name)
            d.done += 1
            d.failed += failed
            d.cost_usd += cost_usd or 0.0

    def lines(self) -> list[str]:
        now = time.monotonic()
        out = []
        with self._lock:
            total_cost = sum(d.cost_usd for d in self.deployments.values())
            width = max((len(n) for n in self.deployments), default=10)
            for name in sorted(self.deployments):
                d = self.deployments[name]
                in_flight = d.limiter.in_flight if d.limiter is not None else 0
                limit = d.limiter.current_limit if d.limiter is not None else 0
                rate = d.done / max(now - d.first, 1e-9)
                failed = f"  {d.failed} failed" if d.failed else ""
                out.append(f"{name:<{width}}  {in_flight:>3}/{limit:<3} in flight  {rate:6.1f} req/s  "
                           f"{d.done:>6}/{d.sent:<6} done  ${d.cost_usd:,.4f}{failed}")
        out.append(f"{'total':<{width}}  ${total_cost:,.4f}")
        return out


class _Renderer:
    """Redraws the board's lines in place on a terminal (or appends them every few seconds)."""

    def __init__(self, board: ProgressBoard, stream: IO[str], interval_s: float = 0.5):
        self.board, self.stream, self.interval_s = board, stream, interval_s
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self._drawn = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="medhelm-progress", daemon=True)

    def _draw(self) -> None:
        lines = self.board.lines()
        if len(lines) <= 1:
            return
        if self.tty:
            up = f"\x1b[{self._drawn}F" if self._drawn else ""
            self.stream.write(up + "".join(f"\x1b[2K{line}\n" for line in lines))
            self._drawn = len(lines)
        else:
            self.stream.write("\n".join(lines) + "\n")
        self.stream.flush()

    def _loop(self) -> None:
        interval = self.interval_s if self.tty else max(self.interval_s, 5.0)
        while not self._stop.wait(interval):
            self._draw()

    def __enter__(self) -> "_Renderer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._draw()


@contextlib.contextmanager
def progress_display(ws: Any, force: bool | None, stream: IO[str] | None = None) -> Iterator[ProgressBoard | None]:
    """Show the invocation's progress on `stream` (stderr) while the block runs: when `force` is
    True, or when it is None and the stream is a terminal."""
    stream = stream or sys.stderr
    show = force if force is not None else bool(getattr(stream, "isatty", lambda: False)())
    if not show:
        yield None
        return
    board = ProgressBoard()
    ws.controls.board = board
    try:
        with _Renderer(board, stream):
            yield board
    finally:
        ws.controls.board = None
