"""The one resource every asset uses: where the suite's DuckDB file, HELM files and deployments live."""
import os
from typing import Optional

import dagster as dg
from pydantic import PrivateAttr

from medhelm_core.pipeline import Workspace


class MedhelmResource(dg.ConfigurableResource):
    """`output_path` holds `medhelm.duckdb` and HELM's `runs/`; `local_path` is HELM's `prod_env`."""

    output_path: str = os.environ.get("MEDHELM_OUTPUT_PATH", "benchmark_output")
    local_path: str = os.environ.get("MEDHELM_LOCAL_PATH", "prod_env")
    num_threads: int = int(os.environ.get("MEDHELM_NUM_THREADS", "8"))
    _workspace: Optional[Workspace] = PrivateAttr(default=None)

    def workspace(self) -> Workspace:
        if self._workspace is None:
            self._workspace = Workspace(self.output_path, self.local_path, num_threads=self.num_threads)
        return self._workspace
