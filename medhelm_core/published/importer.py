"""Import a published HELM `benchmark_output` (a release or a suite) into DuckDB, incrementally.

    listing  →  plan (manifest: unchanged objects are skipped)  →  concurrent fetch  →  ingest in
    batches (data rows + manifest rows together) in a transaction committed every 30 s (on a
    DuckLake: after every batch)  →  the jury's annotation entries of the ingested request states
    →  finalize (runs/run_stats, published leaderboard cells, problems)

A transaction commits whole or not at all, and every object's rows are replaced (delete, then
insert), so an import killed at any point resumes where the last commit ended and never
duplicates a row; runs whose request states committed without their annotation entries get them
from the next import.  A corrupt object is recorded in the manifest with its error (and not fetched
again until it changes); its run is left out, like a run directory without stats.json, and both
are listed in `published_problems` and in the report.

Every object is parsed by DuckDB's JSON reader straight from disk (no Python JSON on the way):
the source file itself for a local folder, a staging copy of the fetched bytes for anything else.
Gzip-compressed objects are recognised by their magic number and read with compression='gzip'.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional

import duckdb

from medhelm_core.errors import MedhelmError
from medhelm_core.owners import HOST, new_owner_id, owner_alive
from medhelm_core.storage import on_ducklake
from medhelm_core.store import Store, in_transaction, sql_str

from .rows import insert_json_rows
from .source import ObjectInfo, Source, decode_bytes, is_gzip
from .leaderboard import store_published_cells
from .tables import IMPORT_MEMORY_LIMIT, STAT_STRUCT, bound_memory, ensure_published_tables, memory_bound, unbound_memory

DOC_FILES = {"summary.json": "summary", "schema.json": "schema", "groups.json": "groups",
             "runs_to_run_suites.json": "runs_to_run_suites"}
RUN_FILES = {"run_spec.json": "run_spec", "stats.json": "stats", "per_instance_stats.json": "per_instance_stats",
             "scenario_state.json": "scenario_state"}
KIND_ORDER = ["summary", "schema", "groups", "runs_to_run_suites", "group_table", "run_spec", "stats",
              "per_instance_stats", "scenario_state"]
LARGE_KINDS = {"per_instance_stats", "scenario_state"}
SKIPPED_DIRS = {"eval_cache", "groups"}   # HELM's read_runs_for_suite skips these

BATCH_OBJECTS = int(os.environ.get("MEDHELM_IMPORT_BATCH_OBJECTS", "1024"))
BATCH_BYTES = 128 * 1024 * 1024
COMMIT_SECONDS = float(os.environ.get("MEDHELM_IMPORT_COMMIT_SECONDS", "30"))   # an open transaction's
COMMIT_BYTES = 4 * 1024 * 1024 * 1024   # age and fetched bytes (kept on disk until it commits) at most
MAX_JSON_OBJECT = 4 * 1024 * 1024 * 1024 - 1

REQUEST_STATE_STRUCT = ("STRUCT(instance JSON, reference_index INTEGER, request_mode VARCHAR, "
                        "train_trial_index INTEGER, output_mapping JSON, request JSON, result JSON, "
                        "num_train_instances INTEGER, prompt_truncated BOOLEAN, num_conditioning_tokens INTEGER, "
                        "annotations JSON)")


STAGING = ".published_staging"   # under the output path: one folder per running import


def staging_root(store: Store) -> Path:
    return Path(store.scratch_dir) / STAGING


def staging_name() -> str:
    """`<host>_<pid>_<process start>_<nonce>`: whose folder it is, so that a later import can tell
    a dead owner's folder (removed) from a running one's (kept)."""
    _, pid, start, nonce = new_owner_id().split("|")
    return "_".join([_host_tag(), pid, start, nonce])


def _host_tag() -> str:
    return HOST.replace("_", "-").replace("/", "-") or "-"


def remove_stale_staging(root: Path) -> None:
    """Remove the staging folders of imports that are no longer running on this host (killed ones);
    a running import's folder, this process's and those of other hosts are left alone."""
    try:
        children = list(root.iterdir())
    except OSError:
        return
    for child in children:
        parts = child.name.rsplit("_", 3)
        if len(parts) != 4 or not parts[1].isdigit() or not child.is_dir() or child.is_symlink():
            continue
        if int(parts[1]) == os.getpid() or parts[0] != _host_tag():
            continue
        if not owner_alive("|".join([HOST, *parts[1:]])):
            shutil.rmtree(child, ignore_errors=True)


# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Planned:
    obj: ObjectInfo
    kind: str
    suite: Optional[str] = None      # run objects: published suite and run directory
    run_name: Optional[str] = None
    doc_name: Optional[str] = None   # documents: path below the target folder ('groups/x.json')


@dataclass
class Listing:
    target: str
    mode: str                        # 'release' | 'suite'
    doc_prefix: str
    suites: list[str]                # as in summary.json (duplicates kept)
    summary: dict
    docs: list[Planned]
    runs: list[Planned]              # run objects of the wanted kinds
    listed_keys: set[str]            # every object under the listed prefixes (any kind)
    prefixes: list[str]

    def wanted(self) -> list[Planned]:
        return self.docs + self.runs

    def data_version(self) -> str:
        h = hashlib.sha256()
        for p in sorted(self.wanted(), key=lambda p: p.obj.key):
            h.update(f"{p.obj.key}\t{p.obj.version}\t{p.obj.size}\n".encode())
        return h.hexdigest()[:32]


@dataclass
class Problem:
    key: str
    uri: str
    problem: str                      # 'corrupt' | 'missing'
    message: str

    def line(self) -> str:
        return f"{self.problem}: {self.uri}: {self.message}"


@dataclass
class ImportReport:
    target: str
    mode: str
    source: str
    suites: list[str]
    local_suites: list[str]
    listed: int = 0
    fetched: int = 0
    unchanged: int = 0
    bytes_fetched: int = 0
    removed: int = 0
    runs: int = 0
    problems: list[Problem] = field(default_factory=list)
    data_version: str = ""
    seconds: float = 0.0

    def summary_line(self) -> str:
        return (f"imported {self.mode} {self.target} from {self.source}: {self.runs} runs in "
                f"{len(dict.fromkeys(self.suites))} suite(s); objects: {self.listed} listed, {self.fetched} fetched "
                f"({self.bytes_fetched / 1e6:.1f} MB), {self.unchanged} unchanged, {self.removed} removed; "
                f"{len(self.problems)} problem(s); {self.seconds:.1f}s")


# ----------------------------------------------------------------------------------------------
def classify_doc(key: str, prefix: str) -> Optional[tuple[str, str]]:
    rel = key[len(prefix):]
    if rel in DOC_FILES:
        return DOC_FILES[rel], rel
    if rel.startswith("groups/") and rel.count("/") == 1 and rel.endswith(".json"):
        return "group_table", rel
    return None


def classify_run(key: str, suite: str) -> Optional[tuple[str, str]]:
    prefix = f"runs/{suite}/"
    if not key.startswith(prefix):
        return None
    parts = key[len(prefix):].split("/")
    if len(parts) == 2 and parts[0] not in SKIPPED_DIRS and parts[1] in RUN_FILES:
        return RUN_FILES[parts[1]], parts[0]
    return None


def wanted_kinds(per_instance: bool = True, with_completions: bool = False) -> set[str]:
    kinds = set(KIND_ORDER) - LARGE_KINDS
    if per_instance:
        kinds.add("per_instance_stats")
    if with_completions:
        kinds.add("scenario_state")
    return kinds


def list_target(source: Source, release: Optional[str], suite: Optional[str], kinds: set[str],
                read_summary: Callable[[ObjectInfo], bytes]) -> Listing:
    """List what a release (or suite) consists of; `read_summary` returns summary.json's bytes."""
    if bool(release) == bool(suite):
        raise MedhelmError("give exactly one of --release R or --suite S")
    source.preflight()
    mode, target = ("release", release) if release else ("suite", suite)
    doc_prefix = f"releases/{release}/" if release else f"runs/{suite}/"
    listed = source.list(doc_prefix)
    if not listed and mode == "release":
        raise MedhelmError(f"no release {release!r} at {source.uri} (releases there: {_names(source, 'releases')}; "
                           f"suites: {_names(source, 'runs')}, each importable on its own with --suite)")
    if not listed:
        raise MedhelmError(f"no suite {suite!r} at {source.uri} (suites there: {_names(source, 'runs')})")
    docs = []
    for o in listed:
        c = classify_doc(o.key, doc_prefix)
        if c and c[0] in kinds:
            docs.append(Planned(o, c[0], doc_name=c[1]))
    summary_obj = next((p.obj for p in docs if p.kind == "summary"), None)
    if summary_obj is not None:
        try:
            summary = json.loads(decode_bytes(read_summary(summary_obj)))
        except ValueError as e:
            raise MedhelmError(f"{source.display(summary_obj.key)}: not valid JSON ({e})") from None
    elif mode == "release":
        raise MedhelmError(f"{source.display(doc_prefix + 'summary.json')} is missing: cannot tell the release's suites")
    else:
        summary = {"suites": [suite], "suite": suite}
    suites = [suite] if mode == "suite" else list(summary.get("suites") or [])
    if mode == "release" and not suites:
        raise MedhelmError(f"{source.display(doc_prefix + 'summary.json')} lists no suites")
    by_suite: dict[str, list[ObjectInfo]] = {}
    if mode == "suite":
        by_suite[suite] = listed
    for s in dict.fromkeys(suites):
        if s not in by_suite:
            by_suite[s] = source.list(f"runs/{s}/")
    runs = []
    listed_keys = {o.key for o in listed}
    for s, objs in by_suite.items():
        listed_keys.update(o.key for o in objs)
        for o in objs:
            c = classify_run(o.key, s)
            if c and c[0] in kinds:
                runs.append(Planned(o, c[0], suite=s, run_name=c[1]))
    prefixes = [doc_prefix] + [f"runs/{s}/" for s in by_suite if f"runs/{s}/" != doc_prefix]
    return Listing(target, mode, doc_prefix, suites, summary, docs, runs, listed_keys, prefixes)


def _names(source: Source, folder: str) -> str:
    try:
        names = sorted(os.path.basename(p.rstrip("/")) for p in source.fs.ls(source.full_path(folder), detail=False))
    except (FileNotFoundError, OSError):
        names = []
    return ", ".join(names) if names else "none"


# ----------------------------------------------------------------------------------------------
@dataclass
class Fetched:
    planned: Planned
    path: Optional[str] = None       # a file on this machine that DuckDB reads
    gz: bool = False
    temp: bool = False
    nbytes: int = 0
    missing: bool = False


class _ParseError(Exception):
    def __init__(self, kind: str, items: list, error: str):
        super().__init__(error)
        self.kind, self.items, self.error = kind, items, error


class Importer:
    """One import of one target into one store."""

    def __init__(self, store: Store, source: Source, release: Optional[str] = None, suite: Optional[str] = None,
                 with_completions: bool = False, per_instance: bool = True, jobs: int = 16,
                 suite_prefix: str = "", progress: Optional[Callable[[str], None]] = None,
                 crash_after: Optional[int] = None, batch_objects: int = BATCH_OBJECTS,
                 batch_bytes: int = BATCH_BYTES):
        self.store, self.source = store, source
        self.release, self.suite = release, suite
        self.kinds = wanted_kinds(per_instance, with_completions)
        self.jobs = max(1, jobs)
        self.suite_prefix = suite_prefix or ""
        self.progress = progress or (lambda msg: None)
        env_crash = os.environ.get("MEDHELM_IMPORT_CRASH_AFTER")   # test hook: simulate a kill mid-import
        self.crash_after = crash_after if crash_after is not None else (int(env_crash) if env_crash else None)
        self.batch_objects, self.batch_bytes = max(1, batch_objects), batch_bytes
        self._processed = 0
        self._prefetched: dict[str, bytes] = {}
        self._held = None                 # (context manager, connection) of the store, held across batches
        self._held_since = 0.0
        self._began: Optional[float] = None   # when the open transaction began
        self._per_batch = False                # commit every batch (a DuckLake)
        self._one_by_one: set[str] = set()     # kinds ingested one object per statement (after running out of memory)
        self._uncommitted: list[tuple[list[Fetched], dict[str, str]]] = []   # its batches
        # a folder of this import's own under the output path's staging folder: any number of
        # imports (of any output path sharing the folder) stage side by side, each removes only its own
        self.staging = staging_root(store) / staging_name()

    def local_suite(self, suite: str) -> str:
        return f"{self.suite_prefix}{suite}"

    def _make_staging(self) -> None:
        for _ in range(5):   # another import may remove the (then empty) staging root in between
            try:
                self.staging.mkdir(parents=True, exist_ok=True)
                return
            except FileNotFoundError:
                continue
        self.staging.mkdir(parents=True, exist_ok=True)

    def _clean_staging(self) -> None:
        """This import's staging folder, and the staging root if no other import uses it."""
        shutil.rmtree(self.staging, ignore_errors=True)
        try:
            self.staging.parent.rmdir()   # only when empty: another import's folder stays
        except OSError:
            pass

    # -- the import ------------------------------------------------------------------------------
    def run(self) -> ImportReport:
        start = time.time()
        self.source.preflight()
        remove_stale_staging(staging_root(self.store))
        manifest: dict = {}
        if self.store.exists():
            with self.store.connect() as conn:
                ensure_published_tables(conn)
                rows = conn.execute("SELECT key, version, size, status FROM published_objects WHERE source = ?",
                                    [self.source.uri]).fetchall()
                manifest = {k: (v, s, st) for k, v, s, st in rows}
                listing = list_target(self.source, self.release, self.suite, self.kinds,
                                      lambda obj: self._read_summary(conn, manifest, obj))
        else:   # no store yet: it is created only once the target is known to be there
            listing = list_target(self.source, self.release, self.suite, self.kinds,
                                  lambda obj: self._read_summary(None, manifest, obj))
        report = ImportReport(listing.target, listing.mode, self.source.uri, listing.suites,
                              [self.local_suite(s) for s in listing.suites], data_version=listing.data_version())
        with self.store.connect() as conn:
            ensure_published_tables(conn)
            with in_transaction(conn):
                self._check_suite_names(conn, listing)
                report.removed = self._remove_vanished(conn, listing, manifest)
        wanted = listing.wanted()
        report.listed = len(wanted)
        todo = []
        for p in wanted:
            m = manifest.get(p.obj.key)
            if m and m[0] == p.obj.version and m[1] == p.obj.size and m[2] in ("ok", "corrupt"):
                report.unchanged += 1
            else:
                todo.append(p)
        todo.sort(key=lambda p: (KIND_ORDER.index(p.kind), p.obj.key))
        if todo:
            self.progress(f"{len(todo)} of {len(wanted)} objects to fetch "
                          f"({sum(p.obj.size for p in todo) / 1e6:.1f} MB)")
        self._fetch_and_ingest(todo, report)
        with self.store.connect() as conn, memory_bound(conn):
            # the request states ingested (or left without them by an import that was killed,
            # or by an earlier version)
            fill_annotation_entries(conn)
        with self.store.transaction() as conn:
            report.runs = self._finalize(conn, listing, report)
            report.problems = self._problems(conn, listing)
        report.seconds = time.time() - start
        return report

    def _read_summary(self, conn, manifest: dict, obj: ObjectInfo) -> bytes:
        """summary.json's bytes: from the store when unchanged, else fetched (and kept for ingesting)."""
        m = manifest.get(obj.key)
        if conn is not None and m and m[0] == obj.version and m[1] == obj.size and m[2] == "ok":
            doc = conn.execute("SELECT content FROM published_documents WHERE key = ? AND name = 'summary.json'",
                               [obj.key]).fetchone()
            if doc:
                return doc[0].encode()
        data = self.source.fetch(obj)
        self._prefetched[obj.key] = data
        return data

    def _check_suite_names(self, conn, listing: Listing) -> None:
        """Refuse to put published runs under a suite name that holds the user's own runs."""
        for s in dict.fromkeys(listing.suites):
            loc = self.local_suite(s)
            if conn.execute("SELECT count(*) FROM run_entries WHERE suite = ?", [loc]).fetchone()[0]:
                raise MedhelmError(
                    f"suite {loc!r} in {self.store.where} holds your own runs (medhelm-run); import the published "
                    f"suite under another name, e.g. --suite-prefix published- (it then appears as 'published-{s}')")
            owner = conn.execute("SELECT suite FROM published_suites WHERE local_suite = ?", [loc]).fetchone()
            if owner is not None:
                if owner[0] != s:
                    raise MedhelmError(f"suite name {loc!r} already holds the published suite {owner[0]!r}; "
                                       f"choose another --suite-prefix")
                continue
            own = conn.execute("SELECT (SELECT count(*) FROM runs WHERE suite = ?) + "
                               "(SELECT count(*) FROM run_entries WHERE suite = ?)", [loc, loc]).fetchone()[0]
            if own:
                raise MedhelmError(
                    f"suite {loc!r} in {self.store.where} holds your own runs; import the published suite under "
                    f"another name, e.g. --suite-prefix published- (it then appears as 'published-{s}')")

    def _remove_vanished(self, conn, listing: Listing, manifest: dict) -> int:
        """Objects imported before that are no longer in the bucket: drop their rows."""
        gone = [k for k in manifest if any(k.startswith(p) for p in listing.prefixes) and k not in listing.listed_keys]
        for k in gone:
            for s in dict.fromkeys(listing.suites):
                c = classify_run(k, s)
                if c:
                    for table in TABLES_OF_KIND[c[0]]:
                        conn.execute(f"DELETE FROM {table} WHERE suite = ? AND run_name = ?", [s, c[1]])
            c = classify_doc(k, listing.doc_prefix)
            if c:
                conn.execute("DELETE FROM published_documents WHERE target = ? AND name = ?", [listing.target, c[1]])
            conn.execute("DELETE FROM published_objects WHERE source = ? AND key = ?", [self.source.uri, k])
        return len(gone)

    # -- after the objects ------------------------------------------------------------------------
    def _finalize(self, conn, listing: Listing, report: ImportReport) -> int:
        """Record the target, put its runs into the summarize input tables, parse its leaderboard."""
        uri = self.source.uri
        total = 0
        for s in dict.fromkeys(listing.suites):
            loc = self.local_suite(s)
            prev = conn.execute("SELECT local_suite FROM published_suites WHERE suite = ?", [s]).fetchone()
            if prev and prev[0] != loc:
                conn.execute("DELETE FROM runs WHERE suite = ?", [prev[0]])
                conn.execute("DELETE FROM run_stats WHERE suite = ?", [prev[0]])
            conn.execute("DELETE FROM runs WHERE suite = ?", [loc])
            conn.execute("DELETE FROM run_stats WHERE suite = ?", [loc])
            # a run counts when both run_spec.json and stats.json were read (HELM skips the others)
            usable = """FROM published_runs r
                JOIN published_objects o ON o.source = ? AND o.key = 'runs/' || r.suite || '/' || r.run_name || '/stats.json'
                     AND o.status = 'ok'
                WHERE r.suite = ?"""
            conn.execute(f"""INSERT INTO runs (suite, run_name, run_spec, scenario_metadata, run_path)
                SELECT ?, r.spec_name, r.run_spec, NULL, r.run_path {usable} ORDER BY r.run_name""", [loc, uri, s])
            conn.execute(f"""INSERT INTO run_stats
                SELECT ?, r.spec_name, st.ordinal, st.name, st.split, st.sub_split, st.perturbation, st.perturbation_name,
                       st.computed_on, st.count, st.sum, st.sum_squared, st.min, st.max, st.mean, st.variance, st.stddev
                {usable.replace("WHERE r.suite = ?", "JOIN published_run_stats st ON st.suite = r.suite AND st.run_name = r.run_name WHERE r.suite = ?")}
                ORDER BY r.run_name, st.ordinal""", [loc, uri, s])
            n = conn.execute("SELECT count(*) FROM runs WHERE suite = ?", [loc]).fetchone()[0]
            total += n
            conn.execute("DELETE FROM published_suites WHERE suite = ?", [s])
            conn.execute("INSERT INTO published_suites (suite, local_suite, source, runs) VALUES (?, ?, ?, ?)",
                         [s, loc, uri, n])
        conn.execute("DELETE FROM published_targets WHERE target = ?", [listing.target])
        conn.execute("INSERT INTO published_targets (target, mode, source, suites, local_suites, date, data_version) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?)",
                     [listing.target, listing.mode, uri, listing.suites, [self.local_suite(s) for s in listing.suites],
                      str(listing.summary.get("date") or ""), report.data_version])
        store_published_cells(conn, listing.target)
        return total

    def _problems(self, conn, listing: Listing) -> list[Problem]:
        out: list[Problem] = []
        wanted = {p.obj.key for p in listing.wanted()}
        for key, err in conn.execute("SELECT key, error FROM published_objects WHERE source = ? AND status = 'corrupt' "
                                     "ORDER BY key", [self.source.uri]).fetchall():
            if key in wanted:
                out.append(Problem(key, self.source.display(key), "corrupt", err or ""))
        present: dict[tuple[str, str], set[str]] = {}
        for s in dict.fromkeys(listing.suites):
            prefix = f"runs/{s}/"
            for k in listing.listed_keys:
                if not k.startswith(prefix):
                    continue
                parts = k[len(prefix):].split("/")
                if len(parts) == 2 and parts[0] not in SKIPPED_DIRS:
                    present.setdefault((s, parts[0]), set()).add(parts[1])
        for (s, d), files in sorted(present.items()):
            for needed in ("run_spec.json", "stats.json"):
                if needed not in files:
                    key = f"runs/{s}/{d}/{needed}"
                    out.append(Problem(key, self.source.display(key), "missing",
                                       "object not found; the run is left out (as helm-summarize does)"))
        conn.execute("DELETE FROM published_problems WHERE target = ?", [listing.target])
        if out:
            insert_json_rows(conn, "published_problems", [
                {"target": listing.target, "key": p.key, "uri": p.uri, "problem": p.problem, "message": p.message}
                for p in out])
        return out

    # -- fetching --------------------------------------------------------------------------------
    def _fetch_one(self, p: Planned) -> Fetched:
        """Make the object readable from local disk: the file itself, or a staged copy of its bytes."""
        try:
            local = self.source.local_path(p.obj.key)
            if local is not None and p.obj.key not in self._prefetched:
                with open(local, "rb") as f:
                    gz = is_gzip(f.read(2))
                return Fetched(p, path=local, gz=gz, nbytes=p.obj.size)
            data = self._prefetched.pop(p.obj.key, None)
            if data is None:
                data = self.source.fetch(p.obj)
            gz = is_gzip(data)
            self._make_staging()
            fd, path = tempfile.mkstemp(suffix=".json.gz" if gz else ".json", dir=self.staging)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            return Fetched(p, path=path, gz=gz, temp=True, nbytes=len(data))
        except FileNotFoundError:
            return Fetched(p, missing=True)

    def _batches(self, todo: list[Planned]) -> list[list[Planned]]:
        batches, cur, size = [], [], 0
        for p in todo:
            if cur and (len(cur) >= self.batch_objects or size + p.obj.size > self.batch_bytes):
                batches.append(cur)
                cur, size = [], 0
            cur.append(p)
            size += p.obj.size
        if cur:
            batches.append(cur)
        return batches

    def _fetch_and_ingest(self, todo: list[Planned], report: ImportReport) -> None:
        if not todo:
            return
        try:
            self._fetch_and_ingest_batches(todo, report)
        finally:   # after the pool has ended: no fetch of this import writes here any more
            self._clean_staging()

    def _fetch_and_ingest_batches(self, todo: list[Planned], report: ImportReport) -> None:
        batches = self._batches(todo)
        done = 0
        with ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="medhelm-fetch") as pool:
            pending: deque = deque()
            it = iter(batches)
            for _ in range(2):   # the next batch downloads while one is ingested
                b = next(it, None)
                if b is not None:
                    pending.append([pool.submit(self._fetch_one, p) for p in b])
            try:
                while pending:
                    futs = pending.popleft()
                    fetched = [f.result() for f in futs]
                    b = next(it, None)
                    if b is not None:
                        pending.append([pool.submit(self._fetch_one, p) for p in b])
                    self._ingest(fetched)
                    got = [f for f in fetched if not f.missing]
                    report.fetched += len(got)
                    report.bytes_fetched += sum(f.nbytes for f in got)
                    done += len(fetched)
                    self.progress(f"{done}/{len(todo)} objects ingested")
                self._commit()
            except BaseException:
                for futs in pending:
                    for f in futs:
                        f.cancel()
                self._abort()
                raise
            finally:
                self._release()

    # -- ingesting -------------------------------------------------------------------------------
    def _ingest(self, fetched: list[Fetched]) -> None:
        """Ingest one batch into the open transaction; commit it and give the store back after
        COMMIT_SECONDS or COMMIT_BYTES (on a DuckLake, commit after every batch).

        One transaction spans many batches because DuckDB writes a large append to disk as it goes
        (compressed, in parallel) only once a whole row group (122,880 rows) of it is there: a
        commit of fewer rows writes them through its log and a checkpoint instead, which took half
        of a full-size import. Files DuckDB cannot parse are found one by one in a scratch
        database and recorded as corrupt; the failed statement aborts the transaction, so every
        batch of it is ingested again, without them (their files are kept until the commit)."""
        batch = (fetched, {f.planned.obj.key: EMPTY_OBJECT for f in fetched if _is_empty(f)})   # and its corrupt objects
        self._uncommitted.append(batch)
        todo, first = [batch], True
        while todo:
            items, bad = todo[0]
            try:
                self._ingest_batch(self._open_transaction(), items, bad, count=first)
                todo.pop(0)
            except _ParseError as e:
                self._rollback()
                first = False
                found = {k: v for k, v in self._probe(e.kind, e.items).items() if k not in bad}
                if not found and _out_of_memory(e.error) and e.kind not in self._one_by_one:
                    self._one_by_one.add(e.kind)   # each fits alone: ingest them one at a time
                elif not found and _out_of_memory(e.error) and len(e.items) == 1:
                    found = {e.items[0].planned.obj.key: _too_large(e.items[0])}
                elif not found:
                    first_uri = self.source.display(e.items[0].planned.obj.key)
                    more = f" and {len(e.items) - 1} more" if len(e.items) > 1 else ""
                    raise MedhelmError(f"cannot ingest {len(e.items)} {e.kind} object(s) ({first_uri}{more}): "
                                       f"{e.error}") from None
                bad.update(found)
                todo = list(self._uncommitted)
        staged = sum(f.nbytes for fetched, _ in self._uncommitted for f in fetched if f.temp)
        due = time.time() - self._held_since > COMMIT_SECONDS or staged > COMMIT_BYTES
        if due or self._per_batch:
            self._commit(release=due)   # giving the store back: other writers get their turn

    def _open_transaction(self):
        """The held store connection, in a transaction. One connection across batches: closing
        one checkpoints the file, which costs more than a batch."""
        if self._held is None:
            cm = self.store.connect()
            conn = cm.__enter__()
            self._held, self._held_since = (cm, conn), time.time()
            try:
                bound_memory(conn)
                ensure_published_tables(conn)
                # A DuckLake writes each insert's Parquet files as it goes, whatever the commit's
                # size: there, a transaction per batch holds the least in memory.
                self._per_batch = on_ducklake(conn)
            except BaseException:
                self._release()
                raise
        conn = self._held[1]
        if self._began is None:
            conn.execute("BEGIN TRANSACTION")
            self._began = time.time()
        return conn

    def _commit(self, release: bool = True) -> None:
        if self._began is not None:
            self._held[1].execute("COMMIT")
            self._began = None
        self._forget_uncommitted()
        if release:
            self._release()

    def _rollback(self) -> None:
        if self._began is not None:
            self._began = None
            self._held[1].execute("ROLLBACK")

    def _abort(self) -> None:
        """After a failure: nothing of the open transaction stays (and no error of this hides it)."""
        try:
            self._rollback()
        except duckdb.Error:   # (a connection that failed has no transaction left to roll back)
            pass
        finally:
            self._forget_uncommitted()

    def _forget_uncommitted(self) -> None:
        for fetched, _ in self._uncommitted:
            for f in fetched:
                if f.temp and f.path:
                    try:
                        os.unlink(f.path)
                    except OSError:
                        pass
        self._uncommitted = []

    def _release(self) -> None:
        if self._held is not None:
            cm, conn = self._held
            self._held = None
            try:
                unbound_memory(conn)
            except Exception:   # (a failed connection: the error that ended the import is the one to see)
                pass
            finally:
                cm.__exit__(None, None, None)

    def _ingest_batch(self, conn, fetched: list[Fetched], bad: dict[str, str], count: bool) -> None:
        """One batch's rows and manifest entries, in the open transaction (`count`: a batch seen
        for the first time, counted for the test hook that simulates a kill)."""
        manifest_rows: list[dict] = []
        by_kind: dict[str, list[Fetched]] = {}
        for f in fetched:
            if not f.missing:   # vanished between listing and fetching: simply not there
                by_kind.setdefault(f.planned.kind, []).append(f)
        for kind in KIND_ORDER:
            items = by_kind.get(kind)
            if not items:
                continue
            good = [f for f in items if f.planned.obj.key not in bad]
            if kind in TABLES_OF_KIND and TABLES_OF_KIND[kind]:
                self._delete_runs(conn, TABLES_OF_KIND[kind], [(f.planned.suite, f.planned.run_name) for f in items])
            else:
                target = self.release or self.suite
                for f in items:
                    conn.execute("DELETE FROM published_documents WHERE target = ? AND name = ?",
                                 [target, f.planned.doc_name])
            if good:
                self._insert(conn, kind, good)
            for f in items:
                o = f.planned.obj
                err = bad.get(o.key)
                manifest_rows.append({"source": self.source.uri, "key": o.key, "kind": kind, "version": o.version,
                                      "size": o.size, "status": "corrupt" if err else "ok", "error": err})
                if count:
                    self._processed += 1
                if self.crash_after is not None and self._processed >= self.crash_after:
                    sys.stderr.write(f"medhelm-import: simulated crash after {self._processed} objects\n")
                    sys.stderr.flush()
                    os._exit(75)
        if manifest_rows:
            insert_json_rows(conn, "_manifest_keys", manifest_rows, temp=True)
            conn.execute("DELETE FROM published_objects WHERE (source, key) IN (SELECT source, key FROM _manifest_keys)")
            conn.execute("INSERT INTO published_objects (source, key, kind, version, size, status, error) "
                         "SELECT source, key, kind, version, size, status, error FROM _manifest_keys")
            conn.execute("DROP TABLE _manifest_keys")

    def _delete_runs(self, conn, tables: Iterable[str], runs: list[tuple[str, str]]) -> None:
        if not runs:
            return
        insert_json_rows(conn, "_run_keys", [{"suite": s, "run_name": r} for s, r in runs], temp=True)
        for t in tables:
            conn.execute(f"DELETE FROM {t} WHERE (suite, run_name) IN (SELECT suite, run_name FROM _run_keys)")
        conn.execute("DROP TABLE _run_keys")

    def _insert(self, conn, kind: str, good: list[Fetched]) -> None:
        insert_json_rows(conn, "_files", [{"path": f.path, "suite": f.planned.suite, "run_name": f.planned.run_name,
                                           "doc_name": f.planned.doc_name, "key": f.planned.obj.key,
                                           "run_path": (self.source.display(f"runs/{f.planned.suite}/{f.planned.run_name}")
                                                        if f.planned.suite else None)} for f in good], temp=True)
        try:
            for gz in (False, True):
                same = [f for f in good if f.gz == gz]
                for group in ([[f] for f in same] if kind in self._one_by_one else [same] if same else []):
                    self._insert_group(conn, kind, group, gz)
            conn.execute("DROP TABLE _files")
        except _ParseError:
            raise
        except duckdb.Error as e:
            raise _ParseError(kind, good, str(e).splitlines()[0]) from None

    def _insert_group(self, conn, kind: str, group: list[Fetched], gz: bool) -> None:
        """One statement over the group's files of one kind (one file, once the kind ran out of memory)."""
        paths = [f.path for f in group]
        try:
            check = CHECK_SQL.get(kind)
            if kind == "scenario_state" and self._per_batch:
                # a DuckLake: the batch's rows once into a scratch table, for the table and
                # their annotation entries (reading them back from the lake took DuckDB
                # 1.5.5 past the import's memory)
                conn.execute(f"CREATE OR REPLACE TEMP TABLE _states AS {_state_rows_sql(paths, gz)}")
                conn.execute("INSERT INTO published_request_states SELECT * FROM _states")
                conn.execute(ANNOTATION_ENTRIES_SQL.format(states="_states"))
                conn.execute("DROP TABLE _states")
            elif kind == "scenario_state":
                # straight in (a scratch table of the batch would keep DuckDB from writing
                # it out as it goes); their annotation entries are taken once the ingest
                # has committed (fill_annotation_entries): read back inside the open
                # transaction, the rows cost 2.5x as much to parse again
                conn.execute(f"INSERT INTO published_request_states {_state_rows_sql(paths, gz)}")
            elif check:   # read once into a scratch table, check it, then insert from it
                conn.execute(f"CREATE OR REPLACE TEMP TABLE _parsed AS {_select_sql(kind, paths, gz)}")
                wrong = conn.execute(check.format(src="SELECT * FROM _parsed")).fetchall()
                if wrong:
                    raise _ParseError(kind, group, f"{len(wrong)} file(s) without the expected fields")
                conn.execute(_insert_sql(kind, paths, gz, source="SELECT * FROM _parsed"))
                conn.execute("DROP TABLE _parsed")
            else:
                target = self.release or self.suite
                conn.execute(_insert_sql(kind, paths, gz), [target] if kind in DOC_KINDS else [])
        except duckdb.Error as e:
            raise _ParseError(kind, group, str(e).splitlines()[0]) from None

    def _probe(self, kind: str, items: list[Fetched]) -> dict[str, str]:
        """Read each file alone in a scratch database; return {key: error} of those that fail."""
        out = {}
        scratch = duckdb.connect()
        try:
            bound_memory(scratch)   # as the import's own connection: an object too large alone is found here
            for f in items:
                try:
                    src = _select_sql(kind, [f.path], f.gz)
                    scratch.execute(f"SELECT count(*) FROM ({src})").fetchone()
                    check = CHECK_SQL.get(kind)
                    if check and scratch.execute(check.format(src=src)).fetchall():
                        raise ValueError(EXPECTED[kind])
                except (duckdb.Error, ValueError) as e:
                    if _out_of_memory(str(e)):
                        out[f.planned.obj.key] = _too_large(f)
                        continue
                    out[f.planned.obj.key] = f"not a valid {RUN_FILE_NAME.get(kind, kind)}: {str(e).splitlines()[0]}"[:500]
        finally:
            scratch.close()
        return out


EMPTY_OBJECT = "empty file (no JSON in it): the run's data from it is missing; publish it again"


def _is_empty(f: Fetched) -> bool:
    """An object with no JSON in it (0 bytes, or only white space)."""
    if f.missing or not f.path:
        return False
    try:
        size = _plain_size(f.path, f.gz)
        if size == 0:
            return True
        if size > 64:
            return False
        if f.gz:
            import gzip

            with gzip.open(f.path, "rb") as fh:
                return not fh.read().strip()
        with open(f.path, "rb") as fh:
            return not fh.read().strip()
    except OSError:
        return False


def _out_of_memory(error: str) -> bool:
    return "out of memory" in error.lower()


def _too_large(f: Fetched) -> str:
    return (f"too large for the import's memory ({f.nbytes / 1e6:,.1f} MB; limit MEDHELM_IMPORT_MEMORY_LIMIT="
            f"{IMPORT_MEMORY_LIMIT}): left out; set MEDHELM_IMPORT_MEMORY_LIMIT higher to import it")


def fill_annotation_entries(conn, chunk_states: int = 20_000) -> int:
    """Take the annotation entries out of the request states of runs that have none, a few runs
    (about `chunk_states` request states: bounded memory) per transaction; return the runs filled.
    This is how every import on a DuckDB file fills the table, once its ingest has committed; it
    also fills runs imported before published_annotation_entries existed and those of an import
    that was killed in between. Runs whose annotations hold no object are looked at again, and
    give nothing again."""
    runs = conn.execute("""SELECT suite, run_name, count(*) FROM published_request_states r
                           WHERE annotations IS NOT NULL AND NOT EXISTS (
                               SELECT 1 FROM published_annotation_entries e
                               WHERE e.suite = r.suite AND e.run_name = r.run_name)
                           GROUP BY ALL ORDER BY ALL""").fetchall()
    chunks: list[list[dict]] = []
    size = chunk_states
    for suite, run_name, states in runs:
        if size + states > chunk_states:
            chunks.append([])
            size = 0
        chunks[-1].append({"suite": suite, "run_name": run_name})
        size += states
    for chunk in chunks:
        with in_transaction(conn):
            insert_json_rows(conn, "_fill_runs", chunk, temp=True)
            conn.execute(ANNOTATION_ENTRIES_SQL.format(states="""(
                SELECT * FROM published_request_states
                WHERE (suite, run_name) IN (SELECT suite, run_name FROM _fill_runs))"""))
            conn.execute("DROP TABLE _fill_runs")
    return len(runs)


# ----------------------------------------------------------------------------------------------
TABLES_OF_KIND = {
    "run_spec": ["published_runs"],
    "stats": ["published_run_stats"],
    "per_instance_stats": ["published_instance_entries"],
    "scenario_state": ["published_request_states", "published_annotation_entries"],
}
DOC_KINDS = {"summary", "schema", "groups", "runs_to_run_suites", "group_table"}
RUN_FILE_NAME = {v: k for k, v in RUN_FILES.items()}
EXPECTED = {"run_spec": "a JSON object with a string 'name'", "stats": "a JSON list of stats with names",
            "per_instance_stats": "a JSON list of per-instance stats"}


def _plain_size(path: str, gz: bool) -> int:
    """Bytes of JSON in a file: its size, or for gzip the trailer's ISIZE (uncompressed size mod 2^32)."""
    if not gz:
        return os.path.getsize(path)
    with open(path, "rb") as f:
        f.seek(-4, os.SEEK_END)
        return int.from_bytes(f.read(4), "little")


def _read_opts(paths: list[str], gz: bool) -> str:
    files = "[" + ", ".join(sql_str(p) for p in paths) + "]"
    # DuckDB sizes its read buffer by maximum_object_size: the largest file here, not a blanket maximum
    largest = max((_plain_size(p, gz) for p in paths), default=0)
    limit = min(MAX_JSON_OBJECT, max(16 * 1024 * 1024, largest + 1024 * 1024))
    return (f"{files}, filename = true, compression = {'gzip' if gz else 'uncompressed'!r}, "
            f"maximum_object_size = {limit}")


def _select_sql(kind: str, paths: list[str], gz: bool) -> str:
    """A SELECT over files of one kind: `filename` plus the rows the kind's table needs."""
    opts = _read_opts(paths, gz)
    if kind in DOC_KINDS or kind == "run_spec":
        return f"SELECT filename, json FROM read_json_objects({opts}, format = 'unstructured')"
    if kind == "stats":
        return f"""
            WITH e AS (SELECT filename, ordinality AS o, name, count, sum, sum_squared, min, max, mean, variance, stddev
                       FROM read_json({opts}, format = 'array',
                                      columns = {{name: 'STRUCT(name VARCHAR, split VARCHAR, sub_split VARCHAR, perturbation JSON)',
                                                  count: 'BIGINT', sum: 'DOUBLE', sum_squared: 'DOUBLE', min: 'DOUBLE',
                                                  max: 'DOUBLE', mean: 'DOUBLE', variance: 'DOUBLE', stddev: 'DOUBLE'}})
                       WITH ORDINALITY)
            SELECT *, o - min(o) OVER (PARTITION BY filename) AS ordinal FROM e"""
    if kind == "per_instance_stats":
        # the whole file as one list: positions come from the list (WITH ORDINALITY would serialize the scan)
        return f"""
            WITH f AS (
                SELECT filename, json
                FROM read_json({opts}, format = 'unstructured', records = false,
                               columns = {{json: 'STRUCT(instance_id VARCHAR, train_trial_index INTEGER, perturbation JSON, stats {STAT_STRUCT}[])[]'}})),
            e AS (SELECT filename, generate_subscripts(json, 1) - 1 AS entry_pos, unnest(json) AS e FROM f)
            SELECT filename, entry_pos, e.instance_id AS instance_id, e.train_trial_index AS train_trial_index,
                   e.perturbation AS ipert, e.stats AS stats FROM e"""
    return f"""
        WITH f AS (
            SELECT filename, request_states
            FROM read_json({opts}, format = 'unstructured',
                           columns = {{adapter_spec: 'JSON', request_states: '{REQUEST_STATE_STRUCT}[]'}}))
        SELECT filename, generate_subscripts(request_states, 1) - 1 AS position, unnest(request_states) AS rs
        FROM f"""


# rows that parse as JSON but are not what the kind must be (reported as corrupt)
CHECK_SQL = {
    "run_spec": "SELECT filename FROM ({src}) WHERE json_type(json) <> 'OBJECT' OR json_type(json -> 'name') IS DISTINCT FROM 'VARCHAR'",
    "stats": "SELECT DISTINCT filename FROM ({src}) WHERE name.name IS NULL",
}


def _insert_sql(kind: str, paths: list[str], gz: bool, source: Optional[str] = None) -> str:
    sel = source or _select_sql(kind, paths, gz)
    if kind in DOC_KINDS:
        return f"""INSERT INTO published_documents (target, name, key, content)
                   SELECT ?, fl.doc_name, fl.key, u.json FROM ({sel}) u JOIN _files fl ON fl.path = u.filename"""
    if kind == "run_spec":
        return f"""INSERT INTO published_runs
                   SELECT fl.suite, fl.run_name, u.json ->> 'name', u.json ->> '$.adapter_spec.model',
                          u.json ->> '$.adapter_spec.model_deployment',
                          coalesce(from_json(u.json -> 'groups', '["VARCHAR"]'), []), u.json, fl.run_path
                   FROM ({sel}) u JOIN _files fl ON fl.path = u.filename"""
    if kind == "stats":
        # as summarize.tables.stat_rows: a missing count/sum/sum_squared is 0
        return f"""INSERT INTO published_run_stats
                   SELECT fl.suite, fl.run_name, CAST(u.ordinal AS INTEGER), u.name.name, u.name.split, u.name.sub_split,
                          u.name.perturbation, u.name.perturbation ->> 'name', u.name.perturbation ->> 'computed_on',
                          coalesce(u.count, 0), coalesce(u.sum, 0), coalesce(u.sum_squared, 0), u.min, u.max, u.mean,
                          u.variance, u.stddev
                   FROM ({sel}) u JOIN _files fl ON fl.path = u.filename
                   ORDER BY fl.suite, fl.run_name, u.ordinal"""
    if kind == "per_instance_stats":
        return f"""INSERT INTO published_instance_entries
                   SELECT fl.suite, fl.run_name, CAST(u.entry_pos AS INTEGER), u.instance_id, u.train_trial_index,
                          u.ipert, u.stats
                   FROM ({sel}) u JOIN _files fl ON fl.path = u.filename"""
    return f"INSERT INTO published_request_states {_state_rows_sql(paths, gz)}"


def _state_rows_sql(paths: list[str], gz: bool) -> str:
    """published_request_states' rows of scenario_state.json files."""
    return f"""SELECT fl.suite, fl.run_name, CAST(u.position AS INTEGER) AS position,
                      {", ".join(f"u.rs.{c} AS {c}" for c in STATE_FIELDS)}
               FROM ({_select_sql("scenario_state", paths, gz)}) u JOIN _files fl ON fl.path = u.filename"""


# The entries of request states' annotations but the judge prompts (published_annotation_entries),
# taken out once at import so that the analytics never parse the prompts again: each annotations
# object parsed once as a map of maps (an annotator whose annotation is not an object has no
# entries; HELM's None is NULL).  Taken a few runs at a time after the ingest on a DuckDB file, and
# per batch from its scratch table on a DuckLake: over a whole suite, this two-level unnest beside
# the prompts' long strings needs more memory than the import allows (DuckDB 2.0).
ANNOTATION_ENTRIES_SQL = """
    INSERT INTO published_annotation_entries
    SELECT suite, run_name, position, instance_id, a.key, e.key, e.value
    FROM (SELECT suite, run_name, position, instance_id, a, unnest(map_entries(a.value)) AS e
          FROM (SELECT r.suite, r.run_name, r.position, r.instance ->> 'id' AS instance_id,
                       unnest(map_entries(TRY_CAST(r.annotations AS MAP(VARCHAR, MAP(VARCHAR, JSON))))) AS a
                FROM {states} r))
    WHERE e.key <> 'prompt_text'"""


STATE_FIELDS = [part.strip().split(" ")[0] for part in REQUEST_STATE_STRUCT[len("STRUCT("):-1].split(",")]
