"""`starr_patient_instructions:data_path=<csv>[,jury_config_path=<yaml>]` (HELM
`get_starr_patient_instructions_run_spec`): generation, SummarizationMetric + LLMJuryMetric, the
StarrPatientInstructionsAnnotator jury."""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.runspecs.jury_entries import build_jury_run_spec


def run_spec(bench: Benchmark, data_path: Any, jury_config_path: str | None = None) -> dict[str, Any]:
    return build_jury_run_spec(bench, {"data_path": data_path}, jury_config_path)
