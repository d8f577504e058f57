"""End to end against real upstream output: medhelm-run + medhelm-summarize on the inputs that
produced ../shared/oracle/synthetic (HELM 0.5.16) and ../shared/oracle/medhelm-0.8.0/synthetic
(medhelm 0.8.0, `--edition medhelm-0.8.0`), with the mock model server started here on loopback."""
import duckdb
import pytest

from medhelm_cli import run_main, summarize_main
from tests.oracle import SHARED, SYNTHETIC, SYNTHETIC_080, load, run_dirs
from tests.parity import (EXEMPT, assert_display_files_equal, assert_leaderboard_equal, assert_stats_equal,
                          lay_out_inputs, scenario_states)

SUITES = {"oracle-cfg": "work/conf/configurable.conf", "oracle-private": "work/conf/private.conf"}
# edition -> its golden output. Under 0.5.16 the golden summaries name HELM's schema file; under
# 0.8.0 they used medhelm's packaged one, which is the edition's default (no --schema-path).
EDITIONS = {"helm-0.5.16": SYNTHETIC, "medhelm-0.8.0": SYNTHETIC_080}
SCHEMA_ARGS = {"helm-0.5.16": ["--schema-path", str(SHARED / "helm" / "schema_medhelm.yaml")], "medhelm-0.8.0": []}


def run_args(suite: str, edition: str, *extra: str) -> list[str]:
    return ["--conf-paths", SUITES[suite], "--suite", suite, "--max-eval-instances", "50", "--edition", edition,
            "--output-path", "benchmark_output", "--local-path", "work/prod_env", *extra]


@pytest.fixture(scope="module", params=list(EDITIONS))
def built(request, tmp_path_factory, mock_server):
    """Lay out the inputs as upstream ran them (D/work/...), re-point prod_env at the mock, run both suites."""
    edition = request.param
    golden = EDITIONS[edition]
    root = tmp_path_factory.mktemp(f"synthetic-{edition}")
    lay_out_inputs(golden / "inputs", root, mock_server.base_url)
    mp = pytest.MonkeyPatch()
    mp.chdir(root)
    mp.setenv("DAGSTER_HOME", str(root / "dagster_home"))
    mock_server.reset()
    for suite in SUITES:
        assert run_main(run_args(suite, edition, "--num-threads", "4")) == 0
    calls_first = mock_server.stats()["total_requests"]
    assert summarize_main(["--suite", "oracle-cfg", "--output-path", "benchmark_output",
                           "--auto-generate-schema"]) == 0
    assert summarize_main(["--suite", "oracle-private", "--output-path", "benchmark_output",
                           *SCHEMA_ARGS[edition]]) == 0
    assert summarize_main(["--suites", "oracle-cfg", "oracle-private", "--release", "oracle",
                           "--output-path", "benchmark_output", *SCHEMA_ARGS[edition]]) == 0
    yield {"root": root, "out": root / "benchmark_output", "calls_first": calls_first, "mp": mp,
           "edition": edition, "gold": golden / "benchmark_output"}
    mp.undo()


GOLDEN_RUNS = [(s, d.name) for s in SUITES for d in run_dirs(SYNTHETIC, s)]
assert GOLDEN_RUNS == [(s, d.name) for s in SUITES for d in run_dirs(SYNTHETIC_080, s)]  # same run names


@pytest.mark.parametrize("suite,run", GOLDEN_RUNS, ids=[r for _, r in GOLDEN_RUNS])
def test_run_files_equal_helm(built, suite, run):
    gold, ours = built["gold"] / "runs" / suite / run, built["out"] / "runs" / suite / run
    g_states, o_states = scenario_states(gold, ours, 50)
    for g, o in zip(g_states["request_states"], o_states["request_states"]):
        assert o["instance"] == g["instance"]                      # same ids sampled, same order
        assert o["request"] == g["request"]                        # byte-identical prompt, same fields
        assert o["result"]["completions"] == g["result"]["completions"]
        assert o.get("annotations") == g.get("annotations")        # judge prompts and parsed verdicts
    for name in ("per_instance_stats.json", "stats.json"):
        assert_stats_equal(load(gold / name), load(ours / name), per_instance=name.startswith("per"))


@pytest.mark.parametrize("target", ["runs/oracle-cfg", "runs/oracle-private", "releases/oracle"])
def test_every_leaderboard_cell_equals_helm(built, target):
    gold, ours = built["gold"] / target, built["out"] / target
    assert assert_leaderboard_equal(gold, ours) > 0
    for name in ("groups_metadata.json", "runs_to_run_suites.json"):
        assert load(ours / name) == load(gold / name), name
    assert load(ours / "summary.json")["suites"] == load(gold / "summary.json")["suites"]


def test_second_run_makes_zero_model_calls(built, mock_server):
    before = mock_server.stats()["total_requests"]
    assert before == built["calls_first"]
    for suite in SUITES:
        assert run_main(run_args(suite, built["edition"])) == 0
    assert mock_server.stats()["total_requests"] == before


def test_duckdb_holds_every_layer(built):
    con = duckdb.connect(str(built["out"] / "medhelm.duckdb"), read_only=True)
    try:
        counts = dict(con.execute(
            "SELECT 'requests', count(*) FROM requests UNION ALL SELECT 'completions', count(*) FROM completions "
            "UNION ALL SELECT 'annotations', count(*) FROM annotations "
            "UNION ALL SELECT 'run_stats', count(DISTINCT run_name) FROM run_stats").fetchall())
        assert counts["requests"] == 600 and counts["run_stats"] == 12
        assert counts["completions"] >= 600 and counts["annotations"] == 200
        # The jury's explicit statuses sit beside HELM's value.
        statuses = dict(con.execute("SELECT status, count(*) FROM judge_verdicts GROUP BY ALL").fetchall())
        assert sum(statuses.values()) == 200 and statuses.get("ok", 0) > 0
    finally:
        con.close()


@pytest.mark.parametrize("suite,run", GOLDEN_RUNS, ids=[r for _, r in GOLDEN_RUNS])
def test_display_files_equal_helm(built, suite, run):
    gold, ours = built["gold"] / "runs" / suite / run, built["out"] / "runs" / suite / run
    assert_display_files_equal(gold, ours)


@pytest.fixture(scope="module")
def other_edition(built, mock_server):
    """The other edition's oracle-cfg suite, run into the same output folder (`cfg-<edition>`)."""
    other = next(e for e in EDITIONS if e != built["edition"])
    before = mock_server.stats()["total_requests"]
    assert run_main(["--conf-paths", SUITES["oracle-cfg"], "--suite", f"cfg-{other}", "--max-eval-instances", "50",
                     "--edition", other, "--output-path", "benchmark_output", "--local-path", "work/prod_env"]) == 0
    return {"edition": other, "suite": f"cfg-{other}", "new_calls": mock_server.stats()["total_requests"] - before}


def test_the_other_edition_in_the_same_output_asks_nothing_again_and_matches_its_golden(built, other_edition,
                                                                                        mock_server, capsys):
    """One output folder holds both editions: the other edition's suite reuses every stored answer
    (the completion cache is edition-free) and still reproduces that edition's golden files."""
    other = other_edition["edition"]
    assert other_edition["new_calls"] == 0
    before = mock_server.stats()["total_requests"]
    gold = EDITIONS[other] / "benchmark_output" / "runs" / "oracle-cfg"
    for run in run_dirs(EDITIONS[other], "oracle-cfg"):
        ours = built["out"] / "runs" / other_edition["suite"] / run.name
        g_states, o_states = load(run / "scenario_state.json"), load(ours / "scenario_state.json")
        assert [s["result"]["completions"] for s in o_states["request_states"]] == \
            [s["result"]["completions"] for s in g_states["request_states"]]
        assert load(ours / "scenario.json") == load(gold / run.name / "scenario.json")
        assert_stats_equal(load(run / "stats.json"), load(ours / "stats.json"), per_instance=False)
    # A suite is one edition: running a suite of this output under the other stops, naming runs.
    capsys.readouterr()
    assert run_main(run_args("oracle-cfg", other)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "would mix editions" in err[0] and "EXACT-MATCH-DEMO" in err[0]
    assert built["edition"] in err[0] and mock_server.stats()["total_requests"] == before


def _golden_stat_differences() -> tuple[set, set]:
    """(stats that differ, stats only under medhelm) per run between the two golden oracle-cfg suites,
    read from the golden files themselves (what ../shared/oracle/medhelm-0.8.0/compare lists)."""
    differ, only_b = set(), set()
    for run in run_dirs(SYNTHETIC, "oracle-cfg"):
        key = lambda s: (s["name"]["name"], s["name"]["split"], (s["name"].get("perturbation") or {}).get("name"))
        a = {key(s): s for s in load(run / "stats.json")}
        b = {key(s): s for s in load(SYNTHETIC_080 / "benchmark_output" / "runs" / "oracle-cfg" / run.name / "stats.json")}
        for k in a.keys() & b.keys():
            if k[0] not in EXEMPT and (a[k].get("mean"), a[k]["count"]) != (b[k].get("mean"), b[k]["count"]):
                differ.add((run.name, *k))
        only_b |= {(run.name, *k) for k in b.keys() - a.keys()}
        assert not a.keys() - b.keys()
    return differ, only_b


def test_edition_diff_names_the_differences_between_the_two_goldens(built, other_edition):
    suites = {built["edition"]: "oracle-cfg", other_edition["edition"]: other_edition["suite"]}
    for suite in suites.values():
        assert summarize_main(["--suite", suite, "--output-path", "benchmark_output", "--auto-generate-schema"]) == 0
    con = duckdb.connect(str(built["out"] / "medhelm.duckdb"), read_only=True)
    try:
        pairs = con.execute("SELECT suite_a, edition_a, suite_b, edition_b, shared_runs FROM edition_pairs").fetchall()
        assert pairs == [(suites["helm-0.5.16"], "helm-0.5.16", suites["medhelm-0.8.0"], "medhelm-0.8.0", 6)]
        rows = con.execute("SELECT run_name, stat, split, perturbation_name, status FROM edition_diff"
                           " WHERE status <> 'equal' AND NOT volatile").fetchall()
        cells = con.execute("SELECT table_name, display_name, column_name, value_a, value_b FROM edition_diff_cells"
                            " WHERE moved ORDER BY ALL").fetchall()
        # One row per cell: repeated headers pair by occurrence, never cross-multiplied.
        keys = ("suite_a, suite_b, group_name, table_name, model_deployment, model, column_name, metric, occurrence")
        assert con.execute(f"SELECT count(*) = count(DISTINCT ({keys})) FROM edition_diff_cells").fetchone()[0]
    finally:
        con.close()
    differ, only_b = _golden_stat_differences()
    assert {r[:4] for r in rows if r[4] == "different"} == differ and len(differ) > 30
    assert {r[:4] for r in rows if r[4] == "only_b"} == only_b
    assert not [r for r in rows if r[4] == "only_a"]
    # The cells that move are the ones compare/synthetic-oracle-cfg.txt names: EXACT-MATCH-DEMO's EM,
    # ROUGE-DEMO's columns, and the main table's mean win rate (0.5/0.5 -> 0.25/0.75).
    moved = {(t.split("_name:")[0], c) for t, _, c, _, _ in cells}
    assert ("EXACT-MATCH-DEMO", "EM") in moved and ("ROUGE-DEMO", "ROUGE-1") in moved
    win = sorted((a, b) for t, _, c, a, b in cells if c == "Mean win rate" and t.startswith("main_metric"))
    assert win == [(0.5, 0.25), (0.5, 0.75)]
    assert not any(t.startswith("JURY-DEMO") for t, _ in moved)
