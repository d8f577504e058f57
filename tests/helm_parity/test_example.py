"""The shipped example, `bash scripts/example.sh` as the docs print it ("The shipped example"), runs end
to end in a fresh copy of the checkout with the README's old ports held by another process: its demo
server takes a free port, the example's prod_env for it is written under the output path, and the
server is gone when the script ends."""
import json
import os
import re
import subprocess
import urllib.request

import pytest
import yaml

from tests.ports import readme_ports_taken  # noqa: F401  (a fixture)
from tests.readme import code_blocks, commands, readme_checkout

pytestmark = pytest.mark.usefixtures("readme_ports_taken")


def test_example_suite_end_to_end():
    [block] = code_blocks("The shipped example", "bash")
    [cmd] = commands(block)
    assert cmd == "bash scripts/example.sh"
    with readme_checkout() as work:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MEDHELM_", "DAGSTER_"))}
        r = subprocess.run(cmd.split(), cwd=work, env=env, capture_output=True, text=True,
                           timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
        m = re.search(r"example\.sh: the demo models on (http://127\.0\.0\.1:(\d+)/v1) \(prod_env: "
                      r"benchmark_output/demo_prod_env\)", r.stderr)
        assert m and m.group(2) != "8765", r.stderr[-3000:]
        out = work / "benchmark_output"
        deployments = yaml.safe_load((out / "demo_prod_env" / "model_deployments.yaml").read_text())
        assert {d["client_spec"]["args"]["base_url"] for d in deployments["model_deployments"]} == {m.group(1)}
        with pytest.raises(OSError):   # stopped on exit
            urllib.request.urlopen(m.group(1).removesuffix("/v1") + "/stats", timeout=5)
        assert "6 runs: 0 reused" in r.stderr   # a fresh copy: none of the user's answers
        groups = json.loads((out / "runs" / "example" / "groups.json").read_text())
        assert groups and groups[0]["rows"]
        table = json.loads((out / "runs" / "example" / "groups" / "all_scenarios.json").read_text())[0]
        names = {row[0]["value"] for row in table["rows"]}
        assert names == {"Demo model A", "Demo model B"}
        assert (out / "runs" / "example" / "shc_ptbm_med:model=demo_model-a,model_deployment=demo_model-a"
                / "display_predictions.json").exists()
