"""Re-scoring is per stat, not per run: a published-format run as GPU machines wrote them (run spec
`device: cuda`, BERTScore and SummaC in its stats, a deployment whose tokenizer, Llama's from Hugging
Face, is not on this machine) re-scores every other stat, equal to the published one (the jury score
included), and lists each stat it could not recompute with its cause. The run directory is built
here from the extra oracle's med_dialog run, not taken from the published bucket."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.oracle import SHARED

EXTRA_RUN = (SHARED / "oracle" / "extra" / "benchmark_output" / "runs" / "extra-public" /
             "med_dialog,subset=healthcaremagic:model=mockai_mock-gpt-g,model_deployment=mockai_mock-gpt-g")
ROOT = Path(__file__).resolve().parents[2]
DEVICE_STATS = {"BERTScore-P": 0.61, "BERTScore-R": 0.58, "BERTScore-F": 0.59, "summac": 0.27}

pytestmark = pytest.mark.skipif(not EXTRA_RUN.exists(), reason="golden files not available")


def _stat(name: str, value: float, count: int = 1) -> dict:
    return {"name": {"name": name, "split": "test"}, "count": count, "sum": value * count,
            "sum_squared": value * value * count, "min": value, "max": value, "mean": value}


def gpu_published_run(root: Path) -> Path:
    run = root / "benchmark_output" / "runs" / "gpu" / EXTRA_RUN.name
    shutil.copytree(EXTRA_RUN, run)
    spec = json.loads((run / "run_spec.json").read_text())
    for metric in spec["metric_specs"]:
        if metric["class_name"].endswith("SummarizationMetric"):
            metric["args"]["device"] = "cuda"
    spec["adapter_spec"]["model_deployment"] = "stanfordhealthcare/llama-3.3-70b-instruct"
    (run / "run_spec.json").write_text(json.dumps(spec, indent=2))
    per_instance = json.loads((run / "per_instance_stats.json").read_text())
    summarized = [e for e in per_instance if any(s["name"]["name"] == "rouge_l" for s in e["stats"])]
    for entry in summarized:  # SummarizationMetric's entry of each instance
        entry["stats"].extend(_stat(n, v) for n, v in DEVICE_STATS.items())
    (run / "per_instance_stats.json").write_text(json.dumps(per_instance, indent=2))
    stats = json.loads((run / "stats.json").read_text())
    for rouge in [st for st in stats if st["name"]["name"] == "rouge_l"]:  # the same splits and perturbations
        stats.extend(dict(_stat(n, v, rouge["count"]), name={**rouge["name"], "name": n})
                     for n, v in DEVICE_STATS.items())
    (run / "stats.json").write_text(json.dumps(stats, indent=2))
    return root / "benchmark_output"


def _rescore(tmp_path: Path, hf_home: Path) -> subprocess.CompletedProcess:
    source = gpu_published_run(tmp_path / "published")
    env = {"HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "medhelm_cli.imports", "--source", str(source), "--suite", "gpu",
                        "--with-completions", "--rescore", "-o", str(tmp_path / "out"),
                        "--local-path", str(tmp_path / "no_prod_env")],
                          cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=600)


def test_a_gpu_run_re_scores_every_stat_but_those_it_cannot_and_says_why(tmp_path):
    hf_home = tmp_path / "hf"  # an empty Hugging Face cache, offline: Llama's tokenizer and BERTScore's model are not here
    r = _rescore(tmp_path, hf_home)
    assert r.returncode == 0, r.stderr
    with duckdb.connect(str(tmp_path / "out" / "medhelm.duckdb"), read_only=True) as conn:
        rows = conn.execute("SELECT status, name, equal, cause, count(*) FROM rescore_comparison"
                            " WHERE published_count IS NOT NULL GROUP BY ALL").fetchall()
    missing = {(name, cause) for status, name, _, cause, _ in rows if status == "not_recomputed"}
    assert {name for name, _ in missing} == set(DEVICE_STATS) | {"num_prompt_tokens"}
    for name, cause in missing:
        if name == "summac":
            assert "device='cuda'" in cause and "SummaC" in cause, cause
        elif name in DEVICE_STATS:
            assert "device='cuda'" in cause and "'distilbert-base-uncased'" in cause and str(hf_home) in cause, cause
        else:
            assert "meta-llama/Llama-3.3-70B-Instruct" in cause and str(hf_home) in cause, cause
    recomputed = {(name, equal) for status, name, equal, _, _ in rows if status == "recomputed"}
    assert ("med_dialog_accuracy", True) in recomputed and ("rouge_l", True) in recomputed
    assert all(equal for _, equal in recomputed), sorted(n for n, e in recomputed if not e)
    per_instance = [s["name"]["name"] for e in json.loads((EXTRA_RUN / "per_instance_stats.json").read_text())
                    for s in e["stats"]]
    published = per_instance + [s["name"]["name"] for s in json.loads((EXTRA_RUN / "stats.json").read_text())]
    n_summarized = per_instance.count("rouge_l")  # instances with a SummarizationMetric entry
    n_summarized += published.count("rouge_l") - per_instance.count("rouge_l")  # and its run-level rows
    out = r.stdout + r.stderr
    line = next((ln for ln in out.splitlines() if "re-scored 1 run(s) offline" in ln), out[-2000:])
    total = sum(n for *_, n in rows)
    not_recomputed = sum(n for status, *_, n in rows if status == "not_recomputed")
    assert not_recomputed == 4 * n_summarized + published.count("num_prompt_tokens")
    assert f"{total} published stats, {total - not_recomputed} recomputed ({total - not_recomputed} equal), " \
           f"{not_recomputed} not recomputed" in line, line
    assert sum(f"{3 * n_summarized} not recomputed: SummarizationMetric" in ln and "BERTScore" in ln
               for ln in out.splitlines()) == 1
    assert sum(f"{n_summarized} not recomputed: SummarizationMetric" in ln and "SummaC" in ln
               for ln in out.splitlines()) == 1


def test_with_the_bertscore_model_cached_bertscore_is_recomputed(tmp_path):
    """With the [summarization] extra and the model in the Hugging Face cache (a tiny local one here),
    BERTScore is computed on this machine's device; only SummaC and the tokenizer's counts are left."""
    pytest.importorskip("bert_score")
    from tests.metrics.tiny_bert import save_tiny_distilbert

    save_tiny_distilbert(tmp_path / "hf")
    r = _rescore(tmp_path, tmp_path / "hf")
    assert r.returncode == 0, r.stderr
    with duckdb.connect(str(tmp_path / "out" / "medhelm.duckdb"), read_only=True) as conn:
        status = dict(conn.execute("SELECT name, list(DISTINCT status) FROM rescore_comparison"
                                   " WHERE name IN ('BERTScore-P', 'BERTScore-R', 'BERTScore-F', 'summac',"
                                   " 'num_prompt_tokens') GROUP BY name").fetchall())
        # the fixture's published values are made up: ours differ from them, and say so
        causes = {c for (c,) in conn.execute("SELECT DISTINCT cause FROM rescore_comparison"
                                             " WHERE name = 'BERTScore-F'").fetchall()}
    assert status == {"BERTScore-P": ["recomputed"], "BERTScore-R": ["recomputed"], "BERTScore-F": ["recomputed"],
                      "summac": ["not_recomputed"], "num_prompt_tokens": ["not_recomputed"]}
    assert causes == {"value differs"}
