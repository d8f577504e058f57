"""The shipped example (README's main job until the published-results import lands) runs end to end."""
import json
import re
import shutil
from pathlib import Path

from assets.cli import run_main, summarize_main
from medhelm_core import demo_server

ROOT = Path(__file__).resolve().parents[2]


def test_example_suite_end_to_end(tmp_path, monkeypatch):
    server = demo_server.serve(0)
    try:
        port = server.server_address[1]
        prod_env = tmp_path / "prod_env"
        shutil.copytree(ROOT / "examples" / "prod_env", prod_env)
        deployments = prod_env / "model_deployments.yaml"
        deployments.write_text(re.sub(r"127\.0\.0\.1:\d+", f"127.0.0.1:{port}", deployments.read_text()))
        monkeypatch.chdir(ROOT)  # the example's paths are relative to the project root
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
        out = tmp_path / "out"
        assert run_main(["--conf-paths", "conf/example.conf", "--suite", "example", "--max-eval-instances", "10",
                         "--local-path", str(prod_env), "--output-path", str(out)]) == 0
        assert summarize_main(["--suite", "example", "--output-path", str(out), "--local-path", str(prod_env),
                               "--auto-generate-schema"]) == 0
        groups = json.loads((out / "runs" / "example" / "groups.json").read_text())
        assert groups and groups[0]["rows"]
        table = json.loads((out / "runs" / "example" / "groups" / "all_scenarios.json").read_text())[0]
        names = {row[0]["value"] for row in table["rows"]}
        assert names == {"Demo model A", "Demo model B"}
        assert (out / "runs" / "example" / "shc_ptbm_med:model=demo_model-a,model_deployment=demo_model-a"
                / "display_predictions.json").exists()
    finally:
        server.shutdown()
