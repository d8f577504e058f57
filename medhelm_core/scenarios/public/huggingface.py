"""Public scenarios read from Hugging Face datasets: head_qa, medcalc_bench, medhallu, medi_qa.

Rows come from `medhelm_core.data_sources` (one parquet file per split, read through `datasets`):

* HeadQAScenario (`headqa_scenario.py`, args `language="en"`, `category=None`):
  `dvilares/head_qa` config `<language>`, split `test`; rows with an `image` are skipped, then the
  optional category filter; input `qtext`; references = `answers` in order (`atext`, correct iff
  `aid == ra`); `extra_data = {"id": qid, "name", "category", "year"}`. A script dataset: online we
  read the hub's parquet export.
* MedCalcBenchScenario (`medcalc_bench_scenario.py`): split `test`; input
  PassageQuestionInput("Patient note: " + note + "\\n", "\\n", "Question: " + question + "\\n");
  reference `Ground Truth Answer`; `extra_data = {category, upper_limit, lower_limit}`;
  `id = Row Number` (an int in v1.0). HELM 0.5.16 loads `ncbi/MedCalc-Bench` unpinned (today v1.2,
  1,100 rows); we pin the v1.0 content the golden run used (`ncbi/MedCalc-Bench-v1.0` at a fixed
  revision online; `huggingface/ncbi__MedCalc-Bench/test.parquet` in a mirror). The revision is
  recorded in the cache's SOURCES.json.
* MedHalluScenario (`medhallu_scenario.py`): `UTAustin-AIHealth/MedHallu` `pqa_labeled` split
  `train` at HELM's pinned revision; two test instances per row (ground truth -> "0", hallucinated
  -> "1"); `Knowledge` (a list of strings) renders as its Python list repr.
* MediQAScenario (`medi_qa_scenario.py`): `bigbio/mediqa_qa` split `test` (a script dataset:
  parquet export online); input `QuestionText`; reference = `AnswerText` of the first answer with
  `ReferenceRank == 1` ("" if none); `id = QID`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from medhelm_core import data_sources as ds
from medhelm_core.helm_types import TEST_SPLIT, instance, passage_question_text, reference
from medhelm_core.errors import MedhelmError
from medhelm_core.scenarios._common import py_value
from medhelm_core.scenarios.public._base import register_public, text


def _split(entry: str, config: str | None = None) -> ds.HFSplit:
    data = text(entry)["data"]
    return ds.HFSplit(
        scenario=entry,
        path=data["hf_path"],
        config=config if config is not None else data.get("config"),
        split=data["split"],
        revision=data.get("online_revision", data.get("revision")),
        parquet_export=bool(data.get("parquet_export")),
        export_config=data.get("export_config"),
        online_path=data.get("online_path"),
    )


def _rows(entry: str, config: str | None = None):
    hf = _split(entry, config)
    return ds.load_hf_split(ds.fetch_hf_split(hf), hf.split)


def _files(entry: str, config: str | None = None) -> list[Path]:
    return [ds.fetch_hf_split(_split(entry, config))]


# ----------------------------------------------------------------------------- head_qa
def _head_qa_args(args: dict[str, Any]) -> tuple[str, Any]:
    unknown = sorted(set(args) - {"language", "category"})
    if unknown:
        raise MedhelmError(f"head_qa: HeadQAScenario takes only 'language' and 'category', got {unknown}")
    return args.get("language", "en"), args.get("category")


def _head_qa_load(args: dict[str, Any]) -> list[dict]:
    language, category = _head_qa_args(args)
    instances = []
    for ex in _rows("head_qa", language):
        if ex["image"] is not None:  # SKIP_VQA
            continue
        if category is not None and ex["category"] != category:
            continue
        refs = [reference(opt["atext"], opt["aid"] == ex["ra"]) for opt in ex["answers"]]
        extra = {"id": ex["qid"], "name": ex["name"], "category": ex["category"], "year": ex["year"]}
        instances.append(instance(ex["qtext"], refs, TEST_SPLIT, extra_data=extra))
    return instances


register_public("head_qa", _head_qa_load, lambda args: _files("head_qa", _head_qa_args(args)[0]),
                check=_head_qa_args)


# ----------------------------------------------------------------------------- medcalc_bench
def _medcalc_check(args: dict[str, Any]) -> None:
    if args:
        raise MedhelmError(
            f"medcalc_bench: MedCalcBenchScenario takes no arguments, got {sorted(args)} (HELM's "
            "get_medcalc_bench_spec(version=...) passes `version` to a constructor without it and fails too)")


def _medcalc_load(args: dict[str, Any]) -> list[dict]:
    prefix = text("medcalc_bench")["scenario"]["passage_prefix"]
    instances = []
    for row in _rows("medcalc_bench"):
        input_text = passage_question_text(row["Patient Note"] + "\n", row["Question"] + "\n", passage_prefix=prefix)
        extra = {"category": row["Category"], "upper_limit": row["Upper Limit"], "lower_limit": row["Lower Limit"]}
        instances.append(instance(input_text, [reference(row["Ground Truth Answer"], True)], TEST_SPLIT,
                                  id=py_value(row["Row Number"]), extra_data=extra))
    return instances


register_public("medcalc_bench", _medcalc_load, lambda args: _files("medcalc_bench"), check=_medcalc_check)


# ----------------------------------------------------------------------------- medhallu
def _medhallu_load(args: dict[str, Any]) -> list[dict]:
    spec = text("medhallu")["scenario"]
    template = spec["input_template"]
    instances = []
    for row in _rows("medhallu"):
        for answer, label in ((row["Ground Truth"], spec["ground_truth_label"]),
                              (row["Hallucinated Answer"], spec["hallucinated_label"])):
            input_text = template.format(knowledge=row["Knowledge"], question=row["Question"], answer=answer)
            instances.append(instance(input_text, [reference(label, True)], TEST_SPLIT))
    return instances


register_public("medhallu", _medhallu_load, lambda args: _files("medhallu"))


# ----------------------------------------------------------------------------- medi_qa
def _highest_ranked_answer(answers: list[dict]) -> str:
    for answer in answers:
        if answer["Answer"]["ReferenceRank"] != 1:
            continue
        return answer["Answer"]["AnswerText"]
    return ""


def _medi_qa_load(args: dict[str, Any]) -> list[dict]:
    instances = []
    for row in _rows("medi_qa"):
        q = row["QUESTION"]
        gold = _highest_ranked_answer(q["AnswerList"])
        instances.append(instance(q["QuestionText"], [reference(gold, True)], TEST_SPLIT, id=q["QID"]))
    return instances


register_public("medi_qa", _medi_qa_load, lambda args: _files("medi_qa"))
