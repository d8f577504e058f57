"""The ports the README's servers used to take (the demo model server 8765, Dagster's UI 3000,
PostgreSQL 55432 and 55433, the page 8000), held by listening sockets of this process while a test
runs: a server the README or a test starts must take a free port and print it, never assume one.

The tests that start servers use the `readme_ports_taken` fixture, so they always run with these ports
busy. To run any tests (or the whole suite) so:

    .venv/bin/python -m tests.ports .venv/bin/pytest -q tests/...
"""
from __future__ import annotations

import socket
import subprocess
import sys
from contextlib import contextmanager
from typing import Iterator

import pytest

README_PORTS = (8765, 3000, 55432, 55433, 8000)


@contextmanager
def ports_busy(ports: tuple[int, ...] = README_PORTS) -> Iterator[list[int]]:
    """Listen on each of `ports` on 127.0.0.1 (never accepting); yield the ports held here. A port
    another process holds already is busy all the same."""
    held: list[socket.socket] = []
    try:
        for port in ports:
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
                s.listen(1)
            except OSError:
                s.close()
                continue
            held.append(s)
        yield [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def is_busy(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


@pytest.fixture
def readme_ports_taken() -> Iterator[list[int]]:
    with ports_busy() as held:
        assert all(is_busy(p) for p in README_PORTS)
        yield held


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python -m tests.ports COMMAND [ARG...]   (runs COMMAND with the README's ports busy)")
    with ports_busy() as held:
        print(f"tests.ports: holding {', '.join(map(str, held)) or 'none (all already busy)'}", file=sys.stderr)
        sys.exit(subprocess.call(sys.argv[1:]))
