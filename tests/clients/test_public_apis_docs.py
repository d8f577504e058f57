"""The docs' "Run the public tier with your own keys (outside Stanford)" block, as printed, offline, with
no key: the estimate with examples/prod_env_public_apis prints its cost table and sends nothing; the
folder copies to prod_env; the run with the copy's placeholder keys stops before any call, with one line
naming the placeholder and the file to edit, and stores no answer."""
import os
import subprocess

import duckdb

from tests.oracle import SHARED
from tests.readme import ROOT, code_blocks, commands, strip_comment

HEADING = "Run the public tier with your own keys"


def test_the_public_tier_with_your_own_keys_as_printed(tmp_path):
    [block] = code_blocks(HEADING, "bash")
    estimate, copy, run = [strip_comment(c) for c in commands(block)]
    assert estimate.endswith("--local-path examples/prod_env_public_apis --estimate-cost")
    assert copy == "cp -r examples/prod_env_public_apis prod_env"
    assert "--local-path" not in run and "--budget" in run
    work = tmp_path / "checkout"   # the commands' relative paths, as in a clone
    work.mkdir()
    for name in ("conf", "examples", ".venv"):
        (work / name).symlink_to(ROOT / name, target_is_directory=True)
    mirror = tmp_path / "mirror"   # the public data, with the two scenarios only oracle/extra has
    mirror.mkdir()
    for src in [*(SHARED / "data" / "public").iterdir(), *(SHARED / "oracle" / "extra" / "mirror").iterdir()]:
        (mirror / src.name).symlink_to(src, target_is_directory=src.is_dir())
    env = {**{k: v for k, v in os.environ.items()
              if not k.startswith(("MEDHELM_", "DAGSTER_", "HELM_")) and not k.endswith(("_API_KEY", "_BASE_URL"))},
           "MEDHELM_DATA_MIRROR": str(mirror), "DAGSTER_HOME": str(tmp_path / "dagster_home"),
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}

    def sh(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True, timeout=600)

    r = sh(estimate)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("Estimated cost before sending anything"), r.stdout[-3000:]
    assert "By deployment:" in r.stdout, r.stdout[-3000:]
    r = sh(copy)
    assert r.returncode == 0 and (work / "prod_env" / "credentials.conf").is_file(), r.stderr
    r = sh(run)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-3000:]
    assert "REPLACE_ME" in lines[0] and "prod_env/credentials.conf" in lines[0], lines[0]
    db = work / "benchmark_output" / "medhelm.duckdb"
    if db.exists():
        with duckdb.connect(str(db), read_only=True) as conn:
            tables = {t for (t,) in conn.execute("SELECT table_name FROM information_schema.tables").fetchall()}
            assert "completions" not in tables or conn.execute("SELECT count(*) FROM completions").fetchone()[0] == 0
