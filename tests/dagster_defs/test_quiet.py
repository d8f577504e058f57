"""Quiet by default (issue 43, item 5): the README's `dg` commands print no venv warning, no telemetry
banner and no DEBUG lines, while Dagster's own event log keeps every step's events; the leaderboard
group runs one step per asset (its SQL models' data tests inside their steps); `scripts/setup.sh`
prints one line per step with its time."""
import os
import re
import shutil
import subprocess
from pathlib import Path

from tests.dagster_dev import fresh_checkout, stop_group
from tests.readme import code_blocks, commands, strip_comment

ROOT = Path(__file__).resolve().parents[2]
NOISE = {"dg's venv warning": "virtual environment does not match",
         "a DEBUG line": " - DEBUG - ",
         "the telemetry banner": "we collect usage statistics",
         "Dagster's no-dagster.yaml warning": "No dagster instance configuration file"}


def test_the_readme_dg_commands_print_no_warning_and_no_debug_lines(tmp_path):
    [block] = code_blocks("Dagster", "bash")
    cmds = [c for c in map(strip_comment, commands(block)) if not c.endswith("&")]  # all but `dg dev &`
    dg_cmds = [i for i, c in enumerate(cmds) if c.startswith(".venv/bin/dg ")]
    assert sum("dg launch" in cmds[i] for i in dg_cmds) >= 5
    work = fresh_checkout(tmp_path)
    script = ["set -uo pipefail"]
    for i, c in enumerate(cmds):
        out = f" >{tmp_path}/cmd{i}.log 2>&1" if i in dg_cmds else ""
        script.append(f"{c}{out} || {{ echo 'README Dagster command {i + 1} failed' >&2; exit 1; }}")
    script += [c.replace(" start ", " stop ", 1) for c in cmds if "medhelm-demo-server start" in c]
    # VIRTUAL_ENV unset, as for a user who runs .venv/bin/dg without activating the venv.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEDHELM_", "DAGSTER_", "VIRTUAL_ENV"))}
    log = tmp_path / "commands.log"  # a file, not a pipe: the demo server keeps its output open
    with open(log, "w") as sink:
        proc = subprocess.Popen(["bash", "-c", "\n".join(script)], cwd=work, env=env, start_new_session=True,
                                stdout=sink, stderr=subprocess.STDOUT, text=True)
    try:
        proc.wait(timeout=600)
    finally:
        stop_group(proc.pid)
    out = log.read_text()
    logs = {cmds[i]: (tmp_path / f"cmd{i}.log").read_text() if (tmp_path / f"cmd{i}.log").exists() else ""
            for i in dg_cmds}
    assert proc.returncode == 0, out[-3000:] + "".join(text[-2000:] for text in logs.values())
    for cmd, text in logs.items():
        for what, marker in NOISE.items():
            assert marker not in text, f"{cmd!r} printed {what}:\n{text[:2000]}"
        assert len(text.splitlines()) <= 5, f"{cmd!r} printed {len(text.splitlines())} lines:\n{text[:2000]}"

    # The details are in Dagster's own logs: every step's DEBUG-level events, and the leaderboard's
    # data-test checks, evaluated in the SQL models' own steps.
    import dagster as dg

    os.environ["DAGSTER_HOME"] = str(work / ".dagster_home")
    try:
        with dg.DagsterInstance.get() as instance:
            [leaderboard_run] = [r for r in instance.get_runs()
                                 if "summarize_target" in {k.to_user_string() for k in r.asset_selection or ()}]
            events = [e.dagster_event.event_type_value for e in instance.all_logs(leaderboard_run.run_id)
                      if e.dagster_event]
            checks = [e.dagster_event.event_specific_data for e in instance.all_logs(
                leaderboard_run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)]
    finally:
        os.environ.pop("DAGSTER_HOME", None)
    assert events.count("STEP_SUCCESS") == events.count("STEP_START") == events.count("ASSET_MATERIALIZATION")
    assert leaderboard_run.status == dg.DagsterRunStatus.SUCCESS
    assert checks and {c.check_name for c in checks} == {"data_tests"} and all(c.passed for c in checks)


def test_the_leaderboard_group_runs_one_step_per_asset():
    from medhelm_dagster.definitions import defs
    from medhelm_dagster.leaderboard import SUMMARY_ASSETS

    job = defs.resolve_implicit_global_asset_job_def().get_subset(
        asset_selection={k for a in SUMMARY_ASSETS for k in a.keys},
        asset_check_selection={k for a in SUMMARY_ASSETS for k in a.check_keys})
    assert len(job.graph.node_defs) == len(SUMMARY_ASSETS)  # no op of its own for a check
    with_checks = [a for a in SUMMARY_ASSETS if a.check_keys]
    assert len(with_checks) > 20 and all({k.name for k in a.check_keys} == {"data_tests"} for a in with_checks)


def _stub_checkout(tmp_path: Path, fail_on: str = "") -> Path:
    """scripts/setup.sh beside a .venv whose python only records its arguments (no install)."""
    work = tmp_path / "co"
    (work / "scripts").mkdir(parents=True)
    (work / "deploy" / "local").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup.sh", work / "scripts")
    shutil.copy(ROOT / "deploy" / "local" / "dagster.yaml", work / "deploy" / "local")
    for venv in (".venv", ".venv-ducklake"):
        python = work / venv / "bin" / "python"
        python.parent.mkdir(parents=True)
        python.write_text("#!/bin/bash\n"
                          f'echo "$@" >> {work}/calls\n'
                          f'if [ -n "{fail_on}" ] && [[ "$*" == *"{fail_on}"* ]]; then echo "pip: boom" >&2; exit 1; fi\n')
        python.chmod(0o755)
    return work


def test_setup_prints_one_line_per_step_with_its_time(tmp_path):
    work = _stub_checkout(tmp_path)
    r = subprocess.run(["bash", "scripts/setup.sh", "--with-ducklake"], cwd=work, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    steps = [line for line in lines if line.startswith("setup.sh: ")]
    assert len(steps) >= 7
    assert all(re.search(r" … .+ \(\d+\.\d s\)$", line) for line in steps), lines
    assert re.search(r"^medhelm: set up in .*\.venv \(\d+\.\d s in all\)$", lines[-1])
    calls = (work / "calls").read_text()
    assert "install --quiet -e .[dev,docs,gated,dspy,local,summarization,postgres,vendors]" in calls
    assert "install --quiet -e .[dev,ducklake,postgres]" in calls  # --with-ducklake kept
    assert (work / ".dagster_home" / "dagster.yaml").read_text() == (ROOT / "deploy/local/dagster.yaml").read_text()
    # A user's dagster.yaml is kept; a second run says so.
    (work / ".dagster_home" / "dagster.yaml").write_text("telemetry:\n  enabled: true\n")
    r = subprocess.run(["bash", "scripts/setup.sh"], cwd=work, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "dagster.yaml) … already there, kept" in r.stderr
    assert (work / ".dagster_home" / "dagster.yaml").read_text() == "telemetry:\n  enabled: true\n"


def test_setup_names_the_step_that_failed(tmp_path):
    work = _stub_checkout(tmp_path, fail_on="-e .[dev,docs,gated")
    r = subprocess.run(["bash", "scripts/setup.sh"], cwd=work, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert re.search(r"setup\.sh: the project and its extras .* … pip: boom\nfailed \(\d+\.\d s\)", r.stderr), r.stderr
    r = subprocess.run(["bash", "scripts/setup.sh", "--with-nothing"], cwd=work, capture_output=True, text=True)
    assert r.returncode == 2 and "unknown option --with-nothing" in r.stderr
