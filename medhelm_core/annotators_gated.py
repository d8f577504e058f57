"""LLM-jury annotators of the gated scenarios (registered into registry.ANNOTATORS, keyed by HELM's
class_name): DischargeMeAnnotator, MedalignAnnotator, MIMICRRSAnnotator, MIMICBHCAnnotator.

Each is HELM's `LLMAsJuryAnnotator` with a fixed name, prompt template and criteria
(medhelm_core/benchmarks/gated/<scenario>.yaml, `jury`); the judges come from the AnnotatorSpec's
`annotator_models` (the run entry's jury_config_path, else the default judges.yaml).
"""
from __future__ import annotations

from typing import Any, Callable

from medhelm_core.judges import normalize_annotator_models
from medhelm_core.registry import JuryDef, MedhelmError, register_annotator
from medhelm_core.scenarios.gated._gated import gated_text

GATED_JURY_SCENARIOS = ("dischargeme", "medalign", "mimic_rrs", "mimic_bhc")


def _jury_factory(scenario: str) -> tuple[str, Callable[[dict[str, Any]], JuryDef]]:
    text = gated_text(scenario)
    class_name: str = text["run_spec"]["annotator_class"]
    jury = text["jury"]

    def factory(args: dict[str, Any]) -> JuryDef:
        if "annotator_models" not in args:
            raise MedhelmError(f"{class_name}: annotator spec lacks 'annotator_models'")
        return JuryDef(
            name=jury["name"],
            prompt_template=jury["prompt_template"],
            criteria={k: list(v) for k, v in jury["criteria"].items()},
            judges=normalize_annotator_models(args["annotator_models"], where=f"{class_name} annotator_models"),
        )

    factory.__name__ = f"{scenario}_jury"
    return class_name, factory


for _scenario in GATED_JURY_SCENARIOS:
    _class_name, _factory = _jury_factory(_scenario)
    register_annotator(_class_name)(_factory)
