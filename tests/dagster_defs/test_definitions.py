"""The Dagster definitions load, and their asset graph is the one recorded in snapshots/definitions.json:
keys, groups, partitions, dependencies, checks, code versions and jobs. A change to the graph shows
up here as a diff; after checking that it is intended, rewrite the snapshot with
`MEDHELM_UPDATE_SNAPSHOTS=1 python -m pytest tests/dagster_defs/test_definitions.py`."""
import json
import os
import warnings
from pathlib import Path

SNAPSHOT = Path(__file__).parent / "snapshots" / "definitions.json"


def _partitions(parts) -> str | None:
    if parts is None:
        return None
    if hasattr(parts, "partitions_defs"):  # two-dimensional: each dimension and its definition
        dims = ",".join(f"{d.name}={_partitions(d.partitions_def)}" for d in parts.partitions_defs)
        return f"{type(parts).__name__}({dims})"
    return f"{type(parts).__name__}:{getattr(parts, 'name', None)}"


def graph_summary() -> dict:
    warnings.filterwarnings("ignore")
    from medhelm_dagster.definitions import defs
    from medhelm_dagster.published import CODE_VERSION

    repo = defs.get_repository_def()
    graph = repo.asset_graph
    checks: dict[str, list[str]] = {}
    for check in graph.asset_check_keys:
        checks.setdefault(check.asset_key.to_user_string(), []).append(check.name)
    assets = {}
    for key in sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()):
        node = graph.get(key)
        parts = node.partitions_def
        assets[key.to_user_string()] = {
            "group": node.group_name,
            "materializable": node.is_materializable,
            "partitions": _partitions(parts),
            "deps": sorted(k.to_user_string() for k in node.parent_keys),
            "checks": sorted(checks.get(key.to_user_string(), [])),
            # The published assets' version is the package's code digest: any edit changes it.
            "code_version": "<package code digest>" if node.code_version == CODE_VERSION else node.code_version,
        }
    jobs = sorted(j.name for j in repo.get_all_jobs() if not j.name.startswith("__"))
    return {"assets": assets, "jobs": jobs}


def test_definitions_match_the_snapshot():
    summary = graph_summary()
    if os.environ.get("MEDHELM_UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    assert summary == json.loads(SNAPSHOT.read_text())


def test_every_layer_of_a_run_is_partitioned_by_benchmark_and_model():
    assets = graph_summary()["assets"]
    grid = ("MultiPartitionsDefinition(benchmark=DynamicPartitionsDefinition:benchmarks,"
            "model=DynamicPartitionsDefinition:models)")
    for layer in ("requests", "completions", "annotations", "instance_stats", "run_stats"):
        assert assets[layer]["partitions"] == grid, layer
    assert assets["completions"]["deps"] == ["requests"] and assets["annotations"]["deps"] == ["completions"]
