"""Re-judging (issue 44, item 2): stored completions sent to another jury, landed as `<target>@<jury>`.

* ../shared/oracle/public's suite public-n50 (HELM 0.5.16's own output), imported `--with-completions`,
  re-judged with `medhelm-import --rejudge` by a jury of two mock judges that are not the original's:
  a target of its own, every table of the original the same before and after, only judge calls on the
  mock server (no model is asked anything), a rerun that sends nothing;
* the same suite re-judged by its own jury (the three default judges, served by the mock as they were
  for the golden run): HELM's own annotations and jury stats, to the byte and the bit;
* one of our own suites (`medhelm-run`), re-judged through `rejudge_target` (what `medhelm-run
  --judges FILE` calls): a whole suite of its own with the same completions.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import warnings
from pathlib import Path

import duckdb
import pytest
import yaml
from scipy.stats import kendalltau

from medhelm_cli.imports import main as import_main
from tests.mock_server import MockServer
from tests.oracle import PUBLIC, SHARED
from tests.parity import add_mock_deployments, lay_out_inputs
from tests.readme import code_blocks

pytestmark = pytest.mark.skipif(not (PUBLIC / "benchmark_output").is_dir(), reason="golden files not available")

PUBLISHED = PUBLIC / "benchmark_output"
SUITE = "public-n50"
JURY_CLASS = "helm.benchmark.metrics.llm_jury_metrics.LLMJuryMetric"
NEW_JUDGES = {"alpha": "mockai/mock-judge", "beta": "mockai/mock-judge-2"}
MODELS = {"mock-gpt-a", "mock-gpt-b"}                 # what the mock serves the runs' models as
DEFAULT_JUDGES = {"gpt-4o-2024-05-13", "llama-3.3-70b-instruct", "claude-3-7-sonnet-20250219"}


def helm_instance_score(verdicts: dict, default: float) -> float:
    """LLMJuryMetric's per-instance score: the mean of int() of every criterion score of every judge
    that gave a verdict, `default` where none did."""
    scores = [int(v["score"]) for verdict in verdicts.values() if verdict is not None for v in verdict.values()]
    return sum(scores) / len(scores) if scores else default


@pytest.fixture(scope="module")
def server():
    srv = MockServer()
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def laid_out(tmp_path_factory, server):
    """The oracle's prod_env pointed at the mock, with a second mock judge; a judges file of the two."""
    root = tmp_path_factory.mktemp("rejudge")
    work = lay_out_inputs(PUBLIC / "inputs", root, server.base_url)
    env = work / "prod_env"
    add_mock_deployments(env, "mockai/mock-judge", ["mockai/mock-judge-2"])
    jury = root / "mock_jury.yaml"   # HELM's judges.yaml form; no `name:`, so the jury is named after the file
    jury.write_text(yaml.safe_dump({"judges": [{"name": n, "model": d, "model_deployment": d}
                                               for n, d in NEW_JUDGES.items()]}, sort_keys=False))
    return root, env, jury


@pytest.fixture(scope="module")
def imported(laid_out):
    root, _, _ = laid_out
    out = root / "bo"
    assert import_main(["--source", str(PUBLISHED), "--suite", SUITE, "-o", str(out), "-q", "--with-completions"]) == 0
    return out


def digest(rows) -> str:
    """The rows as a set, floats to 9 decimals (an `avg` over a parallel aggregation may differ in its last bits
    from one build to the next)."""
    def cell(v):
        return round(v, 9) if isinstance(v, float) else v
    return hashlib.sha256(repr(sorted(repr(tuple(map(cell, row))) for row in rows)).encode()).hexdigest()


def original_tables(conn: duckdb.DuckDBPyConnection, target: str, suites: list[str]) -> dict[str, str]:
    """A digest of every row the original target owns: the pipeline's and summarize's tables of its suites,
    every published table, and its kept leaderboard tables."""
    out = {}
    tables = conn.execute("SELECT table_schema, table_name FROM information_schema.tables WHERE table_catalog = "
                          "current_database() AND table_type = 'BASE TABLE'").fetchall()
    for schema, table in tables:
        cols = [c for (c,) in conn.execute("SELECT column_name FROM information_schema.columns WHERE table_catalog = "
                                           "current_database() AND table_schema = ? AND table_name = ?",
                                           [schema, table]).fetchall()]
        if table in ("completions", "completion_claims", "deployment_prices", "rejudged_runs", "rejudged_targets"):
            continue   # the new jury's answers (content-addressed), prices, and what re-judging records
        where = ""
        if schema == "leaderboard":
            where = f"WHERE target = '{target}'"
        elif table == "leaderboard_comparison":
            where = f"WHERE release = '{target}'"
        elif not table.startswith("published_") and "suite" in cols:
            where = "WHERE suite IN (" + ", ".join(f"'{s}'" for s in suites) + ")"
        out[f"{schema}.{table}"] = digest(conn.execute(f'SELECT * FROM {schema}."{table}" {where}').fetchall())
    return out


def rejudge_cli(out: Path, env: Path, judges: str, *extra: str) -> list[str]:
    return ["--rejudge", judges, "--suite", SUITE, "-o", str(out), "--local-path", str(env), *extra]


# --------------------------------------------------------------------------- another jury

def test_a_rejudge_by_another_jury_is_a_target_of_its_own_and_asks_no_model(imported, laid_out, server, capsys):
    root, env, jury = laid_out
    new_target, new_suite = f"{SUITE}@mock_jury", f"{SUITE}@mock_jury"
    with duckdb.connect(str(imported / "medhelm.duckdb"), read_only=True) as conn:
        before = original_tables(conn, SUITE, [SUITE])
    assert len(before) > 40 and before["leaderboard.jury_variant_scores"] and before["main.runs"]

    # the estimate first: nothing sent, nothing written
    server.reset()
    capsys.readouterr()
    assert import_main(rejudge_cli(imported, env, str(jury), "--estimate-cost")) == 0
    printed = capsys.readouterr().out
    assert "Estimated cost before sending anything" in printed and "mockai/mock-judge-2" in printed
    [line] = [ln for ln in printed.splitlines() if ln.startswith(f"{new_target}: 10 run(s) to re-judge")]
    to_pay = int(re.search(r": ([\d,]+) judge call\(s\) to pay", line)[1].replace(",", ""))
    assert server.stats()["total_requests"] == 0
    with duckdb.connect(str(imported / "medhelm.duckdb"), read_only=True) as conn:
        assert not conn.execute("SELECT count(*) FROM runs WHERE suite = ?", [new_suite]).fetchone()[0]

    assert import_main(rejudge_cli(imported, env, str(jury))) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith(f"{new_target}: 10 run(s) to re-judge with mock_jury") and "alpha: mockai/mock-judge" in printed[0]
    assert printed[1].startswith(f"{new_target}: re-judged 10 run(s) of {SUITE} with mock_jury (18 without a jury")
    stats = server.stats()
    # no completion asked again: every request was a judge's, of the new jury's judges, each once
    assert set(stats["by_model"]) == {"mock-judge", "mock-judge-2"} and not MODELS & set(stats["by_model"])
    assert stats["by_answer_kind"] == {"judge_json": stats["total_requests"]} and stats["retried_requests"] == 0
    assert stats["total_requests"] == to_pay == stats["distinct_requests"]

    with duckdb.connect(str(imported / "medhelm.duckdb"), read_only=True) as conn:
        # the original untouched, table by table
        assert original_tables(conn, SUITE, [SUITE]) == before
        assert conn.execute("SELECT count(DISTINCT request_key) FROM judge_verdicts WHERE suite = ?",
                            [new_suite]).fetchone()[0] == to_pay
        assert conn.execute("SELECT count(*) FROM runs WHERE suite = ?", [new_suite]).fetchone()[0] == 28
        check_rejudged_target(conn, new_target, new_suite, NEW_JUDGES)
        # the how-to's query: the two juries side by side, per benchmark
        [sql] = code_blocks("Re-judging with another jury", "sql")
        rows = conn.execute(sql).fetchall()
        assert {(r[0], r[2]) for r in rows} == {(new_target, f"jury:{SUITE}")} and len(rows) == 5


def check_rejudged_target(conn, new_target: str, new_suite: str, judges: dict[str, str]) -> None:
    """The re-judged target against its own verdicts and the original's files: the new judges asked the
    original's questions about the original's completions; the jury stats are HELM's metric on the new
    verdicts; every other stat is the original's; the variant tables hold both juries."""
    runs = {}
    for run_dir in sorted((PUBLISHED / "runs" / SUITE).iterdir()):
        if (run_dir / "run_spec.json").is_file():
            spec = json.loads((run_dir / "run_spec.json").read_text())
            runs[spec["name"]] = (spec, run_dir)
    new_specs = dict(conn.execute("SELECT run_name, run_spec FROM runs WHERE suite = ?", [new_suite]).fetchall())
    assert set(new_specs) == set(runs)
    judged = 0
    for name, (spec, run_dir) in runs.items():
        new_spec = json.loads(new_specs[name])
        jury = [m["args"] for m in spec["metric_specs"] if m["class_name"] == JURY_CLASS]
        stats = json.loads((run_dir / "stats.json").read_text())
        new_stats = conn.execute("SELECT name, split, count, sum, mean FROM run_stats WHERE suite = ? AND run_name = ? "
                                 "AND perturbation IS NULL ORDER BY ordinal", [new_suite, name]).fetchall()
        assert [s["name"]["name"] for s in stats if "perturbation" not in s["name"]] == [s[0] for s in new_stats]
        if not jury:   # copied as it is
            assert new_spec == spec
            assert all(tuple(r[2:4]) == (s["count"], s["sum"]) for r, s in
                       zip(new_stats, [s for s in stats if "perturbation" not in s["name"]]))
            continue
        judged += 1
        [args] = jury
        models = {n: {"model_name": d, "model_deployment": d} for n, d in judges.items()}
        assert [a["args"]["annotator_models"] for a in new_spec["annotators"]] == [models]
        assert [m["args"]["annotator_models"] for m in new_spec["metric_specs"] if m["class_name"] == JURY_CLASS] == [models]
        assert {k: v for k, v in new_spec.items() if k not in ("annotators", "metric_specs")} == \
            {k: v for k, v in spec.items() if k not in ("annotators", "metric_specs")}
        states = json.loads((run_dir / "scenario_state.json").read_text())["request_states"]
        annotations = {p: json.loads(a) for p, a in conn.execute(
            "SELECT position, annotation FROM annotations WHERE suite = ? AND run_name = ? AND annotator = ?",
            [new_suite, name, args["scenario_name"]]).fetchall()}
        verdicts: dict[int, dict] = {}
        for pos, judge, status, parsed, deployment in conn.execute(
                "SELECT position, judge, status, parsed, judge_deployment FROM judge_verdicts "
                "WHERE suite = ? AND run_name = ?", [new_suite, name]).fetchall():
            assert deployment == judges[judge]
            verdicts.setdefault(pos, {})[judge] = json.loads(parsed) if status == "ok" else None
        assert len(annotations) == len(states) == len(verdicts)
        scores = []
        for pos, st in enumerate(states):
            # the same question about the same completion: the original annotation's judge prompt
            assert annotations[pos]["prompt_text"] == st["annotations"][args["scenario_name"]]["prompt_text"]
            assert set(verdicts[pos]) == set(judges)
            scores.append(helm_instance_score(verdicts[pos], args["default_score"]))
        mean = {r[0]: r[4] for r in new_stats if r[1] == "test"}[args["metric_name"]]
        assert mean == pytest.approx(sum(scores) / len(scores), abs=1e-12)
        for r, s in zip(new_stats, [s for s in stats if "perturbation" not in s["name"]]):   # the rest: as published
            if r[0] != args["metric_name"]:
                assert tuple(r[2:4]) == (s["count"], s["sum"]), (name, r[0])
    assert judged == 10

    # the variants: the new jury's, and the original's of the same completions (its own `all`)
    variants = {(r[0], r[1]): r[2:] for r in conn.execute(
        "SELECT run_name, variant, value, n_instances, suite, judges FROM leaderboard.jury_variant_scores "
        "WHERE target = ?", [new_target]).fetchall()}
    original = {r[0]: r[1:] for r in conn.execute(
        "SELECT run_name, value, n_instances, judges FROM leaderboard.jury_variant_scores "
        "WHERE target = ? AND variant = 'all'", [SUITE]).fetchall()}
    names = list(judges)
    expected = {"all", f"jury:{SUITE}"} | ({f"{p}:{j}" for p in ("without", "only") for j in names} if len(names) > 1
                                           else set())
    assert {v for _, v in variants} == expected and len(variants) == 10 * len(expected)
    for run, (value, n, judges_kept) in original.items():
        assert variants[(run, f"jury:{SUITE}")] == (value, n, new_suite, judges_kept)
        [mean] = [r[0] for r in conn.execute(
            "SELECT mean FROM run_stats WHERE suite = ? AND run_name = ? AND name = (SELECT metric FROM "
            "leaderboard.jury_variant_scores WHERE target = ? AND run_name = ? AND variant = 'all') AND split = 'test' "
            "AND perturbation IS NULL",
            [new_suite, run, new_target, run]).fetchall()]
        assert variants[(run, "all")][0] == pytest.approx(mean, abs=1e-12)
    # the stability table compares the two juries per benchmark (SciPy's tau-b on the models' pooled scores)
    stability = {r[0]: r[1:] for r in conn.execute(
        "SELECT benchmark, n_models, kendall_tau, adjacent_swaps FROM leaderboard.jury_rank_stability "
        "WHERE target = ? AND variant = ?", [new_target, f"jury:{SUITE}"]).fetchall()}
    assert len(stability) == 5
    for benchmark, (n_models, tau, swaps) in stability.items():
        pooled = conn.execute(
            "SELECT variant, model, round(sum(score_sum) / sum(n_instances), 12) FROM leaderboard.jury_variant_scores "
            "WHERE target = ? AND benchmark = ? AND variant IN ('all', ?) GROUP BY ALL ORDER BY model",
            [new_target, benchmark, f"jury:{SUITE}"]).fetchall()
        x = [v for var, _, v in pooled if var == "all"]
        y = [v for var, _, v in pooled if var != "all"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = kendalltau(x, y).statistic
        assert n_models == 2 and (tau is None) == math.isnan(ref) and (tau is None or abs(tau - ref) <= 1e-9)
        assert swaps == sum(1 for i in range(2) for j in range(i + 1, 2) if (x[i] - x[j]) * (y[i] - y[j]) < 0)
    board = conn.execute("SELECT DISTINCT variant FROM leaderboard.jury_variant_leaderboard WHERE target = ?",
                         [new_target]).fetchall()
    assert {v for (v,) in board} == expected
    # its own leaderboard: every cell of a run without a jury as the original's
    cells = conn.execute("""
        SELECT count(*), count(*) FILTER (WHERE n.value IS NOT DISTINCT FROM o.value)
        FROM leaderboard.headline_cells n JOIN leaderboard.headline_cells o
          ON o.target = ? AND o.row_pos = n.row_pos AND o.col_idx = n.col_idx
        WHERE n.target = ? AND n.metric NOT IN (SELECT metric FROM leaderboard.jury_metrics WHERE target = ?)""",
                         [SUITE, new_target, new_target]).fetchone()
    assert cells[0] > 0 and cells[0] == cells[1]


def test_a_rerun_pays_nothing_and_changes_nothing(imported, laid_out, server, capsys):
    _, env, jury = laid_out
    new_target = f"{SUITE}@mock_jury"
    with duckdb.connect(str(imported / "medhelm.duckdb"), read_only=True) as conn:
        suites = [f"{SUITE}@mock_jury"]
        first = original_tables(conn, new_target, suites)
    server.reset()
    capsys.readouterr()
    assert import_main(rejudge_cli(imported, env, str(jury))) == 0
    printed = capsys.readouterr().out
    assert ": 0 judge call(s) to pay," in printed and ", 0 paid now ($0.0000)" in printed
    assert server.stats()["total_requests"] == 0
    with duckdb.connect(str(imported / "medhelm.duckdb"), read_only=True) as conn:
        assert original_tables(conn, new_target, suites) == first


# --------------------------------------------------------------------------- the original jury again

def test_the_original_jury_again_reproduces_helms_annotations_and_stats(imported, laid_out, server):
    """`--rejudge stanford` (HELM's default judges.yaml: the judges of the golden run, served by the mock
    as they were then): every annotation and every jury stat HELM wrote."""
    _, env, _ = laid_out
    server.reset()
    assert import_main(rejudge_cli(imported, env, "stanford")) == 0
    stats = server.stats()
    assert set(stats["by_model"]) == DEFAULT_JUDGES and not MODELS & set(stats["by_model"])
    new_suite = f"{SUITE}@stanford"
    with duckdb.connect(str(imported / "medhelm.duckdb"), read_only=True) as conn:
        ours = {(r[0], r[1], r[2]): json.loads(r[3]) for r in conn.execute(
            "SELECT run_name, position, annotator, annotation FROM annotations WHERE suite = ?", [new_suite]).fetchall()}
        helm = {(r[0], r[1], r[2]): json.loads(r[3]) for r in conn.execute(
            "SELECT run_name, position, annotator, annotation FROM published_annotations WHERE suite = ? "
            "AND annotation IS NOT NULL", [SUITE]).fetchall()}
        assert len(ours) == 600 and ours == helm
        differ = conn.execute("""
            SELECT count(*), count(*) FILTER (WHERE n.count <> o.count OR n.sum <> o.sum OR n.name <> o.name)
            FROM run_stats n JOIN run_stats o ON o.suite = ? AND o.run_name = n.run_name AND o.ordinal = n.ordinal
            WHERE n.suite = ?""", [SUITE, new_suite]).fetchone()
        assert differ[0] == conn.execute("SELECT count(*) FROM run_stats WHERE suite = ?", [SUITE]).fetchone()[0]
        assert differ[1] == 0
        same = conn.execute("SELECT count(*), count(*) FILTER (WHERE kendall_tau = 1 AND adjacent_swaps = 0) FROM "
                            "leaderboard.jury_rank_stability WHERE target = ? AND variant = ? AND kendall_tau IS NOT NULL",
                            [new_suite, f"jury:{SUITE}"]).fetchone()
        assert same[0] > 0 and same[0] == same[1]


# --------------------------------------------------------------------------- one line per problem

def test_problems_are_one_line_and_write_nothing(imported, laid_out, tmp_path, capsys):
    from medhelm_core.errors import MedhelmError
    from medhelm_core.run.rejudge import load_jury

    _, env, jury = laid_out
    named = tmp_path / "cheap.yaml"
    named.write_text("name: open-weights\n" + jury.read_text())
    assert load_jury(str(named)).name == "open-weights" and load_jury(str(jury)).name == "mock_jury"
    assert load_jury("public:gpt,claude").name == "public-gpt-claude" and load_jury("stanford").name == "stanford"
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: a@b\n" + jury.read_text())
    with pytest.raises(MedhelmError, match=r"bad\.yaml: name 'a@b': a jury's name"):
        load_jury(str(bad))
    undefined = tmp_path / "undefined.yaml"
    undefined.write_text("judges:\n  - {name: x, model: acme/none, model_deployment: acme/none}\n")
    capsys.readouterr()
    for argv, message in (
            (rejudge_cli(imported, env, str(undefined)), r"undefined\.yaml: judge 'x': deployment acme/none is not defined"),
            (rejudge_cli(imported, env, str(tmp_path / "missing.yaml")), r"--rejudge .*missing\.yaml: no such judges file"),
            (["--rejudge", str(jury), "--suite", "nope", "-o", str(imported), "--local-path", str(env)],
             r"'nope' is neither an imported target"),
            (rejudge_cli(imported, env, str(jury), "--budget", "1"), r"--budget needs a price for deployment")):
        assert import_main(argv) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and re.search(message, err), err
    with duckdb.connect(str(imported / "medhelm.duckdb"), read_only=True) as conn:
        assert not conn.execute("SELECT count(*) FROM runs WHERE suite LIKE ?", [f"{SUITE}@undefined"]).fetchone()[0]


def test_an_import_without_completions_cannot_be_rejudged(laid_out, tmp_path, capsys):
    from medhelm_core.run.rejudge import plan_rejudge, load_jury
    from medhelm_core.errors import MedhelmError
    from medhelm_core.run.workspace import Workspace

    _, env, jury = laid_out
    out = tmp_path / "bo"
    assert import_main(["--source", str(PUBLISHED), "--suite", SUITE, "-o", str(out), "-q", "--no-compare"]) == 0
    with pytest.raises(MedhelmError, match=r"10 judged run\(s\) have no completions in the store .*--with-completions"):
        plan_rejudge(Workspace(output_path=out, local_path=env), SUITE, load_jury(str(jury)))


# --------------------------------------------------------------------------- our own suite

def test_our_own_suite_rejudged_is_a_suite_of_its_own(laid_out, server, tmp_path, monkeypatch, capsys):
    """`medhelm-run` on one jury benchmark, then `medhelm-run --judges FILE` on that suite, whose
    completions are stored (`rejudge_target`): run_entries and requests copied (the same completions),
    new verdicts and jury scores; the suite's own rows the same; only judge calls; `medhelm-summarize`
    summarizes it."""
    from medhelm_cli import run_main, summarize_main
    from medhelm_core.run.rejudge import judged_by_another_jury
    from medhelm_core.run.workspace import Workspace

    _, env, jury = laid_out
    (tmp_path / "jury.conf").write_text("entries: [\n" + "".join(
        f'  {{description: "medication_qa:model=mockai/{m},model_deployment=mockai/{m}", priority: 1}},\n'
        for m in sorted(MODELS)) + "]\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.setenv("MEDHELM_DATA_MIRROR", str(SHARED / "data" / "public"))
    args = ["--conf-paths", "jury.conf", "--suite", "mine", "--max-eval-instances", "5", "--num-threads", "2",
            "--output-path", "bo", "--local-path", str(env)]
    assert run_main(args) == 0
    with duckdb.connect("bo/medhelm.duckdb", read_only=True) as conn:
        before = original_tables(conn, "mine", ["mine"])
    server.reset()
    ws = Workspace(output_path="bo", local_path=env)
    # what medhelm-run --judges asks before it re-judges: the suite was judged by the default jury
    assert judged_by_another_jury(ws, "mine", str(jury)) and not judged_by_another_jury(ws, "mine", "stanford")
    assert not judged_by_another_jury(ws, "not-run", str(jury))
    capsys.readouterr()
    assert run_main(args + ["--judges", str(jury)]) == 0
    lines = [line.removeprefix("medhelm-run: ") for line in capsys.readouterr().err.splitlines()
             if line.startswith("medhelm-run: mine@mock_jury: ")]
    assert lines[0].startswith("mine@mock_jury: 2 run(s) to re-judge") and lines[1].startswith("mine@mock_jury: re-judged")
    stats = server.stats()
    assert set(stats["by_model"]) == {"mock-judge", "mock-judge-2"} and stats["total_requests"] > 0
    server.reset()
    assert run_main(args + ["--judges", str(jury)]) == 0  # again: every judge answer is stored
    assert server.stats()["total_requests"] == 0
    with duckdb.connect("bo/medhelm.duckdb", read_only=True) as conn:
        after = original_tables(conn, "mine", ["mine"])   # (the kept leaderboard tables are new: none of "mine")
        assert {k: after[k] for k in before} == before and all(after[k] == digest([]) for k in after.keys() - before.keys())
        for table in ("run_entries", "requests"):
            assert conn.execute(f"SELECT count(*) FROM {table} WHERE suite = 'mine@mock_jury'").fetchone()[0] == \
                conn.execute(f"SELECT count(*) FROM {table} WHERE suite = 'mine'").fetchone()[0] > 0
        assert conn.execute("SELECT count(*) FROM requests n JOIN requests o ON o.suite = 'mine' AND "
                            "o.run_name = n.run_name AND o.position = n.position AND o.request_key = n.request_key "
                            "WHERE n.suite = 'mine@mock_jury'").fetchone()[0] == 10
        judges = {r[0] for r in conn.execute("SELECT DISTINCT judge FROM judge_verdicts WHERE suite = 'mine@mock_jury'"
                                             " AND status = 'ok'").fetchall()}
        assert judges == set(NEW_JUDGES)
        # HELM's per-instance jury score of the new verdicts, as stored beside the run's stats
        verdicts: dict[tuple, dict] = {}
        for run, instance, judge, parsed in conn.execute(
                "SELECT run_name, instance_id, judge, parsed FROM judge_verdicts WHERE suite = 'mine@mock_jury'").fetchall():
            verdicts.setdefault((run, instance), {})[judge] = json.loads(parsed)
        helm = {(r[0], r[1]): r[2] for r in conn.execute(
            "SELECT run_name, instance_id, helm_value FROM jury_scores WHERE suite = 'mine@mock_jury'").fetchall()}
        assert helm.keys() == verdicts.keys() and len(helm) == 10
        assert all(helm[k] == helm_instance_score(v, 1.0) for k, v in verdicts.items())
        variants = {r[0] for r in conn.execute("SELECT DISTINCT variant FROM leaderboard.jury_variant_scores "
                                               "WHERE target = 'mine@mock_jury'").fetchall()}
        assert "jury:mine" in variants and "only:beta" in variants
    # a suite of our own like any other: medhelm-summarize reads it (the same variants, in the main tables)
    assert summarize_main(["--suite", "mine@mock_jury", "--output-path", "bo",
                           "--schema-path", str(SHARED / "helm" / "schema_medhelm.yaml")]) == 0
    with duckdb.connect("bo/medhelm.duckdb", read_only=True) as conn:
        assert {r[0] for r in conn.execute("SELECT DISTINCT variant FROM jury_variant_scores").fetchall()} == variants
