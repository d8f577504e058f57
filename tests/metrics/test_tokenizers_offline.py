"""Every tokenizer a MedHELM deployment names loads offline from the library's normal cache
(`$TIKTOKEN_CACHE_DIR` for tiktoken's BPE files, `$HF_HOME` for Hugging Face tokenizers), and an
absent one is one line naming the file or model, where it comes from and the folder looked in."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from medhelm_core import tokenizers
from medhelm_core.helm_config.deployments import load_model_registry
from medhelm_core.tokenizers import HUGGINGFACE_TOKENIZER_CLASS, TIKTOKEN_TOKENIZERS, TokenizerUnavailable
from medhelm_core.yamlio import safe_load
from tests.oracle import SHARED

ROOT = Path(__file__).resolve().parents[2]


def _medhelm_deployments() -> set[str]:
    """The model deployments of HELM's MedHELM run-entry confs and of its judges."""
    names: set[str] = set()
    for conf in sorted((SHARED / "helm").glob("run_entries_medhelm_*.conf")):
        names |= set(re.findall(r"model_deployment=([^,\"]+)", conf.read_text()))
    names |= {j["model_deployment"] for j in safe_load((SHARED / "helm" / "judges.yaml").read_text())["judges"]}
    return names


def _hub_ids() -> dict[str, str]:
    """HELM tokenizer name -> Hugging Face hub id, for the MedHELM deployments' Hugging Face tokenizers."""
    registry = load_model_registry(None)
    out = {}
    for name in _medhelm_deployments():
        tokenizer = registry.get_deployment(name).tokenizer_name
        config = registry.tokenizer_configs.get(tokenizer)
        if config is not None and config.tokenizer_spec.class_name == HUGGINGFACE_TOKENIZER_CLASS:
            out[tokenizer] = config.tokenizer_spec.args.get("pretrained_model_name_or_path", tokenizer)
    return out


def test_every_medhelm_deployment_names_a_tokenizer_this_project_loads():
    registry = load_model_registry(None)
    names = _medhelm_deployments()
    assert len(names) > 20
    kinds = {}
    for name in names:
        tokenizer = registry.get_deployment(name).tokenizer_name
        config = registry.tokenizer_configs.get(tokenizer)
        if tokenizer in TIKTOKEN_TOKENIZERS:
            assert tokenizers.tiktoken_url(TIKTOKEN_TOKENIZERS[tokenizer])  # a known file with its source
            kinds[tokenizer] = "tiktoken"
        else:
            assert config is not None and config.tokenizer_spec.class_name == HUGGINGFACE_TOKENIZER_CLASS, name
            kinds[tokenizer] = "huggingface"
    assert kinds["openai/o200k_base"] == kinds["openai/cl100k_base"] == "tiktoken"
    assert {"meta/llama-3.3-70b-instruct", "deepseek-ai/deepseek-r1"} <= set(_hub_ids())


@pytest.fixture
def bpe_files() -> dict[str, Path]:
    """tiktoken's BPE files of o200k_base and cl100k_base, from the copy on this machine (LiteLLM's)."""
    found = {e: tokenizers.bundled_bpe_file(e) for e in ("o200k_base", "cl100k_base")}
    if None in found.values():
        pytest.skip("no copy of tiktoken's BPE files on this machine to lay out as a cache")
    return found


@pytest.fixture
def no_bundle(monkeypatch):
    """Only tiktoken's own path: its cache folder, then a download (which fails: no network)."""
    import tiktoken.load
    import tiktoken.registry

    monkeypatch.setattr(tokenizers, "bundled_bpe_dir", lambda: None)
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})  # what this process loaded before

    def no_network(url, *a, **k):
        raise ConnectionError(f"no network here ({url})")

    monkeypatch.setattr(tiktoken.load, "read_file", no_network)
    tokenizers.clear_cache()
    yield
    tokenizers.clear_cache()


def test_tiktoken_loads_from_tiktoken_cache_dir(tmp_path, monkeypatch, bpe_files, no_bundle):
    for encoding, path in bpe_files.items():  # laid out as tiktoken caches a download
        shutil.copy(path, tmp_path / tokenizers.tiktoken_cache_name(encoding))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert tokenizers.get_tokenizer("openai/cl100k_base").encode("hello world") == [15339, 1917]
    assert tokenizers.get_tokenizer("openai/o200k_base").count("hello world") == 2


def test_an_absent_tiktoken_file_is_one_line_naming_it_its_url_and_the_cache(tmp_path, monkeypatch, no_bundle):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    with pytest.raises(TokenizerUnavailable) as e:
        tokenizers.get_tokenizer("openai/o200k_base")
    line = str(e.value)
    assert "\n" not in line
    assert "o200k_base.tiktoken" in line and tokenizers.tiktoken_url("o200k_base") in line
    assert tokenizers.tiktoken_cache_name("o200k_base") in line and f"TIKTOKEN_CACHE_DIR (now {tmp_path})" in line


LOAD = r'''
import sys
from medhelm_core.helm_config.deployments import load_model_registry
from medhelm_core.tokenizers import TokenizerError, get_tokenizer
registry = load_model_registry(None)
for name in sys.argv[1:]:
    try:
        print(name, "ok", get_tokenizer(name, registry.tokenizer_configs[name]).count("the patient has a fever"))
    except TokenizerError as e:
        print(name, "error", str(e).replace("\n", "\\n"))
'''


def _load_in(hf_home: Path, names: list[str]) -> dict[str, tuple[str, str]]:
    env = {**os.environ, "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", LOAD, *names], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = {}
    for line in r.stdout.strip().splitlines():
        name, status, rest = line.split(" ", 2)
        out[name] = (status, rest)
    return out


def test_hugging_face_tokenizers_load_from_hf_home_and_an_absent_one_names_model_and_cache(tmp_path):
    pytest.importorskip("transformers")
    from transformers import DistilBertConfig, DistilBertTokenizer

    from tests.metrics.tiny_bert import WORDS, _snapshot

    ids = _hub_ids()
    for hub_id in ids.values():  # a small stand-in tokenizer in each model's place in the cache
        snapshot = _snapshot(tmp_path / "hf", hub_id)
        (snapshot / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
        DistilBertTokenizer(str(snapshot / "vocab.txt")).save_pretrained(snapshot)
        DistilBertConfig(vocab_size=len(WORDS) + 5).save_pretrained(snapshot)  # a hub repo has its config.json
    loaded = _load_in(tmp_path / "hf", sorted(ids))
    assert loaded == {name: ("ok", "5") for name in ids}
    absent = _load_in(tmp_path / "empty", sorted(ids))
    for name, hub_id in ids.items():
        status, line = absent[name]
        assert status == "error" and "\\n" not in line
        assert repr(hub_id) in line or hub_id in line, line
        assert str(tmp_path / "empty") in line, line
