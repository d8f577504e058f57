"""The README's "Editions" section as printed: the example under both editions into one file (the
second asks nothing new), then its SQL names what differs."""
import os
import subprocess
from pathlib import Path

import duckdb

from tests.readme import code_blocks, commands

ROOT = Path(__file__).resolve().parents[2]


def test_the_example_under_both_editions_and_edition_diff(tmp_path):
    out = tmp_path / "benchmark_output"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("MEDHELM_", "DAGSTER_"))},
           "MEDHELM_OUTPUT_PATH": str(out), "DAGSTER_HOME": str(tmp_path / "dagster_home")}
    [block] = code_blocks("Editions", "bash")
    cmds = commands(block)
    assert cmds == ["bash scripts/example.sh", "bash scripts/example.sh --edition medhelm-0.8.0"]
    errs = []
    for cmd in cmds:
        r = subprocess.run(cmd.split(), cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
        errs.append(r.stderr)
    assert " 0 new calls" in errs[1] and " 0 new calls" not in errs[0]
    [sql] = code_blocks("Editions", "sql")
    with duckdb.connect(str(out / "medhelm.duckdb"), read_only=True) as conn:
        rows = conn.execute(sql).fetchall()
        editions = dict(conn.execute("SELECT suite, any_value(edition) FROM run_entries GROUP BY ALL").fetchall())
    assert editions == {"example": "helm-0.5.16", "example-medhelm-0.8.0": "medhelm-0.8.0"}
    stats = {stat for _, stat, _, _, _ in rows}
    # The demo deployments are OpenAIClient ones: medhelm 0.8.0 counts their output tokens.
    assert {"num_output_tokens", "perplexity"} <= stats
    assert all(a == 0 for _, s, a, _, _ in rows if s == "num_output_tokens")
    assert any(b > 0 for _, s, _, b, _ in rows if s == "num_output_tokens")
