"""Flat combining: many threads hand in small pieces of work; whichever thread gets the turn runs
every piece queued so far, as one batch, and each thread returns with its own piece's result.

A suite's engines settle claims and answers in hundreds of small store transactions at once. Each
costs the store's one writer turn, a commit and the GIL waits of the thread that holds the turn;
run as one batch (one transaction, or one statement for many pieces), they cost about one.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")


class Piece(Generic[T]):
    """One thread's piece of work, and what came of it (`run_batch` sets `result` or `error`)."""

    __slots__ = ("work", "done", "result", "error")

    def __init__(self, work: Any):
        self.work = work
        self.done = False
        self.result: T | None = None
        self.error: BaseException | None = None

    def settle(self, result: T | None = None, error: BaseException | None = None) -> None:
        self.result, self.error, self.done = result, error, True


class Combiner:
    """The queue and the turn of one kind of work. `run_batch(pieces)` settles every piece it is
    given; a batch cut short (an interrupt) leaves its unsettled pieces to their own threads."""

    def __init__(self, run_batch: Callable[[list[Piece]], None]):
        self._run_batch = run_batch
        self._queue: list[Piece] = []
        self._queue_lock = threading.Lock()
        self._turn = threading.Lock()

    def submit(self, work: Any) -> Any:
        piece = Piece(work)
        with self._queue_lock:
            self._queue.append(piece)
        with self._turn:
            if not piece.done:
                with self._queue_lock:
                    batch, self._queue = self._queue, []
                if not any(p is piece for p in batch):  # taken by a turn that was interrupted
                    batch.append(piece)
                self._run_batch(batch)
        if piece.error is not None:
            raise piece.error
        return piece.result


def settle_together(pieces: list[Piece], run: Callable[[list], list]) -> None:
    """Settle `pieces` with `run([work, ...]) -> [result, ...]` over all of them at once; where that
    raises, run each alone, so that an error is only its own piece's."""
    try:
        results = run([p.work for p in pieces])
    except Exception as e:  # noqa: BLE001 - kept by the piece(s) it belongs to
        if len(pieces) == 1:
            pieces[0].settle(error=e)
            return
        for piece in pieces:
            try:
                piece.settle(run([piece.work])[0])
            except BaseException as alone:  # noqa: BLE001 - raised in the thread that handed the piece in
                piece.settle(error=alone)
        return
    for piece, result in zip(pieces, results):
        piece.settle(result)
