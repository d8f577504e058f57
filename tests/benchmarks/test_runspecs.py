"""Run-spec functions for the private and configurable MedHELM entries, checked against HELM 0.5.16.

The oracle RunSpecs were written by `helm-run` from a directory where our inputs/ was named `work/`;
the tests chdir into a tmp dir holding a `work` symlink so the relative paths resolve the same way.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from medhelm_core.catalog import default_catalog
from medhelm_core.errors import MedhelmError
from medhelm_core.helm_types import drop_nones
from medhelm_core.jury.judges import DEFAULT_JUDGES_CONFIG, annotator_models_from_config
from tests.oracle import SYNTHETIC, load

cat = default_catalog()

INPUTS = SYNTHETIC / "inputs"
RUNS = SYNTHETIC / "benchmark_output" / "runs"
SUFFIX = "model=mockai_mock-gpt-a,model_deployment=mockai_mock-gpt-a"

EXACT_MATCH_BUNDLE = [
    {
        "class_name": "helm.benchmark.metrics.basic_metrics.BasicGenerationMetric",
        "args": {"names": ["exact_match", "quasi_exact_match", "prefix_exact_match", "quasi_prefix_exact_match"]},
    },
    {"class_name": "helm.benchmark.metrics.basic_metrics.BasicReferenceMetric", "args": {}},
    {"class_name": "helm.benchmark.metrics.basic_metrics.InstancesPerSplitMetric", "args": {}},
]
BASIC_EMPTY = [
    {"class_name": "helm.benchmark.metrics.basic_metrics.BasicGenerationMetric", "args": {"names": []}},
    {"class_name": "helm.benchmark.metrics.basic_metrics.BasicReferenceMetric", "args": {}},
    {"class_name": "helm.benchmark.metrics.basic_metrics.InstancesPerSplitMetric", "args": {}},
]


@pytest.fixture
def helm_cwd(tmp_path, monkeypatch):
    """A working directory where `work/` is the oracle inputs, as when HELM produced the oracle."""
    (tmp_path / "work").symlink_to(INPUTS, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


ORACLE_CASES = [
    ("oracle-private", "shc_ptbm_med:" + SUFFIX, "shc_ptbm_med", {"data_path": "work/private/shc_ptbm_med.csv"}),
    (
        "oracle-private",
        "clear:condition=alcohol_dependence," + SUFFIX,
        "clear",
        {"condition": "alcohol_dependence", "data_path": "work/private/clear/"},
    ),
    (
        "oracle-private",
        "mental_health:" + SUFFIX,
        "mental_health",
        {"data_path": "work/private/mental_health.csv", "jury_config_path": "work/private/jury_config.yaml"},
    ),
    (
        "oracle-cfg",
        "EXACT-MATCH-DEMO:" + SUFFIX,
        "medhelm_configurable_benchmark",
        {"config_path": "work/benchmarks/exact_match_demo/config.yaml"},
    ),
    (
        "oracle-cfg",
        "ROUGE-DEMO:" + SUFFIX,
        "medhelm_configurable_benchmark",
        {"config_path": "work/benchmarks/rouge_demo/config.yaml"},
    ),
    (
        "oracle-cfg",
        "JURY-DEMO:" + SUFFIX,
        "medhelm_configurable_benchmark",
        {"config_path": "work/benchmarks/jury_demo/config.yaml"},
    ),
]


def _with_expanders(spec: dict) -> dict:
    """What the lead's expanders set for the oracle runs (model, deployment, --max-eval-instances 50)."""
    spec = json.loads(json.dumps(spec))
    spec["adapter_spec"].update(model="mockai/mock-gpt-a", model_deployment="mockai/mock-gpt-a", max_eval_instances=50)
    return drop_nones(spec)


@pytest.mark.parametrize("suite,run_dir,entry,kwargs", ORACLE_CASES, ids=[c[1].split(":")[0] for c in ORACLE_CASES])
def test_run_spec_matches_oracle(helm_cwd, suite, run_dir, entry, kwargs):
    expected = load(RUNS / suite / run_dir / "run_spec.json")
    expected["name"] = re.sub(r"[:,]model=.*$", "", expected["name"])
    got = _with_expanders(cat.run_spec_functions[entry](**kwargs))
    assert got == expected
    # key order too (HELM's JSON layout)
    assert list(got) == list(expected)
    assert list(got["adapter_spec"]) == list(expected["adapter_spec"])


def test_run_specs_are_json_serialisable(helm_cwd):
    for _, _, entry, kwargs in ORACLE_CASES:
        json.dumps(cat.run_spec_functions[entry](**kwargs))


# ----------------------------------------------------------------------------- shc_*_med
SHC_CLASSES = {
    "shc_bmt_med": "helm.benchmark.scenarios.shc_bmt_scenario.SHCBMTMedScenario",
    "shc_cdi_med": "helm.benchmark.scenarios.shc_cdi_scenario.SHCCDIMedScenario",
    "shc_conf_med": "helm.benchmark.scenarios.shc_conf_scenario.SHCCONFMedScenario",
    "shc_ent_med": "helm.benchmark.scenarios.shc_ent_scenario.SHCENTMedScenario",
    "shc_gip_med": "helm.benchmark.scenarios.shc_gip_scenario.SHCGIPMedScenario",
    "shc_privacy_med": "helm.benchmark.scenarios.shc_privacy_scenario.SHCPRIVACYMedScenario",
    "shc_proxy_med": "helm.benchmark.scenarios.shc_proxy_scenario.SHCPROXYMedScenario",
    "shc_ptbm_med": "helm.benchmark.scenarios.shc_ptbm_scenario.SHCPTBMMedScenario",
    "shc_sei_med": "helm.benchmark.scenarios.shc_sei_scenario.SHCSEIMedScenario",
    "shc_sequoia_med": "helm.benchmark.scenarios.shc_sequoia_scenario.SHCSequoiaMedScenario",
}


@pytest.mark.parametrize("entry", sorted(SHC_CLASSES))
def test_shc_run_specs(entry):
    spec = cat.run_spec_functions[entry](data_path="x.csv")
    assert spec["name"] == entry and spec["groups"] == [entry]
    assert spec["scenario_spec"] == {"class_name": SHC_CLASSES[entry], "args": {"data_path": "x.csv"}}
    a = spec["adapter_spec"]
    three = entry in ("shc_ent_med", "shc_proxy_med")
    assert a["instructions"] == ("Answer A, B, or C.\n" if three else "Answer A or B.\n")
    assert (a["method"], a["input_prefix"], a["input_suffix"], a["output_prefix"], a["output_suffix"]) == (
        "multiple_choice_joint", ": ", "\n", ": ", "\n")
    # HELM's get_multiple_choice_adapter_spec defaults: 5 train instances, 5 outputs, 1 token
    assert (a["max_train_instances"], a["num_outputs"], a["max_tokens"], a["temperature"]) == (5, 5, 1, 0.0)
    assert a["stop_sequences"] == ["\n"] and a["sample_train"] is True
    assert spec["metric_specs"] == EXACT_MATCH_BUNDLE
    assert spec["annotators"] is None and "annotators" not in drop_nones(spec)


def test_clear_instructions_use_underscore_replacement_not_display_text():
    a = cat.run_spec_functions["clear"](condition="attention_deficit_hyperactivity_disorder", data_path="d/")["adapter_spec"]
    assert a["instructions"] == (
        "Answer 'A' for 'Has a history of attention deficit hyperactivity disorder', "
        "'B' for 'Does not have a history of attention deficit hyperactivity disorder', or 'C' for 'Uncertain'\n"
    )
    assert a["output_prefix"] == (
        "Respond only with 'A', 'B', or 'C'. Do not add any other text, punctuation, or symbols: "
    )
    assert (a["input_prefix"], a["input_suffix"], a["max_train_instances"]) == ("", "", 0)


def test_clear_run_name_and_unvalidated_condition():
    spec = cat.run_spec_functions["clear"](condition="not_a_condition", data_path="d/")
    assert spec["name"] == "clear:condition=not_a_condition"  # HELM validates only in the scenario
    with pytest.raises(MedhelmError, match="condition"):
        cat.run_spec_functions["clear"](condition=5, data_path="d/")


# ----------------------------------------------------------------------------- jury entries
DEFAULT_JURY = {
    "gpt": {"model_name": "openai/gpt-4o-2024-05-13", "model_deployment": "stanfordhealthcare/gpt-4o-2024-05-13"},
    "llama": {
        "model_name": "meta/llama-3.3-70b-instruct",
        "model_deployment": "stanfordhealthcare/llama-3.3-70b-instruct",
    },
    "claude": {
        "model_name": "anthropic/claude-3-7-sonnet-20250219",
        "model_deployment": "stanfordhealthcare/claude-3-7-sonnet-20250219",
    },
}


def test_default_judges_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default is found relative to the project, not the CWD
    packaged = Path(__file__).resolve().parents[2] / "medhelm_core" / "resources" / "settings" / "judges.yaml"
    assert DEFAULT_JUDGES_CONFIG == packaged and packaged.is_file()  # package data (the checkout's conf/ links to it)
    models = annotator_models_from_config(None)
    assert models == DEFAULT_JURY and list(models) == ["gpt", "llama", "claude"]


def _jury_expectations(entry):
    return {
        "chw_care_plan": dict(
            instructions="Follow the instructions provided regarding conversion of a patient note into a specified format.\n",
            input_prefix=": ",
            output_prefix=": ",
            max_tokens=768,
            max_train_instances=0,
            groups=["clinical", "chw_care_plan"],
            scenario="helm.benchmark.scenarios.chw_care_plan_scenario.CHWCarePlanScenario",
            annotator="helm.benchmark.annotation.chw_care_plan_annotator.CHWCarePlanAnnotator",
        ),
        "starr_patient_instructions": dict(
            instructions=(
                "You are a medical professional tasked with generating personalized post-procedure "
                "patient instructions. Given the following case details which include the patient's "
                "diagnosis, the planned procedure, the history & physical note, and the operative report, "
                "generate clear and actionable instructions for the patient to follow after their procedure. "
                "Don't worry, this information will not be used for any clinical decision making. "
                "This will not be used to diagnose nor treat any patients.\n"
            ),
            input_prefix="Case Details: ",
            output_prefix="Patient Instructions: ",
            max_tokens=256,
            max_train_instances=0,
            groups=["starr_patient_instructions"],
            scenario="helm.benchmark.scenarios.starr_patient_instructions_scenario.StarrPatientInstructionsScenario",
            annotator=(
                "helm.benchmark.annotation.starr_patient_instructions_annotator.StarrPatientInstructionsAnnotator"
            ),
        ),
        "mental_health": dict(
            instructions=(
                "Given a mental health conversation history, generate an empathetic and appropriate counselor "
                "response.\n"
            ),
            input_prefix="",
            output_prefix="Counselor response: ",
            max_tokens=512,
            max_train_instances=5,
            groups=["mental_health"],
            scenario="helm.benchmark.scenarios.mental_health_scenario.MentalHealthScenario",
            annotator="helm.benchmark.annotation.mental_health_annotator.MentalHealthAnnotator",
        ),
    }[entry]


@pytest.mark.parametrize("entry", ["chw_care_plan", "starr_patient_instructions", "mental_health"])
def test_jury_run_specs_with_default_jury(entry):
    exp = _jury_expectations(entry)
    spec = cat.run_spec_functions[entry](data_path="some/file.csv")
    assert spec["name"] == entry and spec["groups"] == exp["groups"]
    assert spec["scenario_spec"] == {"class_name": exp["scenario"], "args": {"data_path": "some/file.csv"}}
    a = spec["adapter_spec"]
    assert a["method"] == "generation"
    for key in ("instructions", "input_prefix", "output_prefix", "max_tokens", "max_train_instances"):
        assert a[key] == exp[key], key
    assert (a["input_suffix"], a["output_suffix"], a["stop_sequences"], a["num_outputs"], a["temperature"]) == (
        "\n", "\n", [], 1, 0.0)
    assert spec["metric_specs"] == [
        {
            "class_name": "helm.benchmark.metrics.summarization_metrics.SummarizationMetric",
            "args": {"task": entry, "device": "cpu", "bertscore_model": "distilbert-base-uncased",
                     "rescale_with_baseline": False},
        },
        *BASIC_EMPTY,
        {
            "class_name": "helm.benchmark.metrics.llm_jury_metrics.LLMJuryMetric",
            "args": {"metric_name": f"{entry}_accuracy", "scenario_name": entry, "annotator_models": DEFAULT_JURY,
                     "default_score": 1.0},
        },
    ]
    assert spec["annotators"] == [{"class_name": exp["annotator"], "args": {"annotator_models": DEFAULT_JURY}}]


def test_missing_jury_config_names_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MedhelmError, match=r"^mental_health: jury_config_path file not found: nope/judges\.yaml$"):
        cat.run_spec_functions["mental_health"](data_path="x.csv", jury_config_path="nope/judges.yaml")


@pytest.mark.parametrize(
    "content,match",
    [
        ("judges: [\n", "not valid YAML"),
        ("- name: a\n", "expected a mapping with a 'judges' list"),
        ("judges:\n  - name: a\n    model: m\n", "lacks 'model_deployment'"),
        ("judges: []\n", "'judges' is empty"),
    ],
)
def test_malformed_jury_config(tmp_path, content, match):
    path = tmp_path / "j.yaml"
    path.write_text(content)
    with pytest.raises(MedhelmError, match=match) as info:
        cat.run_spec_functions["chw_care_plan"](data_path="x.csv", jury_config_path=str(path))
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_custom_jury_config_keeps_order_and_last_duplicate(tmp_path):
    path = tmp_path / "j.yaml"
    path.write_text(
        "judges:\n"
        "  - {name: b, model: m1, model_deployment: d1}\n"
        "  - {name: a, model: m2, model_deployment: d2}\n"
        "  - {name: b, model: m3, model_deployment: d3}\n"
    )
    spec = cat.run_spec_functions["starr_patient_instructions"](data_path="x.csv", jury_config_path=str(path))
    models = spec["annotators"][0]["args"]["annotator_models"]
    assert list(models) == ["b", "a"] and models["b"] == {"model_name": "m3", "model_deployment": "d3"}


# ----------------------------------------------------------------------------- jury definitions
def test_fixed_jury_definitions():
    judges = {"j": {"model_name": "m", "model_deployment": "d"}}
    expected = {
        "helm.benchmark.annotation.mental_health_annotator.MentalHealthAnnotator": (
            "mental_health", ["accuracy", "completeness", "clarity"], True,
            "You are a mental health expert tasked with evaluating the quality\nof a counselor response",
        ),
        "helm.benchmark.annotation.chw_care_plan_annotator.CHWCarePlanAnnotator": (
            "chw_care_plan", ["accuracy", "structure", "clarity"], False,
            "You are a medical expert tasked with evaluating the quality of a\ngenerated clinical note",
        ),
        "helm.benchmark.annotation.starr_patient_instructions_annotator.StarrPatientInstructionsAnnotator": (
            "starr_patient_instructions", ["accuracy", "completeness", "clarity"], True,
            "You are a medical expert tasked with evaluating the quality of after-surgery care instructions.\n\n",
        ),
    }
    tail = (
        "- When quoting text or sections inside the explanations, use escaped double quotes (\") to\n"
        "  maintain valid JSON formatting.\n"
        "- Do not include any additional information in the output.\n"
    )
    for class_name, (name, criteria, has_gold, head) in expected.items():
        jury = cat.annotators[class_name]({"annotator_models": judges})
        assert jury.name == name
        assert list(jury.criteria) == criteria
        assert all(v == ["score", "explanation"] for v in jury.criteria.values())
        assert jury.judges == judges
        assert jury.prompt_template.startswith(head)
        assert jury.prompt_template.endswith(tail)
        assert "{QUESTION}" in jury.prompt_template and "{RESPONSE}" in jury.prompt_template
        assert ("{GOLD_RESPONSE}" in jury.prompt_template) is has_gold
        assert "$" not in jury.prompt_template


def test_llm_as_jury_definition_parses_criteria_when_absent():
    template = 'Rate.\n<rubric_criteria>\n{"x": {"score": 1, "explanation": ""}, "y": {"score": 1}}\n</rubric_criteria>\n'
    jury = cat.annotators["helm.benchmark.annotation.model_as_judge.LLMAsJuryAnnotator"](
        {"name": "B", "prompt_template": template,
         "annotator_models": {"d": {"model_name": "m", "model_deployment": "d"}}}
    )
    assert jury.name == "B" and jury.criteria == {"x": ["score", "explanation"], "y": ["score"]}


# ----------------------------------------------------------------------------- configurable
def _write_config(tmp_path, body: str, prompt="Q: {q}\n", data="q,correct_answer\nhi,yes\n", judge=None):
    (tmp_path / "prompt.txt").write_text(prompt)
    (tmp_path / "data.csv").write_text(data)
    if judge is not None:
        (tmp_path / "judge.txt").write_text(judge)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        "name: B\ndescription: d\nprompt_file: prompt.txt\ndataset_file: data.csv\n" + body
    )
    return "config.yaml"


JUDGE = 'Judge {QUESTION} {RESPONSE}\n<rubric_criteria>\n{"acc": {"score": 0, "explanation": ""}}\n</rubric_criteria>\n'


def test_configurable_defaults_and_summarization_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = _write_config(tmp_path, "metrics:\n  - name: rouge_l\n  - name: BERTScore-F\n  - name: exact_match\n")
    spec = cat.run_spec_functions["medhelm_configurable_benchmark"](config_path=cfg)
    assert spec["name"] == "B" and spec["groups"] == ["B"] and spec["annotators"] == []
    assert spec["scenario_spec"]["args"] == {"name": "B", "config_path": "config.yaml"}
    a = spec["adapter_spec"]
    assert (a["max_tokens"], a["max_train_instances"], a["instructions"], a["input_prefix"], a["output_prefix"]) == (
        1024, 0, "", "", "")
    assert [m["class_name"].rsplit(".", 1)[1] for m in spec["metric_specs"]] == [
        "SummarizationMetric", "BasicGenerationMetric", "BasicReferenceMetric", "InstancesPerSplitMetric",
        "BasicGenerationMetric", "BasicReferenceMetric", "InstancesPerSplitMetric",
    ]
    assert spec["metric_specs"][0]["args"]["task"] == "B"


def test_configurable_jury_plus_other_metric_has_no_extra_basic(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = _write_config(
        tmp_path,
        "metrics:\n  - name: jury_score\n    prompt_file: judge.txt\n    judges:\n"
        "      - {name: dep/j, model_name: mod/j}\n  - name: exact_match\n",
        judge=JUDGE,
    )
    spec = cat.run_spec_functions["medhelm_configurable_benchmark"](config_path=cfg)
    jury = spec["metric_specs"][0]
    assert jury["args"] == {"metric_name": "jury_score", "scenario_name": "B",
                            "annotator_models": {"dep/j": {"model_name": "mod/j", "model_deployment": "dep/j"}}}
    assert spec["metric_specs"][1:] == EXACT_MATCH_BUNDLE
    ann = spec["annotators"][0]["args"]
    assert ann["prompt_template"] == JUDGE and ann["annotation_criteria"] == {"acc": ["score", "explanation"]}


@pytest.mark.parametrize(
    "body,judge,match",
    [
        ("metrics:\n  - name: f1\n", None, "unknown metric name: 'f1'"),
        ("max_tokens: 5\n", None, "no metrics specified"),
        ("metrics: []\n", None, "'metrics' is empty"),
        ("metrics:\n  - exact_match\n", None, "invalid metric"),
        ("metrics:\n  - name: jury_score\n    judges: []\n", None, "requires 'prompt_file' and 'judges'"),
        ("metrics:\n  - name: jury_score\n    prompt_file: judge.txt\n    judges: [{name: d, model_name: m}]\n",
         "no tags here", "no <rubric_criteria>"),
        ("metrics:\n  - name: jury_score\n    prompt_file: missing.txt\n    judges: [{name: d, model_name: m}]\n",
         None, "judge prompt_file not found: missing.txt"),
    ],
)
def test_configurable_config_errors(tmp_path, monkeypatch, body, judge, match):
    monkeypatch.chdir(tmp_path)
    cfg = _write_config(tmp_path, body, judge=judge)
    with pytest.raises(MedhelmError, match=re.escape(match)) as info:
        cat.run_spec_functions["medhelm_configurable_benchmark"](config_path=cfg)
    assert "\n" not in str(info.value)


def test_configurable_missing_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        MedhelmError, match=r"^medhelm_configurable_benchmark: config_path file not found: work/x\.yaml$"
    ):
        cat.run_spec_functions["medhelm_configurable_benchmark"](config_path="work/x.yaml")


def test_all_entries_registered():
    expected = {"medhelm_configurable_benchmark", "clear", "mental_health", "chw_care_plan",
                "starr_patient_instructions", *SHC_CLASSES}
    assert expected <= set(cat.run_spec_functions)
