"""medhelm 0.8.0's `ehr_sql` on the EHRSQL files its unpinned `main` serves today (v1.5.1, commit
01241a3, the commit the `medhelm-0.8.0` edition pins): ../shared/oracle/medhelm-0.8.0/ehr_sql-v151.
As in that golden run, the 7-patient eicu.sqlite and the e172ec8 train.json (inside eicu.zip) stand
in for the two files the offline snapshot lacks (the Google Drive database, the 4 MiB train.json)."""
import pytest

from medhelm_cli import run_main, summarize_main
from tests.oracle import MEDHELM_080, SHARED, load, run_dirs
from tests.parity import assert_group_cells_equal, assert_stats_equal, group_files, lay_out_inputs, mirror_with

GOLDEN = MEDHELM_080 / "ehr_sql-v151"
SUITE = "public-ehrsql-v151"
DATA = SHARED / "data" / "public"


@pytest.fixture(scope="module")
def built(tmp_path_factory, mock_server):
    root = tmp_path_factory.mktemp("ehrsql-v151")
    lay_out_inputs(GOLDEN / "inputs", root, mock_server.base_url)
    v151 = root / "v151"
    v151.mkdir()
    for f in [*(DATA / "ehr_sql_ehrsql-01241a3").iterdir(), DATA / "ehr_sql" / "eicu.sqlite", DATA / "ehr_sql" / "eicu.zip"]:
        (v151 / f.name).symlink_to(f)
    mirror = mirror_with(root / "mirror", DATA, {"ehr_sql_ehrsql-01241a3": v151})
    mp = pytest.MonkeyPatch()
    mp.chdir(root)
    mp.setenv("DAGSTER_HOME", str(root / "dagster_home"))
    mp.setenv("MEDHELM_DATA_MIRROR", str(mirror))
    assert run_main(["--conf-paths", "work/conf/public.conf", "--suite", SUITE, "--max-eval-instances", "50",
                     "--edition", "medhelm-0.8.0", "--output-path", "benchmark_output",
                     "--local-path", "work/prod_env"]) == 0
    assert summarize_main(["--suite", SUITE, "--output-path", "benchmark_output"]) == 0
    yield root / "benchmark_output"
    mp.undo()


RUNS = [d.name for d in run_dirs(GOLDEN, SUITE)]


@pytest.mark.parametrize("run", RUNS)
def test_ehr_sql_on_ehrsql_v151_equals_medhelm(built, run):
    gold, ours = GOLDEN / "benchmark_output" / "runs" / SUITE / run, built / "runs" / SUITE / run
    assert load(ours / "scenario.json") == load(gold / "scenario.json")
    g_states, o_states = load(gold / "scenario_state.json"), load(ours / "scenario_state.json")
    assert len(o_states["request_states"]) == len(g_states["request_states"]) == 50
    for g, o in zip(g_states["request_states"], o_states["request_states"]):
        assert o["instance"] == g["instance"] and o["request"] == g["request"]
        assert o["result"]["completions"] == g["result"]["completions"]
        assert o["annotations"] == g["annotations"]   # gold SQL run with current_time fixed, no value fallback
    for name in ("per_instance_stats.json", "stats.json"):
        assert assert_stats_equal(load(gold / name), load(ours / name), per_instance=name.startswith("per")) > 0


def test_ehr_sql_v151_cells_equal_medhelm(built):
    gold, ours = GOLDEN / "benchmark_output" / "runs" / SUITE, built / "runs" / SUITE
    assert group_files(ours) == group_files(gold)
    assert sum(assert_group_cells_equal(gold / "groups", ours / "groups", n) for n in group_files(gold)) > 0
