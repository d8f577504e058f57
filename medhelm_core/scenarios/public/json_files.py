"""Public scenarios read from JSON files: aci_bench, pubmed_qa, med_dialog.

* ACIBenchScenario (`aci_bench_scenario.py`): `train_full.json` -> train, then the three test
  files in HELM's order -> test; per `data["data"]` entry the input is
  `"Doctor-patient dialogue:\\n\\n" + src`, the one correct reference `tgt`.
* PubMedQAScenario (`pubmed_qa_scenario.py`): `ori_pqal.json` (1,000 labelled items, in file
  order) -> test; input = PassageQuestionInput("Context: " + background, "\\n\\n", "Question: " +
  QUESTION + "\\n") with background lines `f"{label.title()}. {context}"`; references yes/no/maybe.
* MedDialogScenario (`med_dialog_scenario.py`): `<subset>/test.json` of the CodaLab bundle ->
  test; input `src`, reference `tgt`. `subset` must be healthcaremagic or icliniq.

Ids are left unset (the pipeline assigns `id0, id1, ...` over train + test, as HELM does).
"""
from __future__ import annotations

import json
from typing import Any

from medhelm_core import data_sources as ds
from medhelm_core.helm_types import TEST_SPLIT, TRAIN_SPLIT, instance, passage_question_text, reference
from medhelm_core.errors import MedhelmError
from medhelm_core.scenarios.public._base import parse_error, register_public, text


def _json(entry: str, path) -> Any:
    located = path if isinstance(path, ds.Located) else ds.Located(path)
    try:
        return json.loads(located.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise parse_error(entry, located, e) from None


# ----------------------------------------------------------------------------- aci_bench
def _aci_files(args: dict[str, Any]) -> list[tuple[str, Any]]:
    data = text("aci_bench")["data"]
    names = [(TRAIN_SPLIT, data["train"])] + [(TEST_SPLIT, n) for n in data["test"]]
    return [(split, ds.fetch(ds.UpstreamFile("aci_bench", n, f"{data['base_url']}/{n}"))) for split, n in names]


def _aci_load(args: dict[str, Any]) -> list[dict]:
    template = text("aci_bench")["scenario"]["input_template"]
    instances = []
    for split, path in _aci_files(args):
        for entry in _json("aci_bench", path)["data"]:
            instances.append(instance(template.format(dialogue=entry["src"]), [reference(entry["tgt"], True)], split))
    return instances


register_public("aci_bench", _aci_load, lambda args: [p for _, p in _aci_files(args)])


# ----------------------------------------------------------------------------- pubmed_qa
def _pubmed_file(args: dict[str, Any]):
    data = text("pubmed_qa")["data"]
    return ds.fetch(ds.UpstreamFile("pubmed_qa", data["file"], data["url"]))


def _pubmed_load(args: dict[str, Any]) -> list[dict]:
    spec = text("pubmed_qa")["scenario"]
    choices = spec["answer_choices"]
    instances = []
    for example in _json("pubmed_qa", _pubmed_file(args)).values():
        labels, contexts = example["LABELS"], example["CONTEXTS"]
        if len(labels) != len(contexts):
            raise MedhelmError("pubmed_qa: an item has different numbers of LABELS and CONTEXTS")
        background = "\n".join(spec["context_line"].format(label=label.title(), context=context)
                               for label, context in zip(labels, contexts))
        correct = example["final_decision"]
        if correct not in choices:
            raise MedhelmError(f"pubmed_qa: final_decision {correct!r} is not one of {choices}")
        refs = [reference(answer, answer == correct) for answer in choices]
        input_text = passage_question_text(background, example["QUESTION"] + "\n", passage_prefix=spec["passage_prefix"],
                                           question_prefix=spec["question_prefix"], separator=spec["separator"])
        instances.append(instance(input_text, refs, TEST_SPLIT))
    return instances


register_public("pubmed_qa", _pubmed_load, lambda args: [_pubmed_file(args)])


# ----------------------------------------------------------------------------- med_dialog
def _med_dialog_check(args: dict[str, Any]) -> None:
    subsets = text("med_dialog")["data"]["subsets"]
    unknown = sorted(set(args) - {"subset"})
    if unknown:
        raise MedhelmError(f"med_dialog: MedDialogScenario takes only 'subset', got {unknown}")
    if "subset" not in args:
        raise MedhelmError("med_dialog: missing required argument 'subset'")
    if args["subset"] not in subsets:
        raise MedhelmError(f"med_dialog: invalid subset {args['subset']!r} (expected one of {subsets})")


def _med_dialog_file(args: dict[str, Any]):
    data = text("med_dialog")["data"]
    subset = args["subset"]
    return ds.fetch(ds.UpstreamFile("med_dialog", data["file"].format(subset=subset), data["url"].format(subset=subset)))


def _med_dialog_load(args: dict[str, Any]) -> list[dict]:
    examples = _json("med_dialog", _med_dialog_file(args))["data"]
    return [instance(ex["src"], [reference(ex["tgt"], True)], TEST_SPLIT) for ex in examples]


register_public("med_dialog", _med_dialog_load, lambda args: [_med_dialog_file(args)], check=_med_dialog_check)
