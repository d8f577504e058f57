"""Registries that tie HELM's names to our implementations.

* run-spec functions, keyed by the run-entry prefix (`clear`, `shc_ptbm_med`, ...), as HELM's
  `@run_spec_function`: called with the description's non-expander args, they return a RunSpec dict;
* scenarios, keyed by HELM's scenario `class_name` (what `run_spec.json` records), each able to build
  the instance list and the `scenario.json` metadata.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol


from medhelm_core.errors import MedhelmError  # noqa: F401  (re-exported for the registries' users)


RunSpecFunction = Callable[..., dict]
RUN_SPEC_FUNCTIONS: dict[str, RunSpecFunction] = {}


def run_spec_function(name: str) -> Callable[[RunSpecFunction], RunSpecFunction]:
    def register(fn: RunSpecFunction) -> RunSpecFunction:
        if name in RUN_SPEC_FUNCTIONS:
            raise RuntimeError(f"run-spec function {name!r} registered twice")
        RUN_SPEC_FUNCTIONS[name] = fn
        return fn

    return register


class InstanceLoader(Protocol):
    def __call__(self, args: dict[str, Any]) -> list[dict]: ...


@dataclass(frozen=True)
class ScenarioDef:
    """How to build one HELM scenario class.

    `load(args)` returns HELM Instance dicts in the scenario's own order (ids may be absent: the
    pipeline assigns `id0, id1, ...` exactly as HELM's `with_instance_ids`).
    `metadata(args)` returns `scenario.json`: name, description, tags, definition_path.
    `data_files(args)` lists the local files the instances are read from (for content hashing /
    staleness); `tier` is "public", "gated" or "private".
    `helm_metadata(args)` returns HELM's ScenarioMetadata (`get_metadata()`: name, display_name,
    short_display_name, description, taxonomy, main_metric, main_split), which
    `helm-summarize --auto-generate-schema` turns into run groups.
    """

    class_name: str
    tier: str
    load: InstanceLoader
    metadata: Callable[[dict[str, Any]], dict[str, Any]]
    data_files: Callable[[dict[str, Any]], list[str]]
    helm_metadata: Callable[[dict[str, Any]], dict[str, Any]]


SCENARIOS: dict[str, ScenarioDef] = {}


def register_scenario(defn: ScenarioDef) -> ScenarioDef:
    if defn.class_name in SCENARIOS:
        raise RuntimeError(f"scenario {defn.class_name!r} registered twice")
    SCENARIOS[defn.class_name] = defn
    return defn


def load_all() -> None:
    """Import every module that registers run-spec functions, scenarios and annotators."""
    from medhelm_core import annotators, annotators_public, runspecs, scenarios  # noqa: F401  (imports register)
    from medhelm_core import annotators_gated  # noqa: F401  (gated-tier juries)


@dataclass(frozen=True)
class JuryDef:
    """What an LLM-as-jury annotator (HELM's `LLMAsJuryAnnotator` subclasses) needs to run.

    `name` is the key of the annotation in `request_state.annotations` (the scenario name);
    `prompt_template` uses `{QUESTION}`, `{RESPONSE}`, `{GOLD_RESPONSE}`; `criteria` maps each
    criterion to the sub-keys a judge's JSON must contain; `judges` maps the judge name to
    `{"model_name": ..., "model_deployment": ...}` in the order they are asked.
    """

    name: str
    prompt_template: str
    criteria: dict[str, list[str]]
    judges: dict[str, dict[str, str]]


@dataclass(frozen=True)
class LocalAnnotatorDef:
    """An annotator that runs here, without a model (HELM's non-LLM annotators, e.g. EhrSqlAnnotator
    which executes SQL): `annotate(request_state)` returns the annotation HELM stores under `name`
    in `request_state.annotations`. The factory is called once per run, so `annotate` may keep
    per-run state (the pipeline calls it on the run's request states in order)."""

    name: str
    annotate: Callable[[dict[str, Any]], Any]


# Keyed by HELM's annotator class_name; called with the AnnotatorSpec's args. A factory returns a
# JuryDef (an LLM jury, run through the completion engine) or a LocalAnnotatorDef.
ANNOTATORS: dict[str, Callable[[dict[str, Any]], "JuryDef | LocalAnnotatorDef"]] = {}


def register_annotator(class_name: str) -> Callable:
    def register(fn: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
        if class_name in ANNOTATORS:
            raise RuntimeError(f"annotator {class_name!r} registered twice")
        ANNOTATORS[class_name] = fn
        return fn

    return register
