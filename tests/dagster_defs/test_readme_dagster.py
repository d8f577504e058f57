"""Every command of the README's Dagster section, as printed, in order, in a fresh copy of the
checkout, with the ports 3000 and 8765 (and the README's other old ones) held by another process:
each exits 0, the demo server and the UI take free ports and print their URLs, the UI answers on the
one it printed, the run's layers and the leaderboard land in DuckDB; and an error of ours inside an
asset fails the step with our one-line message."""
import os
import subprocess

import duckdb
import pytest

from tests.dagster_dev import fresh_checkout, stop_group, ui_answers
from tests.ports import readme_ports_taken  # noqa: F401  (a fixture)
from tests.readme import code_blocks, commands, printed_url, strip_comment

pytestmark = pytest.mark.usefixtures("readme_ports_taken")
UI_URL = r"Serving dagster-webserver on (http://127\.0\.0\.1:\d+)"


def test_every_dagster_command_in_the_readme_works_as_printed(tmp_path):
    [block] = code_blocks("Dagster", "bash")
    cmds = commands(block)
    assert any(c.startswith(".venv/bin/dg dev") for c in cmds) and sum("dg launch" in c for c in cmds) >= 3
    assert not any(p in strip_comment(c) for c in cmds for p in ("8765", "3000", "/tmp/"))   # no fixed port or shared folder
    work = fresh_checkout(tmp_path)
    # Each command as printed; a failing one stops the script and names itself.
    script = ["set -uo pipefail"]
    for i, c in enumerate(map(strip_comment, cmds)):
        script.append(f"{c}\n" if c.endswith("&") else
                      f"{c} || {{ echo 'README Dagster command {i + 1} failed' >&2; exit 1; }}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEDHELM_", "DAGSTER_"))}
    log = tmp_path / "commands.log"  # a file, not a pipe: the background commands keep theirs open
    with open(log, "w") as sink:
        proc = subprocess.Popen(["bash", "-c", "\n".join(script)], cwd=work, env=env, start_new_session=True,
                                stdout=sink, stderr=subprocess.STDOUT, text=True)
    try:
        proc.wait(timeout=900)
        out = log.read_text()
        assert proc.returncode == 0, out[-4000:]
        ui = printed_url(log, UI_URL, 180)
        assert ui and not ui.endswith(":3000"), log.read_text()[-4000:]
        assert ui_answers(int(ui.rsplit(":", 1)[1]), 120), f"dg dev: the UI did not answer on {ui}"
        demo = subprocess.run([".venv/bin/medhelm-demo-server", "status", "benchmark_output/demo_prod_env"], cwd=work,
                              capture_output=True, text=True, timeout=60).stdout.strip()
        assert demo.startswith("http://127.0.0.1:") and ":8765/" not in demo
    finally:
        stop_group(proc.pid)  # dg dev (webserver, daemon, code server) and the demo server
    assert "Use 'dg" not in out  # no deprecated command
    db = work / "benchmark_output" / "medhelm.duckdb"
    with duckdb.connect(str(db), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM completions").fetchone()[0] > 0
        assert conn.execute("SELECT count(*) FROM leaderboard.row_aggregates WHERE target = 'example'"
                            ).fetchone()[0] > 0
    assert (work / "benchmark_output" / "runs" / "example" / "groups").is_dir()


def test_an_error_of_ours_inside_an_asset_is_the_failures_one_line_headline(tmp_path):
    work = fresh_checkout(tmp_path)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("MEDHELM_", "DAGSTER_"))},
           "DAGSTER_HOME": str(work / ".dagster_home")}
    (work / ".dagster_home").mkdir()
    # No MEDHELM_LOCAL_PATH: the example's deployments are unknown.
    r = subprocess.run([".venv/bin/dg", "launch", "--assets", "run_entries", "--config-json",
                        '{"ops": {"run_entries": {"config": {"conf_paths": ["conf/example.conf"], "suite": "x"}}}}'],
                       cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    text = r.stdout + r.stderr
    headline = next(line for line in text.splitlines() if "Failure: medhelm:" in line)
    assert "conf/example.conf:4: unknown model deployment 'demo/model-a'" in headline
    assert "Traceback" not in text.split(headline)[0]
    assert not (work / "benchmark_output").exists()  # bad input: nothing written
