"""The PostgreSQL session the request slots and claims talk through (medhelm_core/pg_session.py),
against a real server (scripts/postgres.sh): a failure is one line naming what failed and without
the password, ends the session (freeing what it held), and the next statement opens a new one."""
from __future__ import annotations

import socket

import psycopg2
import pytest

from medhelm_core.errors import MedhelmError
from medhelm_core.pg_session import PgSession
from tests.postgres import HAS_PG, running_postgres


def _connect(url: str, password: str | None = None):
    def connect():
        pg = psycopg2.connect(url, password=password, connect_timeout=5)
        pg.autocommit = True
        return pg
    return connect


def test_an_unreachable_server_is_one_line_naming_what_failed():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]   # nothing listens there once the socket is closed
    session = PgSession(_connect(f"postgresql://medhelm@127.0.0.1:{port}/medhelm", password="s3cret"), "request slots")
    with pytest.raises(MedhelmError) as e:
        session.execute("SELECT 1")
    assert str(e.value).startswith("request slots: the catalog's PostgreSQL failed: ")
    assert "\n" not in str(e.value) and "s3cret" not in str(e.value)


def test_a_session_ended_by_the_server_frees_its_locks_and_the_next_statement_reopens_it():
    if not HAS_PG:
        pytest.skip("no PostgreSQL server: bash scripts/setup.sh --with-postgres")
    with running_postgres() as url:
        session = PgSession(_connect(url), "request claims", on_open="CREATE TABLE IF NOT EXISTS opened (n INT)")
        pid = session.execute("SELECT pg_backend_pid()")[0][0]
        assert session.execute("SELECT pg_try_advisory_lock(7)") == [(True,)]
        other = _connect(url)()
        with other.cursor() as cur:
            cur.execute("SELECT pg_try_advisory_lock(7)")
            assert cur.fetchone()[0] is False                  # held by the session
            cur.execute("SELECT pg_terminate_backend(%s)", [pid])
        with pytest.raises(MedhelmError, match=r"^request claims: the catalog's PostgreSQL failed: "):
            session.execute("SELECT 1")
        with other.cursor() as cur:
            cur.execute("SELECT pg_try_advisory_lock(7)")
            assert cur.fetchone()[0] is True                   # freed with the session
        assert session.execute("SELECT pg_backend_pid()")[0][0] != pid   # a new session, opened again
        assert session.execute("SELECT count(*) FROM opened") == [(0,)]  # its first statement ran
        other.close()
        session.close()
