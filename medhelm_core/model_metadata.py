"""Model metadata registry as helm-summarize uses it (HELM's model_metadata_registry).

Files are HELM-style YAML: `models:` (ModelMetadata entries) and/or `model_deployments:`
(entries with `name` and `model_name`).  Registration order matters: HELM's `get_all_models()`
is the insertion order of a name->metadata dict (a re-registered name keeps its first position,
takes the last value); rows of leaderboard tables are sorted by the index of their
*model_deployment* in that list (-1 when absent), and schema.json lists used models in it.

The default is HELM's built-in registry layer itself (`medhelm_core/resources/helm_registry/model_metadata.yaml` and
`model_deployments.yaml`, the checkout's `conf/model_metadata.yaml`), transcribed from HELM 0.5.16 in
its order: every model a run can name through a built-in deployment has its display name.
"""
from __future__ import annotations

import datetime
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

import duckdb

from medhelm_core.resources import DEFAULT_MODEL_METADATA_PATH, DEFAULT_MODEL_METADATA_PATHS, ddl  # noqa: F401  (re-exported)
from medhelm_core.yamlio import safe_load

MODEL_FIELDS = ["name", "display_name", "description", "creator_organization_name", "access", "release_date",
                "num_parameters"]


@functools.lru_cache(maxsize=16)  # the built-in layer is ~7,000 YAML lines: parse it once per process
def _parsed(path: str, mtime_ns: int, size: int) -> dict:
    with open(path, encoding="utf-8") as f:
        return safe_load(f) or {}


@dataclass
class ModelRegistry:
    models: dict[str, dict] = field(default_factory=dict)        # name -> metadata, in registration order
    deployments: dict[str, Optional[str]] = field(default_factory=dict)  # deployment -> model_name

    def register_file(self, path: str | Path) -> None:
        stat = Path(path).stat()
        raw = _parsed(str(path), stat.st_mtime_ns, stat.st_size)
        for m in raw.get("models") or []:
            md = {k: m.get(k) for k in MODEL_FIELDS}
            if isinstance(md["release_date"], (datetime.date, datetime.datetime)):
                md["release_date"] = md["release_date"].isoformat()
            self.models[md["name"]] = md
        for d in raw.get("model_deployments") or []:
            self.deployments[d["name"]] = d.get("model_name")

    def metadata_for(self, model: Optional[str], model_deployment: Optional[str]) -> dict:
        """HELM's get_model_metadata_for_adapter_spec (unknown models get a placeholder)."""
        if model in self.models:
            return self.models[model]
        for key in (model_deployment, model):
            target = self.deployments.get(key) if key is not None else None
            if target and target in self.models:
                return self.models[target]
        return {"name": model, "display_name": model, "description": model,
                "creator_organization_name": "Unknown", "access": "open", "release_date": None,
                "num_parameters": None}


def load_model_registry(paths: Iterable[str | Path]) -> ModelRegistry:
    reg = ModelRegistry()
    for p in paths:
        reg.register_file(p)
    return reg


def model_metadata_to_tables(conn: duckdb.DuckDBPyConnection, registry: ModelRegistry) -> None:
    """(Re)write the `model_metadata` and `model_deployments` tables from a registry."""
    conn.execute(ddl("model_metadata"))
    conn.execute("DELETE FROM model_metadata")
    conn.execute("DELETE FROM model_deployments")
    rows = [(i, *(m[k] for k in MODEL_FIELDS)) for i, m in enumerate(registry.models.values())]
    if rows:
        conn.executemany("INSERT INTO model_metadata VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    if registry.deployments:
        conn.executemany("INSERT INTO model_deployments VALUES (?, ?)", list(registry.deployments.items()))
