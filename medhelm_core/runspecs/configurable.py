"""`medhelm_configurable_benchmark:config_path=<yaml>` (HELM `get_medhelm_configurable_benchmark_spec`),
with the metric and annotator specs HELM's `BenchmarkConfig.get_metric_specs()` /
`get_annotator_specs()` derive from the config (parsed by `medhelm_core.scenarios.benchmark_config`)."""
from __future__ import annotations

from typing import Any

from medhelm_core.helm_types import annotator_spec, generation_adapter_spec, run_spec, scenario_spec
from medhelm_core.registry import run_spec_function
from medhelm_core.runspecs.metric_bundles import (
    basic_metric_specs,
    exact_match_metric_specs,
    llm_jury_metric_spec,
    summarization_metric_args,
    summarization_metric_specs,
)
from medhelm_core.scenarios.benchmark_config import (
    BenchmarkConfig,
    configurable_text,
    err as config_error,
    judge_annotator_models,
    load_benchmark_config,
    parse_rubric_criteria,
    read_judge_prompt,
)

ENTRY = "medhelm_configurable_benchmark"


def metric_specs(config: BenchmarkConfig) -> list[dict[str, Any]]:
    """HELM `BenchmarkConfig.get_metric_specs()`."""
    text = configurable_text()["run_spec"]
    specs: list[dict[str, Any]] = []
    summarization = False
    for metric in config.metrics:
        if metric.name == text["exact_match_metric"]:
            specs.extend(exact_match_metric_specs())
        elif metric.name == text["jury_metric"]:
            specs.append(llm_jury_metric_spec(text["jury_metric"], config.name, judge_annotator_models(metric)))
            if len(config.metrics) == 1:
                specs.extend(basic_metric_specs([]))
        elif metric.name in text["summarization_metrics"]:
            if not summarization:
                summarization = True
                specs.extend(summarization_metric_specs(summarization_metric_args(config.name)))
        else:
            raise config_error(config.path, f"unknown metric name: {metric.name!r}")
    return specs


def annotator_specs(config: BenchmarkConfig) -> list[dict[str, Any]]:
    """HELM `BenchmarkConfig.get_annotator_specs()`: one LLMAsJuryAnnotator per jury_score metric."""
    class_name = configurable_text()["run_spec"]["annotator_class"]
    specs = []
    for metric in config.metrics:
        if metric.is_jury:
            template = read_judge_prompt(config, metric)
            criteria = parse_rubric_criteria(template, f"{ENTRY}: judge prompt_file {metric.prompt_file}")
            specs.append(
                annotator_spec(
                    class_name,
                    {
                        "name": config.name,
                        "prompt_template": template,
                        "annotation_criteria": criteria,
                        "annotator_models": judge_annotator_models(metric),
                    },
                )
            )
    return specs


@run_spec_function("medhelm_configurable_benchmark")
def get_medhelm_configurable_benchmark_spec(config_path: Any) -> dict[str, Any]:
    """Reads the config (and any judge prompt) now, as HELM does; the dataset is read by the scenario.

    Generation with no instructions and no nouns (prompt = rendered template + "\\n"), temperature 0,
    `max_tokens` from the config (default 1024), zero-shot; name and group = the config's name;
    `annotators` is always a list (`[]` without jury_score)."""
    config = load_benchmark_config(config_path)
    text = configurable_text()["run_spec"]
    scenario = scenario_spec(text["scenario_class"], {"name": config.name, "config_path": config_path})
    adapter = generation_adapter_spec(max_tokens=config.max_tokens, **text["adapter"])
    annotators = annotator_specs(config)
    metrics = metric_specs(config)
    return run_spec(
        name=config.name,
        scenario=scenario,
        adapter=adapter,
        metric_specs=metrics,
        groups=[config.name],
        annotators=annotators,
    )
