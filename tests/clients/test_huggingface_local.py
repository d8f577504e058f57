"""HELM's HuggingFaceClient in this process (clients/huggingface_local.py), on the tiny model shipped in
examples/local-hf: batched generation gives the one-at-a-time answers, the safety nets that keep it so,
HELM's stop-sequence and prompt rules, and the one-line errors of a model that is not here."""
import threading
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from medhelm_core.clients import client_for_deployment, huggingface_local  # noqa: E402
from medhelm_core.clients.huggingface_local import LocalModel  # noqa: E402
from medhelm_core.helm_config.deployments import Credentials, load_model_registry  # noqa: E402
from medhelm_core.errors import MedhelmError  # noqa: E402
from medhelm_core.hf_hub import hub_cache_dir  # noqa: E402
from tests.oracle import SHARED  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "local-hf"
MODEL = "local/tiny-gpt2"
WORDS = ("patient", "dose", "mg", "the", "of", "with", "acute", "renal", "failure", "was", "given", "daily",
         "blood", "pressure", "trial", "outcome", "and", "in", "treatment", "study")


def _prompts(n: int) -> list[str]:
    """n prompts of different lengths (3 to ~90 words), deterministic."""
    return [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(3 + (i * 11) % 90)) + "\nAnswer:"
            for i in range(n)]


def _request(prompt: str, max_tokens: int = 12, stop=(), temperature: float = 0.0, messages=None) -> dict:
    return {"model_deployment": "huggingface/tiny-gpt2", "model": MODEL, "embedding": False, "prompt": prompt,
            "temperature": temperature, "num_completions": 1, "top_k_per_token": 1, "max_tokens": max_tokens,
            "stop_sequences": list(stop), "echo_prompt": False, "top_p": 1, "presence_penalty": 0,
            "frequency_penalty": 0, **({"messages": messages} if messages is not None else {})}


@pytest.fixture(scope="module")
def client():
    mp = pytest.MonkeyPatch()
    mp.chdir(EXAMPLE)  # the deployment's path is relative to the working directory, as in HELM
    registry = load_model_registry("prod_env")
    dep = registry.get_deployment("huggingface/tiny-gpt2")
    made = client_for_deployment(dep, Credentials(), tokenizer_config=registry.tokenizer_configs[dep.tokenizer_name],
                                 batch_size=8)
    made.batcher(MODEL)  # load now, while the working directory is the example's
    yield made
    mp.undo()


def _ids(answers):
    return [a["ids"] for a in answers]


def test_a_batch_answers_as_each_request_alone(client):
    model = client.batcher(MODEL).model
    raws = [client.raw_request(_request(p)) for p in _prompts(24)]
    before = dict(model.counts)
    alone = [model.serve(r) for r in raws]
    batched = model.serve_batch(raws)
    assert _ids(batched) == _ids(alone)
    helm_fields = ("text", "tokens", "logprobs")
    assert [[{k: c[k] for k in helm_fields} for c in a["completions"]] for a in batched] == \
        [[{k: c[k] for k in helm_fields} for c in a["completions"]] for a in alone]
    for b, a in zip(batched, alone):  # the model's own logprobs: equal up to the batch's float drift
        assert b["completions"][0]["model_logprobs"] == pytest.approx(a["completions"][0]["model_logprobs"], abs=1e-5)
    assert model.counts["batched"] - before["batched"] >= 20  # kept, not silently redone
    assert len({tuple(a["ids"][0]) for a in alone}) > 10  # the prompts really give different answers


def test_concurrent_requests_are_batched_and_equal_helm_one_at_a_time(client):
    batcher = client.batcher(MODEL)
    requests = [_request(p, max_tokens=8) for p in _prompts(32)]
    alone = [batcher.model.serve(client.raw_request(r))["ids"] for r in requests]
    before = batcher.model.counts["batches"]
    got: dict[int, list] = {}

    def ask(i):
        got[i] = batcher.submit(client.raw_request(requests[i]))["ids"]

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [got[i] for i in range(len(requests))] == alone
    assert batcher.model.counts["batches"] > before


def test_a_token_won_by_a_small_margin_is_generated_alone(client, monkeypatch):
    model = client.batcher(MODEL).model
    raws = [client.raw_request(_request(p)) for p in _prompts(6)]
    alone = _ids(model.serve(r) for r in raws)
    monkeypatch.setattr(huggingface_local, "BATCH_MARGIN", float("inf"))
    before = model.counts["redone"]
    assert _ids(model.serve_batch(raws)) == alone
    assert model.counts["redone"] - before == len(raws)


def test_a_model_whose_padded_batch_disagrees_is_not_batched_again(client, monkeypatch):
    model = LocalModel.__new__(LocalModel)
    model.__dict__.update(client.batcher(MODEL).model.__dict__)
    model.counts = dict(model.counts)
    model.checked_batches, model.batching_ok = 0, True
    real_serve = LocalModel.serve
    calls = []

    def serve(raw):  # the probe's one-at-a-time answer differs from the batch's
        calls.append(raw)
        answer = real_serve(model, raw)
        return {**answer, "ids": [[-1]]} if len(calls) == 1 else answer

    monkeypatch.setattr(model, "serve", serve)
    raws = [client.raw_request(_request(p)) for p in _prompts(4)]
    answers = model.serve_batch(raws)
    assert model.batching_ok is False
    assert len(answers) == 4 and len(calls) == 5  # the probe, then every request alone


def test_stop_sequences_as_helm_passes_them(client):
    model = client.batcher(MODEL).model
    tok = client.tokenizer.hf
    one = next(w for w in (" the", "\n", ".") if len(tok(w, add_special_tokens=False).input_ids) == 1)
    args, criteria = model._stop_args([one])
    assert args == {"eos_token_id": tok(one, add_special_tokens=False).input_ids[0]} and criteria is None
    args, criteria = model._stop_args(["\n\nQuestion:"])
    assert args == {} and len(criteria) == 1
    raws = [client.raw_request(_request(p, stop=["\n\nQuestion:"])) for p in _prompts(3)]
    before = model.counts["batches"]
    assert _ids(model.serve_batch(raws)) == _ids(model.serve(r) for r in raws)
    assert model.counts["batches"] == before  # multi-token stops stop HELM's whole call: never batched


def test_attempt_gives_helms_result_shape(client):
    got = client.attempt(_request(_prompts(1)[0], max_tokens=5))
    assert got.kind == "ok"
    [completion] = got.result["completions"]
    assert set(completion) == {"text", "logprob", "tokens"} and len(completion["tokens"]) <= 5
    assert completion["logprob"] == 0.0 and all(t["logprob"] == 0.0 for t in completion["tokens"])  # HELM's
    assert got.usage["completion_tokens"] == len(completion["tokens"]) and got.result["success"] is True
    [model_logprobs] = got.model_logprobs  # the corrected value beside HELM's 0.0
    assert len(model_logprobs) >= len(completion["tokens"]) and all(lp < 0 for lp in model_logprobs)


def test_chat_messages_are_refused_by_a_model_without_chat_template(client):
    got = client.attempt(_request("", messages=[{"role": "user", "content": "hi"}]))
    assert got.kind == "fatal" and "Chat mesages not supported by non-chat model" in got.message


def test_a_model_that_is_not_here_is_named_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prod_env").mkdir()
    (tmp_path / "prod_env" / "model_deployments.yaml").write_text(
        "model_deployments:\n  - name: huggingface/absent\n    model_name: someone/absent\n"
        "    tokenizer_name: huggingface/absent\n    max_sequence_length: 1024\n    client_spec:\n"
        "      class_name: helm.clients.huggingface_client.HuggingFaceClient\n"
        "      args: {pretrained_model_name_or_path: someone/absent-model}\n")
    (tmp_path / "prod_env" / "tokenizer_configs.yaml").write_text(
        "tokenizer_configs:\n  - name: huggingface/absent\n    tokenizer_spec:\n"
        "      class_name: helm.tokenizers.huggingface_tokenizer.HuggingFaceTokenizer\n"
        "      args: {pretrained_model_name_or_path: someone/absent-model}\n")
    registry = load_model_registry("prod_env")
    dep = registry.get_deployment("huggingface/absent")
    with pytest.raises(MedhelmError) as e:
        client_for_deployment(dep, Credentials(), tokenizer_config=registry.tokenizer_configs["huggingface/absent"])
    message = str(e.value)
    assert "\n" not in message and "someone/absent-model" in message and hub_cache_dir() in message


def test_medhelms_quickstart_line_resolves_helms_builtin_huggingface_gpt2(tmp_path, monkeypatch, capsys):
    """MedHELM's documented line, with no prod_env: the run entry resolves through HELM's built-in
    registry (transcribed); offline and without GPT-2's weights the run stops before any call, in one
    line naming the hub id and the cache folder."""
    from medhelm_cli import run_main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("MEDHELM_DATA_MIRROR", str(SHARED / "data" / "public"))
    line = ["--run-entries", "pubmed_qa:model=openai/gpt2,model_deployment=huggingface/gpt2",
            "--suite", "my-medhelm-suite", "--max-eval-instances", "2"]
    assert run_main([*line, "--dry-run"]) == 0
    assert "pubmed_qa:model=openai_gpt2,model_deployment=huggingface_gpt2" in capsys.readouterr().out
    assert run_main(line) != 0
    [message] = [m for m in capsys.readouterr().err.splitlines() if "error" in m]
    assert "'openai-community/gpt2' is neither a folder nor in the Hugging Face cache" in message
    assert hub_cache_dir() in message and not (tmp_path / "benchmark_output" / "runs").exists()
