"""examples/prod_env_vllm: a vLLM server is an OpenAI-compatible deployment (HELM's VLLMChatClient: no
key, `vllm_model_name` as the model). The mock server stands in for `vllm serve` on loopback."""
import json
import re
import shutil
from pathlib import Path

from medhelm_cli import run_main
from tests.mock_server import ScriptedServer
from tests.oracle import SHARED

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "prod_env_vllm"


def test_the_vllm_example_runs_offline_against_a_local_server(tmp_path, monkeypatch, capsys):
    server = ScriptedServer(lambda prompt, n, srv: (200, None, {}, 0))
    try:
        env = tmp_path / "prod_env"
        shutil.copytree(EXAMPLE, env)
        deployments = env / "model_deployments.yaml"
        deployments.write_text(re.sub(r"http://127\.0\.0\.1:\d+/v1", server.base_url, deployments.read_text()))
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.setenv("MEDHELM_DATA_MIRROR", str(SHARED / "data" / "public"))
        desc = re.search(r'--run-entries "([^"]+)"', (EXAMPLE / "model_deployments.yaml").read_text()).group(1)
        assert run_main(["--run-entries", desc, "--suite", "v", "--max-eval-instances", "2", "--offline",
                         "--local-path", str(env), "--output-path", "out"]) == 0
    finally:
        server.close()
    assert server.count == 2 and set(server.models) == {"qwen2.5-7b-instruct"}  # vllm_model_name, no key needed
    run = next((tmp_path / "out" / "runs" / "v").iterdir())
    state = json.loads((run / "scenario_state.json").read_text())
    assert state["request_states"][0]["request"]["model_deployment"] == "vllm/qwen2.5-7b-instruct"
