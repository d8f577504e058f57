"""The parts a benchmark folder provides, as the pipeline uses them (no registry: `catalog` builds them).

* `ScenarioDef`: how to build one HELM scenario class (its instances, scenario.json, ScenarioMetadata);
* `JuryDef`: an LLM-as-jury annotator (HELM's `LLMAsJuryAnnotator` subclasses), run through the engine;
* `LocalAnnotatorDef`: an annotator that runs here without a model (HELM's EhrSqlAnnotator).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Protocol


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
    # The edition's overlay of the benchmark, when it has one (it may change the instances): part
    # of the dataset's key, so editions that read a benchmark alike share its dataset.
    edition_overlay: Any = None


@dataclass(frozen=True)
class JudgeCall:
    """One question a judge is asked about a request state. `label` names it among the judge's
    calls (the verdict's `annotator` column is `<jury name>/<label>`); None for the one call of
    a plain jury."""

    label: Optional[str]
    prompt: str


@dataclass(frozen=True)
class JuryAnnotation:
    """What an annotator with its own `annotate` makes of its judges' verdicts: HELM's annotation
    (`request_state.annotations[name]`), and per judge a summary stored beside it (a
    `judge_verdicts` row of status `summary`: e.g. the corrected score next to HELM's). The
    summaries never change HELM's numbers."""

    annotation: dict[str, Any]
    summaries: Mapping[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class JuryDef:
    """What an LLM-as-jury annotator (HELM's `LLMAsJuryAnnotator` subclasses) needs to run.

    `name` is the key of the annotation in `request_state.annotations` (the scenario name);
    `prompt_template` uses `{QUESTION}`, `{RESPONSE}`, `{GOLD_RESPONSE}`; `criteria` maps each
    criterion to the sub-keys a judge's JSON must contain; `judges` maps the judge name to
    `{"model_name": ..., "model_deployment": ...}` in the order they are asked.

    By default every judge is asked one question, `prompt_template` filled in, and HELM's
    annotation keeps each judge's parsed JSON (`jury.assemble_annotation`). An annotator whose
    judges are asked several questions (HealthBench: one per rubric item, then a physician
    comparison) gives both of:

    * `calls(request_state) -> {judge: [JudgeCall, ...]} | None`: each judge's questions in the
      order HELM asks them (a judge left out is not asked); None when nothing is asked (HELM's
      empty-output skip: the annotation is `{"prompt_text": None, ...}`);
    * `annotate(request_state, {judge: [Verdict, ...]}) -> JuryAnnotation`: HELM's annotation
      from every judge's verdicts, one per call in the same order (each parsed with `criteria`).
      It may raise `MedhelmError` where HELM's annotator raises (the run fails).
    """

    name: str
    prompt_template: str
    criteria: dict[str, list[str]]
    judges: dict[str, dict[str, str]]
    calls: Optional[Callable[[dict[str, Any]], Optional[dict[str, list[JudgeCall]]]]] = None
    annotate: Optional[Callable[[dict[str, Any], dict[str, list[Any]]], JuryAnnotation]] = None


@dataclass(frozen=True)
class LocalAnnotatorDef:
    """An annotator that runs here, without a model (HELM's non-LLM annotators, e.g. EhrSqlAnnotator
    which executes SQL): `annotate(request_state)` returns the annotation HELM stores under `name`
    in `request_state.annotations`. The factory is called once per run, so `annotate` may keep
    per-run state (the pipeline calls it on the run's request states in order)."""

    name: str
    annotate: Callable[[dict[str, Any]], Any]


def scenario_json(name: Any, description: Any, tags: list[Any], definition_path: str) -> dict[str, Any]:
    """HELM's scenario.json: the Scenario dataclass fields in declaration order."""
    return {"name": name, "description": description, "tags": list(tags), "definition_path": definition_path}
