"""End to end against real HELM 0.5.16 output of its LOCAL Hugging Face path (../shared/oracle/local-hf):
a tiny GPT-2-family model shipped in the oracle, run in this process as HELM's HuggingFaceClient runs it
(transformers generate, the model's own BPE tokenizer), on four public scenarios, offline.

The same run entries and prod_env as HELM's (`pretrained_model_name_or_path: work/models/tiny-gpt2`,
relative to the working directory as HELM resolves it); prompts, completions, token lists, per-instance
stats, stats and leaderboard cells must equal HELM's. Our run batches the requests that reach the model
together (batch_size 8 by default); the answers must still be HELM's one-at-a-time answers."""
import shutil

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from medhelm_cli import run_main, summarize_main  # noqa: E402
from tests.oracle import SHARED, load, run_dirs  # noqa: E402
from tests.parity import (assert_display_files_equal, assert_leaderboard_equal,  # noqa: E402
                          assert_stats_equal, scenario_states)

LOCAL_HF = SHARED / "oracle" / "local-hf"
SUITE = "local-hf"
SCHEMA = SHARED / "helm" / "schema_medhelm.yaml"
GOLDEN_RUNS = [d.name for d in run_dirs(LOCAL_HF, SUITE)] if (LOCAL_HF / "benchmark_output").is_dir() else []


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("local-hf")
    shutil.copytree(LOCAL_HF / "inputs", root / "work")
    mp = pytest.MonkeyPatch()
    mp.chdir(root)
    mp.setenv("DAGSTER_HOME", str(root / "dagster_home"))
    mp.setenv("MEDHELM_DATA_MIRROR", str(SHARED / "data" / "public"))
    mp.setenv("HF_HUB_OFFLINE", "1")
    from medhelm_core.clients import huggingface_local

    before = {k: dict(b.model.counts) for k, b in huggingface_local._MODELS.items()}
    assert run_main(["--conf-paths", "work/conf/local_hf.conf", "--suite", SUITE, "--max-eval-instances", "10",
                     "--num-threads", "1", "--output-path", "benchmark_output", "--local-path", "work/prod_env",
                     "--offline"]) == 0
    counts = [b.model.counts for k, b in huggingface_local._MODELS.items() if k not in before]
    assert summarize_main(["--suite", SUITE, "--output-path", "benchmark_output", "--schema", str(SCHEMA),
                           "--local-path", "work/prod_env"]) == 0
    yield {"root": root, "out": root / "benchmark_output", "gold": LOCAL_HF / "benchmark_output", "counts": counts}
    mp.undo()


def test_four_runs_in_the_oracle():
    assert len(GOLDEN_RUNS) == 4


@pytest.mark.parametrize("run", GOLDEN_RUNS)
def test_run_files_equal_helm(built, run):
    gold, ours = built["gold"] / "runs" / SUITE / run, built["out"] / "runs" / SUITE / run
    g_states, o_states = scenario_states(gold, ours, 10)
    for g, o in zip(g_states["request_states"], o_states["request_states"]):
        assert o["instance"] == g["instance"]
        assert o["request"] == g["request"]                 # prompts cut from the right as HELM cuts them
        assert o.get("output_mapping") == g.get("output_mapping")
        assert o["result"]["completions"] == g["result"]["completions"]  # text, tokens, logprobs
        assert o["result"]["success"] and o.get("prompt_truncated") == g.get("prompt_truncated")
    for name in ("per_instance_stats.json", "stats.json"):
        assert assert_stats_equal(load(gold / name), load(ours / name), per_instance=name.startswith("per")) > 0


def test_prompts_were_truncated_and_completions_vary(built):
    """What makes this oracle a real check: HELM cut long prompts to max_request_length, and the
    random model's completions differ from prompt to prompt."""
    truncated, texts = 0, set()
    for run in GOLDEN_RUNS:
        states = load(built["out"] / "runs" / SUITE / run / "scenario_state.json")["request_states"]
        truncated += sum(bool(s.get("prompt_truncated")) for s in states)
        texts |= {s["result"]["completions"][0]["text"] for s in states}
    assert truncated == 11 and len(texts) > 30


def test_requests_were_batched(built):
    """The 40 answers above came from batched generation (then equal to HELM's one at a time)."""
    assert built["counts"], "the model was loaded before the fixture ran"
    counts = built["counts"][0]
    assert counts["batches"] >= 1 and counts["batched"] >= 2


def test_every_leaderboard_cell_equals_helm(built):
    gold, ours = built["gold"] / "runs" / SUITE, built["out"] / "runs" / SUITE
    assert assert_leaderboard_equal(gold, ours) > 50


@pytest.mark.parametrize("run", GOLDEN_RUNS)
def test_display_files_equal_helm(built, run):
    gold, ours = built["gold"] / "runs" / SUITE / run, built["out"] / "runs" / SUITE / run
    assert_display_files_equal(gold, ours)


def test_local_logprobs_put_the_models_own_beside_helms_zero(built):
    """HELM's bug kept in every file (logprob 0.0 at temperature 0); the model's own in SQL beside it."""
    import duckdb

    with duckdb.connect(str(built["out"] / "medhelm.duckdb"), read_only=True) as conn:
        rows = conn.execute("SELECT helm_logprob, model_logprob, num_tokens FROM local_logprobs").fetchall()
    assert len(rows) == 40
    assert all(helm == 0.0 for helm, _, _ in rows)
    assert all(model < 0 for _, model, n in rows if n > 0) and sum(n for _, _, n in rows) > 100
