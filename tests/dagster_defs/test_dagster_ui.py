"""The Dagster UI path, through the webserver `dg dev` serves: on a fresh copy of the checkout with the
shipped example run (scripts/example.sh) and the README's Dagster settings, "Materialize all" (the
backfill the button launches) ends green in a few runs, a partition range backfills in one run, a
user error reads as our one line with what it names as metadata, and headless Chromium shows the
layers, the launchpad's resource config and the partitions. Screenshots go to $MEDHELM_SCREENSHOT_DIR
(default: the test's tmp folder)."""
import os
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from medhelm_core.run.grid import benchmark_of
from tests.browser import chromium
from tests.dagster_dev import DagsterDev, fresh_checkout

LAYER_GROUPS = ["conf", "datasets", "requests", "completions", "annotations", "scores", "leaderboard", "published"]
BACKFILL = """mutation($p: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $p) {
  __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }"""
BACKFILL_STATUS = """query($id: String!) { partitionBackfillOrError(backfillId: $id) { ... on PartitionBackfill {
  status runs(limit: 100) { id status tags { key value } } } } }"""


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dagster-ui")
    work = fresh_checkout(tmp)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("MEDHELM_", "DAGSTER_"))},
           "DAGSTER_HOME": str(work / ".dagster_home"), "MEDHELM_LOCAL_PATH": "examples/prod_env"}
    r = subprocess.run(["bash", "scripts/example.sh"], cwd=work, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    dev = DagsterDev(work, env, tmp / "dg-dev.log")
    try:
        yield dev
    finally:
        dev.stop()


def _wait_backfill(ui, backfill_id: str, timeout_s: float = 600) -> dict:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        state = ui.graphql(BACKFILL_STATUS, {"id": backfill_id})["partitionBackfillOrError"]
        if state["status"] not in ("REQUESTED", "CANCELING"):
            return state
        time.sleep(2)
    raise AssertionError(f"backfill {backfill_id} still running after {timeout_s}s")


def _materializable(ui) -> list[dict]:
    nodes = ui.graphql("{ assetNodes { assetKey { path } isExecutable isObservable } }")["assetNodes"]
    return [{"path": n["assetKey"]["path"]} for n in nodes if n["isExecutable"] and not n["isObservable"]]


def test_materialize_all_is_green_in_a_few_runs(ui):
    """What the "Materialize all" button launches: every asset, every partition. The published group
    follows nothing by default and says so instead of failing."""
    selection = _materializable(ui)
    assert len(selection) > 25
    launched = ui.graphql(BACKFILL, {"p": {"assetSelection": selection, "allPartitions": True}})
    backfill_id = launched["launchPartitionBackfill"]["backfillId"]
    state = _wait_backfill(ui, backfill_id)
    assert state["status"] == "COMPLETED_SUCCESS", state
    partitions = ui.graphql('{ a: assetNodeOrError(assetKey: {path: ["requests"]}) { ... on AssetNode { '
                            'partitionKeys } } }')["a"]["partitionKeys"]
    assert len(partitions) == 6  # 3 benchmarks × 2 models
    assert all(r["status"] == "SUCCESS" for r in state["runs"])
    # The per-run layers: Dagster cuts a two-dimensional backfill into a run per model column; plus
    # conf, datasets, summaries. The first column's run to start does every cell of the backfill
    # (one engine call); the other finds it done and records its own column.
    grid_runs = [r for r in state["runs"] if "|" in _range(r)[0]]
    columns = [_range(r) for r in grid_runs]
    assert sorted(start.split("|")[1] for start, _ in columns) == ["example/demo/model-a", "example/demo/model-b"]
    assert all(start.split("|")[1] == end.split("|")[1] for start, end in columns)
    assert len(state["runs"]) == len(columns) + 3
    recorded = {r["id"]: _completions_recorded(ui, r["id"]) for r in grid_runs}
    claimant, other = sorted(grid_runs, key=lambda r: -len(recorded[r["id"]]))
    assert recorded[claimant["id"]] == set(partitions)
    assert recorded[other["id"]] == {k for k in partitions if k.endswith("|" + _range(other)[0].split("|")[1])}
    assert _started(ui, claimant["id"]) <= _started(ui, other["id"])
    note = ui.graphql('{ a: assetNodeOrError(assetKey: {path: ["published_import"]}) { ... on AssetNode { '
                      'assetMaterializations(limit: 1) { metadataEntries { label ... on TextMetadataEntry { text } '
                      '... on BoolMetadataEntry { boolValue } } } } } }')["a"]["assetMaterializations"][0]
    entries = {e["label"]: e.get("text", e.get("boolValue")) for e in note["metadataEntries"]}
    assert entries["followed"] is False and "release" in entries["note"]
    # a run's materializations name it as HELM does, with its suite and edition (here every run was
    # up to date after scripts/example.sh: "reused"; a run that asked calls has new/reused/cost_usd)
    latest = ui.graphql('{ a: assetNodeOrError(assetKey: {path: ["completions"]}) { ... on AssetNode { '
                        'assetMaterializations(limit: 1) { partition metadataEntries { label '
                        '... on TextMetadataEntry { text } } } } } }')["a"]["assetMaterializations"][0]
    labels = {e["label"]: e.get("text") for e in latest["metadataEntries"]}
    assert {"run_name", "suite", "edition", "reused"} <= set(labels)
    benchmark, model = latest["partition"].split("|")  # the cell: benchmark × <suite>/<deployment>
    assert benchmark == benchmark_of(labels["run_name"]) and model.startswith(labels["suite"] + "/demo/")
    assert labels["edition"] == "helm-0.5.16"


def _completions_recorded(ui, run_id: str) -> set[str]:
    run = ui.graphql('query($id: ID!) { runOrError(runId: $id) { ... on Run { assetMaterializations { '
                     'partition assetKey { path } } } } }', {"id": run_id})["runOrError"]
    return {m["partition"] for m in run["assetMaterializations"] if m["assetKey"]["path"] == ["completions"]}


def _started(ui, run_id: str) -> float:
    return ui.graphql('query($id: ID!) { runOrError(runId: $id) { ... on Run { startTime } } }',
                      {"id": run_id})["runOrError"]["startTime"]


def _range(run: dict) -> tuple[str, str]:
    tags = {t["key"]: t["value"] for t in run["tags"]}
    return tags.get("dagster/asset_partition_range_start", ""), tags.get("dagster/asset_partition_range_end", "")


def test_a_models_column_backfills_in_one_run(ui):
    keys = ui.graphql('{ a: assetNodeOrError(assetKey: {path: ["completions"]}) { ... on AssetNode { '
                      'partitionKeys } } }')["a"]["partitionKeys"]
    column = [k for k in keys if k.endswith("|example/demo/model-b")]
    assert len(column) == 3
    layers = [{"path": [k]} for k in ("requests", "completions", "annotations", "instance_stats", "run_stats")]
    launched = ui.graphql(BACKFILL, {"p": {"assetSelection": layers, "partitionNames": column}})
    state = _wait_backfill(ui, launched["launchPartitionBackfill"]["backfillId"])
    assert state["status"] == "COMPLETED_SUCCESS" and len(state["runs"]) == 1, state


def test_a_user_error_reads_as_our_one_line_with_what_it_names(ui, tmp_path):
    """A bad conf through the launchpad's job: the run's failure event carries our line and the file."""
    launched = ui.graphql("""mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename
        ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } ... on RunConfigValidationInvalid {
        errors { message } } } }""", {"p": {
        "selector": {"repositoryLocationName": "medhelm", "repositoryName": "__repository__", "jobName": "register_suite"},
        "runConfigData": {"ops": {"run_entries": {"config": {"conf_paths": ["conf/example.conf"], "suite": "x"}}},
                          "resources": {"medhelm": {"config": {"local_path": "no_such_prod_env"}}}}}})
    run_id = launched["launchRun"]["run"]["runId"]
    deadline = time.time() + 300
    while time.time() < deadline:
        run = ui.graphql('query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }', {"id": run_id})
        if run["runOrError"]["status"] in ("FAILURE", "SUCCESS", "CANCELED"):
            break
        time.sleep(2)
    assert run["runOrError"]["status"] == "FAILURE"
    events = ui.graphql("""query($id: ID!) { logsForRun(runId: $id) { ... on EventConnection { events {
        __typename ... on ExecutionStepFailureEvent { error { message } failureMetadata { metadataEntries {
        label ... on TextMetadataEntry { text } } } } } } } }""", {"id": run_id})["logsForRun"]["events"]
    [failure] = [e for e in events if e["__typename"] == "ExecutionStepFailureEvent"]
    headline = failure["error"]["message"].strip().splitlines()[0]
    assert headline.startswith("dagster._core.definitions.events.Failure: medhelm: conf/example.conf:4: "
                               "unknown model deployment 'demo/model-a'")
    metadata = {e["label"]: e["text"] for e in failure["failureMetadata"]["metadataEntries"]}
    assert metadata == {"file": "conf/example.conf:4", "deployment": "demo/model-a"}


def _page(driver, url: str, wait_for: str, timeout_s: float = 60) -> str:
    driver.get(url)
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        prompt = driver.find_elements("xpath", "//button[normalize-space()='Skip']")  # Dagster's newsletter prompt
        for button in prompt:
            button.click()
        text = driver.find_element("tag name", "body").text
        if wait_for in text and not prompt:
            time.sleep(1.5)  # the graph's layout and the prompt's fade-out settle
            return driver.find_element("tag name", "body").text
        time.sleep(1)
    raise AssertionError(f"{url}: {wait_for!r} never appeared; page says: {text[:1500]}")


def test_the_ui_in_a_real_browser(ui, tmp_path):
    shots = Path(os.environ.get("MEDHELM_SCREENSHOT_DIR") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    with chromium() as driver:
        driver.get(f"{ui.url}/server_info")  # Dagster's newsletter prompt, answered once for this origin
        driver.execute_script("window.localStorage.setItem('communityNux', '\"1\"')")
        lineage = _page(driver, f"{ui.url}/asset-groups", "Materialize all")
        assert all(g in lineage.split("\n") for g in LAYER_GROUPS), lineage[:1500]
        driver.save_screenshot(str(shots / "dagster-lineage.png"))
        launchpad = _page(driver, f"{ui.url}/locations/medhelm/jobs/run_layers/playground", "resources:")
        assert "medhelm:" in launchpad and "local_path:" in launchpad and "env: MEDHELM_LOCAL_PATH" in launchpad
        driver.save_screenshot(str(shots / "dagster-launchpad.png"))
        partitions = _page(driver, f"{ui.url}/assets/requests?view=partitions", "Materialized (6)")
        assert "Failed (0)" in partitions and "Missing (0)" in partitions
        # Dagster's view of a two-dimensional asset: the benchmarks, and the models of the one chosen.
        assert {"MED-YESNO-EXAMPLE", "shc_ptbm_med", "example/demo/model-a", "example/demo/model-b"} <= set(
            partitions.split("\n"))
        cell = quote("shc_ptbm_med|example/demo/model-b")
        chosen = _page(driver, f"{ui.url}/assets/requests?view=partitions&partition={cell}",
                       "shc_ptbm_med:model=demo_model-b,model_deployment=demo_model-b")  # the cell's HELM run name
        assert "helm-0.5.16" in chosen
        driver.save_screenshot(str(shots / "dagster-partitions.png"))
        for text in (lineage, launchpad, partitions, chosen):
            assert "Something went wrong" not in text and "Unexpected GraphQL error" not in text
