"""Private and configurable MedHELM scenarios, checked against HELM 0.5.16.

* Oracle: the instances HELM built from /work/shared/oracle/synthetic/inputs (run from a directory
  where inputs/ was named `work/`), matched by id = "id" + position in our list.
* Synthetic: small files in each scenario's real format; the expected texts were written by hand
  from HELM's scenario source (not produced by our code).
"""
from __future__ import annotations

import csv
import json
import re

import pytest

from medhelm_core.catalog import default_catalog
from medhelm_core.errors import MedhelmError
from tests.oracle import SYNTHETIC, load

cat = default_catalog()

INPUTS = SYNTHETIC / "inputs"
RUNS = SYNTHETIC / "benchmark_output" / "runs"
SUFFIX = "model=mockai_mock-gpt-a,model_deployment=mockai_mock-gpt-a"
S = "helm.benchmark.scenarios."

CLS = {
    "shc_bmt_med": S + "shc_bmt_scenario.SHCBMTMedScenario",
    "shc_cdi_med": S + "shc_cdi_scenario.SHCCDIMedScenario",
    "shc_conf_med": S + "shc_conf_scenario.SHCCONFMedScenario",
    "shc_ent_med": S + "shc_ent_scenario.SHCENTMedScenario",
    "shc_gip_med": S + "shc_gip_scenario.SHCGIPMedScenario",
    "shc_privacy_med": S + "shc_privacy_scenario.SHCPRIVACYMedScenario",
    "shc_proxy_med": S + "shc_proxy_scenario.SHCPROXYMedScenario",
    "shc_ptbm_med": S + "shc_ptbm_scenario.SHCPTBMMedScenario",
    "shc_sei_med": S + "shc_sei_scenario.SHCSEIMedScenario",
    "shc_sequoia_med": S + "shc_sequoia_scenario.SHCSequoiaMedScenario",
    "clear": S + "clear_scenario.CLEARScenario",
    "mental_health": S + "mental_health_scenario.MentalHealthScenario",
    "chw_care_plan": S + "chw_care_plan_scenario.CHWCarePlanScenario",
    "starr_patient_instructions": S + "starr_patient_instructions_scenario.StarrPatientInstructionsScenario",
    "configurable": S + "medhelm_configurable_scenario.MedHELMConfigurableScenario",
}


@pytest.fixture
def helm_cwd(tmp_path, monkeypatch):
    (tmp_path / "work").symlink_to(INPUTS, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def refs(*pairs):
    return [{"output": {"text": t}, "tags": ["correct"] if ok else []} for t, ok in pairs]


def inst(text, references):
    return {"input": {"text": text}, "references": references, "split": "test"}


# ============================================================================= oracle
ORACLE = [
    ("oracle-private", "shc_ptbm_med:" + SUFFIX, "shc_ptbm_med", {"data_path": "work/private/shc_ptbm_med.csv"}),
    ("oracle-private", "clear:condition=alcohol_dependence," + SUFFIX, "clear",
     {"condition": "alcohol_dependence", "data_path": "work/private/clear/"}),
    ("oracle-private", "mental_health:" + SUFFIX, "mental_health", {"data_path": "work/private/mental_health.csv"}),
    ("oracle-cfg", "EXACT-MATCH-DEMO:" + SUFFIX, "configurable",
     {"name": "EXACT-MATCH-DEMO", "config_path": "work/benchmarks/exact_match_demo/config.yaml"}),
    ("oracle-cfg", "ROUGE-DEMO:" + SUFFIX, "configurable",
     {"name": "ROUGE-DEMO", "config_path": "work/benchmarks/rouge_demo/config.yaml"}),
    ("oracle-cfg", "JURY-DEMO:" + SUFFIX, "configurable",
     {"name": "JURY-DEMO", "config_path": "work/benchmarks/jury_demo/config.yaml"}),
]


@pytest.mark.parametrize("suite,run_dir,key,args", ORACLE, ids=[c[1].split(":")[0] for c in ORACLE])
def test_oracle_instances_and_scenario_json(helm_cwd, suite, run_dir, key, args):
    run = RUNS / suite / run_dir
    scenario_args = load(run / "run_spec.json")["scenario_spec"]["args"]
    assert scenario_args == args
    defn = cat.scenario(CLS[key])
    assert defn.tier == "private"
    assert defn.metadata(args) == load(run / "scenario.json")

    instances = defn.load(args)
    assert all("id" not in i for i in instances)  # HELM leaves ids None; the pipeline numbers them
    json.dumps(instances)
    states = load(run / "scenario_state.json")["request_states"]
    assert len(states) == 50
    for state in states:
        expected = state["instance"]
        position = int(expected["id"][2:])
        mine = instances[position]
        assert mine["input"] == expected["input"], expected["id"]
        assert mine["references"] == expected["references"], expected["id"]
        assert mine["split"] == expected["split"]
        assert {**mine, "id": expected["id"]} == expected


def test_oracle_instance_counts(helm_cwd):
    for _, _, key, args in ORACLE:
        assert len(cat.scenario(CLS[key]).load(args)) == 80


def test_oracle_data_files(helm_cwd):
    assert cat.scenario(CLS["clear"]).data_files({"condition": "alcohol_dependence", "data_path": "work/private/clear/"}) == [
        "work/private/clear/alcohol_dependence.xlsx"]
    assert cat.scenario(CLS["configurable"]).data_files(
        {"name": "JURY-DEMO", "config_path": "work/benchmarks/jury_demo/config.yaml"}
    ) == ["work/benchmarks/jury_demo/config.yaml", "work/benchmarks/jury_demo/prompt.txt",
          "work/benchmarks/jury_demo/dataset.csv"]


def _schema_group(suite, name):
    for group in load(RUNS / suite / "schema.json")["run_groups"]:
        if group["name"] == name:
            return group
    raise KeyError(name)


@pytest.mark.parametrize(
    "key,name,args",
    [
        ("shc_ptbm_med", "shc_ptbm_med", {"data_path": "x"}),
        ("clear", "clear", {"condition": "alcohol_dependence", "data_path": "x"}),
        ("mental_health", "mental_health", {"data_path": "x"}),
        ("chw_care_plan", "chw_care_plan", {"data_path": "x"}),
        ("starr_patient_instructions", "starr_patient_instructions", {"data_path": "x"}),
    ],
)
def test_helm_metadata_matches_schema(key, name, args):
    meta = cat.scenario(CLS[key]).helm_metadata(args)
    group = _schema_group("oracle-private", name)
    assert meta["name"] == name
    assert (meta["display_name"], meta["description"], meta["taxonomy"]) == (
        group["display_name"], group["description"], group["taxonomy"])
    assert {"main_name": meta["main_metric"], "main_split": meta["main_split"]} == group["environment"]


@pytest.mark.parametrize("bench", ["EXACT-MATCH-DEMO", "ROUGE-DEMO", "JURY-DEMO"])
def test_configurable_helm_metadata_matches_auto_schema(helm_cwd, bench):
    config = f"work/benchmarks/{bench.lower().replace('-demo', '_demo').replace('-', '_')}/config.yaml"
    meta = cat.scenario(CLS["configurable"]).helm_metadata({"name": bench, "config_path": config})
    group = _schema_group("oracle-cfg", bench)
    assert (meta["name"], meta["display_name"], meta["description"], meta["taxonomy"]) == (
        group["name"], group["display_name"], group["description"], group["taxonomy"])
    assert {"main_name": meta["main_metric"], "main_split": meta["main_split"]} == group["environment"]


def test_shc_sei_has_no_helm_metadata():
    with pytest.raises(NotImplementedError):
        cat.scenario(CLS["shc_sei_med"]).helm_metadata({"data_path": "x"})


def test_all_private_scenarios_registered():
    for class_name in CLS.values():
        assert cat.scenario(class_name).tier == "private"


# ============================================================================= shc_* (synthetic)
YES_NO_TAIL = (
    " , Answer the question with a 'A' for yes or 'B' for no. Do not provide any additional details or "
    "response, just a simple A or B response."
)
SHC_TEXT = {  # (prefix before the question, middle before the context, tail) -- from HELM's f-strings
    "shc_bmt_med": ("Provide an answer to the following question: ", " with the following context: ", YES_NO_TAIL),
    "shc_cdi_med": (
        "Provide an answer to the following question: ", " with the following context: ",
        " , Answer the question with either 'A' for yes or 'B' for no. Do not provide any additional details or "
        "response, just a simple A or B response."),
    "shc_conf_med": ("Provide an answer to the following question: ", " with the following context: ", YES_NO_TAIL),
    "shc_gip_med": ("Provide an answer to the following question: ", " with the following context: ", YES_NO_TAIL),
    "shc_privacy_med": (
        "You are reviewing clinical messages in order to determine if any confidential information was "
        "included. Please answer the following question: ", " with the following context: ", YES_NO_TAIL),
    "shc_proxy_med": (
        "You are reviewing a clinical messages in order to determine if they have been sent by a proxy user. "
        "Please determine the following: ", " with the following context: ", YES_NO_TAIL),
    "shc_ptbm_med": (
        "You are reviewing a clinical note from health records of children with attention deficit "
        "hyperactivity disorder (ADHD) and classifying mentions of behavioral therapy. Provide an answer to "
        "the following question: ", " with the following context: ", YES_NO_TAIL),
    "shc_sei_med": (
        "You are reviewing a clinical note from health records of children with attention deficit "
        "hyperactivity disorder (ADHD). Given the following definitions: side Effects Inquiry (SEI): Explicit "
        "documentation by the clinician asking about current side effects related to ADHD medications that the "
        "child is taking or documentation of specific ADHD medication side effects experienced by the patient. "
        "SEI does *not* include future side effects monitoring, such as documentation of potential ADHD "
        "medication side effects, including planning to follow patients to monitor side effects, explaining "
        "about potential side effects of an ADHD medication. These documentations are not categorized as SEI "
        "because they consist of a plan or an explanation about side effects without actual side effect "
        "monitoring taking place, and No Side Effects Inquiry (NSEI): No evidence of side effects monitoring. "
        "Provide an answer to the following question: ", " with the following context: ", YES_NO_TAIL),
}


def write_csv(path, header, rows):
    # csv's default "\r\n" row terminator; a "\r\n" inside a quoted field is read back as "\n" by HELM's
    # open() without newline="" (universal newlines).
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


@pytest.mark.parametrize("entry", sorted(SHC_TEXT))
def test_shc_dedup_keeps_first_position_last_label(tmp_path, entry):
    path = tmp_path / "d.csv"
    write_csv(path, ["prompt", "context", "label"], [
        ["Is it so?", "Note one.", "A"],
        ["Other?", "Line1\r\nLine2", "B"],
        ["Is it so?", "Note one.", "B"],  # same prompt: keeps position 0, takes label B
    ])
    pre, mid, tail = SHC_TEXT[entry]
    choices = ["A", "B", "C"] if entry == "shc_proxy_med" else ["A", "B"]
    got = cat.scenario(CLS[entry]).load({"data_path": str(path)})
    assert got == [
        inst(pre + "Is it so?" + mid + "Note one." + tail, refs(*[(c, c == "B") for c in choices])),
        inst(pre + "Other?" + mid + "Line1\nLine2" + tail, refs(*[(c, c == "B") for c in choices])),
    ]


def test_shc_bmt_exact_text_by_hand(tmp_path):
    path = tmp_path / "d.csv"
    write_csv(path, ["prompt", "context", "label"], [["Q1?", "C1.", "A"]])
    assert cat.scenario(CLS["shc_bmt_med"]).load({"data_path": str(path)}) == [inst(
        "Provide an answer to the following question: Q1? with the following context: C1. , Answer the question "
        "with a 'A' for yes or 'B' for no. Do not provide any additional details or response, just a simple A or "
        "B response.",
        refs(("A", True), ("B", False)),
    )]


def test_shc_short_row_renders_none(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("label,prompt,context\nA,Q1?\n")
    got = cat.scenario(CLS["shc_conf_med"]).load({"data_path": str(path)})
    assert got[0]["input"]["text"] == (
        "Provide an answer to the following question: Q1? with the following context: None , Answer the "
        "question with a 'A' for yes or 'B' for no. Do not provide any additional details or response, just a "
        "simple A or B response."
    )


def test_shc_ent_counter_skips_empty_labels(tmp_path):
    path = tmp_path / "d.csv"
    write_csv(path, ["prompt", "context", "label"], [
        ["Refer?", "Ear pain.", "C"],
        ["Refer?", "Broken row.", ""],  # skipped, not counted
        ["Refer?", "Ear pain.", "A"],  # same text but a different counter: no dedup
    ])
    tail = (" , Answer the question with either 'A' for yes, 'B' for no, or 'C' for no mention. Do not provide "
            "any additional details or response, just a simple A, B, or C response.")
    got = cat.scenario(CLS["shc_ent_med"]).load({"data_path": str(path)})
    assert got == [
        inst("1 Provide an answer to the following question: Refer? with the following context: Ear pain." + tail,
             refs(("A", False), ("B", False), ("C", True))),
        inst("2 Provide an answer to the following question: Refer? with the following context: Ear pain." + tail,
             refs(("A", True), ("B", False), ("C", False))),
    ]


def test_shc_sequoia_question_column_and_leading_space_counter(tmp_path):
    path = tmp_path / "d.csv"
    write_csv(path, ["question", "context", "label"], [["Eligible?", "Palliative note.", "B"],
                                                       ["Eligible?", "Palliative note.", "A"]])
    got = cat.scenario(CLS["shc_sequoia_med"]).load({"data_path": str(path)})
    body = (" Provide an answer to the following question: Eligible? with the following context: Palliative note."
            " , Answer the question with a 'A' for yes or 'B' for no. Do not provide any additional details or "
            "response, just a simple A or B response.")
    assert got == [inst(" 1" + body, refs(("A", False), ("B", True))),
                   inst(" 2" + body, refs(("A", True), ("B", False)))]
    with pytest.raises(MedhelmError, match="column 'question' missing"):
        p2 = tmp_path / "e.csv"
        write_csv(p2, ["prompt", "context", "label"], [["q", "c", "A"]])
        cat.scenario(CLS["shc_sequoia_med"]).load({"data_path": str(p2)})


def test_shc_bad_label(tmp_path):
    path = tmp_path / "d.csv"
    write_csv(path, ["prompt", "context", "label"], [["Q", "C", "C"]])
    with pytest.raises(MedhelmError, match=r"shc_gip_med: label 'C' is not one of \['A', 'B'\]"):
        cat.scenario(CLS["shc_gip_med"]).load({"data_path": str(path)})


def test_shc_metadata():
    assert cat.scenario(CLS["shc_ent_med"]).metadata({"data_path": "x"}) == {
        "name": "shc_ent_med",
        "description": (
            "ENT-Referral is a benchmark designed to evaluate whether a patient's clinical notesupports a referral "
            "to an Ear, Nose, and Throat (ENT) specialist. It helps assessmodels' abilities to make referral "
            "decisions based on unstructured clinical text."
        ),
        "tags": ["knowledge", "reasoning", "biomedical"],
        "definition_path": "https://github.com/stanford-crfm/helm/blob/main/src/helm/benchmark/scenarios/shc_ent_scenario.py",
    }


@pytest.mark.parametrize("entry", sorted(CLS[k] for k in CLS if k.startswith("shc_")))
def test_shc_missing_file(tmp_path, monkeypatch, entry):
    monkeypatch.chdir(tmp_path)
    name = next(k for k, v in CLS.items() if v == entry)
    with pytest.raises(MedhelmError, match=rf"^{name}: data_path file not found: work/private/x\.csv$"):
        cat.scenario(entry).load({"data_path": "work/private/x.csv"})


# ============================================================================= clear (synthetic)
def _xlsx(path, rows):
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["text", "result_human"])
    for row in rows:
        ws.append(row)
    wb.save(path)


def _clear_text(condition_text, note):
    return (
        "You are a medical assistant reviewing patient notes. Determine whether the patient has a history of "
        f"{condition_text}.\n\nOriginal Clinical Note:\n{note}\n\nA. Has a history of {condition_text}\n"
        f"B. Does not have a history of {condition_text}\nC. Uncertain\n\nAnswer:"
    )


def test_clear_labels_strip_and_nan_text(tmp_path):
    _xlsx(tmp_path / "alcohol_dependence.xlsx", [["  Drinks daily.  ", 1], [None, 0], ["Unclear.", 2]])
    got = cat.scenario(CLS["clear"]).load({"condition": "alcohol_dependence", "data_path": str(tmp_path)})
    choices = ["Has a history of alcohol dependence", "Does not have a history of alcohol dependence", "Uncertain"]
    assert got == [
        inst(_clear_text("alcohol dependence", "Drinks daily."), refs(*[(c, i == 0) for i, c in enumerate(choices)])),
        # an empty cell is NaN and str(NaN) == "nan": HELM keeps the row
        inst(_clear_text("alcohol dependence", "nan"), refs(*[(c, i == 1) for i, c in enumerate(choices)])),
        inst(_clear_text("alcohol dependence", "Unclear."), refs(*[(c, i == 2) for i, c in enumerate(choices)])),
    ]


def test_clear_float_labels_match_nothing(tmp_path):
    # A missing label makes pandas read the column as float: "1.0" maps to no answer.
    _xlsx(tmp_path / "post_traumatic_stress_disorder.xlsx", [["Flashbacks.", 1], ["Other.", None]])
    got = cat.scenario(CLS["clear"]).load({"condition": "post_traumatic_stress_disorder", "data_path": str(tmp_path)})
    ct = "post-traumatic stress disorder (PTSD)"
    none_correct = refs((f"Has a history of {ct}", False), (f"Does not have a history of {ct}", False),
                        ("Uncertain", False))
    assert got == [inst(_clear_text(ct, "Flashbacks."), none_correct), inst(_clear_text(ct, "Other."), none_correct)]
    assert cat.scenario(CLS["clear"]).metadata({"condition": "post_traumatic_stress_disorder", "data_path": "x"})[
        "tags"] == ["classification", "biomedical", "post-traumatic-stress-disorder"]


def test_clear_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MedhelmError, match=r"^clear: data_path file not found: work/private/clear/chronic_pain\.xlsx"):
        cat.scenario(CLS["clear"]).load({"condition": "chronic_pain", "data_path": "work/private/clear/"})
    with pytest.raises(MedhelmError, match="condition 'flu' not supported"):
        cat.scenario(CLS["clear"]).load({"condition": "flu", "data_path": "work/private/clear/"})


# ============================================================================= mental_health (synthetic)
def test_mental_health_passage_question_text_and_pandas_values(tmp_path):
    path = tmp_path / "mh.csv"
    write_csv(path, ["context", "gold_counselor_response", "topic", "dialogue_type"], [
        ["Client: I feel low.\nCounselor: Tell me more.", "That sounds hard.", "Grief", "1"],
        ["Client: hi", "Hello.", "Sleep", ""],
    ])
    got = cat.scenario(CLS["mental_health"]).load({"data_path": str(path)})
    assert got == [
        inst("\nQuestion: Topic: Grief\nType: 1.0\n\nPrevious conversation:\nClient: I feel low.\nCounselor: Tell me "
             "more.\n\nGenerate an empathetic and appropriate counselor response:", refs(("That sounds hard.", True))),
        inst("\nQuestion: Topic: Sleep\nType: nan\n\nPrevious conversation:\nClient: hi\n\nGenerate an empathetic and "
             "appropriate counselor response:", refs(("Hello.", True))),
    ]


def test_mental_health_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MedhelmError, match=r"^mental_health: data_path file not found: work/private/mh\.csv$"):
        cat.scenario(CLS["mental_health"]).load({"data_path": "work/private/mh.csv"})
    write_csv(tmp_path / "bad.csv", ["context", "topic"], [["c", "t"]])
    with pytest.raises(MedhelmError, match="column 'dialogue_type' missing"):
        cat.scenario(CLS["mental_health"]).load({"data_path": "bad.csv"})


# ============================================================================= chw_care_plan (synthetic)
def _chw_prompt(note):
    return (
        "\nYou are provided with a clinical note regarding a physician-patient interaction. Your task is to "
        "extract specific information based solely on the content provided. Do not hallucinate or infer details "
        "that are not explicitly stated in the text. Any information you include must be directly entailed by the "
        "text.\n\nInstructions:\n\nExtract the required information precisely as presented in the source text.\n\n"
        "If the text does not contain specific information, clearly state \"Not mentioned\".\n\n"
        "Maintain the patient's original wording whenever possible.\n\nResponse Format:\n\nChief Complaint\n"
        "[ENTER CHIEF COMPLAINT]\n\nHistory of Present Illness\n\n"
        "Onset: When did it start? Did it begin suddenly or gradually? [ENTER ONSET INFORMATION]\n\n"
        "Provoking/Palliating Factors: What makes the symptoms better or worse? "
        "[ENTER Provoking/Palliating Factors INFORMATION]\n\n"
        "Quality: Describe the symptoms, e.g., sharp pain, dull pain, stabbing pain. [ENTER QUALITY INFORMATION]\n\n"
        "Region/Radiation: Where are your symptoms located? Do they move? [ENTER REGION/RADIATION INFORMATION]\n\n"
        "Severity: On a scale of 1 to 10, how severe are your symptoms? [ENTER SEVERITY INFORMATION]\n\n"
        "Timing: When do you experience the symptoms? What times of day? [ENTER TIMING INFORMATION]\n\n"
        "Related Symptoms: Are there any other symptoms related to the main complaint? "
        "[ENTER RELATED SYMPTOMS INFORMATION]\n\n"
        "Ensure your responses are concise, accurate, and entirely supported by the provided text. Do not "
        "introduce external knowledge or assumptions.\n\nClinical Note:\n" + note + "\n"
    )


def test_chw_care_plan_skips_nan_notes(tmp_path):
    path = tmp_path / "chw.csv"
    write_csv(path, ["MO Note", "Other"], [["Pt reports cough x3 days.", "a"], ["", "b"], ["Line1\r\nLine2 {x}", "c"]])
    got = cat.scenario(CLS["chw_care_plan"]).load({"data_path": str(path)})
    assert got == [
        inst(_chw_prompt("Pt reports cough x3 days."), refs(("Pt reports cough x3 days.", True))),
        # pandas keeps a CRLF inside a quoted field (unlike the csv-module scenarios, see shc/starr)
        inst(_chw_prompt("Line1\r\nLine2 {x}"), refs(("Line1\r\nLine2 {x}", True))),
    ]


def test_chw_care_plan_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MedhelmError, match=r"^chw_care_plan: data_path file not found: work/private/CHW_Dataset\.csv$"):
        cat.scenario(CLS["chw_care_plan"]).load({"data_path": "work/private/CHW_Dataset.csv"})
    write_csv(tmp_path / "bad.csv", ["Note"], [["x"]])
    with pytest.raises(MedhelmError, match="column 'MO Note' missing"):
        cat.scenario(CLS["chw_care_plan"]).load({"data_path": "bad.csv"})


# ============================================================================= starr (synthetic)
STARR_HEADER = ["QC", "Diagnosis", "ActualProcedure", "HistoryPhysicalNoteText", "OperativeNoteText",
                "DischargeInstructionNoteText"]


def test_starr_filters_and_strips(tmp_path):
    path = tmp_path / "s.csv"
    write_csv(path, STARR_HEADER, [
        [" true ", " Gallstones ", "Lap chole", "H&P: RUQ pain.", "Op: uneventful.", "  Rest for 2 days.  "],
        ["FALSE", "Hernia", "Repair", "H&P", "Op", "Walk."],
        ["TRUE", "Hernia", "   ", "H&P", "Op", "Walk."],  # blank procedure after strip: skipped
        ["TRUE", "Cyst", "Excision", "HP\r\nline2", "Op", "Keep dry."],
    ])
    got = cat.scenario(CLS["starr_patient_instructions"]).load({"data_path": str(path)})
    assert got == [
        inst("Diagnosis: Gallstones\nProcedure: Lap chole\nHistory & Physical: H&P: RUQ pain.\n"
             "Operative Report: Op: uneventful.\n\n", refs(("Rest for 2 days.", True))),
        inst("Diagnosis: Cyst\nProcedure: Excision\nHistory & Physical: HP\nline2\nOperative Report: Op\n\n",
             refs(("Keep dry.", True))),
    ]


def test_starr_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MedhelmError, match=r"^starr_patient_instructions: data_path file not found: cases\.csv$"):
        cat.scenario(CLS["starr_patient_instructions"]).load({"data_path": "cases.csv"})
    (tmp_path / "short.csv").write_text(",".join(STARR_HEADER) + "\nTRUE,Dx\n")
    with pytest.raises(MedhelmError, match="fewer fields than the header"):
        cat.scenario(CLS["starr_patient_instructions"]).load({"data_path": "short.csv"})


# ============================================================================= configurable (synthetic)
def _bench(tmp_path, metrics, prompt, rows, header):
    (tmp_path / "prompt.txt").write_bytes(prompt.encode())
    write_csv(tmp_path / "data.csv", header, rows)
    (tmp_path / "config.yaml").write_text(
        "name: MY-BENCH\ndescription: My benchmark.\nprompt_file: prompt.txt\ndataset_file: data.csv\n" + metrics
    )
    return {"name": "MY-BENCH", "config_path": "config.yaml"}


def test_configurable_pandas_quirks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = _bench(
        tmp_path,
        "metrics:\n  - name: exact_match\n",
        "ID {patient_id} | {note} | {not_a_column} | {{literal}}\r\n",
        [["001", "Short note.", "007", '["No", 3]'], ["002", "", "008", '"ab"']],
        ["patient_id", "note", "correct_answer", "incorrect_answers"],
    )
    got = cat.scenario(CLS["configurable"]).load(args)
    assert got == [
        inst("ID 1 | Short note. |  | {literal}\n", refs((7, True), ("No", False), (3, False))),
        # empty cell -> NaN -> "nan"; a JSON string is iterated character by character
        inst("ID 2 | nan |  | {literal}\n", refs((8, True), ("a", False), ("b", False))),
    ]
    assert cat.scenario(CLS["configurable"]).metadata(args) == {
        "name": "MY-BENCH", "description": "My benchmark.", "tags": ["biomedical"],
        "definition_path": "https://github.com/stanford-crfm/helm/blob/main/src/helm/benchmark/scenarios/"
                           "medhelm_configurable_scenario.py",
    }


def test_configurable_correct_answer_rules(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "judge.txt").write_text('<rubric_criteria>{"a": {"score": 0}}</rubric_criteria>')
    jury = "metrics:\n  - name: jury_score\n    prompt_file: judge.txt\n    judges: [{name: d, model_name: m}]\n"
    args = _bench(tmp_path, jury, "{note}", [["n1"]], ["note"])
    assert cat.scenario(CLS["configurable"]).load(args) == [inst("n1", [])]
    args = _bench(tmp_path, jury + "  - name: rouge_l\n", "{note}", [["n1"]], ["note"])
    with pytest.raises(MedhelmError, match="must contain a 'correct_answer' column"):
        cat.scenario(CLS["configurable"]).load(args)


def test_configurable_missing_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MedhelmError, match=r"^medhelm_configurable_benchmark: config_path file not found: c\.yaml$"):
        cat.scenario(CLS["configurable"]).load({"name": "X", "config_path": "c.yaml"})
    (tmp_path / "c.yaml").write_text(
        "name: X\ndescription: d\nprompt_file: p.txt\ndataset_file: d.csv\nmetrics: [{name: exact_match}]\n")
    with pytest.raises(MedhelmError, match=r"prompt_file file not found: p\.txt \(config_path=c\.yaml\)"):
        cat.scenario(CLS["configurable"]).load({"name": "X", "config_path": "c.yaml"})
    (tmp_path / "p.txt").write_text("{a}")
    with pytest.raises(MedhelmError, match=r"dataset_file file not found: d\.csv \(config_path=c\.yaml\)"):
        cat.scenario(CLS["configurable"]).load({"name": "X", "config_path": "c.yaml"})
    (tmp_path / "d.csv").write_text("a,correct_answer\n1,2\n")
    assert cat.scenario(CLS["configurable"]).data_files({"name": "X", "config_path": "c.yaml"}) == [
        "c.yaml", "p.txt", "d.csv"]
    (tmp_path / "d.csv").write_text("a,correct_answer,incorrect_answers\n1,2,not json\n")
    with pytest.raises(MedhelmError, match="incorrect_answers in d.csv must be JSON lists"):
        cat.scenario(CLS["configurable"]).load({"name": "X", "config_path": "c.yaml"})


def test_errors_are_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for key, args in [("clear", {"condition": "homelessness", "data_path": "nowhere"}),
                      ("shc_cdi_med", {"data_path": "nowhere.csv"})]:
        with pytest.raises(MedhelmError) as info:
            cat.scenario(CLS[key]).load(args)
        assert "\n" not in str(info.value) and re.search(r"nowhere", str(info.value))


def test_shc_proxy_med_asks_three_ways_under_medhelm_080(tmp_path):
    """medhelm 0.8.0 rewrote the proxy prompt to match its A/B/C choices (patient, proxy, unclear)."""
    from medhelm_core.catalog import load_catalog

    path = tmp_path / "d.csv"
    write_csv(path, ["prompt", "context", "label"], [["Who wrote it?", "Msg.", "C"]])
    got = load_catalog((), "medhelm-0.8.0").scenario(CLS["shc_proxy_med"]).load({"data_path": str(path)})
    assert got == [inst(
        "You are reviewing a clinical messages in order to determine if they have been sent by a patient, a proxy, "
        "or if the author is unclear. Please determine the following: Who wrote it? with the following context: "
        "Msg.. Answer with 'A' if the message is written by the patient about themselves, 'B' if it is written by "
        "a proxy on the patient's behalf, or 'C' if the author is unclear. Respond with only A, B, or C. Do not "
        "provide any additional details.",
        refs(("A", False), ("B", False), ("C", True)))]
    # Every other SHC benchmark reads alike in both editions.
    write_csv(path, ["prompt", "context", "label"], [["Q1?", "C1.", "A"]])
    assert load_catalog((), "medhelm-0.8.0").scenario(CLS["shc_bmt_med"]).load({"data_path": str(path)}) == \
        cat.scenario(CLS["shc_bmt_med"]).load({"data_path": str(path)})
