"""The page as a clinician-researcher reads it (issue 43, item 6), in headless Chromium, on the local
page and on the shareable static export:

- values with 3 decimals, HELM's rounding, as the terminal table (medhelm-summarize) writes them;
- one model order on every table and model-wise view (the main leaderboard's mean win rate, best first);
- the schema's description of each metric and run group on hover, and a glossary in the schema's words;
- rows that no model has a value for are not shown (listed under the table instead);
- run pages titled in words: benchmark, model and the run's arguments, not the raw run name.

Screenshots go to $MEDHELM_SCREENSHOT_DIR if set, else to pytest's tmp directory.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import duckdb
import pytest

from medhelm_core.server.data import Reader
from medhelm_core.summarize.format import page_number
from tests.server.page import Served, js, open_page

ROOT = Path(__file__).resolve().parents[2]
RELEASE = "medhelm-example"
NUMBER = re.compile(r"^-?\d+\.\d{3}$")


# --------------------------------------------------------------------------- fixtures and helpers

@pytest.fixture(scope="module")
def suite_page(example):
    s = Served(example[0], suite="example")
    yield s
    s.close()


@pytest.fixture(scope="module")
def medhelm_page(medhelm_schema_copy):
    s = Served(medhelm_schema_copy, release=RELEASE)
    yield s
    s.close()


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """The synthetic published release (tests/oracle's), imported with its completions: run names with
    arguments (clear:condition=…), published values beside ours."""
    pytest.importorskip("medhelm_cli.imports")
    from medhelm_cli.imports import main as import_main

    from tests.oracle import SHARED

    oracle = SHARED / "oracle" / "synthetic" / "benchmark_output"
    if not oracle.exists():
        pytest.skip(f"{oracle} not found")
    out = tmp_path_factory.mktemp("clinician_published") / "pub"
    assert import_main(["--source", str(oracle), "--release", "oracle", "--output-path", str(out),
                        "--with-completions", "--quiet"]) == 0
    s = Served(out, release="oracle")
    s.schema = json.loads((oracle / "releases" / "oracle" / "schema.json").read_text())
    yield s
    s.close()


def tables_on_page(driver) -> list[dict]:
    """Every leaderboard table of the page (models as columns): title, model names in display order,
    and per shown row its label, hover text, keyboard focusability and cell texts (the value only)."""
    return js(driver, """
        return [...document.querySelectorAll('section.lb-section')].map(sec => {
            const t = sec.querySelector('table.lb');
            const hidden = [...sec.querySelectorAll('details.hidden-rows li')].map(li => li.textContent.trim());
            if (!t) return {title: sec.querySelector('h2').textContent, models: [], rows: [], hidden};
            return {
                title: t.dataset.title,
                models: [...t.querySelectorAll('thead th.model')].map(x => x.textContent.trim()),
                rows: [...t.querySelectorAll('tbody tr')].map(tr => {
                    const label = tr.querySelector('th .hlabel');
                    return {col: Number(tr.dataset.col), label: label.textContent.trim(),
                            title: label.getAttribute('title') || '', tip: label.dataset.tip || '',
                            tabindex: label.getAttribute('tabindex'),
                            cells: [...tr.querySelectorAll('td.cell')].map(td => td.childNodes[0].textContent.trim())};
                }),
                hidden};
        });
    """)


def glossary_on_page(driver) -> dict[str, str]:
    pairs = js(driver, """
        const dl = document.querySelector('#glossary dl');
        return dl ? [...dl.querySelectorAll('dt')].map(dt => [dt.textContent.trim(), dt.nextElementSibling.textContent.trim()]) : [];
    """)
    return dict(pairs)   # in the page's order


def schema_metrics(out: Path, target: str) -> dict[str, dict]:
    with duckdb.connect(str(out / "medhelm.duckdb"), read_only=True) as conn:
        rows = conn.execute("SELECT name, display_name, short_display_name, description FROM schema_metrics "
                            "WHERE target = ?", [target]).fetchall()
    return {r[0]: {"display_name": r[1], "short": r[2] or r[1] or r[0], "description": r[3]} for r in rows}


def schema_groups(out: Path, target: str) -> dict[str, dict]:
    with duckdb.connect(str(out / "medhelm.duckdb"), read_only=True) as conn:
        rows = conn.execute("SELECT name, display_name, description FROM schema_run_groups WHERE target = ?",
                            [target]).fetchall()
    return {r[0]: {"display_name": r[1], "description": r[2]} for r in rows}


def plain(text: str) -> str:
    return re.sub(r"\[([^\]]+)\]\((https?:[^)\s]+)\)", r"\1", text or "")


def group_names(reader: Reader) -> list[str]:
    return [g["name"] for g in reader.groups()["groups"] if g["has_tables"]]


def check_group_page(driver, reader: Reader, name: str, metrics: dict[str, dict]) -> list[dict]:
    """On one group's page: 3-decimal values equal to page_number of the data, the one model order,
    no row without a value, every row's hover text from the schema, the glossary from the schema."""
    api = reader.group(name)
    order = reader.groups()["model_order"]
    shown_tables = tables_on_page(driver)
    assert [t["title"] for t in shown_tables] == [t["title"] for t in api["tables"]]
    used_metrics = set()
    for page_t, t in zip(shown_tables, api["tables"]):
        rows = t["rows"]
        published = {int(c) for cols in (t.get("comparison") or {}).values() for c, cmp in cols.items()
                     if cmp.get("published_value") is not None}
        valued = [c for c in range(1, len(t["header"]))
                  if c in published or any(r[c].get("value") is not None for r in rows)]
        empty = [c for c in range(1, len(t["header"])) if c not in valued]
        # rows no model has a value for are not shown, and are listed under the table
        assert [r["col"] for r in page_t["rows"]] == valued, (name, t["title"])
        if valued:
            assert page_t["hidden"] == [t["header"][c]["value"] for c in empty]
        # one model order: the server's, which is the main leaderboard's
        by_name = {r[0]["value"]: r for r in rows}
        if valued:
            assert page_t["models"] == [m for m in order if m in by_name]
        for r in page_t["rows"]:
            assert r["col"] in published or any(x != "-" for x in r["cells"])
            want = [page_number(by_name[m][r["col"]].get("value")) for m in page_t["models"]]
            assert r["cells"] == want, (name, t["title"], r["label"])
            assert all(x == "-" or NUMBER.match(x) for x in r["cells"]), r["cells"]
            # the schema's words on hover
            hd = t["header"][r["col"]]
            mname = t["metrics"][r["col"]]
            if hd["value"] == "Mean win rate":
                assert "How many models this model outperforms on average" in r["title"]
            else:
                m = metrics[mname]
                used_metrics.add(mname)
                assert f"{m['display_name']}: {m['description']}" in r["title"], (r["label"], r["title"])
            # reachable by keyboard: focusable, the same text shown on focus (style.css)
            assert r["tabindex"] == "0" and r["tip"] == r["title"]
    gloss = glossary_on_page(driver)
    for mname in used_metrics:
        m = metrics[mname]
        assert m["short"] in gloss, (name, m["short"], list(gloss))
        assert m["description"] in gloss[m["short"]]
    return shown_tables


# --------------------------------------------------------------------------- 3 decimals

@pytest.mark.parametrize("value,text", [
    (None, "-"), (1.0, "1.000"), (0.0, "0.000"), (0.6, "0.600"), (2.75, "2.750"), (230.5, "230.500"),
    (0.39285714285714285, "0.393"), (0.0005, "0.001"), (-0.0005, "0.000"), (-0.0004, "0.000"), (-0.25, "-0.250"),
    (0.0625, "0.063"), (12345.6789, "12345.679"), (10, "10.000"), ("generation", "generation")])
def test_page_number(value, text):
    """HELM's rounding (Math.round(x*1000)/1000: halves toward +infinity), always 3 decimals."""
    assert page_number(value) == text


def test_the_page_writes_numbers_as_the_python_side_and_the_terminal_table(example, suite_page, browser):
    """app.js's num3 and format.page_number agree, and the leaderboard's cells equal the terminal table's
    (medhelm-summarize prints the first table of the top group, 3 decimals)."""
    from medhelm_core.summarize.files import top_table_markdown

    open_page(browser, suite_page.url, expect="/")
    values = [None, 0, 1, 0.6, 2.75, 230.5, 0.39285714285714285, 0.0005, -0.0005, -0.0004, 0.0625, 0.1875,
              1.0005, 2.0004999, 12345.6789, 1 / 3, 2 / 3, 99.9995, 1e-9]
    assert js(browser, "return arguments[0].map(num3)", values) == [page_number(v) for v in values]

    out, _ = example
    base = out / "runs" / "example"
    terminal = top_table_markdown(base, json.loads((base / "schema.json").read_text()))
    lines = [ln for ln in terminal.splitlines() if ln.startswith("| ") and not ln.startswith("|---")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    term = {}
    for ln in lines[1:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        for col, v in zip(header[1:], cells[1:]):
            term[(cells[0], col)] = v
    page = tables_on_page(browser)[0]
    compared = 0
    for r in page["rows"]:
        for model, v in zip(page["models"], r["cells"]):
            if (model, r["label"]) in term:
                assert v == term[(model, r["label"])], (model, r["label"])
                compared += 1
    assert compared >= 8   # 2 models x (mean win rate + 3 benchmarks)


# --------------------------------------------------------------------------- every point, page by page

def test_suite_page_for_a_clinician(example, suite_page, browser, shots):
    out, _ = example
    reader = suite_page.reader
    metrics = schema_metrics(out, "example")
    groups = schema_groups(out, "example")
    order = reader.groups()["model_order"]
    assert order == ["Demo model B", "Demo model A"]     # mean win rate 1 and 0
    for name in group_names(reader):
        open_page(browser, suite_page.url + "#/group/" + name, expect="/group/" + name)
        shown = check_group_page(browser, reader, name, metrics)
        if name == "all_scenarios":
            # HELM's page sorts each table by its own column 1, which flips the models in "General
            # information" (# trials, all 1); here every table has the leaderboard's order
            assert [t["models"] for t in shown] == [order] * len(shown)
            gloss = glossary_on_page(browser)
            assert list(gloss)[:1] == ["Mean win rate"]
            assert {"Jury Score", "EM", "# trials", "# prompt tokens", "-"} <= set(gloss)
            assert gloss["EM"].startswith("Exact match: " + metrics["exact_match"]["description"])
            browser.save_screenshot(str(shots / "clinician_leaderboard.png"))
        if name == "DISCHARGE-SUMMARY-EXAMPLE":
            # a jury-scored benchmark: no "EM" row of "-", it is listed as left out
            labels = [r["label"] for r in shown[0]["rows"]]
            assert "Jury Score" in labels and "EM" not in labels and shown[0]["hidden"] == ["EM"]
            browser.save_screenshot(str(shots / "clinician_benchmark.png"))
    # run groups' descriptions on hover: the sidebar and the "Includes" links
    open_page(browser, suite_page.url, expect="/")
    side = js(browser, "return Object.fromEntries([...document.querySelectorAll('#sidebar a[data-group]')]"
                       ".map(a => [a.dataset.group, a.title]))")
    for name, title in side.items():
        assert title == plain(groups[name]["description"]), name
    includes = js(browser, "return [...document.querySelectorAll('#view p.muted a[href^=\"#/group/\"]')].map(a => a.title)")
    assert includes and all(includes)
    # sorting one table by a column still works; "One model order" puts it back
    browser.find_element("css selector", "section.lb-section:nth-of-type(2) button.sort[data-col='0']").click()
    assert tables_on_page(browser)[1]["models"] == ["Demo model A", "Demo model B"]
    browser.find_element("id", "one-order").click()
    assert tables_on_page(browser)[1]["models"] == order
    # models as rows: the same order, the same rows left out
    browser.find_element("id", "transpose").click()
    rows = js(browser, "return [...document.querySelectorAll('section.lb-section')].map(s => "
                       "[...s.querySelectorAll('tbody td.model')].map(x => x.textContent.trim()))")
    assert rows == [order] * len(rows)
    heads = js(browser, "return [...document.querySelectorAll('section.lb-section')[2].querySelectorAll('thead th')]"
                        ".map(x => x.querySelector('.hlabel').textContent.trim())")
    assert "DISCHARGE-SUMMARY-EXAMPLE - EM" not in heads and "MED-YESNO-EXAMPLE - EM" in heads
    browser.find_element("id", "transpose").click()

    # plots and the runs list in the same model order
    open_page(browser, suite_page.url + "#/plots", expect="/plots")
    bars = js(browser, "return [...document.querySelectorAll('#plot-win-rate svg > text[text-anchor=end]')].map(t => t.textContent)")
    assert bars == order
    labels = js(browser, "return [...document.querySelectorAll('#plot-win-rate svg > text:not([text-anchor])')].map(t => t.textContent)")
    assert labels and all(NUMBER.match(x) for x in labels)
    open_page(browser, suite_page.url + "#/runs", expect="/runs")
    models = js(browser, "return [...document.querySelectorAll('#runs-table tr td:nth-child(2)')].map(t => t.textContent)")
    assert models == [m for m in order for _ in range(3)]


def test_run_titles_in_words(example, suite_page, browser, shots):
    out, _ = example
    run_name = "DISCHARGE-SUMMARY-EXAMPLE:model=demo_model-b,model_deployment=demo_model-b"
    open_page(browser, suite_page.url + "#/", expect="/")
    # from a leaderboard cell to the run: the title is the benchmark and the model, in words
    browser.find_element("css selector", "section.lb-section td.cell[data-row='1'][data-col='2'] a.drill").click()
    from selenium.webdriver.support.ui import WebDriverWait
    WebDriverWait(browser, 20).until(lambda d: d.execute_script("return (document.body.dataset.ready || '').startsWith('/run/')"))
    title = browser.find_element("id", "run-title").text
    assert title == "DISCHARGE-SUMMARY-EXAMPLE · Demo model B"
    assert ":" not in title and "model=" not in title
    assert browser.find_element("id", "run-name").text == run_name          # the raw name is still there
    assert not browser.find_elements("id", "run-args")                      # no arguments beyond the model
    kv = browser.find_element("css selector", "dl.kv").text
    desc = schema_metrics(out, "example")["jury_score"]["description"]
    assert "Jury Score = 2.800 (test)" in kv and desc in kv                 # 3 decimals and the schema's words
    browser.save_screenshot(str(shots / "clinician_run.png"))
    # the arguments of a run name, as the page reads them (a value with a comma stays whole)
    got = js(browser, "return runArgs(arguments[0])",
             "clear:condition=alcohol_dependence,data_path=a,b/c.csv,model=x_y,model_deployment=x_y")
    assert got == [["condition", "alcohol_dependence"], ["data_path", "a,b/c.csv"]]
    # the runs list names each run in words, the raw name on hover
    open_page(browser, suite_page.url + "#/runs", expect="/runs")
    links = js(browser, "return [...document.querySelectorAll('#runs-table a')].map(a => [a.textContent, a.title])")
    assert ["DISCHARGE-SUMMARY-EXAMPLE", run_name] in links


def test_medhelm_schema_page_for_a_clinician(medhelm_schema_copy, medhelm_page, browser, shots):
    out = medhelm_schema_copy
    reader = medhelm_page.reader
    metrics = schema_metrics(out, RELEASE)
    for name in group_names(reader):
        open_page(browser, medhelm_page.url + "#/group/" + name, expect="/group/" + name)
        shown = check_group_page(browser, reader, name, metrics)
        if name == "medhelm_scenarios":
            # 36 benchmarks without runs are not 36 rows of "-"
            acc = shown[0]
            assert [r["label"] for r in acc["rows"]] == ["Mean win rate", "ADHD-Behavior - EM"]
            assert "MedCalc-Bench - MedCalc Accuracy" in acc["hidden"] and "Medec - MedecFlagAcc" in acc["hidden"]
            assert [t["models"] for t in shown] == [reader.groups()["model_order"]] * len(shown)
            gloss = glossary_on_page(browser)
            assert "MedecFlagAcc" not in gloss            # not shown, not explained
            assert {"Mean win rate", "EM", "Observed inference time (s)", "# eval", "# train", "truncated"} <= set(gloss)
            assert "Lower is better." in gloss["Observed inference time (s)"]
            browser.save_screenshot(str(shots / "clinician_medhelm.png"))
    # the heatmap of categories: rows in the page's model order, values with 3 decimals
    open_page(browser, medhelm_page.url + "#/plots", expect="/plots")
    rows = js(browser, "return [...document.querySelectorAll('#plot-categories tbody th.model')].map(t => t.textContent)")
    assert rows == reader.groups()["model_order"]
    cells = js(browser, "return [...document.querySelectorAll('#plot-categories td.heat')].map(t => t.textContent)")
    assert cells and all(x == "-" or NUMBER.match(x) for x in cells)


def test_published_release_for_a_clinician(published, browser, shots):
    """A published release (rebuilt from its own schema.json): the same points; a run with arguments
    (CLEAR's condition) is titled with them."""
    reader = published.reader
    # the words come from the release's own schema.json
    metrics = {m["name"]: {"display_name": m.get("display_name") or m["name"],
                           "short": m.get("short_display_name") or m.get("display_name") or m["name"],
                           "description": m.get("description") or ""} for m in published.schema["metrics"]}
    for name in group_names(reader):
        open_page(browser, published.url + "#/group/" + name, expect="/group/" + name)
        check_group_page(browser, reader, name, metrics)
    open_page(browser, published.url, expect="/")
    browser.save_screenshot(str(shots / "clinician_published.png"))
    run_name = "clear:condition=alcohol_dependence,model=mockai_mock-gpt-b,model_deployment=mockai_mock-gpt-b"
    open_page(browser, published.url + "#/run/" + "/".join(["oracle-private", run_name.replace(":", "%3A")
                                                             .replace("=", "%3D").replace(",", "%2C")]))
    title = browser.find_element("id", "run-title").text
    clear = next(g for g in reader.groups()["groups"] if g["name"] == "clear")
    assert title == f"{clear['display_name']} · {reader.run(run_name)['display_name']}"
    assert browser.find_element("id", "run-args").text == "condition: alcohol_dependence"
    browser.save_screenshot(str(shots / "clinician_published_run.png"))


# --------------------------------------------------------------------------- the shareable copy

def test_the_export_reads_as_the_page(example, browser, shots, tmp_path):
    from medhelm_cli.serve import export_main

    out, _ = example
    dest = tmp_path / "share"
    assert export_main(["--suite", "example", "--output-path", str(out), "--out", str(dest)]) == 0
    reader = Reader(out, suite="example")
    metrics = schema_metrics(out, "example")
    for name in group_names(reader):
        open_page(browser, (dest / "index.html").as_uri() + "#/group/" + name, expect="/group/" + name)
        check_group_page(browser, reader, name, metrics)
    open_page(browser, (dest / "index.html").as_uri(), expect="/")
    browser.find_element("css selector", "section.lb-section td.cell[data-row='1'][data-col='2'] a.drill").click()
    deadline = time.monotonic() + 20
    while not js(browser, "return (document.body.dataset.ready || '').startsWith('/run/')"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert browser.find_element("id", "run-title").text == "DISCHARGE-SUMMARY-EXAMPLE · Demo model B"
    browser.save_screenshot(str(shots / "clinician_export_run.png"))
