"""LLMAsJuryAnnotator (HELM `annotation/model_as_judge.py`), the configurable benchmark's jury:
everything comes from the AnnotatorSpec args (`name`, `prompt_template`, `annotation_criteria`,
`annotator_models`); if `annotation_criteria` is absent it is parsed from the template's
<rubric_criteria> block, as the run spec does."""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.errors import MedhelmError
from medhelm_core.jury.judges import fixed_jury
from medhelm_core.parts import JuryDef


def annotator(bench: Benchmark, args: dict[str, Any]) -> JuryDef:
    class_name = bench.annotator_class
    for key in ("name", "prompt_template"):
        if key not in args:
            raise MedhelmError(f"{class_name}: annotator spec lacks {key!r}")
    template = args["prompt_template"]
    criteria = args.get("annotation_criteria")
    if criteria is None:
        criteria = bench.module("config").parse_rubric_criteria(bench, template, f"{class_name} prompt_template")
    if not isinstance(criteria, dict):
        raise MedhelmError(f"{class_name}: annotation_criteria must be a mapping")
    return fixed_jury({"name": args["name"], "prompt_template": template, "criteria": criteria}, class_name, args)
