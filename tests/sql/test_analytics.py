"""The analytics SQL models on real upstream output: the public-n50 golden suite imported as a
published suite (its leaderboard rebuilt by our SQL), checked against values computed here in
Python from HELM's own group tables, and their CSV/LaTeX export by medhelm-summarize."""
import csv
import json
import statistics
from pathlib import Path

import duckdb
import pytest

from medhelm_cli.imports import main as import_main
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


def _percentile(values: list[float], q: float) -> float:
    """numpy's default percentile (linear between order statistics), q in [0, 1]."""
    v = sorted(values)
    h = (len(v) - 1) * q
    lo = int(h)
    return v[lo] + (h - lo) * (v[min(lo + 1, len(v) - 1)] - v[lo])


def test_bootstrap_models_equal_a_recomputation_from_the_per_instance_stats(imported):
    """Draws as documented (hash(seed, benchmark, b, k) mod n over the benchmark's instances in id
    order, DuckDB's hash), everything else here in Python from HELM's per_instance_stats.json."""
    conn = duckdb.connect(str(imported / "medhelm.duckdb"), read_only=True)
    where = "WHERE target = 'public-n50'"
    cells = conn.execute(f"SELECT benchmark, model, value, ci_low, ci_high, n_instances FROM leaderboard.cell_intervals "
                         f"{where} AND table_id = (SELECT min(table_id) FROM leaderboard.headline_cells {where})").fetchall()
    headline = conn.execute(f"SELECT DISTINCT benchmark, metric FROM leaderboard.headline_cells {where}").fetchall()
    sig = {(r[0], r[1], r[2]): r[3:] for r in conn.execute(
        f"SELECT benchmark, model, other_model, diff, p_value, n_paired, sd_diff, mdd "
        f"FROM leaderboard.pairwise_significance {where}").fetchall()}
    pairs = dict(((r[0], r[1]), r[2]) for r in conn.execute(
        f"SELECT model, other_model, p_higher FROM leaderboard.win_rate_pairs {where}").fetchall())
    B = 1000

    def draws(benchmark: str, n: int) -> list[list[int]]:
        rows = conn.execute("SELECT b, list(CAST(hash(0, ?, b, k) % ? AS BIGINT) ORDER BY k) FROM "
                            "(SELECT unnest(range(1, ?)) AS b), (SELECT unnest(range(?)) AS k) GROUP BY b ORDER BY b",
                            [benchmark, n, B + 1, n]).fetchall()
        return [r[1] for r in rows]

    metric = dict(headline)
    per_instance: dict[tuple[str, str], dict[str, float]] = {}   # (benchmark, model) -> instance -> value
    for run_dir in (PUBLIC / "runs" / "public-n50").iterdir():
        if not (run_dir / "per_instance_stats.json").is_file():
            continue
        spec = json.loads((run_dir / "run_spec.json").read_text())
        model = spec["adapter_spec"]["model"]
        for benchmark in spec["groups"]:
            if benchmark not in metric:
                continue
            for entry in json.loads((run_dir / "per_instance_stats.json").read_text()):
                for s in entry["stats"]:
                    if s["name"]["name"] == metric[benchmark] and s["name"].get("split") == "test" \
                            and "perturbation" not in s["name"]:
                        per_instance.setdefault((benchmark, model), {})[entry["instance_id"]] = s["sum"] / s["count"]
    resampled: dict[tuple[str, str], list[float]] = {}
    for benchmark in metric:
        models = [m for (b, m) in per_instance if b == benchmark]
        ids = sorted({i for m in models for i in per_instance[(benchmark, m)]})
        if not ids:
            continue
        for picks in draws(benchmark, len(ids)):
            for m in models:
                values = [per_instance[(benchmark, m)][ids[i]] for i in picks if ids[i] in per_instance[(benchmark, m)]]
                resampled.setdefault((benchmark, m), []).append(round(sum(values) / len(values), 12))
    assert len(cells) >= 20
    for benchmark, model, value, low, high, n in cells:
        mine = per_instance[(benchmark, model)]
        assert n == len(mine) and value == pytest.approx(sum(mine.values()) / len(mine), abs=1e-12)
        assert low == pytest.approx(_percentile(resampled[(benchmark, model)], 0.025), abs=1e-9)
        assert high == pytest.approx(_percentile(resampled[(benchmark, model)], 0.975), abs=1e-9)
        assert low <= value + 1e-12 or low == high
    z = statistics.NormalDist().inv_cdf(0.975) + statistics.NormalDist().inv_cdf(0.8)
    for (benchmark, a, b), (diff, p_value, n_paired, sd_diff, mdd) in sig.items():
        ra, rb = resampled[(benchmark, a)], resampled[(benchmark, b)]
        d = [x - y for x, y in zip(ra, rb)]
        expected = min(1.0, 2 * min(sum(x <= 0 for x in d) / B, sum(x >= 0 for x in d) / B))
        assert p_value == pytest.approx(expected, abs=1e-12)
        common = sorted(set(per_instance[(benchmark, a)]) & set(per_instance[(benchmark, b)]))
        diffs = [per_instance[(benchmark, a)][i] - per_instance[(benchmark, b)][i] for i in common]
        assert n_paired == len(common) and sd_diff == pytest.approx(statistics.stdev(diffs), abs=1e-9)
        assert mdd == pytest.approx(z * sd_diff / len(common) ** 0.5, rel=1e-3)  # A&S 26.2.23's z
    assert any(p < 1.0 for _, p, *_ in sig.values())
    (a, b), p = next(iter(pairs.items()))
    assert pairs[(b, a)] == pytest.approx(1 - p, abs=1e-12)  # ties count half on both sides
    conn.close()


@pytest.fixture(scope="module")
def with_completions(tmp_path_factory):
    out = tmp_path_factory.mktemp("analytics-completions")
    assert import_main(["--source", str(PUBLIC), "--suite", "public-n50", "-o", str(out), "-q",
                        "--with-completions"]) == 0
    return out


def _refusals(out: Path, run_like: str) -> tuple:
    conn = duckdb.connect(str(out / "medhelm.duckdb"), read_only=True)
    try:
        return conn.execute("SELECT n_instances, n_refused, main_value, main_value_without_refusals, difference "
                            "FROM leaderboard.refusals WHERE run_name LIKE ?", [run_like]).fetchone()
    finally:
        conn.close()


def test_refusals_of_imported_completions_and_a_user_pattern(with_completions, monkeypatch, tmp_path):
    from medhelm_core.published.leaderboard import rebuild_target

    run = "head_qa%mock-gpt-b%"
    n, refused, value, without, diff = _refusals(with_completions, run)
    assert (n, refused) == (50, 0) and without == value and diff == 0.0
    conn = duckdb.connect(str(with_completions / "medhelm.duckdb"))
    # two of the run's answers turned into refusals: one saying sorry, one in the user's own wording
    wrong, right = conn.execute(
        "SELECT (list(position ORDER BY position) FILTER (WHERE NOT e))[1], (list(position ORDER BY position) FILTER (WHERE e))[1] "
        "FROM (SELECT c.position, s.sum = 1 AS e FROM published_completions c JOIN published_instance_stats s "
        "ON s.suite = c.suite AND s.run_name = c.run_name AND s.instance_id = c.instance_id AND s.name = 'exact_match' "
        "AND s.split = 'test' WHERE c.run_name LIKE ?)", [run]).fetchone()
    for position, text in ((wrong, "I'm SORRY, I can't answer that."), (right, "Declined: not medical advice.")):
        conn.execute("UPDATE published_request_states SET result = json_merge_patch(result, ?) "
                     "WHERE run_name LIKE ? AND position = ?",
                     [json.dumps({"completions": [{"text": text}]}), run, position])
    patterns = tmp_path / "patterns.yaml"
    patterns.write_text('patterns:\n  - "^declined:"\n')
    monkeypatch.setenv("MEDHELM_REFUSAL_PATTERNS", str(patterns))
    try:
        rebuild_target(conn, "public-n50")
    finally:
        conn.close()
    n, refused, value2, without, diff = _refusals(with_completions, run)
    assert (n, refused, value2) == (50, 2, value)
    # one right and one wrong answer left out of 50: (50 * value - 1) / 48
    assert without == pytest.approx((50 * value - 1) / 48, abs=1e-12) and diff == pytest.approx(without - value)


def test_a_bad_refusal_pattern_is_one_line_naming_its_file(tmp_path, monkeypatch):
    from medhelm_core.errors import MedhelmError
    from medhelm_core.resources import ddl
    from medhelm_core.summarize.refusals import write_refusal_patterns

    bad = tmp_path / "bad.yaml"
    bad.write_text('patterns:\n  - "(unclosed"\n')
    monkeypatch.setenv("MEDHELM_REFUSAL_PATTERNS", str(bad))
    conn = duckdb.connect()
    conn.execute(ddl("summarize_inputs"))
    with pytest.raises(MedhelmError) as e:
        write_refusal_patterns(conn)
    assert str(bad) in str(e.value) and "(unclosed" in str(e.value) and "\n" not in str(e.value)
    bad.write_text("patterns: sorry\n")
    with pytest.raises(MedhelmError, match="expected `patterns:` followed by a list"):
        write_refusal_patterns(conn)


def _published_judges_and_rouge() -> tuple[dict, dict]:
    """judge -> {(item, dimension): score} and item -> rouge_l, from HELM's own files of public-n50
    (scenario_state.json's annotations, per_instance_stats.json); an item is (benchmark, model_key, instance)."""
    judges: dict = {}
    rouge: dict = {}
    for run_dir in sorted((PUBLIC / "runs" / "public-n50").iterdir()):
        if not (run_dir / "scenario_state.json").is_file():
            continue
        model_key = json.loads((run_dir / "run_spec.json").read_text())["adapter_spec"]["model"].replace("/", "_")
        benchmarks = set()
        for state in json.loads((run_dir / "scenario_state.json").read_text())["request_states"]:
            for benchmark, annotation in (state.get("annotations") or {}).items():
                benchmarks.add(benchmark)
                for judge, verdict in annotation.items():
                    if judge in ("gpt", "llama", "claude") and isinstance(verdict, dict):
                        for criterion, v in verdict.items():
                            judges.setdefault(judge, {})[((benchmark, model_key, state["instance"]["id"]), criterion)] = \
                                float(v["score"])
        for entry in json.loads((run_dir / "per_instance_stats.json").read_text()):
            for stat in entry["stats"]:
                if stat["name"]["name"] == "rouge_l" and "perturbation" not in stat["name"]:
                    for benchmark in benchmarks:
                        rouge[(benchmark, model_key, entry["instance_id"])] = stat["mean"]
    return judges, rouge


def test_judge_agreement_of_an_imported_suite_with_ratings_loaded_alone(with_completions, tmp_path, capsys):
    """Clinicians' ratings (synthetic, in the authors' format) of two of public-n50's jury benchmarks,
    loaded with `medhelm-import --human-ratings CSV -o DIR` alone: the imported suite they rate is
    rebuilt (default bootstrap: B = 1,000, seed 0), its judge_agreement equals the reference (pingouin,
    SciPy, scikit-learn on HELM's own files), and the same ratings again rebuild nothing."""
    import shutil

    from tests.agreement_reference import (check_agreement, ratings_by_item, reference_pairs, synthetic_ratings,
                                           write_ratings_csv)

    out = tmp_path / "store"
    out.mkdir()
    shutil.copy(with_completions / "medhelm.duckdb", out / "medhelm.duckdb")
    judges, rouge = _published_judges_and_rouge()
    jury: dict = {}
    for scores in judges.values():
        for (item, d), v in scores.items():
            if item[0] in ("medication_qa", "aci_bench"):
                jury.setdefault(item, {}).setdefault(d, []).append(v)
    items = {item: {d: statistics.mean(v) for d, v in dims.items()} for item, dims in jury.items()}
    assert len(items) == 2 * 2 * 50
    rows = synthetic_ratings(items, seed=5)
    ratings = write_ratings_csv(tmp_path / "ratings.csv", rows)
    load = ["--human-ratings", str(ratings), "-o", str(out), "-q"]
    capsys.readouterr()
    assert import_main(load) == 0
    said = capsys.readouterr()
    assert f"{len(rows)} ratings of 200 items" in said.out and "public-n50: " in said.out and "rebuilt in" in said.out
    assert "match no judged instance" not in said.err
    query = "SELECT * FROM leaderboard.judge_agreement WHERE target = 'public-n50' ORDER BY ALL"
    with duckdb.connect(str(out / "medhelm.duckdb"), read_only=True) as conn:
        pairs = reference_pairs(judges, {"rouge_l": rouge}, ratings_by_item(rows))
        assert {r for r, _ in pairs} == {"gpt", "llama", "claude", "jury", "clinicians", "rouge_l"}
        assert check_agreement(conn, "public-n50", pairs) >= 6 * 3 * 3
        first = conn.execute(query).fetchall()
        for rater, dimension, statistic, value, low, high, n in conn.execute(
                "SELECT rater, dimension, statistic, value, ci_low, ci_high, n_items FROM leaderboard.judge_agreement "
                "WHERE target = 'public-n50' AND rater = 'jury'").fetchall():
            assert low <= value <= high and 190 <= n <= 200, (dimension, statistic)   # (a few ratings left empty)
    # the same ratings again: nothing the rebuild reads changed; forced, the same table bit for bit
    assert import_main(load) == 0
    assert "not rebuilt: its inputs are those of the last rebuild" in capsys.readouterr().out
    assert import_main(load + ["--rebuild"]) == 0
    with duckdb.connect(str(out / "medhelm.duckdb"), read_only=True) as conn:
        assert conn.execute(query).fetchall() == first
    # one rating changed: rebuilt, and the agreement follows
    rows[0]["accuracy"] = "1" if rows[0]["accuracy"] != "1" else "5"
    write_ratings_csv(ratings, rows)
    capsys.readouterr()
    assert import_main(load) == 0
    assert "rebuilt in" in capsys.readouterr().out
    with duckdb.connect(str(out / "medhelm.duckdb"), read_only=True) as conn:
        check_agreement(conn, "public-n50", reference_pairs(judges, {"rouge_l": rouge}, ratings_by_item(rows)))
        assert conn.execute(query).fetchall() != first


def test_the_pipelines_annotation_entries_leave_the_judge_prompt_out(tmp_path):
    """judge_scores' input over our own runs' annotations: one row per annotator and entry, the judge
    prompt left out, HELM's None as NULL, an annotation that is not an object without rows."""
    from medhelm_core.store import Store

    with Store(tmp_path / "medhelm.duckdb").connect() as conn:
        conn.execute("INSERT INTO annotations (suite, run_name, position, instance_id, annotator, annotation) VALUES "
                     "('s', 'r', 0, 'i1', 'medication_qa', ?), ('s', 'r', 1, 'i2', 'other', '[1, 2]')",
                     [json.dumps({"prompt_text": "You are a judge ...", "gpt": {"accuracy": {"score": 4}},
                                  "llama": None})])
        rows = conn.execute("SELECT suite, run_name, instance_id, annotator, entry, value "
                            "FROM instance_annotation_entries ORDER BY entry").fetchall()
    assert [(*r[:5], json.loads(r[5]) if r[5] is not None else None) for r in rows] == [
        ("s", "r", "i1", "medication_qa", "gpt", {"accuracy": {"score": 4}}),
        ("s", "r", "i1", "medication_qa", "llama", None)]
