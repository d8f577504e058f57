"""`mmlu_clinical_afr` (HELM `get_mmlu_clinical_afr_spec(subject, lang, method=multiple_choice_joint)`):
joint multiple choice, instructions naming the subject and the language, the exact-match bundle.

The name always carries the method (`mmlu_clinical_afr:subject=<s>,lang=<l>,method=<m>`), and the
groups are `mmlu_clinical_afr_<s>` and `mmlu_clinical_afr_<s>_<l>`. As HELM, the subject is not
checked here; an unknown language code fails (HELM: a KeyError in its language map).
"""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.errors import MedhelmError
from medhelm_core.helm_types import multiple_choice_joint_adapter_spec, run_spec as make_run_spec, scenario_spec
from medhelm_core.runspecs.metric_bundles import exact_match_metric_specs


def language_name(bench: Benchmark, lang: Any) -> str:
    languages = bench.text["languages"]
    if not isinstance(lang, str) or lang not in languages:
        raise MedhelmError(f"{bench.name}: unknown lang {lang!r} (known: {', '.join(languages)})")
    return languages[lang]


def run_spec(bench: Benchmark, subject: Any, lang: Any, method: Any = None) -> dict[str, Any]:
    text = bench.text["run_spec"]
    method = text["default_method"] if method is None else method
    if not isinstance(subject, str):
        raise MedhelmError(f"{bench.name}: subject must be a string, got {subject!r}")
    language = language_name(bench, lang)
    if method != text["adapter_method"]:
        raise MedhelmError(f"{bench.name}: method={method} is not supported (only {text['adapter_method']}; "
                           "HELM also has the chain-of-thought and separate multiple-choice adapters)")
    adapter = dict(text["adapter"])
    adapter["instructions"] = adapter["instructions"].format(subject=subject.replace("_", " "), language=language)
    fields = {"subject": subject, "lang": lang, "method": method}
    return make_run_spec(
        name=text["name"].format(**fields),
        scenario=scenario_spec(text["scenario_class"], {"subject": subject, "lang": lang}),
        adapter=multiple_choice_joint_adapter_spec(**adapter),
        metric_specs=exact_match_metric_specs(),
        groups=[g.format(**fields) for g in text["groups"]],
    )
