"""`med_dialog` (HELM `get_med_dialog_spec`): generation, the summarization bundle and the
MedDialog LLM jury on the judges of `jury_config_path`."""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.runspecs.public import build_public_run_spec


def run_spec(bench: Benchmark, subset: Any, jury_config_path: str | None = None) -> dict:
    """Name `med_dialog,subset=<s>` (a comma, so the expanders append with `:`)."""
    return build_public_run_spec(bench, {"subset": subset}, jury_config_path, name_args={"subset": subset})
