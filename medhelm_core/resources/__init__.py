"""Where the files the library reads at run time are: the one place that computes these paths.

They are package data (shipped in the wheel, so `pip install medhelm-build` works outside a
checkout), kept in this folder:

* `sql/{staging,intermediate,marts}/`: the leaderboard SQL models, one table per file with its
  `.yml` (`medhelm_core.summarize.sql_models`, the Dagster SQL assets); `sql/ddl/`: every other
  table (pipeline, costs, summarize inputs, schema, model metadata, published import; `ddl(name)`);
* `schema/schema_medhelm.yaml`: the MedHELM presentation schema, medhelm-summarize's default;
* `settings/`: the project's built-in settings layers: `deployments.yaml` (rate limits, retries,
  prices; `<local-path>/medhelm_deployments.yaml` overrides it), `judges.yaml` (the default LLM
  jury), `judges_public.yaml` (the same judges through the vendors' APIs, `--judges public`),
  `editions/` (the upstream editions' switches) and `refusal_patterns.yaml`;
* `helm_registry/`: HELM's built-in registry layer, transcribed (`model_deployments.yaml`,
  `model_metadata.yaml`, `tokenizer_configs.yaml`), below a prod_env's own files.

In a checkout the repository root's `sql/`, `schema/` and `conf/{deployments,judges,judges_public,
model_metadata}.yaml` and `conf/editions` are symlinks to these, so the paths the docs give keep
working. The root `conf/` also holds user inputs (`example.conf`, `medhelm_public.yaml`), which are
not package data. The package data kept beside its code (benchmark folders, the metric bundles, the
page's static files) is located here too (`BENCHMARKS_DIR`, ...). The code that reads HELM's
formats (run-entry confs, prod_env deployments, credentials) is `medhelm_core.helm_config`.
"""
from __future__ import annotations

import functools
from pathlib import Path

RESOURCES_DIR = Path(__file__).resolve().parent

SQL_DIR = RESOURCES_DIR / "sql"
SCHEMA_DIR = RESOURCES_DIR / "schema"
DEFAULT_SCHEMA_PATH = SCHEMA_DIR / "schema_medhelm.yaml"
SETTINGS_DIR = RESOURCES_DIR / "settings"
DEFAULT_DEPLOYMENTS_SETTINGS_PATH = SETTINGS_DIR / "deployments.yaml"
DEFAULT_JUDGES_CONFIG = SETTINGS_DIR / "judges.yaml"
PUBLIC_JUDGES_CONFIG = SETTINGS_DIR / "judges_public.yaml"  # `--judges public`: the same judges, vendors' APIs
# HELM's built-in registry layer, transcribed: model_deployments.yaml, model_metadata.yaml, tokenizer_configs.yaml.
HELM_REGISTRY_DIR = RESOURCES_DIR / "helm_registry"

DDL_DIR = SQL_DIR / "ddl"

# Package data kept beside the code that reads it; its paths are computed here too.
PACKAGE_DIR = RESOURCES_DIR.parent
BENCHMARKS_DIR = PACKAGE_DIR / "benchmarks"  # one folder per benchmark (medhelm_core.catalog)
METRIC_BUNDLES_PATH = PACKAGE_DIR / "runspecs" / "metric_bundles.yaml"
SERVER_STATIC_DIR = PACKAGE_DIR / "server" / "static"
# helm-summarize's model metadata: HELM's built-in registry layer itself (display names, and HELM's
# get_all_models() order that sorts leaderboard rows), plus its deployments' deployment -> model map.
DEFAULT_MODEL_METADATA_PATH = HELM_REGISTRY_DIR / "model_metadata.yaml"
DEFAULT_MODEL_METADATA_PATHS = (DEFAULT_MODEL_METADATA_PATH, HELM_REGISTRY_DIR / "model_deployments.yaml")


@functools.cache  # package data: read once per process
def ddl(name: str) -> str:
    """The text of `sql/ddl/<name>.sql` (statements separated by `;`, run with one `execute`)."""
    return (DDL_DIR / f"{name}.sql").read_text(encoding="utf-8")


__all__ = ["DDL_DIR", "ddl", "PACKAGE_DIR", "BENCHMARKS_DIR", "HELM_REGISTRY_DIR", "METRIC_BUNDLES_PATH",
           "SERVER_STATIC_DIR", "RESOURCES_DIR", "SQL_DIR", "SCHEMA_DIR", "DEFAULT_SCHEMA_PATH", "SETTINGS_DIR",
           "DEFAULT_DEPLOYMENTS_SETTINGS_PATH", "DEFAULT_JUDGES_CONFIG", "DEFAULT_MODEL_METADATA_PATH",
           "DEFAULT_MODEL_METADATA_PATHS"]
