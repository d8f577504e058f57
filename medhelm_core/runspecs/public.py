"""The RunSpec builder of the public MedHELM benchmarks (HELM `medhelm_run_specs.py`), from a
benchmark's `run_spec:` text; each folder's `run_spec.py` calls it with HELM's signature, so a run
entry with an argument HELM's function does not take is refused.

Metric bundles (`run_spec.metric_bundle` in the YAML):
* `exact_match`: the scenario's own metric classes (if any) + `get_exact_match_metric_specs()`;
* `basic_empty`: the scenario's own metric classes + `get_basic_metric_specs([])` (medec);
* `summarization_jury`: `get_summarization_metric_specs({task, device, ...})` + `LLMJuryMetric`
  (`<entry>_accuracy`, default 1.0), with the scenario's jury annotator on the judges of
  `jury_config_path` (HELM's judges.yaml by default).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from medhelm_core.helm_types import (
    annotator_spec,
    generation_adapter_spec,
    metric_spec,
    multiple_choice_joint_adapter_spec,
    run_spec,
    scenario_spec,
)
from medhelm_core.errors import MedhelmError
from medhelm_core.runspecs.jury_entries import jury_specs
from medhelm_core.runspecs.metric_bundles import (
    basic_metric_specs,
    exact_match_metric_specs,
)

if TYPE_CHECKING:  # for annotations only (nothing imported at run time)
    from medhelm_core.catalog import Benchmark


def _adapter(spec: dict[str, Any]) -> dict[str, Any]:
    kwargs = dict(spec["adapter"])
    if spec["adapter_method"] == "generation":
        return generation_adapter_spec(**kwargs)
    if spec["adapter_method"] == "multiple_choice_joint":
        return multiple_choice_joint_adapter_spec(**kwargs)
    raise MedhelmError(f"unknown adapter method {spec['adapter_method']!r}")  # pragma: no cover


def build_public_run_spec(bench: Benchmark, scenario_args: dict[str, Any] | None = None,
                          jury_config_path: str | None = None, name_args: dict[str, Any] | None = None) -> dict:
    """The RunSpec before run expanders are applied."""
    entry = bench.name
    spec = bench.text["run_spec"]
    metrics = [metric_spec(cls, {}) for cls in spec.get("metric_classes", [])]
    annotators = None
    bundle = spec["metric_bundle"]
    if bundle == "exact_match":
        metrics += exact_match_metric_specs()
    elif bundle == "basic_empty":
        metrics += basic_metric_specs([])
    elif bundle == "summarization_jury":
        metrics, annotators = jury_specs(bench, jury_config_path)
    else:  # pragma: no cover - the YAML files are ours
        raise MedhelmError(f"{entry}: unknown metric bundle {bundle!r}")
    if bundle != "summarization_jury" and spec.get("annotator_class"):
        annotators = [annotator_spec(spec["annotator_class"])]
    return run_spec(
        name=spec["name"].format(**(name_args or {})),
        scenario=scenario_spec(spec["scenario_class"], scenario_args or {}),
        adapter=_adapter(spec),
        metric_specs=metrics,
        groups=spec["groups"],
        annotators=annotators,
    )
