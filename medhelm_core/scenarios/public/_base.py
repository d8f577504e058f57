"""Shared plumbing of the public-tier scenarios: literal text, registration, argument checks.

Each public scenario module defines `load(args) -> [Instance dict]` and `files(args) -> [path]`
(the files `load` reads, resolved through `medhelm_core.data_sources`: the data mirror or the
online cache) and registers them with `register_public`.
"""
from __future__ import annotations

import copy
from typing import Any, Callable

from medhelm_core.registry import MedhelmError, ScenarioDef, register_scenario
from medhelm_core.scenarios._common import first_line, literal, scenario_json

TIER = "public"


def text(entry: str) -> dict[str, Any]:
    """The parsed `medhelm_core/benchmarks/public/<entry>.yaml` (read-only)."""
    return literal(f"public/{entry}")


def no_args(entry: str, args: dict[str, Any]) -> None:
    """HELM's scenario classes without constructor arguments fail on any argument."""
    if args:
        cls = text(entry)["run_spec"]["scenario_class"].rsplit(".", 1)[-1]
        raise MedhelmError(f"{entry}: {cls} takes no arguments, got {sorted(args)}")


def register_public(
    entry: str,
    load: Callable[[dict[str, Any]], list[dict]],
    files: Callable[[dict[str, Any]], list[str]],
    check: Callable[[dict[str, Any]], None] | None = None,
) -> ScenarioDef:
    """Register the scenario of run entry `entry` (class name, scenario.json and HELM's
    ScenarioMetadata from its YAML). `check(args)` validates the arguments as HELM's constructor does."""
    doc = text(entry)
    spec = doc["scenario"]
    validate = check or (lambda args: no_args(entry, args))

    def metadata(args: dict[str, Any]) -> dict[str, Any]:
        validate(args)
        return scenario_json(spec["name"], spec["description"], spec["tags"], spec["definition_path"])

    def helm_metadata(args: dict[str, Any]) -> dict[str, Any]:
        validate(args)
        if doc.get("helm_metadata") is None:  # HELM's class has no get_metadata()
            raise NotImplementedError(entry)
        return copy.deepcopy(doc["helm_metadata"])

    def checked_load(args: dict[str, Any]) -> list[dict]:
        validate(args)
        return load(args)

    def checked_files(args: dict[str, Any]) -> list[str]:
        validate(args)
        return [str(p) for p in files(args)]

    return register_scenario(ScenarioDef(
        class_name=doc["run_spec"]["scenario_class"],
        tier=TIER,
        load=checked_load,
        metadata=metadata,
        data_files=checked_files,
        helm_metadata=helm_metadata,
    ))


def parse_error(entry: str, what: Any, exc: BaseException) -> MedhelmError:
    return MedhelmError(f"{entry}: cannot parse {what}: {first_line(exc)}")
