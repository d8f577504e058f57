"""The README's example SQL returns rows after the main job's offline form and after example.sh,
both into one DuckDB file: every target's leaderboard is kept, keyed by target."""
import os
import subprocess
from pathlib import Path

import duckdb

from tests.oracle import SHARED
from tests.readme import code_blocks, commands, section

ROOT = Path(__file__).resolve().parents[2]


def _offline_main_job() -> list[str]:
    """The README's offline form of the main job (the line reading the synthetic oracle)."""
    [block] = [b for b in code_blocks("medhelm — the MedHELM leaderboard as a declarative data build", "bash")
               if "--source ../shared/oracle/synthetic" in b]
    [cmd] = [c for c in commands(block) if "--source ../shared/oracle/synthetic" in c]
    return cmd.split()


def test_readme_sql_returns_rows_for_the_main_job_and_the_example(tmp_path):
    out = tmp_path / "benchmark_output"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("MEDHELM_", "DAGSTER_"))},
           "MEDHELM_OUTPUT_PATH": str(out), "DAGSTER_HOME": str(tmp_path / "dagster_home")}
    main_job = _offline_main_job()
    assert main_job[:2] == ["bash", "scripts/reproduce.sh"]
    if SHARED != ROOT.parent / "shared":  # the README's relative path, wherever ../shared is here
        main_job = [a.replace("../shared", str(SHARED)) for a in main_job]
    r = subprocess.run(main_job, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    r = subprocess.run(["bash", "scripts/example.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]

    [sql] = code_blocks("Leaderboard SQL", "sql")
    with duckdb.connect(str(out / "medhelm.duckdb"), read_only=True) as conn:
        rows = conn.execute(sql).fetchall()
    by_target: dict[str, list] = {}
    for target, _table, name, win_rate in rows:
        assert 0.0 <= win_rate <= 1.0
        by_target.setdefault(target, []).append(name)
    assert set(by_target) == {"oracle", "example"}, rows
    assert set(by_target["example"]) == {"Demo model A", "Demo model B"}
    assert ("oracle", "medhelm_scenarios/accuracy") in {(t, table) for t, table, _, _ in rows}
    assert section("Leaderboard SQL").count("```sql") == 1
    # The same query through the README's command line for the file (read-only; DuckDB's box table).
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-m", "medhelm_core.query",
                        str(out / "medhelm.duckdb"), sql], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Demo model A" in r.stdout and "mean_win_rate" in r.stdout
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-m", "medhelm_core.query",
                        str(out / "medhelm.duckdb"), "SELECT * FROM no_such_table"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and "no_such_table" in r.stderr
