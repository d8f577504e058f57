"""`medhelm_configurable_benchmark:config_path=<yaml>` (HELM `get_medhelm_configurable_benchmark_spec`):
a user's benchmark config, with the metric and annotator specs HELM's `BenchmarkConfig` derives from
it (this folder's `config.py`)."""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.helm_types import generation_adapter_spec, run_spec as make_run_spec, scenario_spec


def run_spec(bench: Benchmark, config_path: Any) -> dict[str, Any]:
    """Reads the config (and any judge prompt) now, as HELM does; the dataset is read by the scenario.

    Generation with no instructions and no nouns (prompt = rendered template + "\\n"), temperature 0,
    `max_tokens` from the config (default 1024), zero-shot; name and group = the config's name;
    `annotators` is always a list (`[]` without jury_score)."""
    cfg = bench.module("config")
    config = cfg.load_benchmark_config(bench, config_path)
    text = bench.text["run_spec"]
    scenario = scenario_spec(text["scenario_class"], {"name": config.name, "config_path": config_path})
    adapter = generation_adapter_spec(max_tokens=config.max_tokens, **text["adapter"])
    annotators = cfg.annotator_specs(bench, config)
    metrics = cfg.metric_specs(bench, config)
    return make_run_spec(
        name=config.name,
        scenario=scenario,
        adapter=adapter,
        metric_specs=metrics,
        groups=[config.name],
        annotators=annotators,
    )
