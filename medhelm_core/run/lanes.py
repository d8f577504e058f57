"""Worker threads over a suite's runs in two lines: the general line and a lane.

In a suite with a jury, the judges' deployments are the bottleneck: every jury run waits on them.
Runs that never wait on a judge, on deployments no judge uses, would otherwise start only when
the jury runs ahead of them in line are done, and then run in a tail after the last judge call,
with the judges idle. In the lane they run from the start instead, one thread per lane
deployment, while the judges are busy; the general threads take lane runs too once their own line
is empty, so neither line waits while the other has work.

The lane starts when `gate` is set (the general line's first runs have built their requests): its
runs take their turn on the one core after the jury runs have reached the judges.
"""
from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Future
from typing import Callable, Hashable


class RunLines:
    """`call(item)` for every item of `general` and `lane`, on `general_workers` threads that take
    the general line first and then the lane, and `lane_workers` threads that take only the lane
    (after `gate`). `futures[item]` is each item's result; `close()` cancels what has not started
    and waits for what has."""

    def __init__(self, general: list[Hashable], lane: list[Hashable], general_workers: int, lane_workers: int,
                 call: Callable, gate: threading.Event, name: str = "medhelm-run"):
        self.futures: dict[Hashable, Future] = {item: Future() for item in [*general, *lane]}
        self._lines = (deque(general), deque(lane))
        self._lock = threading.Lock()
        self._call = call
        self._gate = gate
        self._closed = False
        workers = [(False, min(general_workers, len(general) + len(lane))), (True, min(lane_workers, len(lane)))]
        self._threads = [threading.Thread(target=self._work, args=(lane_only,),
                                          name=f"{name}-{'lane-' if lane_only else ''}{i}")
                         for lane_only, n in workers for i in range(n)]
        for t in self._threads:
            t.start()

    def _take(self, lane_only: bool):
        with self._lock:
            for line in self._lines[1:] if lane_only else self._lines:
                while line:
                    item = line.popleft()
                    if self.futures[item].set_running_or_notify_cancel():
                        return item
                if line is self._lines[0]:
                    self._gate.set()   # the general line is done: nothing left for the lane to wait for
        return None

    def _work(self, lane_only: bool) -> None:
        if lane_only:
            self._gate.wait()
        while not self._closed:
            item = self._take(lane_only)
            if item is None:
                return
            future = self.futures[item]
            try:
                future.set_result(self._call(item))
            except BaseException as e:  # noqa: BLE001 - the caller's future holds it
                future.set_exception(e)

    def close(self) -> None:
        self._closed = True
        for future in self.futures.values():
            future.cancel()
        self._gate.set()
        for t in self._threads:
            t.join()
