"""`medi_qa` (HELM `get_medi_qa_spec`): generation, the summarization bundle and the MediQA LLM
jury on the judges of `jury_config_path`."""
from __future__ import annotations

from medhelm_core.catalog import Benchmark
from medhelm_core.runspecs.public import build_public_run_spec


def run_spec(bench: Benchmark, jury_config_path: str | None = None) -> dict:
    return build_public_run_spec(bench, jury_config_path=jury_config_path)
