"""Judge ablation without new calls (issue 44, item 1): `jury_variant_scores`, `jury_rank_stability` and
`jury_variant_leaderboard` on real targets, each number recomputed here independently:

* our own suite: `medhelm-run` on two MedHELM jury benchmarks (medication_qa, medi_qa) x four mock
  models, judged by the three default judges (gpt, llama, claude) served by the mock, then
  `medhelm-summarize`; the reference reads the judges' verdicts from `judge_verdicts`;
* an imported release: ../shared/oracle/public's suite public-n50 (HELM 0.5.16's own output,
  `--with-completions`); the reference reads HELM's scenario_state.json files, as published and with
  verdicts knocked out (HELM's None) to reach the default score.

The reference is HELM's LLMJuryMetric per-instance score written out here (the mean of int() of every
criterion score of every kept judge that gave a verdict, default_score where none did); Kendall's tau-b
is SciPy's."""
from __future__ import annotations

import json
import math
import random
import shutil
import statistics
import warnings

import duckdb
import pytest
from scipy.stats import kendalltau

from medhelm_cli import run_main, summarize_main
from medhelm_core.editions import known_editions, load_edition
from medhelm_cli.imports import main as import_main
from medhelm_core.published.leaderboard import rebuild_target
from medhelm_core.summarize.sql_models import create_input_tables, run_sql_models, sql_model_files
from tests.oracle import PUBLIC, SHARED
from tests.parity import add_mock_deployments, in_public_workdir, lay_out_inputs, write_mock_conf
from tests.readme import code_blocks

pytestmark = pytest.mark.skipif(not (PUBLIC / "benchmark_output").is_dir(), reason="golden files not available")

PUBLISHED = PUBLIC / "benchmark_output"
JUDGES = ("gpt", "llama", "claude")
MODELS = ("a", "b", "c", "d")
OWN_SUITE = "jury-ablation"
JURY_CLASS = "helm.benchmark.metrics.llm_jury_metrics.LLMJuryMetric"


# --------------------------------------------------------------------------- the reference

def helm_instance_score(verdicts: dict, judges, default: float) -> float:
    """LLMJuryMetric's per-instance score for the jury `judges`: verdicts = {judge: {criterion: {score}}
    or None}."""
    scores = [int(v["score"]) for j, verdict in verdicts.items() if j in judges and verdict is not None
              for v in verdict.values()]
    return sum(scores) / len(scores) if scores else default


def variants(judges: list[str]) -> dict[str, list[str]]:
    out = {"all": list(judges)}
    if len(judges) > 1:
        for j in judges:
            out[f"without:{j}"] = [k for k in judges if k != j]
            out[f"only:{j}"] = [j]
    return out


def reference_scores(runs: dict[str, dict]) -> dict[tuple[str, str], tuple[float, int, int]]:
    """(run, variant) -> (value, n_instances, n_defaulted); `runs`: run name -> {judges, default,
    instances: {instance id: verdicts}}."""
    out = {}
    for run, r in runs.items():
        for variant, kept in variants(r["judges"]).items():
            scores = [helm_instance_score(v, kept, r["default"]) for v in r["instances"].values()]
            defaulted = sum(1 for v in r["instances"].values()
                            if not any(v.get(j) is not None and v[j] for j in kept))
            out[(run, variant)] = (sum(scores) / len(scores), len(scores), defaulted)
    return out


def jury_spec(run_spec: dict) -> dict:
    [spec] = [m["args"] for m in run_spec["metric_specs"] if m["class_name"] == JURY_CLASS]
    return spec


def rank_reference(x: list[float], y: list[float]) -> tuple[float | None, int, list[int]]:
    """SciPy's tau-b (None for NaN), the discordant pairs, and the top-k overlaps (rank = 1 + strictly higher)."""
    with warnings.catch_warnings():   # SciPy warns where tau is undefined (NaN)
        warnings.simplefilter("ignore")
        tau = kendalltau(x, y).statistic if len(x) > 1 else math.nan
    swaps = sum(1 for i in range(len(x)) for j in range(i + 1, len(x)) if (x[i] - x[j]) * (y[i] - y[j]) < 0)
    rx = [1 + sum(v > w for v in x) for w in x]
    ry = [1 + sum(v > w for v in y) for w in y]
    tops = [sum(1 for i in range(len(x)) if rx[i] <= k and ry[i] <= k) for k in (1, 2, 3)]
    return (None if math.isnan(tau) else float(tau)), swaps, tops


def win_rates(columns: list[list[float | None]]) -> list[float | None]:
    """HELM's mean win rate of each row over `columns` (higher is better; ties half; columns with < 2 values skipped)."""
    per_row: list[list[float]] = [[] for _ in columns[0]]
    for col in columns:
        values = [v for v in col if v is not None]
        if len(values) < 2:
            continue
        for i, v in enumerate(col):
            if v is not None:
                worse, tied = sum(w < v for w in values), sum(w == v for w in values)
                per_row[i].append((worse + (tied - 1) / 2) / (len(values) - 1))
    return [statistics.mean(r) if r else None for r in per_row]


# --------------------------------------------------------------------------- the checks, for any target

def check_target(conn: duckdb.DuckDBPyConnection, target: str, runs: dict[str, dict], *, stats_equal: set[str]) -> int:
    """Every table of the target against the reference; `stats_equal`: the runs whose `all` must equal
    their jury stat in run_stats. Returns the variants compared."""
    ref = reference_scores(runs)
    got = {(r[0], r[1]): r[2:] for r in conn.execute(
        "SELECT run_name, variant, value, n_instances, n_defaulted, judges, benchmark, metric, suite, score_sum "
        "FROM leaderboard.jury_variant_scores WHERE target = ?", [target]).fetchall()}
    assert set(got) == set(ref)
    for key, (value, n, defaulted) in ref.items():
        g_value, g_n, g_defaulted, judges, benchmark, metric, suite, score_sum = got[key]
        run = runs[key[0]]
        assert (g_n, g_defaulted, benchmark, metric) == (n, defaulted, run["benchmark"], run["metric"]), key
        assert judges == variants(run["judges"])[key[1]], key
        assert g_value == pytest.approx(value, abs=1e-12) and score_sum == pytest.approx(value * n, abs=1e-9), key
    # (a) `all` is the run's own jury stat
    for run in stats_equal:
        suite = runs[run]["suite"]
        [(mean,)] = conn.execute("SELECT mean FROM run_stats WHERE suite = ? AND run_name = ? AND name = ? "
                                 "AND split = 'test' AND sub_split IS NULL AND perturbation IS NULL",
                                 [suite, run, runs[run]["metric"]]).fetchall()
        assert got[(run, "all")][0] == pytest.approx(mean, abs=1e-12), run

    # (c) rank stability: per benchmark, each model's score (pooled over its runs), tau-b against SciPy's
    pooled: dict[tuple[str, str, str], list[float]] = {}
    for (run, variant), (value, n, _) in ref.items():
        acc = pooled.setdefault((runs[run]["benchmark"], variant, runs[run]["model"]), [0.0, 0])
        acc[0] += value * n
        acc[1] += n
    stability = {(r[0], r[1]): r[2:] for r in conn.execute(
        "SELECT benchmark, variant, n_models, kendall_tau, adjacent_swaps, top_k_overlap "
        "FROM leaderboard.jury_rank_stability WHERE target = ?", [target]).fetchall()}
    assert set(stability) == {(b, v) for b, v, _ in pooled}
    for (benchmark, variant), (n_models, tau, swaps, tops) in stability.items():
        models = sorted(m for b, v, m in pooled if (b, v) == (benchmark, variant))
        x = [round(pooled[(benchmark, "all", m)][0] / pooled[(benchmark, "all", m)][1], 12) for m in models]
        y = [round(pooled[(benchmark, variant, m)][0] / pooled[(benchmark, variant, m)][1], 12) for m in models]
        r_tau, r_swaps, r_tops = rank_reference(x, y)
        assert n_models == len(models) and swaps == r_swaps and tops == r_tops, (benchmark, variant)
        assert (tau is None) == (r_tau is None) and (tau is None or abs(tau - r_tau) <= 1e-9), (benchmark, variant, tau, r_tau)

    # the leaderboard per variant: the headline table with the reference's jury cells
    cells = conn.execute("SELECT h.row_pos, h.col_idx, h.metric, h.value, c.run_spec_names FROM leaderboard.headline_cells h "
                         "JOIN leaderboard.table_cells c USING (target, table_id, row_pos, col_idx) "
                         "WHERE h.target = ? AND h.lower_is_better = false", [target]).fetchall()
    assert not conn.execute("SELECT count(*) FROM leaderboard.headline_cells WHERE target = ? AND lower_is_better",
                            [target]).fetchone()[0]   # MedHELM's headline: higher is better everywhere
    rows = sorted({c[0] for c in cells if c[3] is not None})
    cols = sorted({c[1] for c in cells})
    board = {(r[0], r[1]): r[2:] for r in conn.execute(
        "SELECT variant, row_pos, mean_win_rate, rank, rank_all, jury_columns "
        "FROM leaderboard.jury_variant_leaderboard WHERE target = ?", [target]).fetchall()}
    all_variants = {v for _, v in ref}
    assert {v for v, _ in board} == all_variants and len(board) == len(all_variants) * len(rows)
    helm = dict(conn.execute("SELECT a.row_pos, a.mean_win_rate FROM leaderboard.row_aggregates a WHERE a.target = ? "
                             "AND a.table_id = (SELECT min(table_id) FROM leaderboard.headline_cells WHERE target = ?)",
                             [target, target]).fetchall())
    by_run_metric = {(run, runs[run]["metric"]) for run in runs}
    for variant in all_variants:
        columns, jury_columns = [], [0] * len(rows)
        for col in cols:
            column = []
            for i, row in enumerate(rows):
                [(metric, value, names)] = [(c[2], c[3], c[4]) for c in cells if c[0] == row and c[1] == col]
                jury = [n for n in names if (n, metric) in by_run_metric]
                if jury and value is not None and variant != "all" and all((n, variant) in ref for n in jury):
                    value = round(sum(ref[(n, variant)][0] * ref[(n, variant)][1] for n in jury)
                                  / sum(ref[(n, variant)][1] for n in jury), 12)
                if jury and value is not None and all((n, variant) in ref for n in jury):
                    jury_columns[i] += 1
                column.append(value)
            columns.append(column)
        expected = win_rates(columns)
        for i, row in enumerate(rows):
            mean_win_rate, rank, rank_all, n_jury = board[(variant, row)]
            assert mean_win_rate == pytest.approx(expected[i], abs=1e-12), (variant, row)
            assert rank == 1 + sum(e > expected[i] + 1e-12 for e in expected), (variant, row)
            assert n_jury == jury_columns[i] and rank_all == board[("all", row)][1]
            if variant == "all":
                assert mean_win_rate == pytest.approx(helm[row], abs=1e-12)   # the leaderboard's own
    return len(ref)


# --------------------------------------------------------------------------- our own suite

@pytest.fixture(scope="module")
def own_suite(tmp_path_factory, mock_server):
    """medhelm-run + medhelm-summarize: medication_qa and medi_qa on four mock models, 10 instances,
    the three default judges."""
    root = tmp_path_factory.mktemp("jury-ablation")
    work = lay_out_inputs(PUBLIC / "inputs", root, mock_server.base_url)
    add_mock_deployments(work / "prod_env", "mockai/mock-gpt-a", [f"mockai/mock-gpt-{m}" for m in MODELS[2:]])
    write_mock_conf(work / "conf" / "jury.conf", ("medication_qa", "medi_qa"), MODELS)
    with in_public_workdir(root):
        assert run_main(["--conf-paths", "work/conf/jury.conf", "--suite", OWN_SUITE, "--max-eval-instances", "10",
                         "--num-threads", "4", "--output-path", "benchmark_output", "--local-path", "work/prod_env"]) == 0
        assert summarize_main(["--suite", OWN_SUITE, "--output-path", "benchmark_output",
                               "--schema-path", str(SHARED / "helm" / "schema_medhelm.yaml")]) == 0
    return root / "benchmark_output" / "medhelm.duckdb"


def own_runs(conn: duckdb.DuckDBPyConnection) -> dict[str, dict]:
    """The reference's input from the pipeline's own tables: run specs, and every judge call's verdict
    in judge_verdicts (a verdict HELM keeps: status ok; any other status is HELM's None)."""
    runs = {}
    for run, spec in conn.execute("SELECT run_name, run_spec FROM runs WHERE suite = ?", [OWN_SUITE]).fetchall():
        spec = json.loads(spec)
        args = jury_spec(spec)
        runs[run] = {"suite": OWN_SUITE, "benchmark": args["scenario_name"], "metric": args["metric_name"],
                     "judges": list(args["annotator_models"]), "default": args.get("default_score", 0.0),
                     "model": spec["adapter_spec"]["model"], "instances": {}}
    for run, instance, judge, status, parsed in conn.execute(
            "SELECT run_name, instance_id, judge, status, parsed FROM judge_verdicts WHERE suite = ?", [OWN_SUITE]).fetchall():
        runs[run]["instances"].setdefault(instance, {})[judge] = json.loads(parsed) if status == "ok" else None
    return runs


def test_own_suite_ablation_equals_a_recomputation_from_judge_verdicts(own_suite):
    with duckdb.connect(str(own_suite), read_only=True) as conn:
        runs = own_runs(conn)
        assert len(runs) == 8 and all(len(r["instances"]) == 10 and r["judges"] == list(JUDGES) for r in runs.values())
        statuses = dict(conn.execute("SELECT status, count(*) FROM judge_verdicts WHERE suite = ? GROUP BY ALL",
                                     [OWN_SUITE]).fetchall())
        assert statuses == {"ok": 8 * 10 * 3}
        # HELM's own per-instance jury score, as the pipeline stored it, under `all`
        helm = {(r[0], r[1]): r[2] for r in conn.execute(
            "SELECT run_name, instance_id, helm_value FROM jury_scores WHERE suite = ?", [OWN_SUITE]).fetchall()}
        for run, r in runs.items():
            for instance, verdicts in r["instances"].items():
                assert helm_instance_score(verdicts, r["judges"], r["default"]) == helm[(run, instance)]
        assert check_target(conn, OWN_SUITE, runs, stats_equal=set(runs)) == 8 * 7
        # the ablation moves something: some variant reorders some benchmark's models
        assert conn.execute("SELECT count(*) FROM leaderboard.jury_rank_stability WHERE target = ? AND "
                            "adjacent_swaps > 0", [OWN_SUITE]).fetchone()[0] > 0


def test_the_docs_example_query_returns_rows(own_suite):
    [sql] = [b for b in code_blocks("DuckDB SQL", "sql") if "jury_" in b]
    with duckdb.connect(str(own_suite), read_only=True) as conn:
        rows = conn.execute(sql).fetchall()
    assert rows and {r[0] for r in rows} == {OWN_SUITE}


# --------------------------------------------------------------------------- an imported release

@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = tmp_path_factory.mktemp("jury-imported")
    assert import_main(["--source", str(PUBLISHED), "--suite", "public-n50", "-o", str(out), "-q",
                        "--with-completions"]) == 0
    return out / "medhelm.duckdb"


def published_runs() -> dict[str, dict]:
    """The reference's input from HELM's own files: run_spec.json and scenario_state.json's annotations."""
    runs = {}
    for run_dir in sorted((PUBLISHED / "runs" / "public-n50").iterdir()):
        if not (run_dir / "run_spec.json").is_file():
            continue
        spec = json.loads((run_dir / "run_spec.json").read_text())
        if not any(m["class_name"] == JURY_CLASS for m in spec["metric_specs"]):
            continue
        args = jury_spec(spec)
        states = json.loads((run_dir / "scenario_state.json").read_text())["request_states"]
        judges = list(args["annotator_models"])
        runs[spec["name"]] = {
            "suite": "public-n50", "benchmark": args["scenario_name"], "metric": args["metric_name"],
            "judges": judges, "default": args.get("default_score", 0.0), "model": spec["adapter_spec"]["model"],
            "instances": {s["instance"]["id"]: {k: v for k, v in s["annotations"][args["scenario_name"]].items()
                                                if k in judges} for s in states}}
    return runs


def test_imported_release_ablation_equals_a_recomputation_from_helms_files(imported):
    runs = published_runs()
    assert len(runs) == 10 and {r["benchmark"] for r in runs.values()} == {
        "aci_bench", "medi_qa", "medication_qa", "mtsamples_procedures", "mtsamples_replicate"}
    with duckdb.connect(str(imported), read_only=True) as conn:
        assert check_target(conn, "public-n50", runs, stats_equal=set(runs)) == 10 * 7


def test_failed_verdicts_and_unjudged_instances_score_the_default(imported, tmp_path):
    """HELM's None verdicts (a judge that failed), an instance no judge of a variant scored, and an empty
    answer's annotation (no verdict at all): knocked into the imported release, and into the reference."""
    db = tmp_path / "medhelm.duckdb"
    shutil.copy(imported, db)
    runs = published_runs()
    run = next(r for r in sorted(runs) if r.startswith("aci_bench:") and "mock-gpt-a" in r)
    ids = sorted(runs[run]["instances"])
    knocked = {i: ["gpt"] for i in ids[:6]} | {ids[6]: list(JUDGES), ids[7]: ["gpt", "llama"]}
    with duckdb.connect(str(db)) as conn:
        for instance, judges in knocked.items():
            for judge in judges:
                runs[run]["instances"][instance][judge] = None
            conn.execute("UPDATE published_annotation_entries SET value = NULL WHERE run_name = ? AND instance_id = ? "
                         "AND entry IN (SELECT unnest(?::VARCHAR[]))", [run, instance, judges])
        empty = ids[8]   # an empty answer: HELM's annotator asks no judge
        runs[run]["instances"][empty] = {}
        conn.execute("DELETE FROM published_annotation_entries WHERE run_name = ? AND instance_id = ?", [run, empty])
        conn.execute("INSERT INTO published_annotation_entries (suite, run_name, position, instance_id, annotator, entry, "
                     "value) SELECT suite, run_name, 0, ?, 'aci_bench', 'empty_output_equivalence_judgement', 'false' "
                     "FROM published_annotation_entries WHERE run_name = ? LIMIT 1", [empty, run])
        rebuild_target(conn, "public-n50")
        assert check_target(conn, "public-n50", runs, stats_equal=set(runs) - {run}) == 10 * 7
        defaulted = dict(conn.execute("SELECT variant, n_defaulted FROM leaderboard.jury_variant_scores "
                                      "WHERE target = 'public-n50' AND run_name = ?", [run]).fetchall())
    assert defaulted["all"] == 2 and defaulted["only:gpt"] == 9 and defaulted["without:claude"] == 3
    assert runs[run]["default"] == 1.0


# --------------------------------------------------------------------------- the rank statistics, at random

def test_rank_stability_equals_scipy_on_random_rankings_with_ties():
    rng = random.Random(44)
    conn = duckdb.connect()
    create_input_tables(conn)
    run_sql_models(conn)   # every model's table, empty, with its real types
    expected = {}
    for case in range(300):
        n = rng.randint(1, 9)
        grid = rng.choice([0.5, 0.25, 0.1])   # coarse values make ties on either side
        for variant in ("all", "without:x"):
            values = [round(rng.randint(0, int(4 / grid)) * grid + 1, 12) for _ in range(n)]
            for m, v in enumerate(values):
                k = rng.randint(1, 5)   # a model's score over several instances
                conn.execute("INSERT INTO jury_variant_scores (target, benchmark, variant, model_deployment, model, "
                             "score_sum, n_instances) VALUES ('t', ?, ?, ?, ?, ?, ?)",
                             [f"b{case}", variant, f"d{m}", f"m{m}", v * k, k])
            expected.setdefault(f"b{case}", {})[variant] = values
    conn.execute(sql_model_files()["jury_rank_stability"].read_text())
    got = {(r[0], r[1]): r[2:] for r in conn.execute(
        "SELECT benchmark, variant, kendall_tau, adjacent_swaps, top_k_overlap FROM jury_rank_stability").fetchall()}
    assert len(got) == 600
    undefined = 0
    for benchmark, by_variant in expected.items():
        x = [round(v, 12) for v in by_variant["all"]]
        for variant in ("all", "without:x"):
            y = [round(v, 12) for v in by_variant[variant]]
            tau, swaps, tops = got[(benchmark, variant)]
            r_tau, r_swaps, r_tops = rank_reference(x, y)
            assert (tau is None) == (r_tau is None), (benchmark, variant, tau, r_tau)
            assert tau is None or abs(tau - r_tau) <= 1e-9, (benchmark, variant)
            assert (swaps, tops) == (r_swaps, r_tops), (benchmark, variant)
            undefined += tau is None
    assert 0 < undefined < 300


def test_the_sql_reads_scores_as_each_edition_does():
    """jury_variant_scores names the editions whose LLMJuryMetric reads a score with float() (the others
    truncate with int()): the editions' own jury_score_type."""
    sql = sql_model_files()["jury_variant_scores"].read_text()
    floats = [name for name in known_editions() if load_edition(name).jury_score_type == "float"]
    assert floats == ["medhelm-0.8.0"] and f"= '{floats[0]}' AS float_scores" in sql
