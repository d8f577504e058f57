"""LLM-jury annotators of the gated scenarios (registered into registry.ANNOTATORS, keyed by HELM's
class_name): DischargeMeAnnotator, MedalignAnnotator, MIMICRRSAnnotator, MIMICBHCAnnotator.

Each is HELM's `LLMAsJuryAnnotator` with a fixed name, prompt template and criteria
(medhelm_core/benchmarks/gated/<scenario>.yaml, `jury`); the judges come from the AnnotatorSpec's
`annotator_models` (the run entry's jury_config_path, else the default judges.yaml).
"""
from __future__ import annotations

from medhelm_core.annotators import register_fixed_juries
from medhelm_core.scenarios.gated._gated import gated_text

GATED_JURY_SCENARIOS = ("dischargeme", "medalign", "mimic_rrs", "mimic_bhc")


register_fixed_juries((s, gated_text(s)) for s in GATED_JURY_SCENARIOS)
