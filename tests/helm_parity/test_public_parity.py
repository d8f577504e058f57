"""End to end against real upstream output on the real public data: `medhelm-run` +
`medhelm-summarize` on ../shared/oracle/public/inputs (suite public-n50: 14 scenarios x 2 mock
models, 50 instances, the three default judges served by the mock), with the data read from the
mirror ../shared/data/public (MEDHELM_DATA_MIRROR) and the mock server started here on loopback;
under HELM 0.5.16 (../shared/oracle/public) and medhelm 0.8.0 (../shared/oracle/medhelm-0.8.0/public)."""
import time

import duckdb
import pytest

from medhelm_cli import run_main, summarize_main
from tests.oracle import PUBLIC, PUBLIC_080, SHARED, load, run_dirs
from tests.parity import (assert_display_files_equal, assert_leaderboard_equal, assert_stats_equal,
                          lay_out_inputs, mirror_with, scenario_states)

SUITE = "public-n50"
MIRROR = SHARED / "data" / "public"
SCHEMA = SHARED / "helm" / "schema_medhelm.yaml"
EDITIONS = {"helm-0.5.16": PUBLIC, "medhelm-0.8.0": PUBLIC_080}
GOLDEN_RUNS = [d.name for d in run_dirs(PUBLIC, SUITE)] if (PUBLIC / "benchmark_output" / "runs" / SUITE).is_dir() else []


@pytest.fixture(scope="module", params=list(EDITIONS))
def built(request, tmp_path_factory, mock_server):
    edition = request.param
    root = tmp_path_factory.mktemp(f"public-{edition}")
    lay_out_inputs(EDITIONS[edition] / "inputs", root, mock_server.base_url)
    mirror = MIRROR
    if edition == "medhelm-0.8.0":
        # medhelm's golden run read HELM's e172ec8 EHRSQL files where medhelm reads its own (the
        # harness staged them there); the edition's folder for them is ehr_sql_ehrsql-01241a3.
        mirror = mirror_with(root / "mirror", MIRROR, {"ehr_sql_ehrsql-01241a3": MIRROR / "ehr_sql"})
    mp = pytest.MonkeyPatch()
    mp.chdir(root)
    mp.setenv("DAGSTER_HOME", str(root / "dagster_home"))
    mp.setenv("MEDHELM_DATA_MIRROR", str(mirror))
    mock_server.reset()
    start = time.time()
    assert run_main(["--conf-paths", "work/conf/public.conf", "--suite", SUITE, "--max-eval-instances", "50",
                     "--num-threads", "4", "--output-path", "benchmark_output", "--edition", edition,
                     "--local-path", "work/prod_env"]) == 0
    run_seconds = time.time() - start
    calls = mock_server.stats()["total_requests"]
    # The golden summaries used each package's own schema_medhelm.yaml: the edition's default.
    schema = ["--schema", str(SCHEMA)] if edition == "helm-0.5.16" else []
    assert summarize_main(["--suite", SUITE, "--output-path", "benchmark_output", *schema]) == 0
    yield {"root": root, "out": root / "benchmark_output", "calls": calls, "run_seconds": run_seconds,
           "gold": EDITIONS[edition] / "benchmark_output", "edition": edition}
    mp.undo()


def test_fourteen_public_scenarios_in_the_oracle():
    gold = PUBLIC / "benchmark_output"
    classes = {load(gold / "runs" / SUITE / r / "run_spec.json")["scenario_spec"]["class_name"] for r in GOLDEN_RUNS}
    assert len(classes) == 14 and len(GOLDEN_RUNS) == 28
    assert [d.name for d in run_dirs(PUBLIC_080, SUITE)] == GOLDEN_RUNS  # medhelm 0.8.0: the same run names


@pytest.mark.parametrize("run", GOLDEN_RUNS)
def test_run_files_equal_helm(built, run):
    gold, ours = built["gold"] / "runs" / SUITE / run, built["out"] / "runs" / SUITE / run
    g_states, o_states = scenario_states(gold, ours, 50)
    for g, o in zip(g_states["request_states"], o_states["request_states"]):
        assert o["instance"] == g["instance"]                      # same ids sampled, same order, same text
        assert o["request"] == g["request"]                        # byte-identical prompt, same fields
        assert o.get("output_mapping") == g.get("output_mapping")
        assert o["result"]["completions"] == g["result"]["completions"]
        assert o.get("annotations") == g.get("annotations")        # judge prompts + verdicts, SQL results
    assert o_states.keys() == g_states.keys() and o_states.get("annotator_specs") == g_states.get("annotator_specs")
    for name in ("per_instance_stats.json", "stats.json"):
        assert assert_stats_equal(load(gold / name), load(ours / name), per_instance=name.startswith("per")) > 0


def test_main_metric_per_instance_equals_helm(built):
    """The leaderboard's metric of every run (schema main_name), instance by instance."""
    import yaml

    schema = yaml.safe_load(SCHEMA.read_text())
    mains = {g["name"]: g["environment"]["main_name"] for g in schema["run_groups"]
             if "main_name" in (g.get("environment") or {})}
    compared = 0
    for run in GOLDEN_RUNS:
        groups = load(built["gold"] / "runs" / SUITE / run / "run_spec.json")["groups"]
        main = next(mains[g] for g in groups if g in mains)
        values = {}
        for side, base in (("gold", built["gold"]), ("ours", built["out"])):
            values[side] = {(e["instance_id"], s["name"].get("split")): s["mean"]
                            for e in load(base / "runs" / SUITE / run / "per_instance_stats.json")
                            for s in e["stats"] if s["name"]["name"] == main and "perturbation" not in s["name"]}
        assert values["ours"].keys() == values["gold"].keys() and len(values["gold"]) == 50, run
        for key, value in values["gold"].items():
            assert values["ours"][key] == pytest.approx(value, abs=1e-9), (run, key)
            compared += 1
    assert compared == 28 * 50


def test_every_leaderboard_cell_equals_helm(built):
    gold, ours = built["gold"] / "runs" / SUITE, built["out"] / "runs" / SUITE
    assert assert_leaderboard_equal(gold, ours) > 500
    for name in ("groups_metadata.json", "runs_to_run_suites.json"):
        assert load(ours / name) == load(gold / name), name
    assert load(ours / "summary.json")["suites"] == load(gold / "summary.json")["suites"]


@pytest.mark.parametrize("run", GOLDEN_RUNS)
def test_display_files_equal_helm(built, run):
    gold, ours = built["gold"] / "runs" / SUITE / run, built["out"] / "runs" / SUITE / run
    assert_display_files_equal(gold, ours)


def test_duckdb_holds_the_public_tier(built):
    con = duckdb.connect(str(built["out"] / "medhelm.duckdb"), read_only=True)
    try:
        tiers = dict(con.execute("SELECT tier, count(*) FROM run_entries WHERE suite = ? GROUP BY ALL",
                                 [SUITE]).fetchall())
        assert tiers == {"public": 28}
        datasets = con.execute("SELECT count(*), min(num_instances) FROM datasets WHERE tier = 'public'").fetchone()
        assert datasets[0] == 14 and datasets[1] > 100
        # The SQL annotator's results sit in `annotations` beside the juries; juries only in judge_verdicts.
        ann = dict(con.execute("SELECT annotator, count(*) FROM annotations WHERE suite = ? GROUP BY ALL",
                               [SUITE]).fetchall())
        assert ann["ehr_sql"] == 100 and ann["aci_bench"] == 100
        assert con.execute("SELECT count(*) FROM judge_verdicts WHERE annotator = 'ehr_sql'").fetchone()[0] == 0
    finally:
        con.close()
