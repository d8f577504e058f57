"""HELM run-entry confs, run-name expansion and model deployments (helm-run's front half).

* `run_entries`: `.conf` files (HOCON) -> `RunEntry` list;
* `description`: `name:k=v,...` parsing and the run-expander keys;
* `expand`: run entries -> RunSpec dicts with HELM's run directory names;
* `deployments`: `prod_env` model deployments / metadata / credentials and API-key resolution.
"""
from medhelm_core.helm_config.deployments import (
    Credentials,
    Deployment,
    ModelMetadata,
    ModelRegistry,
    api_key_env_var,
    load_credentials,
    load_deployments,
    load_model_registry,
    resolve_api_key,
    resolve_base_url,
)
from medhelm_core.helm_config.description import ParsedDescription, parse_description, split_expander_args
from medhelm_core.helm_config.expand import (
    ExpandedRun,
    check_models_to_run,
    dry_run_names,
    expand_confs,
    run_entries_to_run_specs,
)
from medhelm_core.helm_config.entry_files import load_run_entries, read_run_entries
from medhelm_core.helm_config.run_entries import RunEntry, parse_hocon

__all__ = [
    "Credentials", "Deployment", "ModelMetadata", "ModelRegistry", "api_key_env_var", "load_credentials",
    "load_deployments", "load_model_registry", "resolve_api_key", "resolve_base_url",
    "ParsedDescription", "parse_description", "split_expander_args",
    "ExpandedRun", "check_models_to_run", "dry_run_names", "expand_confs", "run_entries_to_run_specs",
    "RunEntry", "load_run_entries", "parse_hocon", "read_run_entries",
]
