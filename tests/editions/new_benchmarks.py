"""Running the benchmarks medhelm 0.8.0 adds against ../shared/oracle/medhelm-0.8.0/new-benchmarks, as
its harness ran them: its inputs laid out as `work/`, its data files as our data mirror, its own mock
(the base mock plus the HealthBench and SCT-Bench graders) on loopback, N=18, suite `new-benchmarks`."""
from __future__ import annotations

import re
from pathlib import Path
import pytest

from medhelm_cli import run_main, summarize_main
from tests.mock_server import MockServer
from tests.oracle import MEDHELM_080, load
from tests.parity import assert_stats_equal, lay_out_inputs

NEW = MEDHELM_080 / "new-benchmarks"
GOLD = NEW / "benchmark_output" / "runs" / "new-benchmarks"
SUITE = "new-benchmarks"
MOCK = NEW / "inputs" / "mock" / "mock_new_benchmarks_openai_server.py"


def golden_runs(benchmark: str) -> list[str]:
    """The golden run names of one benchmark (its variants, both models)."""
    return sorted(p.name for p in GOLD.iterdir() if p.is_dir() and re.split("[:]", p.name)[0] == benchmark)


ALL = ["sct_bench", "health_bench", "health_bench_professional", "medxpert_qa_text", "healthqa_br",
       "mmlu_clinical_afr", "synt_family_disclosure", "synt_right_of_access", "synt_written_consent"]


def new_benchmarks_run(root: Path, benchmarks: list[str], summarize: bool = False) -> Path:
    """medhelm-run (edition medhelm-0.8.0) of the conf lines of `benchmarks` in `root` (then
    medhelm-summarize with the edition's schema); returns the output folder. The conf keeps the
    golden conf's order, so instance ids and ordering match."""
    mock = MockServer(script=MOCK)
    mp = pytest.MonkeyPatch()
    try:
        work = lay_out_inputs(NEW / "inputs", root, mock.base_url)
        conf = work / "conf" / "new_benchmarks.conf"
        lines = conf.read_text().splitlines()
        keep = [ln for ln in lines if not ln.strip().startswith("{description:")
                or re.search(r'description: "([a-z_]+)[:,]', ln).group(1) in benchmarks]
        conf.write_text("\n".join(keep) + "\n")
        mp.chdir(root)
        mp.setenv("DAGSTER_HOME", str(root / "dagster_home"))
        mp.setenv("MEDHELM_DATA_MIRROR", str(work / "data"))
        assert run_main(["--conf-paths", "work/conf/new_benchmarks.conf", "--suite", SUITE,
                         "--max-eval-instances", "18", "--num-threads", "2", "--edition", "medhelm-0.8.0",
                         "--output-path", "benchmark_output", "--local-path", "work/prod_env"]) == 0
        if summarize:
            assert summarize_main(["--suite", SUITE, "--output-path", "benchmark_output"]) == 0
        return root / "benchmark_output"
    finally:
        mp.undo()
        mock.close()


def assert_run_equals_medhelm(out: Path, run: str, exact_annotations: bool = True) -> None:
    """One run's files equal medhelm 0.8.0's: spec, scenario, every request state, both stats files."""
    gold, ours = GOLD / run, out / "runs" / SUITE / run
    assert load(ours / "run_spec.json") == load(gold / "run_spec.json")
    assert load(ours / "scenario.json") == load(gold / "scenario.json")
    g_states, o_states = load(gold / "scenario_state.json"), load(ours / "scenario_state.json")
    assert len(o_states["request_states"]) == len(g_states["request_states"])
    for g, o in zip(g_states["request_states"], o_states["request_states"]):
        assert o["instance"] == g["instance"]
        assert o["request"] == g["request"]
        assert o["result"]["completions"] == g["result"]["completions"]
        if exact_annotations:
            assert o.get("annotations") == g.get("annotations")
    for name in ("per_instance_stats.json", "stats.json"):
        assert assert_stats_equal(load(gold / name), load(ours / name), per_instance=name.startswith("per")) > 0
