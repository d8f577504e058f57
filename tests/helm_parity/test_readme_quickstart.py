"""MedHELM's quickstart line as the README prints it ("A local Hugging Face model"): the shipped tiny
model through HELM's HuggingFaceClient path, offline, from a copy of the checkout laid out as a fresh
clone beside ../shared (the tracked files only: the user's own quickstart output, e.g.
examples/local-hf/benchmark_output, is not copied, so its answers are not reused); its answers are
HELM 0.5.16's (../shared/oracle/local-hf)."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.oracle import SHARED, load
from tests.ports import readme_ports_taken  # noqa: F401  (a fixture)
from tests.readme import code_blocks, commands

pytest.importorskip("transformers")
pytestmark = pytest.mark.usefixtures("readme_ports_taken")

ROOT = Path(__file__).resolve().parents[2]
GOLD_RUN = (SHARED / "oracle" / "local-hf" / "benchmark_output" / "runs" / "local-hf"
            / "pubmed_qa:model=local_tiny-gpt2,model_deployment=huggingface_tiny-gpt2")


def test_the_quickstart_line_runs_offline_and_answers_as_helm(tmp_path):
    [block] = code_blocks("A local Hugging Face model", "bash")
    cmds = commands(block)
    assert cmds[0] == "cd examples/local-hf" and "--run-entries" in cmds[1] and "--offline" in cmds[1]
    checkout = tmp_path / "checkout"
    tracked = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "examples/local-hf"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout.splitlines()
    assert "examples/local-hf/prod_env/model_deployments.yaml" in tracked
    for name in tracked:
        if (ROOT / name).is_file():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, checkout / name)
    (checkout / ".venv").symlink_to(ROOT / ".venv")
    (tmp_path / "shared").symlink_to(SHARED)  # ../../../shared from examples/local-hf, as beside a clone
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("MEDHELM_", "DAGSTER_", "HF_"))},
           "DAGSTER_HOME": str(tmp_path / "dagster_home"), "HF_HOME": str(tmp_path / "hf_home")}
    r = subprocess.run(["bash", "-ec", "\n".join(cmds)], cwd=checkout, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "1 runs: 0 reused, 2 new calls" in r.stderr
    ours = checkout / "examples" / "local-hf" / "benchmark_output" / "runs" / "my-medhelm-suite" / GOLD_RUN.name
    states = json.loads((ours / "scenario_state.json").read_text())["request_states"]
    gold = {s["instance"]["id"]: s for s in load(GOLD_RUN / "scenario_state.json")["request_states"]}
    assert len(states) == 2
    for s in states:  # HELM's first two sampled instances are among its ten
        g = gold[s["instance"]["id"]]
        assert s["request"] == g["request"]
        assert s["result"]["completions"] == g["result"]["completions"]
