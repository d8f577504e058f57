"""perf/helm_offline.py: the offline layout of a helm-run of the public tier (the width bench's HELM
side). Checked here without HELM: the files land where HELM 0.5.16 looks, and the shim answers the
four Hugging Face datasets and the two GitHub listings in a fresh interpreter, as it would inside
helm-run."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT / "perf"))

import helm_offline  # noqa: E402

pytestmark = pytest.mark.skipif(not (SHARED / "data" / "public").is_dir(), reason="needs ../shared/data/public")


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    root = tmp_path_factory.mktemp("helm")
    env = helm_offline.prepare(SHARED, root, "helm_output", "width-helm")
    return root, env


def test_the_downloads_are_where_helm_looks(staged):
    root, env = staged
    scenarios = root / "helm_output" / "scenarios"
    for _, placed in helm_offline.PLACED:
        assert (scenarios / placed).stat().st_size > 0, placed
    assert (scenarios / "ehr_sql" / "ehrsql_train.json").stat().st_size > 0
    assert len(list((scenarios / "med_qa" / "data" / "data_clean" / "questions" / "US" / "4_options").iterdir())) == 3
    # each listed .txt written for the mtsamples scenarios; replicate's listing cut at GitHub's 1,000
    assert len(list((scenarios / "mtsamples_replicate").glob("*.txt"))) <= 1000
    assert len(list((scenarios / "mtsamples_procedures").glob("*.txt"))) == 429
    assert (root / "helm_output" / "runs" / "width-helm" / "eval_cache" / "qafacteval.pk").exists()
    assert sorted(p.name for p in Path(env["TIKTOKEN_CACHE_DIR"]).iterdir()) == sorted(
        helm_offline.tiktoken_cache_name(e) for e in helm_offline.TIKTOKEN_ENCODINGS)


def _python(env: dict, code: str, cwd: Path) -> str:
    import os
    full = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", code], env={**full, **env}, cwd=cwd, check=True,
                          capture_output=True, text=True, timeout=300).stdout


def test_the_shim_answers_the_hub_datasets_and_the_listings_and_nothing_else(staged):
    root, env = staged
    out = _python(env, """
import json, requests
from datasets import load_dataset
calc = load_dataset("ncbi/MedCalc-Bench", split="test")
qa = load_dataset("dvilares/head_qa", "en")
url = ("https://api.github.com/repos/raulista1997/benchmarkdata/contents/mtsamples_processed"
       "?ref=ebc104a4f96c5b7602242f301e081e9934a23344")
listing = requests.get(url).json()
print(json.dumps({"calc": len(calc), "splits": sorted(qa), "listing": len(listing), "last": listing[-1]["name"]}))
""", root)
    got = json.loads(out)
    assert got == {"calc": 1047, "splits": ["test", "train", "validation"], "listing": 1000,
                   "last": "Ophthalmology - Letter - 3.txt"}
    calls = [json.loads(line)["call"] for line in (root / "helm_offline" / "shim_calls.jsonl").open()]
    assert calls == ["load_dataset", "load_dataset", "requests.get"]


def test_without_the_manifest_variable_the_shim_does_nothing(staged):
    root, env = staged
    inert = {k: v for k, v in env.items() if k != helm_offline.MANIFEST_ENV}
    out = _python(inert, "import datasets, sys; print(datasets.load_dataset.__module__)", root)
    assert out.strip().startswith("datasets")


def test_spacy_finds_the_stub_english_pipeline_under_the_real_name(staged):
    pytest.importorskip("spacy")
    root, env = staged
    out = _python(env, "import spacy; print([t.text for t in spacy.load('en_core_web_sm')('Take 2 pills.')])",
                  root)
    assert out.strip() == "['Take', '2', 'pills', '.']"
