"""helm-summarize as SQL models: golden comparison against HELM 0.5.16's own output.

Golden targets (see ../shared/README.md): suite oracle-cfg (--auto-generate-schema), suite
oracle-private and release oracle (schema_medhelm.yaml), suite public-n50.  For each, the golden
runs are loaded with `load_benchmark_output_runs`, summarized into a tmp dir and compared file by
file.  Run with `-s` to see the per-target counts.

Known HELM nondeterminism (Python's per-process string hash seed), compared order-insensitively:
  * --auto-generate-schema orders metrics / metric groups / scenario run groups by iterating
    `set()`s: for oracle-cfg, tables are matched by name and columns by header text;
  * groups.json "Adaptation method" joins a set of methods: compared as a set.
"""
from __future__ import annotations

import json
import math
import os
import random
import re
import statistics
from collections import Counter
from fractions import Fraction
from pathlib import Path

import duckdb
import pandas as pd
import pytest
import yaml

from medhelm_core.summarize import SQL_DIR, ensure_input_tables, load_benchmark_output_runs, run_sql_models, summarize
from medhelm_core.summarize.sql_models import run_data_tests

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("MEDHELM_SHARED", ROOT.parent / "shared"))
SYN = SHARED / "oracle" / "synthetic"
PUB = SHARED / "oracle" / "public"
SCHEMA = ROOT / "schema" / "schema_medhelm.yaml"
DATE = "2026-11-29"

pytestmark = pytest.mark.skipif(not SYN.exists() or not PUB.exists(), reason="golden files not available")

N_RE = re.compile(r"\((\d+)\)$")


# --------------------------------------------------------------------------- fixtures

def configurable_metadata(run_spec: dict):
    """HELM's MedHELMConfigurableScenario.get_metadata(), built from the benchmark config YAML."""
    ss = run_spec["scenario_spec"]
    if not ss["class_name"].endswith(".MedHELMConfigurableScenario"):
        return None
    path = SYN / "inputs" / "benchmarks" / Path(ss["args"]["config_path"]).relative_to("work/benchmarks")
    cfg = yaml.safe_load(path.read_text())
    return {
        "name": ss["args"]["name"],
        "main_metric": cfg["metrics"][0]["name"],   # BenchmarkConfig.main_metric = first metric
        "main_split": "test",
        "display_name": ss["args"]["name"],
        "description": cfg["description"],
        "taxonomy": {"task": "", "what": "", "when": "", "who": "", "language": ""},
    }


TARGETS = {
    # id: (benchmark_output, suites to load, summarize kwargs, golden dir relative to benchmark_output, ordered)
    "oracle-cfg": (SYN / "benchmark_output", ["oracle-cfg", "oracle-private"],
                   dict(suite="oracle-cfg", auto_generate_schema=True), "runs/oracle-cfg", False),
    "oracle-private": (SYN / "benchmark_output", ["oracle-cfg", "oracle-private"],
                       dict(suite="oracle-private", schema_path=SCHEMA), "runs/oracle-private", True),
    "oracle-release": (SYN / "benchmark_output", ["oracle-cfg", "oracle-private"],
                       dict(release="oracle", suites=["oracle-cfg", "oracle-private"], schema_path=SCHEMA),
                       "releases/oracle", True),
    "public-n50": (PUB / "benchmark_output", ["public-n50"],
                   dict(suite="public-n50", schema_path=SCHEMA), "runs/public-n50", True),
    # oracle-cfg again, but with the schema HELM auto-generated (its schema.json) instead of ours:
    # HELM's hash-seed order is then fixed, and everything must match positionally and bit for bit.
    "oracle-cfg-helm-schema": (SYN / "benchmark_output", ["oracle-cfg", "oracle-private"],
                               dict(suite="oracle-cfg",
                                    schema_path=SYN / "benchmark_output" / "runs" / "oracle-cfg" / "schema.json"),
                               "runs/oracle-cfg", True),
}


def build(target: str, tmp_path: Path):
    bo, suites, kwargs, gold_rel, ordered = TARGETS[target]
    conn = duckdb.connect()
    ensure_input_tables(conn)
    for s in suites:
        assert load_benchmark_output_runs(conn, str(bo), s, scenario_metadata=configurable_metadata) > 0
    out = summarize(conn, str(tmp_path / "benchmark_output"), date=DATE, **kwargs)
    return conn, Path(out), bo / gold_rel, str(tmp_path / "benchmark_output"), ordered


def load(p: Path):
    return json.loads(p.read_text())


def norm_links(obj, prefix: str):
    """Our hrefs start with our output path; HELM's with "benchmark_output"."""
    return json.loads(json.dumps(obj).replace(prefix, "benchmark_output"))


# --------------------------------------------------------------------------- table comparison

def occurrence_keys(header: list[dict]) -> list[tuple[str, int]]:
    seen: Counter = Counter()
    keys = []
    for h in header:
        keys.append((h["value"], seen[h["value"]]))
        seen[h["value"]] += 1
    return keys


def compare_tables(ours: list[dict], gold: list[dict], prefix: str, ordered: bool, counts: Counter, where: str):
    ours = norm_links(ours, prefix)
    if ordered:
        assert [t["name"] for t in ours] == [t["name"] for t in gold], where
    else:
        assert sorted(t["name"] for t in ours) == sorted(t["name"] for t in gold), where
    by_name = {t["name"]: t for t in ours}
    for tg in gold:
        to = by_name[tg["name"]]
        w = f"{where}:{tg['name']}"
        assert to["title"] == tg["title"], w
        assert set(to) == set(tg), w
        counts["tables"] += 1
        if ordered:
            assert to["header"] == tg["header"], w
            col_map = list(range(len(tg["header"])))
        else:
            ko, kg = occurrence_keys(to["header"]), occurrence_keys(tg["header"])
            assert sorted(ko) == sorted(kg), w
            col_map = [ko.index(k) for k in kg]
            for j, i in enumerate(col_map):
                assert to["header"][i] == tg["header"][j], (w, tg["header"][j]["value"])
        counts["header_cells"] += len(tg["header"])
        # rows: display names and order, model cells (href / run_spec_names)
        assert [r[0]["value"] for r in to["rows"]] == [r[0]["value"] for r in tg["rows"]], w
        counts["rows"] += len(tg["rows"])
        for ro, rg in zip(to["rows"], tg["rows"]):
            assert ro[0] == rg[0], w
            assert len(ro) == len(rg), w
            for j in range(1, len(rg)):
                co, cg = ro[col_map[j]], rg[j]
                is_wr = tg["header"][j]["value"] == "Mean win rate"
                counts["cells"] += 1
                counts["win_rate_cells"] += is_wr
                vo, vg = co.get("value"), cg.get("value")
                if vg is None:
                    assert vo is None, (w, j, co, cg)
                else:
                    assert vo is not None and abs(vo - vg) <= 1e-9, (w, tg["header"][j]["value"], vo, vg)
                    counts["cells_valued"] += 1
                    counts["cells_bit_equal"] += (vo == vg and type(vo) is type(vg))
                    counts["win_rate_bit_equal"] += is_wr and vo == vg
                mo, mg = N_RE.search(co.get("description", "")), N_RE.search(cg.get("description", ""))
                assert (mo and mo.group(1)) == (mg and mg.group(1)), (w, co, cg)
                counts["n_counts_checked"] += mg is not None
                # the remaining cell fields: description text, bold style, run_spec_names, markdown
                assert co == cg, (w, tg["header"][j]["value"], co, cg)
                counts["cells_equal"] += 1
        assert to["links"] == tg["links"], w


def check_target(target: str, tmp_path: Path) -> Counter:
    conn, ours, gold, prefix, ordered = build(target, tmp_path)
    counts: Counter = Counter()
    # the models' YAML data tests (not_null, unique, accepted_values, relationships) hold on real runs
    assert run_data_tests(conn) == {}
    # groups/<group>.json and groups/json/<group>_<table>.json
    gold_files = sorted(p.name for p in (gold / "groups").glob("*.json"))
    assert sorted(p.name for p in (ours / "groups").glob("*.json")) == gold_files
    for name in gold_files:
        compare_tables(load(ours / "groups" / name), load(gold / "groups" / name), prefix, ordered, counts, name)
        counts["group_files"] += 1
    gold_json = sorted(p.name for p in (gold / "groups" / "json").glob("*.json"))
    assert sorted(p.name for p in (ours / "groups" / "json").glob("*.json")) == gold_json
    for name in gold_json:
        compare_tables([load(ours / "groups" / "json" / name)], [load(gold / "groups" / "json" / name)],
                       prefix, ordered, Counter(), name)
    if ordered:   # LaTeX is positional; with hash-ordered columns (oracle-cfg) only the file set is compared
        for p in (gold / "groups" / "latex").glob("*.tex"):
            assert (ours / "groups" / "latex" / p.name).read_text() == p.read_text(), p.name
            counts["latex_files"] += 1
    else:
        assert sorted(p.name for p in (ours / "groups" / "latex").glob("*.tex")) == \
            sorted(p.name for p in (gold / "groups" / "latex").glob("*.tex"))

    # groups.json ("Adaptation method" is a joined Python set in HELM: compare as a set)
    go, gg = load(ours / "groups.json"), load(gold / "groups.json")

    def methods_as_set(tables):
        for t in tables:
            for r in t["rows"]:
                r[2]["value"] = sorted(r[2]["value"].split(", "))
        return tables
    go, gg = methods_as_set(go), methods_as_set(gg)
    if not ordered:
        # subgroup order comes from the hash seed, and with it the summation order of the
        # token sums: compare values within 1e-9 there
        go = sorted(go, key=lambda t: t["title"])
        gg = sorted(gg, key=lambda t: t["title"])
        for t in go + gg:
            t["rows"].sort(key=lambda r: r[0]["href"])
        for to, tg in zip(go, gg):
            for ro, rg in zip(to["rows"], tg["rows"]):
                for co, cg in zip(ro, rg):
                    if isinstance(cg.get("value"), float) and isinstance(co.get("value"), float):
                        assert abs(co["value"] - cg["value"]) <= 1e-9, (co, cg)
                        co["value"] = cg["value"]
    assert go == gg
    counts["groups_json_rows"] = sum(len(t["rows"]) for t in gg)

    mo, mg = load(ours / "groups_metadata.json"), load(gold / "groups_metadata.json")
    assert mo == mg and (not ordered or list(mo) == list(mg))

    so, sg = load(ours / "summary.json"), load(gold / "summary.json")
    assert so == sg   # same date given
    assert load(ours / "runs_to_run_suites.json") == load(gold / "runs_to_run_suites.json")
    assert list(load(ours / "runs_to_run_suites.json")) == list(load(gold / "runs_to_run_suites.json"))
    assert load(ours / "costs.json") == load(gold / "costs.json")
    assert (ours / "run_specs.json").read_text() == (gold / "run_specs.json").read_text()
    ro, rg = load(ours / "runs.json"), load(gold / "runs.json")
    assert [Path(r["run_path"]).name for r in ro] == [Path(r["run_path"]).name for r in rg]
    for r, g in zip(ro, rg):
        r["run_path"] = g["run_path"]
    assert ro == rg
    counts["runs"] = len(rg)

    sco, scg = load(ours / "schema.json"), load(gold / "schema.json")
    if ordered and "adapter" not in scg:   # HELM's read_schema adds `adapter` to a schema it reads
        assert sco.pop("adapter") and sco == scg and list(sco) == list(scg)
    elif ordered:
        assert (ours / "schema.json").read_text() == (gold / "schema.json").read_text()
    else:
        assert set(sco) == set(scg)
        for key in scg:
            def canon(items):
                out = []
                for it in items:
                    it = dict(it)
                    if key == "run_groups":   # list orders come from hash-ordered sets
                        it["metric_groups"] = sorted(it["metric_groups"])
                        it["subgroups"] = sorted(it["subgroups"])
                    out.append(json.dumps(it, sort_keys=True))
                return sorted(out)
            assert canon(sco[key]) == canon(scg[key]), key
    print(f"\n[{target}] {dict(counts)}")
    return counts


@pytest.mark.parametrize("target", list(TARGETS))
def test_golden(target, tmp_path):
    counts = check_target(target, tmp_path)
    assert counts["cells"] > 0 and counts["cells_equal"] == counts["cells"]
    assert counts["cells_bit_equal"] == counts["cells_valued"]


# --------------------------------------------------------------------------- win rates at scale

def helm_mean_win_rates(columns: list[tuple[bool | None, list[float | None]]], n_rows: int):
    """Reference: HELM's compute_aggregate_row_win_rates written out (mean via statistics.mean)."""
    per_row: list[list[float]] = [[] for _ in range(n_rows)]
    for lower, values in columns:
        if lower is None:
            continue
        counts = Counter(v for v in values if v is not None)
        wins, acc = {}, 0
        for v, c in sorted(counts.items(), reverse=lower):
            wins[v] = acc + (c - 1) / 2
            acc += c
        if acc < 2:
            continue
        for i, v in enumerate(values):
            if v is not None:
                per_row[i].append(wins[v] / (acc - 1))
    return [statistics.mean(w) if w else None for w in per_row]


def _stub_tables(conn, tables):
    """Minimal inputs of column_win_rates/row_aggregates, bulk-loaded through pandas."""
    gt, rows, cols, cells = [], [], [], []
    for tid, (n_rows, columns) in enumerate(tables):
        gt.append((tid, "win_rate"))
        rows.extend((tid, r) for r in range(n_rows))
        cols.extend((tid, c, lower) for c, (lower, _) in enumerate(columns))
        cells.extend((tid, r, c, v) for c, (_, vals) in enumerate(columns) for r, v in enumerate(vals))
    frames = {
        "gt": pd.DataFrame(gt, columns=["table_id", "strategy"]),
        "tr": pd.DataFrame(rows, columns=["table_id", "row_pos"]),
        "tc": pd.DataFrame(cols, columns=["table_id", "col_idx", "lower_is_better"]).astype({"lower_is_better": "object"}),
        "cl": pd.DataFrame(cells, columns=["table_id", "row_pos", "col_idx", "value"]).astype({"value": "float64"}),
    }
    for k, df in frames.items():
        conn.register(k, df)
    conn.execute("CREATE OR REPLACE TABLE group_tables AS SELECT CAST(table_id AS INTEGER) AS table_id, "
                 "[strategy] AS aggregation_strategies FROM gt")
    conn.execute("CREATE OR REPLACE TABLE table_rows AS SELECT CAST(table_id AS INTEGER) AS table_id, "
                 "CAST(row_pos AS INTEGER) AS row_pos FROM tr")
    conn.execute("CREATE OR REPLACE TABLE table_columns AS SELECT CAST(table_id AS INTEGER) AS table_id, "
                 "CAST(col_idx AS INTEGER) AS col_idx, CAST(lower_is_better AS BOOLEAN) AS lower_is_better FROM tc")
    conn.execute("CREATE OR REPLACE TABLE table_cells AS SELECT CAST(table_id AS INTEGER) AS table_id, "
                 "CAST(row_pos AS INTEGER) AS row_pos, CAST(col_idx AS INTEGER) AS col_idx, value FROM cl")


def _naive_mean(columns, row):
    """sum(win rates) / len, in column order (what a float AVG does) - for contrast only."""
    ws = []
    for lower, values in columns:
        if lower is None or values[row] is None:
            continue
        vals = [v for v in values if v is not None]
        if len(vals) < 2:
            continue
        v = values[row]
        worse = sum(1 for x in vals if (x > v if lower else x < v))
        ties = sum(1 for x in vals if x == v)
        ws.append((worse + (ties - 1) / 2) / (len(vals) - 1))
    return sum(ws) / len(ws) if ws else None


def test_mean_win_rate_matches_helm_bit_for_bit():
    """1,500 random tables (ties, nulls, lower_is_better True/False/None, up to 60 rows and 50
    columns): SQL column_win_rates + row_aggregates == HELM's algorithm with statistics.mean."""
    rng = random.Random(20260605)
    tables = []
    for _ in range(1500):
        n_rows, n_cols = rng.randint(1, 60), rng.randint(1, 50)
        columns = []
        for _ in range(n_cols):
            pool = [rng.random() for _ in range(rng.randint(1, 6))] if rng.random() < 0.5 else None
            vals = []
            for _ in range(n_rows):
                if rng.random() < 0.15:
                    vals.append(None)
                else:
                    vals.append(rng.choice(pool) if pool else round(rng.random(), rng.randint(1, 17)))
            columns.append((rng.choice([True, False, False, None]), vals))
        tables.append((n_rows, columns))
    conn = duckdb.connect()
    _stub_tables(conn, tables)
    run_sql_models(conn, SQL_DIR, only=["column_win_rates", "row_aggregates"])
    got = {(t, r): (v, exact) for t, r, v, exact in conn.execute(
        "SELECT table_id, row_pos, mean_win_rate, mean_win_rate_exact FROM row_aggregates").fetchall()}
    compared = 0
    for tid, (n_rows, columns) in enumerate(tables):
        expected = helm_mean_win_rates(columns, n_rows)
        for r, e in enumerate(expected):
            v, exact = got[(tid, r)]
            assert exact
            assert (v is None and e is None) or (v == e), (tid, r, v, e)
            compared += e is not None
    assert compared > 10000
    naive = sum(1 for tid, (n_rows, columns) in enumerate(tables) for r in range(n_rows)
                if got[(tid, r)][0] is not None and _naive_mean(columns, r) != got[(tid, r)][0])
    assert naive > 0   # a plain float mean would have missed some of them
    print(f"\n[win rates] {compared} mean win rates bit-identical to statistics.mean")


def test_exact_mean_rounding_edge_cases():
    """Means that a float sum / len gets wrong in the last bit, and halfway cases."""
    cases = [[0.1] * 10, [1 / 3, 1 / 3, 1 / 3], [0.5, 0.25, 0.125, 1e-12 * 0 + 2 ** -60], [1.0] * 7,
             [0.0, 0.0], [1 / 7, 2 / 7, 3 / 7, 4 / 7, 5 / 7, 6 / 7, 1.0], [2 ** -26, 1.0, 1.0]]
    conn = duckdb.connect()
    conn.execute("CREATE TABLE column_win_rates (table_id INTEGER, row_pos INTEGER, win_rate DOUBLE)")
    conn.executemany("INSERT INTO column_win_rates VALUES (0, ?, ?)", [(i, w) for i, c in enumerate(cases) for w in c])
    conn.execute("CREATE TABLE group_tables (table_id INTEGER, aggregation_strategies VARCHAR[])")
    conn.execute("INSERT INTO group_tables VALUES (0, ['win_rate'])")
    conn.execute("CREATE TABLE table_rows (table_id INTEGER, row_pos INTEGER)")
    conn.executemany("INSERT INTO table_rows VALUES (0, ?)", [(i,) for i in range(len(cases))])
    conn.execute("CREATE TABLE table_columns (table_id INTEGER, col_idx INTEGER, lower_is_better BOOLEAN)")
    conn.execute("CREATE TABLE table_cells (table_id INTEGER, row_pos INTEGER, col_idx INTEGER, value DOUBLE)")
    run_sql_models(conn, SQL_DIR, only=["row_aggregates"])
    got = dict(conn.execute("SELECT row_pos, mean_win_rate FROM row_aggregates").fetchall())
    for i, c in enumerate(cases):
        assert got[i] == statistics.mean(c) == float(sum(map(Fraction, c)) / len(c)), (c, got[i])


# --------------------------------------------------------------------------- merge semantics

def _insert_run(conn, suite, name, groups, model, stats, scenario_args=None):
    spec = {"name": name,
            "scenario_spec": {"class_name": "x.S", "args": scenario_args or {}},
            "adapter_spec": {"method": "generation", "model_deployment": model, "model": model, "temperature": 0.0},
            "metric_specs": [], "groups": groups}
    conn.execute("INSERT INTO runs (suite, run_name, run_spec, scenario_metadata, run_path) VALUES (?, ?, ?, NULL, ?)", [suite, name, json.dumps(spec), f"o/runs/{suite}/{name}"])
    for i, (mname, split, sub, pert, count, total) in enumerate(stats):
        conn.execute("INSERT INTO run_stats VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL)",
                     [suite, name, i, mname, split, sub,
                      json.dumps({"name": pert, "robustness": True, "fairness": False, "computed_on": "worst"})
                      if pert else None, pert, "worst" if pert else None,
                      count, total, total * total, total / count if count else None,
                      total / count if count else None, total / count if count else None])


def test_merge_rules(tmp_path):
    """Duplicate suites counted twice, sub-splits pooled, perturbed copies ignored,
    quasi_exact_match -> exact_match fallback, count-0 stats, missing runs/metrics."""
    schema = {
        "metrics": [{"name": "quasi_exact_match", "display_name": "QEM", "lower_is_better": False},
                    {"name": "exact_match", "display_name": "EM", "lower_is_better": False},
                    {"name": "num_instances", "display_name": "# eval"}],
        "metric_groups": [{"name": "accuracy", "display_name": "Accuracy",
                           "metrics": [{"name": "${main_name}", "split": "${main_split}"}]},
                          {"name": "general_information", "display_name": "General information", "hide_win_rates": True,
                           "metrics": [{"name": "num_instances", "split": "${main_split}"}]}],
        "run_groups": [
            {"name": "top", "display_name": "Top", "subgroups": ["a", "b", "c"], "category": "All"},
            {"name": "a", "display_name": "A", "metric_groups": ["accuracy", "general_information"],
             "environment": {"main_name": "quasi_exact_match", "main_split": "test"}},
            {"name": "b", "display_name": "B", "metric_groups": ["accuracy", "general_information"],
             "environment": {"main_name": "exact_match", "main_split": "test"}},
            {"name": "c", "display_name": "C", "metric_groups": ["accuracy"],
             "environment": {"main_name": "exact_match", "main_split": "test"}},
        ],
    }
    schema_path = tmp_path / "schema.yaml"
    schema_path.write_text(yaml.safe_dump(schema))
    conn = duckdb.connect()
    ensure_input_tables(conn)
    # m1 in group a: only exact_match (fallback), with two sub-splits and a perturbed copy
    _insert_run(conn, "s1", "a:model=m1", ["a"], "org/m1", [
        ("exact_match", "test", "x", None, 1, 0.5), ("exact_match", "test", "y", None, 1, 1.0),
        ("exact_match", "test", None, "robustness", 1, 0.0), ("num_instances", "test", None, None, 1, 10.0)])
    _insert_run(conn, "s1", "a:model=m2", ["a"], "org/m2", [
        ("quasi_exact_match", "test", None, None, 1, 0.25), ("exact_match", "test", None, None, 1, 0.9),
        ("num_instances", "test", None, None, 0, 0.0)])
    _insert_run(conn, "s1", "b:model=m1", ["b"], "org/m1", [("exact_match", "valid", None, None, 1, 0.3)])
    out = summarize(conn, str(tmp_path / "bo"), schema_path=schema_path, release="r", suites=["s1", "s1"],
                    date=DATE)
    top = {t["name"]: t for t in load(Path(out) / "groups" / "top.json")}
    acc = top["accuracy"]
    assert [h["value"] for h in acc["header"]] == ["Model", "Mean win rate", "A - QEM", "B - EM", "C - EM"]
    rows = {r[0]["value"]: r for r in acc["rows"]}
    assert list(rows) == ["org/m1", "org/m2"]
    m1, m2 = rows["org/m1"], rows["org/m2"]
    # m1 / A: exact_match fallback, sub-splits pooled (0.5 + 1.0) per run, suite listed twice -> 4 stats
    assert m1[2]["value"] == 0.75 and m1[2]["description"].endswith("(4)")
    assert m1[2]["run_spec_names"] == ["a:model=m1"]
    assert m2[2]["value"] == 0.25 and m2[2]["description"].endswith("(2)")
    assert m1[3] == {"description": "2 matching runs, but no matching metrics", "markdown": False}
    assert m2[3] == {"description": "No matching runs", "markdown": False}
    assert m1[4] == {"description": "No matching runs", "markdown": False}
    # win rates: only column A has 2 values -> m1 wins it
    assert m1[1] == {"value": 1.0, "style": {"font-weight": "bold"}, "markdown": False}
    assert m2[1] == {"value": 0.0, "markdown": False}
    gi = top["general_information"]
    m2_gi = [r for r in gi["rows"] if r[0]["value"] == "org/m2"][0]
    assert m2_gi[1] == {"description": "(0)", "style": {}, "markdown": False, "run_spec_names": ["a:model=m2"]}
    assert load(Path(out) / "runs_to_run_suites.json") == {"a:model=m1": "s1", "a:model=m2": "s1", "b:model=m1": "s1"}
    assert len(load(Path(out) / "runs.json")) == 6


# --------------------------------------------------------------------------- 3-suite synthetic release

def _reference_top_tables(bo: Path, suites: list[str], schema_path: Path):
    """Independent reference of HELM's top-group Accuracy/Efficiency tables from the run files:
    cell = left-fold merge of per-run stats (sub-splits pooled) in read order; mean win rate via
    statistics.mean.  (Valid here: every run has a single schema group and one adapter spec per model.)"""
    from medhelm_core.summarize.schema import expand_subgroups, load_schema
    schema = load_schema(schema_path)
    groups = {g["name"]: g for g in schema["run_groups"]}
    leaves = [g for g in expand_subgroups(schema, "medhelm_scenarios") if not groups[g]["subgroups"]]
    runs = []
    for s in suites:
        d = bo / "runs" / s
        for name in sorted(p.name for p in d.iterdir() if p.is_dir() and p.name not in ("eval_cache", "groups")):
            if (d / name / "run_spec.json").exists() and (d / name / "stats.json").exists():
                runs.append((load(d / name / "run_spec.json"), load(d / name / "stats.json")))
    keys = sorted({(r["adapter_spec"]["model_deployment"], r["adapter_spec"]["model"]) for r, _ in runs})
    out = {}
    for table, metric in (("accuracy", None), ("efficiency", "inference_runtime")):
        cells = {}
        for key in keys:
            for leaf in leaves:
                env = groups[leaf]["environment"]
                name, split = metric or env["main_name"], env["main_split"]
                total, count = None, 0
                for spec, stats in runs:
                    if (spec["adapter_spec"]["model_deployment"], spec["adapter_spec"]["model"]) != key \
                            or leaf not in spec["groups"]:
                        continue
                    hits = [st for st in stats if st["name"]["name"] == name and st["name"].get("split") == split
                            and "perturbation" not in st["name"]]
                    if not hits:
                        continue
                    run_sum = 0
                    for st in hits:
                        run_sum += st["sum"]
                        count += st["count"]
                    total = run_sum if total is None else total + run_sum
                cells[key, leaf] = total / count if total is not None and count else None
        lower = metric is not None
        rates = {k: [] for k in keys}
        for leaf in leaves:
            vals = {k: cells[k, leaf] for k in keys if cells[k, leaf] is not None}
            if len(vals) < 2:
                continue
            for k, v in vals.items():
                worse = sum(1 for x in vals.values() if (x > v if lower else x < v))
                ties = sum(1 for x in vals.values() if x == v)
                rates[k].append((worse + (ties - 1) / 2) / (len(vals) - 1))
        out[table] = {k: ([cells[k, leaf] for leaf in leaves], statistics.mean(rates[k]) if rates[k] else None)
                      for k in keys}
    return out


@pytest.mark.skipif(not (SHARED / "tools" / "synth_release.py").exists(), reason="synth_release.py not available")
def test_three_suite_release_matches_reference(tmp_path):
    """13 models x 14 scenarios in three suites with different seeds, released together: every
    cell merges three runs (a float sum whose order matters); values and mean win rates of the
    top Accuracy and Efficiency tables must equal the reference bit for bit."""
    import subprocess
    import sys
    bo = tmp_path / "bo"
    suites = ["synth-s1", "synth-s2", "synth-s3"]
    for i, s in enumerate(suites):
        subprocess.run([sys.executable, str(SHARED / "tools" / "synth_release.py"), "-m", "13", "-k", "7",
                        "--seed", str(i + 1), "--suite", s, "--jobs", "4",
                        str(PUB / "benchmark_output" / "runs" / "public-n50"), str(bo)],
                       check=True, capture_output=True)
    conn = duckdb.connect()
    ensure_input_tables(conn)
    for s in suites:
        load_benchmark_output_runs(conn, str(bo), s)
    out = Path(summarize(conn, str(tmp_path / "out"), release="r", suites=suites, schema_path=SCHEMA, date=DATE))
    ref = _reference_top_tables(bo, suites, SCHEMA)
    tables = {t["name"]: t for t in load(out / "groups" / "medhelm_scenarios.json")}
    compared = 0
    for name in ("accuracy", "efficiency"):
        t = tables[name]
        assert len(t["rows"]) == 13
        for row in t["rows"]:
            model = row[0]["value"]
            (vals, wr), = [v for k, v in ref[name].items() if k[1] == model]
            assert row[1].get("value") == wr, (name, model)
            for cell, v in zip(row[2:], vals):
                assert cell.get("value") == v, (name, model, cell, v)
                if v is not None:
                    assert cell["description"].endswith("(3)")
                    compared += 1
    assert compared == 2 * 13 * 14
    print(f"\n[3-suite release] {compared} cells and 26 mean win rates bit-identical to the reference")


def test_visibility_sub_splits_and_scenario_tables(tmp_path):
    """HELM's visibility rules ('this_group_only'), sub-split tables, several scenario specs in a
    leaf (aggregate table first, empty-args title), and rows kept for hidden runs in scenario tables."""
    schema = {
        "metrics": [{"name": "exact_match", "display_name": "Exact match", "short_display_name": "EM",
                     "lower_is_better": False}],
        "metric_groups": [{"name": "accuracy", "display_name": "Accuracy",
                           "metrics": [{"name": "${main_name}", "split": "${main_split}"}]}],
        "run_groups": [
            {"name": "top", "display_name": "Top", "subgroups": ["a", "abl"]},
            {"name": "a", "display_name": "A", "metric_groups": ["accuracy"], "sub_splits": ["x", "y"],
             "environment": {"main_name": "exact_match", "main_split": "test"}},
            {"name": "abl", "display_name": "Abl", "metric_groups": ["accuracy"], "visibility": "this_group_only",
             "environment": {"main_name": "exact_match", "main_split": "test"}},
        ],
    }
    schema_path = tmp_path / "schema.yaml"
    schema_path.write_text(yaml.safe_dump(schema))
    conn = duckdb.connect()
    ensure_input_tables(conn)
    _insert_run(conn, "s", "r1", ["a"], "o/m1", [("exact_match", "test", "x", None, 1, 0.5),
                                                  ("exact_match", "test", "y", None, 1, 1.0)])
    _insert_run(conn, "s", "r2", ["a", "abl"], "o/m2", [("exact_match", "test", None, None, 1, 0.2)])
    _insert_run(conn, "s", "r3", ["a"], "o/m2", [("exact_match", "test", None, None, 1, 0.4)], {"k": 2})
    out = Path(summarize(conn, str(tmp_path / "bo"), schema_path=schema_path, suite="s", date=DATE))

    top = load(out / "groups" / "top.json")
    assert [t["name"] for t in top] == ["accuracy"]
    rows = {r[0]["value"]: r for r in top[0]["rows"]}
    assert [h["value"] for h in top[0]["header"]] == ["Model", "Mean win rate", "A - EM", "Abl - EM"]
    assert rows["o/m1"][2]["value"] == 0.75 and rows["o/m1"][2]["description"].endswith("(2)")
    assert rows["o/m2"][2]["value"] == 0.4 and rows["o/m2"][2]["run_spec_names"] == ["r3"]   # r2 hidden
    assert rows["o/m2"][3] == {"description": "No matching runs", "markdown": False}

    a = load(out / "groups" / "a.json")
    assert [(t["name"], t["title"]) for t in a] == [
        ("a", "A"), ("a_", ""), ("a:sub_split=x", "A (sub-split: x)"), ("a:sub_split=y", "A (sub-split: y)"),
        ("a_k:2", "k: 2"), ("a:sub_split=x", "A (sub-split: x)"), ("a:sub_split=y", "A (sub-split: y)")]
    scen = a[1]
    assert [r[0]["value"] for r in scen["rows"]] == ["o/m1", "o/m2"]
    assert scen["rows"][1][0]["run_spec_names"] == [] and scen["rows"][1][1]["description"] == "No matching runs"
    assert scen["rows"][0][1]["value"] == 0.75 and "run_spec_names" not in scen["rows"][0][1]
    assert [lk["text"] for lk in scen["links"]] == ["LaTeX", "JSON"]   # one visible run: no "compare all"
    x = a[2]
    assert x["rows"][0][1]["value"] == 0.5 and x["rows"][0][1]["description"].endswith("(1)")
    assert x["rows"][0][1]["run_spec_names"] == ["r1"]
    assert len(a[0]["header"]) == 2 and a[0]["rows"][1][1]["value"] == 0.4   # aggregate: no win rate

    abl = load(out / "groups" / "abl.json")
    assert abl[0]["name"] == "abl_" and abl[0]["rows"][0][1]["value"] == 0.2
