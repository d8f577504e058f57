"""BERTScore as HELM computes it (SummarizationMetric on a non-CPU device), against the bert_score
library's own `BERTScorer` on the same texts and the same local model: a tiny random-weight DistilBERT
saved in a Hugging Face cache as `distilbert-base-uncased`, loaded offline. Each check runs in a fresh
interpreter: Hugging Face reads HF_HOME when it is imported."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("bert_score")
ROOT = Path(__file__).resolve().parents[2]

CHECK = r'''
import json
from bert_score import BERTScorer
from medhelm_core.metrics.base import EvalContext
from medhelm_core.metrics.summarization import SummarizationMetric
from medhelm_core.tokenizers import get_tokenizer

refs = ["{Take rest and drink water.}", "See your doctor if the fever stays."]
pred = "  The patient has a fever: take rest, drink water.  "
state = {"instance": {"id": "id0", "input": {"text": "{The patient has a fever and cough.}"}, "split": "test",
                      "references": [{"output": {"text": r}, "tags": ["correct"]} for r in refs]},
         "train_trial_index": 0, "request": {"prompt": "p"}, "result": {"completions": [{"text": pred}]}}
metric = SummarizationMetric(task="med_dialog", device="cuda", bertscore_model="distilbert-base-uncased",
                             rescale_with_baseline=False)
metric.prepare()
ctx = EvalContext(adapter_spec={"method": "generation"}, request_states=[state], tokenizer=get_tokenizer(None),
                  run_spec={"name": "r"})
ours = {s.name["name"]: s.sum for s in metric.evaluate_generation({}, state, ctx)}
library = BERTScorer(model_type="distilbert-base-uncased", lang="en", rescale_with_baseline=False, device="cpu")
p, r, f = library.score(["The patient has a fever: take rest, drink water."],
                        [["Take rest and drink water.", "See your doctor if the fever stays."]])
print(json.dumps({"ours": ours, "library": {"BERTScore-P": p[0].item(), "BERTScore-R": r[0].item(),
                                             "BERTScore-F": f[0].item()},
                  "not_computed": sorted(metric.not_computed)}))
'''


def _run(code: str, hf_home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_bertscore_equals_the_librarys_own_on_the_same_local_model(tmp_path):
    from tests.metrics.tiny_bert import save_tiny_distilbert

    save_tiny_distilbert(tmp_path / "hf")
    r = _run(CHECK, tmp_path / "hf")
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert {k: out["ours"][k] for k in out["library"]} == out["library"]  # equal, not close
    assert 0 < out["library"]["BERTScore-F"] < 1
    # HELM's order: ROUGE, the extractive-fragment stats, (SummaC,) BERTScore
    assert list(out["ours"])[-3:] == ["BERTScore-P", "BERTScore-R", "BERTScore-F"]
    assert out["not_computed"] == ["summac"]


def test_without_the_weights_offline_the_cause_names_the_model_and_the_cache(tmp_path):
    code = ("from medhelm_core.metrics.summarization import SummarizationMetric\n"
            "m = SummarizationMetric(task='t', device='cuda', bertscore_model='distilbert-base-uncased')\n"
            "m.prepare()\n"
            "print(m.not_computed['BERTScore-F'])")
    r = _run(code, tmp_path / "empty")
    assert r.returncode == 0, r.stderr[-3000:]
    line = r.stdout.strip().splitlines()[-1]
    assert "device='cuda'" in line and "'distilbert-base-uncased'" in line and str(tmp_path / "empty") in line
