"""LLM-jury configuration: HELM's judges.yaml form.

```yaml
judges:
  - name: gpt                       # the judge's key in annotations and in annotator_models
    model: openai/gpt-4o-2024-05-13
    model_deployment: stanfordhealthcare/gpt-4o-2024-05-13
```

As HELM's `get_annotator_models_from_config` (run_specs/medhelm_run_specs.py): with no
`jury_config_path` the bundled default is used (ours: `medhelm_core/resources/conf/judges.yaml`,
package data, which the checkout's `conf/judges.yaml` links to); a given path is used as is
(relative paths resolve against the current working directory). The result maps judge name ->
`{"model_name": ..., "model_deployment": ...}` (HELM's AnnotatorModelInfo) in file order; a repeated
name keeps its first position and takes the last entry's models (dict-comprehension semantics).
"""
from __future__ import annotations

import os
from typing import Any, Mapping

import yaml

from medhelm_core.errors import MedhelmError
from medhelm_core.parts import JuryDef
from medhelm_core.resources import DEFAULT_JUDGES_CONFIG
from medhelm_core.yamlio import safe_load


def judges_config_path(jury_config_path: str | None) -> str:
    """The file HELM would read for this `jury_config_path` run-entry arg."""
    return str(DEFAULT_JUDGES_CONFIG) if jury_config_path is None else jury_config_path


def _prefix(entry: str | None, explicit: bool) -> str:
    if entry and explicit:
        return f"{entry}: jury_config_path "
    if entry:
        return f"{entry}: default judges config "
    return "judges config "


def load_judges_config(jury_config_path: str | None = None, *, entry: str | None = None) -> dict[str, Any]:
    """Parse and validate a judges.yaml; any problem is a one-line MedhelmError naming the file."""
    path = judges_config_path(jury_config_path)
    pre = _prefix(entry, jury_config_path is not None)
    if not isinstance(path, str):
        raise MedhelmError(f"{pre}must be a path string, got {path!r}")
    if not os.path.exists(path):
        raise MedhelmError(f"{pre}file not found: {path}")
    try:
        with open(path, "r") as f:
            config = safe_load(f)
    except OSError as e:
        raise MedhelmError(f"{pre}file unreadable: {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        detail = str(e).strip().splitlines()[0] if str(e).strip() else "YAML error"
        raise MedhelmError(f"{pre}file is not valid YAML: {path}: {detail}") from None
    if not isinstance(config, dict) or not isinstance(config.get("judges"), list):
        raise MedhelmError(f"{pre}file malformed: {path}: expected a mapping with a 'judges' list")
    if not config["judges"]:
        raise MedhelmError(f"{pre}file malformed: {path}: 'judges' is empty")
    for i, judge in enumerate(config["judges"]):
        if not isinstance(judge, dict):
            raise MedhelmError(f"{pre}file malformed: {path}: judges[{i}] is not a mapping")
        for key in ("name", "model", "model_deployment"):
            if key not in judge:
                raise MedhelmError(f"{pre}file malformed: {path}: judges[{i}] lacks {key!r}")
            if not isinstance(judge[key], str) or not judge[key]:
                raise MedhelmError(f"{pre}file malformed: {path}: judges[{i}].{key} must be a non-empty string")
    return config


def annotator_models_from_config(
    jury_config_path: str | None = None, *, entry: str | None = None
) -> dict[str, dict[str, str]]:
    """HELM `get_annotator_models_from_config`: {judge name: {"model_name", "model_deployment"}}."""
    config = load_judges_config(jury_config_path, entry=entry)
    return {
        judge["name"]: {"model_name": judge["model"], "model_deployment": judge["model_deployment"]}
        for judge in config["judges"]
    }


def normalize_annotator_models(models: Mapping[str, Any], *, where: str = "annotator_models") -> dict[str, dict[str, str]]:
    """AnnotatorSpec/MetricSpec `annotator_models` (dicts or AnnotatorModelInfo-like objects) as plain dicts."""
    if not isinstance(models, Mapping):
        raise MedhelmError(f"{where}: expected a mapping of judge name -> model info, got {type(models).__name__}")
    out: dict[str, dict[str, str]] = {}
    for key, info in models.items():
        if isinstance(info, Mapping):
            model_name, deployment = info.get("model_name"), info.get("model_deployment")
        else:
            model_name, deployment = getattr(info, "model_name", None), getattr(info, "model_deployment", None)
        if not model_name or not deployment:
            raise MedhelmError(f"{where}: judge {key!r} needs model_name and model_deployment")
        out[key] = {"model_name": model_name, "model_deployment": deployment}
    return out


def fixed_jury(jury: Mapping[str, Any], class_name: str, args: dict[str, Any]) -> JuryDef:
    """HELM's `LLMAsJuryAnnotator` subclasses with a fixed name, prompt template and criteria (a
    benchmark's `jury:` block); the judges come from the AnnotatorSpec's `annotator_models`."""
    if "annotator_models" not in args:
        raise MedhelmError(f"{class_name}: annotator spec lacks 'annotator_models'")
    return JuryDef(
        name=jury["name"],
        prompt_template=jury["prompt_template"],
        criteria={k: list(v) for k, v in jury["criteria"].items()},
        judges=normalize_annotator_models(args["annotator_models"], where=f"{class_name} annotator_models"),
    )
