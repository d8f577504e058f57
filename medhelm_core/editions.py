"""Upstream editions: which HELM codebase's behaviour a suite reproduces.

An edition is data (`resources/settings/editions/<name>.yaml`): a name and a few named behaviour
switches, below. What a benchmark changes between editions (literal text, data pins and filters)
is in its own `benchmark.yaml` under `editions: {<name>: overlay}` (`medhelm_core.catalog`). Adding
an edition is one YAML file here plus the benchmarks' overlays; no code branches on an edition's
name, only on its switches.

* `helm-0.5.16`: crfm-helm 0.5.16, which made the published leaderboards (the default);
* `medhelm-0.8.0`: Pacific AI's medhelm 0.8.0, what `pip install medhelm` runs today.

Clients: a stored answer is the default edition's (one paid answer serves every edition). What an
edition's client makes differently of the same answer (tokens, another text block, an error's words)
is a view over it (`Workspace.completion_view`, from `tokenize_completions` and `client_changes`).
What it sends differently (`ClientChange.request_fields`) is another paid call: the client is built
with the class's `ClientSwitches` (a factory's `edition_switches` argument) and the request is stored
under another key (`Workspace.request_key`).
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from medhelm_core.errors import MedhelmError
from medhelm_core.resources import SETTINGS_DIR, SCHEMA_DIR
from medhelm_core.yamlio import safe_load

EDITIONS_DIR = SETTINGS_DIR / "editions"
HELM_0_5_16 = "helm-0.5.16"
DEFAULT_EDITION = HELM_0_5_16
HELM_DEFINITION_BASE = "https://github.com/stanford-crfm/helm/blob/main/"


class ClientChange(BaseModel):
    """How an edition's client classes differ from the default edition's (HELM 0.5.16's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    classes: tuple[str, ...]  # HELM client_spec.class_names
    # Request: body fields the client adds (a different paid call, stored under another key).
    request_fields: dict[str, Any] = Field(default_factory=dict)
    # Outcome: an API error whose text contains the key ends as a non-fatal result with this error.
    non_fatal_errors: dict[str, str] = Field(default_factory=dict)
    # Result views over a stored answer: a non-fatal result's error as stored -> as this edition's client words it;
    error_texts: dict[str, str] = Field(default_factory=dict)
    # only the last text block (and the last thinking block) of a reply, not all of them joined;
    last_content_block: bool = False
    # the text through `truncate_and_tokenize_response_text` (stop cut, tokens, max_tokens cut).
    tokenize_response_text: bool = False


class ClientSwitches(BaseModel):
    """What one client class does under an edition (its `ClientChange`s merged). A client factory that
    declares `edition_switches` gets it; the default (empty) switches are HELM 0.5.16's behaviour."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request_fields: dict[str, Any] = Field(default_factory=dict)
    non_fatal_errors: dict[str, str] = Field(default_factory=dict)
    error_texts: dict[str, str] = Field(default_factory=dict)
    last_content_block: bool = False
    tokenize_response_text: bool = False
    tokenize_completions: bool = False

    @property
    def request_variant(self) -> Optional[str]:
        """What makes this class's wire requests differ from the default edition's (None: nothing),
        as a stable text: part of the request's store key."""
        return json.dumps(self.request_fields, sort_keys=True, ensure_ascii=False) if self.request_fields else None

    @property
    def client_variant(self) -> Optional[str]:
        """What makes this class's client differ from the default edition's (None: nothing): clients
        are built once per deployment and variant."""
        built = {k: v for k, v in (("request_fields", self.request_fields),
                                   ("non_fatal_errors", self.non_fatal_errors)) if v}
        return json.dumps(built, sort_keys=True, ensure_ascii=False) if built else None

    @property
    def changes_results(self) -> bool:
        return bool(self.error_texts or self.last_content_block or self.tokenize_response_text
                    or self.tokenize_completions)


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
    client_changes: tuple[ClientChange, ...] = ()

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

    def client_switches(self, client_class: str) -> ClientSwitches:
        """The switches of one client class under this edition (later `client_changes` win)."""
        held = _SWITCHES.get(id(self))
        if held is None or held[0] is not self:
            held = _SWITCHES[id(self)] = (self, {})  # holds the edition: its id is not reused
        cached = held[1].get(client_class)
        if cached is None:  # asked for every request keyed: merged once per class
            cached = held[1][client_class] = _client_switches(self, client_class)
        return cached


_SWITCHES: dict[int, tuple[Edition, dict[str, ClientSwitches]]] = {}


def _client_switches(edition: Edition, client_class: str) -> ClientSwitches:
    merged: dict[str, Any] = {"request_fields": {}, "non_fatal_errors": {}, "error_texts": {},
                              "last_content_block": False, "tokenize_response_text": False}
    for change in edition.client_changes:
        if client_class not in change.classes:
            continue
        for key in ("request_fields", "non_fatal_errors", "error_texts"):
            merged[key].update(getattr(change, key))
        merged["last_content_block"] |= change.last_content_block
        merged["tokenize_response_text"] |= change.tokenize_response_text
    return ClientSwitches(**merged, tokenize_completions=edition.tokenizes_completions_of(client_class))


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
