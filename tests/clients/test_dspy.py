"""DSPy deployments (HELM's DSPyClient): the built-in -dspy- deployments, the program the client runs,
and one DSPy variant end to end (medhelm-run + medhelm-summarize) against the shared mock server.

The mock answers plain text (an option letter for a multiple-choice prompt). DSPy's ChatAdapter
expects the "[[ ## field ## ]]" layout it asks for, so the end-to-end test puts a tiny loopback
relay in front of the mock that forwards every request unchanged and lays the mock's answer out in
that format (the "output" field; a fixed sentence for "reasoning") - a model that follows DSPy's
instructions. A second test talks to the raw mock and shows what HELM does with an unparseable
answer: the request fails (and so the run).
"""
from __future__ import annotations

import json
import re
import shutil
import sys
import textwrap
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from medhelm_core.helm_config.deployments import Deployment, load_model_registry
from medhelm_core.errors import MedhelmError
from tests.oracle import SHARED, SYNTHETIC, load

HELM_CONFS = SHARED / "helm"
SCHEMA = HELM_CONFS / "schema_medhelm.yaml"
SHC_CSV = SYNTHETIC / "inputs" / "private" / "shc_ptbm_med.csv"
VARIANT = "openai/gpt-4o-2024-05-13-dspy-fs-bfrs"
DSPY_FIELD = re.compile(r"`\[\[ ## (\w+) ## \]\]`")


def _dspy_available() -> bool:
    try:
        from medhelm_core.clients.dspy_program import import_dspy

        import_dspy()
        return True
    except MedhelmError:
        return False


needs_dspy = pytest.mark.skipif(not _dspy_available(), reason='dspy not installed (pip install "medhelm-build[dspy]")')
needs_shared = pytest.mark.skipif(not SHC_CSV.exists(), reason="shared/oracle not available")


# ------------------------------------------------------------------------------------------------
# Built-in deployments: the 16 of run_entries_medhelm_dspy.conf, as HELM's model_deployments.yaml
# ------------------------------------------------------------------------------------------------
BASES = {
    "anthropic/claude-3-7-sonnet-20250219": "claude-3.7-sonnet",
    "google/gemini-2.0-flash-001": "gemini-2.0-flash",
    "openai/gpt-4o-2024-05-13": "gpt-4o",
    "openai/o3-mini-2025-01-31": "o3-mini",
}
AGENTS = "https://raw.githubusercontent.com/StanfordMIMI/dspy-helm/cecc4e742ec0d342d6349c80625afdd238df7fd4/agents"


def test_builtin_dspy_deployments_match_the_dspy_conf():
    registry = load_model_registry(None)
    conf_names = set(re.findall(r"model_deployment=([^,\"]+)", (HELM_CONFS / "run_entries_medhelm_dspy.conf").read_text())) \
        if (HELM_CONFS / "run_entries_medhelm_dspy.conf").exists() else set()
    expected = {}
    for base, short in BASES.items():
        expected[f"{base}-dspy-zs-predict"] = ("Predict", None)
        expected[f"{base}-dspy-zs-cot"] = ("ChainOfThought", None)
        expected[f"{base}-dspy-fs-bfrs"] = ("ChainOfThought", f"{AGENTS}/{{scenario}}/{short}/BootstrapFewShotWithRandomSearch.json")
        expected[f"{base}-dspy-fs-miprov2"] = ("ChainOfThought", f"{AGENTS}/{{scenario}}/{short}/MIPROv2.json")
    if conf_names:
        assert conf_names == set(expected)
    for name, (module, url) in expected.items():
        d = registry.get_deployment(name)
        assert d.model_name == name
        assert d.client_spec.class_name == "helm.clients.dspy_client.DSPyClient"
        args = d.client_spec.args
        assert args["dspy_module"] == module and args["dspy_agent_url"] == url
        assert args["dspy_api_model"] == name.split("-dspy-")[0] and args["dspy_api_base"] is None
        assert registry.get_model_metadata(name).display_name  # HELM's metadata, not the placeholder
        assert registry.get_model_metadata(name).creator_organization_name != "Unknown"


def test_dspy_missing_package_is_one_line(monkeypatch):
    from medhelm_core.clients import dspy_program as dspy_client

    monkeypatch.setitem(sys.modules, "dspy", None)  # `import dspy` raises ImportError
    with pytest.raises(MedhelmError) as err:
        dspy_client.import_dspy()
    assert "medhelm-build[dspy]" in str(err.value) and "\n" not in str(err.value)


def test_dspy_deployment_validation():
    from medhelm_core.clients.dspy_program import DSPyClient

    with pytest.raises(MedhelmError, match="dspy_api_model"):
        DSPyClient("org/x-dspy", "org/x-dspy", "Predict", None)
    with pytest.raises(MedhelmError, match="Unknown dspy_module: Refine"):
        DSPyClient("org/x-dspy", "org/x-dspy", "Refine", "openai/x")


# ------------------------------------------------------------------------------------------------
# The program
# ------------------------------------------------------------------------------------------------
def _save_agent(path: Path, demo_inputs: str, demo_output: str, instructions: str) -> None:
    """An optimized ChainOfThought program as DSPy's optimizers save it (what dspy-helm hosts)."""
    from medhelm_core.clients.dspy_program import import_dspy

    dspy = import_dspy()
    program = dspy.ChainOfThought("inputs -> output")
    program.predict.demos = [dspy.Example(inputs=demo_inputs, reasoning="Demo reasoning.", output=demo_output,
                                          augmented=True)]
    program.predict.signature = program.predict.signature.with_instructions(instructions)
    path.parent.mkdir(parents=True, exist_ok=True)
    program.save(str(path))


@needs_dspy
def test_program_like_helm(tmp_path, monkeypatch):
    from medhelm_core.clients import dspy_program as dspy_client
    from medhelm_core.clients.dspy_program import DSPyClient, agent_cache_file

    monkeypatch.setattr(dspy_client, "AGENT_CACHE_DIR", tmp_path / "cache")
    _save_agent(tmp_path / "agents" / "shc_ptbm_med" / "agent.json", "DEMO QUESTION", "A", "Optimized instructions.")
    url = (tmp_path / "agents").as_uri() + "/{scenario}/agent.json"

    zs = DSPyClient("openai/gpt-4o-2024-05-13-dspy-zs-predict", "openai/gpt-4o-2024-05-13-dspy-zs-predict",
                    "Predict", "openai/gpt-4o-2024-05-13")
    assert type(zs.program("anything")).__name__ == "Predict"
    assert zs.lm.kwargs["temperature"] == 0.0
    reasoning = DSPyClient("openai/o3-mini-2025-01-31-dspy-zs-cot", "openai/o3-mini-2025-01-31-dspy-zs-cot",
                           "ChainOfThought", "openai/o3-mini-2025-01-31")
    assert reasoning.lm.kwargs["temperature"] == 1.0
    assert 100000 in (reasoning.lm.kwargs.get("max_tokens"), reasoning.lm.kwargs.get("max_completion_tokens"))

    fs = DSPyClient(VARIANT, VARIANT, "ChainOfThought", "openai/gpt-4o-2024-05-13", dspy_agent_url=url)
    program = fs.program("shc_ptbm_med")
    assert type(program).__name__ == "ChainOfThought"
    assert [d["inputs"] for d in program.predict.demos] == ["DEMO QUESTION"]
    assert program.predict.signature.instructions == "Optimized instructions."
    # downloaded once into HELM's cache file name, md5 of the URL
    cached = agent_cache_file(url.format(scenario="shc_ptbm_med"))
    assert cached.parent == tmp_path / "cache" and cached.exists()
    # a scenario without an agent: the deployment cannot answer (HELM: NonRetriableException)
    with pytest.raises(MedhelmError, match="Failed to load DSPy agent from URL"):
        fs.program("medec")

    # chat requests: the non-system messages, joined by " "
    assert DSPyClient.prompt_text({"prompt": "p", "messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": "u1"}, {"role": "user", "content": "u2"}]}) == "u1 u2"


# ------------------------------------------------------------------------------------------------
# End to end
# ------------------------------------------------------------------------------------------------
class _DSPyFormatRelay:
    """Loopback relay: forwards each chat request to the mock unchanged and lays the mock's answer
    out in the "[[ ## field ## ]]" format the request asks for. Records what it forwarded."""

    def __init__(self, target_base_url: str):
        self.target = target_base_url.rstrip("/")
        self.requests: list[dict] = []
        relay = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = json.loads(body)
                relay.requests.append(request)
                forward = urllib.request.Request(relay.target + self.path.removeprefix("/v1"), data=body,
                                                 headers={"Content-Type": "application/json",
                                                          "Authorization": self.headers.get("Authorization", "")})
                with urllib.request.urlopen(forward, timeout=60) as r:
                    response = json.loads(r.read())
                last_user = [m["content"] for m in request["messages"] if m["role"] == "user"][-1]
                fields = [f for f in DSPY_FIELD.findall(last_user.splitlines()[-1]) if f != "completed"]
                for choice in response["choices"]:
                    answer = choice["message"]["content"]
                    parts = [f"[[ ## {f} ## ]]\n{answer if f == 'output' else 'Mock reasoning.'}" for f in fields]
                    choice["message"]["content"] = "\n\n".join(parts + ["[[ ## completed ## ]]"])
                out = json.dumps(response).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _workspace(root: Path, api_base: str, agent_url: str | None) -> None:
    (root / "data").mkdir(parents=True)
    shutil.copy(SHC_CSV, root / "data" / "shc_ptbm_med.csv")
    (root / "prod_env").mkdir()
    (root / "prod_env" / "model_deployments.yaml").write_text(yaml.safe_dump({"model_deployments": [{
        "name": VARIANT, "model_name": VARIANT, "tokenizer_name": "simple/tokenizer1", "max_sequence_length": 128000,
        "client_spec": {"class_name": "helm.clients.dspy_client.DSPyClient", "args": {
            "dspy_agent_url": agent_url, "dspy_module": "ChainOfThought",
            "dspy_api_model": "openai/mock-gpt-a", "dspy_api_base": api_base}}}]}))
    (root / "prod_env" / "credentials.conf").write_text('openaiApiKey: "sk-mock-not-a-secret"\n')
    (root / "dspy.conf").write_text(textwrap.dedent(f"""\
        entries: [
          {{description: "shc_ptbm_med:data_path=data/shc_ptbm_med.csv,model={VARIANT},model_deployment={VARIANT}", priority: 1}},
        ]
    """))


RUN_NAME = f"shc_ptbm_med:model={VARIANT.replace('/', '_')},model_deployment={VARIANT.replace('/', '_')}"


@needs_dspy
@needs_shared
def test_dspy_variant_end_to_end(tmp_path, monkeypatch, mock_server):
    from medhelm_cli import run_main, summarize_main
    from medhelm_core.clients import dspy_program as dspy_client

    monkeypatch.setattr(dspy_client, "AGENT_CACHE_DIR", tmp_path / "agent_cache")
    demo = "Provide an answer to the following question: DEMO with the following context: DEMO"
    _save_agent(tmp_path / "agents" / "shc_ptbm_med" / "BootstrapFewShotWithRandomSearch.json", demo, "B",
                "Answer the clinical question.")
    agent_url = (tmp_path / "agents").as_uri() + "/{scenario}/BootstrapFewShotWithRandomSearch.json"
    relay = _DSPyFormatRelay(mock_server.base_url)
    try:
        _workspace(tmp_path, relay.base_url, agent_url)
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
        mock_server.reset()
        argv = ["--conf-paths", "dspy.conf", "--suite", "dspy", "--max-eval-instances", "6", "--num-threads", "2",
                "--output-path", "out", "--local-path", "prod_env"]
        assert run_main(argv) == 0
        calls = mock_server.stats()["total_requests"]
        assert calls == len(relay.requests) == 6  # one program call per instance, one LM call each
        # the optimized program was used: its instructions and demo are in every request
        for request in relay.requests:
            assert request["model"] == "mock-gpt-a" and request["temperature"] == 0.0
            system, *turns = request["messages"]
            assert "Answer the clinical question." in system["content"]
            assert any(demo in m["content"] for m in turns)
            assert turns[-1]["content"].startswith("[[ ## inputs ## ]]\nAnswer A or B.\n")

        run_dir = tmp_path / "out" / "runs" / "dspy" / RUN_NAME
        spec = load(run_dir / "run_spec.json")
        assert spec["adapter_spec"]["model_deployment"] == VARIANT and spec["adapter_spec"]["model"] == VARIANT
        states = load(run_dir / "scenario_state.json")["request_states"]
        assert len(states) == 6
        for state in states:
            result = state["result"]
            assert result["success"] is True and result["cached"] is False and "request_time" not in result
            (completion,) = result["completions"]
            assert completion["text"] in ("A", "B") and completion["logprob"] == 0.0 and completion["tokens"] == []
            assert "finish_reason" not in completion
        stats = {s["name"]["name"]: s for s in load(run_dir / "stats.json") if s["name"].get("split") == "test"
                 and "perturbation" not in s["name"]}
        assert stats["exact_match"]["count"] == 1  # the mean over the 6 instances
        per_instance = load(run_dir / "per_instance_stats.json")
        assert len(per_instance) == 6
        ems = [s["mean"] for p in per_instance for s in p["stats"] if s["name"]["name"] == "exact_match"]
        assert stats["exact_match"]["mean"] == pytest.approx(sum(ems) / 6)

        assert summarize_main(["--suite", "dspy", "--output-path", "out", "--schema-path", str(SCHEMA)]) == 0
        group = load(tmp_path / "out" / "runs" / "dspy" / "groups" / "shc_ptbm_med.json")
        rows = [row[0]["value"] for table in group for row in table["rows"]]
        assert "GPT-4o (2024-05-13) (DSPy BootstrapFewShotWithRandomSearch)" in rows
        em = [row for table in group for row in table["rows"]][0][1]["value"]
        assert em == pytest.approx(stats["exact_match"]["mean"])

        # a rerun pays for nothing
        assert run_main(argv) == 0
        assert mock_server.stats()["total_requests"] == calls
    finally:
        relay.close()


@needs_dspy
@needs_shared
def test_unparseable_answer_fails_the_request(tmp_path, monkeypatch, mock_server, capsys):
    """Against the raw mock (plain "A"/"B" answers) DSPy's ChatAdapter and its JSON fallback cannot
    parse the answer: HELM's client returns success=False and the run fails; so does ours."""
    from medhelm_cli import run_main

    _workspace(tmp_path, mock_server.base_url, None)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    code = run_main(["--conf-paths", "dspy.conf", "--suite", "raw", "--max-eval-instances", "1", "--num-threads", "1",
                     "--output-path", "out", "--local-path", "prod_env"])
    assert code == 1
    err = capsys.readouterr().err
    assert "DSPy program failed" in err and "sk-mock-not-a-secret" not in err


def test_deployment_yaml_parses_dspy_args():
    d = Deployment.model_validate({"name": VARIANT, "client_spec": {
        "class_name": "helm.clients.dspy_client.DSPyClient",
        "args": {"dspy_agent_url": None, "dspy_module": "Predict", "dspy_api_model": "openai/x", "dspy_api_base": None}}})
    assert d.client_spec.args["dspy_module"] == "Predict"
