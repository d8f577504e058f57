"""The resources: `medhelm` (where the suite's DuckDB file, HELM files and deployments live) and
`run_controls` (the invocation's budget and progress display, shared by every engine it runs)."""
import os
from typing import Optional

import dagster as dg
from pydantic import PrivateAttr

from medhelm_core.catalog import benchmark_paths_from_env
from medhelm_core.engine import RunControls
from medhelm_core.run.workspace import Workspace

RunControlsParam = dg.ResourceParam[RunControls]


class MedhelmResource(dg.ConfigurableResource):
    """`output_path` holds `medhelm.duckdb` and HELM's `runs/`; `local_path` is HELM's `prod_env`."""

    output_path: str = os.environ.get("MEDHELM_OUTPUT_PATH", "benchmark_output")
    local_path: str = os.environ.get("MEDHELM_LOCAL_PATH", "prod_env")
    num_threads: int = int(os.environ.get("MEDHELM_NUM_THREADS", "8"))
    # Benchmark folders of the user's own, beside the built-in ones ($MEDHELM_BENCHMARK_PATH).
    benchmark_paths: list[str] = list(benchmark_paths_from_env())
    _workspace: Optional[Workspace] = PrivateAttr(default=None)

    def workspace(self, controls: Optional[RunControls] = None) -> Workspace:
        """The workspace (one per resource); `controls`: the invocation's budget and progress display."""
        if self._workspace is None:
            self._workspace = Workspace(self.output_path, self.local_path, num_threads=self.num_threads,
                                        benchmark_paths=tuple(self.benchmark_paths))
        if controls is not None:
            self._workspace.controls = controls
        return self._workspace
