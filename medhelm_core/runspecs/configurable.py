"""The metric and annotator specs HELM's `BenchmarkConfig.get_metric_specs()` /
`get_annotator_specs()` derive from a user's benchmark config (parsed by
`medhelm_core.scenarios.benchmark_config`), for the run-spec function of
`medhelm_core/benchmarks/private/medhelm_configurable_benchmark/` (HELM
`get_medhelm_configurable_benchmark_spec`). `bench` is that folder's benchmark: its benchmark.yaml
holds the fixed names (metric names, the annotator class, the rubric tags)."""
from __future__ import annotations

from typing import Any

from medhelm_core.helm_types import annotator_spec
from medhelm_core.runspecs.metric_bundles import (
    basic_metric_specs,
    exact_match_metric_specs,
    llm_jury_metric_spec,
    summarization_metric_args,
    summarization_metric_specs,
)
from medhelm_core.scenarios.benchmark_config import (
    BenchmarkConfig,
    err as config_error,
    judge_annotator_models,
    parse_rubric_criteria,
    read_judge_prompt,
)


def metric_specs(bench, config: BenchmarkConfig) -> list[dict[str, Any]]:
    """HELM `BenchmarkConfig.get_metric_specs()`."""
    text = bench.text["run_spec"]
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
            raise config_error(bench, config.path, f"unknown metric name: {metric.name!r}")
    return specs


def annotator_specs(bench, config: BenchmarkConfig) -> list[dict[str, Any]]:
    """HELM `BenchmarkConfig.get_annotator_specs()`: one LLMAsJuryAnnotator per jury_score metric."""
    class_name = bench.text["run_spec"]["annotator_class"]
    specs = []
    for metric in config.metrics:
        if metric.is_jury:
            template = read_judge_prompt(bench, config, metric)
            criteria = parse_rubric_criteria(bench, template, f"{bench.name}: judge prompt_file {metric.prompt_file}")
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
