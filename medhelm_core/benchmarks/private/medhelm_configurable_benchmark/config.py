"""User-defined MedHELM benchmarks: the config YAML behind `medhelm_configurable_benchmark`.

Mirrors HELM's `run_specs/medhelm/benchmark_config.py`:

```yaml
name: MY-BENCH                 # RunSpec name, group, scenario name
description: ...
prompt_file: path/prompt.txt   # str.format-style template over the dataset's columns
dataset_file: path/data.csv    # pandas.read_csv; optional correct_answer / incorrect_answers (JSON list)
max_tokens: 256                # optional, default 1024
metrics:                       # metrics[0] is the main metric
  - name: exact_match          # or rouge_1/rouge_2/rouge_l/BERTScore-P/-R/-F, or:
  - name: jury_score
    prompt_file: path/judge_prompt.txt   # must contain <rubric_criteria>{...json...}</rubric_criteria>
    judges:
      - name: provider/judge-deployment   # HELM keys the jury by the deployment
        model_name: provider/judge-model
```

This folder's own module (`bench.module("config")` from its scenario, run spec and annotator, which
pass their `bench`: its name starts the error messages, its benchmark.yaml holds the fixed names)
parses and validates the config, and builds the metric and annotator specs it implies (HELM's
`BenchmarkConfig.get_metric_specs()` / `get_annotator_specs()`).
Paths are used as written (relative to the current working directory), as in HELM. Errors HELM
raises as KeyError/ValueError/IndexError/AssertionError become one-line MedhelmErrors naming the
config file.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from medhelm_core.catalog import Benchmark
from medhelm_core.errors import MedhelmError
from medhelm_core.helm_types import annotator_spec
from medhelm_core.runspecs.metric_bundles import (
    basic_metric_specs,
    exact_match_metric_specs,
    llm_jury_metric_spec,
    summarization_metric_args,
    summarization_metric_specs,
)
from medhelm_core.scenarios.common import first_line


@dataclass(frozen=True)
class MetricConfig:
    """One `metrics` entry; `prompt_file`/`judges` only for jury_score (HELM's JuryMetricConfig)."""

    name: Any
    prompt_file: str | None = None
    judges: list[dict[str, str]] | None = None  # [{"model_name", "model_deployment"}]

    @property
    def is_jury(self) -> bool:
        return self.judges is not None


@dataclass(frozen=True)
class BenchmarkConfig:
    path: str
    name: Any
    description: Any
    prompt_file: str
    dataset_file: str
    metrics: list[MetricConfig] = field(default_factory=list)
    max_tokens: Any = 1024

    @property
    def main_metric(self) -> MetricConfig:
        return self.metrics[0]

    def is_llm_as_judge(self) -> bool:
        # HELM: any(metric.name == "jury_score"); exactly the metrics parsed with judges (_convert_metrics)
        return any(m.is_jury for m in self.metrics)


def err(bench: Benchmark, path: str, message: str) -> MedhelmError:
    return MedhelmError(f"{bench.name}: config_path {path}: {message}")


def _convert_metrics(bench: Benchmark, path: str, raw_metrics: Any) -> list[MetricConfig]:
    jury_name = bench.text["run_spec"]["jury_metric"]
    if isinstance(raw_metrics, (str, bytes)) or not hasattr(raw_metrics, "__iter__"):
        raise err(bench, path, f"'metrics' must be a list, got {raw_metrics!r}")
    out: list[MetricConfig] = []
    for metric in raw_metrics:  # HELM iterates whatever it gets (a dict iterates its keys)
        if not isinstance(metric, dict) or "name" not in metric:
            raise err(bench, path, f"invalid metric {metric!r}: each metric must be a mapping with at least a 'name'")
        if metric["name"] == jury_name:
            if "prompt_file" not in metric or "judges" not in metric:
                raise err(bench, path, f"{jury_name} metric requires 'prompt_file' and 'judges'")
            judges = metric["judges"]
            if not isinstance(judges, list):
                raise err(bench, path, f"{jury_name}.judges must be a list")
            parsed = []
            for i, judge in enumerate(judges):
                if not isinstance(judge, dict) or "model_name" not in judge or "name" not in judge:
                    raise err(bench, path, f"{jury_name}.judges[{i}] needs 'name' (deployment) and 'model_name'")
                parsed.append({"model_name": judge["model_name"], "model_deployment": judge["name"]})
            if not isinstance(metric["prompt_file"], str):
                raise err(bench, path, f"{jury_name}.prompt_file must be a path string")
            out.append(MetricConfig(name=metric["name"], prompt_file=metric["prompt_file"], judges=parsed))
        else:
            out.append(MetricConfig(name=metric["name"]))
    return out


def load_benchmark_config(bench: Benchmark, config_path: Any) -> BenchmarkConfig:
    """HELM `get_benchmark_config_from_path` (yaml.safe_load + structure)."""
    entry = bench.name
    if not isinstance(config_path, str):
        raise MedhelmError(f"{entry}: config_path must be a path string, got {config_path!r}")
    try:
        with open(config_path) as f:
            data = yaml.safe_load(f)
    except FileNotFoundError:
        raise MedhelmError(f"{entry}: config_path file not found: {config_path}") from None
    except IsADirectoryError:
        raise MedhelmError(f"{entry}: config_path is a directory, expected a file: {config_path}") from None
    except OSError as e:
        raise MedhelmError(f"{entry}: config_path file unreadable: {config_path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise err(bench, config_path, f"not valid YAML: {first_line(e)}") from None
    if not isinstance(data, dict):
        raise err(bench, config_path, "expected a mapping")
    if "metrics" not in data:
        raise err(bench, config_path, "no metrics specified")
    metrics = _convert_metrics(bench, config_path, data["metrics"])
    if not metrics:
        raise err(bench, config_path, "'metrics' is empty (metrics[0] is the main metric)")
    for key in ("name", "description", "prompt_file", "dataset_file"):
        if key not in data:
            raise err(bench, config_path, f"missing required field {key!r}")
    for key in ("name", "prompt_file", "dataset_file"):
        if not isinstance(data[key], str):
            raise err(bench, config_path, f"{key} must be a string, got {data[key]!r}")
    default_max_tokens = bench.text["run_spec"]["default_max_tokens"]
    return BenchmarkConfig(
        path=config_path,
        name=data["name"],
        description=data["description"],
        prompt_file=data["prompt_file"],
        dataset_file=data["dataset_file"],
        metrics=metrics,
        max_tokens=data.get("max_tokens", default_max_tokens),
    )


def parse_rubric_criteria(bench: Benchmark, prompt_template: str, where: str) -> dict[str, list[Any]]:
    """Criteria from `<rubric_criteria>{json}</rubric_criteria>` (HELM `_get_annotation_criteria`):
    the first such block (non-greedy, spanning lines), `json.loads`, then `{key: list(value)}` --
    for the usual `{"score": .., "explanation": ..}` values that is the list of their keys."""
    text = bench.text["run_spec"]
    pattern = re.compile(
        re.escape(text["rubric_open_tag"]) + r"\s*(\{.*?\})\s*" + re.escape(text["rubric_close_tag"]), re.DOTALL
    )
    m = pattern.search(prompt_template)
    if not m:
        raise MedhelmError(f"{where}: no {text['rubric_open_tag']}{{...}}{text['rubric_close_tag']} block found")
    try:
        raw = json.loads(m.group(1))
        return {k: list(v) for k, v in raw.items()}
    except (ValueError, AttributeError, TypeError) as e:
        raise MedhelmError(f"{where}: bad {text['rubric_open_tag']} JSON: {first_line(e)}") from None


def read_judge_prompt(bench: Benchmark, config: BenchmarkConfig, metric: MetricConfig) -> str:
    entry = bench.name
    path = metric.prompt_file
    try:
        with open(path, "r") as f:  # universal newlines, like HELM
            return f.read()
    except FileNotFoundError:
        raise MedhelmError(f"{entry}: judge prompt_file not found: {path} (config_path={config.path})") from None
    except OSError as e:
        raise MedhelmError(f"{entry}: judge prompt_file unreadable: {path} (config_path={config.path}): {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise MedhelmError(f"{entry}: judge prompt_file {path} is not text: {first_line(e)}") from None


def judge_annotator_models(metric: MetricConfig) -> dict[str, dict[str, str]]:
    # HELM: {judge.model_deployment: judge for judge in metric.judges}
    return {j["model_deployment"]: dict(j) for j in metric.judges or []}


def metric_specs(bench: Benchmark, config: BenchmarkConfig) -> list[dict[str, Any]]:
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
            raise err(bench, config.path, f"unknown metric name: {metric.name!r}")
    return specs


def annotator_specs(bench: Benchmark, config: BenchmarkConfig) -> list[dict[str, Any]]:
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
