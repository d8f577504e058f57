"""Input tables of the summarize SQL models, and a loader for HELM `benchmark_output` run directories.

Input contract (sql/ddl/summarize_inputs.sql; filled by the pipeline, by the published-results importer, or by
`load_benchmark_output_runs` from HELM run directories):

    runs(suite, run_name, run_spec JSON, scenario_metadata JSON, run_path, edition)
        one row per run directory of a suite; `run_spec` is HELM's run_spec.json as written
        (None fields omitted); `scenario_metadata` is HELM's ScenarioMetadata dict (only needed
        for --auto-generate-schema) or NULL; `run_path` is what HELM puts in runs.json
        (`<output_path>/runs/<suite>/<run dir>`); its last path component is the run directory
        name that fixes HELM's read order (sorted directory names); `edition` the upstream
        edition the run reproduces (NULL: helm-0.5.16; `suite_editions`).
    run_stats(suite, run_name, ordinal, name, split, sub_split, perturbation JSON,
              perturbation_name, computed_on, count, sum, sum_squared, min, max, mean,
              variance, stddev)
        one row per Stat of the run's stats.json, `ordinal` = 0-based position in the file.

`summarize_target(target, mode, suite, suite_pos)` selects what the SQL models summarize
(`SummarizeTarget`, written by `medhelm_core.summarize.pipeline.prepare`): mode 'suite' (one row,
target = suite; the page names an imported suite by its published name) or 'release' (target =
release name, one row per suite in --suites order; a suite listed twice is read twice, as HELM does).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

import duckdb

from medhelm_core.editions import DEFAULT_EDITION
from medhelm_core.resources import ddl

STAT_COLUMNS = [
    "suite", "run_name", "ordinal", "name", "split", "sub_split", "perturbation", "perturbation_name",
    "computed_on", "count", "sum", "sum_squared", "min", "max", "mean", "variance", "stddev",
]


def suite_editions(conn: duckdb.DuckDBPyConnection, suites: Optional[Iterable[str]] = None) -> dict[str, str]:
    """suite -> the edition(s) its runs reproduce (sorted, ", "-joined; a run without one is
    helm-0.5.16), for `suites` (default: every suite in `runs`)."""
    wanted = None if suites is None else list(suites)
    rows = conn.execute(
        "SELECT suite, array_to_string(list_sort(list(DISTINCT coalesce(edition, ?))), ', ') FROM runs"
        " WHERE ? OR suite IN (SELECT unnest(?::VARCHAR[])) GROUP BY suite ORDER BY suite",
        [DEFAULT_EDITION, wanted is None, wanted or []]).fetchall()
    return dict(rows)


def ensure_input_tables(conn: duckdb.DuckDBPyConnection) -> None:
    """Create the input tables (runs, run_stats, summarize_target) if they do not exist."""
    conn.execute(ddl("summarize_inputs"))


@dataclass(frozen=True)
class SummarizeTarget:
    """What the SQL models summarize: `name` (the suite, or the release), `mode` ('suite' or
    'release') and the suites read, in order (a suite listed twice is read twice, as HELM does)."""

    name: str
    mode: str
    suites: tuple[str, ...]

    @classmethod
    def select(cls, *, suite: Optional[str] = None, release: Optional[str] = None,
               suites: Optional[Iterable[str]] = None) -> "SummarizeTarget":
        """helm-summarize's `--suite S` or `--release R --suites S1 S2 ...` (neither: suite 'default')."""
        if suite and (release or suites):
            raise ValueError("If --suite is specified, then --release and --suites must NOT be specified.")
        if not suite and not release and not suites:
            suite = "default"
        if suite:
            return cls(suite, "suite", (suite,))
        if not release or not suites:
            raise ValueError("If --release is specified, then --suites must also be specified and vice versa")
        return cls(release, "release", tuple(suites))


def write_summarize_target(conn: duckdb.DuckDBPyConnection, target: SummarizeTarget) -> None:
    """Fill `summarize_target` with the target's rows (one per suite, in order)."""
    ensure_input_tables(conn)
    conn.execute("DELETE FROM summarize_target")
    conn.executemany("INSERT INTO summarize_target VALUES (?, ?, ?, ?)",
                     [(target.name, target.mode, s, i) for i, s in enumerate(target.suites)])


def stat_rows(suite: str, run_name: str, stats: list[dict[str, Any]]) -> list[tuple]:
    """Flatten a stats.json list into run_stats rows."""
    rows = []
    for i, st in enumerate(stats):
        mn = st["name"]
        pert = mn.get("perturbation")
        rows.append((
            suite, run_name, i, mn["name"], mn.get("split"), mn.get("sub_split"),
            json.dumps(pert) if pert is not None else None,
            pert.get("name") if pert is not None else None,
            pert.get("computed_on") if pert is not None else None,
            int(st.get("count", 0)),
            _f(st.get("sum", 0)), _f(st.get("sum_squared", 0)),
            _f(st.get("min")), _f(st.get("max")), _f(st.get("mean")), _f(st.get("variance")), _f(st.get("stddev")),
        ))
    return rows


def _f(x: Any) -> Optional[float]:
    return None if x is None else float(x)


def insert_runs(
    conn: duckdb.DuckDBPyConnection, suite: str, items: list[tuple[str, dict, list, Optional[dict], str]],
) -> None:
    """Insert (run_name, run_spec, stats, scenario_metadata, run_path) tuples of one suite."""
    import pandas as pd  # here, not at module level: pandas alone takes ~0.5 s to import

    ensure_input_tables(conn)
    run_df = pd.DataFrame(
        [(suite, name, json.dumps(spec), json.dumps(md) if md is not None else None, path)
         for name, spec, _, md, path in items],
        columns=["suite", "run_name", "run_spec", "scenario_metadata", "run_path"],
    )
    stats = [r for name, _, st, _, _ in items for r in stat_rows(suite, name, st)]
    stat_df = pd.DataFrame(stats, columns=STAT_COLUMNS)
    stat_df = stat_df.astype({"ordinal": "int32", "count": "int64"})
    for c in ["sum", "sum_squared", "min", "max", "mean", "variance", "stddev"]:
        stat_df[c] = stat_df[c].astype("float64")
    conn.register("_runs_in", run_df)
    conn.register("_stats_in", stat_df)
    try:
        conn.execute("INSERT INTO runs (suite, run_name, run_spec, scenario_metadata, run_path)"
                     " SELECT suite, run_name, run_spec::JSON, scenario_metadata::JSON, run_path FROM _runs_in")
        conn.execute(
            "INSERT INTO run_stats SELECT suite, run_name, ordinal, name, split, sub_split, perturbation::JSON, "
            "perturbation_name, computed_on, count, sum, sum_squared, min, max, mean, variance, stddev FROM _stats_in"
        )
    finally:
        conn.unregister("_runs_in")
        conn.unregister("_stats_in")


def load_benchmark_output_runs(
    conn: duckdb.DuckDBPyConnection,
    output_path: str,
    suite: str,
    scenario_metadata: Optional[Callable[[dict], Optional[dict]]] = None,
    replace: bool = True,
) -> int:
    """Fill `runs`/`run_stats` from `<output_path>/runs/<suite>/<run>/{run_spec,stats}.json`.

    Like HELM's `read_runs_for_suite`: every directory except `eval_cache` and `groups`,
    sorted by name; directories lacking run_spec.json or stats.json are skipped.
    `scenario_metadata(run_spec) -> dict | None` optionally supplies HELM's ScenarioMetadata
    (needed only for --auto-generate-schema). With `replace`, rows of `suite` are deleted first.
    Returns the number of runs loaded.
    """
    ensure_input_tables(conn)
    suite_path = os.path.join(output_path, "runs", suite)
    if not os.path.exists(suite_path):
        raise FileNotFoundError(f"Suite {suite} does not exist at {suite_path}")
    names = sorted(
        p for p in os.listdir(suite_path)
        if p not in ("eval_cache", "groups") and os.path.isdir(os.path.join(suite_path, p))
    )
    items = []
    for d in names:
        run_path = os.path.join(suite_path, d)
        spec_p, stats_p = os.path.join(run_path, "run_spec.json"), os.path.join(run_path, "stats.json")
        if not (os.path.exists(spec_p) and os.path.exists(stats_p)):
            continue
        with open(spec_p) as f:
            spec = json.load(f)
        with open(stats_p) as f:
            stats = json.load(f)
        md = scenario_metadata(spec) if scenario_metadata else None
        items.append((spec["name"], spec, stats, md, run_path))
    if replace:
        conn.execute("DELETE FROM runs WHERE suite = ?", [suite])
        conn.execute("DELETE FROM run_stats WHERE suite = ?", [suite])
    if items:
        insert_runs(conn, suite, items)
    return len(items)
