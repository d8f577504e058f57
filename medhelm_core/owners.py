"""Who is asking: an id per engine, and whether its owner is still alive.

Request claims (`claims`) and answer-journal segments carry the id of the engine that wrote
them, `host|pid|process start|nonce`. On this host a pid that is gone, or was reused by another
process (its start time differs), is dead at once; in this process an engine is alive while it is
registered; elsewhere only a fresh heartbeat keeps an owner alive.
"""
from __future__ import annotations

import os
import socket
import threading
import time
import uuid

HOST = socket.gethostname()
_LIVE: set[str] = set()  # owners registered by engines of this process that have not finished
_LIVE_LOCK = threading.Lock()


def process_start(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def new_owner_id() -> str:
    pid = os.getpid()
    return f"{HOST}|{pid}|{process_start(pid) or '-'}|{uuid.uuid4().hex[:12]}"


def register(owner: str) -> None:
    with _LIVE_LOCK:
        _LIVE.add(owner)


def unregister(owner: str) -> None:
    with _LIVE_LOCK:
        _LIVE.discard(owner)


def owner_alive(owner: str, heartbeat: float | None = None, lease_s: float = 120.0) -> bool:
    """Alive: on this host, its process runs (and, in this process, the engine is registered);
    elsewhere, its heartbeat is younger than `lease_s` (no heartbeat: assumed alive)."""
    fresh = heartbeat is None or time.time() - heartbeat < lease_s
    try:
        host, pid_s, start, _ = owner.split("|")
        pid = int(pid_s)
    except ValueError:
        return fresh
    if host != HOST:
        return fresh
    if pid == os.getpid():
        with _LIVE_LOCK:
            return owner in _LIVE
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if start != "-" and process_start(pid) not in (None, start):
        return False  # the pid was reused by another process
    return fresh
