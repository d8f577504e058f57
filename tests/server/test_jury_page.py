"""The judges on the page (issue 44, item 4): `/api/jury` (each model's rank under every jury variant,
from analytics' jury_variant_scores, jury_rank_stability and jury_variant_leaderboard) and
`/api/verdicts` (per instance, every judge's score and explanation beside the clinicians' ratings),
the two views in headless Chromium, their empty states, and the static export.

Targets:
* `public`: ../shared/oracle/public's suite public-n50 (HELM's own output, three judges gpt, llama,
  claude) imported --with-completions, a ratings CSV in the MedHELM authors' format loaded with
  `medhelm-import --human-ratings`, and one judge explanation replaced by hostile HTML;
* the example suite (conftest.py: our own runs, one judge, private tier, no ratings);
* `nojury`: a suite of the example's yes/no benchmark only, in a copy of its store (no jury at all).

The expectations are computed here from the raw verdicts (HELM's LLMJuryMetric score written out:
the mean of int() of every criterion score of the variant's judges) and HELM's own run stats, not
read back from the page's code."""
from __future__ import annotations

import csv
import http.client
import json
import shutil
from pathlib import Path
from urllib.parse import quote

import duckdb
import pytest

from medhelm_core.server.data import REDACTED, DataError, Reader
from tests.server.page import Served, browser_errors, js, open_page
from tests.oracle import PUBLIC

ROOT = Path(__file__).resolve().parents[2]
SUITE = "public-n50"
JUDGES = ["gpt", "llama", "claude"]
VARIANTS = ["all"] + [f"without:{j}" for j in JUDGES] + [f"only:{j}" for j in JUDGES]
HOSTILE = ('<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
           '<b id="injected">bold</b> & "quoted" </td></tr></table>')
SECRET = "CLINICIAN-ONLY-QUESTION-TEXT"
NO_RATINGS = "No clinicians' ratings loaded: medhelm-import --human-ratings CSV"
AUTHORS_COLUMNS = ["username", "specialty", "team", "entry_id", "instance_id", "dataset_name", "model_key",
                   "user_label", "accuracy", "completeness", "clarity", "question", "answer"]
JURY_CLASS = "helm.benchmark.metrics.llm_jury_metrics.LLMJuryMetric"


# --------------------------------------------------------------------------- fixtures and helpers

def api(reader: Reader, endpoint: str, params: dict | None = None, redact: bool = False):
    from medhelm_core.server.app import api_answer

    return api_answer(reader, endpoint, params or {}, redact)


def run_of(benchmark: str, m: str) -> str:
    return f"{benchmark}:model=mockai_mock-gpt-{m},model_deployment=mockai_mock-gpt-{m}"


def entries(db: Path, run_name: str, annotator: str) -> dict[str, dict[str, dict]]:
    """instance -> judge -> verdict ({criterion: {score, explanation}} or None), as imported."""
    out: dict = {}
    with duckdb.connect(str(db), read_only=True) as conn:
        for iid, judge, value in conn.execute(
                "SELECT instance_id, entry, value FROM published_annotation_entries WHERE suite = ? AND run_name = ? "
                "AND annotator = ? ORDER BY position", [SUITE, run_name, annotator]).fetchall():
            out.setdefault(iid, {})[judge] = json.loads(value) if value is not None else None
    return out


@pytest.fixture(scope="module")
def public(tmp_path_factory):
    """public-n50 imported with its completions, ratings of a few of its items (and of one item it never
    judged) loaded, one explanation made hostile. Returns what the checks need."""
    from medhelm_cli.imports import main as import_main

    source = PUBLIC / "benchmark_output"
    if not (source / "runs" / SUITE).is_dir():
        pytest.skip(f"{source} not found")
    root = tmp_path_factory.mktemp("jury_page")
    out = root / "out"
    assert import_main(["--source", str(source), "--suite", SUITE, "--output-path", str(out),
                        "--with-completions", "--quiet"]) == 0
    db = out / "medhelm.duckdb"
    aci_a = list(entries(db, run_of("aci_bench", "a"), "aci_bench"))
    med_b = list(entries(db, run_of("medication_qa", "b"), "medication_qa"))
    rated = {("aci_bench", "mockai_mock-gpt-a", aci_a[0]): [(4, 5, 3), (2, 3, 5)],
             ("aci_bench", "mockai_mock-gpt-a", aci_a[2]): [(1, None, 2)],
             ("aci_bench", "mockai_mock-gpt-a", aci_a[5]): [(5, 4, 4), (3, 3, 3), (4, 2, 1)],
             ("medication_qa", "mockai_mock-gpt-b", med_b[1]): [(2, 2, 2)]}
    unmatched = ("aci_bench", "mockai_mock-gpt-a", "id999999")
    rows = []
    for (dataset, key, iid), ratings in list(rated.items()) + [(unmatched, [(3, 3, 3)])]:
        for k, (acc, comp, clar) in enumerate(ratings):
            rows.append({"username": f"dr.{k}", "specialty": "internal medicine", "team": "t", "entry_id": str(len(rows)),
                         "instance_id": iid, "dataset_name": dataset, "model_key": key, "user_label": "Model A",
                         "accuracy": acc, "completeness": comp, "clarity": clar,
                         "question": SECRET, "answer": f"{SECRET} answer"})
    rows = rows[1::2] + rows[::2]   # an item's ratings apart in the file: file order, not item order
    csv_path = root / "medhelm_human_annotation.csv"
    with open(csv_path, "w", newline="", encoding="utf-8-sig") as f:   # the authors' file: a byte-order mark
        w = csv.DictWriter(f, fieldnames=AUTHORS_COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({c: "" if r[c] is None else r[c] for c in AUTHORS_COLUMNS})
    assert import_main(["--human-ratings", str(csv_path), "-o", str(out), "--quiet"]) == 0
    # a judge explanation is model output: make one hostile
    hostile_id = aci_a[1]
    with duckdb.connect(str(db)) as conn:
        [(value,)] = conn.execute("SELECT value FROM published_annotation_entries WHERE suite = ? AND run_name = ? "
                                  "AND annotator = 'aci_bench' AND entry = 'gpt' AND instance_id = ?",
                                  [SUITE, run_of("aci_bench", "a"), hostile_id]).fetchall()
        verdict = json.loads(value)
        verdict["accuracy"]["explanation"] = HOSTILE
        conn.execute("UPDATE published_annotation_entries SET value = ? WHERE suite = ? AND run_name = ? "
                     "AND annotator = 'aci_bench' AND entry = 'gpt' AND instance_id = ?",
                     [json.dumps(verdict), SUITE, run_of("aci_bench", "a"), hostile_id])
    return {"out": out, "db": db, "rows": rows, "rated": rated, "hostile_id": hostile_id}


@pytest.fixture(scope="module")
def public_page(public):
    s = Served(public["out"], suite=SUITE)
    yield s
    s.close()


@pytest.fixture(scope="module")
def nojury(example, tmp_path_factory):
    """A suite with no jury (the example's yes/no benchmark only), run and summarized in a copy of the
    example's store."""
    from medhelm_cli import run_main, summarize_main

    out, prod_env = example
    copy = tmp_path_factory.mktemp("jury_page_nojury") / "out"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns("*.lock", ".dagster_home"))
    conf = copy.parent / "nojury.conf"
    conf.write_text("entries: [\n" + "".join(
        f'  {{description: "medhelm_configurable_benchmark:model=demo/model-{m},model_deployment=demo/model-{m},'
        f'config_path=examples/benchmarks/med_yesno/config.yaml", priority: 1}},\n' for m in "ab") + "]\n")
    mp = pytest.MonkeyPatch()
    mp.chdir(ROOT)
    mp.setenv("DAGSTER_HOME", str(copy.parent / "dagster_home"))
    try:
        assert run_main(["--conf-paths", str(conf), "--suite", "nojury", "--max-eval-instances", "5",
                         "--local-path", str(prod_env), "--output-path", str(copy)]) == 0
        assert summarize_main(["--suite", "nojury", "--output-path", str(copy), "--local-path", str(prod_env),
                               "--auto-generate-schema"]) == 0
    finally:
        mp.undo()
    return copy


def request(port: int, path: str, host: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.putrequest("GET", path, skip_host=True)
        conn.putheader("Host", host)
        conn.endheaders()
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        conn.close()


# --------------------------------------------------------------------------- the reference

def reference_ablation(db: Path) -> dict[tuple[str, str, str], float]:
    """(benchmark, variant, model) -> HELM's LLMJuryMetric run score had the jury held only the variant's
    judges, from the imported verdicts and each run's jury spec."""
    out = {}
    with duckdb.connect(str(db), read_only=True) as conn:
        runs = conn.execute("SELECT run_name, run_spec FROM runs WHERE suite = ?", [SUITE]).fetchall()
    for run_name, spec in runs:
        spec = json.loads(spec)
        jury = [m["args"] for m in spec["metric_specs"] if m["class_name"] == JURY_CLASS]
        if not jury:
            continue
        [args] = jury
        judges, default = list(args["annotator_models"]), float(args.get("default_score", 0.0))
        variants = {"all": judges, **{f"without:{j}": [k for k in judges if k != j] for j in judges},
                    **{f"only:{j}": [j] for j in judges}}
        verdicts = entries(db, run_name, args["scenario_name"])
        for variant, kept in variants.items():
            scores = []
            for per_judge in verdicts.values():
                got = [int(c["score"]) for j, v in per_judge.items() if j in kept and isinstance(v, dict)
                       for c in v.values()]
                scores.append(sum(got) / len(got) if got else default)
            out[(args["scenario_name"], variant, spec["adapter_spec"]["model"])] = sum(scores) / len(scores)
    return out


def ranks(scores: dict[str, float]) -> dict[str, int]:
    """1 + the models scored strictly higher (ties share the best rank), on 12 decimals."""
    r = {m: round(v, 12) for m, v in scores.items()}
    return {m: 1 + sum(1 for o in r.values() if o > v) for m, v in r.items()}


# --------------------------------------------------------------------------- the endpoints

def test_jury_ranks_per_variant_are_helms_scores_under_each_jury(public):
    answer = api(Reader(public["out"], suite=SUITE), "jury")
    assert answer["available"] and answer["jury_note"] is None
    assert answer["judges"] == JUDGES and answer["variants"] == VARIANTS
    want = reference_ablation(public["db"])
    benchmarks = {b for b, _, _ in want}
    assert [b["benchmark"] for b in answer["benchmarks"]] == sorted(benchmarks)
    moved = 0
    for b in answer["benchmarks"]:
        assert b["judges"] == JUDGES and b["variants"] == VARIANTS
        assert {m["model"] for m in b["models"]} == {"mockai/mock-gpt-a", "mockai/mock-gpt-b"}
        for v in VARIANTS:
            expected = {m: want[(b["benchmark"], v, m)] for m in ("mockai/mock-gpt-a", "mockai/mock-gpt-b")}
            for m in b["models"]:
                got = m["by_variant"][v]
                assert got["value"] == pytest.approx(expected[m["model"]], abs=1e-9), (b["benchmark"], v, m["model"])
                assert got["rank"] == ranks(expected)[m["model"]], (b["benchmark"], v, m["model"])
                assert got["n_instances"] == 50
                moved += got["rank"] != m["by_variant"]["all"]["rank"]
    assert moved > 0   # the data have variants that reorder the models: the view has something to show

    # `all` is the run's own jury stat, as HELM wrote it
    with duckdb.connect(str(public["db"]), read_only=True) as conn:
        stats = {(r, n): v for r, n, v in conn.execute(
            "SELECT run_name, name, mean FROM run_stats WHERE suite = ? AND perturbation IS NULL AND split = 'test'",
            [SUITE]).fetchall()}
        stability = {(b, v): (n, t, s, list(k)) for b, v, n, t, s, k in conn.execute(
            "SELECT benchmark, variant, n_models, kendall_tau, adjacent_swaps, top_k_overlap "
            "FROM leaderboard.jury_rank_stability WHERE target = ?", [SUITE]).fetchall()}
        board = {(v, name): (rank, wr, rank_all) for v, name, rank, wr, rank_all in conn.execute(
            "SELECT variant, model_name, rank, mean_win_rate, rank_all FROM leaderboard.jury_variant_leaderboard "
            "WHERE target = ?", [SUITE]).fetchall()}
    for b in answer["benchmarks"]:
        for m in b["models"]:
            [run] = m["runs"]
            assert m["by_variant"]["all"]["value"] == pytest.approx(stats[(run, b["metrics"][0])], abs=1e-9)
        for v in VARIANTS:
            n, tau, swaps, top = stability[(b["benchmark"], v)]
            got = b["stability"][v]
            assert (got["n_models"], got["adjacent_swaps"], got["top_k_overlap"]) == (n, swaps, top)
            assert got["kendall_tau"] == (None if tau is None or tau != tau else pytest.approx(tau))
    assert {(v, row["model_name"]) for row in answer["leaderboard"] for v in row["by_variant"]} == set(board)
    for row in answer["leaderboard"]:
        for v, got in row["by_variant"].items():
            rank, wr, rank_all = board[(v, row["model_name"])]
            assert (got["rank"], row["rank_all"]) == (rank, rank_all) and got["mean_win_rate"] == pytest.approx(wr)

    # the clinicians: items rated per (benchmark, model), the unmatched item nowhere
    counts = {(b["benchmark"], m["model"]): (m["n_judged"], m["n_rated"]) for b in answer["benchmarks"]
              for m in b["models"]}
    assert counts[("aci_bench", "mockai/mock-gpt-a")] == (50, 3)
    assert counts[("medication_qa", "mockai/mock-gpt-b")] == (50, 1)
    assert counts[("aci_bench", "mockai/mock-gpt-b")] == (50, 0)
    assert answer["ratings"] == {"loaded": len(public["rows"]), "items": 5, "rated_items": 4, "note": None}
    assert SECRET not in json.dumps(answer) and "dr.0" not in json.dumps(answer)


def test_verdicts_are_every_judges_score_and_explanation_beside_the_clinicians(public):
    reader = Reader(public["out"], suite=SUITE)
    answer = api(reader, "verdicts", {"benchmark": "aci_bench", "model": "mockai/mock-gpt-a"})
    raw = entries(public["db"], run_of("aci_bench", "a"), "aci_bench")
    assert answer["judges"] == JUDGES and answer["criteria"] == ["accuracy", "completeness", "clarity"]
    assert [i["instance_id"] for i in answer["instances"]] == list(raw)   # in the run's order
    for inst in answer["instances"]:
        verdicts = raw[inst["instance_id"]]
        assert [j["judge"] for j in inst["judges"]] == [j for j in JUDGES if j in verdicts]
        for j in inst["judges"]:
            want = verdicts[j["judge"]]
            assert j["status"] == "ok" and j["error"] is None
            assert [(c["name"], c["score"], c["explanation"]) for c in j["criteria"]] == [
                (k, float(v["score"]), v["explanation"]) for k, v in want.items()]
        for c in answer["criteria"]:
            scores = [float(verdicts[j][c]["score"]) for j in JUDGES if isinstance(verdicts.get(j), dict)]
            assert inst["jury"][c] == pytest.approx(sum(scores) / len(scores))
        # the clinicians' ratings of the item, in file order, and their mean
        mine = [r for r in public["rows"] if (r["dataset_name"], r["model_key"], r["instance_id"])
                == ("aci_bench", "mockai_mock-gpt-a", inst["instance_id"])]
        assert inst["clinicians"] == [{d: (None if r[d] is None else float(r[d]))
                                       for d in ("accuracy", "completeness", "clarity")} for r in mine]
        for d in ("accuracy", "completeness", "clarity"):
            vals = [r[d] for r in mine if r[d] is not None]
            assert inst["clinicians_mean"][d] == (pytest.approx(sum(vals) / len(vals)) if vals else None)
    assert answer["n_rated"] == 3 and answer["ratings_note"] is None
    hostile = next(i for i in answer["instances"] if i["instance_id"] == public["hostile_id"])
    assert hostile["judges"][0]["criteria"][0]["explanation"] == HOSTILE   # served as data, as it is
    assert SECRET not in json.dumps(answer)

    # another model: its own items, none of model a's ratings
    other = api(reader, "verdicts", {"benchmark": "aci_bench", "model": "mockai/mock-gpt-b"})
    assert other["n_rated"] == 0 and len(other["instances"]) == 50
    assert "No clinicians' ratings of these instances" in other["ratings_note"]

    # redacted (the export; these imported runs are not public-tier): no explanation, every number
    red = api(reader, "verdicts", {"benchmark": "aci_bench", "model": "mockai/mock-gpt-a"}, redact=True)
    assert red["redacted"] and "rationale" not in json.dumps(red) and HOSTILE not in json.dumps(red)
    for a, b in zip(answer["instances"], red["instances"]):
        assert [[c["score"] for c in j["criteria"]] for j in a["judges"]] == \
               [[c["score"] for c in j["criteria"]] for j in b["judges"]]
        assert all(c["explanation"] == REDACTED for j in b["judges"] for c in j["criteria"])
        assert (a["clinicians"], a["jury"]) == (b["clinicians"], b["jury"])

    for params in ({"benchmark": "aci_bench", "model": "mockai/nobody"},
                   {"benchmark": "nope", "model": "mockai/mock-gpt-a"}):
        with pytest.raises(DataError):
            api(reader, "verdicts", params)
    with pytest.raises(DataError, match="missing"):
        api(reader, "verdicts", {"benchmark": "aci_bench"})


def test_verdicts_of_our_own_runs_and_no_ratings(example):
    """Our own runs: explanations from the stored annotations (judge_verdicts' parse), the empty state
    of the ratings."""
    out, _ = example
    reader = Reader(out, suite="example")
    jury = api(reader, "jury")
    [bench] = jury["benchmarks"]
    assert jury["available"] and jury["variants"] == ["all"] and bench["judges"] == ["demo/judge"]
    assert jury["ratings"]["note"].startswith(NO_RATINGS) and jury["ratings"]["loaded"] == 0
    model = bench["models"][0]["model"]
    answer = api(reader, "verdicts", {"benchmark": bench["benchmark"], "model": model})
    with duckdb.connect(str(out / "medhelm.duckdb"), read_only=True) as conn:
        want = {iid: json.loads(parsed) for iid, parsed in conn.execute(
            "SELECT instance_id, parsed FROM judge_verdicts WHERE suite = 'example' AND annotator = ? "
            "AND status = 'ok' AND run_name IN (SELECT unnest(?))", [bench["benchmark"], bench["models"][0]["runs"]]
        ).fetchall()}
    assert len(answer["instances"]) == len(want) == bench["models"][0]["n_judged"] > 0
    for inst in answer["instances"]:
        [judge] = inst["judges"]
        assert {c["name"]: (c["score"], c["explanation"]) for c in judge["criteria"]} == {
            k: (float(v["score"]), v["explanation"]) for k, v in want[inst["instance_id"]].items()}
        assert inst["clinicians"] == []
    assert answer["ratings_note"].startswith(NO_RATINGS)
    red = api(reader, "verdicts", {"benchmark": bench["benchmark"], "model": model}, redact=True)
    assert red["redacted"] and "Demo rationale" not in json.dumps(red)


def test_a_target_without_a_jury_says_so(nojury):
    answer = api(Reader(nojury, suite="nojury"), "jury")
    assert not answer["available"] and answer["benchmarks"] == [] and answer["leaderboard"] == []
    assert answer["jury_note"].startswith("No jury-scored runs in suite nojury")
    assert answer["ratings"]["note"].startswith(NO_RATINGS)


def test_the_endpoints_over_http_keep_the_page_rules(public_page):
    port = public_page.port
    path = "/api/verdicts?benchmark=aci_bench&model=mockai%2Fmock-gpt-a"
    status, body = request(port, path, f"localhost:{port}")
    assert status == 200 and json.loads(body)["benchmark"] == "aci_bench"
    status, body = request(port, path, "attacker.example")   # DNS rebinding: no verdict leaves
    assert status == 403 and "rationale" not in body
    status, body = request(port, "/api/verdicts?benchmark=aci_bench", f"localhost:{port}")
    assert status == 404 and "missing" in json.loads(body)["error"]


# --------------------------------------------------------------------------- in the browser

def test_judges_page_in_browser(public, public_page, browser, shots):
    answer = api(public_page.reader, "jury")
    from selenium.webdriver.support.ui import WebDriverWait

    def reached(path):
        WebDriverWait(browser, 20).until(
            lambda d: d.execute_script("return document.body.dataset.ready") in (path, "error"))
        assert js(browser, "return document.body.dataset.ready") == path, browser.find_element("id", "view").text

    open_page(browser, public_page.url + "#/", expect="/")
    browser.find_element("css selector", '#mainnav a[data-nav="jury"]').click()   # reachable from the target's page
    reached("/jury")
    assert browser.find_element("id", "jury-title").text.startswith("Judges")
    assert not browser.find_elements("id", "no-jury")
    assert browser.find_element("id", "ratings-note").text == \
        f"{len(public['rows'])} clinicians' ratings loaded; 4 judged instances of {SUITE} rated."
    shown = js(browser, """
        const t = document.getElementById('jury-leaderboard');
        const heads = [...t.querySelectorAll('th[data-variant]')].map(x => x.dataset.variant);
        const rows = [...t.querySelectorAll('tr[data-model]')].map(tr => [tr.dataset.model,
            [...tr.querySelectorAll('td[data-variant]')].map(td => td.childNodes[0].textContent)]);
        return {heads, rows};""")
    assert shown["heads"] == VARIANTS
    board = {r["model_name"]: r for r in answer["leaderboard"]}
    assert len(shown["rows"]) == len(board)
    for name, cells in shown["rows"]:
        assert cells == [str(board[name]["by_variant"][v]["rank"]) for v in VARIANTS]
    per_bench = js(browser, """
        return [...document.querySelectorAll('section.jury-bench')].map(s => [s.dataset.benchmark,
            [...s.querySelectorAll('tr[data-model]')].map(tr => [tr.dataset.model,
                [...tr.querySelectorAll('td[data-variant]')].map(td => td.childNodes[0].textContent),
                tr.querySelector('td.moved') !== null])]);""")
    assert [b for b, _ in per_bench] == [b["benchmark"] for b in answer["benchmarks"]]
    for (name, rows), b in zip(per_bench, answer["benchmarks"]):
        by_model = {m["model"]: m for m in b["models"]}
        for model, cells, moved in rows:
            got = by_model[model]["by_variant"]
            assert cells == [str(got[v]["rank"]) for v in VARIANTS]
            assert moved == any(got[v]["rank"] != got["all"]["rank"] for v in VARIANTS)
    browser.save_screenshot(str(shots / "jury_ablation.png"))

    # the verdicts of one model on one benchmark, from the ablation view's link
    js(browser, "document.querySelector('section.jury-bench[data-benchmark=\"aci_bench\"] "
                "tr[data-model=\"mockai/mock-gpt-a\"] a.verdicts-link').click()")
    reached("/jury/aci_bench/mockai%2Fmock-gpt-a")
    assert browser.find_element("id", "verdicts-title").text == "ACI-Bench · mockai/mock-gpt-a"   # the group's words
    assert browser.find_element("id", "verdict-count").text == "showing 20 of 50 instances"
    # the hostile explanation is text: nothing of it runs or becomes an element
    js(browser, "const s = document.getElementById('verdict-search'); s.value = arguments[0]; "
                "s.dispatchEvent(new Event('input'));", public["hostile_id"])
    cell = js(browser, """
        const card = document.querySelector('.verdict[data-instance="' + arguments[0] + '"]');
        const td = card.querySelector('tr[data-criterion="accuracy"] td[data-judge="gpt"]');
        return {text: td.querySelector('.explanation').textContent, score: td.querySelector('.score').textContent,
                imgs: document.querySelectorAll('#view img').length,
                scripts: document.querySelectorAll('#view script').length,
                injected: document.getElementById('injected') !== null,
                pwned: window.__pwned === undefined ? null : window.__pwned,
                judges: [...card.querySelectorAll('thead th[data-judge]')].map(th => th.dataset.judge)};""",
               public["hostile_id"])
    assert cell == {"text": HOSTILE, "score": cell["score"], "imgs": 0, "scripts": 0, "injected": False,
                    "pwned": None, "judges": JUDGES}
    assert not browser_errors(browser)   # not even a request for the img's src
    browser.save_screenshot(str(shots / "jury_verdicts_hostile.png"))
    # beside the clinicians: only the rated instances, each with its mean and ratings in file order
    js(browser, "const s = document.getElementById('verdict-search'); s.value = ''; s.dispatchEvent(new Event('input'));")
    browser.find_element("id", "only-rated").click()
    rated = js(browser, """
        return [...document.querySelectorAll('.verdict')].map(card => [card.dataset.instance,
            card.querySelector('tr[data-criterion="accuracy"] td.clinicians').childNodes[0].textContent,
            card.querySelector('tr[data-criterion="accuracy"] td.clinicians .ratings').textContent]);""")
    want = {}
    for r in public["rows"]:
        if (r["dataset_name"], r["model_key"]) == ("aci_bench", "mockai_mock-gpt-a") and r["instance_id"] != "id999999":
            want.setdefault(r["instance_id"], []).append(r["accuracy"])
    assert sorted(i for i, _, _ in rated) == sorted(want)
    for iid, mean, each in rated:
        assert float(mean) == pytest.approx(sum(want[iid]) / len(want[iid]), abs=1e-3)
        assert each == ", ".join(str(v) for v in want[iid])
    assert SECRET not in browser.page_source
    browser.save_screenshot(str(shots / "jury_verdicts_rated.png"))


def test_a_run_page_links_to_its_judges_verdicts(public_page, browser):
    run = run_of("medication_qa", "b")
    open_page(browser, public_page.url + f"#/run/{SUITE}/" + quote(run, safe=""))
    link = browser.find_element("css selector", "#run-verdicts a")
    assert link.get_attribute("href").endswith("#/jury/medication_qa/mockai%2Fmock-gpt-b")
    link.click()
    from selenium.webdriver.support.ui import WebDriverWait
    WebDriverWait(browser, 20).until(lambda d: d.execute_script("return document.body.dataset.ready") ==
                                     "/jury/medication_qa/mockai%2Fmock-gpt-b")
    assert "1 of 50 instances rated by clinicians" in browser.find_element("id", "ratings-note").text


def test_empty_states_in_browser(example, nojury, browser, shots):
    s = Served(nojury, suite="nojury")
    try:
        open_page(browser, s.url + "#/jury", expect="/jury")
        assert browser.find_element("id", "no-jury").text.startswith("No jury-scored runs in suite nojury")
        assert browser.find_element("id", "ratings-note").text.startswith(NO_RATINGS)
        assert not browser.find_elements("css selector", "section.jury-bench, #jury-leaderboard")
        browser.save_screenshot(str(shots / "jury_empty.png"))
    finally:
        s.close()
    s = Served(example[0], suite="example")
    try:
        jury = api(s.reader, "jury")
        [bench] = jury["benchmarks"]
        model = bench["models"][0]["model"]
        open_page(browser, s.url + "#/jury/" + bench["benchmark"] + "/" + model.replace("/", "%2F"))
        assert browser.find_element("id", "ratings-note").text.startswith(NO_RATINGS)
        assert len(browser.find_elements("css selector", ".verdict")) == bench["models"][0]["n_judged"]
        assert "Demo rationale for" in browser.find_element("id", "verdicts").text   # the local page: in full
    finally:
        s.close()


def test_the_export_has_the_judges_pages_without_private_text(example, browser, shots, tmp_path):
    from medhelm_core.server.export import export_static

    out, _ = example
    reader = Reader(out, suite="example")
    dest = tmp_path / "share"
    export_static(reader, dest)
    data = "".join(p.read_text(encoding="utf-8") for p in (dest / "data").glob("*.js"))
    assert "Demo rationale" not in data and REDACTED in data
    jury = api(reader, "jury")
    [bench] = jury["benchmarks"]
    model = bench["models"][0]
    open_page(browser, (dest / "index.html").as_uri() + "#/jury", expect="/jury")
    assert browser.find_elements("css selector", f'section.jury-bench[data-benchmark="{bench["benchmark"]}"]')
    open_page(browser, (dest / "index.html").as_uri() + "#/jury/" + bench["benchmark"] + "/"
              + model["model"].replace("/", "%2F"))
    texts = js(browser, "return [...document.querySelectorAll('.verdict .explanation')].map(e => e.textContent)")
    assert texts and set(texts) == {REDACTED}
    scores = js(browser, "return [...document.querySelectorAll('.verdict .score')].map(e => e.textContent)")
    assert scores and all(x.isdigit() for x in scores)
    assert "Demo rationale" not in browser.page_source
    browser.save_screenshot(str(shots / "jury_export.png"))
