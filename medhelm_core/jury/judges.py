"""LLM-jury configuration: HELM's judges.yaml form.

```yaml
judges:
  - name: gpt                       # the judge's key in annotations and in annotator_models
    model: openai/gpt-4o-2024-05-13
    model_deployment: stanfordhealthcare/gpt-4o-2024-05-13
```

As HELM's `get_annotator_models_from_config` (run_specs/medhelm_run_specs.py): with no
`jury_config_path` the bundled default is used (ours: `medhelm_core/resources/settings/judges.yaml`,
package data, which the checkout's `conf/judges.yaml` links to); a given path is used as is
(relative paths resolve against the current working directory). The result maps judge name ->
`{"model_name": ..., "model_deployment": ...}` (HELM's AnnotatorModelInfo) in file order; a repeated
name keeps its first position and takes the last entry's models (dict-comprehension semantics).

`medhelm-run --judges` replaces the DEFAULT only (`default_judges`, set around the expansion of a
selection): an entry without `jury_config_path` reads the chosen file (keeping only the chosen judges
of a preset, e.g. `public:gpt,claude`); an entry's own `jury_config_path` still wins. The run spec
records the judges' `annotator_models`, as HELM's run with that judges file would; no run name
changes (HELM's jury run names do not carry the jury).
"""
from __future__ import annotations

import contextlib
import contextvars
import os
from typing import Any, Iterator, Mapping, NamedTuple, Optional

import yaml

from medhelm_core.errors import MedhelmError
from medhelm_core.parts import JuryDef
from medhelm_core.resources import DEFAULT_JUDGES_CONFIG
from medhelm_core.yamlio import safe_load


class DefaultJudges(NamedTuple):
    """What an entry without `jury_config_path` reads: `path`, keeping only `names` (all when None);
    `label` names the choice in messages (e.g. `--judges public:gpt`)."""
    path: str
    names: Optional[tuple[str, ...]] = None
    label: str = "default judges config"


_DEFAULT_JUDGES: contextvars.ContextVar[Optional[DefaultJudges]] = contextvars.ContextVar(
    "medhelm_default_judges", default=None)


@contextlib.contextmanager
def default_judges(choice: Optional[DefaultJudges]) -> Iterator[None]:
    """Within the block, entries without `jury_config_path` use `choice` (None: the bundled default)."""
    token = _DEFAULT_JUDGES.set(choice)
    try:
        yield
    finally:
        _DEFAULT_JUDGES.reset(token)


def current_default_judges() -> DefaultJudges:
    return _DEFAULT_JUDGES.get() or DefaultJudges(str(DEFAULT_JUDGES_CONFIG))


def judges_config_path(jury_config_path: str | None) -> str:
    """The file HELM would read for this `jury_config_path` run-entry arg (with no arg: the bundled
    default, or the file `--judges` chose)."""
    return current_default_judges().path if jury_config_path is None else jury_config_path


def _prefix(entry: str | None, explicit: bool) -> str:
    if entry and explicit:
        return f"{entry}: jury_config_path "
    label = current_default_judges().label
    if entry:
        return f"{entry}: {label} "
    return f"{label} " if _DEFAULT_JUDGES.get() is not None else "judges config "


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
    names = current_default_judges().names if jury_config_path is None else None
    if names is not None:
        known = [j["name"] for j in config["judges"]]
        unknown = [n for n in names if n not in known]
        if unknown:
            raise MedhelmError(f"{pre}has no judge {unknown[0]!r} in {path} (its judges: {', '.join(known)})")
        config = {**config, "judges": [j for j in config["judges"] if j["name"] in names]}
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
