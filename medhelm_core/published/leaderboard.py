"""The published leaderboard cell by cell, its rebuild with our SQL models, and the comparison.

Published cells come from `groups/<group>.json` exactly as stored.  The rebuild summarizes the
target's runs (already in `runs`/`run_stats` under their local suite names) with the summarize
pipeline's steps (`medhelm_core.summarize.pipeline`), the release's own `schema.json` and the model
list inside it, in a scratch in-memory database attached to the store's connection, so the user's own
leaderboard tables are untouched.
Its tables are rendered by the same writer that produces our `groups/*.json`, then both sides are
parsed by the same function and matched:

    table  = (group, table name, table title, occurrence)
    row    = (model_deployment, model) of the row's runs (`run_spec_names`), else display name
    column = (header text, metadata.metric, metadata.run_group, metadata.perturbation, occurrence)
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional

import duckdb

from medhelm_core.costs import record_prices
from medhelm_core.errors import MedhelmError
from medhelm_core.ratelimit import SettingsRegistry
from medhelm_core.store import Store, in_transaction, sql_str

from medhelm_core.summarize.pipeline import keep, prepare, resolve_schema, run_models, write_files
from medhelm_core.summarize.tables import SummarizeTarget, ensure_input_tables
from medhelm_core.summarize.write import build_group_tables

from .freshness import rebuild_fingerprint
from .rows import insert_json_rows
from .tables import ensure_published_tables, memory_bound

TOL = 1e-9
COUNT_RE = re.compile(r"\((\d+)\)$")
AGGREGATE_HEADERS = {"Mean win rate", "Mean score"}
CELL_COLUMNS = ["target", "group_name", "table_pos", "table_name", "table_title", "row_pos", "row_name",
                "model_deployment", "model", "col_idx", "column_name", "metric", "run_group", "perturbation",
                "is_aggregate", "value", "description", "run_count", "bold", "run_spec_names"]


def _num(v: Any) -> Optional[float]:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    return None


def parse_group_tables(target: str, group_name: str, tables: list[dict],
                       run_keys: dict[str, tuple[Optional[str], Optional[str]]]) -> list[dict]:
    """Every value cell of one groups/<group>.json (the Model column gives the row)."""
    out = []
    for table_pos, t in enumerate(tables):
        header = t.get("header") or []
        for row_pos, row in enumerate(t.get("rows") or []):
            model_cell = row[0] if row else {}
            names = list(model_cell.get("run_spec_names") or [])
            if not names:
                for c in row[1:]:
                    if c.get("run_spec_names"):
                        names = list(c["run_spec_names"])
                        break
            key = next((run_keys[n] for n in names if n in run_keys), (None, None))
            for col_idx in range(1, len(header)):
                h = header[col_idx] or {}
                c = row[col_idx] if col_idx < len(row) else {}
                md = h.get("metadata") or {}
                desc = c.get("description")
                m = COUNT_RE.search(desc or "")
                out.append({
                    "target": target, "group_name": group_name, "table_pos": table_pos,
                    "table_name": t.get("name"), "table_title": t.get("title"), "row_pos": row_pos,
                    "row_name": model_cell.get("value"), "model_deployment": key[0], "model": key[1],
                    "col_idx": col_idx, "column_name": h.get("value"), "metric": md.get("metric"),
                    "run_group": md.get("run_group"),
                    "perturbation": md.get("perturbation") if isinstance(md.get("perturbation"), str)
                    else (json.dumps(md["perturbation"]) if md.get("perturbation") is not None else None),
                    "is_aggregate": h.get("value") in AGGREGATE_HEADERS and "metric" not in md,
                    "value": _num(c.get("value")), "description": desc,
                    "run_count": int(m.group(1)) if m else None,
                    "bold": (c.get("style") or {}).get("font-weight") == "bold",
                    "run_spec_names": list(c.get("run_spec_names") or []) or (names if col_idx == 1 else []),
                })
    return out


def _published_run_keys(conn, target: str) -> dict[str, tuple[Optional[str], Optional[str]]]:
    rows = conn.execute("""
        SELECT r.spec_name, r.model_deployment, r.model FROM published_runs r
        WHERE r.suite IN (SELECT unnest(suites) FROM published_targets WHERE target = ?)""", [target]).fetchall()
    return {n: (d, m) for n, d, m in rows}


def store_published_cells(conn, target: str) -> int:
    """(Re)parse the target's groups/*.json into published_leaderboard_cells."""
    ensure_published_tables(conn)
    keys = _published_run_keys(conn, target)
    rows = []
    for name, content in conn.execute(
            "SELECT name, content FROM published_documents WHERE target = ? AND name LIKE 'groups/%' "
            "ORDER BY name", [target]).fetchall():
        try:
            tables = json.loads(content)
        except ValueError:
            continue
        if not isinstance(tables, list):
            continue
        group = name[len("groups/"):-len(".json")]
        rows += parse_group_tables(target, group, tables, keys)
    conn.execute("DELETE FROM published_leaderboard_cells WHERE target = ?", [target])
    if rows:
        insert_json_rows(conn, "published_leaderboard_cells", rows, columns=CELL_COLUMNS)
    return len(rows)


# ----------------------------------------------------------------------------------------------
@dataclass
class RebuildResult:
    target: str
    tables: dict[str, list[dict]]
    run_keys: dict[str, tuple[Optional[str], Optional[str]]]
    duplicated_runs: set[str] = field(default_factory=set)
    multi_deployment_models: set[str] = field(default_factory=set)
    seconds: float = 0.0
    output_dir: Optional[str] = None


def _record_release_prices(conn: duckdb.DuckDBPyConnection, main_db: str) -> None:
    """The prices analytics' cost_vs_score uses: the store's, then the deployments settings' for the
    release's other deployments (conf/deployments.yaml)."""
    conn.execute(f'INSERT INTO deployment_prices SELECT * FROM "{main_db}".main.deployment_prices')
    known = {r[0] for r in conn.execute("SELECT model_deployment FROM deployment_prices").fetchall()}
    deployments = {r[0] for r in conn.execute(
        "SELECT DISTINCT run_spec ->> '$.adapter_spec.model_deployment' FROM runs").fetchall() if r[0]}
    settings = SettingsRegistry.load(None)
    record_prices(conn, {d: settings.for_deployment(d) for d in sorted(deployments - known)})


def _analytics_inputs(conn: duckdb.DuckDBPyConnection, main_db: str, suites: list[str]) -> None:
    """The analytics models' inputs in the scratch database: the store's settings and prices, and the
    imported per-instance stats (unperturbed instances), completions and annotation entries as views
    onto the store (read as needed, never copied), and the clinicians' ratings (`human_ratings`: what
    judge_agreement reads of them, copied); `prepare` adds the refusal patterns."""
    conn.execute(f'INSERT INTO analytics_settings SELECT * FROM "{main_db}".main.analytics_settings')
    _record_release_prices(conn, main_db)
    in_suites = "(" + ", ".join(sql_str(x) for x in suites) + ")"
    src = f'"{main_db}".main'
    conn.execute(f"INSERT INTO human_ratings BY NAME SELECT file_row, dataset_name, model_key, instance_id, "
                 f"accuracy, completeness, clarity FROM {src}.human_ratings")
    for view, sql in (
            ("instance_annotation_entries", "SELECT suite, run_name, instance_id, annotator, entry, value "
                                            "FROM {src}.published_annotation_entries WHERE"),
            ("instance_completions", "SELECT suite, run_name, instance_id, train_trial_index, completion "
                                     "FROM {src}.published_completions WHERE"),
            ("instance_stats", "SELECT suite, run_name, instance_id, train_trial_index, ordinal, name, split, "
                               "sub_split, perturbation, count, sum, sum_squared, min, max, mean, variance, stddev "
                               "FROM {src}.published_instance_stats WHERE instance_perturbation IS NULL AND")):
        conn.execute(f"DROP TABLE IF EXISTS {view}")
        conn.execute(f"CREATE VIEW {view} AS {sql.format(src=src)} suite IN {in_suites}")


def rebuild_target(conn: duckdb.DuckDBPyConnection, target: str, output_dir: Optional[str] = None,
                   date: Optional[str] = None) -> RebuildResult:
    """Summarize an imported target with our SQL models in a scratch database (the store's working
    leaderboard tables are left alone; the rebuilt ones are kept under `leaderboard.*` keyed by the
    target); optionally write HELM's files under `output_dir`."""
    start = time.time()
    ensure_published_tables(conn)
    info = conn.execute("SELECT mode, local_suites FROM published_targets WHERE target = ?", [target]).fetchone()
    if info is None:
        raise MedhelmError(f"{target!r} has not been imported (run medhelm-import first)")
    mode, local_suites = info
    doc = conn.execute("SELECT content FROM published_documents WHERE target = ? AND name = 'schema.json'",
                       [target]).fetchone()
    main_db = conn.execute("SELECT current_database()").fetchone()[0]
    scratch = "medhelm_rebuild"
    conn.execute(f"ATTACH ':memory:' AS {scratch}")
    try:
        conn.execute(f"USE {scratch}")
        ensure_input_tables(conn)
        suites_sql = "(SELECT unnest(?::VARCHAR[]))"
        conn.execute(f'INSERT INTO runs BY NAME SELECT * FROM "{main_db}".main.runs WHERE suite IN {suites_sql}',
                     [list(local_suites)])
        conn.execute(f'INSERT INTO run_stats SELECT * FROM "{main_db}".main.run_stats WHERE suite IN {suites_sql}',
                     [list(local_suites)])
        _analytics_inputs(conn, main_db, list(local_suites))
        selected = (SummarizeTarget.select(release=target, suites=list(local_suites)) if mode == "release"
                    else SummarizeTarget.select(suite=local_suites[0]))
        # its own schema.json and model list; a suite that was never summarized: the edition's schema, our models
        imported = json.loads(doc[0]) if doc is not None else None
        schema, registry = resolve_schema(conn, selected, imported_schema=imported)
        prepare(conn, selected, schema, registry)
        run_models(conn)
        keep(conn, as_target=target, into=main_db)   # all of the target's kept tables, or none
        tables = build_group_tables(conn)
        if output_dir:
            write_files(conn, output_dir, date=date)
        names = [r[0] for r in conn.execute("SELECT run_name FROM target_runs ORDER BY run_id").fetchall()]
        keys = {n: (d, m) for n, d, m in conn.execute(
            "SELECT run_name, model_deployment, model FROM target_runs").fetchall()}
        multi = {m for (m,) in conn.execute(
            "SELECT model FROM target_runs GROUP BY model HAVING count(DISTINCT model_deployment) > 1").fetchall()}
    finally:
        conn.execute(f'USE "{main_db}"')
        conn.execute(f"DETACH {scratch}")
    dup = {n for n, c in Counter(names).items() if c > 1}
    return RebuildResult(target, tables, keys, dup, multi, time.time() - start, output_dir)


# ----------------------------------------------------------------------------------------------
def _match_keys(cells: list[dict]) -> dict[tuple, dict]:
    """Key every cell by (table, row, column) identities that do not depend on positions."""
    out: dict[tuple, dict] = {}
    table_seen: Counter = Counter()
    table_ids: dict[tuple, tuple] = {}
    row_seen: dict[tuple, Counter] = {}
    row_ids: dict[tuple, tuple] = {}
    col_seen: dict[tuple, Counter] = {}
    col_ids: dict[tuple, tuple] = {}
    for c in cells:
        tpos = (c["group_name"], c["table_pos"])
        if tpos not in table_ids:
            base = (c["group_name"], c["table_name"], c["table_title"])
            table_ids[tpos] = base + (table_seen[base],)
            table_seen[base] += 1
        tid = table_ids[tpos]
        rpos = tpos + (c["row_pos"],)
        if rpos not in row_ids:
            base = ((c["model_deployment"], c["model"]) if c["model_deployment"] is not None or c["model"] is not None
                    else ("name", c["row_name"]))
            seen = row_seen.setdefault(tid, Counter())
            row_ids[rpos] = base + (seen[base],)
            seen[base] += 1
        cpos = tpos + (c["col_idx"],)
        if cpos not in col_ids:
            base = (c["column_name"], c["metric"], c["run_group"], c["perturbation"])
            seen = col_seen.setdefault(tid, Counter())
            col_ids[cpos] = base + (seen[base],)
            seen[base] += 1
        out[(tid, row_ids[rpos], col_ids[cpos])] = c
    return out


def _equal(a: Optional[float], b: Optional[float]) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= TOL


def compare_cells(target: str, published: list[dict], rebuilt: list[dict], rb: RebuildResult) -> list[dict]:
    """One row per cell on either side, with `equal` and, where they differ, a known `cause`."""
    pub, reb = _match_keys(published), _match_keys(rebuilt)
    keys = list(pub) + [k for k in reb if k not in pub]
    rows = []
    for k in keys:
        p, r = pub.get(k), reb.get(k)
        c = p or r
        pv = p["value"] if p else None
        rv = r["value"] if r else None
        eq = p is not None and r is not None and _equal(pv, rv)
        rows.append({
            "release": target, "group_name": c["group_name"], "table_pos": c["table_pos"],
            "table_name": c["table_name"], "table_title": c["table_title"], "row_pos": c["row_pos"],
            "row_name": c["row_name"], "model_deployment": c["model_deployment"], "model": c["model"],
            "col_idx": c["col_idx"], "column_name": c["column_name"], "metric": c["metric"],
            "run_group": c["run_group"], "is_aggregate": c["is_aggregate"], "published_value": pv,
            "rebuilt_value": rv,
            "abs_diff": abs(pv - rv) if pv is not None and rv is not None else None,
            "equal": eq, "published_count": p["run_count"] if p else None,
            "rebuilt_count": r["run_count"] if r else None, "cause": None,
            "both_missing": eq and pv is None and rv is None,   # both tables have the cell, both empty
            "_p": p, "_r": r, "_table": k[0],
        })
    differing_tables = {row["_table"] for row in rows if not row["equal"] and not row["is_aggregate"]}
    for row in rows:
        if not row["equal"]:
            row["cause"] = _cause(row, rb, row["_table"] in differing_tables)
    for row in rows:
        for k in ("_p", "_r", "_table"):
            row.pop(k)
    return rows


def _cause(row: dict, rb: RebuildResult, table_differs: bool) -> str:
    """Known reasons why a published cell differs from ours (helm-output-summarize.md §0, §4)."""
    p, r = row["_p"], row["_r"]
    names = set((p or {}).get("run_spec_names") or []) | set((r or {}).get("run_spec_names") or [])
    multi = row["model"] in rb.multi_deployment_models
    if p is None or r is None:
        side = "rebuilt" if p is None else "published"
        if multi:
            return f"duplicate deployments: {row['model']} has several deployments (row only in {side})"
        return f"only in {side} (runs or schema changed since publication)"
    if row["is_aggregate"]:
        if table_differs:
            return "follows the differing cells of this table"
        return "win-rate rule: ties scored 0/1 before HELM #3001 (0.5 since)"
    dups = names & rb.duplicated_runs
    if dups:
        return f"suites merged twice: {len(dups)} run(s) read from more than one suite are counted once per suite"
    if row["published_count"] != row["rebuilt_count"]:
        if multi:
            return f"duplicate deployments: {row['model']} has several deployments"
        return (f"different runs merged ({row['published_count']} published vs {row['rebuilt_count']} rebuilt): "
                f"the bucket's runs changed since publication")
    if (row["published_value"] is None) != (row["rebuilt_value"] is None):
        return "split mismatch: the metric exists on one side only for the column's split"
    return "stats.json differs from what was summarized (e.g. per-instance stats rewritten after publication)"


# ----------------------------------------------------------------------------------------------
@dataclass
class ComparisonSummary:
    target: str
    cells: int
    equal: int
    both_missing: int       # equal, but empty on both sides: says nothing
    win_rates: int
    win_rates_equal: int
    causes: dict[str, int]
    rebuild_seconds: float
    published_cells: int
    rebuilt_cells: int
    unchanged: bool = False   # the last rebuild's summary: nothing it read has changed since

    @property
    def valued(self) -> int:
        return self.cells - self.both_missing

    @property
    def valued_equal(self) -> int:
        return self.equal - self.both_missing

    def lines(self) -> list[str]:
        rebuilt = ("not rebuilt: its inputs are those of the last rebuild" if self.unchanged
                   else f"rebuilt in {self.rebuild_seconds:.2f}s")
        if not self.published_cells:
            return [f"{self.target}: no published leaderboard to compare with (no groups/*.json was imported); "
                    f"{self.rebuilt_cells} cells; {rebuilt}"]
        out = [f"{self.target}: valued cells equal {self.valued_equal}/{self.valued}, missing on both sides "
               f"{self.both_missing} ({self.cells} cells compared); mean win rates "
               f"{self.win_rates_equal}/{self.win_rates} equal; {rebuilt}"]
        for cause, n in sorted(self.causes.items(), key=lambda kv: -kv[1]):
            out.append(f"  {n} differ: {cause}")
        return out


COMPARISON_COLUMNS = ["release", "group_name", "table_pos", "table_name", "table_title", "row_pos", "row_name",
                      "model_deployment", "model", "col_idx", "column_name", "metric", "run_group", "is_aggregate",
                      "published_value", "rebuilt_value", "abs_diff", "equal", "published_count", "rebuilt_count",
                      "cause", "both_missing", "edition"]


def rebuild_and_compare(store: Store, target: str, output_dir: Optional[str] = None,
                        force: bool = False) -> ComparisonSummary:
    """Rebuild an imported target's leaderboard and write `leaderboard_comparison` for it; when
    nothing the rebuild reads changed since the last one (`freshness`), no files are to be written
    and no rebuild is `force`d, return that rebuild's summary instead."""
    with store.connect() as conn, memory_bound(conn):
        ensure_published_tables(conn)
        fingerprint = rebuild_fingerprint(conn, target)
        last = conn.execute("SELECT summary FROM published_rebuilds WHERE target = ? AND fingerprint = ?",
                            [target, fingerprint]).fetchone()
        if last is not None and output_dir is None and not force:
            return ComparisonSummary(**{**json.loads(last[0]), "unchanged": True})
        rb = rebuild_target(conn, target, output_dir=output_dir)
        rebuilt = []
        for group, tables in rb.tables.items():
            rebuilt += parse_group_tables(target, group, tables, rb.run_keys)
        cur = conn.execute("SELECT * FROM published_leaderboard_cells WHERE target = ? "
                           "ORDER BY group_name, table_pos, row_pos, col_idx", [target])
        cols = [d[0] for d in cur.description]
        published = [dict(zip(cols, r)) for r in cur.fetchall()]
        for p in published:
            p["run_spec_names"] = list(p["run_spec_names"] or [])
        rows = compare_cells(target, published, rebuilt, rb)
        # The edition the rebuilt side reproduces (runs without one: helm-0.5.16, as published ones are).
        edition = conn.execute(
            "SELECT string_agg(DISTINCT coalesce(r.edition, 'helm-0.5.16'), ', ') FROM runs r"
            " JOIN published_targets t ON list_contains(t.local_suites, r.suite) WHERE t.target = ?",
            [target]).fetchone()[0]
        for r in rows:
            r["edition"] = edition or "helm-0.5.16"
        causes = Counter(r["cause"] for r in rows if not r["equal"])
        wr = [r for r in rows if r["column_name"] == "Mean win rate" and r["is_aggregate"]]
        summary = ComparisonSummary(target, len(rows), sum(r["equal"] for r in rows),
                                    sum(r["both_missing"] for r in rows), len(wr), sum(r["equal"] for r in wr),
                                    dict(causes), rb.seconds, len(published), len(rebuilt))
        with in_transaction(conn):
            conn.execute("DELETE FROM leaderboard_comparison WHERE release = ?", [target])
            if rows:
                insert_json_rows(conn, "leaderboard_comparison", rows, columns=COMPARISON_COLUMNS)
            conn.execute("DELETE FROM published_rebuilds WHERE target = ?", [target])
            conn.execute("INSERT INTO published_rebuilds VALUES (?, ?, ?, current_timestamp)",
                         [target, fingerprint, json.dumps(dataclasses.asdict(summary))])
    return summary
