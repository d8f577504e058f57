"""Answers made durable the moment they arrive: an append-only journal beside the DuckDB file.

A DuckDB commit costs tens of milliseconds, so the engine commits answers in batches; without a
journal, a kill -9 loses the whole open batch, and the faster the endpoint, the more it loses. So
each answer is first written to this engine's journal segment, one JSON line in one write(), by
the worker that received it, before anything else happens to it: from then on a kill -9 cannot
lose it (the kernel holds it), and a background thread fdatasyncs the segment within
`sync_interval_s` against power loss (group commit: one sync for every answer of the interval).

At each batch commit the engine rotates the segment and inserts the closed segment's rows into
`completions` in the same transaction as the rest of the batch, then deletes the file. A segment
whose owner is dead (see `owners`) is replayed (stored answers kept) by the next process that
opens the store or takes over the owner's claims. A torn last line (the process died inside the
write) is skipped with a warning.

Layout: `<db>.journal/<owner>.<n>.jsonl`, one line per answer: the `completions` row as a JSON
array in `store.COMPLETION_COLUMNS` order. Rows hold exactly what `completions` holds: no API keys.
The journal knows nothing of DuckDB: the store hands `replay` its insert.
"""
from __future__ import annotations

import itertools
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from medhelm_core import owners

log = logging.getLogger(__name__)

SUFFIX = ".jsonl"
_SEGMENT_NUMBERS = itertools.count(1)  # process-wide: two journals of one owner never share a file


def journal_dir(db_path: str | Path) -> Path:
    return Path(str(db_path) + ".journal")


def _file_token(owner: str) -> str:
    return owner.replace("|", ",").replace("/", "_")


def _owner_of(path: Path) -> str:
    return path.name.rsplit(".", 2)[0].replace(",", "|")


@dataclass
class Segment:
    path: Path
    rows: list[list] = field(default_factory=list)

    @property
    def keys(self) -> list[str]:
        return [row[0] for row in self.rows]


class Journal:
    """One engine's segments. `append` may be called from any thread."""

    def __init__(self, db_path: str | Path, owner: str, sync_interval_s: float = 0.005):
        self.dir = journal_dir(db_path)
        self.owner = owner
        self.sync_interval_s = sync_interval_s
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._segment = Segment(self._next_path())
        self._dirty = threading.Event()
        self._closed = False
        self._syncer = threading.Thread(target=self._sync_loop, name="medhelm-journal-sync", daemon=True)
        self._syncer.start()

    def _next_path(self) -> Path:
        return self.dir / f"{_file_token(self.owner)}.{next(_SEGMENT_NUMBERS)}{SUFFIX}"

    def _open(self) -> int:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        try:
            return os.open(self._segment.path, flags, 0o600)
        except FileNotFoundError:
            self.dir.mkdir(parents=True, exist_ok=True)
            return os.open(self._segment.path, flags, 0o600)

    def append(self, row: list) -> None:
        data = (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            if self._fd is None:
                self._fd = self._open()
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
            self._segment.rows.append(row)
        self._dirty.set()

    @property
    def pending(self) -> int:
        """Answers journaled and not yet handed to a commit."""
        return len(self._segment.rows)

    def rotate(self) -> Segment | None:
        """Close the current segment (synced) and start a new one; None if it holds nothing."""
        with self._lock:
            segment, fd = self._segment, self._fd
            if fd is None:
                return None
            self._segment, self._fd = Segment(self._next_path()), None
        os.fdatasync(fd)
        os.close(fd)
        return segment

    def close(self) -> None:
        """Stop syncing; segments not yet committed stay on disk for the next process to replay."""
        self._closed = True
        self._dirty.set()
        self._syncer.join(timeout=5)
        with self._lock:
            if self._fd is not None:
                os.fdatasync(self._fd)
                os.close(self._fd)
                self._fd = None

    def _sync_loop(self) -> None:
        while True:
            self._dirty.wait()
            if self._closed:
                return
            time.sleep(self.sync_interval_s)  # gather the interval's answers into one sync
            with self._lock:
                self._dirty.clear()
                fd = os.dup(self._fd) if self._fd is not None else None
            if fd is not None:
                try:
                    os.fdatasync(fd)
                finally:
                    os.close(fd)


def read_segment(path: Path, width: int) -> list[list]:
    """The rows of a segment file; a torn or unreadable line is skipped with a warning."""
    rows: list[list] = []
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    for number, line in enumerate(lines, 1):
        if not line:
            continue
        torn = number == len(lines)  # no newline after it: the write was cut short
        try:
            row = json.loads(line)
            if not (isinstance(row, list) and width - 2 <= len(row) <= width and isinstance(row[0], str)):
                raise ValueError("not a completions row")
            row += [None] * (width - len(row))  # written before `untruncated` / `model_logprobs` were added
        except ValueError as e:
            what = "torn last record" if torn else f"unreadable record ({e})"
            log.warning("answer journal %s:%d: %s skipped; that request will be asked again", path, number, what)
            continue
        rows.append(row)
    return rows


def orphan_segments(db_path: str | Path, dead: Callable[[str], bool] | None = None) -> list[Path]:
    """Segments whose owner is dead (or, with `dead`, whose owner `dead` says is)."""
    directory = journal_dir(db_path)
    try:
        paths = sorted(p for p in directory.iterdir() if p.name.endswith(SUFFIX))
    except FileNotFoundError:
        return []
    is_dead = dead or (lambda owner: not owners.owner_alive(owner))
    return [p for p in paths if is_dead(_owner_of(p))]


def replay(conn, db_path: str | Path, insert: Callable[[Any, list[list]], None], width: int,
           dead: Callable[[str], bool] | None = None) -> list[Path]:
    """Insert the answers of every orphan segment through `insert(conn, rows)` (inside the
    caller's transaction); returns the files to delete once that transaction has committed."""
    paths = orphan_segments(db_path, dead)
    rows: list[list] = []
    for path in paths:
        try:
            rows.extend(read_segment(path, width))
        except FileNotFoundError:
            pass  # replayed and removed by another process meanwhile
    if rows:
        insert(conn, rows)
        log.info("answer journal: %d answers from %d segments of ended runs recovered", len(rows), len(paths))
    return paths


def remove(paths: list[Path]) -> None:
    for path in paths:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
