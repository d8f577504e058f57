"""PubMedQAScenario (HELM `pubmed_qa_scenario.py`): `ori_pqal.json` (1,000 labelled items, in file
order) -> test; input = PassageQuestionInput("Context: " + background, "\\n\\n", "Question: " +
QUESTION + "\\n") with background lines `f"{label.title()}. {context}"`; references yes/no/maybe.
Ids are left unset (the pipeline assigns `id0, id1, ...`, as HELM does).
"""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.errors import MedhelmError
from medhelm_core.helm_types import TEST_SPLIT, instance, passage_question_text, reference
from medhelm_core.scenarios.public.json_files import read_json
from medhelm_core.scenarios.public.base import no_args as check, upstream_file  # noqa: F401  (HELM has no constructor args)


def files(bench: Benchmark, args: dict[str, Any]) -> list:
    return [upstream_file(bench)]


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    spec = bench.text["scenario"]
    choices = spec["answer_choices"]
    instances = []
    for example in read_json(bench, upstream_file(bench)).values():
        labels, contexts = example["LABELS"], example["CONTEXTS"]
        if len(labels) != len(contexts):
            raise MedhelmError(f"{bench.name}: an item has different numbers of LABELS and CONTEXTS")
        background = "\n".join(spec["context_line"].format(label=label.title(), context=context)
                               for label, context in zip(labels, contexts))
        correct = example["final_decision"]
        if correct not in choices:
            raise MedhelmError(f"{bench.name}: final_decision {correct!r} is not one of {choices}")
        refs = [reference(answer, answer == correct) for answer in choices]
        input_text = passage_question_text(background, example["QUESTION"] + "\n", passage_prefix=spec["passage_prefix"],
                                           question_prefix=spec["question_prefix"], separator=spec["separator"])
        instances.append(instance(input_text, refs, TEST_SPLIT))
    return instances
