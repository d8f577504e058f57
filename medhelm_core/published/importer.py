"""Import a published HELM `benchmark_output` (a release or a suite) into DuckDB, incrementally.

    listing  →  plan (manifest: unchanged objects are skipped)  →  concurrent fetch  →  ingest in
    batches, one transaction each (data rows + manifest rows together)  →  finalize (runs/run_stats,
    published leaderboard cells, problems)

A batch either commits whole or not at all, and every object's rows are replaced (delete, then
insert), so an import killed at any point resumes where the last committed batch ended and never
duplicates a row.  A corrupt object is recorded in the manifest with its error (and not fetched
again until it changes); its run is left out, like a run directory without stats.json, and both
are listed in `published_problems` and in the report.

Large files (per_instance_stats.json, scenario_state.json) are parsed by DuckDB's JSON reader
straight from disk: the source file itself for a local folder, a staging copy for anything else.
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
from typing import Any, Callable, Iterable, Optional

import duckdb
import pandas as pd

from medhelm_core.registry import MedhelmError
from medhelm_core.store import Store, insert_rows
from medhelm_core.summarize.tables import STAT_COLUMNS, stat_rows

from .source import ObjectInfo, Source, decode_bytes, is_gzip
from .tables import ensure_published_tables

DOC_FILES = {"summary.json": "summary", "schema.json": "schema", "groups.json": "groups",
             "runs_to_run_suites.json": "runs_to_run_suites"}
RUN_FILES = {"run_spec.json": "run_spec", "stats.json": "stats", "per_instance_stats.json": "per_instance_stats",
             "scenario_state.json": "scenario_state"}
KIND_ORDER = ["summary", "schema", "groups", "runs_to_run_suites", "group_table", "run_spec", "stats",
              "per_instance_stats", "scenario_state"]
LARGE_KINDS = {"per_instance_stats", "scenario_state"}
SKIPPED_DIRS = {"eval_cache", "groups"}   # HELM's read_runs_for_suite skips these

BATCH_OBJECTS = 64
BATCH_BYTES = 192 * 1024 * 1024
MAX_JSON_OBJECT = 4 * 1024 * 1024 * 1024 - 1

STAT_STRUCT = ("STRUCT(name STRUCT(name VARCHAR, split VARCHAR, sub_split VARCHAR, perturbation JSON), "
               "count BIGINT, sum DOUBLE, sum_squared DOUBLE, min DOUBLE, max DOUBLE, mean DOUBLE, "
               "variance DOUBLE, stddev DOUBLE)")
REQUEST_STATE_STRUCT = ("STRUCT(instance JSON, reference_index INTEGER, request_mode VARCHAR, "
                        "train_trial_index INTEGER, output_mapping JSON, request JSON, result JSON, "
                        "num_train_instances INTEGER, prompt_truncated BOOLEAN, num_conditioning_tokens INTEGER, "
                        "annotations JSON)")


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
                           f"a suite without a release can be imported with --suite)")
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
    data: Optional[bytes] = None     # small objects
    path: Optional[str] = None       # large objects: a file DuckDB reads
    gz: bool = False
    temp: bool = False
    nbytes: int = 0
    missing: bool = False


class Importer:
    """One import of one target into one store."""

    def __init__(self, store: Store, source: Source, release: Optional[str] = None, suite: Optional[str] = None,
                 with_completions: bool = False, per_instance: bool = True, jobs: int = 16,
                 suite_prefix: str = "", progress: Optional[Callable[[str], None]] = None,
                 crash_after: Optional[int] = None):
        self.store, self.source = store, source
        self.release, self.suite = release, suite
        self.kinds = wanted_kinds(per_instance, with_completions)
        self.jobs = max(1, jobs)
        self.suite_prefix = suite_prefix or ""
        self.progress = progress or (lambda msg: None)
        env_crash = os.environ.get("MEDHELM_IMPORT_CRASH_AFTER")   # test hook: simulate a kill mid-import
        self.crash_after = crash_after if crash_after is not None else (int(env_crash) if env_crash else None)
        self._processed = 0
        self._summary_bytes: dict[str, bytes] = {}
        self.staging = Path(store.path).parent / ".published_staging"

    # -- helpers -------------------------------------------------------------------------------
    def local_suite(self, suite: str) -> str:
        return f"{self.suite_prefix}{suite}"

    def _manifest(self, conn) -> dict[str, tuple[str, int, str]]:
        rows = conn.execute("SELECT key, version, size, status FROM published_objects WHERE source = ?",
                            [self.source.uri]).fetchall()
        return {k: (v, s, st) for k, v, s, st in rows}

    def _read_summary(self, obj: ObjectInfo) -> bytes:
        with self.store.connect() as conn:
            ensure_published_tables(conn)
            row = conn.execute("SELECT version, size FROM published_objects WHERE source = ? AND key = ? "
                               "AND status = 'ok'", [self.source.uri, obj.key]).fetchone()
            if row and row[0] == obj.version and row[1] == obj.size:
                doc = conn.execute("SELECT content FROM published_documents WHERE key = ?", [obj.key]).fetchone()
                if doc:
                    return doc[0].encode()
        data = self.source.fetch(obj)
        self._summary_bytes[obj.key] = data
        return data

    # -- the import ------------------------------------------------------------------------------
    def run(self) -> ImportReport:
        start = time.time()
        listing = list_target(self.source, self.release, self.suite, self.kinds, self._read_summary)
        local = [self.local_suite(s) for s in listing.suites]
        report = ImportReport(listing.target, listing.mode, self.source.uri, listing.suites, local,
                              data_version=listing.data_version())
        wanted = listing.wanted()
        report.listed = len(wanted)
        with self.store.transaction() as conn:
            ensure_published_tables(conn)
            self._check_suite_names(conn, listing)
            manifest = self._manifest(conn)
            report.removed = self._remove_vanished(conn, listing, manifest)
        todo = []
        for p in wanted:
            m = manifest.get(p.obj.key)
            if m and m[0] == p.obj.version and m[1] == p.obj.size and m[2] in ("ok", "corrupt"):
                report.unchanged += 1
            else:
                todo.append(p)
        todo.sort(key=lambda p: (KIND_ORDER.index(p.kind), p.obj.key))
        if todo:
            self.progress(f"{len(todo)} of {len(wanted)} objects to fetch ({sum(p.obj.size for p in todo) / 1e6:.1f} MB)")
        self._fetch_and_ingest(todo, report)
        with self.store.transaction() as conn:
            report.runs = self._finalize(conn, listing, report)
            report.problems = self._problems(conn, listing)
        report.seconds = time.time() - start
        return report

    def _check_suite_names(self, conn, listing: Listing) -> None:
        """Refuse to put published runs under a suite name that holds the user's own runs."""
        for s in dict.fromkeys(listing.suites):
            loc = self.local_suite(s)
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
                    f"suite {loc!r} in {self.store.path} holds your own runs; import the published suite under "
                    f"another name, e.g. --suite-prefix published- (it then appears as 'published-{s}')")

    def _remove_vanished(self, conn, listing: Listing, manifest: dict) -> int:
        """Objects imported before that are no longer in the bucket: drop their rows."""
        gone = [k for k in manifest if any(k.startswith(p) for p in listing.prefixes) and k not in listing.listed_keys]
        if not gone:
            return 0
        run_keys, docs = [], []
        for k in gone:
            for s in dict.fromkeys(listing.suites):
                c = classify_run(k, s)
                if c:
                    run_keys.append((s, c[1], c[0]))
            c = classify_doc(k, listing.doc_prefix)
            if c:
                docs.append(c[1])
        for s, r, kind in run_keys:
            for table in _TABLES_OF_KIND[kind]:
                conn.execute(f"DELETE FROM {table} WHERE suite = ? AND run_name = ?", [s, r])
        for d in docs:
            conn.execute("DELETE FROM published_documents WHERE target = ? AND name = ?", [listing.target, d])
        conn.executemany("DELETE FROM published_objects WHERE source = ? AND key = ?",
                         [(self.source.uri, k) for k in gone])
        return len(gone)

    # -- fetching --------------------------------------------------------------------------------
    def _fetch_one(self, p: Planned) -> Fetched:
        try:
            if p.kind in LARGE_KINDS:
                local = self.source.local_path(p.obj.key)
                if local is not None:
                    with open(local, "rb") as f:
                        gz = is_gzip(f.read(2))
                    return Fetched(p, path=local, gz=gz, nbytes=p.obj.size)
                data = self.source.fetch(p.obj)
                gz = is_gzip(data)
                self.staging.mkdir(parents=True, exist_ok=True)
                fd, path = tempfile.mkstemp(suffix=".json.gz" if gz else ".json", dir=self.staging)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                return Fetched(p, path=path, gz=gz, temp=True, nbytes=len(data))
            data = self._summary_bytes.pop(p.obj.key, None)
            if data is None:
                data = self.source.fetch(p.obj)
            return Fetched(p, data=data, nbytes=len(data))
        except FileNotFoundError:
            return Fetched(p, missing=True)

    def _batches(self, todo: list[Planned]) -> list[list[Planned]]:
        batches, cur, size = [], [], 0
        for p in todo:
            if cur and (len(cur) >= BATCH_OBJECTS or size + p.obj.size > BATCH_BYTES):
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
        batches = self._batches(todo)
        done = 0
        with ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="medhelm-fetch") as pool:
            pending: deque = deque()
            it = iter(batches)
            for _ in range(2):   # keep the next batch downloading while one is ingested
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
                    try:
                        self._ingest(fetched)
                    finally:
                        for f in fetched:
                            if f.temp and f.path:
                                try:
                                    os.unlink(f.path)
                                except OSError:
                                    pass
                    got = [f for f in fetched if not f.missing]
                    report.fetched += len(got)
                    report.bytes_fetched += sum(f.nbytes for f in got)
                    done += len(fetched)
                    self.progress(f"{done}/{len(todo)} objects ingested")
            except BaseException:
                for futs in pending:
                    for f in futs:
                        f.cancel()
                raise
        shutil.rmtree(self.staging, ignore_errors=True)

    # -- ingesting -------------------------------------------------------------------------------
    def _ingest(self, fetched: list[Fetched]) -> None:
        with self.store.transaction() as conn:
            ensure_published_tables(conn)
            manifest_rows: list[tuple] = []
            by_kind: dict[str, list[Fetched]] = {}
            for f in fetched:
                if f.missing:   # vanished between listing and fetching: it is simply not there
                    continue
                by_kind.setdefault(f.planned.kind, []).append(f)
            for kind in KIND_ORDER:
                items = by_kind.get(kind)
                if not items:
                    continue
                if kind in LARGE_KINDS:
                    errors = self._ingest_large(conn, kind, items)
                else:
                    errors = self._ingest_small(conn, kind, items)
                for f in items:
                    err = errors.get(f.planned.obj.key)
                    o = f.planned.obj
                    manifest_rows.append((self.source.uri, o.key, kind, o.version, o.size,
                                          "corrupt" if err else "ok", err))
                    self._processed += 1
                    if self.crash_after is not None and self._processed >= self.crash_after:
                        sys.stderr.write(f"medhelm-import: simulated crash after {self._processed} objects\n")
                        sys.stderr.flush()
                        os._exit(75)
            keys = pd.DataFrame({"source": [r[0] for r in manifest_rows], "key": [r[1] for r in manifest_rows]})
            conn.register("_manifest_keys", keys)
            try:
                conn.execute("DELETE FROM published_objects WHERE (source, key) IN "
                             "(SELECT source, key FROM _manifest_keys)")
            finally:
                conn.unregister("_manifest_keys")
            insert_rows(conn, "published_objects", ["source", "key", "kind", "version", "size", "status", "error"],
                        manifest_rows)

    def _delete_runs(self, conn, tables: Iterable[str], runs: list[tuple[str, str]]) -> None:
        if not runs:
            return
        frame = pd.DataFrame(runs, columns=["suite", "run_name"])
        conn.register("_runs_keys", frame)
        try:
            for t in tables:
                conn.execute(f"DELETE FROM {t} WHERE (suite, run_name) IN (SELECT suite, run_name FROM _runs_keys)")
        finally:
            conn.unregister("_runs_keys")

    def _ingest_small(self, conn, kind: str, items: list[Fetched]) -> dict[str, str]:
        errors: dict[str, str] = {}
        parsed: list[tuple[Fetched, Any, str]] = []
        for f in items:
            try:
                text = decode_bytes(f.data).decode("utf-8")
                obj = json.loads(text)
                if kind == "run_spec" and not (isinstance(obj, dict) and isinstance(obj.get("name"), str)):
                    raise ValueError("not a HELM run spec (no 'name')")
                if kind == "stats":
                    if not isinstance(obj, list):
                        raise ValueError("not a list of stats")
                    rows = stat_rows(f.planned.suite, f.planned.run_name, obj)
                    obj = rows
                parsed.append((f, obj, text))
            except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError, EOFError, OSError) as e:
                errors[f.planned.obj.key] = f"{type(e).__name__}: {e}"[:500]
        if kind in ("run_spec", "stats"):
            self._delete_runs(conn, _TABLES_OF_KIND[kind], [(f.planned.suite, f.planned.run_name) for f in items])
        if kind == "run_spec":
            rows = []
            for f, spec, text in parsed:
                adapter = spec.get("adapter_spec") or {}
                rows.append((f.planned.suite, f.planned.run_name, spec["name"], adapter.get("model"),
                             adapter.get("model_deployment"), list(spec.get("groups") or []), text,
                             self.source.display(f"runs/{f.planned.suite}/{f.planned.run_name}")))
            insert_rows(conn, "published_runs", ["suite", "run_name", "spec_name", "model", "model_deployment",
                                                 "groups", "run_spec", "run_path"], rows)
        elif kind == "stats":
            rows = [r for _, srows, _ in parsed for r in srows]
            if rows:
                frame = pd.DataFrame(rows, columns=STAT_COLUMNS).astype({"ordinal": "int32", "count": "int64"})
                for c in ("sum", "sum_squared", "min", "max", "mean", "variance", "stddev"):
                    frame[c] = frame[c].astype("float64")
                conn.register("_stats_in", frame)
                try:
                    conn.execute(f"INSERT INTO published_run_stats SELECT {', '.join(STAT_COLUMNS)} FROM _stats_in")
                finally:
                    conn.unregister("_stats_in")
        else:   # documents
            target = self.release or self.suite
            names = [f.planned.doc_name for f in items]
            conn.executemany("DELETE FROM published_documents WHERE target = ? AND name = ?",
                             [(target, n) for n in names])
            insert_rows(conn, "published_documents", ["target", "name", "key", "content"],
                        [(target, f.planned.doc_name, f.planned.obj.key, text) for f, _, text in parsed])
        return errors

    def _ingest_large(self, conn, kind: str, items: list[Fetched]) -> dict[str, str]:
        self._delete_runs(conn, _TABLES_OF_KIND[kind], [(f.planned.suite, f.planned.run_name) for f in items])
        errors: dict[str, str] = {}
        groups: dict[bool, list[Fetched]] = {}
        for f in items:
            groups.setdefault(f.gz, []).append(f)
        for gz, group in groups.items():
            try:
                self._read_large(conn, kind, group, gz)
            except duckdb.Error:
                # find the bad file(s): one by one (a failed statement inside a transaction aborts
                # it, so each attempt runs inside a savepoint-like retry of the whole group)
                conn.execute("ROLLBACK")
                raise _RetryPerFile() from None
        return errors

    def _read_large(self, conn, kind: str, group: list[Fetched], gz: bool) -> None:
        files = pd.DataFrame({"path": [f.path for f in group], "suite": [f.planned.suite for f in group],
                              "run_name": [f.planned.run_name for f in group]})
        conn.register("_files", files)
        paths = "[" + ", ".join(_sql_str(f.path) for f in group) + "]"
        comp = "'gzip'" if gz else "'none'"
        try:
            if kind == "per_instance_stats":
                conn.execute(f"""
                    INSERT INTO published_instance_stats
                    WITH e AS (
                        SELECT filename, ordinality AS o, instance_id, train_trial_index, perturbation, stats
                        FROM read_json({paths}, format = 'array', filename = true, compression = {comp},
                                       maximum_object_size = {MAX_JSON_OBJECT},
                                       columns = {{instance_id: 'VARCHAR', train_trial_index: 'INTEGER',
                                                   perturbation: 'JSON', stats: '{STAT_STRUCT}[]'}})
                        WITH ORDINALITY),
                    e2 AS (SELECT *, o - min(o) OVER (PARTITION BY filename) AS entry_pos FROM e),
                    u AS (SELECT filename, entry_pos, instance_id, train_trial_index, perturbation AS ipert,
                                 generate_subscripts(stats, 1) - 1 AS ordinal, unnest(stats) AS st FROM e2)
                    SELECT f.suite, f.run_name, CAST(u.entry_pos AS INTEGER), u.instance_id, u.train_trial_index,
                           u.ipert, CAST(u.ordinal AS INTEGER), u.st.name.name, u.st.name.split, u.st.name.sub_split,
                           u.st.name.perturbation, u.st.name.perturbation ->> 'name',
                           u.st.count, u.st.sum, u.st.sum_squared, u.st.min, u.st.max, u.st.mean, u.st.variance,
                           u.st.stddev
                    FROM u JOIN _files f ON f.path = u.filename""")
            else:
                conn.execute(f"""
                    CREATE OR REPLACE TEMP TABLE _states AS
                    WITH f AS (
                        SELECT filename, request_states
                        FROM read_json({paths}, format = 'unstructured', filename = true, compression = {comp},
                                       maximum_object_size = {MAX_JSON_OBJECT},
                                       columns = {{adapter_spec: 'JSON', request_states: '{REQUEST_STATE_STRUCT}[]'}})),
                    u AS (SELECT filename, generate_subscripts(request_states, 1) - 1 AS position,
                                 unnest(request_states) AS rs FROM f)
                    SELECT fl.suite, fl.run_name, CAST(u.position AS INTEGER) AS position, u.rs.* FROM u
                    JOIN _files fl ON fl.path = u.filename""")
                conn.execute("""
                    INSERT INTO published_completions
                    SELECT suite, run_name, position, instance ->> 'id', instance ->> 'split', train_trial_index,
                           reference_index, request_mode, request ->> 'model_deployment', request ->> 'prompt',
                           result -> '$.completions[0]' ->> 'text', CAST(result ->> 'success' AS BOOLEAN),
                           instance, output_mapping, request, result, num_train_instances, prompt_truncated,
                           num_conditioning_tokens
                    FROM _states""")
                conn.execute("""
                    INSERT INTO published_annotations
                    SELECT suite, run_name, position, instance_id, annotator, annotations -> ('$."' || annotator || '"')
                    FROM (SELECT suite, run_name, position, instance ->> 'id' AS instance_id, annotations,
                                 unnest(json_keys(annotations)) AS annotator
                          FROM _states WHERE annotations IS NOT NULL AND json_type(annotations) = 'OBJECT')""")
                conn.execute("DROP TABLE _states")
        finally:
            conn.unregister("_files")


class _RetryPerFile(Exception):
    """A large-file group failed to parse: redo the batch, checking files one by one."""


_TABLES_OF_KIND = {
    "run_spec": ["published_runs"],
    "stats": ["published_run_stats"],
    "per_instance_stats": ["published_instance_stats"],
    "scenario_state": ["published_completions", "published_annotations"],
    "summary": [], "schema": [], "groups": [], "runs_to_run_suites": [], "group_table": [],
}


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"
