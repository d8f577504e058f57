"""Every command of the README's Dagster section, as printed, in order, in a fresh copy of the
checkout: each exits 0, the UI answers on port 3000, the run's layers and the leaderboard land in
DuckDB; and an error of ours inside an asset fails the step with our one-line message."""
import os
import socket
import subprocess

import duckdb

from tests.dagster_dev import fresh_checkout, stop_group, ui_answers
from tests.readme import code_blocks, commands, strip_comment

def test_every_dagster_command_in_the_readme_works_as_printed(tmp_path):
    [block] = code_blocks("Dagster", "bash")
    cmds = commands(block)
    assert any(c.startswith(".venv/bin/dg dev") for c in cmds) and sum("dg launch" in c for c in cmds) >= 3
    for port in (3000, 8765):  # the ports the README's commands use must be free
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0, f"port {port} is in use: stop what holds it"
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
        assert ui_answers(3000, 120), "dg dev: the UI did not answer on http://localhost:3000"
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
