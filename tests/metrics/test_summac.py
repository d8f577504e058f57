"""SummaC as HELM computes it (SummarizationMetric on a non-CPU device), against HELM 0.5.16's own
`SummaCZS` (from its wheel, tests/helm_reference.py) on the same texts and the same local model: a
tiny random-weight ALBERT classifier saved in a Hugging Face cache as
`tals/albert-xlarge-vitaminc-mnli`, with an untrained punkt_tab, loaded offline. Each check runs in a
fresh interpreter: Hugging Face and nltk read HF_HOME / NLTK_DATA when they are imported."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("bert_score")
pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]

TEXTS = [  # (input, output): sentences kept and dropped, several batches of 20 pairs, empty sides
    ("The patient has a fever and cough. Take rest daily. Drink water twice daily. No pain in chest. "
     "See your doctor. The fever is not high.",
     "The patient has a fever. Take rest and drink water. See your doctor for the cough. No."),
    ("Headache daily and cough\nThe patient has no fever.\nPain in chest with cough\n\nSee your doctor twice.",
     "The patient has a headache\nThe patient has pain in chest."),
    ("The patient has a fever and cough.", "Yes."),
    ("Short. Tiny.", "The patient has a fever and cough."),
]

CHECK = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
from helm.benchmark.metrics.summac.model_summac import SummaCZS as HelmSummaCZS
from medhelm_core.metrics.base import EvalContext
from medhelm_core.metrics.summarization import SummarizationMetric
from medhelm_core.metrics.summac import summac_scorer
from medhelm_core.tokenizers import get_tokenizer

texts = json.loads(sys.argv[2])
out = {"helm": {}, "ours": {}}
for split in (False, True):
    helm = HelmSummaCZS(granularity="sentence", model_name="vitc", imager_load_cache=False, device="cpu",
                        new_line_split=split)
    helm.imager.load_nli()
    tok = helm.imager.tokenizer
    # HELM's copy calls batch_encode_plus, which transformers 5 removed (HELM pins 4.x): give it back
    # as 4.x defines it, the __call__ of the pairs' two sides.
    tok.batch_encode_plus = lambda pairs, **kw: tok([a for a, _ in pairs], [b for _, b in pairs], **kw)
    ours = summac_scorer(split)
    out["helm"][str(split)] = [float(helm.score_one(i, o)["score"]) for i, o in texts]
    out["ours"][str(split)] = [ours.score(i, o) for i, o in texts]

inp, pred = texts[0]
state = {"instance": {"id": "id0", "input": {"text": "{" + inp + "}"}, "split": "test",
                      "references": [{"output": {"text": "See your doctor."}, "tags": ["correct"]}]},
         "train_trial_index": 0, "request": {"prompt": "p"}, "result": {"completions": [{"text": " " + pred + " "}]}}
metric = SummarizationMetric(task="med_dialog", device="cuda", bertscore_model="distilbert-base-uncased",
                             rescale_with_baseline=False)
metric.prepare()
ctx = EvalContext(adapter_spec={"method": "generation"}, request_states=[state], tokenizer=get_tokenizer(None),
                  run_spec={"name": "r"})
out["metric"] = [(s.name["name"], s.sum) for s in metric.evaluate_generation({}, state, ctx)]
out["not_computed"] = sorted(metric.not_computed)
print(json.dumps(out))
'''


def _env(hf_home: Path, nltk_data: Path) -> dict:
    return {**os.environ, "HF_HOME": str(hf_home), "NLTK_DATA": str(nltk_data), "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1"}


def test_summac_equals_helms_own_on_the_same_local_model(tmp_path):
    from tests.helm_reference import extract_helm_modules
    from tests.metrics.tiny_bert import save_tiny_distilbert, save_tiny_vitc, save_untrained_punkt

    helm = extract_helm_modules(tmp_path / "helm", "helm/benchmark/metrics/summac")
    save_tiny_distilbert(tmp_path / "hf")
    save_tiny_vitc(tmp_path / "hf")
    save_untrained_punkt(tmp_path / "nltk")
    r = subprocess.run([sys.executable, "-c", CHECK, str(helm), json.dumps(TEXTS)], cwd=ROOT,
                       env=_env(tmp_path / "hf", tmp_path / "nltk"), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["ours"] == out["helm"]  # equal, not close
    scores = out["helm"]["False"]
    assert scores[2] == 0.0 and scores[3] == 0.0  # "Yes." and "Short. Tiny." have no sentence over 10 characters
    assert scores[0] != 0.0 and out["helm"]["True"][1] != scores[1]  # lines without a full stop: the newline split changes the sentences
    # HELM's order: ROUGE, the extractive-fragment stats, SummaC, BERTScore
    names = [n for n, _ in out["metric"]]
    assert names[-4:] == ["summac", "BERTScore-P", "BERTScore-R", "BERTScore-F"]
    assert dict(out["metric"])["summac"] == scores[0]
    assert out["not_computed"] == []


def _cause(tmp_path: Path, hf_home: Path, nltk_data: Path) -> str:
    code = ("from medhelm_core.metrics.summarization import SummarizationMetric\n"
            "m = SummarizationMetric(task='t', device='cuda', bertscore_model='distilbert-base-uncased')\n"
            "m.prepare()\n"
            "print(m.not_computed['summac'])")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(hf_home, nltk_data), capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.strip().splitlines()[-1]


def test_without_the_weights_offline_the_cause_names_the_model_and_the_cache(tmp_path):
    from tests.metrics.tiny_bert import save_untrained_punkt

    save_untrained_punkt(tmp_path / "nltk")
    line = _cause(tmp_path, tmp_path / "empty", tmp_path / "nltk")
    assert "device='cuda'" in line and "'tals/albert-xlarge-vitaminc-mnli'" in line and str(tmp_path / "empty") in line


def test_without_punkt_the_cause_names_it_and_nltk_data(tmp_path):
    line = _cause(tmp_path, tmp_path / "empty", tmp_path / "no_nltk")
    assert "punkt_tab" in line and str(tmp_path / "no_nltk") in line and "NLTK_DATA" in line
