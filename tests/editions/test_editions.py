"""Editions as data: the edition files, their switches, and the completion tokenization medhelm 0.8.0's
OpenAIClient adds (`clients.base.tokenized_result`)."""
import shutil

import pytest

from medhelm_core.catalog import BUILTIN_ROOT, Catalog
from medhelm_core.clients.base import tokenized_result
from medhelm_core.editions import DEFAULT_EDITION, EDITIONS_DIR, _load, known_editions, load_edition
from medhelm_core.errors import MedhelmError
from medhelm_core.tokenizers import SimpleTokenizer

TOKENIZE = SimpleTokenizer().tokenize  # one token per character, as the mock deployments


def test_the_two_editions_and_their_switches():
    assert known_editions() == ["helm-0.5.16", "medhelm-0.8.0"] and DEFAULT_EDITION == "helm-0.5.16"
    helm, medhelm = load_edition("helm-0.5.16"), load_edition("medhelm-0.8.0")
    assert load_edition(None) is helm
    assert not helm.tokenize_completions and helm.jury_score_type == "int" and helm.summarize_default_suite == "default"
    assert medhelm.tokenizes_completions_of("helm.clients.openai_client.OpenAIClient")
    assert not medhelm.tokenizes_completions_of("helm.clients.together_client.TogetherChatClient")
    assert medhelm.jury_score_type == "float" and medhelm.summarize_default_suite is None
    assert helm.schema_path.name == "schema_medhelm.yaml" and medhelm.schema_path.is_file()
    src = "https://github.com/stanford-crfm/helm/blob/main/src/helm/benchmark/scenarios/x.py"
    assert helm.definition_path(src) == src
    assert medhelm.definition_path(src) == "https://github.com/PacificAI/medhelm/blob/main/src/helm/benchmark/scenarios/x.py"
    assert medhelm.definition_path("https://example.org/mine.py") == "https://example.org/mine.py"


def test_an_unknown_or_broken_edition_is_one_line(tmp_path, monkeypatch):
    with pytest.raises(MedhelmError, match=r"unknown edition 'medhelm-9' \(known: helm-0.5.16, medhelm-0.8.0\)"):
        load_edition("medhelm-9")
    copy = tmp_path / "editions"
    shutil.copytree(EDITIONS_DIR, copy)
    (copy / "broken.yaml").write_text("name: broken\ndescription: x\nupstream: y\njury_score_type: double\n")
    monkeypatch.setattr("medhelm_core.editions.EDITIONS_DIR", copy)
    _load.cache_clear()
    try:
        with pytest.raises(MedhelmError, match=r"broken.yaml: jury_score_type: Input should be 'int' or 'float'"):
            load_edition("broken")
    finally:
        _load.cache_clear()


def test_a_benchmark_overlay_for_an_unknown_edition_names_the_file(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "benchmark.yaml").write_text("tier: public\neditions:\n  medhelm-0.80: {}\n")
    with pytest.raises(MedhelmError, match=r"mine/benchmark.yaml: editions: unknown edition 'medhelm-0.80'"):
        Catalog((BUILTIN_ROOT, tmp_path))


def _result(*texts, **extra):
    return {"success": True, "embedding": [], "cached": False,
            "completions": [{"text": t, "logprob": 0, "tokens": [], **extra} for t in texts]}


def test_completions_are_tokenized_and_cut_to_max_tokens_as_medhelm_does():
    req = {"max_tokens": 1, "stop_sequences": [], "echo_prompt": False}
    out = tokenized_result(_result("No", finish_reason={"reason": "stop"}), req, TOKENIZE)
    # Cut: the text is the first token's, and truncate_sequence drops finish_reason.
    assert out["completions"] == [{"text": "N", "logprob": 0, "tokens": [{"text": "N", "logprob": 0}]}]
    long = {**req, "max_tokens": 10}
    out = tokenized_result(_result("Yes", finish_reason={"reason": "stop"}, thinking={"text": "t"}), long, TOKENIZE)
    assert out["completions"][0] == {"text": "Yes", "logprob": 0, "finish_reason": {"reason": "stop"},
                                     "thinking": {"text": "t"},
                                     "tokens": [{"text": c, "logprob": 0} for c in "Yes"]}
    failed = {"success": False, "completions": [], "error": "x"}
    assert tokenized_result(failed, req, TOKENIZE) is failed


def test_a_stop_cut_is_redone_on_the_text_the_api_returned():
    """0.5.16 stored the text already cut at the stop; 0.8.0 tokenizes the whole text, then cuts the
    tokens at the first one that starts with the stop (a token boundary): the stored untruncated text
    is what makes that exact."""
    req = {"max_tokens": 3, "stop_sequences": ["\n"], "echo_prompt": False}
    stored = _result("B")  # the API said "B\nbecause", 0.5.16 kept "B"
    out = tokenized_result(stored, req, TOKENIZE, untruncated=["B\nbecause"])
    assert out["completions"] == [{"text": "B", "logprob": 0, "tokens": [{"text": "B", "logprob": 0}]}]

    def words(text):  # a tokenizer whose tokens do not start at the stop: ".\n" is one token
        return ["A", ".\n", "Explanation"] if text.startswith("A.\n") else list(text)

    out = tokenized_result(_result("A."), req, words, untruncated=["A.\nExplanation"])
    # The text is cut at the stop, but no token starts with it: all three tokens stay (as in medhelm).
    assert out["completions"][0]["text"] == "A." and len(out["completions"][0]["tokens"]) == 3
    out = tokenized_result(_result("A."), req, words)  # without the original text: only the stored one's
    assert len(out["completions"][0]["tokens"]) == 2


def test_medhelm_summarize_needs_a_suite_under_medhelm_080(capsys, tmp_path):
    from medhelm_cli import summarize_main

    with pytest.raises(SystemExit) as exc:
        summarize_main(["--edition", "medhelm-0.8.0", "--output-path", str(tmp_path)])
    assert exc.value.code == 2
    assert "--suite or --release is required (as medhelm==0.8.0's helm-summarize requires)" in capsys.readouterr().err
    # HELM 0.5.16 summarizes the suite "default" then, which has no runs here.
    assert summarize_main(["--output-path", str(tmp_path)]) == 2
    assert "does not exist (run medhelm-run first)" in capsys.readouterr().err


def test_health_admin_bench_stops_before_any_call_saying_what_it_needs(tmp_path, capsys, monkeypatch):
    """medhelm 0.8.0's public conf names health_admin_bench (a Playwright agent against a remote portal):
    its run entry expands and lists, and a run stops before anything is asked, in one line."""
    from medhelm_cli import run_main

    conf = tmp_path / "public.conf"
    conf.write_text('entries: [{description: "health_admin_bench:task_set=prior_auth,difficulty=easy,'
                    'task_ids=emr-easy-1,model=openai/gpt-4o-2024-05-13,model_deployment=openai/gpt-4o-2024-05-13", '
                    'priority: 1}]\n')
    monkeypatch.delenv("HEALTH_ADMIN_BENCH_ROOT", raising=False)
    monkeypatch.chdir(tmp_path)
    base = ["--conf-paths", str(conf), "--suite", "s", "--max-eval-instances", "1", "--edition", "medhelm-0.8.0",
            "--output-path", str(tmp_path / "out")]
    assert run_main(base + ["--dry-run"]) == 0
    assert capsys.readouterr().out.split() == [
        "health_admin_bench:model=openai_gpt-4o-2024-05-13,model_deployment=openai_gpt-4o-2024-05-13"]
    assert run_main(base) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "health_admin_bench runs a Playwright agent against https://emrportal.vercel.app" in err[0]
    assert "a HealthAdminBench checkout with benchmark/v2/tasks" in err[0]
    assert not (tmp_path / "out" / "medhelm.duckdb").exists()  # nothing written, nothing asked


def test_long_group_table_file_stems_are_cut_only_under_medhelm_080():
    import hashlib

    from medhelm_core.summarize.write import group_table_stem

    group, table = "clinical_decision_support", "x" * 170
    assert group_table_stem(group, table, load_edition("helm-0.5.16").group_table_stem_max) == f"{group}_{table}"
    cap = load_edition("medhelm-0.8.0").group_table_stem_max
    stem = f"{group}_{table}"
    cut = group_table_stem(group, table, cap)
    assert cap == 180 and len(cut) == 180
    assert cut == stem[:163] + "_" + hashlib.sha1(stem.encode()).hexdigest()[:16]
    assert group_table_stem("g", "a/b", cap) == "g_a_b" and group_table_stem("g", "short", cap) == "g_short"


def test_an_answer_stored_without_the_apis_text_is_not_silently_recut(tmp_path):
    """medhelm 0.8.0 cuts the API's text at the stop itself; an answer stored before that text was kept
    (a stop-sequence request) cannot be read exactly under it: one line says so."""
    import json

    from medhelm_core.run.annotations import load_request_states
    from medhelm_core.run.workspace import RunRef, Workspace

    ws = Workspace(tmp_path / "out", tmp_path / "prod_env", edition="medhelm-0.8.0")
    run = RunRef("s", "r")
    dep = {"client_spec": {"class_name": "helm.clients.openai_client.OpenAIClient"}, "tokenizer_name": "simple/tokenizer1"}
    state = {"instance": {"id": "id0"}, "train_trial_index": 0, "num_train_instances": 0, "prompt_truncated": False,
             "num_conditioning_tokens": 0, "request": {"prompt": "p", "max_tokens": 5, "stop_sequences": ["\n"]}}
    result = {"success": True, "embedding": [], "completions": [{"text": "ab", "logprob": 0, "tokens": []}]}
    with ws.store.transaction() as conn:
        conn.execute("INSERT INTO run_entries (suite, run_name, run_spec, edition, deployment) VALUES (?, ?, '{}', ?, ?)",
                     ["s", "r", "medhelm-0.8.0", json.dumps(dep)])
        conn.execute("INSERT INTO requests (suite, run_name, position, request_key, model_deployment, request_state)"
                     " VALUES ('s', 'r', 0, 'k', 'd/x', ?)", [json.dumps(state)])
        conn.execute("INSERT INTO completions (request_key, result) VALUES ('k', ?)", [json.dumps(result)])
    with pytest.raises(MedhelmError, match=r"^r: 1 of its answers were stored before medhelm-build kept the text"):
        load_request_states(ws, run)
    with ws.store.transaction() as conn:
        conn.execute("UPDATE completions SET untruncated = ?", [json.dumps(["ab\ncdefg"])])
    [st] = load_request_states(ws, run)
    assert st["result"]["completions"] == [{"text": "ab", "logprob": 0, "tokens": [{"text": c, "logprob": 0} for c in "ab"]}]
    # Under HELM 0.5.16 the stored answer is read as it is, with or without that text.
    with ws.store.transaction() as conn:
        conn.execute("UPDATE run_entries SET edition = 'helm-0.5.16'")
    assert load_request_states(ws, run)[0]["result"] == result
