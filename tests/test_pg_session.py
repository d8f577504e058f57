"""The PostgreSQL session the request slots and claims talk through (medhelm_core/pg_session.py),
against a real server (scripts/postgres.sh): a failure is one line naming what failed and without
the password, ends the session (freeing what it held), and the next statement opens a new one; the
request slots of requests in flight outlive it."""
from __future__ import annotations

import contextlib
import socket
import threading

import psycopg2
import pytest

from medhelm_core.errors import MedhelmError
from medhelm_core.pg_session import PgSession
from medhelm_core.slots import PostgresSlots, _key32
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


def test_request_slots_in_flight_keep_their_slots_when_the_session_is_lost():
    """A slot's lock goes with the session; the request holding it is still sending, so this process
    does not grant that slot again, and the next session takes its lock back from other processes."""
    if not HAS_PG:
        pytest.skip("no PostgreSQL server: bash scripts/setup.sh --with-postgres")
    with running_postgres() as url:
        slots = PostgresSlots(_connect(url))
        in_flight = slots.acquire("dep", 1, threading.Event())
        assert in_flight == ("dep", 0)
        other = _connect(url)()
        cur = other.cursor()
        pid = slots._session.execute("SELECT pg_backend_pid()")[0][0]
        cur.execute("SELECT pg_terminate_backend(%s)", [pid])
        with pytest.raises(MedhelmError, match=r"^request slots: "):
            slots.acquire("dep", 2, threading.Event())        # slot 1 asked on the ended session

        stop = threading.Event()
        threading.Timer(0.3, stop.set).start()
        assert slots.acquire("dep", 1, stop) is None           # slot 0 is still the request's
        cur.execute("SELECT pg_try_advisory_lock(%s, 0)", [_key32("dep")])
        assert cur.fetchone()[0] is False                      # and its lock was taken again

        slots.release(in_flight)
        cur.execute("SELECT pg_try_advisory_lock(%s, 0)", [_key32("dep")])
        assert cur.fetchone()[0] is True
        other.close()
        slots.close()


def test_request_claims_work_for_a_role_that_cannot_create_tables():
    """A team's least-privilege role: the claims table made once by the owner, then used by a role
    without the right to create in the schema."""
    if not HAS_PG:
        pytest.skip("no PostgreSQL server: bash scripts/setup.sh --with-postgres")
    from medhelm_core.claims import TABLE, PostgresClaims

    with running_postgres() as url:
        PostgresClaims(None, _connect(url))._execute("SELECT 1")       # made by the owner
        admin = _connect(url)()
        with admin.cursor() as cur:
            cur.execute("CREATE ROLE worker LOGIN; REVOKE CREATE ON SCHEMA public FROM PUBLIC;"
                        f" GRANT USAGE ON SCHEMA public TO worker; GRANT SELECT, INSERT, UPDATE, DELETE ON {TABLE} TO worker")
        worker_url = url.replace("://medhelm@", "://worker@") if "://medhelm@" in url else None
        assert worker_url, url
        worker = PostgresClaims(None, _connect(worker_url))
        assert worker._execute(f"INSERT INTO {TABLE} VALUES ('k', 'w', 0) RETURNING request_key") == [("k",)]
        with pytest.raises(MedhelmError, match="permission denied"):
            worker._execute("CREATE TABLE other (n INT)")
        admin.close()


class _Store:
    """What PostgresClaims asks of a store, with a hook run inside each block (and no lake)."""

    def __init__(self, inside):
        self.inside = inside

    @contextlib.contextmanager
    def transaction(self):
        self.inside()
        yield None

    @contextlib.contextmanager
    def connect(self, read_only=False):
        self.inside()
        yield None


def _terminate(url: str, claims) -> None:
    pid = claims._execute("SELECT pg_backend_pid()")[0][0]
    killer = _connect(url)()
    with killer.cursor() as cur:
        cur.execute("SELECT pg_terminate_backend(%s)", [pid])
    killer.close()


def test_claims_keep_the_first_error_and_never_fail_a_write_that_went_in():
    """The catalog's session ends (a server restart) inside a store block: a commit whose write went
    in returns (failing would have the caller write it twice), and a claim whose lake check failed
    raises that failure, not the give-back's."""
    if not HAS_PG:
        pytest.skip("no PostgreSQL server: bash scripts/setup.sh --with-postgres")
    from medhelm_core.claims import PostgresClaims

    with running_postgres() as url:
        claims = PostgresClaims(None, _connect(url))
        writes = []
        claims.store = _Store(lambda: _terminate(url, claims))
        claims.commit("o", ["k"], writes.append)          # the settle fails after the write: no error
        assert writes == [None]

        class LakeDown(Exception):
            pass

        def lake_down():
            _terminate(url, claims)
            raise LakeDown("the lake is unreachable")
        claims.store = _Store(lake_down)
        with pytest.raises(LakeDown):
            claims.claim(["b"], "o", lease_s=60.0)
        claims.close()
