"""Metrics: golden HELM 0.5.16 output, Stat semantics and the tricky scoring cases."""
from __future__ import annotations

import json
import math
import random

import pytest

from medhelm_core.catalog import default_catalog
from medhelm_core.jury.metric import jury_score_corrected
from medhelm_core.metrics import MetricError, Stat
from medhelm_core.metrics import evaluate_run as _evaluate_run

METRICS = default_catalog().metrics


def evaluate_run(run_spec, request_states, tokenizer_name, metrics=None):
    """The run evaluated with the catalog's metric table (or `metrics`)."""
    return _evaluate_run(run_spec, request_states, tokenizer_name, METRICS if metrics is None else metrics)
from medhelm_core.metrics.base import Metric
from medhelm_core.metrics.stat import merge_stat, metric_name, perturbation
from medhelm_core.metrics.summarization import data_stats, extractive_fragments
from medhelm_core import tokenizers as tokenizers_module
from medhelm_core.tokenizers import TokenizerError, get_tokenizer
from tests.oracle import PUBLIC, SYNTHETIC, load, run_dirs

TOL = 1e-9
VALUE_FIELDS = ("sum", "sum_squared", "min", "max", "mean", "variance", "stddev")


# ----------------------------------------------------------------------------------------------
# Golden runs
# ----------------------------------------------------------------------------------------------
def _golden_runs():
    runs = []
    for root, suite in ((SYNTHETIC, "oracle-cfg"), (SYNTHETIC, "oracle-private"), (PUBLIC, "public-n50")):
        base = root / "benchmark_output" / "runs" / suite
        if not base.exists():
            continue
        for d in run_dirs(root, suite):
            runs.append(pytest.param(d, id=f"{suite}/{d.name.split(',model_deployment=')[0]}"))
    return runs


def _unimplemented(run_spec: dict) -> list[str]:
    return [m["class_name"] for m in run_spec["metric_specs"] if m["class_name"] not in METRICS]


GOLDEN_RUNS = _golden_runs()


def _assert_stats_equal(ours: list[dict], golden: list[dict], where: str) -> None:
    assert [s["name"] for s in ours] == [s["name"] for s in golden], f"{where}: stat names/order differ"
    for a, b in zip(ours, golden):
        label = f"{where}: {json.dumps(b['name'])}"
        assert a["count"] == b["count"], label
        assert set(a) == set(b), label
        for field in VALUE_FIELDS:
            if field in b:
                assert abs(a[field] - b[field]) <= TOL, f"{label} {field}: {a[field]!r} != {b[field]!r}"


@pytest.mark.skipif(not GOLDEN_RUNS, reason="golden oracle output (shared/oracle) not found")
@pytest.mark.parametrize("run_dir", GOLDEN_RUNS)
def test_golden_run(run_dir):
    run_spec = load(run_dir / "run_spec.json")
    assert not _unimplemented(run_spec)
    request_states = load(run_dir / "scenario_state.json")["request_states"]
    # Every mock model and judge deployment of the golden runs uses simple/tokenizer1.
    per_instance, stats = evaluate_run(run_spec, request_states, "simple/tokenizer1")

    golden_pi = load(run_dir / "per_instance_stats.json")
    assert len(per_instance) == len(golden_pi)
    for ours, gold in zip(per_instance, golden_pi):
        where = f"per-instance {gold['instance_id']}"
        assert ours["instance_id"] == gold["instance_id"]
        assert ours["train_trial_index"] == gold["train_trial_index"]
        assert ours.get("perturbation") == gold.get("perturbation")
        _assert_stats_equal(ours["stats"], gold["stats"], where)

    _assert_stats_equal(stats, load(run_dir / "stats.json"), "stats.json")


def test_every_golden_run_uses_only_implemented_metric_classes():
    """So test_golden_run compares every golden run in full (it would skip one that did not)."""
    assert GOLDEN_RUNS
    missing = {p.id: _unimplemented(load(p.values[0] / "run_spec.json")) for p in GOLDEN_RUNS}
    assert not {k: v for k, v in missing.items() if v}


def test_golden_runs_are_byte_identical():
    """Stronger than the 1e-9 check: HELM's own JSON, ints and floats alike (json.dumps equal)."""
    checked = 0
    for param in GOLDEN_RUNS:
        run_dir = param.values[0]
        run_spec = load(run_dir / "run_spec.json")
        if _unimplemented(run_spec) or "aci_bench" in run_dir.name or "mtsamples" in run_dir.name:
            continue  # the slow summarization runs are covered by test_golden_run
        request_states = load(run_dir / "scenario_state.json")["request_states"]
        per_instance, stats = evaluate_run(run_spec, request_states, "simple/tokenizer1")
        assert json.dumps(per_instance, indent=2) == (run_dir / "per_instance_stats.json").read_text()
        assert json.dumps(stats, indent=2) == (run_dir / "stats.json").read_text()
        checked += 1
    if GOLDEN_RUNS:
        assert checked > 0


# ----------------------------------------------------------------------------------------------
# Stat
# ----------------------------------------------------------------------------------------------
def test_stat_add_ignores_none_and_maps_bools():
    s = Stat(metric_name("x", "test"))
    s.add(None)
    assert s.count == 0 and s.to_json() == {"name": {"name": "x", "split": "test"}, "count": 0, "sum": 0, "sum_squared": 0}
    s.add(True).add(False).add(None).add(3)
    assert (s.count, s.sum, s.sum_squared, s.min, s.max) == (3, 4, 10, 0, 3)
    assert s.mean == pytest.approx(4 / 3)
    assert s.variance == pytest.approx(10 / 3 - (4 / 3) ** 2)  # population variance
    assert s.stddev == pytest.approx(math.sqrt(s.variance))
    assert isinstance(s.sum, int) and isinstance(s.mean, float)


def test_stat_variance_clamped_to_int_zero():
    s = Stat("x")
    for _ in range(3):
        s.add(0.1)
    assert s.sum_squared / s.count - s.mean**2 < 0  # rounding makes it negative
    assert s.variance == 0 and type(s.variance) is int and s.stddev == 0.0


def test_stat_merge_take_mean_and_json_roundtrip():
    a = Stat(metric_name("m", "test")).add(1).add(2)
    b = Stat(metric_name("other")).add(6)
    a.merge(b)  # other's name is ignored
    assert a.name == {"name": "m", "split": "test"}
    assert (a.count, a.sum, a.min, a.max, a.mean) == (3, 9, 1, 6, 3.0)
    m = a.take_mean()
    assert (m.count, m.sum, m.mean, m.variance, m.stddev) == (1, 3.0, 3.0, 0.0, 0.0)
    empty = Stat("e")
    assert empty.take_mean() is empty
    assert "min" not in empty.to_json() and "mean" not in empty.to_json()
    pert = metric_name("m", "test", perturbation=perturbation("robustness", robustness=True, computed_on="worst"))
    s = Stat(pert).add(0.5)
    j = s.to_json()
    assert j["name"]["perturbation"] == {"name": "robustness", "robustness": True, "fairness": False, "computed_on": "worst"}
    assert Stat.from_json(j).to_json() == j
    stats: dict = {}
    merge_stat(stats, s)
    merge_stat(stats, Stat(pert).add(1.5))
    assert len(stats) == 1 and stats[s.key].count == 2 and s.count == 1  # copied, not aliased


# ----------------------------------------------------------------------------------------------
# Tokenizers
# ----------------------------------------------------------------------------------------------
def test_simple_tokenizer_counts_code_points():
    tok = get_tokenizer("simple/tokenizer1")
    assert tok is get_tokenizer("simple/tokenizer1")  # built once
    assert tok.encode("Hé 😀") == [72, 233, 32, 128512]
    assert tok.count("Hé 😀") == 4


def test_unknown_tokenizer_is_a_clear_error():
    with pytest.raises(TokenizerError, match=r"no/such-tokenizer.*tokenizer_name"):
        get_tokenizer("no/such-tokenizer")


@pytest.fixture
def offline_tiktoken(tmp_path, monkeypatch):
    """tiktoken with an empty TIKTOKEN_CACHE_DIR, no encoding built yet in this process, and any
    download an error (so a passing test proves no network was needed)."""
    tiktoken = pytest.importorskip("tiktoken")
    import tiktoken.load
    import tiktoken.registry

    cache = tmp_path / "tiktoken_cache"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})

    def no_download(blobpath):
        raise ConnectionError(f"test is offline: {blobpath}")

    monkeypatch.setattr(tiktoken.load, "read_file", no_download)
    tokenizers_module.clear_cache()
    yield cache
    tokenizers_module.clear_cache()


def test_tiktoken_tokenizer_from_the_bundled_bpe_file(offline_tiktoken):
    """cl100k_base / o200k_base come from the BPE files LiteLLM ships (the [dspy] extra), with no
    download and nothing written to the cache; HELM's TiktokenTokenizer counts."""
    import os

    from medhelm_core import tokenizers

    if tokenizers.bundled_bpe_file("cl100k_base") is None:
        pytest.skip("LiteLLM's bundled BPE files are not installed (pip install 'medhelm-build[dspy]')")
    cl100k = get_tokenizer("openai/cl100k_base")
    assert cl100k.encode("hello world") == [15339, 1917]
    text = "The patient was prescribed 5 mg of warfarin."
    assert cl100k.count(text) == 12 and cl100k.decode(cl100k.encode(text)) == text
    assert get_tokenizer("openai/o200k_base").encode("hello world") == [24912, 2375]
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(offline_tiktoken)  # restored after the bundle was used
    assert list(offline_tiktoken.iterdir()) == []


def test_tiktoken_without_bundle_or_cache_is_one_clear_line(offline_tiktoken, monkeypatch):
    from medhelm_core import tokenizers
    from medhelm_core.errors import MedhelmError

    monkeypatch.setattr(tokenizers, "bundled_bpe_dir", lambda: None)
    with pytest.raises(tokenizers.TokenizerUnavailable) as err:
        get_tokenizer("openai/cl100k_base")
    msg = str(err.value)
    assert isinstance(err.value, MedhelmError) and "\n" not in msg
    for needle in ("'openai/cl100k_base'", "cl100k_base.tiktoken",
                   "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
                   "TIKTOKEN_CACHE_DIR", str(offline_tiktoken), tokenizers.tiktoken_cache_name("cl100k_base"),
                   "ConnectionError", "medhelm-build[dspy]"):
        assert needle in msg, needle
    # The gated scenarios load their encodings through the same function.
    from medhelm_core.scenarios.gated import files as gated_files

    with pytest.raises(MedhelmError, match=r"cl100k_base\.tiktoken.*TIKTOKEN_CACHE_DIR"):
        gated_files._tiktoken_encoding("cl100k_base")


def test_tiktoken_not_installed_is_one_clear_line(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "tiktoken", None)  # `import tiktoken` raises ImportError
    tokenizers_module.clear_cache()
    try:
        with pytest.raises(TokenizerError, match=r"'openai/o200k_base'.*'tiktoken'.*medhelm-build\[gated\]"):
            get_tokenizer("openai/o200k_base")
    finally:
        tokenizers_module.clear_cache()


def test_unimplemented_tokenizer_is_approximated_for_estimates_only():
    from medhelm_core.tokenizers import ApproximateTokenizer, is_approximate, tokenizer_or_approximation

    with pytest.raises(TokenizerError, match="anthropic/claude"):
        get_tokenizer("anthropic/claude")
    approx = tokenizer_or_approximation("anthropic/claude")
    assert isinstance(approx, ApproximateTokenizer) and is_approximate(approx)
    assert approx.count("") == 0 and approx.count("abcd") == 1 and approx.count("abcde") == 2
    assert approx.decode(approx.encode("hello world")) == "hello world"
    assert not is_approximate(tokenizer_or_approximation("simple/tokenizer1"))


# ----------------------------------------------------------------------------------------------
# Synthetic request states for the tricky cases
# ----------------------------------------------------------------------------------------------
BASIC = {"class_name": "helm.benchmark.metrics.basic_metrics.BasicGenerationMetric",
         "args": {"names": ["exact_match", "quasi_exact_match", "prefix_exact_match", "quasi_prefix_exact_match"]}}
INSTANCES = {"class_name": "helm.benchmark.metrics.basic_metrics.InstancesPerSplitMetric", "args": {}}
JUDGES = {"gpt": {"model_name": "openai/gpt-4o-2024-05-13", "model_deployment": "x/gpt"},
          "llama": {"model_name": "meta/llama", "model_deployment": "x/llama"},
          "claude": {"model_name": "anthropic/claude", "model_deployment": "x/claude"}}


def _run_spec(metric_specs, method="generation", num_outputs=1):
    return {"name": "t", "adapter_spec": {"method": method, "num_outputs": num_outputs, "num_train_trials": 1},
            "metric_specs": metric_specs}


def _rs(iid, text, refs, split="test", output_mapping=None, annotations=None, tokens=None, logprob=0,
        finish="stop", prompt="Q?", perturbation_=None, request_time=0.5):
    instance = {"input": {"text": "input " + iid}, "references": refs, "split": split, "id": iid}
    if perturbation_ is not None:
        instance["perturbation"] = perturbation_
    rs = {"instance": instance, "train_trial_index": 0,
          "request": {"model_deployment": "m/m", "model": "m/m", "prompt": prompt, "echo_prompt": False},
          "result": {"success": True, "completions": [{"text": text, "logprob": logprob, "tokens": tokens or [],
                                                       "finish_reason": {"reason": finish} if finish else None}],
                     "cached": False, "request_time": request_time},
          "num_train_instances": 0, "prompt_truncated": False, "num_conditioning_tokens": 0}
    if output_mapping is not None:
        rs["output_mapping"] = output_mapping
    if annotations is not None:
        rs["annotations"] = annotations
    return rs


def _ref(text, correct):
    return {"output": {"text": text}, "tags": ["correct"] if correct else []}


def _pi_values(per_instance, iid):
    out = {}
    for entry in per_instance:
        if entry["instance_id"] == iid:
            for s in entry["stats"]:
                out[s["name"]["name"]] = s.get("mean")
    return out


MC_REFS = [_ref("Aspirin", True), _ref("Ibuprofen", False)]
MAPPING = {"A": "Aspirin", "B": "Ibuprofen"}


def test_mc_answer_must_be_exactly_the_letter():
    states = [
        _rs("id0", " A \n", MC_REFS, output_mapping=MAPPING),  # stripped "A" -> correct
        _rs("id1", "A.", MC_REFS, output_mapping=MAPPING),  # "A." maps to nothing
        _rs("id2", "(A)", MC_REFS, output_mapping=MAPPING),
        _rs("id3", "B", MC_REFS, output_mapping=MAPPING),
    ]
    per_instance, stats = evaluate_run(_run_spec([BASIC, INSTANCES], "multiple_choice_joint", 5), states,
                                       "simple/tokenizer1")
    v0, v1, v2, v3 = (_pi_values(per_instance, f"id{i}") for i in range(4))
    for name in ("exact_match", "quasi_exact_match", "prefix_exact_match", "quasi_prefix_exact_match"):
        assert (v0[name], v1[name], v2[name], v3[name]) == (1, 0, 0, 0), name
        assert v0[f"{name}@5"] == 1 and v1[f"{name}@5"] == 0
    em = next(s for s in stats if s["name"] == {"name": "exact_match", "split": "test"})
    assert em["mean"] == 0.25
    num = next(s for s in stats if s["name"]["name"] == "num_instances")
    assert num["mean"] == 4.0
    assert v0["num_prompt_tokens"] == 2 and v0["max_prob"] == 1.0


def test_generation_without_mapping_and_no_at_k_when_one_output():
    states = [_rs("id0", " The Aspirin. ", MC_REFS), _rs("id1", "aspirin is right", MC_REFS)]
    per_instance, _ = evaluate_run(_run_spec([BASIC]), states, "simple/tokenizer1")
    v0, v1 = _pi_values(per_instance, "id0"), _pi_values(per_instance, "id1")
    assert (v0["exact_match"], v0["quasi_exact_match"], v0["prefix_exact_match"]) == (0, 1, 0)
    assert (v1["exact_match"], v1["quasi_prefix_exact_match"], v1["prefix_exact_match"]) == (0, 1, 0)
    assert not any("@" in k for k in v0)


def _jury_spec(default=None, metric="scn_accuracy"):
    args = {"metric_name": metric, "scenario_name": "scn", "annotator_models": JUDGES}
    if default is not None:
        args["default_score"] = default
    return {"class_name": "helm.benchmark.metrics.llm_jury_metrics.LLMJuryMetric", "args": args}


def _judge(a, c, cl):
    return {"accuracy": {"score": a, "explanation": ""}, "completeness": {"score": c, "explanation": ""},
            "clarity": {"score": cl, "explanation": ""}}


def test_jury_scores():
    full = {"prompt_text": "p", "gpt": _judge(5, 4, 3), "llama": _judge(4.9, 4, "3"), "claude": _judge(1, 1, 1)}
    one_failed = {"prompt_text": "p", "gpt": _judge(5, 4, 3), "claude": _judge(2, 2, 2)}
    empty_output = {"prompt_text": None, "empty_output_equivalence_judgement": False}
    all_failed = {"prompt_text": "p"}
    extra_key = {"prompt_text": "p", "gpt": {**_judge(3, 3, 3), "overall": {"score": 5}}}
    states = [
        _rs("id0", "x", [_ref("g", True)], annotations={"scn": full}),
        _rs("id1", "x", [_ref("g", True)], annotations={"scn": one_failed}),
        _rs("id2", "", [_ref("g", True)], annotations={"scn": empty_output}),
        _rs("id3", "x", [_ref("g", True)], annotations={"scn": all_failed}),
        _rs("id4", "x", [_ref("g", True)], annotations={"scn": extra_key}),
    ]
    per_instance, stats = evaluate_run(_run_spec([_jury_spec(1.0)]), states, "simple/tokenizer1")
    got = [_pi_values(per_instance, f"id{i}")["scn_accuracy"] for i in range(5)]
    # 4.9 -> 4 and "3" -> 3 (int()); failed judge absent; no scores -> default 1.0; all top-level values count
    assert got == [(5 + 4 + 3 + 4 + 4 + 3 + 1 + 1 + 1) / 9, (5 + 4 + 3 + 2 + 2 + 2) / 6, 1.0, 1.0, 14 / 4]
    mean = next(s for s in stats if s["name"] == {"name": "scn_accuracy", "split": "test"})["mean"]
    assert mean == pytest.approx(sum(got) / 5)

    # configurable benchmark: jury_score with HELM's default 0.0
    per_instance, _ = evaluate_run(_run_spec([_jury_spec(metric="jury_score")]), states, "simple/tokenizer1")
    assert [_pi_values(per_instance, f"id{i}")["jury_score"] for i in (2, 3)] == [0.0, 0.0]

    # the corrected value: same when judges scored, None otherwise
    assert jury_score_corrected(full, JUDGES) == got[0]
    assert jury_score_corrected(one_failed, list(JUDGES)) == got[1]
    assert jury_score_corrected(empty_output, JUDGES) is None
    assert jury_score_corrected(all_failed, JUDGES) is None
    assert jury_score_corrected(None, JUDGES) is None


def test_jury_unscorable_value_is_an_error_like_helm():
    bad = {"prompt_text": "p", "gpt": _judge("4.5", 4, 4)}  # int("4.5") raises in HELM too
    with pytest.raises(MetricError, match="id0"):
        evaluate_run(_run_spec([_jury_spec(1.0)]), [_rs("id0", "x", [_ref("g", True)], annotations={"scn": bad})],
                     "simple/tokenizer1")


def test_worst_case_copies_and_count_zero_stats():
    per_instance, stats = evaluate_run(_run_spec([BASIC]), [_rs("id0", "Aspirin", MC_REFS)], "simple/tokenizer1")
    names = [(s["name"]["name"], s["name"].get("perturbation", {}).get("name")) for s in stats]
    assert ("exact_match", "robustness") in names and ("exact_match", "fairness") in names
    assert ("training_co2_cost", None) in names and ("training_co2_cost", "robustness") not in names
    co2 = next(s for s in stats if s["name"]["name"] == "training_co2_cost")
    assert co2 == {"name": {"name": "training_co2_cost", "split": "test"}, "count": 0, "sum": 0, "sum_squared": 0}
    # HELM's order: all plain stats first, then robustness/fairness pairs per name
    first_worst = next(i for i, s in enumerate(stats) if "perturbation" in s["name"])
    assert all("perturbation" not in s["name"] for s in stats[:first_worst])


def test_worst_case_with_perturbations():
    robust = {"name": "typos", "robustness": True, "fairness": False, "computed_on": "perturbed"}
    states = [
        _rs("id0", "Aspirin", MC_REFS),  # original: correct
        _rs("id0", "Aspirn", MC_REFS, perturbation_=robust),  # perturbed: wrong
        _rs("id1", "Ibuprofen", MC_REFS),  # original: wrong
        _rs("id1", "Aspirin", MC_REFS, perturbation_=robust),  # perturbed: correct
    ]
    per_instance, stats = evaluate_run(_run_spec([BASIC]), states, "simple/tokenizer1")
    assert [e.get("perturbation", {}).get("name") for e in per_instance] == [None, "typos", None, "typos"]

    def stat(name, pert_name=None, computed_on=None):
        for s in stats:
            p = s["name"].get("perturbation")
            if s["name"]["name"] == name and (p or {}).get("name") == pert_name and (p or {}).get("computed_on") == computed_on:
                return s["mean"]
        raise KeyError((name, pert_name, computed_on))

    assert stat("exact_match") == 0.5
    assert stat("exact_match", "typos", "perturbed") == 0.5
    assert stat("exact_match", "robustness", "worst") == 0.0  # min(orig, perturbed) per instance
    assert stat("exact_match", "fairness", "worst") == 0.5  # no fairness perturbation: the original
    assert stat("exact_match", "typos", "worst") == 0.0
    assert stat("exact_match", "typos", "original") == 0.5


def test_finish_reason_tokens_and_perplexity():
    tokens = [{"text": "Hi", "logprob": -0.5}, {"text": "bytes:\\xe2\\x80", "logprob": -1.0}, {"text": " é", "logprob": -0.5}]
    states = [_rs("id0", "Hi…", [_ref("Hi", True)], tokens=tokens, logprob=-2.0, finish=None),
              _rs("id1", "x", [_ref("Hi", True)], finish="content_filter")]
    no_names = {**BASIC, "args": {"names": []}}  # no exact_match: HELM's calibration stays off
    per_instance, stats = evaluate_run(_run_spec([no_names]), states, "simple/tokenizer1")
    v = _pi_values(per_instance, "id0")
    assert v["finish_reason_unknown"] == 1 and v["finish_reason_stop"] == 0
    assert _pi_values(per_instance, "id1")["finish_reason_unknown"] == 1
    assert (v["logprob"], v["num_perplexity_tokens"], v["num_bytes"], v["num_completion_tokens"]) == (-2.0, 3, 2 + 2 + 3, 3)
    assert v["max_prob"] == pytest.approx(math.exp(-2.0))
    means = {s["name"]["name"]: s.get("mean") for s in stats if "perturbation" not in s["name"]}
    assert means["perplexity"] == pytest.approx(math.e ** (2.0 / 3))
    assert means["logprob_per_byte"] == pytest.approx(-2.0 / 7)


def test_nan_stats_are_removed_and_registry_is_extensible():
    class NanMetric(Metric):
        def __init__(self, value):
            self.value = value

        def evaluate_generation(self, adapter_spec, request_state, ctx):
            return [Stat(metric_name("weird")).add(self.value), Stat(metric_name("fine")).add(1)]

    name = "tests.test_metrics.NanMetric"
    per_instance, stats = evaluate_run(_run_spec([{"class_name": name, "args": {"value": float("nan")}}]),
                                       [_rs("id0", "x", [])], "simple/tokenizer1", {**METRICS, name: NanMetric})
    assert [s["name"]["name"] for s in per_instance[0]["stats"]] == ["fine"]
    assert {s["name"]["name"] for s in stats} == {"fine"}


def test_unknown_metric_class_is_a_clear_error():
    with pytest.raises(MetricError, match=r"helm\.benchmark\.metrics\.bbq_metrics\.BBQMetric"):
        evaluate_run(_run_spec([{"class_name": "helm.benchmark.metrics.bbq_metrics.BBQMetric", "args": {}}]),
                     [_rs("id0", "x", [])], "simple/tokenizer1")


def test_summarization_on_gpu_spec_is_refused():
    spec = {"class_name": "helm.benchmark.metrics.summarization_metrics.SummarizationMetric",
            "args": {"task": "t", "device": "cuda"}}
    with pytest.raises(MetricError, match="device=.cuda.: HELM then adds SummaC"):
        evaluate_run(_run_spec([spec]), [_rs("id0", "x", [_ref("g", True)])], "simple/tokenizer1")


# ----------------------------------------------------------------------------------------------
# Summarization internals
# ----------------------------------------------------------------------------------------------
def _fragments_reference(a, b):
    """Newsroom's matching loop, written out literally (the oracle for the indexed version)."""
    lengths, i = [], 0
    while i < len(a):
        best, j = 0, 0
        while j < len(b):
            if a[i] == b[j]:
                ie, je = i, j
                while ie < len(a) and je < len(b) and b[je] == a[ie]:
                    ie += 1
                    je += 1
                best = max(best, ie - i)
                j = je
            else:
                j += 1
        if best:
            lengths.append(best)
            i += best
        else:
            i += 1
    return lengths


def test_extractive_fragments_match_the_reference_loop():
    rng = random.Random(0)
    for _ in range(300):
        a = [rng.choice("abcd") for _ in range(rng.randint(0, 15))]
        b = [rng.choice("abcde") for _ in range(rng.randint(0, 25))]
        assert extractive_fragments(a, b) == _fragments_reference(a, b)


def test_data_stats_small_example():
    ds = data_stats("The cat sat.", "the cat sat on the mat. The dog")
    # summary [the, cat, sat, .]; text has 9 tokens; fragments "the cat sat" (3) and "." (1)
    assert ds == {"coverage": 1.0, "density": (9 + 1) / 4, "compression": 9 / 4}
    assert data_stats("", "abc") == {"coverage": 0, "density": 0, "compression": 0}


def test_rouge_matches_rouge_score_package():
    from rouge_score import rouge_scorer

    from medhelm_core.metrics.rouge import rouge_fmeasures

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    rng = random.Random(1)
    words = ["patient", "patients", "pain", "chest", "the", "a", "reports", "reported", "denies", "fever", "x1"]
    texts = ["", "!!!", "The patient reports chest pain."]
    texts += [" ".join(rng.choice(words) for _ in range(rng.randint(0, 60))) for _ in range(80)]
    for i in range(0, len(texts) - 1):
        target, pred = texts[i], texts[i + 1]
        expected = {k: v.fmeasure for k, v in scorer.score(target, pred).items()}
        assert rouge_fmeasures(target, pred) == expected


def test_calibration_needs_helms_calibration_package():
    """Negative logprobs + exact_match switch on HELM's calibration stats (ece_10_bin, ...)."""
    try:
        import calibration  # noqa: F401
    except ImportError:
        pass
    else:  # pragma: no cover - depends on the environment
        pytest.skip("uncertainty-calibration installed")
    states = [_rs("id0", "Aspirin", MC_REFS, tokens=[{"text": "Aspirin", "logprob": -0.1}], logprob=-0.1)]
    with pytest.raises(MetricError, match="uncertainty-calibration"):
        evaluate_run(_run_spec([BASIC]), states, "simple/tokenizer1")
