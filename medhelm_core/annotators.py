"""LLM-jury annotator definitions (registered into registry.ANNOTATORS, keyed by HELM's class_name).

* MentalHealthAnnotator, CHWCarePlanAnnotator, StarrPatientInstructionsAnnotator: a fixed name,
  prompt template and criteria (medhelm_core/benchmarks/<scenario>.yaml); the judges come from the
  AnnotatorSpec's `annotator_models`.
* LLMAsJuryAnnotator (the configurable benchmark): everything from the AnnotatorSpec args
  (`name`, `prompt_template`, `annotation_criteria`, `annotator_models`); if `annotation_criteria` is
  absent it is parsed from the template's <rubric_criteria> block, as the run spec does.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from medhelm_core.judges import normalize_annotator_models
from medhelm_core.registry import JuryDef, MedhelmError, register_annotator
from medhelm_core.scenarios.benchmark_config import configurable_text, parse_rubric_criteria
from medhelm_core.scenarios._common import literal

FIXED_JURY_SCENARIOS = ("mental_health", "chw_care_plan", "starr_patient_instructions")


def _judges(args: dict[str, Any], class_name: str) -> dict[str, dict[str, str]]:
    if "annotator_models" not in args:
        raise MedhelmError(f"{class_name}: annotator spec lacks 'annotator_models'")
    return normalize_annotator_models(args["annotator_models"], where=f"{class_name} annotator_models")


def _fixed_jury_factory(scenario: str, text: dict[str, Any]) -> tuple[str, Callable[[dict[str, Any]], JuryDef]]:
    class_name: str = text["run_spec"]["annotator_class"]
    jury = text["jury"]

    def factory(args: dict[str, Any]) -> JuryDef:
        return JuryDef(
            name=jury["name"],
            prompt_template=jury["prompt_template"],
            criteria={k: list(v) for k, v in jury["criteria"].items()},
            judges=_judges(args, class_name),
        )

    factory.__name__ = f"{scenario}_jury"
    return class_name, factory


def register_fixed_juries(texts: Iterable[tuple[str, dict[str, Any]]]) -> None:
    """Register a jury per (scenario, literal text): name, template and criteria from the text
    (`jury:` and `run_spec.annotator_class`), judges from the AnnotatorSpec's annotator_models."""
    for scenario, text in texts:
        class_name, factory = _fixed_jury_factory(scenario, text)
        register_annotator(class_name)(factory)


register_fixed_juries((s, literal(s)) for s in FIXED_JURY_SCENARIOS)


_LLM_AS_JURY = configurable_text()["run_spec"]["annotator_class"]


@register_annotator(_LLM_AS_JURY)
def llm_as_jury(args: dict[str, Any]) -> JuryDef:
    for key in ("name", "prompt_template"):
        if key not in args:
            raise MedhelmError(f"{_LLM_AS_JURY}: annotator spec lacks {key!r}")
    template = args["prompt_template"]
    criteria = args.get("annotation_criteria")
    if criteria is None:
        criteria = parse_rubric_criteria(template, f"{_LLM_AS_JURY} prompt_template")
    if not isinstance(criteria, dict):
        raise MedhelmError(f"{_LLM_AS_JURY}: annotation_criteria must be a mapping")
    return JuryDef(
        name=args["name"],
        prompt_template=template,
        criteria={k: list(v) for k, v in criteria.items()},
        judges=_judges(args, _LLM_AS_JURY),
    )
