"""The resources: `medhelm` (where the suite's DuckDB file, HELM files and deployments live) and
`run_controls` (the invocation's budget and progress display, shared by every engine it runs).

Their settings are resource config, visible and editable in the launchpad (`resources: medhelm:
config: local_path: …`). `from_env()` (what the code location uses) binds a field to its
environment variable with `dg.EnvVar` when that variable is set, so its value is read when a run
starts, not when the code is imported; otherwise the field keeps its documented default.
"""
import os
from typing import Mapping, Optional

import dagster as dg
from pydantic import Field, PrivateAttr

from medhelm_core.catalog import PATH_ENV
from medhelm_core.engine import RunControls
from medhelm_core.run.workspace import Workspace

RunControlsParam = dg.ResourceParam[RunControls]

# field -> its environment variable (what medhelm-run's flags are called in the environment)
MEDHELM_ENV = {"output_path": "MEDHELM_OUTPUT_PATH", "local_path": "MEDHELM_LOCAL_PATH",
               "num_threads": "MEDHELM_NUM_THREADS", "storage": "MEDHELM_STORAGE"}


def env_bound(fields: Mapping[str, str], types: Mapping[str, type] | None = None,
              env: Mapping[str, str] | None = None) -> dict:
    """`dg.EnvVar` (or `EnvVar.int`) for each field whose variable is set (read at launch)."""
    env = os.environ if env is None else env
    types = types or {}
    return {field: (dg.EnvVar.int(var) if types.get(field) is int else dg.EnvVar(var))
            for field, var in fields.items() if env.get(var)}


class MedhelmResource(dg.ConfigurableResource):
    """`output_path` holds `medhelm.duckdb` and HELM's `runs/`; `local_path` is HELM's `prod_env`."""

    output_path: str = Field(default="benchmark_output", description="holds medhelm.duckdb and HELM's runs/ "
                             "(medhelm-run --output-path; $MEDHELM_OUTPUT_PATH)")
    local_path: str = Field(default="prod_env", description="HELM's prod_env: model_deployments.yaml, "
                            "credentials.conf, ... (medhelm-run --local-path; $MEDHELM_LOCAL_PATH)")
    num_threads: int = Field(default=8, description="requests in flight per deployment unless its settings say "
                             "otherwise (medhelm-run --num-threads; $MEDHELM_NUM_THREADS)")
    benchmark_paths: list[str] = Field(default=[], description="benchmark folders of your own, beside the "
                                       f"built-in ones (medhelm-run --benchmark-path; ${PATH_ENV})")
    storage: Optional[str] = Field(default=None, description="where the tables live: duckdb:PATH (default: "
                                   "<output_path>/medhelm.duckdb; medhelm-run --storage; $MEDHELM_STORAGE)")
    _workspace: Optional[Workspace] = PrivateAttr(default=None)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "MedhelmResource":
        env = os.environ if env is None else env
        paths = [p for p in env.get(PATH_ENV, "").split(os.pathsep) if p]
        return cls(**env_bound(MEDHELM_ENV, {"num_threads": int}, env),
                   **({"benchmark_paths": paths} if paths else {}))

    def workspace(self, controls: Optional[RunControls] = None) -> Workspace:
        """The workspace (one per resource); `controls`: the invocation's budget and progress display."""
        if self._workspace is None:
            self._workspace = Workspace(self.output_path, self.local_path, num_threads=self.num_threads,
                                        benchmark_paths=tuple(self.benchmark_paths), storage=self.storage)
        if controls is not None:
            self._workspace.controls = controls
        return self._workspace
