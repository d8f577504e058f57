"""Shared helpers of the end-to-end parity tests (synthetic and public golden HELM output)."""
from __future__ import annotations

import json
import re
import shutil
import stat
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from tests.oracle import SHARED, SYNTHETIC, load, run_dirs

EXEMPT = ("inference_runtime",)  # wall-clock time: nobody can reproduce it


def lay_out_inputs(inputs: Path, root: Path, base_url: str) -> Path:
    """Copy an oracle's `inputs/` to `root/work` (writable) and re-point every prod_env base_url at
    the mock server, as the golden runs were laid out."""
    work = root / "work"
    shutil.copytree(inputs, work)
    for p in work.rglob("*"):
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    deployments = work / "prod_env" / "model_deployments.yaml"
    deployments.write_text(re.sub(r"http://127\.0\.0\.1:\d+/v1", base_url, deployments.read_text()))
    return work


def add_mock_deployments(env: Path, base: str, names: list[str]) -> None:
    """Copies of the mock deployment `base` (and of its model metadata) in the prod_env `env`, one a name
    `mockai/<model>`, each asking the mock for `<model>` and displayed as `Mock <model>`."""
    deployments = yaml.safe_load((env / "model_deployments.yaml").read_text())
    metadata = yaml.safe_load((env / "model_metadata.yaml").read_text())
    [dep] = [d for d in deployments["model_deployments"] if d["name"] == base]
    [meta] = [m for m in metadata["models"] if m["name"] == base]
    for name in names:
        model = name.split("/", 1)[1]
        deployments["model_deployments"].append(
            {**dep, "name": name, "model_name": name,
             "client_spec": {**dep["client_spec"], "args": {**dep["client_spec"]["args"], "openai_model_name": model}}})
        metadata["models"].append({**meta, "name": name, "display_name": f"Mock {model}"})
    (env / "model_deployments.yaml").write_text(yaml.safe_dump(deployments, sort_keys=False))
    (env / "model_metadata.yaml").write_text(yaml.safe_dump(metadata, sort_keys=False))


def write_mock_conf(path: Path, benchmarks: tuple[str, ...], models: tuple[str, ...]) -> None:
    """A run-entries conf: every benchmark on every mock model `mockai/mock-gpt-<m>`, priority 1."""
    path.write_text("entries: [\n" + "".join(
        f'  {{description: "{b}:model=mockai/mock-gpt-{m},model_deployment=mockai/mock-gpt-{m}", priority: 1}},\n'
        for b in benchmarks for m in models) + "]\n")


@contextmanager
def in_public_workdir(root: Path):
    """While the block runs: `root` the working directory, root/dagster_home the Dagster home and the
    shared public data mirror MEDHELM_DATA_MIRROR."""
    mp = pytest.MonkeyPatch()
    mp.chdir(root)
    mp.setenv("DAGSTER_HOME", str(root / "dagster_home"))
    mp.setenv("MEDHELM_DATA_MIRROR", str(SHARED / "data" / "public"))
    try:
        yield
    finally:
        mp.undo()


def mirror_with(path: Path, mirror: Path, folders: dict[str, Path]) -> Path:
    """A data mirror at `path`: every folder of `mirror` (linked), with `folders` (name -> source
    folder) put in or over them, as an upstream harness staged its download cache."""
    path.mkdir(parents=True)
    for child in mirror.iterdir():
        if child.name not in folders:
            (path / child.name).symlink_to(child)
    for name, source in folders.items():
        (path / name).mkdir()
        for f in source.iterdir():
            (path / name / f.name).symlink_to(f)
    return path


def flatten_stats(stats, per_instance: bool) -> dict:
    """{(instance id, stat name JSON): (count, mean)} for stats.json / per_instance_stats.json."""
    out = {}
    entries = stats if per_instance else [{"instance_id": None, "stats": stats}]
    for e in entries:
        for s in e["stats"]:
            out[(e["instance_id"], json.dumps(s["name"], sort_keys=True))] = (s["count"], s.get("mean"))
    return out


def assert_stats_equal(gold, ours, per_instance: bool) -> int:
    """Same stat names (per instance), same counts, means within 1e-9 (runtime exempt); returns
    how many values were compared."""
    g, o = flatten_stats(gold, per_instance), flatten_stats(ours, per_instance)
    assert set(o) == set(g)
    compared = 0
    for key, (count, mean) in g.items():
        if any(x in key[1] for x in EXEMPT):
            continue
        assert o[key][0] == count, key
        assert (o[key][1] is None) == (mean is None), key
        if mean is not None:
            assert o[key][1] == pytest.approx(mean, abs=1e-9), key
        compared += 1
    return compared


def assert_runs_equal_gold(out: Path, suite: str, gold_suite: str | None = None) -> int:
    """Each run of the golden synthetic suite `gold_suite` (default: `suite`) against ours under
    out/runs/<suite>: requests, completions and annotations state by state, and both stats files. Returns
    how many request states were compared."""
    compared = 0
    for gold in run_dirs(SYNTHETIC, gold_suite or suite):
        ours = out / "runs" / suite / gold.name
        g_states, o_states = load(gold / "scenario_state.json"), load(ours / "scenario_state.json")
        assert len(o_states["request_states"]) == len(g_states["request_states"])
        for g, o in zip(g_states["request_states"], o_states["request_states"]):
            assert o["request"] == g["request"]
            assert o["result"]["completions"] == g["result"]["completions"]
            assert o.get("annotations") == g.get("annotations")
            compared += 1
        for name in ("per_instance_stats.json", "stats.json"):
            assert_stats_equal(load(gold / name), load(ours / name), per_instance=name.startswith("per"))
    return compared


def table_cells(tables) -> dict:
    """{(table title, row name, column header, occurrence): value} for every cell of every table; a
    table may hold two rows of one name (two deployments of one model), paired by occurrence."""
    out = {}
    for t in tables:
        header = [h["value"] for h in t["header"]]
        seen: dict = {}
        for row in t["rows"]:
            name = row[0].get("value")
            occurrence = seen[name] = seen.get(name, -1) + 1
            for h, cell in zip(header, row):
                out[(t.get("title"), name, h, occurrence)] = cell.get("value")
    return out


def group_files(base: Path) -> list[str]:
    return sorted(p.name for p in (base / "groups").glob("*.json"))


def is_runtime_cell(key: tuple) -> bool:
    return key[0] == "Efficiency" or "Observed inference time" in str(key[2])


def assert_group_cells_equal(gold_groups: Path, our_groups: Path, name: str) -> int:
    """Every cell of `groups/<name>` equal (floats within 1e-9; runtime cells exempt)."""
    from tests.oracle import load

    g, o = table_cells(load(gold_groups / name)), table_cells(load(our_groups / name))
    assert set(o) == set(g), name
    compared = 0
    for key, value in g.items():
        if is_runtime_cell(key):
            continue
        if isinstance(value, float):
            assert o[key] == pytest.approx(value, abs=1e-9), (name, key)
        else:
            assert o[key] == value, (name, key)
        compared += 1
    return compared


def assert_index_tables_equal(gold_groups_json: Path, our_groups_json: Path) -> None:
    """`groups.json`'s index tables: the same cells (HELM orders an auto-generated schema by hash
    seed, so no order check; "Adaptation method" joins a set, so its parts are compared sorted)."""
    from tests.oracle import load

    g, o = table_cells(load(gold_groups_json)), table_cells(load(our_groups_json))
    assert set(o) == set(g)
    for key, value in g.items():
        if key[2] == "Adaptation method":
            assert sorted(o[key].split(", ")) == sorted(value.split(", "))
        elif isinstance(value, float):
            assert o[key] == pytest.approx(value, rel=1e-12, abs=1e-9), key
        else:
            assert o[key] == value, key


def assert_display_files_equal(gold_run: Path, our_run: Path) -> None:
    """instances.json, display_requests.json and display_predictions.json of one run as HELM wrote
    them (prediction stats within 1e-9, wall-clock runtime exempt)."""
    def load(path: Path):
        return json.loads(path.read_text(encoding="utf-8"))

    assert load(our_run / "instances.json") == load(gold_run / "instances.json")
    assert load(our_run / "display_requests.json") == load(gold_run / "display_requests.json")
    g_preds, o_preds = load(gold_run / "display_predictions.json"), load(our_run / "display_predictions.json")
    assert len(o_preds) == len(g_preds)
    for g, o in zip(g_preds, o_preds):
        g_stats, o_stats = g.pop("stats"), o.pop("stats")
        assert o == g
        assert set(o_stats) == set(g_stats)
        for k, v in g_stats.items():
            if k not in EXEMPT:
                assert o_stats[k] == pytest.approx(v, abs=1e-9), k


def scenario_states(gold_run: Path, our_run: Path, expected: int) -> tuple[dict, dict]:
    """(HELM's scenario_state.json, ours) of one run, after checking run_spec.json and scenario.json
    equal HELM's and both hold `expected` request states (the caller compares the states)."""
    def load(path: Path):
        return json.loads(path.read_text(encoding="utf-8"))

    assert load(our_run / "run_spec.json") == load(gold_run / "run_spec.json")
    assert load(our_run / "scenario.json") == load(gold_run / "scenario.json")
    g_states, o_states = load(gold_run / "scenario_state.json"), load(our_run / "scenario_state.json")
    assert len(o_states["request_states"]) == len(g_states["request_states"]) == expected
    return g_states, o_states


def assert_leaderboard_equal(gold: Path, ours: Path) -> int:
    """The same group files, every cell of each equal to HELM's, and the index tables of groups.json
    (`gold`/`ours`: a suite's or release's folder); returns how many cells were compared."""
    assert group_files(ours) == group_files(gold)
    compared = sum(assert_group_cells_equal(gold / "groups", ours / "groups", name) for name in group_files(gold))
    assert_index_tables_equal(gold / "groups.json", ours / "groups.json")
    return compared
