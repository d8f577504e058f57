"""Upstream editions: which HELM codebase's behaviour a suite reproduces.

An edition is data (`resources/conf/editions/<name>.yaml`): a name and a few named behaviour
switches, below. What a benchmark changes between editions (literal text, data pins and filters)
is in its own `benchmark.yaml` under `editions: {<name>: overlay}` (`medhelm_core.catalog`). Adding
an edition is one YAML file here plus the benchmarks' overlays; no code branches on an edition's
name, only on its switches.

* `helm-0.5.16`: crfm-helm 0.5.16, which made the published leaderboards (the default);
* `medhelm-0.8.0`: Pacific AI's medhelm 0.8.0, what `pip install medhelm` runs today.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, ValidationError

from medhelm_core.errors import MedhelmError
from medhelm_core.resources import CONF_DIR, SCHEMA_DIR
from medhelm_core.yamlio import safe_load

EDITIONS_DIR = CONF_DIR / "editions"
HELM_0_5_16 = "helm-0.5.16"
DEFAULT_EDITION = HELM_0_5_16
HELM_DEFINITION_BASE = "https://github.com/stanford-crfm/helm/blob/main/"


class Edition(BaseModel):
    """One upstream edition's behaviour switches (see the YAML files for what each means)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    upstream: str
    definition_path_base: str = HELM_DEFINITION_BASE
    tokenize_completions: tuple[str, ...] = ()
    jury_score_type: Literal["int", "float"] = "int"
    jury_validation: Literal["strict", "top_level"] = "strict"
    schema_file: str = "schema_medhelm.yaml"
    summarize_default_suite: Optional[str] = "default"
    group_table_stem_max: Optional[int] = None

    @property
    def is_default(self) -> bool:
        return self.name == DEFAULT_EDITION

    @property
    def schema_path(self) -> Path:
        """medhelm-summarize's default presentation schema under this edition."""
        return SCHEMA_DIR / self.schema_file

    def definition_path(self, path: str) -> str:
        """scenario.json's `definition_path`: HELM's source links point into this edition's repository."""
        if path.startswith(HELM_DEFINITION_BASE):
            return self.definition_path_base + path[len(HELM_DEFINITION_BASE):]
        return path

    def tokenizes_completions_of(self, client_class: str) -> bool:
        return client_class in self.tokenize_completions


def known_editions() -> list[str]:
    return sorted(p.stem for p in EDITIONS_DIR.glob("*.yaml"))


def load_edition(name: str | None = None) -> Edition:
    """The edition called `name` (None: the default), or a one-line error naming the known ones."""
    return _load(name or DEFAULT_EDITION)


@functools.cache  # package data: read once per process
def _load(name: str) -> Edition:
    path = EDITIONS_DIR / f"{name}.yaml"
    if not path.is_file():
        raise MedhelmError(f"unknown edition {name!r} (known: {', '.join(known_editions())})")
    with open(path, encoding="utf-8") as f:
        data = safe_load(f) or {}
    try:
        edition = Edition.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise MedhelmError(f"{path}: {field}: {err['msg']}") from None
    if edition.name != name:
        raise MedhelmError(f"{path}: name is {edition.name!r}, the file name says {name!r}")
    if not edition.schema_path.is_file():
        raise MedhelmError(f"{path}: schema {edition.schema_file!r} is not in {SCHEMA_DIR}")
    return edition


def edition_of_suites(editions: dict[str, str], asked: str | None = None) -> Edition:
    """The edition whose summarize defaults apply to these suites (suite -> the edition(s) of its
    runs, ", "-joined): the one they were run under, which must be one for all and `asked`'s if given."""
    found = sorted(set(editions.values()))
    if len(found) > 1 or any("," in e for e in found):
        raise MedhelmError("the suites were run under different editions (" +
                           "; ".join(f"{s}: {e}" for s, e in editions.items()) + "): summarize them apart")
    if asked is not None and found and asked != found[0]:
        raise MedhelmError(f"--edition {asked}, but the runs of {', '.join(editions)} were made under {found[0]}")
    return load_edition(asked or (found[0] if found else None))
