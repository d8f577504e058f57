"""Agreement with clinicians (issue 44, item 3): `medhelm-import --human-ratings CSV` and analytics'
judge_agreement on a suite of our own: `medhelm-run` on two MedHELM jury benchmarks (medication_qa,
medi_qa) x two mock models, judged by the three default judges served by the mock, then a synthetic
ratings CSV in the MedHELM authors' exact format over its items (and a few items it never judged),
loaded alone, and `medhelm-summarize`. Every statistic is checked to 1e-9 against the reference in
tests/agreement_reference.py (pingouin, SciPy, scikit-learn), from the judges' verdicts as the pipeline
stored them and HELM's per_instance_stats.json; the bootstrap intervals against the same resamples
recomputed there. The imported-release path is in test_analytics.py."""
from __future__ import annotations

import contextlib
import io
import json
import random
import re
import shutil

import duckdb
import pytest

from medhelm_cli.run import run_main
from medhelm_cli.summarize import summarize_main
from medhelm_cli.imports import main as import_main
from tests.agreement_reference import (DIMENSIONS, METRICS, ratings_by_item, reference_interval, reference_pairs,
                                       check_agreement, synthetic_ratings, write_ratings_csv)
from tests.oracle import PUBLIC, SHARED
from tests.parity import in_public_workdir, lay_out_inputs, write_mock_conf
from tests.readme import code_blocks

pytestmark = pytest.mark.skipif(not (PUBLIC / "inputs").is_dir(), reason="golden files not available")

SUITE = "agreement"
SEED, SAMPLES = 7, 200   # analytics_settings of the suite's store (the default B = 1,000 is the imported test's)
UNMATCHED = [("medication_qa", "mockai_mock-gpt-a", "id999999"), ("aci_bench", "openai_gpt-4o-2024-05-13", "id12")]


def summarize(root) -> None:
    mp = pytest.MonkeyPatch()
    mp.chdir(root)
    mp.setenv("DAGSTER_HOME", str(root / "dagster_home"))
    try:
        assert summarize_main(["--suite", SUITE, "--output-path", "benchmark_output",
                               "--schema-path", str(SHARED / "helm" / "schema_medhelm.yaml")]) == 0
    finally:
        mp.undo()


def run_import(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = import_main(argv)
    return rc, out.getvalue(), err.getvalue()


def judges_of(conn) -> dict[str, dict[tuple, float]]:
    """judge -> {(item, dimension): score} from the verdicts the pipeline stored (status ok)."""
    models = {r: json.loads(s)["adapter_spec"]["model"].replace("/", "_")
              for r, s in conn.execute("SELECT run_name, run_spec FROM runs WHERE suite = ?", [SUITE]).fetchall()}
    out: dict = {}
    for run, instance, annotator, judge, parsed in conn.execute(
            "SELECT run_name, instance_id, annotator, judge, parsed FROM judge_verdicts "
            "WHERE suite = ? AND status = 'ok'", [SUITE]).fetchall():
        for criterion, verdict in json.loads(parsed).items():
            if criterion in DIMENSIONS:
                out.setdefault(judge, {})[((annotator, models[run], instance), criterion)] = float(verdict["score"])
    return out


def rouge_of(root) -> dict[tuple, float]:
    """item -> rouge_l from HELM's per_instance_stats.json of each run."""
    out = {}
    for run_dir in sorted((root / "benchmark_output" / "runs" / SUITE).iterdir()):
        if not (run_dir / "per_instance_stats.json").is_file():
            continue
        spec = json.loads((run_dir / "run_spec.json").read_text())
        benchmark = spec["name"].split(":")[0]
        model_key = spec["adapter_spec"]["model"].replace("/", "_")
        for entry in json.loads((run_dir / "per_instance_stats.json").read_text()):
            for stat in entry["stats"]:
                if stat["name"]["name"] == "rouge_l" and "perturbation" not in stat["name"]:
                    out[(benchmark, model_key, entry["instance_id"])] = stat["mean"]
    return out


@pytest.fixture(scope="module")
def suite(tmp_path_factory, mock_server):
    """Our suite, its ratings loaded alone, synthetic BERTScore-F stats on medication_qa (CPU runs have
    none), analytics_settings B = 200 and seed 7, summarized; returns what the checks need."""
    root = tmp_path_factory.mktemp("agreement")
    work = lay_out_inputs(PUBLIC / "inputs", root, mock_server.base_url)
    write_mock_conf(work / "conf" / "agreement.conf", ("medication_qa", "medi_qa"), ("a", "b"))
    with in_public_workdir(root):
        assert run_main(["--conf-paths", "work/conf/agreement.conf", "--suite", SUITE, "--max-eval-instances", "15",
                         "--num-threads", "4", "--output-path", "benchmark_output", "--local-path", "work/prod_env"]) == 0
    out = root / "benchmark_output"
    with duckdb.connect(str(out / "medhelm.duckdb")) as conn:
        judges = judges_of(conn)
        conn.execute("INSERT INTO analytics_settings (bootstrap_samples, seed) VALUES (?, ?)", [SAMPLES, SEED])
        rng = random.Random(3)
        bertscore = {}
        for run, instance in conn.execute("SELECT DISTINCT run_name, instance_id FROM instance_stats WHERE suite = ? "
                                          "AND run_name LIKE 'medication_qa:%' ORDER BY ALL", [SUITE]).fetchall():
            value = round(rng.uniform(0.6, 0.95), 6)
            conn.execute("INSERT INTO instance_stats (suite, run_name, instance_id, train_trial_index, name, split, "
                         "count, sum, mean) VALUES (?, ?, ?, 0, 'BERTScore-F', 'test', 1, ?, ?)",
                         [SUITE, run, instance, value, value])
            model_key = "mockai_mock-gpt-" + run.split("mock-gpt-")[1][0]
            bertscore[("medication_qa", model_key, instance)] = value
    jury = {}
    for scores in judges.values():
        for (item, d), s in scores.items():
            jury.setdefault(item, {}).setdefault(d, []).append(s)
    items = {item: {d: sum(v) / len(v) for d, v in dims.items()} for item, dims in jury.items()}
    rows = synthetic_ratings(items, seed=11, unmatched=UNMATCHED)
    csv_path = write_ratings_csv(root / "medhelm_human_annotation.csv", rows)
    loaded = run_import(["--human-ratings", str(csv_path), "-o", str(out)])
    summarize(root)
    return {"root": root, "db": out / "medhelm.duckdb", "rows": rows, "judges": judges, "loaded": loaded,
            "metrics": {"rouge_l": rouge_of(root), "BERTScore-F": bertscore}, "csv": csv_path}


def test_ratings_load_alone_and_name_the_items_no_instance_judged(suite):
    rc, out, err = suite["loaded"]
    rows = suite["rows"]
    assert rc == 0, err
    unmatched = [r for r in rows if (r["dataset_name"], r["model_key"], r["instance_id"]) in UNMATCHED]
    assert unmatched and len(rows) > 100
    lines = [line for line in err.splitlines() if "match no judged instance" in line]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"medhelm-import: {len(unmatched)} of {len(rows)} ratings match no judged instance")
    first = min(UNMATCHED, key=lambda k: min(i for i, r in enumerate(rows)
                                             if (r["dataset_name"], r["model_key"], r["instance_id"]) == k))
    assert lines[0].index("/".join(first)) < lines[0].index("/".join(next(k for k in UNMATCHED if k != first)))
    assert f"{len(rows)} ratings of" in out and SUITE in out
    assert f"judge_agreement of {SUITE} follows at the next medhelm-summarize" in err
    with duckdb.connect(str(suite["db"]), read_only=True) as conn:
        got = conn.execute("SELECT file_row, dataset_name, model_key, instance_id, accuracy, completeness, clarity, "
                           "username, question, answer FROM human_ratings ORDER BY file_row").fetchall()
    assert [g[0] for g in got] == list(range(1, len(rows) + 1))   # file order
    for g, r in zip(got, rows):
        assert g[1:4] == (r["dataset_name"], r["model_key"], r["instance_id"])
        assert g[4:7] == tuple(float(r[d]) if r[d] else None for d in DIMENSIONS)
        assert g[7:] == (r["username"], r["question"], r["answer"])   # multi-line quoted texts intact


def test_every_statistic_equals_the_reference(suite):
    pairs = reference_pairs(suite["judges"], suite["metrics"], ratings_by_item(suite["rows"]))
    raters = {r for r, _ in pairs}
    assert raters == {"gpt", "llama", "claude", "jury", "clinicians", "rouge_l", "BERTScore-F"}
    assert {d for _, d in pairs} == set(DIMENSIONS)
    # BERTScore-F only where the runs have it (medication_qa); the clinicians over items rated twice or more
    assert {p[0][0] for p in pairs[("BERTScore-F", "accuracy")]} == {"medication_qa"}
    assert len(pairs[("clinicians", "accuracy")]) < len(pairs[("jury", "accuracy")])
    with duckdb.connect(str(suite["db"]), read_only=True) as conn:
        compared = check_agreement(conn, SUITE, pairs)
        assert compared >= 7 * 3 * 3
        # the agreement is not trivial: the synthetic ratings follow the jury, with noise
        icc = conn.execute("SELECT value FROM leaderboard.judge_agreement WHERE target = ? AND rater = 'jury' "
                           "AND dimension = 'accuracy' AND statistic = 'icc3k'", [SUITE]).fetchone()[0]
    assert 0.2 < icc < 0.99


def test_the_bootstrap_intervals_are_the_reference_resamples_percentiles(suite):
    pairs = reference_pairs(suite["judges"], suite["metrics"], ratings_by_item(suite["rows"]))
    with duckdb.connect(str(suite["db"]), read_only=True) as conn:
        got = {(r[0], r[1], r[2]): (r[3], r[4]) for r in conn.execute(
            "SELECT rater, dimension, statistic, ci_low, ci_high FROM leaderboard.judge_agreement WHERE target = ?",
            [SUITE]).fetchall()}
        for rater, dimension in (("jury", "accuracy"), ("clinicians", "clarity"), ("rouge_l", "completeness")):
            ref = reference_interval(conn, pairs[(rater, dimension)], SEED, SAMPLES, kappa=rater not in METRICS)
            for stat, interval in ref.items():
                low, high = got[(rater, dimension, stat)]
                assert interval is not None and abs(low - interval[0]) <= 1e-9 and abs(high - interval[1]) <= 1e-9, \
                    (rater, dimension, stat, (low, high), interval)
                assert low < high


def test_a_second_build_gives_the_same_table(suite, tmp_path):
    query = "SELECT * FROM leaderboard.judge_agreement WHERE target = ? ORDER BY ALL"
    with duckdb.connect(str(suite["db"]), read_only=True) as conn:
        first = conn.execute(query, [SUITE]).fetchall()
    root = tmp_path / "again"
    shutil.copytree(suite["root"] / "benchmark_output", root / "benchmark_output")
    summarize(root)
    with duckdb.connect(str(root / "benchmark_output" / "medhelm.duckdb"), read_only=True) as conn:
        assert conn.execute(query, [SUITE]).fetchall() == first
    with duckdb.connect(str(root / "benchmark_output" / "medhelm.duckdb")) as conn:
        conn.execute("UPDATE analytics_settings SET seed = ?", [SEED + 1])
    summarize(root)
    with duckdb.connect(str(root / "benchmark_output" / "medhelm.duckdb"), read_only=True) as conn:
        other = conn.execute(query, [SUITE]).fetchall()
    # another seed draws other resamples: the same values, other intervals
    assert [r[:5] + r[7:] for r in other] == [r[:5] + r[7:] for r in first]
    assert [r[5:7] for r in other] != [r[5:7] for r in first]


def test_the_docs_example_query_lists_every_rater(suite):
    [sql] = code_blocks("Agreement with clinicians", "sql")
    with duckdb.connect(str(suite["db"]), read_only=True) as conn:
        rows = conn.execute(sql).fetchall()
    assert {r[0] for r in rows} == {SUITE} and len(rows) == 7 * 3
    assert {r[2] for r in rows} == {"gpt", "llama", "claude", "jury", "clinicians", "rouge_l", "BERTScore-F"}


def test_ratings_given_with_an_import_are_matched_against_what_it_imports(tmp_path):
    """--human-ratings beside --source: loaded before the import, whose rebuild holds the jury against
    them, and matched after it (the imported suite's rated items are not reported unmatched)."""
    run_dir = sorted((PUBLIC / "benchmark_output" / "runs" / "public-n50").glob("medi_qa:*"))[0]
    model_key = json.loads((run_dir / "run_spec.json").read_text())["adapter_spec"]["model"].replace("/", "_")
    ids = [s["instance"]["id"] for s in json.loads((run_dir / "scenario_state.json").read_text())["request_states"]]
    rows = synthetic_ratings({("medi_qa", model_key, i): {} for i in ids[:20]}, seed=2,
                             unmatched=[("medi_qa", model_key, "id-none")])
    ratings = write_ratings_csv(tmp_path / "r.csv", rows)
    rc, out, err = run_import(["--source", str(PUBLIC / "benchmark_output"), "--suite", "public-n50",
                               "--with-completions", "--human-ratings", str(ratings), "-o", str(tmp_path / "out"), "-q"])
    assert rc == 0, err
    [line] = [x for x in err.splitlines() if "match no judged instance" in x]
    unmatched = sum(1 for r in rows if r["instance_id"] == "id-none")
    assert line.startswith(f"medhelm-import: {unmatched} of {len(rows)} ratings") and line.endswith(
        f": medi_qa/{model_key}/id-none")
    assert "ratings of 21 items" in out and "match judged instances of public-n50" in out
    with duckdb.connect(str(tmp_path / "out" / "medhelm.duckdb"), read_only=True) as conn:
        assert conn.execute("SELECT max(n_items) FROM leaderboard.judge_agreement WHERE target = 'public-n50' "
                            "AND rater = 'jury'").fetchone()[0] == 20


# --------------------------------------------------------------------------- bad input, and the flag alone

def _good_rows() -> list[dict]:
    return [{"username": "A", "instance_id": f"id{i}", "dataset_name": "aci_bench", "model_key": f"m_{i % 7}",
             "accuracy": "4", "completeness": "5", "clarity": "3", "question": "q,\n\"x\"", "answer": "a"}
            for i in range(9)]


def test_ratings_alone_in_an_empty_store_name_the_first_items_and_count_the_rest(tmp_path):
    csv_path = write_ratings_csv(tmp_path / "r.csv", _good_rows())
    rc, out, err = run_import(["--human-ratings", str(csv_path), "-o", str(tmp_path / "out")])
    assert rc == 0, err
    [line] = [x for x in err.splitlines() if x.startswith("medhelm-import:")]
    assert line.startswith("medhelm-import: 9 of 9 ratings match no judged instance")
    assert "aci_bench/m_0/id0, aci_bench/m_1/id1" in line and line.endswith("and 4 more items")
    assert "aci_bench/m_5/id5" not in line
    assert "9 ratings of 9 items" in out


@pytest.mark.parametrize("body, where, message", [
    ("username,instance_id,dataset_name,model_key,accuracy,completeness\nA,id1,aci_bench,m,4,4\n", 1,
     "human ratings need the columns .* missing clarity"),
    ('instance_id,dataset_name,model_key,accuracy,completeness,clarity,question\n'
     'id1,aci_bench,m,4,4,4,"two\nlines"\nid2,aci_bench,m,four,4,4,q\n', 4, "accuracy 'four' is not a number"),
    ("instance_id,dataset_name,model_key,accuracy,completeness,clarity\nid1,aci_bench,m,4,4,7\n", 2,
     "clarity '7' is not on the 1-5 scale"),
    ("instance_id,dataset_name,model_key,accuracy,completeness,clarity\nid1,,m,4,4,4\n", 2,
     "dataset_name must not be empty"),
    ('instance_id,dataset_name,model_key,accuracy,completeness,clarity,question\n'
     'id1,aci_bench,m,4,4,4,"x\ny"\n\nid2,aci_bench,m,4,4\n', 5, "5 fields where the header has 7"),
])
def test_a_bad_ratings_file_is_one_line_naming_file_and_line_and_writes_nothing(tmp_path, body, where, message):
    out = tmp_path / "out"
    good = write_ratings_csv(tmp_path / "good.csv", _good_rows())
    assert run_import(["--human-ratings", str(good), "-o", str(out), "-q"])[0] == 0
    bad = tmp_path / "bad.csv"
    bad.write_text(body, encoding="utf-8")
    rc, stdout, err = run_import(["--human-ratings", str(bad), "-o", str(out)])
    assert rc == 2 and stdout == ""
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"medhelm-import: error: {bad}:{where}: ")
    assert re.search(message, err), err
    with duckdb.connect(str(out / "medhelm.duckdb"), read_only=True) as conn:   # the good file's ratings stay
        assert conn.execute("SELECT count(*), min(source) FROM human_ratings").fetchone() == (9, str(good))


def test_what_to_import_is_still_required_without_human_ratings(tmp_path):
    for argv, message in ((["-o", str(tmp_path)], "--source"),
                          (["--source", str(tmp_path), "-o", str(tmp_path)], "--release --suite")):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as e:
            import_main(argv)
        assert e.value.code == 2 and message in err.getvalue()
    rc, _, err = run_import(["--human-ratings", str(tmp_path / "missing.csv"), "-o", str(tmp_path)])
    assert rc == 2 and "missing.csv: no such file" in err and not (tmp_path / "medhelm.duckdb").exists()
