"""What the leaderboard page shows, read from `<output-path>/medhelm.duckdb` without ever writing it.

The server must not hold DuckDB's single writer slot, nor get in the way of a pipeline that is
writing: every read opens the file read-only for the few milliseconds it takes (behind the same
file lock the pipeline's writers take, so a reader waits for a writer instead of failing), and
results are cached until the file changes. When the database is busy past the lock timeout the last
good answer is served.

Leaderboard tables are exactly helm-summarize's (`medhelm_core.summarize.write.build_group_tables`
over the SQL models). The SQL model tables in the file hold the *last* summarize target; for another
suite or release whose schema is in the file, the models are re-run on an in-memory copy of their
inputs (runs, run_stats, schema_* and model_* tables), so the file is never touched.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import duckdb
import filelock

from medhelm_core.errors import MedhelmError
from medhelm_core.storage import Storage, attach_ducklake, lake_connection
from medhelm_core.store import DB_FILENAME, sql_str, unreadable_database
from medhelm_core.summarize.analytics import analytics_models
from medhelm_core.summarize.kept import KEPT_SCHEMA
from medhelm_core.summarize.pipeline import prepare, resolve_schema, run_models
from medhelm_core.summarize.sql_models import SQL_DIR, load_sql_models
from medhelm_core.summarize.tables import SummarizeTarget
from medhelm_core.summarize.write import build_group_tables

#: Tiers whose text (prompts, references, completions, judge explanations) may leave this machine.
#: Everything else -- private, gated (data-use agreements), dspy, or unknown -- is redacted on export.
SHAREABLE_TIERS = frozenset({"public"})
REDACTED = "[redacted: private tier]"
COMPARISON_TABLE = "leaderboard_comparison"


class DataError(Exception):
    """Something the page cannot show, with a one-line reason for the user."""


def jsonable(obj: Any) -> Any:
    """Plain JSON values (NaN/inf -> None, dates -> ISO strings, JSON text kept as text)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (_dt.date, _dt.datetime)):
        return obj.isoformat()
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return jsonable(obj.item())
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    return str(obj)


def _loads(text: Any) -> Any:
    if text is None or isinstance(text, (dict, list)):
        return text
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def _rows(conn: duckdb.DuckDBPyConnection, sql: str, params: Optional[list] = None) -> list[dict[str, Any]]:
    cur = conn.execute(sql, params or [])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def _tables(conn: duckdb.DuckDBPyConnection, catalog: Optional[str] = None) -> set[str]:
    """Tables and views of the main schema (published_completions & co. are views)."""
    where = "schema_name = 'main' AND database_name = " + ("?" if catalog else "current_database()")
    sql = (f"SELECT table_name FROM duckdb_tables() WHERE {where} "
           f"UNION SELECT view_name FROM duckdb_views() WHERE {where}")
    params: list = [catalog, catalog] if catalog else []
    return {r[0] for r in conn.execute(sql, params).fetchall()}


def _columns(conn: duckdb.DuckDBPyConnection, table: str, catalog: Optional[str] = None) -> dict[str, str]:
    sql = "SELECT column_name, data_type FROM duckdb_columns() WHERE schema_name = 'main' AND table_name = ?"
    params: list = [table]
    if catalog:
        sql += " AND database_name = ?"
        params.append(catalog)
    else:
        sql += " AND database_name = current_database()"
    return {r[0]: r[1] for r in conn.execute(sql, params).fetchall()}


@dataclass
class Target:
    mode: str                 # 'suite' | 'release'
    name: str
    suites: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- the reader

class Reader:
    """Cached, read-only views of one output path's DuckDB file for one suite or release."""

    def __init__(self, output_path: str | Path, suite: Optional[str] = None, release: Optional[str] = None,
                 suites: Optional[list[str]] = None, lock_timeout_s: float = 30.0,
                 db_path: Optional[str | Path] = None, lake: Optional[Storage] = None):
        if suite and release:
            raise DataError("give --suite or --release, not both")
        self.output_path = Path(output_path)
        self.db_path = Path(db_path) if db_path else self.output_path / DB_FILENAME   # --storage duckdb:PATH
        self.lake = lake          # --storage ducklake:…: read through an attach, never a file
        self.where = str(lake) if lake else str(self.db_path)
        self._stamp_conn = None
        self._stamp_lock = threading.Lock()
        self.suite, self.release, self.suites = suite, release, list(suites or [])
        self.lock_timeout_s = lock_timeout_s
        self._mutex = threading.RLock()
        self._cache: dict[Any, tuple[Any, Any]] = {}

    # -- file access ------------------------------------------------------------------------
    def stamp(self) -> tuple:
        if self.lake is not None:   # the lake's newest snapshot: every commit makes one
            with self._stamp_lock:   # (not the rebuild's mutex: a cache hit never waits for a rebuild)
                try:
                    if self._stamp_conn is None:
                        self._stamp_conn = self._attached()
                    return tuple(self._stamp_conn.execute(
                        "SELECT max(snapshot_id) FROM ducklake_snapshots('src')").fetchone())
                except (duckdb.Error, DataError):   # the catalog is away: attach again next time; no cache
                    if self._stamp_conn is not None:   # entry matches this stamp, and the build's error
                        self._stamp_conn.close()       # falls back to the last good answer
                        self._stamp_conn = None
                    return ("unavailable", time.monotonic())
        out = []
        for p in (self.db_path, Path(str(self.db_path) + ".wal")):
            try:
                st = p.stat()
                out.append((st.st_mtime_ns, st.st_size))
            except FileNotFoundError:
                out.append(None)
        return tuple(out)

    def _attached(self) -> duckdb.DuckDBPyConnection:
        """An in-memory connection with the store attached read-only as `src`."""
        if self.lake is not None:
            conn = lake_connection()
            try:
                attach_ducklake(conn, self.lake, "src", read_only=True)
            except MedhelmError as e:
                conn.close()
                raise DataError(str(e)) from None
            return conn
        conn = duckdb.connect()
        conn.execute(f"ATTACH {sql_str(str(self.db_path))} AS src (READ_ONLY)")
        return conn

    @contextmanager
    def _file_lock(self) -> Iterator[None]:
        if self.lake is not None:   # a DuckLake takes readers beside writers: nothing to wait for
            yield
            return
        lock = filelock.FileLock(str(self.db_path) + ".lock", timeout=self.lock_timeout_s)
        try:
            lock.acquire()
        except filelock.Timeout:
            raise DataError(f"{self.db_path} is busy (a pipeline step is writing); try again") from None
        except OSError:  # a read-only directory: no lock file can be made, nobody can be writing either
            yield
            return
        try:
            yield
        finally:
            lock.release()

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection, held only for the duration of the block."""
        if self.lake is not None:
            conn = self._attached()
            try:
                conn.execute("USE src")
                yield conn
            finally:
                conn.close()
            return
        if not self.db_path.exists():
            raise DataError(f"no database at {self.db_path}: run medhelm-run and medhelm-summarize first")
        lock_was_there = Path(str(self.db_path) + ".lock").exists()
        with self._mutex, self._file_lock():
            try:
                conn = duckdb.connect(str(self.db_path), read_only=True)
            except duckdb.Error as e:
                if not lock_was_there:  # a file that cannot be opened: leave its folder as it was
                    Path(str(self.db_path) + ".lock").unlink(missing_ok=True)
                raise DataError(str(unreadable_database(self.db_path, e))) from None
            try:
                yield conn
            finally:
                conn.close()

    def cached(self, key: Any, build: Callable[[], Any]) -> Any:
        stamp = self.stamp()
        with self._mutex:
            hit = self._cache.get(key)
            if hit is not None and hit[0] == stamp:
                return hit[1]
        try:
            value = build()
        except DataError:
            if hit is not None:   # busy or mid-write: the last good answer
                return hit[1]
            raise
        with self._mutex:
            self._cache[key] = (stamp, value)
        return value

    # -- public views ---------------------------------------------------------------------------
    def snapshot(self) -> dict:
        """Leaderboard tables, group tree, runs, comparison and costs of the target (cached)."""
        return self.cached("snapshot", self._build_snapshot)

    def meta(self) -> dict:
        snap = self.snapshot()
        return {k: snap[k] for k in ("target", "mode", "suites", "top", "rebuilt_in_memory", "generated_at",
                                     "db_path", "tiers", "has_comparison", "cost_unit", "notes")}

    def groups(self) -> dict:
        snap = self.snapshot()
        return {"top": snap["top"], "groups": snap["groups"], "model_order": snap.get("model_order", [])}

    def group(self, name: str) -> dict:
        snap = self.snapshot()
        info = next((g for g in snap["groups"] if g["name"] == name), None)
        if info is None:
            raise DataError(f"no group {name!r} in the leaderboard of {snap['target']}")
        tables = snap["tables"].get(name, [])
        # the schema's word for every metric of these tables (the page's glossary)
        used = {m for t in tables for m in t.get("metrics") or [] if m}
        metrics = {m: snap["metrics"][m] for m in sorted(used) if m in snap["metrics"]}
        return {**info, "tables": tables, "metrics": metrics}

    def comparison(self) -> dict:
        return self.snapshot()["comparison"]

    def plots(self) -> dict:
        return self.snapshot()["plots"]

    def runs(self) -> list[dict]:
        return self.snapshot()["runs"]

    def run(self, run_name: str, suite: Optional[str] = None) -> dict:
        snap = self.snapshot()
        info = snap["run_index"].get(run_name)
        if info is None or (suite is not None and suite not in snap["suites"]):
            raise DataError(f"no run {run_name!r} in {snap['mode']} {snap['target']}")
        suite = suite or info["suite"]
        return self.cached(("run", suite, run_name), lambda: self._build_run(suite, run_name, snap))

    # -- building -------------------------------------------------------------------------------
    def _wanted(self, conn: duckdb.DuckDBPyConnection, tables: set[str], current: list[dict]) -> Target:
        if self.release:
            if current and current[0]["mode"] == "release" and current[0]["target"] == self.release:
                return Target("release", self.release, [r["suite"] for r in current])
            return Target("release", self.release, self.suites or self._release_suites(conn, tables, self.release))
        if self.suite:
            return Target("suite", self.suite, [self.suite])
        if not current:
            raise DataError("nothing summarized yet: run medhelm-summarize first (or give --suite)")
        return Target(current[0]["mode"], current[0]["target"], [r["suite"] for r in current])

    def _release_suites(self, conn: duckdb.DuckDBPyConnection, tables: set[str], release: str) -> list[str]:
        """A release that is not the last summarize target: its suites from summary.json on disk, or,
        for a published release imported with medhelm-import, from published_targets."""
        path = self.output_path / "releases" / release / "summary.json"
        if path.exists():
            suites = json.loads(path.read_text(encoding="utf-8")).get("suites") or []
            if suites:
                return list(suites)
        if "published_targets" in tables:
            row = conn.execute("SELECT local_suites FROM published_targets WHERE target = ?", [release]).fetchone()
            if row and row[0]:
                return list(row[0])
        raise DataError(f"release {release!r} is neither summarized in {self.where} (no {path}) nor imported: "
                        f"run medhelm-summarize --release {release} --suites … (or medhelm-import)")

    def _build_snapshot(self) -> dict:
        with self.connect() as conn:
            tables = _tables(conn)
            current = (_rows(conn, "SELECT * FROM summarize_target ORDER BY suite_pos")
                       if "summarize_target" in tables else [])
            target = self._wanted(conn, tables, current)
            direct = (bool(current) and "row_aggregates" in tables and current[0]["mode"] == target.mode
                      and current[0]["target"] == target.name
                      and [r["suite"] for r in current] == target.suites)
            if direct:
                snap = build_snapshot(conn, target, catalog=None)
                snap["rebuilt_in_memory"] = False
        if not direct:
            with self._mutex, self._file_lock():
                snap = self._rebuild_in_memory(target)
                snap["rebuilt_in_memory"] = True
        snap["db_path"] = self.where
        snap["generated_at"] = _dt.datetime.now().isoformat(timespec="seconds")
        return snap

    def _rebuild_in_memory(self, target: Target) -> dict:
        """Run the SQL models on an in-memory copy of the target's inputs (the file stays read-only):
        the schema and model tables a summarize left for this target, or -- for a published target
        imported by medhelm-import and never summarized here -- its own schema.json, as the import's
        rebuild does."""
        mem = self._attached()
        try:
            src_tables = _tables(mem, "src")
            summarized = "schema_run_groups" in src_tables and mem.execute(
                "SELECT count(*) FROM src.main.schema_run_groups WHERE target = ?", [target.name]).fetchone()[0] > 0
            published = None
            if not summarized and "published_targets" in src_tables:
                published = mem.execute("SELECT mode, local_suites FROM src.main.published_targets WHERE target = ?",
                                        [target.name]).fetchone()
            if not summarized and not published:
                raise DataError(f"{target.mode} {target.name!r} has never been summarized in {self.where}: "
                                f"run medhelm-summarize --{target.mode} {target.name} first")
            if published:
                target.mode, target.suites = published[0] or target.mode, list(published[1] or target.suites)
            # the leaderboard's models (the analytics are read from the store's kept tables)
            skipped = set(analytics_models())
            models = {name: m for name, m in load_sql_models(SQL_DIR).items() if name not in skipped}
            inputs = sorted({d for deps, _ in models.values() for d in deps} - set(models) - {"summarize_target"})
            for t in inputs:
                if t not in src_tables or (published and (t.startswith("schema_") or t.startswith("model_"))):
                    continue
                cols = _columns(mem, t, "src")
                where, params = "", []
                if "target" in cols:
                    where, params = " WHERE target = ?", [target.name]
                elif t in ("runs", "run_stats"):
                    where = " WHERE suite IN (SELECT unnest(?))"
                    params = [target.suites]
                mem.execute(f'CREATE TABLE memory.main."{t}" AS SELECT * FROM src.main."{t}"{where}', params)
            mem.execute("USE memory")
            selected = SummarizeTarget(target.name, target.mode, tuple(target.suites))
            schema, registry = (resolve_schema(mem, selected, imported_schema=_imported_schema(mem, target))
                                if published else (None, None))   # else the tables copied above
            prepare(mem, selected, schema, registry, analytics=False)
            run_models(mem, only=list(models), models=models)
            return build_snapshot(mem, target, catalog="src")
        except (duckdb.Error, MedhelmError) as e:   # MedhelmError: e.g. suites run under two editions
            raise DataError(f"cannot rebuild the leaderboard of {target.name!r}: {e}") from None
        finally:
            mem.close()

    def _build_run(self, suite: str, run_name: str, snap: dict) -> dict:
        with self.connect() as conn:
            return build_run(conn, suite, run_name, snap)


def _imported_schema(mem: duckdb.DuckDBPyConnection, target: Target) -> Optional[dict]:
    """An imported published target's own schema.json (None: none was imported; then the pipeline's
    `resolve_schema` gives the edition's schema and our model list, as the import's rebuild does)."""
    if "published_documents" not in _tables(mem, "src"):
        return None
    doc = mem.execute("SELECT content FROM src.main.published_documents WHERE target = ? AND name = 'schema.json'",
                      [target.name]).fetchone()
    return json.loads(doc[0]) if doc is not None else None


def current_snapshot(conn: duckdb.DuckDBPyConnection) -> Optional[dict]:
    """The page's snapshot of the summarize target whose SQL model tables `conn` holds (None: nothing
    summarized): what `medhelm_core.summarize.report` previews in the Dagster UI."""
    current = _rows(conn, "SELECT * FROM summarize_target ORDER BY suite_pos")
    if not current:
        return None
    return build_snapshot(conn, Target(current[0]["mode"], current[0]["target"], [r["suite"] for r in current]),
                          catalog=None)


# --------------------------------------------------------------------------- snapshot

def _q(catalog: Optional[str], table: str) -> str:
    return f'{catalog}.main."{table}"' if catalog else f'"{table}"'


def build_snapshot(conn: duckdb.DuckDBPyConnection, target: Target, catalog: Optional[str]) -> dict:
    """Everything the leaderboard pages need, from a connection where the SQL models are built.
    `catalog` names where the pipeline tables live when they are not in the default catalog."""
    src_tables = _tables(conn, catalog) if catalog else _tables(conn)
    tables = build_group_tables(conn)

    groups = _rows(conn, "SELECT * FROM schema_run_groups WHERE target = ? ORDER BY run_group_pos", [target.name])
    by_name = {g["name"]: g for g in groups}
    top = groups[0]["name"] if groups else None
    parent: dict[str, str] = {}
    for g in groups:
        for s in list(g.get("subgroups") or []):
            parent.setdefault(s, g["name"])
    group_list = []
    for g in groups:
        subs = list(g.get("subgroups") or [])
        kind = "top" if g["name"] == top else ("category" if subs else "benchmark")
        group_list.append({
            "name": g["name"], "display_name": g.get("display_name") or g["name"],
            "short_display_name": g.get("short_display_name"), "description": g.get("description"),
            "category": g.get("category"), "subgroups": [s for s in subs if s in by_name], "kind": kind,
            "parent": parent.get(g["name"]), "main_name": g.get("main_name"), "main_split": g.get("main_split"),
            "has_tables": bool(tables.get(g["name"])), "n_tables": len(tables.get(g["name"], [])),
        })
    metrics = {m["name"]: {"display_name": m.get("display_name"), "short_display_name": m.get("short_display_name"),
                           "description": m.get("description"), "lower_is_better": m.get("lower_is_better")}
               for m in _rows(conn, "SELECT * FROM schema_metrics WHERE target = ?", [target.name])}

    runs = _rows(conn, "SELECT t.run_id, t.suite, t.run_name, t.model, t.model_deployment, t.groups, "
                       "coalesce(m.display_name, t.model_deployment) AS display_name "
                       "FROM target_runs t LEFT JOIN model_resolution m "
                       "ON m.model IS NOT DISTINCT FROM t.model "
                       "AND m.model_deployment IS NOT DISTINCT FROM t.model_deployment ORDER BY t.run_id")
    tiers = {}
    if "run_entries" in src_tables:
        ds = "datasets" in src_tables
        sql = (f"SELECT e.suite, e.run_name, coalesce(e.tier, {'d.tier' if ds else 'NULL'}) AS tier "
               f"FROM {_q(catalog, 'run_entries')} e "
               + (f"LEFT JOIN {_q(catalog, 'datasets')} d USING (scenario_key) " if ds else "")
               + "WHERE e.suite IN (SELECT unnest(?))")
        tiers = {(r["suite"], r["run_name"]): r["tier"] for r in _rows(conn, sql, [target.suites])}
    run_index: dict[str, dict] = {}
    run_list = []
    for r in runs:
        tier = tiers.get((r["suite"], r["run_name"]))
        item = {"suite": r["suite"], "run_name": r["run_name"], "model": r["model"],
                "model_deployment": r["model_deployment"], "display_name": r["display_name"],
                "groups": list(r["groups"] or []), "tier": tier or "unknown",
                "shareable": (tier in SHAREABLE_TIERS)}
        run_list.append(item)
        run_index[r["run_name"]] = item   # the last suite wins, as in runs_to_run_suites.json
    tier_counts: dict[str, int] = {}
    for item in run_list:
        tier_counts[item["tier"]] = tier_counts.get(item["tier"], 0) + 1

    model_order = _annotate_presentation(tables, top, run_index, metrics)
    comparison = _comparison(conn, catalog, src_tables, target)
    _annotate_comparison(tables, comparison)
    _annotate_cells(tables, _cell_intervals(conn, catalog, target), "intervals")   # bootstrap intervals
    costs = _costs(conn, catalog, src_tables, target)
    plots = _plots(tables, top, comparison, costs, group_list)
    _win_rate_intervals(conn, catalog, target, plots)
    plots["categories"] = _category_scores(conn, catalog, target)
    _cost_points(plots, run_list, costs)
    notes = []
    if not comparison["available"]:
        notes.append("No leaderboard_comparison table: import published results (medhelm-import) to compare.")
    # The upstream edition(s) the target's runs reproduce (medhelm_core.editions; NULL: helm-0.5.16).
    editions = [r["edition"] for r in _rows(
        conn, "SELECT DISTINCT coalesce(r.edition, 'helm-0.5.16') AS edition FROM target_runs t "
              f"JOIN {_q(catalog, 'runs')} r ON r.suite = t.suite AND r.run_name = t.run_name ORDER BY 1")]
    return jsonable({
        "target": target.name, "mode": target.mode, "suites": target.suites, "top": top, "editions": editions,
        "groups": group_list, "tables": tables, "metrics": metrics, "model_order": model_order,
        "runs": run_list, "run_index": run_index, "tiers": tier_counts,
        "comparison": comparison, "has_comparison": bool(comparison["rows"]),
        "costs": costs, "cost_unit": costs["unit"], "plots": plots, "notes": notes,
    })


def _comparison(conn, catalog, src_tables, target: Target) -> dict:
    out: dict[str, Any] = {"available": False, "release": None, "releases": [], "rows": [], "summary": {}}
    if COMPARISON_TABLE not in src_tables:
        return out
    out["available"] = True
    name = _q(catalog, COMPARISON_TABLE)
    cols = _columns(conn, COMPARISON_TABLE, catalog) if catalog else _columns(conn, COMPARISON_TABLE)
    if "release" in cols:
        releases = [r[0] for r in conn.execute(f"SELECT DISTINCT release FROM {name} ORDER BY 1").fetchall()]
        out["releases"] = releases
        release = target.name if target.name in releases else None
        out["release"] = release
        if release is None:
            return out
        rows = _rows(conn, f"SELECT * FROM {name} WHERE release = ?", [release])
    else:
        rows = _rows(conn, f"SELECT * FROM {name}")
    keep = ["group_name", "table_title", "row_name", "column_name", "published_value", "rebuilt_value",
            "abs_diff", "equal", "cause"]
    clean = []
    for r in rows:
        item = {k: r.get(k) for k in keep}
        pub, reb = item["published_value"], item["rebuilt_value"]
        if item["abs_diff"] is None and isinstance(pub, (int, float)) and isinstance(reb, (int, float)):
            item["abs_diff"] = abs(pub - reb)
        if item["equal"] is None:
            item["equal"] = (pub is None and reb is None) or (
                item["abs_diff"] is not None and item["abs_diff"] <= 1e-9)
        item["verdict"] = "equal" if item["equal"] else ("differs" if item.get("cause") is None else "explained")
        clean.append(item)
    out["rows"] = clean
    both_missing = sum(1 for r in clean if r["equal"] and r["published_value"] is None and r["rebuilt_value"] is None)
    summary = {"cells": len(clean), "equal": sum(1 for r in clean if r["equal"]),
               "differ": sum(1 for r in clean if not r["equal"]), "both_missing": both_missing,
               "valued": len(clean) - both_missing,
               "valued_equal": sum(1 for r in clean if r["equal"]) - both_missing}
    causes: dict[str, int] = {}
    for r in clean:
        if not r["equal"]:
            c = r.get("cause") or "(unexplained)"
            causes[c] = causes.get(c, 0) + 1
    summary["causes"] = causes
    out["summary"] = summary
    return out


def _annotate_cells(tables: dict[str, list[dict]], index: dict[tuple, dict], key: str) -> None:
    """table[key][row][col] = index[(group, table title, row name, column header)], for every cell found."""
    if not index:
        return
    for group, tlist in tables.items():
        for t in tlist:
            ann: dict[str, dict[str, dict]] = {}
            header = [h.get("value") for h in t["header"]]
            for i, row in enumerate(t["rows"]):
                row_name = row[0].get("value")
                for j in range(1, len(row)):
                    hit = index.get((group, t["title"], row_name, header[j]))
                    if hit is not None:
                        ann.setdefault(str(i), {})[str(j)] = hit
            if ann:
                t[key] = ann


def _annotate_comparison(tables: dict[str, list[dict]], comparison: dict) -> None:
    """table["comparison"][row][col] = the comparison row of that cell (matched by names)."""
    _annotate_cells(tables, {(r["group_name"], r["table_title"], r["row_name"], r["column_name"]): r
                             for r in comparison["rows"]}, "comparison")


def _kept(conn, catalog: Optional[str], table: str) -> Optional[str]:
    """The qualified name of an analytics table kept for every target (schema `leaderboard`), if any."""
    found = conn.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?"
                         " AND (? IS NULL OR table_catalog = ?)", [KEPT_SCHEMA, table, catalog, catalog]).fetchone()[0]
    if not found:
        return None
    return f'{catalog}.{KEPT_SCHEMA}."{table}"' if catalog else f'{KEPT_SCHEMA}."{table}"'


def _cell_intervals(conn, catalog, target: Target) -> dict[tuple, dict]:
    """(group, table title, row name, column header) -> the cell's bootstrap interval (analytics'
    cell_intervals, kept for the target when it was summarized or imported)."""
    names = {t: _kept(conn, catalog, t) for t in ("cell_intervals", "group_tables", "table_rows", "table_columns")}
    if None in names.values():
        return {}
    rows = conn.execute(f"""
        SELECT g.group_name, g.title, r.display_name, k.header_value, i.ci_low, i.ci_high, i.n_instances
        FROM {names['cell_intervals']} i
        JOIN {names['group_tables']} g ON g.target = i.target AND g.table_id = i.table_id
        JOIN {names['table_rows']} r ON r.target = i.target AND r.table_id = i.table_id AND r.row_pos = i.row_pos
        JOIN {names['table_columns']} k ON k.target = i.target AND k.table_id = i.table_id AND k.col_idx = i.col_idx
        WHERE i.target = ? AND i.ci_low IS NOT NULL""", [target.name]).fetchall()
    return {(g, t, r, c): {"low": lo, "high": hi, "n": n} for g, t, r, c, lo, hi, n in rows}


def _win_rate_intervals(conn, catalog, target: Target, plots: dict) -> None:
    """The mean win rate plot's error bars and rank ranges (analytics' win_rate_intervals)."""
    name = _kept(conn, catalog, "win_rate_intervals")
    if name is None:
        return
    found = {r[0]: r[1:] for r in conn.execute(
        f"SELECT model, win_rate_low, win_rate_high, rank, rank_low, rank_high FROM {name} "
        "WHERE target = ? AND win_rate_low IS NOT NULL", [target.name]).fetchall()}
    for item in plots["win_rate"]:
        if item["model"] in found:
            item["low"], item["high"], item["rank"], item["rank_low"], item["rank_high"] = found[item["model"]]


def _category_scores(conn, catalog, target: Target) -> list[dict]:
    """The model x category heatmap's cells (analytics' category_scores below the top group)."""
    name = _kept(conn, catalog, "category_scores")
    if name is None:
        return []
    return [{"group": g, "category": d or g, "model": m, "mean_win_rate": w, "macro_avg": a}
            for g, d, m, w, a in conn.execute(
                f"SELECT run_group, display_name, model, mean_win_rate, macro_avg FROM {name} "
                "WHERE target = ? AND depth > 0 ORDER BY depth, run_group, row_pos", [target.name]).fetchall()]


def _costs(conn, catalog, src_tables, target: Target) -> dict:
    """Per model deployment: tokens from run_stats, dollars from the completions' cost column if
    the engine records one (model calls and judge calls separately)."""
    out: dict[str, Any] = {"unit": "tokens",
                           "source": "run_stats: (num_prompt_tokens + num_completion_tokens) x num_instances",
                           "by_deployment": {}}
    # run-level stats are means over instances: total = mean per instance x instances, per split
    for r in _rows(conn, """
            WITH s AS (
                SELECT t.model_deployment, t.run_id, s.split, s.name, s.mean
                FROM target_runs t JOIN run_stats s ON s.suite = t.suite AND s.run_name = t.run_name
                WHERE s.name IN ('num_prompt_tokens', 'num_completion_tokens', 'num_instances')
                  AND s.perturbation IS NULL AND s.split IS NOT NULL AND s.sub_split IS NULL)
            SELECT p.model_deployment, p.name, sum(p.mean * n.mean) AS total
            FROM s p JOIN s n ON n.run_id = p.run_id AND n.split = p.split AND n.name = 'num_instances'
            WHERE p.name IN ('num_prompt_tokens', 'num_completion_tokens')
            GROUP BY ALL"""):
        d = out["by_deployment"].setdefault(r["model_deployment"], {})
        d[r["name"]] = r["total"]
    for d in out["by_deployment"].values():
        d["tokens"] = (d.get("num_prompt_tokens") or 0) + (d.get("num_completion_tokens") or 0)
    if "completions" not in src_tables or "requests" not in src_tables:
        return out
    ccols = _columns(conn, "completions", catalog) if catalog else _columns(conn, "completions")
    numeric = ("DOUBLE", "FLOAT", "DECIMAL", "REAL", "BIGINT", "INTEGER", "HUGEINT")
    cost_cols = [c for c, t in ccols.items()
                 if any(w in c.lower() for w in ("cost", "usd", "dollar", "price"))
                 and any(t.upper().startswith(n) for n in numeric)]
    if not cost_cols:
        return out
    col = sorted(cost_cols, key=lambda c: (0 if "usd" in c.lower() else 1, len(c)))[0]
    comp, req = _q(catalog, "completions"), _q(catalog, "requests")
    rows = _rows(conn, f"""
        SELECT q.model_deployment, sum(c."{col}") AS cost, count(c."{col}") AS n
        FROM {req} q JOIN {comp} c USING (request_key)
        WHERE q.suite IN (SELECT unnest(?)) GROUP BY ALL""", [target.suites])
    judge = []
    if "judge_verdicts" in src_tables:
        judge = _rows(conn, f"""
            SELECT q.model_deployment, sum(c."{col}") AS cost
            FROM {_q(catalog, 'judge_verdicts')} v
            JOIN {req} q ON q.suite = v.suite AND q.run_name = v.run_name AND q.position = v.position
            JOIN {comp} c ON c.request_key = v.request_key
            WHERE v.suite IN (SELECT unnest(?)) GROUP BY ALL""", [target.suites])
    if not any(r["n"] for r in rows):
        return out
    out["unit"] = "USD"
    out["source"] = f"completions.{col} (model calls; judge calls shown separately)"
    for r in rows:
        out["by_deployment"].setdefault(r["model_deployment"], {})["cost"] = r["cost"]
    for r in judge:
        out["by_deployment"].setdefault(r["model_deployment"], {})["judge_cost"] = r["cost"]
    return out


def _row_key(row: list[dict], run_index: dict[str, dict]) -> tuple:
    """A table row's model, as HELM keys rows: (model_deployment, model) of its runs, else its name."""
    for cell in row:
        for name in cell.get("run_spec_names") or []:
            info = run_index.get(name)
            if info is not None:
                return ("run", str(info.get("model_deployment") or ""), str(info.get("model") or ""))
    return ("name", str((row[0] if row else {}).get("value") or ""))


def _header_metric(header: dict, metrics: dict[str, dict]) -> Optional[str]:
    """The schema metric a header cell shows: its short name is the header's `metadata.metric` and its
    "display name: description" is what helm-summarize put into the header's description."""
    short = (header.get("metadata") or {}).get("metric")
    desc = "\n\n" + str(header.get("description") or "").split("\n- Perturbation ", 1)[0]
    best, best_len = None, -1
    for name, m in metrics.items():
        if short != (m.get("short_display_name") or m.get("display_name") or name):
            continue
        piece = f"\n\n{m.get('display_name') or name}: {m.get('description') or ''}"
        if desc.endswith(piece) and len(piece) > best_len:
            best, best_len = name, len(piece)
    return best


def _annotate_presentation(tables: dict[str, list[dict]], top: Optional[str], run_index: dict[str, dict],
                           metrics: dict[str, dict]) -> list[str]:
    """One model order for every table of the page: the mean win rate of the main leaderboard (the top
    group's first table with that column), best first, ties and models it has no value for by name.
    Each table gets `order` (its row indices in that order) and `metrics` (per header cell, the schema
    metric it shows, or None). Returns the models' display names in that order."""
    rank: dict[tuple, tuple] = {}
    names: dict[tuple, str] = {}
    wr = _win_rate_table(tables, top)
    for row in (wr or {}).get("rows", []):
        key = _row_key(row, run_index)
        v = row[1].get("value") if len(row) > 1 else None
        names.setdefault(key, str(row[0].get("value") or ""))
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            rank[key] = (0, -float(v), names[key])
    for group_tables in tables.values():
        for t in group_tables:
            for row in t["rows"]:
                key = _row_key(row, run_index)
                names.setdefault(key, str((row[0] if row else {}).get("value") or ""))
    for key, name in names.items():
        rank.setdefault(key, (1, 0.0, name))
    ordered = sorted(names, key=lambda k: (rank[k], k))
    position = {k: i for i, k in enumerate(ordered)}
    for group_tables in tables.values():
        for t in group_tables:
            keys = [_row_key(row, run_index) for row in t["rows"]]
            t["order"] = sorted(range(len(t["rows"])), key=lambda i: (position[keys[i]], i))
            t["metrics"] = [None] + [_header_metric(h, metrics) for h in t["header"][1:]]
    shown: list[str] = []
    for k in ordered:
        if names[k] not in shown:
            shown.append(names[k])
    return shown


def _win_rate_table(tables: dict[str, list[dict]], top: Optional[str]) -> Optional[dict]:
    for t in tables.get(top or "", []):
        if len(t["header"]) > 1 and t["header"][1].get("value") == "Mean win rate":
            return t
    return None


def _plots(tables, top, comparison, costs, group_list) -> dict:
    plots: dict[str, Any] = {"win_rate": [], "scatter": {}, "cost": {"unit": costs["unit"],
                                                                     "source": costs["source"], "points": []}}
    t = _win_rate_table(tables, top)
    if t is not None:
        plots["win_rate_table"] = t["title"]
        for row in t["rows"]:
            plots["win_rate"].append({"model": row[0].get("value"), "value": row[1].get("value")})
    # reproduced vs published, one panel per benchmark: the main-metric columns of the MedHELM
    # table (group top, first table: "<benchmark> - <metric>" per model) plus its mean win rate;
    # without those rows, one panel per group over its score tables
    numeric = [r for r in comparison["rows"]
               if isinstance(r["published_value"], (int, float)) and isinstance(r["rebuilt_value"], (int, float))]
    top_title = t["title"] if t is not None else None
    top_rows = [r for r in numeric if r["group_name"] == top and r["table_title"] == top_title]
    titles = {g["name"]: g["display_name"] for g in group_list}
    for r in top_rows or numeric:
        if top_rows:
            key = "Mean win rate" if r["column_name"] == "Mean win rate" else str(r["column_name"]).rsplit(" - ", 1)[0]
            title = key
        else:
            if r["table_title"] in ("Efficiency", "General information"):
                continue
            key, title = r["group_name"], titles.get(r["group_name"], r["group_name"])
        plots["scatter"].setdefault(key, {"title": title, "points": []})["points"].append(
            {"row": r["row_name"], "column": r["column_name"], "table": r["table_title"],
             "published": r["published_value"], "rebuilt": r["rebuilt_value"], "equal": r["equal"],
             "cause": r.get("cause")})
    return plots


def _cost_points(plots: dict, runs: list[dict], costs: dict) -> None:
    """Cost vs mean win rate per model (display name), summed over the model's deployments."""
    by_model: dict[str, dict] = {}
    for r in runs:
        by_model.setdefault(r["display_name"], {"deployments": set()})["deployments"].add(r["model_deployment"])
    wr = {p["model"]: p["value"] for p in plots["win_rate"]}
    points = []
    for model, info in by_model.items():
        cost = 0.0
        seen = False
        for dep in info["deployments"]:
            d = costs["by_deployment"].get(dep, {})
            v = d.get("cost") if costs["unit"] == "USD" else d.get("tokens")
            if v is not None:
                cost += v
                seen = True
        points.append({"model": model, "cost": cost if seen else None, "score": wr.get(model),
                       "score_name": "Mean win rate"})
    plots["cost"]["points"] = points


# --------------------------------------------------------------------------- runs

def _wrong_rule(values: list[float], lower_is_better: Optional[bool]) -> tuple[str, Callable[[float], bool]]:
    """'Wrong' = the instance's main score is not the top of its scale."""
    if lower_is_better:
        return "> 0", lambda v: v > 0
    vals = [v for v in values if v is not None]
    if not vals or max(vals) <= 1.0:
        return "< 1", lambda v: v < 1.0
    top = 5.0 if max(vals) <= 5.0 else max(vals)
    return f"< {top:g}", lambda v: v < top


def build_run(conn: duckdb.DuckDBPyConnection, suite: str, run_name: str, snap: dict) -> dict:
    """One run: its instances with prompt, references, completion, per-instance stats and the jury."""
    tables = _tables(conn)
    info = dict(snap["run_index"].get(run_name) or {"suite": suite, "run_name": run_name})
    info["suite"] = suite
    groups = {g["name"]: g for g in snap["groups"]}
    bench = next((groups[g] for g in info.get("groups", []) if g in groups and groups[g].get("main_name")), None)
    main_name = bench["main_name"] if bench else None
    main_split = bench["main_split"] if bench else None
    metric = snap["metrics"].get(main_name or "", {})
    out: dict[str, Any] = {
        **info, "benchmark": bench["name"] if bench else None,
        "benchmark_display_name": bench["display_name"] if bench else None,
        "main_metric": {"name": main_name, "split": main_split, "display_name": metric.get("display_name"),
                        "description": metric.get("description"), "lower_is_better": metric.get("lower_is_better")},
        "redacted": False, "instances": [], "run_stats": [], "judge_status": {},
    }
    if "runs" in tables:
        spec = conn.execute("SELECT run_spec, scenario_metadata FROM runs WHERE suite = ? AND run_name = ?",
                            [suite, run_name]).fetchone()
        if spec and not main_name:   # a benchmark outside the schema: its scenario's own main metric
            sm = _loads(spec[1]) or {}
            if isinstance(sm, dict) and sm.get("main_metric"):
                main_name, main_split = sm["main_metric"], sm.get("main_split")
                metric = snap["metrics"].get(main_name, {})
                out["main_metric"] = {"name": main_name, "split": main_split,
                                      "display_name": metric.get("display_name") or main_name,
                                      "description": metric.get("description"),
                                      "lower_is_better": metric.get("lower_is_better")}
        if spec:
            rs = _loads(spec[0]) or {}
            out["scenario_spec"] = rs.get("scenario_spec")
            out["adapter_method"] = (rs.get("adapter_spec") or {}).get("method")
            out["metric_specs"] = [m.get("class_name") for m in rs.get("metric_specs") or []]
    if "run_entries" in tables:
        e = _rows(conn, "SELECT description, priority, conf_path, tier FROM run_entries WHERE suite = ? AND run_name = ?",
                  [suite, run_name])
        if e:
            out["description"] = e[0]["description"]
            out["conf_path"] = e[0]["conf_path"]
    if "run_stats" in tables:
        out["run_stats"] = _rows(conn, """
            SELECT name, split, count, mean, min, max FROM run_stats
            WHERE suite = ? AND run_name = ? AND perturbation IS NULL ORDER BY ordinal""", [suite, run_name])
    reqs = _rows(conn, "SELECT position, instance_id, split, train_trial_index, request_key, prompt, request_state "
                       "FROM requests WHERE suite = ? AND run_name = ? ORDER BY position",
                 [suite, run_name]) if "requests" in tables else []
    if not reqs and "published_completions" in tables:
        return _published_run(conn, tables, suite, run_name, out, main_name, main_split, metric)
    if not reqs:
        out["notes"] = ["no per-instance data for this run in the database (stats only; for a published run, "
                        "import it with medhelm-import --with-completions)"]
        return jsonable(out)
    results = {}
    if "completions" in tables:
        for r in _rows(conn, "SELECT c.request_key, c.result, c.success FROM completions c WHERE c.request_key IN "
                             "(SELECT request_key FROM requests WHERE suite = ? AND run_name = ?)", [suite, run_name]):
            results[r["request_key"]] = r
    errors = {}
    if "completion_errors" in tables:
        for r in _rows(conn, "SELECT request_key, error FROM completion_errors WHERE request_key IN "
                             "(SELECT request_key FROM requests WHERE suite = ? AND run_name = ?) "
                             "ORDER BY failed_at", [suite, run_name]):
            errors[r["request_key"]] = r["error"]
    stats: dict[tuple, list[dict]] = {}
    if "instance_stats" in tables:
        for s in _rows(conn, "SELECT instance_id, train_trial_index, name, split, sub_split, perturbation, count, mean "
                             "FROM instance_stats WHERE suite = ? AND run_name = ? ORDER BY instance_id, ordinal",
                       [suite, run_name]):
            item = {"name": s["name"], "split": s["split"], "value": s["mean"]}
            if s["sub_split"] is not None:
                item["sub_split"] = s["sub_split"]
            if s["perturbation"] is not None:
                item["perturbation"] = (_loads(s["perturbation"]) or {}).get("name") or "perturbed"
            stats.setdefault((s["instance_id"], s["train_trial_index"]), []).append(item)
    jury: dict[str, list[dict]] = {}
    if "jury_scores" in tables:
        for j in _rows(conn, "SELECT instance_id, metric, helm_value, corrected_value, judges_ok, judges_total "
                             "FROM jury_scores WHERE suite = ? AND run_name = ? ORDER BY metric", [suite, run_name]):
            jury.setdefault(j["instance_id"], []).append({k: j[k] for k in j if k != "instance_id"})
    verdicts: dict[int, list[dict]] = {}
    status_counts: dict[str, int] = {}
    if "judge_verdicts" in tables:
        for v in _rows(conn, "SELECT position, annotator, judge, judge_deployment, status, raw_text, parsed, error "
                             "FROM judge_verdicts WHERE suite = ? AND run_name = ? ORDER BY position, annotator, judge",
                       [suite, run_name]):
            parsed = _loads(v["parsed"])
            criteria = []
            if isinstance(parsed, dict):
                for crit, val in parsed.items():
                    if isinstance(val, dict):
                        criteria.append({"name": crit, "score": val.get("score"), "explanation": val.get("explanation")})
                    else:
                        criteria.append({"name": crit, "score": val, "explanation": None})
            status_counts[v["status"]] = status_counts.get(v["status"], 0) + 1
            verdicts.setdefault(v["position"], []).append({
                "annotator": v["annotator"], "judge": v["judge"], "judge_deployment": v["judge_deployment"],
                "status": v["status"], "criteria": criteria, "raw_text": v["raw_text"], "error": v["error"]})
    annotations: dict[int, list[dict]] = {}
    if "annotations" in tables:
        for a in _rows(conn, "SELECT position, annotator, annotation FROM annotations WHERE suite = ? AND run_name = ? "
                             "ORDER BY position, annotator", [suite, run_name]):
            annotations.setdefault(a["position"], []).append({"annotator": a["annotator"],
                                                              "annotation": _loads(a["annotation"])})

    instances = []
    for r in reqs:
        rs = _loads(r["request_state"]) or {}
        inst = rs.get("instance") or {}
        res = results.get(r["request_key"])
        result = _loads(res["result"]) if res else None
        completions = [c.get("text") for c in (result or {}).get("completions") or []]
        st = stats.get((r["instance_id"], r["train_trial_index"]), [])
        main = _main_score(st, main_name, main_split)
        instances.append({
            "position": r["position"], "instance_id": r["instance_id"], "split": r["split"],
            "train_trial_index": r["train_trial_index"],
            "input": (inst.get("input") or {}).get("text"),
            "references": [{"text": (ref.get("output") or {}).get("text"), "tags": ref.get("tags") or []}
                           for ref in inst.get("references") or []],
            "output_mapping": rs.get("output_mapping"),
            "prompt": r["prompt"],
            "completions": completions,
            "success": (result or {}).get("success") if result else None,
            "error": (result or {}).get("error") if result else errors.get(r["request_key"]),
            "stats": st, "main_score": main,
            "jury": jury.get(r["instance_id"], []),
            "judges": verdicts.get(r["position"], []),
            "annotations": annotations.get(r["position"], []),
        })
    out["judge_status"] = status_counts
    return _finish_run(out, instances, main_name, metric)


def _finish_run(out: dict, instances: list[dict], main_name: Optional[str], metric: dict) -> dict:
    rule, is_wrong = _wrong_rule([i["main_score"] for i in instances], metric.get("lower_is_better"))
    for i in instances:
        i["wrong"] = i["main_score"] is not None and is_wrong(i["main_score"])
    out["wrong_rule"] = f"{main_name} {rule}" if main_name else None
    out["instances"] = instances
    out["n_wrong"] = sum(1 for i in instances if i["wrong"])
    return jsonable(out)


def _main_score(stats: list[dict], main_name: Optional[str], main_split: Optional[str]) -> Optional[float]:
    if not main_name:
        return None
    cands = [s for s in stats if s["name"] == main_name and "perturbation" not in s]
    pick = [s for s in cands if s["split"] == main_split] or cands
    return pick[0]["value"] if pick else None


def _published_run(conn, tables: set[str], suite: str, run_name: str, out: dict, main_name, main_split,
                   metric: dict) -> dict:
    """A run imported by medhelm-import --with-completions: HELM's scenario_state.json and
    per_instance_stats.json as published (judges from the annotations, no per-judge status)."""
    rows = _rows(conn, "SELECT position, instance_id, split, train_trial_index, prompt, completion, success, instance, "
                       "output_mapping, result FROM published_completions WHERE suite = ? AND run_name = ? "
                       "ORDER BY position", [suite, run_name])
    if not rows:
        out["notes"] = ["no per-instance data for this run in the database (stats only; for a published run, "
                        "import it with medhelm-import --with-completions)"]
        return jsonable(out)
    out["notes"] = ["published run: instances from its scenario_state.json, scores from per_instance_stats.json"]
    stats: dict[tuple, list[dict]] = {}
    if "published_instance_stats" in tables:
        for st in _rows(conn, "SELECT instance_id, train_trial_index, name, split, sub_split, perturbation_name, mean "
                              "FROM published_instance_stats WHERE suite = ? AND run_name = ? "
                              "ORDER BY entry_pos, ordinal", [suite, run_name]):
            item = {"name": st["name"], "split": st["split"], "value": st["mean"]}
            if st["sub_split"] is not None:
                item["sub_split"] = st["sub_split"]
            if st["perturbation_name"] is not None:
                item["perturbation"] = st["perturbation_name"]
            stats.setdefault((st["instance_id"], st["train_trial_index"]), []).append(item)
    annotations: dict[int, list[dict]] = {}
    if "published_annotations" in tables:
        for a in _rows(conn, "SELECT position, annotator, annotation FROM published_annotations "
                             "WHERE suite = ? AND run_name = ? ORDER BY position, annotator", [suite, run_name]):
            annotations.setdefault(a["position"], []).append({"annotator": a["annotator"],
                                                              "annotation": _loads(a["annotation"])})
    instances = []
    for r in rows:
        inst = _loads(r["instance"]) or {}
        result = _loads(r["result"]) or {}
        completions = [c.get("text") for c in result.get("completions") or []] or (
            [r["completion"]] if r["completion"] is not None else [])
        judges = []
        for a in annotations.get(r["position"], []):
            ann = a["annotation"] if isinstance(a["annotation"], dict) else {}
            for judge, verdict in ann.items():
                if not isinstance(verdict, dict):
                    continue
                criteria = [{"name": k, "score": v.get("score"), "explanation": v.get("explanation")}
                            for k, v in verdict.items() if isinstance(v, dict)]
                judges.append({"annotator": a["annotator"], "judge": judge, "judge_deployment": judge,
                               "status": "published" if criteria else "unparsed", "criteria": criteria,
                               "raw_text": None, "error": None})
        st = stats.get((r["instance_id"], r["train_trial_index"]), [])
        instances.append({
            "position": r["position"], "instance_id": r["instance_id"], "split": r["split"],
            "train_trial_index": r["train_trial_index"], "input": (inst.get("input") or {}).get("text"),
            "references": [{"text": (ref.get("output") or {}).get("text"), "tags": ref.get("tags") or []}
                           for ref in inst.get("references") or []],
            "output_mapping": _loads(r["output_mapping"]), "prompt": r["prompt"], "completions": completions,
            "success": r["success"], "error": None, "stats": st, "main_score": _main_score(st, main_name, main_split),
            "jury": [], "judges": judges, "annotations": annotations.get(r["position"], []),
        })
    counts: dict[str, int] = {}
    for i in instances:
        for j in i["judges"]:
            counts[j["status"]] = counts.get(j["status"], 0) + 1
    out["judge_status"] = counts
    return _finish_run(out, instances, main_name, metric)


def redact_run(run: dict) -> dict:
    """The shareable form of a run: unless its tier is shareable, every text that comes from the data
    or the models (input, references, prompt, completions, judge explanations and raw answers,
    annotations, errors) is replaced; ids, scores and statuses stay."""
    if run.get("tier") in SHAREABLE_TIERS:
        return run
    out = {k: v for k, v in run.items() if k != "instances"}
    out["redacted"] = True
    red = []
    for i in run.get("instances", []):
        red.append({
            "position": i.get("position"), "instance_id": i.get("instance_id"), "split": i.get("split"),
            "train_trial_index": i.get("train_trial_index"),
            "input": REDACTED, "prompt": REDACTED,
            "references": [{"text": REDACTED, "tags": list(r.get("tags") or [])} for r in i.get("references") or []],
            "output_mapping": None,
            "completions": [REDACTED for _ in i.get("completions") or []],
            "success": i.get("success"), "error": REDACTED if i.get("error") else None,
            "stats": i.get("stats"), "main_score": i.get("main_score"), "wrong": i.get("wrong"),
            "jury": i.get("jury"),
            "judges": [{"annotator": j.get("annotator"), "judge": j.get("judge"),
                        "judge_deployment": j.get("judge_deployment"), "status": j.get("status"),
                        "criteria": [{"name": c.get("name"), "score": c.get("score"),
                                      "explanation": REDACTED if c.get("explanation") else None}
                                     for c in j.get("criteria") or []],
                        "raw_text": REDACTED if j.get("raw_text") else None,
                        "error": REDACTED if j.get("error") else None} for j in i.get("judges") or []],
            "annotations": [],
        })
    out["instances"] = red
    return out
