"""Request claims: which engine is asking a request right now, so that no two engines (threads,
processes, machines) pay for it twice. A claim names its owner (`owners`); a claim whose owner is
dead is taken over, after the answers its owner journaled are folded in.

* `TableClaims` (a DuckDB file): the store's `completion_claims` table, written inside the store's
  transactions, which the file's lock orders, so a claim is exact: a key is claimed only when it is
  neither answered nor claimed.
* `PostgresClaims` (a DuckLake): a table with a primary key in the catalog's PostgreSQL,
  `medhelm_completion_claims`. A claim is one `INSERT … ON CONFLICT DO NOTHING` (about a
  millisecond), so claiming never takes the lake's write turn (`lake_store.WriterLock`), which a
  suite would otherwise take hundreds of times. The claim and the answer then live in two
  databases, so the order is what keeps it exact: an answer is committed to the lake before its
  claim is dropped, and a key just won is looked up in the lake's `completions` once more (an
  answer committed after the engine's lookup and before its claim); one found there is let go.

The store gives both its transactions, its reads and `replay` (the journals of dead owners into
`completions`); neither knows how answers are stored.
"""
from __future__ import annotations

import time
from typing import Callable, Optional

from medhelm_core import journal, owners
from medhelm_core.combining import Combiner, Piece, settle_together
from medhelm_core.errors import MedhelmError
from medhelm_core.pg_session import PgSession

Write = Callable[[object], None]   # (connection) -> None, run inside a store transaction


# -- the table in the store (a DuckDB file) ---------------------------------------------------------
def dead_claimants(conn, lease_s: float = 120.0) -> list[str]:
    """Owners of claims in `completion_claims` that are dead."""
    held = conn.execute("SELECT owner, max(heartbeat) FROM completion_claims GROUP BY owner").fetchall()
    return _dead(held, lease_s)


def _dead(held: list[tuple], lease_s: float) -> list[str]:
    """The dead among (owner, last heartbeat) pairs."""
    return [o for o, beat in held if not owners.owner_alive(o, beat or 0.0, lease_s)]


def drop_claims(conn, claimants: list[str]) -> None:
    if claimants:
        conn.execute("DELETE FROM completion_claims WHERE owner IN (SELECT unnest(?::VARCHAR[]))", [claimants])


class TableClaims:
    """Claims in the store's own `completion_claims` table (see the module's doc). The claims (and
    the commits) that the threads of a process hand in at the same moment are made together: one
    lookup and one insert for all of them (`combining`), in a transaction the store may share too
    (`Store.combined`)."""

    def __init__(self, store):
        self.store = store
        self._claims = Combiner(self._claim_batch)
        self._commits = Combiner(self._commit_batch)

    def claim(self, keys: list[str], owner: str, lease_s: float, also: Optional[Write] = None) -> set[str]:
        """Claim the keys nobody alive is asking and nobody answered; returns those now `owner`'s.
        `also` runs in the same transaction. Keys are looked up through the tables' key indexes
        (never a scan of `completions`, which grows with every answer)."""
        return self._claims.submit(_Ask(list(dict.fromkeys(keys)), owner, lease_s, also))

    def _claim_batch(self, pieces: list[Piece]) -> None:
        def run(asks: list[_Ask]) -> list[set[str]]:
            mine, recovered = self.store.combined(lambda conn: _claim_all(self.store, conn, asks))
            journal.remove(recovered)
            return mine

        settle_together(pieces, run)

    def commit(self, owner: str, settled: list[str], write: Write) -> None:
        """`write` (the answers and failures of a batch) and the settling of their claims, in one
        transaction; the owner's other claims get a fresh heartbeat."""
        self._commits.submit((owner, list(settled), write))

    def _commit_batch(self, pieces: list[Piece]) -> None:
        def run(commits: list[tuple]) -> list[None]:
            self.store.combined(lambda conn: _commit_all(conn, commits))
            return [None] * len(commits)

        settle_together(pieces, run)

    def heartbeat(self, owner: str) -> None:
        def work(conn) -> None:
            conn.execute("UPDATE completion_claims SET heartbeat = ? WHERE owner = ?", [time.time(), owner])

        self.store.combined(work)

    def release(self, owner: str) -> None:
        def work(conn) -> None:
            conn.execute("DELETE FROM completion_claims WHERE owner = ?", [owner])

        self.store.combined(work)

    def close(self) -> None:
        pass


class _Ask:
    """One claim handed in: its keys (distinct, in order), owner, lease and extra write."""

    __slots__ = ("keys", "owner", "lease_s", "also")

    def __init__(self, keys: list[str], owner: str, lease_s: float, also: Optional[Write]):
        self.keys, self.owner, self.lease_s, self.also = keys, owner, lease_s, also


def _commit_all(conn, commits: list[tuple[str, list[str], Write]]) -> None:
    """The (owner, settled keys, write) commits in one transaction: each write, then one delete of the
    settled claims (each its owner's) and one heartbeat for the owners' other claims."""
    keys, owners = [], []
    for owner, settled, write in commits:
        write(conn)
        keys += settled
        owners += [owner] * len(settled)
    if keys:
        conn.execute("DELETE FROM completion_claims c USING (SELECT unnest(?::VARCHAR[]) AS k,"
                     " unnest(?::VARCHAR[]) AS o) s WHERE c.request_key = s.k AND c.owner = s.o", [keys, owners])
    conn.execute("UPDATE completion_claims SET heartbeat = ? WHERE owner IN (SELECT unnest(?::VARCHAR[]))",
                 [time.time(), sorted({owner for owner, _, _ in commits})])


def _claim_all(store, conn, asks: list[_Ask]) -> tuple[list[set[str]], list]:
    """The claims of `asks` in one transaction: one lookup of the claims held on all their keys, one
    of the answers, one insert. A key two asks want goes to the first. Returns each ask's keys now
    its owner's (its earlier claims on them included), and the journal segments replayed."""
    for ask in asks:
        if ask.also is not None:
            ask.also(conn)
    every = list(dict.fromkeys(k for ask in asks for k in ask.keys))
    held = conn.execute("SELECT request_key, owner, heartbeat FROM completion_claims"
                        " WHERE request_key IN (SELECT unnest(?::VARCHAR[]))", [every]).fetchall()
    asking = {ask.owner for ask in asks}
    beats: dict[str, float] = {}
    for _, o, beat in held:
        beats[o] = max(beats.get(o, 0.0), beat or 0.0)
    lease_s = min(ask.lease_s for ask in asks)
    dead = set(_dead([(o, b) for o, b in beats.items() if o not in asking], lease_s))
    recovered: list = []
    if dead:  # take over: first fold in what they journaled, then drop their claims
        recovered = store.replay(conn, dead=dead.__contains__)
        drop_claims(conn, sorted(dead))
    holder = {k: o for k, o, _ in held if o not in dead}
    answered = {k for (k,) in conn.execute(
        "SELECT request_key FROM completions WHERE request_key IN (SELECT unnest(?::VARCHAR[]))", [every]).fetchall()}
    mine: list[set[str]] = []
    new_keys, new_owners = [], []
    for ask in asks:
        got = set()
        for k in ask.keys:
            if holder.get(k) == ask.owner:
                got.add(k)
            elif k not in holder and k not in answered:
                holder[k] = ask.owner
                new_keys.append(k)
                new_owners.append(ask.owner)
                got.add(k)
        mine.append(got)
    if new_keys:
        conn.execute("INSERT INTO completion_claims (request_key, owner, heartbeat)"
                     " SELECT unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), ?", [new_keys, new_owners, time.time()])
    return mine, recovered


# -- a table in the catalog's PostgreSQL (a DuckLake) ------------------------------------------------
TABLE = "medhelm_completion_claims"
_CREATE_KEY = 0x6d65_6468_656c_6d01   # an advisory lock for the table's creation (two processes at once)


class PostgresClaims:
    """Claims in `medhelm_completion_claims` of the catalog's PostgreSQL (see the module's doc),
    through one connection per process (`connect`: () -> a psycopg2 connection in autocommit)."""

    def __init__(self, store, connect: Callable[[], object]):
        self.store = store
        # Made on a session's first use when it is not there yet (CREATE TABLE IF NOT EXISTS would
        # need the right to create in the schema even then); the lock: two processes creating it
        # at once would collide.
        self._session = PgSession(connect, "request claims", on_open=(
            f"SELECT pg_advisory_xact_lock({_CREATE_KEY}); DO $$ BEGIN IF to_regclass('{TABLE}') IS NULL THEN"
            f" CREATE TABLE {TABLE} (request_key TEXT PRIMARY KEY, owner TEXT NOT NULL, heartbeat DOUBLE PRECISION);"
            f" END IF; END $$"))
        self._execute = self._session.execute

    def _take_over(self, dead: list[str]) -> None:
        """Fold in what the dead owners journaled (on this machine), then drop their claims: in that
        order, so whoever claims those keys next finds their answers."""
        with self.store.transaction() as conn:
            recovered = self.store.replay(conn, dead=set(dead).__contains__)
        self._execute(f"DELETE FROM {TABLE} WHERE owner = ANY(%s)", [dead])
        journal.remove(recovered)

    def claim(self, keys: list[str], owner: str, lease_s: float, also: Optional[Write] = None) -> set[str]:
        """Claim the keys nobody alive is asking and nobody answered; returns those now `owner`'s.
        `also` runs in a store transaction of its own."""
        if also is not None:
            with self.store.transaction() as conn:
                also(conn)
        dead = _dead(self._execute(f"SELECT owner, max(heartbeat) FROM {TABLE} WHERE request_key = ANY(%s)"
                                        f" AND owner <> %s GROUP BY owner", [keys, owner]), lease_s)
        if dead:
            self._take_over(dead)
        # In key order: two sessions inserting overlapping keys in different orders could deadlock.
        won = {k for (k,) in self._execute(
            f"INSERT INTO {TABLE} (request_key, owner, heartbeat) SELECT k, %s, %s FROM unnest(%s::text[]) k"
            f" ON CONFLICT (request_key) DO NOTHING RETURNING request_key", [owner, time.time(), sorted(set(keys))])}
        if not won:
            return won
        try:   # answered after the caller's lookup and before this claim: let it go
            with self.store.connect(read_only=True) as conn:
                answered = [k for (k,) in conn.execute(
                    "SELECT request_key FROM completions WHERE request_key IN (SELECT unnest(?::VARCHAR[]))",
                    [sorted(won)]).fetchall()]
        except BaseException:   # the caller never learns of these claims: give them back
            try:
                self._execute(f"DELETE FROM {TABLE} WHERE owner = %s AND request_key = ANY(%s)", [owner, sorted(won)])
            except MedhelmError:   # (then they go with the owner's release or lease; the first error is the one to see)
                pass
            raise
        if answered:
            self._execute(f"DELETE FROM {TABLE} WHERE owner = %s AND request_key = ANY(%s)", [owner, answered])
            won.difference_update(answered)
        return won

    def commit(self, owner: str, settled: list[str], write: Write) -> None:
        """`write` in a store transaction; once it committed, the settled claims are dropped and the
        owner's others get a fresh heartbeat."""
        with self.store.transaction() as conn:
            write(conn)
        try:
            self._execute(f"DELETE FROM {TABLE} WHERE owner = %s AND request_key = ANY(%s);"
                          f" UPDATE {TABLE} SET heartbeat = %s WHERE owner = %s", [owner, settled, time.time(), owner])
        except MedhelmError:
            # The write is in: failing here would have the caller write it again. A settled claim
            # left behind is harmless for an answer (answers are looked up before any claim) and
            # holds back another process's retry of a failed request only until the owner's
            # release; the next heartbeat says whether the catalog is back.
            pass

    def heartbeat(self, owner: str) -> None:
        self._execute(f"UPDATE {TABLE} SET heartbeat = %s WHERE owner = %s", [time.time(), owner])

    def release(self, owner: str) -> None:
        self._execute(f"DELETE FROM {TABLE} WHERE owner = %s", [owner])

    def dead_owners(self, lease_s: float = 120.0) -> list[str]:
        """Every owner of a claim that is dead."""
        return _dead(self._execute(f"SELECT owner, max(heartbeat) FROM {TABLE} GROUP BY owner", []), lease_s)

    def drop(self, claimants: list[str]) -> None:
        """Drop the claims of these owners (dead ones, once the store replayed their journals)."""
        if claimants:
            self._execute(f"DELETE FROM {TABLE} WHERE owner = ANY(%s)", [claimants])

    def close(self) -> None:
        self._session.close()
