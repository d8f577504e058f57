"""`medhelm-server` on the shipped example, driven in headless Chromium (Debian's chromium +
chromium-driver through Selenium; no browser download), and the redacted static export.

The example suite (conf/example.conf: every run private-tier) is built once, as in test_example.py,
then summarized twice: with --auto-generate-schema (the README's example) and, in a copy, with
schema_medhelm.yaml (the MedHELM table and its five categories). Screenshots go to
$MEDHELM_SCREENSHOT_DIR if set, else to pytest's tmp directory.
"""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import duckdb
import pytest

from medhelm_core.server.data import REDACTED, Reader
from medhelm_core.summarize.format import helm_number, page_number
from tests.server.page import Served, browser_errors, js

ROOT = Path(__file__).resolve().parents[2]
RELEASE = "medhelm-example"   # the release medhelm_schema_copy (conftest.py) summarizes


# --------------------------------------------------------------------------- fixtures
# `example` (the example suite run and summarized) and `medhelm_schema_copy` (it summarized as a release
# with schema_medhelm.yaml) are in conftest.py, shared with test_hostile_page.py and test_clinician_page.py,
# and so are `browser` and `shots`; Served, js and browser_errors (and the other pages' open_page) are in page.py

@pytest.fixture
def served(example):
    s = Served(example[0], suite="example")
    yield s
    s.close()


# --------------------------------------------------------------------------- browser helpers

def open_page(driver, url: str, expect: str | None = None, timeout: float = 20.0) -> None:
    driver.get(url)
    wait_ready(driver, expect, timeout)


def wait_ready(driver, expect: str | None = None, timeout: float = 20.0) -> str:
    from selenium.webdriver.support.ui import WebDriverWait

    def ready(d):
        v = d.execute_script("return document.body.dataset.ready || ''")
        if not v:
            return False
        return v if (expect is None or v == expect or v == "error") else False

    state = WebDriverWait(driver, timeout).until(ready)
    if state == "error":
        raise AssertionError("page error: " + driver.find_element("id", "error").text)
    return state


def table_grid(driver, index: int) -> dict:
    """The index-th leaderboard table on the page (transposed): model names in display order and,
    per header row, the cell texts (first line only: the value)."""
    return js(driver, """
        const t = document.querySelectorAll('section.lb-section table.lb')[arguments[0]];
        const models = [...t.querySelectorAll('thead th.model')].map(x => x.textContent.trim());
        const rows = [...t.querySelectorAll('tbody tr')].map(tr => ({
            label: tr.querySelector('th .hlabel').textContent.trim(),
            cells: [...tr.querySelectorAll('td.cell')].map(td => td.childNodes[0].textContent.trim())}));
        return {title: t.dataset.title, models, rows};
    """, index)


def group_json(out: Path, group: str) -> list[dict]:
    return json.loads((out / "runs" / "example" / "groups" / f"{group}.json").read_text())


def expected_order(table: dict, col: int = 1, direction: int = 1) -> list[str]:
    """HELM's TransposedLeaderboardTable sort (getSortedRows) of the model names."""
    lower = table["header"][col].get("lower_is_better")
    sign = direction * (1 if lower else -1)
    import functools

    def cmp(a, b):
        av, bv = a[col].get("value"), b[col].get("value")
        if av is not None and bv is None:
            return -1
        if bv is not None and av is None:
            return 1
        if isinstance(av, (int, float)) and isinstance(bv, (int, float)):
            d = (av - bv) * sign
            return -1 if d < 0 else (1 if d > 0 else 0)
        if isinstance(av, str) and isinstance(bv, str):
            return (av > bv) - (av < bv) if sign == 1 else (bv > av) - (bv < av)
        return 0

    return [r[0]["value"] for r in sorted(table["rows"], key=functools.cmp_to_key(cmp))]


# --------------------------------------------------------------------------- tests

def test_helm_number_format():
    assert helm_number(None) == "-"
    assert helm_number(1.0) == "1"
    assert helm_number(0.0) == "0"
    assert helm_number(0.6) == "0.6"
    assert helm_number(2.75) == "2.75"
    assert helm_number(0.39285714285714285) == "0.393"
    assert helm_number(0.0005) == "0.001"      # Math.round: halves up
    assert helm_number(-0.0005) == "0"         # … toward +infinity
    assert helm_number(230.5) == "230.5"
    assert helm_number(12345.6789) == "12345.679"
    assert helm_number("Demo model A") == "Demo model A"


def test_api_tables_are_helm_summarize_tables(example):
    """Every group's tables from the API equal helm-summarize's groups/*.json (read from DuckDB)."""
    from medhelm_core.server.app import api_answer

    out, _ = example
    reader = Reader(out, suite="example")
    groups = api_answer(reader, "groups", {})
    assert groups["top"] == "all_scenarios"
    shown = [g["name"] for g in groups["groups"] if g["has_tables"]]
    assert set(shown) == {"all_scenarios", "DISCHARGE-SUMMARY-EXAMPLE", "MED-YESNO-EXAMPLE", "shc_ptbm_med"}
    for name in shown:
        api_tables = api_answer(reader, "group", {"name": name})["tables"]
        file_tables = group_json(out, name)
        assert [t["title"] for t in api_tables] == [t["title"] for t in file_tables]
        for a, f in zip(api_tables, file_tables):
            assert a["header"] == f["header"]
            assert a["rows"] == f["rows"]
    run = api_answer(reader, "run", {"run": "shc_ptbm_med:model=demo_model-a,model_deployment=demo_model-a"})
    with duckdb.connect(str(out / "medhelm.duckdb"), read_only=True) as conn:
        prompts = [r[0] for r in conn.execute(
            "SELECT prompt FROM requests WHERE run_name = ? ORDER BY position",
            ["shc_ptbm_med:model=demo_model-a,model_deployment=demo_model-a"]).fetchall()]
    assert [i["prompt"] for i in run["instances"]] == prompts
    assert run["tier"] == "private" and run["main_metric"]["name"] == "exact_match"
    assert run["n_wrong"] == sum(1 for i in run["instances"] if i["main_score"] < 1)
    # a suite that was never summarized is a clear error, not a crash
    with pytest.raises(Exception, match="never been summarized"):
        Reader(out, suite="nope").snapshot()


def test_dagster_metadata_has_previews(example):
    import dagster as dg

    out, _ = example
    instance = dg.DagsterInstance.from_config(str(out.parent / "dagster_home"))
    event = instance.get_latest_materialization_event(dg.AssetKey("leaderboard_files"))
    md = event.asset_materialization.metadata
    for key in ("leaderboard", "row_counts", "costs", "judge_status", "runs", "private_tier_runs", "view"):
        assert key in md, key
    assert "Demo model B" in md["leaderboard"].value and "| Mean win rate | 1.000 | 0.000 |" in md["leaderboard"].value
    assert "| requests | 60 |" in md["row_counts"].value


def test_leaderboard_in_browser(example, served, browser, shots):
    out, _ = example
    driver = browser
    open_page(driver, served.url, expect="/")
    assert driver.find_element("id", "group-title").text == "All Scenarios"
    tables = group_json(out, "all_scenarios")
    n = js(driver, "return document.querySelectorAll('section.lb-section table.lb').length")
    assert n == len(tables)
    for i, table in enumerate(tables):
        grid = table_grid(driver, i)
        assert grid["title"] == table["title"]
        # one model order on every table: the main leaderboard's mean win rate, best first
        assert grid["models"] == expected_order(tables[0])
        assert set(grid["models"]) == {"Demo model A", "Demo model B"}
        rows_by_model = {r[0]["value"]: r for r in table["rows"]}
        shown = [j for j in range(1, len(table["header"])) if any(r[j].get("value") is not None for r in table["rows"])]
        assert [r["label"] for r in grid["rows"]] == [table["header"][j]["value"] for j in shown]
        for j, row in zip(shown, grid["rows"]):
            want = [page_number(rows_by_model[m][j].get("value")) for m in grid["models"]]
            assert row["cells"] == want, (table["title"], row["label"])
    # the MedHELM-style default: mean win rate, best first
    top = table_grid(driver, 0)
    assert top["rows"][0]["label"] == "Mean win rate" and top["models"] == ["Demo model B", "Demo model A"]
    assert top["rows"][0]["cells"] == ["1.000", "0.000"]
    # each benchmark cell's bootstrap interval on hover (analytics' cell_intervals)
    tips = js(driver, "return [...document.querySelectorAll('section.lb-section')[0].querySelectorAll('td.has-ci')]"
                      ".map(e => e.title)")
    assert len(tips) >= 4 and all("95% bootstrap interval" in t and "(10 instances)" in t for t in tips)
    driver.save_screenshot(str(shots / "leaderboard.png"))

    # sorting: a column sorts as HELM's page does, the same column again reverses; the Model row sorts by name
    driver.find_element("css selector", "section.lb-section table.lb button.sort[data-col='1']").click()
    assert table_grid(driver, 0)["models"] == expected_order(tables[0], 1, 1) == ["Demo model B", "Demo model A"]
    driver.find_element("css selector", "section.lb-section table.lb button.sort[data-col='1']").click()
    assert table_grid(driver, 0)["models"] == expected_order(tables[0], 1, -1) == ["Demo model A", "Demo model B"]
    driver.find_element("css selector", "section.lb-section table.lb button.sort[data-col='0']").click()
    assert table_grid(driver, 0)["models"] == ["Demo model A", "Demo model B"]
    driver.find_element("css selector", "section.lb-section table.lb button.sort[data-col='0']").click()
    assert table_grid(driver, 0)["models"] == ["Demo model B", "Demo model A"]
    # sort by a benchmark row (MED-YESNO-EXAMPLE - EM, higher is better): B (0.6) before A (0.1)
    col = [h["value"] for h in tables[0]["header"]].index("MED-YESNO-EXAMPLE - EM")
    driver.find_element("css selector", f"section.lb-section table.lb button.sort[data-col='{col}']").click()
    assert table_grid(driver, 0)["models"] == expected_order(tables[0], col, 1) == ["Demo model B", "Demo model A"]

    # models as rows
    driver.find_element("id", "transpose").click()
    wait_ready(driver, "/")
    names = js(driver, "return [...document.querySelectorAll('section.lb-section')[0].querySelectorAll('tbody td.model')]"
                       ".map(x => x.textContent.trim())")
    assert set(names) == {"Demo model A", "Demo model B"}
    driver.find_element("id", "transpose").click()
    wait_ready(driver, "/")
    assert not browser_errors(driver)


def test_drilldown_in_browser(example, served, browser, shots):
    out, _ = example
    driver = browser
    open_page(driver, served.url + "#/", expect="/")
    run_name = "MED-YESNO-EXAMPLE:model=demo_model-a,model_deployment=demo_model-a"
    # click Demo model A's MED-YESNO-EXAMPLE value in the Main Metric table
    tables = group_json(out, "all_scenarios")
    col = [h["value"] for h in tables[0]["header"]].index("MED-YESNO-EXAMPLE - EM")
    row = [r[0]["value"] for r in tables[0]["rows"]].index("Demo model A")
    link = driver.find_element("css selector",
                               f"section.lb-section table.lb td.cell[data-row='{row}'][data-col='{col}'] a.drill")
    assert link.text == page_number(tables[0]["rows"][row][col]["value"])
    link.click()
    wait_ready(driver)
    assert driver.find_element("id", "run-title").text == "MED-YESNO-EXAMPLE · Demo model A"
    assert driver.find_element("id", "run-name").text == run_name
    with duckdb.connect(str(out / "medhelm.duckdb"), read_only=True) as conn:
        first_prompt = conn.execute("SELECT prompt FROM requests WHERE suite = 'example' AND run_name = ? "
                                    "ORDER BY position LIMIT 1", [run_name]).fetchone()[0]
        n = conn.execute("SELECT count(*) FROM requests WHERE suite = 'example' AND run_name = ?", [run_name]).fetchone()[0]
    prompts = js(driver, "return [...document.querySelectorAll('#instances pre.prompt')].map(p => p.textContent)")
    assert len(prompts) == n and prompts[0] == first_prompt
    assert "Patient ID" in driver.find_element("css selector", "#instances pre.prompt").text   # private text, local page
    assert js(driver, "return document.querySelectorAll('#instances pre.completion').length") == n
    driver.save_screenshot(str(shots / "run.png"))
    # filter wrong answers
    n_wrong = served.reader.run(run_name)["n_wrong"]
    driver.find_element("id", "only-wrong").click()
    assert js(driver, "return document.querySelectorAll('#instances .instance').length") == n_wrong
    assert js(driver, "return document.querySelectorAll('#instances .instance.right').length") == 0

    # a jury run: each judge's scores, explanation and status
    jury_run = "DISCHARGE-SUMMARY-EXAMPLE:model=demo_model-b,model_deployment=demo_model-b"
    open_page(driver, served.url + "#/run/example/" + jury_run.replace(":", "%3A").replace("=", "%3D").replace(",", "%2C"))
    judge = driver.find_element("css selector", "#instances .judge")
    assert "demo/judge" in judge.text and "ok" in judge.text
    assert "Demo rationale for faithfulness." in judge.text
    assert "ok: 10" in driver.find_element("css selector", "dl.kv").text
    driver.save_screenshot(str(shots / "run_jury.png"))

    # plots and the comparison page without a leaderboard_comparison table: shown, not broken
    open_page(driver, served.url + "#/plots", expect="/plots")
    assert js(driver, "return document.querySelectorAll('#plot-win-rate svg rect.bar').length") == 2
    # the mean win rates' bootstrap intervals as error bars (a bar and two ticks per model)
    assert js(driver, "return document.querySelectorAll('#plot-win-rate svg line.errbar').length") == 6
    assert js(driver, "return document.querySelectorAll('#plot-cost svg circle').length") == 2
    open_page(driver, served.url + "#/compare", expect="/compare")
    assert "No leaderboard_comparison" in driver.find_element("id", "no-comparison").text
    assert not browser_errors(driver)


def test_release_and_other_targets(medhelm_schema_copy, example):
    """--release R reads the SQL model tables directly; a suite summarized earlier (no longer the last
    target) is rebuilt from the file's inputs in memory, with the same tables helm-summarize wrote."""
    from medhelm_core.server.app import api_answer

    out = medhelm_schema_copy
    rel = Reader(out, release=RELEASE)
    meta = api_answer(rel, "meta", {})
    assert (meta["mode"], meta["target"], meta["suites"], meta["rebuilt_in_memory"]) == ("release", RELEASE, ["example"], False)
    files = json.loads((out / "releases" / RELEASE / "groups" / "medhelm_scenarios.json").read_text())
    got = api_answer(rel, "group", {"name": "medhelm_scenarios"})["tables"]
    assert [(t["header"], t["rows"]) for t in got] == [(t["header"], t["rows"]) for t in files]
    suite = Reader(out, suite="example")
    assert suite.meta()["rebuilt_in_memory"] is True
    got = suite.group("all_scenarios")["tables"]
    files = group_json(example[0], "all_scenarios")
    assert [(t["header"], t["rows"]) for t in got] == [(t["header"], t["rows"]) for t in files]
    assert suite.run("shc_ptbm_med:model=demo_model-b,model_deployment=demo_model-b")["instances"]


def test_medhelm_schema_categories_in_browser(medhelm_schema_copy, browser, shots):
    out = medhelm_schema_copy
    s = Served(out, release=RELEASE)
    try:
        groups = s.reader.groups()
        assert groups["top"] == "medhelm_scenarios"
        cats = [g["name"] for g in groups["groups"] if g["kind"] == "category"]
        assert cats == ["clinical_decision_support", "clinical_note_generation", "patient_communication",
                        "medical_research", "administration_and_workflow"]
        driver = browser
        open_page(driver, s.url, expect="/")
        assert driver.find_element("id", "group-title").text == "MedHELM Scenarios"
        side = driver.find_element("id", "sidebar").text
        for title in ("Clinical Decision Support", "Clinical Note Generation", "Patient Communication and Education",
                      "Medical Research Assistance", "Administration and Workflow"):
            assert title in side
        tables = json.loads((out / "releases" / RELEASE / "groups" / "medhelm_scenarios.json").read_text())
        assert [t["title"] for t in tables] == ["Accuracy", "Efficiency", "General information"]
        grid = table_grid(driver, 0)
        assert grid["rows"][0]["label"] == "Mean win rate"
        # rows no model has a value for (benchmarks without runs) are not shown
        assert [r["label"] for r in grid["rows"]] == [
            h["value"] for j, h in enumerate(tables[0]["header"]) if j and any(r[j].get("value") is not None
                                                                              for r in tables[0]["rows"])]
        by_label = {r["label"]: r["cells"] for r in grid["rows"]}
        assert by_label["ADHD-Behavior - EM"] == [page_number(v) for v in (0.6, 0.5)]   # B first: win rate 1
        assert "MedCalc-Bench - MedCalc Accuracy" not in by_label                      # no runs: not shown
        driver.save_screenshot(str(shots / "medhelm_scenarios.png"))
        driver.find_element("css selector", "#sidebar a[data-group='clinical_decision_support']").click()
        wait_ready(driver, "/group/clinical_decision_support")
        assert driver.find_element("id", "group-title").text == "Clinical Decision Support"
        assert table_grid(driver, 0)["rows"][0]["label"] == "Mean win rate"
        # the model x category heatmap (analytics' category_scores): a row per model, a column per
        # category with runs, shaded by the category's mean win rate
        open_page(driver, s.url + "#/plots", expect="/plots")
        heads = js(driver, "return [...document.querySelectorAll('#plot-categories thead th')].map(e => e.textContent)")
        assert heads[0] == "Model" and "Clinical Decision Support" in heads
        shaded = js(driver, "return [...document.querySelectorAll('#plot-categories td.heat')]"
                            ".filter(e => e.style.background).map(e => e.title)")
        assert shaded and all("mean win rate" in t and "macro-average" in t for t in shaded)
        driver.save_screenshot(str(shots / "category_heatmap.png"))
    finally:
        s.close()


def test_reproduced_vs_published_in_browser(example, browser, shots, tmp_path):
    """With a leaderboard_comparison table (as the published-results import writes it), differing cells
    are highlighted with the published value and the cause; the comparison page and scatter show them."""
    out, _ = example
    copy = tmp_path / "out"
    copy.mkdir()
    shutil.copyfile(out / "medhelm.duckdb", copy / "medhelm.duckdb")
    with duckdb.connect(str(copy / "medhelm.duckdb")) as conn:
        conn.execute("""CREATE TABLE leaderboard_comparison (release VARCHAR, group_name VARCHAR, table_title VARCHAR,
            row_name VARCHAR, column_name VARCHAR, published_value DOUBLE, rebuilt_value DOUBLE, abs_diff DOUBLE,
            equal BOOLEAN, cause VARCHAR)""")
        conn.execute("""INSERT INTO leaderboard_comparison VALUES
            ('example', 'all_scenarios', 'Main Metric', 'Demo model A', 'MED-YESNO-EXAMPLE - EM', 0.2, 0.1, 0.1, false, 'split mismatch'),
            ('example', 'all_scenarios', 'Main Metric', 'Demo model B', 'MED-YESNO-EXAMPLE - EM', 0.6, 0.6, 0.0, true, NULL),
            ('example', 'all_scenarios', 'Main Metric', 'Demo model B', 'Mean win rate', 1.0, 1.0, 0.0, true, NULL),
            ('other', 'all_scenarios', 'Main Metric', 'Demo model A', 'Mean win rate', 0.5, 0.0, 0.5, false, 'x')""")
    s = Served(copy, suite="example")
    try:
        driver = browser
        open_page(driver, s.url, expect="/")
        diff = driver.find_elements("css selector", "section.lb-section td.cell.cmp-diff")
        assert len(diff) == 1
        assert "pub 0.2" in diff[0].text and "split mismatch" in diff[0].text
        assert "cause: split mismatch" in diff[0].get_attribute("title")
        assert len(driver.find_elements("css selector", "section.lb-section td.cell.cmp-equal")) == 2
        driver.save_screenshot(str(shots / "published_deltas.png"))
        open_page(driver, s.url + "#/compare", expect="/compare")
        assert driver.find_element("id", "n-differ").text == "1"
        rows = driver.find_elements("css selector", "#comparison-table tr.diff")
        assert len(rows) == 1 and "split mismatch" in rows[0].text and "explained" in rows[0].text
        assert js(driver, "return document.querySelectorAll('.plots svg circle').length") == 3
        driver.save_screenshot(str(shots / "compare.png"))
    finally:
        s.close()


def test_server_holds_no_write_lock(example, served):
    """While the server runs, a writer can open the database; the page then shows the new data."""
    import urllib.request

    out, _ = example
    meta = json.load(urllib.request.urlopen(served.url + "api/meta"))
    assert meta["target"] == "example"
    from medhelm_core.store import Store

    store = Store.in_output_path(out)
    with store.connect() as conn:   # read-write, the pipeline's way
        conn.execute("CREATE OR REPLACE TABLE server_probe AS SELECT 1 AS x")
    time.sleep(0.01)
    meta = json.load(urllib.request.urlopen(served.url + "api/meta"))
    assert meta["target"] == "example"
    with store.connect() as conn:
        conn.execute("DROP TABLE server_probe")


def _private_texts(out: Path) -> set[str]:
    """Every private-tier text the export must not contain: prompts (and their lines), instance inputs,
    references, completions, judge explanations and raw judge answers."""
    texts: set[str] = set()
    with duckdb.connect(str(out / "medhelm.duckdb"), read_only=True) as conn:
        private = conn.execute("SELECT suite, run_name FROM run_entries WHERE tier <> 'public'").fetchall()
        assert private, "the example has private-tier runs"
        for suite, run in private:
            for prompt, state, result in conn.execute(
                    "SELECT q.prompt, q.request_state, c.result FROM requests q LEFT JOIN completions c USING (request_key) "
                    "WHERE q.suite = ? AND q.run_name = ?", [suite, run]).fetchall():
                texts.add(prompt)
                texts.update(line for line in prompt.splitlines() if len(line.strip()) >= 16)
                inst = json.loads(state)["instance"]
                texts.add(inst["input"]["text"])
                texts.update(r["output"]["text"] for r in inst.get("references") or [])
                for c in (json.loads(result) or {}).get("completions", []) if result else []:
                    texts.add(c["text"])
            for raw, parsed in conn.execute("SELECT raw_text, parsed FROM judge_verdicts WHERE suite = ? AND run_name = ?",
                                            [suite, run]).fetchall():
                if raw:
                    texts.add(raw)
                for v in (json.loads(parsed) or {}).values() if parsed else []:
                    if isinstance(v, dict) and v.get("explanation"):
                        texts.add(v["explanation"])
    return {t.strip() for t in texts if t and len(t.strip()) >= 8}


def test_static_export_has_no_private_text(example, browser, shots, tmp_path):
    from medhelm_cli.serve import export_main

    out, _ = example
    dest = tmp_path / "share"
    assert export_main(["--suite", "example", "--output-path", str(out), "--out", str(dest)]) == 0
    texts = _private_texts(out)
    assert any("Patient ID" in t for t in texts) and any("Demo rationale" in t for t in texts)
    files = [p for p in dest.rglob("*") if p.is_file()]
    assert (dest / "index.html").exists() and len(files) > 5
    for p in files:
        body = p.read_text(encoding="utf-8")
        for t in texts:
            for form in {t, json.dumps(t, ensure_ascii=False)[1:-1], json.dumps(t)[1:-1]}:
                assert form not in body, f"private text in {p.relative_to(dest)}: {t[:60]!r}"
    # the copy works from disk: the leaderboard, and a run page with the text redacted
    driver = browser
    open_page(driver, (dest / "index.html").as_uri(), expect="/")
    grid = table_grid(driver, 0)
    assert grid["models"] == ["Demo model B", "Demo model A"] and grid["rows"][0]["cells"] == ["1.000", "0.000"]
    assert "redacted" in driver.find_element("id", "privacy").text
    driver.find_element("css selector", "section.lb-section table.lb td.cell a.drill").click()
    wait_ready(driver)
    first = driver.find_element("css selector", "#instances pre.prompt").text
    assert first == REDACTED
    driver.save_screenshot(str(shots / "export_run.png"))
    assert not browser_errors(driver)


def test_published_release_imported(tmp_path, browser, shots):
    """A release imported by medhelm-import (never summarized here) is rebuilt from its own schema.json;
    every cell carries the comparison, and a published run shows its published completions."""
    pytest.importorskip("medhelm_cli.imports")
    from medhelm_cli.imports import main as import_main
    from medhelm_core.server.app import api_answer

    from tests.oracle import SHARED

    oracle = SHARED / "oracle" / "synthetic" / "benchmark_output"
    if not oracle.exists():
        pytest.skip(f"{oracle} not found")
    out = tmp_path / "pub"
    assert import_main(["--source", str(oracle), "--release", "oracle", "--output-path", str(out),
                        "--with-completions", "--quiet"]) == 0
    reader = Reader(out, release="oracle")
    meta = api_answer(reader, "meta", {})
    assert meta["rebuilt_in_memory"] and meta["has_comparison"] and meta["top"] == "medhelm_scenarios"
    published = json.loads((oracle / "releases" / "oracle" / "groups" / "medhelm_scenarios.json").read_text())
    ours = reader.group("medhelm_scenarios")["tables"]
    assert [(t["header"], t["rows"]) for t in ours] == [(t["header"], t["rows"]) for t in published]
    cmp = reader.comparison()
    sm = cmp["summary"]
    assert sm["cells"] > 0 and sm["differ"] == 0
    # cells empty on both sides are counted apart from the valued ones
    assert 0 < sm["valued"] == sm["valued_equal"] < sm["cells"] and sm["valued"] + sm["both_missing"] == sm["cells"]
    assert ours[0]["comparison"]["0"]["1"]["column_name"] == "Mean win rate"
    assert set(reader.plots()["scatter"]) >= {"Mean win rate", "CLEAR"}
    run = reader.run("JURY-DEMO:model=mockai_mock-gpt-a,model_deployment=mockai_mock-gpt-a")
    assert len(run["instances"]) == 50 and run["instances"][0]["prompt"] and run["instances"][0]["judges"]
    s = Served(out, release="oracle")
    try:
        open_page(browser, s.url + "#/compare", expect="/compare")
        assert browser.find_element("id", "n-differ").text == "0"
        assert browser.find_element("id", "n-valued-equal").text == f"{sm['valued_equal']}/{sm['valued']}"
        assert browser.find_element("id", "n-both-missing").text == str(sm["both_missing"])
        assert js(browser, "return document.querySelectorAll('.plots figure').length") == len(reader.plots()["scatter"])
        browser.save_screenshot(str(shots / "published_release_compare.png"))
    finally:
        s.close()



def test_sigterm_stops_the_server_even_when_inherited_as_ignored(example):
    """A background job of a script, or PID 1 of a container, starts with SIGTERM ignored; the server
    still stops on it, as on Ctrl-C."""
    import signal
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    out, _ = example
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "medhelm_cli.serve", "--suite", "example", "--output-path",
                             str(out), "--port", str(port)], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN))
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/runs", timeout=10) as r:
                    assert r.status == 200
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        proc.terminate()
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
