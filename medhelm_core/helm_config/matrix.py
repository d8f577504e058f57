"""Our compact run-entry form: a YAML matrix of benchmarks × models.

    priority: 1
    benchmarks: [medcalc_bench, "med_dialog:subset=icliniq", ...]
    models: [{model: org/name, model_deployment: host/name, num_output_tokens: 4000}, ...]

Each pair becomes the description HELM's confs spell out by hand:
`<benchmark>:[num_output_tokens=N,][<benchmark args>,]model=…,model_deployment=…`.
Without `models`, each benchmark becomes HELM's wildcard entry `<benchmark>:[<args>,]model=text`, which
helm-run expands to the models of `--models-to-run` (and requires it): one file of benchmarks for any
model (`conf/medhelm_public_any_model.yaml`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from medhelm_core.helm_config.run_entries import RunEntry
from medhelm_core.errors import MedhelmError
from medhelm_core.yamlio import safe_load


class MatrixModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str
    model_deployment: Optional[str] = None
    num_output_tokens: Optional[int] = None


class Matrix(BaseModel):
    model_config = ConfigDict(extra="forbid")
    priority: int = 1
    benchmarks: list[str]
    models: Optional[list[MatrixModel]] = None


def load_matrix(path: str | Path) -> list[RunEntry]:
    source = str(path)
    try:
        raw = safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MedhelmError(f"{source}: run-entry file not found") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark else source
        raise MedhelmError(f"{where}: invalid YAML ({getattr(e, 'problem', e)})") from None
    try:
        matrix = Matrix.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(x) for x in err["loc"])
        raise MedhelmError(f"{source}: {field}: {err['msg']}") from None
    entries = []
    for bench in matrix.benchmarks:
        name, _, args = bench.partition(":")
        if matrix.models is None:
            entries.append(RunEntry(description=f"{name}:{args + ',' if args else ''}model=text",
                                    priority=matrix.priority, source=source))
            continue
        for m in matrix.models:
            parts = [f"num_output_tokens={m.num_output_tokens}"] if m.num_output_tokens else []
            parts += [args] if args else []
            parts.append(f"model={m.model}")
            if m.model_deployment:
                parts.append(f"model_deployment={m.model_deployment}")
            entries.append(RunEntry(description=f"{name}:{','.join(parts)}", priority=matrix.priority,
                                    source=source))
    return entries
