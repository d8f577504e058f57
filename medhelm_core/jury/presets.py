"""`medhelm-run --judges`: the jury in one word.

* `stanford` (the default): HELM's judges.yaml, the three judges through Stanford Health Care's
  gateway (`stanfordhealthcare/*` deployments), as helm-run does;
* `public`: the same three judge models through the vendors' public APIs
  (`resources/settings/judges_public.yaml`): gpt-4o-2024-05-13 on OpenAI ($OPENAI_API_KEY),
  Llama 3.3 70B Instruct on Together AI ($TOGETHER_API_KEY), claude-3-7-sonnet-20250219 on
  Anthropic ($ANTHROPIC_API_KEY);
* `<preset>:<judge>,<judge>`: only those judges of a preset, e.g. `public:gpt,claude` (fewer keys,
  a smaller jury; the judges keep the file's order);
* anything else: a judges.yaml file of your own (HELM's form, as a run entry's `jury_config_path`).

The choice replaces the DEFAULT judges file only: a run entry that names its own `jury_config_path`
keeps it, and a benchmark folder that lists its own judges (`medhelm_configurable_benchmark`) keeps
them. A run made with `--judges X` is the run HELM makes with X's judges file as every jury entry's
`jury_config_path` (same run spec, same run name). One exception, medhelm-0.8.0's
`health_admin_bench`: its judge (the file's first) is recorded as HELM records it, but the agent
knobs HELM writes into `instructions` would also carry the `jury_config_path` string, which the flag
does not invent.
"""
from __future__ import annotations

import os
from typing import Any, Optional

from medhelm_core.errors import MedhelmError, shorten
from medhelm_core.jury.judges import DefaultJudges, default_judges, load_judges_config
from medhelm_core.resources import DEFAULT_JUDGES_CONFIG, PUBLIC_JUDGES_CONFIG

FLAG = "--judges"
DEFAULT = "stanford"
PRESETS: dict[str, str] = {"stanford": str(DEFAULT_JUDGES_CONFIG), "public": str(PUBLIC_JUDGES_CONFIG)}
SYNTAX = "stanford, public, some judges of one (e.g. public:gpt,claude) or a judges.yaml file"


def _preset_judges(path: str) -> list[str]:
    return [j["name"] for j in load_judges_config(path)["judges"]]


def parse_judges(value: Any) -> Optional[DefaultJudges]:
    """The default judges `--judges value` stands for (None: HELM's own default, `stanford`).
    Any problem is one MedhelmError line naming the flag and what to give instead."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise MedhelmError(f"{FLAG} {shorten(repr(value))}: give {SYNTAX}")
    text = value.strip()
    preset, sep, rest = text.partition(":")
    if preset.lower() in PRESETS:  # a file named like a preset: ./public
        path = PRESETS[preset.lower()]
        if not sep:
            return None if preset.lower() == DEFAULT else DefaultJudges(path, None, f"{FLAG} {preset.lower()}")
        known = _preset_judges(path)
        names = [n.strip() for n in rest.split(",")]
        if not rest.strip() or any(not n for n in names):
            raise MedhelmError(f"{FLAG} {shorten(text)}: name the judges after the colon, comma-separated, "
                               f"e.g. {preset.lower()}:{','.join(known[:2])} (its judges: {', '.join(known)})")
        unknown = [n for n in names if n not in known]
        if unknown:
            raise MedhelmError(f"{FLAG} {shorten(text)}: {preset.lower()} has no judge {unknown[0]!r} "
                               f"(its judges: {', '.join(known)})")
        chosen = tuple(n for n in known if n in names)  # the file's order, each once
        if preset.lower() == DEFAULT and len(chosen) == len(known):
            return None
        return DefaultJudges(path, chosen, f"{FLAG} {preset.lower()}:{','.join(chosen)}")
    # A judges file of the user's own.
    if not os.path.exists(text):
        raise MedhelmError(f"{FLAG} {shorten(text)}: no such judges file; give {SYNTAX}")
    if os.path.isdir(text):
        raise MedhelmError(f"{FLAG} {shorten(text)}: is a folder; give {SYNTAX}")
    choice = DefaultJudges(text, None, FLAG)
    with default_judges(choice):
        load_judges_config(None)  # a malformed file is one line now, not one per entry later
    return choice


def judges_of(choice: Optional[DefaultJudges]) -> dict[str, dict[str, str]]:
    """{judge name: {"model_name", "model_deployment"}} of a choice (HELM's AnnotatorModelInfo)."""
    from medhelm_core.jury.judges import annotator_models_from_config

    with default_judges(choice):
        return annotator_models_from_config(None)


def using_judges(value: Any):
    """A context manager: within it, entries without `jury_config_path` get `--judges value`'s judges."""
    return default_judges(parse_judges(value))


def missing_judge_keys(ws, entries, credentials) -> str | None:
    """One line naming the environment variable of every judge (of these runs) that reaches a vendor's
    public API without a key, e.g. with `--judges public` and only $OPENAI_API_KEY set; None when
    every such judge has one. Judges with no usual variable (a gateway) are left to the preflight's
    per-deployment message."""
    from medhelm_core.helm_config.deployments import resolve_api_key, vendor_key_env

    missing: dict[str, list[str]] = {}  # env variable(s) -> "judge (deployment)"
    keyed: dict[str, None] = {}
    orgs: dict[str, None] = {}  # the credentials.conf keys that would do instead
    seen: set[str] = set()
    for entry, spec in entries:
        for aspec in spec.get("annotators") or []:
            judges = getattr(ws.catalog.annotator(aspec, spec["name"]), "judges", None) or {}
            for judge, info in judges.items():
                dep_name = info["model_deployment"]
                if dep_name in seen:
                    continue
                seen.add(dep_name)
                dep = ws.registry.deployments.get(dep_name)
                if dep is None:
                    continue  # not defined: the preflight says so, naming the file
                names = vendor_key_env(dep, credentials)
                if not names:
                    continue
                try:
                    resolve_api_key(dep, credentials)
                    keyed[judge] = None
                except MedhelmError:
                    missing.setdefault(" or ".join(f"${n}" for n in names), []).append(f"{judge}: {dep_name}")
                    orgs.setdefault(f"{dep.host_organization}ApiKey", None)
    if not missing:
        return None
    shown = ", ".join(f"{env} ({', '.join(who)})" for env, who in missing.items())
    public = {info["model_deployment"]: name for name, info in judges_of(parse_judges("public")).items()}
    hint = ""
    if keyed and all(public.get(d) for d in seen) and set(keyed) <= set(public.values()):
        hint = f"; or judge with fewer: --judges public:{','.join(n for n in public.values() if n in keyed)}"
    source = str(credentials.source)
    conf = source if source.startswith("$") else str(ws.local_path / "credentials.conf")
    return f"the judges have no API key: set {shown}, or {', '.join(orgs)} in {conf}{hint}"



def describe_judges(ws, entries) -> str | None:
    """One line: the judges these runs' juries call (name and deployment, each once), e.g. what
    `--dry-run --judges public` resolved; None when no run has a jury."""
    seen: dict[tuple[str, str], None] = {}
    for _, spec in entries:
        for aspec in spec.get("annotators") or []:
            judges = getattr(ws.catalog.annotator(aspec, spec["name"]), "judges", None) or {}
            for judge, info in judges.items():
                seen.setdefault((judge, info["model_deployment"]), None)
    if not seen:
        return None
    return "judges: " + ", ".join(f"{name} ({dep})" for name, dep in seen)
