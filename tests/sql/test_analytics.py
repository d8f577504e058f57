"""The analytics SQL models on real upstream output: the public-n50 golden suite imported as a
published suite (its leaderboard rebuilt by our SQL), checked against values computed here in
Python from HELM's own group tables, and their CSV/LaTeX export by medhelm-summarize."""
import csv
import json
import statistics
from pathlib import Path

import duckdb
import pytest

from medhelm_core.published.cli import main as import_main
from tests.oracle import SHARED

PUBLIC = SHARED / "oracle" / "public" / "benchmark_output"


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = tmp_path_factory.mktemp("analytics")
    assert import_main(["--source", str(PUBLIC), "--suite", "public-n50", "-o", str(out), "-q"]) == 0
    return out


def _helm_headline() -> tuple[list[str], list[list], list[float], list[bool]]:
    """HELM's headline table (the first table of medhelm_scenarios): model names, benchmark values,
    mean win rates, and which columns are jury scores (by HELM's header text)."""
    table = json.loads((PUBLIC / "runs" / "public-n50" / "groups" / "medhelm_scenarios.json").read_text())[0]
    assert table["title"] == "Accuracy"
    names = [row[0]["value"] for row in table["rows"]]
    win_rates = [row[1]["value"] for row in table["rows"]]
    values = [[cell.get("value") for cell in row[2:]] for row in table["rows"]]
    likert = ["Jury Score" in h["value"] for h in table["header"][2:]]
    return names, values, win_rates, likert


def test_model_summary_equals_its_definition_on_helms_own_table(imported):
    conn = duckdb.connect(str(imported / "medhelm.duckdb"), read_only=True)
    got = {r[0]: r[1:] for r in conn.execute(
        "SELECT model, win_rate, win_sd, macro_avg, sd, n_values, n_likert, n_complete_columns "
        "FROM leaderboard.model_summary WHERE target = 'public-n50'").fetchall()}
    conn.close()
    names, values, win_rates, likert = _helm_headline()
    assert set(got) == set(names) and len(names) >= 2
    complete = [j for j in range(len(values[0])) if all(row[j] is not None for row in values)]
    for i, name in enumerate(names):
        win_rate, win_sd, macro_avg, sd, n_values, n_likert, n_complete = got[name]
        assert win_rate == win_rates[i]  # the leaderboard's own mean win rate, bit for bit
        fractions = [sum(values[i][j] > values[k][j] for j in complete) / len(complete)
                     for k in range(len(names)) if k != i]
        assert win_sd == pytest.approx(statistics.pstdev(fractions), abs=1e-12)
        scaled = [(v - 1) / 4 if likert[j] else v for j, v in enumerate(values[i]) if v is not None]
        assert n_values == len(scaled) and n_complete == len(complete)
        assert macro_avg == pytest.approx(statistics.mean(scaled), abs=1e-12)
        assert sd == pytest.approx(statistics.stdev(scaled), abs=1e-12)
    assert any(likert) and n_likert == sum(1 for j, v in enumerate(values[0]) if v is not None and likert[j])


def test_summarize_exports_the_analytics_as_csv_and_latex(imported, tmp_path):
    from medhelm_core.published.leaderboard import rebuild_target

    conn = duckdb.connect(str(imported / "medhelm.duckdb"))
    try:
        rebuild_target(conn, "public-n50", output_dir=str(tmp_path))
    finally:
        conn.close()
    folder = next(tmp_path.rglob("analytics"))
    with open(folder / "model_summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["model"] for r in rows} == set(_helm_headline()[0])
    assert {"win_rate", "win_sd", "macro_avg", "sd"} <= set(rows[0])
    tex = (folder / "model_summary.tex").read_text()
    assert tex.count("\\\\") == len(rows) + 1 and "Win SD" in tex
