"""MMLU_Clinical_Afr_Scenario (HELM `mmlu_clinical_afr_scenario.py`, args `subject="clinical_knowledge"`,
`lang="af"`): `<subject>_{dev,val,test}_<lang>.csv` of the release zip's `mmlu_cm_ck_vir/` folder ->
train / valid / test, in that order (a missing file is skipped, as HELM's `os.path.exists` check).

Each CSV (no header) is read with `csv.reader` over universal newlines; a row is
`question, answer..., letter`: the references are all the answers in order, each correct iff its
text equals the answer the letter names (`A`-`D` zip the first four answers; duplicates are all
correct). The dev rows are the in-context examples, and HELM samples the eval instances from
valid + test together.

Where the CSVs come from: a mirror holds them as `<mirror>/mmlu_clinical_afr/mmlu_cm_ck_vir/<file>`;
online the zip HELM downloads is cached and its `.../mmlu_cm_ck_vir/<file>` members are read. A
subject/lang with none of the three files is an error here (HELM would build no instances).
"""
from __future__ import annotations

import csv
import zipfile
from typing import Any

from medhelm_core import data_sources as ds
from medhelm_core.catalog import Benchmark
from medhelm_core.errors import MedhelmError
from medhelm_core.scenarios.public.base import parse_error
from medhelm_core.helm_types import instance, reference


def _args(bench: Benchmark, args: dict[str, Any]) -> tuple[str, str]:
    """HELM's constructor: only `subject` and `lang`, both with defaults."""
    unknown = sorted(set(args) - {"subject", "lang"})
    if unknown:
        raise MedhelmError(f"{bench.name}: MMLU_Clinical_Afr_Scenario takes only 'subject' and 'lang', got {unknown}")
    spec = bench.text["scenario"]
    subject, lang = args.get("subject", spec["default_subject"]), args.get("lang", spec["default_lang"])
    for key, value in (("subject", subject), ("lang", lang)):
        if not isinstance(value, str):
            raise MedhelmError(f"{bench.name}: {key} must be a string, got {value!r}")
    return subject, lang


def check(bench: Benchmark, args: dict[str, Any]) -> None:
    _args(bench, args)


def _zip(bench: Benchmark) -> ds.UpstreamFile:
    data = bench.text["data"]
    return ds.UpstreamFile(bench.name, data["zip_name"], data["url"])


def _members(subject: str, lang: str, bench) -> list[tuple[str, str]]:
    """(`mmlu_cm_ck_vir/<file>`, split) in HELM's reading order."""
    data = bench.text["data"]
    return [(f"{data['member_dir']}/{data['file'].format(subject=subject, split=infix, lang=lang)}", split)
            for infix, split in bench.text["scenario"]["splits"].items()]


def _located(bench: Benchmark, args: dict[str, Any]) -> list[tuple[ds.Located, str]]:
    """The CSVs that exist, with their splits."""
    subject, lang = _args(bench, args)
    members = _members(subject, lang, bench)
    mirror = ds.mirror_root()
    found: list[tuple[ds.Located, str]] = []
    if mirror is not None:
        for name, split in members:
            path = mirror / bench.name / name
            if path.is_file():
                found.append((ds.Located(path), split))
        where = f"{mirror / bench.name / bench.text['data']['member_dir']} (data mirror, ${ds.MIRROR_ENV})"
    else:
        zpath = ds.fetch(_zip(bench))
        try:
            with zipfile.ZipFile(zpath) as zf:
                names = zf.namelist()
        except zipfile.BadZipFile:
            raise MedhelmError(f"{bench.name}: {zpath} is not a zip file") from None
        for name, split in members:
            if any(n == name or n.endswith("/" + name) for n in names):
                found.append((ds.Located(zpath, ds.zip_member_name(zpath, name, bench.name)), split))
        where = f"{zpath} (from {bench.text['data']['url']})"
    if not found:
        names = ", ".join(name.rsplit("/", 1)[-1] for name, _ in members)
        raise MedhelmError(f"{bench.name}: no data for subject={subject}, lang={lang}: none of {names} is in {where}")
    return found


def files(bench: Benchmark, args: dict[str, Any]) -> list:
    located = _located(bench, args)
    return sorted({str(loc.path) for loc, _ in located})


def _rows(bench: Benchmark, located: ds.Located) -> list[list[str]]:
    try:
        with located.open_text() as f:
            return list(csv.reader(f, delimiter=","))
    except (csv.Error, UnicodeDecodeError) as e:
        raise parse_error(bench.name, located, e) from None


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    letters = bench.text["scenario"]["answer_letters"]
    instances = []
    for located, split in _located(bench, args):
        for number, row in enumerate(_rows(bench, located), start=1):
            if len(row) < 2:
                raise MedhelmError(f"{bench.name}: {located}: row {number} has {len(row)} field(s), "
                                   "expected a question, answers and the correct letter")
            question, answers, letter = row[0], row[1:-1], row[-1]
            by_letter = dict(zip(letters, answers))
            if letter not in by_letter:
                raise MedhelmError(f"{bench.name}: {located}: row {number}: correct letter {letter!r} names none "
                                   f"of the {len(answers)} answers")
            correct = by_letter[letter]
            instances.append(instance(question, [reference(a, a == correct) for a in answers], split))
    return instances


def helm_metadata(bench: Benchmark, args: dict[str, Any]) -> dict[str, Any]:
    """HELM 0.5.16's get_metadata() (the edition's `helm_metadata: null`: none, as medhelm 0.8.0)."""
    subject, lang = _args(bench, args)
    meta = bench.text.get("helm_metadata")
    if meta is None:
        raise NotImplementedError(f"{bench.scenario_class} has no get_metadata() in this edition")
    languages = bench.text["languages"]
    if lang not in languages:  # HELM: a KeyError in _LANGUAGE_CODE_TO_NAME
        raise MedhelmError(f"{bench.name}: unknown lang {lang!r} (known: {', '.join(languages)})")
    language = languages[lang]
    values = {"lang": lang, "language": language, "language_title": language.title(),
              "subject": subject.replace("_", " "), "subject_arg": subject}

    def fill(value: Any) -> Any:
        if isinstance(value, str):
            return value.format(**values)
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        return value

    return fill(meta)
