"""Gated-tier scenarios on small synthetic files in each dataset's real input format.

Every expected prompt below was worked out by hand from HELM 0.5.16's scenario source (the f-strings
and constants of `*_scenario.py`, HELM's `Prompt.text` / `construct_example_prompt` for the adapted
prompt), not by calling medhelm. Tokenizers are replaced by a one-token-per-character encoder so
that the tiktoken-based length rules (ehrshot max_length, medalign EHR trimming) are checked
offline and by arithmetic.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
import textwrap
from pathlib import Path

import pytest

from medhelm_core import adapt
from medhelm_core.catalog import default_catalog
from medhelm_core.errors import MedhelmError
from medhelm_core.helm_types import CORRECT_TAG
from medhelm_core.scenarios.gated import files as gated_files

cat = default_catalog()

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
feather = pytest.importorskip("pyarrow.feather")

CLASSES = {
    "dischargeme": "helm.benchmark.scenarios.dischargeme_scenario.DischargeMeScenario",
    "ehrshot": "helm.benchmark.scenarios.ehrshot_scenario.EHRSHOTScenario",
    "medalign": "helm.benchmark.scenarios.medalign_scenario.MedalignScenario",
    "mimic_bhc": "helm.benchmark.scenarios.mimic_bhc_scenario.MIMICBHCScenario",
    "mimic_rrs": "helm.benchmark.scenarios.mimic_rrs_scenario.MIMICRRSScenario",
    "mimiciv_billing_code": "helm.benchmark.scenarios.mimiciv_billing_code_scenario.MIMICIVBillingCodeScenario",
    "n2c2_ct_matching": "helm.benchmark.scenarios.n2c2_ct_matching_scenario.N2C2CTMatchingScenario",
}


class CharEncoding:
    """A tokenizer with one token per character (stands in for tiktoken cl100k_base)."""

    def encode(self, text):
        if not isinstance(text, str):
            raise TypeError("expected str")
        return [ord(c) for c in text]

    def decode(self, tokens):
        return "".join(chr(t) for t in tokens)


@pytest.fixture
def char_tokens(monkeypatch):
    monkeypatch.setattr(gated_files, "ENCODING_FACTORY", lambda name: CharEncoding())


def load(name: str, **args) -> list[dict]:
    return cat.scenario(CLASSES[name]).load(args)


def refs(*pairs):
    return [{"output": {"text": t}, "tags": [CORRECT_TAG] if ok else []} for t, ok in pairs]


def first_prompt(entry: str, instances: list[dict], **fn_args) -> str:
    """The eval prompt HELM would send for the first instance (zero-shot)."""
    spec = cat.run_spec_functions[entry](**fn_args)["adapter_spec"]
    return adapt.render_prompt(spec, [], adapt.assign_instance_ids(instances)[0])


def test_all_gated_scenarios_registered_in_gated_tier():
    for class_name in CLASSES.values():
        assert cat.scenario(class_name).tier == "gated"


# ------------------------------------------------------------------------------------------------
# DischargeMe: six gzip CSVs under files/discharge-me/1.3/test_phase_1/
# ------------------------------------------------------------------------------------------------
def _csv_gz(path: Path, header: list[str], rows: list[list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(header)
    writer.writerows(rows)
    with gzip.open(path, "wt", encoding="utf-8", newline="") as f:
        f.write(buf.getvalue())


NOTE_100 = "Chest pain.\nBrief Hospital Course:\nPatient improved.\nDischarge Instructions:\nRest at home.\n"
NOTE_200 = "Headache. Headache resolved. Drink water."


def _dischargeme(root: Path) -> Path:
    d = root / "physionet.org" / "files" / "discharge-me" / "1.3" / "test_phase_1"
    _csv_gz(d / "diagnosis.csv.gz", ["subject_id", "stay_id", "seq_num", "icd_code", "icd_version", "icd_title"],
            [[1, 11, 1, "R079", 10, "Chest pain"], [1, 11, 2, "I10", 10, "Hypertension"], [2, 21, 1, "R51", 10, "Headache"],
             [3, 31, 1, "R05", 10, "Cough"]])
    _csv_gz(d / "triage.csv.gz", ["subject_id", "stay_id", "temperature", "chiefcomplaint"],
            [[1, 11, 98.6, "Chest pain"], [2, 21, 99.1, "Headache"]])
    _csv_gz(d / "discharge.csv.gz", ["note_id", "subject_id", "hadm_id", "note_type", "text"],
            [["1-DS-1", 1, 100, "DS", NOTE_100], ["2-DS-1", 2, 200, "DS", NOTE_200]])
    _csv_gz(d / "radiology.csv.gz", ["note_id", "subject_id", "hadm_id", "note_type", "text"],
            [["1-RR-1", 1, 100, "RR", "CXR: no acute process."], ["1-RR-2", 1, 100, "RR", "Second report."],
             ["2-RR-1", 2, 200, "RR", "CT head: normal."]])
    _csv_gz(d / "edstays.csv.gz", ["subject_id", "hadm_id", "stay_id", "intime"],
            [[1, 100, 11, "2180-01-01 10:00:00"], [2, 200, 21, "2180-02-01 11:00:00"]])
    _csv_gz(d / "discharge_target.csv.gz", ["note_id", "hadm_id", "discharge_instructions", "brief_hospital_course"],
            [["1-DS-1", 100, "Rest at home.", "Patient improved."], ["2-DS-1", 200, "Drink water.", "Headache resolved."]])
    return root / "physionet.org"


def test_dischargeme(tmp_path):
    data_path = str(_dischargeme(tmp_path))
    got = load("dischargeme", data_path=data_path)
    head = "from the following patient discharge text and radiology report text.    \n\nDischarge Text:\n"
    assert got == [
        {"input": {"text": "Generate the Brief Hospital Course " + head
                   + "Chest pain.\nBrief Hospital Course:\n\nDischarge Instructions:\nRest at home.\n"
                   + "\n\nRadiology Report:\nCXR: no acute process.\n\nBrief Hospital Course:\n"},
         "references": refs(("Patient improved.", True)), "split": "test"},
        {"input": {"text": "Generate the Discharge Instructions " + head
                   + "Chest pain.\nBrief Hospital Course:\nPatient improved.\nDischarge Instructions:\n\n"
                   + "\n\nRadiology Report:\nCXR: no acute process.\n\nDischarge Instructions:\n"},
         "references": refs(("Rest at home.", True)), "split": "test"},
        {"input": {"text": "Generate the Brief Hospital Course " + head + "Headache.  Drink water."
                   + "\n\nRadiology Report:\nCT head: normal.\n\nBrief Hospital Course:\n"},
         "references": refs(("Headache resolved.", True)), "split": "test"},
        {"input": {"text": "Generate the Discharge Instructions " + head + "Headache. Headache resolved. "
                   + "\n\nRadiology Report:\nCT head: normal.\n\nDischarge Instructions:\n"},
         "references": refs(("Drink water.", True)), "split": "test"},
    ]
    prompt = first_prompt("dischargeme", got, data_path=data_path)
    assert prompt == ("Given a discharge text, a radiology report text, and a target document of either discharge "
                      "instructions or a brief hospital course, return the generated target document from the "
                      "context provided.\n\n" + got[0]["input"]["text"] + "\nAnswer:")


def test_dischargeme_missing_file_names_physionet(tmp_path):
    data_path = _dischargeme(tmp_path)
    (data_path / "files/discharge-me/1.3/test_phase_1/triage.csv.gz").unlink()
    with pytest.raises(MedhelmError) as err:
        load("dischargeme", data_path=str(data_path))
    message = str(err.value)
    assert "\n" not in message
    assert "triage file not found" in message and "triage.csv.gz" in message
    assert "https://physionet.org/content/discharge-me/1.3/" in message


# ------------------------------------------------------------------------------------------------
# EHRSHOT: MEDS parquet (data/, metadata/, labels/<task>/)
# ------------------------------------------------------------------------------------------------
def _ts(s):
    import datetime as dt

    return None if s is None else dt.datetime.fromisoformat(s)


def _ehrshot(root: Path, labels: dict[str, list[tuple]]) -> Path:
    (root / "data").mkdir(parents=True)
    (root / "metadata").mkdir()
    events = [  # file order is not sorted on purpose
        (1, "2020-06-01T00:00:00", "ICD10CM/I10"),
        (2, "2019-05-05T00:00:00", "RxNorm/7"),
        (1, "2020-01-01T00:00:00", "SNOMED/1"),
        (1, None, "Gender/F"),  # static code: no time, never "before" a prediction time
        (1, "2021-01-01T00:00:00", "LOINC/2"),
        (1, "2020-06-01T00:00:00", "CPT4/99"),  # same time as I10, after it in the file
    ]
    pq.write_table(pa.table({
        "subject_id": pa.array([e[0] for e in events], pa.int64()),
        "time": pa.array([_ts(e[1]) for e in events], pa.timestamp("us")),
        "code": pa.array([e[2] for e in events], pa.string()),
        "numeric_value": pa.array([None] * len(events), pa.float32()),
    }), root / "data" / "data.parquet")
    pq.write_table(pa.table({"subject_id": pa.array([1, 2], pa.int64()), "split": ["train", "held_out"]}),
                   root / "metadata" / "subject_splits.parquet")
    for task, rows in labels.items():
        (root / "labels" / task).mkdir(parents=True)
        pq.write_table(pa.table({
            "subject_id": pa.array([r[0] for r in rows], pa.int64()),
            "prediction_time": pa.array([_ts(r[1]) for r in rows], pa.timestamp("us")),
            "boolean_value": pa.array([r[2] for r in rows], pa.bool_()),
        }), root / "labels" / task / "labels.parquet")
    return root


READMISSION_INSTRUCTION = (
    "You are an expert hospitalist at Stanford Healthcare, an academic medical center affiliated with Stanford "
    "University. You specialize in predicting 30-day readmission.\n\n"
    "Instruction: Review the patient's EHR history. Based on all available medical evidence in the provided EHR, "
    "please answer the question: If this patient is discharged from the hospital right now, is the patient likely"
    "     to be readmitted to the hospital within 30 days?\n")


def _ehrshot_prompt(instruction: str, codes: list[str]) -> str:
    return "\n# Instructions\n" + instruction + "\n\n# Your Task\nPatient EHR:\n" + "\n".join(f"- {c}" for c in codes) + "\n\n"


GUO_LABELS = [(2, "2020-01-01T00:00:00", True), (1, "2020-07-01T00:00:00", False)]  # not in (subject, time) order


def test_ehrshot_prompts_follow_helm(tmp_path, char_tokens):
    data_path = str(_ehrshot(tmp_path / "meds", {"guo_readmission": GUO_LABELS,
                                                   "new_hypertension": [(1, "2020-12-31T00:00:00", True)]}))
    got = load("ehrshot", subject="guo_readmission", max_length=100000, data_path=data_path)
    # Timelines are built in sorted label order: (1, 2020-07-01) -> SNOMED/1, I10, CPT4/99 (the tie keeps
    # file order; the timeless static code is left out); (2, 2020-01-01) -> RxNorm/7. HELM assigns these
    # prompts positionally to the labels in FILE order, so the first label (subject 2, True) gets subject
    # 1's timeline: kept as HELM does it.
    p_subject1 = _ehrshot_prompt(READMISSION_INSTRUCTION, ["SNOMED/1", "ICD10CM/I10", "CPT4/99"])
    p_subject2 = _ehrshot_prompt(READMISSION_INSTRUCTION, ["RxNorm/7"])
    assert got == [
        {"input": {"text": p_subject1}, "references": refs(("yes", True), ("no", False)), "split": "test"},
        {"input": {"text": p_subject2}, "references": refs(("yes", False), ("no", True)), "split": "test"},
    ]
    prompt = first_prompt("ehrshot", got, subject="guo_readmission", data_path=data_path)
    assert prompt == ("Answer A for yes, B for no.\n\n: " + p_subject1 + "\nA. yes\nB. no\n"
                      "Respond with only 'A' for yes or 'B' for no. Do not add any other text, punctuation, or symbols:")
    # max_length counts prompt tokens: a limit between the two lengths drops the longer prompt
    assert len(p_subject2) < len(p_subject1)
    short = load("ehrshot", subject="guo_readmission", max_length=len(p_subject2), data_path=data_path)
    assert [i["input"]["text"] for i in short] == [p_subject2]


def test_ehrshot_new_task_instruction(tmp_path, char_tokens):
    data_path = str(_ehrshot(tmp_path / "meds", {"guo_readmission": GUO_LABELS,
                                                   "new_hypertension": [(1, "2020-12-31T00:00:00", True),
                                                                        (3, "2020-12-31T00:00:00", False)]}))
    got = load("ehrshot", subject="new_hypertension", max_length=100000, data_path=data_path)
    text = got[0]["input"]["text"]
    persona, clinical, codes, action = text.split("\n# Your Task\n")[0].removeprefix("\n# Instructions\n").split("\n\n")[:4]
    assert persona == ("You are an expert primary care physician at Stanford Healthcare, an academic medical center "
                       "affiliated with Stanford University. You specialize in predicting hypertension.")
    assert clinical.startswith("Clinical Definition: Hypertension, or high blood pressure, is a chronic medical")
    assert clinical.endswith("and noting any related health conditions or medications.")
    # the sorted code list as HELM's base_prompt docstring prints it for hypertension
    assert codes == (
        "Medical Code Definition: In an electronic health record (EHR), hypertension is denoted by the occurrence of "
        "any of the following medical codes: ICD10CM/I10, ICD9CM/401, ICD9CM/401.0, ICD9CM/401.1, ICD9CM/401.9, "
        "SNOMED/1201005, SNOMED/1218009, SNOMED/155296003, SNOMED/18416000, SNOMED/194758001, SNOMED/194760004, "
        "SNOMED/19769006, SNOMED/23717007, SNOMED/266228004, SNOMED/35303009, SNOMED/371125006, SNOMED/40511000119107, "
        "SNOMED/429457004, SNOMED/46481004, SNOMED/59621000, SNOMED/63287004, SNOMED/71874008, SNOMED/72022006, "
        "SNOMED/78808002, SNOMED/78975002, SNOMED/9901000")
    assert action == ("Instruction: Review the patient's EHR history. Based on all available medical evidence in the "
                      "provided EHR, please answer the question: Is this patient likely to receive a first-time "
                      "diagnosis     of Hypertension within the next year?")
    assert "within the next year?\n\n\n# Your Task\n" in text  # paragraph + "\n", then the prompt's "\n\n"
    # subject 1 at 2020-12-31: SNOMED/1, I10, CPT4/99 (LOINC/2 is in 2021); subject 3 has no events
    assert text.endswith("# Your Task\nPatient EHR:\n- SNOMED/1\n- ICD10CM/I10\n- CPT4/99\n\n")
    assert got[1]["input"]["text"].endswith("# Your Task\nPatient EHR:\n\n\n")


def test_ehrshot_errors(tmp_path, char_tokens):
    root = _ehrshot(tmp_path / "meds", {"guo_readmission": GUO_LABELS})
    (root / "labels" / "guo_icu").mkdir()  # HELM checks every task folder has its labels.parquet
    with pytest.raises(MedhelmError, match=r"ehrshot: labels file not found: .*guo_icu/labels.parquet - get EHRSHOT"):
        load("ehrshot", subject="guo_readmission", max_length=100, data_path=str(root))
    (root / "labels" / "guo_icu").rmdir()
    with pytest.raises(MedhelmError, match="labels of subject 'guo_los'"):
        load("ehrshot", subject="guo_los", max_length=100, data_path=str(root))
    (root / "labels" / "lab_anemia").mkdir()
    pq.write_table(pa.table({"subject_id": pa.array([1], pa.int64()),
                             "prediction_time": pa.array([_ts("2020-01-01T00:00:00")], pa.timestamp("us")),
                             "boolean_value": [True]}), root / "labels" / "lab_anemia" / "labels.parquet")
    with pytest.raises(MedhelmError, match="samples 10000 labels of a lab_ task"):
        load("ehrshot", subject="lab_anemia", max_length=100, data_path=str(root))
    with pytest.raises(MedhelmError) as err:
        load("ehrshot", subject="guo_readmission", max_length=100, data_path=str(tmp_path / "nowhere"))
    assert "parquet data file not found" in str(err.value)
    assert "https://som-shahlab.github.io/ehrshot-website/" in str(err.value) and "\n" not in str(err.value)


# ------------------------------------------------------------------------------------------------
# MedAlign: two TSVs + medalign_ehr_xml/<person_id>.xml
# ------------------------------------------------------------------------------------------------
MEDALIGN_TEMPLATE = "Instruction: Answer the following question based on the EHR:\n\nEHR: {ehr}\n\nQuestion: {question}\n\nAnswer:"
EHR_1001 = "<record><event>dx: hypertension</event><event>rx: lisinopril</event></record>"
EHR_1002 = "aspirin 81mg"
Q1, Q2 = "What is the last diagnosis?", "List medications."


def _tsv(path: Path, header: list[str], rows: list[list]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, delimiter="\t")
        writer.writerow(header)
        writer.writerows(rows)


def _medalign(root: Path) -> Path:
    (root / "medalign_ehr_xml").mkdir(parents=True)
    _tsv(root / "clinician-reviewed-model-responses.tsv",
         ["instruction_id", "question", "person_id", "model_response"],
         [[1, Q1, 1001, "r1"], [1, Q1, 1001, "r2"], [2, Q2, 1002, "r3"], [3, "Unanswered?", 1001, "r4"]])
    _tsv(root / "clinician-instruction-responses.tsv", ["instruction_id", "annotator_num", "clinician_response"],
         [[2, "Annotator_1", "Aspirin."], [1, "Annotator_2", "Not this one."], [1, "Annotator_1", "Hypertension."],
          [3, "Annotator_2", "Only a second annotator."]])
    (root / "medalign_ehr_xml" / "1001.xml").write_text(EHR_1001, encoding="utf-8")
    (root / "medalign_ehr_xml" / "1002.xml").write_text(EHR_1002, encoding="utf-8")
    return root


def test_medalign(tmp_path, char_tokens):
    data_path = str(_medalign(tmp_path / "medalign"))
    # EHR budget = max_length - 256 (generation) - len(template) - len(question), in tokens (= characters here)
    max_length = 256 + len(MEDALIGN_TEMPLATE) + len(Q1) + 20
    assert len(EHR_1001) > 20                               # instruction 1: only the last 20 characters fit
    assert len(EHR_1002) <= 20 + len(Q1) - len(Q2)          # instruction 2: the whole EHR fits
    got = load("medalign", max_length=max_length, data_path=data_path)
    p1 = f"Instruction: Answer the following question based on the EHR:\n\nEHR: {EHR_1001[-20:]}\n\nQuestion: {Q1}\n\nAnswer:"
    p2 = f"Instruction: Answer the following question based on the EHR:\n\nEHR: {EHR_1002}\n\nQuestion: {Q2}\n\nAnswer:"
    # gold rows of Annotator_1 in file order (instruction 2, then 1); instruction 3 has none
    assert got == [
        {"input": {"text": "\nQuestion: " + p2}, "references": refs(("Aspirin.", True)), "split": "test"},
        {"input": {"text": "\nQuestion: " + p1}, "references": refs(("Hypertension.", True)), "split": "test"},
    ]
    # medalign's adapter adds nothing around the input but a newline (no instructions, no output noun)
    assert first_prompt("medalign", got, data_path=data_path) == "\nQuestion: " + p2 + "\n"
    # no room at all: the EHR is left out
    tiny = load("medalign", max_length=256 + len(MEDALIGN_TEMPLATE) + len(Q1), data_path=data_path)
    assert tiny[1]["input"]["text"] == "\nQuestion: " + MEDALIGN_TEMPLATE.format(ehr="", question=Q1)


def test_medalign_missing(tmp_path, char_tokens):
    root = _medalign(tmp_path / "medalign")
    (root / "medalign_ehr_xml" / "1002.xml").unlink()
    with pytest.raises(MedhelmError, match=r"EHR of person_id 1002 .* not found: .*1002.xml - get MedAlign"):
        load("medalign", max_length=100000, data_path=str(root))
    with pytest.raises(MedhelmError) as err:
        load("medalign", max_length=100000, data_path=str(tmp_path / "none"))
    assert "Required instructions file not found" in str(err.value)
    assert "https://som-shahlab.github.io/medalign-website/" in str(err.value)


# ------------------------------------------------------------------------------------------------
# MIMIC-BHC: JSON lines
# ------------------------------------------------------------------------------------------------
def test_mimic_bhc(tmp_path):
    path = tmp_path / "mimic_iv_bhc.json"
    lines = [{"input": "<SEX> M <SERVICE> SURGERY <ALLERGIES> None", "target": "Mr. ___ was admitted."},
             {"input": "", "target": "no note: skipped"},
             {"input": "note without summary", "target": None},
             {"input": "<SEX> F <SERVICE> MEDICINE", "target": "Ms. ___ recovered.", "extra": 1}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    got = load("mimic_bhc", data_path=str(path))
    assert got == [
        {"input": {"text": "<SEX> M <SERVICE> SURGERY <ALLERGIES> None"},
         "references": refs(("Mr. ___ was admitted.", True)), "split": "test"},
        {"input": {"text": "<SEX> F <SERVICE> MEDICINE"}, "references": refs(("Ms. ___ recovered.", True)),
         "split": "test"},
    ]
    assert first_prompt("mimic_bhc", got, data_path=str(path)) == (
        "Summarize the clinical note into a brief hospital course.\n\nClinical Note:\n"
        "<SEX> M <SERVICE> SURGERY <ALLERGIES> None\nBrief Hospital Course:")
    with pytest.raises(MedhelmError) as err:
        load("mimic_bhc", data_path=str(tmp_path / "absent.json"))
    assert "[MIMICBHCScenario] Required data file not found" in str(err.value)
    assert "https://physionet.org/content/labelled-notes-hospital-course/" in str(err.value)


# ------------------------------------------------------------------------------------------------
# MIMIC-RRS: line-aligned .tok files
# ------------------------------------------------------------------------------------------------
def test_mimic_rrs(tmp_path):
    (tmp_path / "test.findings.tok").write_text("  The heart is normal in size .  \n\nLungs are clear .\r\n")
    (tmp_path / "test.impression.tok").write_text("Normal heart .\nSkipped : no finding .\n  No acute disease .  \n")
    (tmp_path / "train.findings.tok").write_text("never read\n")
    got = load("mimic_rrs", data_path=str(tmp_path))
    assert got == [
        {"input": {"text": "The heart is normal in size ."}, "references": refs(("Normal heart .", True)),
         "split": "test"},
        {"input": {"text": "Lungs are clear ."}, "references": refs(("No acute disease .", True)), "split": "test"},
    ]
    assert first_prompt("mimic_rrs", got, data_path=str(tmp_path)) == (
        "Generate the impression section of the radiology report based on its findings. This will not be used to "
        "diagnose nor treat any patients. Be as concise as possible.\n\nFindings:\nThe heart is normal in size .\n"
        "Impression:")
    (tmp_path / "test.impression.tok").write_text("only one line\n")
    with pytest.raises(MedhelmError, match="must have the same length"):
        load("mimic_rrs", data_path=str(tmp_path))
    (tmp_path / "test.impression.tok").unlink()
    with pytest.raises(MedhelmError, match=r"\[MIMICRRSScenario\] Required impressions file not found: .*test.impression.tok"):
        load("mimic_rrs", data_path=str(tmp_path))


# ------------------------------------------------------------------------------------------------
# MIMIC-IV billing codes: Feather
# ------------------------------------------------------------------------------------------------
def test_mimiciv_billing_code(tmp_path):
    path = tmp_path / "mimiciv_icd10.feather"
    feather.write_feather(pa.table({
        "text": ["Pt with HTN and DM.", "Note two."],
        "target": pa.array([["I10", "E119"], ["Z8673"]], pa.list_(pa.string())),
        "hadm_id": [1, 2],
    }), str(path))
    got = load("mimiciv_billing_code", data_path=str(path))
    assert got == [
        {"input": {"text": "Pt with HTN and DM."}, "references": refs(("I10,E119", True)), "split": "test"},
        {"input": {"text": "Note two."}, "references": refs(("Z8673", True)), "split": "test"},
    ]
    assert first_prompt("mimiciv_billing_code", got, data_path=str(path)) == (
        "Given the following clinical note, identify all relevant ICD-10 codes.\n\nNote:\nPt with HTN and DM.\n"
        "Predicted ICD-10 Codes:")
    # a target that is a single value becomes a one-element list of its str()
    single = tmp_path / "single.feather"
    feather.write_feather(pa.table({"text": ["n"], "target": ["J18.9"]}), str(single))
    assert load("mimiciv_billing_code", data_path=str(single))[0]["references"] == refs(("J18.9", True))
    # rows HELM cannot process are skipped (here: no "text" column at all)
    bad = tmp_path / "bad.feather"
    feather.write_feather(pa.table({"note": ["n"], "target": ["J18.9"]}), str(bad))
    assert load("mimiciv_billing_code", data_path=str(bad)) == []


def _billing_state(prediction: str | None, reference: str) -> dict:
    result = None if prediction is None else {"completions": [{"text": prediction}]}
    return {"instance": {"id": "id0", "references": [{"output": {"text": reference}, "tags": [CORRECT_TAG]}]},
            "result": result}


def test_mimiciv_billing_code_metric():
    from medhelm_core.metrics import create_metric
    from medhelm_core.metrics.base import MetricError

    metric = create_metric({"class_name": "helm.benchmark.metrics.mimiciv_billing_code_metrics.MIMICIVBillingCodeMetric",
                            "args": {}}, cat.metrics)

    def scores(prediction, reference):
        return {s.name["name"]: s.sum for s in metric.evaluate_generation({}, _billing_state(prediction, reference), None)}

    # refs {I10, E119}; prediction {I10, E11.9, Z86.73} ("**" and a trailing period removed): tp = 1
    assert scores("**I10**, E11.9 and Z86.73.", "I10,E119") == {
        "mimiciv_billing_code_precision": 1 / 3, "mimiciv_billing_code_recall": 1 / 2,
        "mimiciv_billing_code_f1": 2 * 1 / (2 + 3)}
    assert scores("  I10  ", "I10") == {"mimiciv_billing_code_precision": 1.0, "mimiciv_billing_code_recall": 1.0,
                                        "mimiciv_billing_code_f1": 1.0}
    assert scores("J45.909", "I10") == {"mimiciv_billing_code_precision": 0.0, "mimiciv_billing_code_recall": 0.0,
                                        "mimiciv_billing_code_f1": 0.0}
    assert scores("", "I10") == {"mimiciv_billing_code_precision": 0.0, "mimiciv_billing_code_recall": 0.0,
                                 "mimiciv_billing_code_f1": 0.0}
    # duplicates count once
    assert scores("I10 I10 I10 E785", "I10,I10") == {"mimiciv_billing_code_precision": 0.5,
                                                     "mimiciv_billing_code_recall": 1.0,
                                                     "mimiciv_billing_code_f1": 2 / 3}
    # no completion / no prediction: no stats
    assert metric.evaluate_generation({}, _billing_state(None, "I10"), None) == []
    # "Z8673" (no dot, 4 digits after the letter) is not an ICD code for HELM's pattern; with an empty
    # prediction there is no code at all and HELM's scikit-learn call (and run) fails
    with pytest.raises(MetricError, match="unknown is not supported"):
        scores("", "Z8673")


# ------------------------------------------------------------------------------------------------
# n2c2 2018 Track 1: one XML per patient under test/
# ------------------------------------------------------------------------------------------------
STARS = "*" * 100
XML_100 = textwrap.dedent(f"""\
    <?xml version="1.0" encoding="UTF-8" ?>
    <PatientMatching>
    <TEXT><![CDATA[

    Record date: 2090-01-01

    Patient seen for chest pain.



    Stable.

    {STARS}

    Record date: 2091-02-03
    Follow up visit.

    ]]></TEXT>
    <TAGS>
    <ABDOMINAL met="not met" />
    <CREATININE met="met" />
    </TAGS>
    </PatientMatching>
    """)
XML_101 = textwrap.dedent("""\
    <?xml version="1.0" encoding="UTF-8" ?>
    <PatientMatching>
    <TEXT><![CDATA[No date in this note.]]></TEXT>
    <TAGS>
    <ABDOMINAL met="met" />
    <CREATININE met="not met" />
    </TAGS>
    </PatientMatching>
    """)


def _n2c2_prompt(subject: str, definition: str, notes: list[str], dates: list[str], current_date: str) -> str:
    rendered = [f"## Note #{i + 1}\nDate: {dates[i]}\n{note}" for i, note in enumerate(notes)]
    rule = "-" * 100
    return (
        "\n    # Task\n    Your job is to decide whether the given patient meets the inclusion criterion for a clinical "
        "trial.\n\n    # Inclusion Criterion\n"
        f'    The inclusion criterion being assessed is: "{subject}".\n'
        f'    The definition of the inclusion criterion is: "{definition}".\n\n'
        "    # Patient Clinical Notes\n"
        f"    Below is a set of {len(notes)} clinical notes describing the patient's current health status.     "
        "Each note is separated by a header with the date that the note was written, as well as a long list of "
        f"asterisks.\n\n    {rule}\n\n    " + ("\n" + "*" * 50 + "\n\n").join(rendered) + f"\n\n    {rule}\n\n"
        f"    # Current Date\n    Assume that the current date is: {current_date}\n\n"
        f'    # Question\n    Does the patient meet the inclusion criterion "{subject}"?\n    ')


def test_n2c2_ct_matching(tmp_path):
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "101.xml").write_text(XML_101)
    (tmp_path / "test" / "100.xml").write_text(XML_100)
    (tmp_path / "test" / "README.txt").write_text("not a patient")
    got = load("n2c2_ct_matching", data_path=str(tmp_path), subject="CREATININE")
    # "\n\n\n" -> "\n" once (four newlines become two), split on 100 asterisks, each note stripped
    notes = ["Record date: 2090-01-01\n\nPatient seen for chest pain.\n\nStable.",
             "Record date: 2091-02-03\nFollow up visit."]
    definition = "Serum creatinine level above the upper normal limit"
    assert got == [
        {"input": {"text": _n2c2_prompt("CREATININE", definition, notes, ["2090-01-01", "2091-02-03"], "2091-02-03")},
         "references": refs(("yes", True), ("no", False)), "split": "test"},
        {"input": {"text": _n2c2_prompt("CREATININE", definition, ["No date in this note."], [""], "None")},
         "references": refs(("yes", False), ("no", True)), "split": "test"},
    ]
    assert first_prompt("n2c2_ct_matching", got, data_path=str(tmp_path), subject="CREATININE") == (
        "Answer A for yes, B for no.\n\n: " + got[0]["input"]["text"] + "\nA. yes\nB. no\n"
        "Answer A for yes, B for no. Do not add any other text, punctuation, or symbols:")
    abdominal = load("n2c2_ct_matching", data_path=str(tmp_path), subject="ABDOMINAL")
    assert [i["references"][0]["tags"] for i in abdominal] == [[], [CORRECT_TAG]]
    assert '"History of intra-abdominal surgery. This could include any form of intra-abdominal surgery,     ' \
           'including but not limited to' in abdominal[0]["input"]["text"]
    with pytest.raises(MedhelmError) as err:
        load("n2c2_ct_matching", data_path=str(tmp_path / "elsewhere"), subject="CREATININE")
    assert "test folder of patient XML files not found" in str(err.value)
    assert "https://portal.dbmi.hms.harvard.edu/projects/n2c2-nlp/" in str(err.value)


# ------------------------------------------------------------------------------------------------
# Missing data in a suite: one line, and the other tiers still build
# ------------------------------------------------------------------------------------------------
GATED_ENTRIES = {
    "dischargeme": "dischargeme:data_path={d}/physionet.org",
    "ehrshot": "ehrshot:max_length=100000,subject=guo_readmission,data_path={d}/meds/",
    "medalign": "medalign:max_length=100000,data_path={d}/medalign/",
    "mimic_bhc": "mimic_bhc:data_path={d}/mimic_iv_bhc.json",
    "mimic_rrs": "mimic_rrs:data_path={d}/rrs",
    "mimiciv_billing_code": "mimiciv_billing_code:data_path={d}/mimiciv_icd10.feather",
    "n2c2_ct_matching": "n2c2_ct_matching:subject=ABDOMINAL,data_path={d}/n2c2",
}


@pytest.mark.parametrize("name", list(GATED_ENTRIES))
def test_missing_gated_data_is_one_line_before_anything_runs(name, tmp_path, capsys):
    from medhelm_cli import run_main

    prod_env = tmp_path / "prod_env"
    prod_env.mkdir()
    (prod_env / "credentials.conf").write_text('stanfordhealthcareApiKey: "sk-not-used"\n')
    description = GATED_ENTRIES[name].format(d=tmp_path / "nowhere")
    conf = tmp_path / "gated.conf"
    conf.write_text('entries: [\n  {description: "' + description + ',model=openai/gpt-4o-2024-05-13,'
                    'model_deployment=stanfordhealthcare/gpt-4o-2024-05-13", priority: 1},\n]\n')
    code = run_main(["--conf-paths", str(conf), "--suite", "s", "--max-eval-instances", "5",
                     "--output-path", str(tmp_path / "out"), "--local-path", str(prod_env)])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1, err
    assert "not found" in err and "nowhere" in err and "https://" in err, err
    assert not (tmp_path / "out" / "runs").exists()


def test_other_tiers_still_materialize(tmp_path):
    """A gated dataset without its files fails alone: the private one in the same suite builds."""
    from medhelm_core.run import datasets, entries as entry_layer
    from medhelm_core.run.workspace import Workspace
    from medhelm_core.helm_config.expand import expand_confs

    shc = tmp_path / "shc.csv"
    shc.write_text("prompt,context,label\nIs it A?,Visit 1.,A\nIs it B?,Visit 2.,B\n")
    conf = tmp_path / "mixed.conf"
    conf.write_text(
        "entries: [\n"
        f'  {{description: "shc_ptbm_med:data_path={shc},model=openai/gpt-4o-2024-05-13,'
        'model_deployment=stanfordhealthcare_shc/gpt-4o-2024-05-13", priority: 1},\n'
        f'  {{description: "mimic_rrs:data_path={tmp_path}/no_rrs,model=openai/gpt-4o-2024-05-13,'
        'model_deployment=stanfordhealthcare/gpt-4o-2024-05-13", priority: 1},\n'
        "]\n")
    ws = Workspace(tmp_path / "out", tmp_path / "prod_env")
    entries = expand_confs([conf], max_eval_instances=5, local_path=tmp_path / "prod_env",
                           run_spec_functions=default_catalog().run_spec_functions)
    entry_layer.register_runs(ws, "mixed", entries)
    partitions = entry_layer.scenario_partitions(entries, ws.catalog)
    assert [len(partitions["private"]), len(partitions["gated"])] == [1, 1]
    with pytest.raises(MedhelmError) as err:
        datasets.build_dataset(ws, partitions["gated"][0])
    assert "mimic_rrs: [MIMICRRSScenario] Required findings file not found" in str(err.value)
    assert "\n" not in str(err.value)
    built = datasets.build_dataset(ws, partitions["private"][0])
    assert built["num_instances"] == 2 and built["tier"] == "private"


def _real_cl100k():
    try:
        return gated_files._tiktoken_encoding("cl100k_base")
    except MedhelmError as e:
        pytest.skip(f"tiktoken cl100k_base not loadable offline: {e}")


def test_real_cl100k_tokenizer(tmp_path):
    """With tiktoken's BPE file at hand (downloaded once, or the copy LiteLLM ships), the real
    tokenizer drives the same rules: "hello world" is [15339, 1917] in cl100k_base."""
    assert _real_cl100k().encode("hello world") == [15339, 1917]
    data_path = str(_ehrshot(tmp_path / "meds", {"guo_readmission": GUO_LABELS}))
    assert len(load("ehrshot", subject="guo_readmission", max_length=100000, data_path=data_path)) == 2
    assert load("ehrshot", subject="guo_readmission", max_length=10, data_path=data_path) == []
    medalign = str(_medalign(tmp_path / "medalign"))
    got = load("medalign", max_length=100000, data_path=medalign)
    assert got[1]["input"]["text"] == "\nQuestion: " + MEDALIGN_TEMPLATE.format(ehr=EHR_1001, question=Q1)


# ------------------------------------------------------------------------------------------------
# End to end: gated runs through medhelm-run (jury included) and medhelm-summarize
# ------------------------------------------------------------------------------------------------
def test_gated_runs_end_to_end(tmp_path, monkeypatch, mock_server):
    import yaml

    from medhelm_cli import run_main, summarize_main
    from tests.oracle import SHARED

    (tmp_path / "rrs").mkdir()
    (tmp_path / "rrs" / "test.findings.tok").write_text("The heart is normal in size .\nLungs are clear .\n")
    (tmp_path / "rrs" / "test.impression.tok").write_text("Normal heart .\nNo acute disease .\n")
    feather.write_feather(pa.table({
        "text": ["Hypertension treated; I10 noted.", "Diabetes E11.9 follow-up."],
        "target": pa.array([["I10", "E785"], ["E119"]], pa.list_(pa.string()))}), str(tmp_path / "icd.feather"))
    (tmp_path / "n2c2" / "test").mkdir(parents=True)
    (tmp_path / "n2c2" / "test" / "100.xml").write_text(XML_100)
    (tmp_path / "n2c2" / "test" / "101.xml").write_text(XML_101)
    mock = {"client_spec": {"class_name": "helm.clients.openai_client.OpenAIClient",
                            "args": {"base_url": mock_server.base_url}},
            "tokenizer_name": "simple/tokenizer1", "max_sequence_length": 128000}
    (tmp_path / "prod_env").mkdir()
    (tmp_path / "prod_env" / "model_deployments.yaml").write_text(yaml.safe_dump({"model_deployments": [
        {"name": "mockai/mock-gpt-a", "model_name": "mockai/mock-gpt-a", **mock},
        {"name": "mockai/mock-judge", "model_name": "mockai/mock-judge", **mock}]}))
    (tmp_path / "prod_env" / "credentials.conf").write_text('mockaiApiKey: "sk-mock-not-a-secret"\n')
    (tmp_path / "judges.yaml").write_text(yaml.safe_dump({"judges": [
        {"name": "gpt", "model": "mockai/mock-judge", "model_deployment": "mockai/mock-judge"}]}))
    model = "model=mockai/mock-gpt-a,model_deployment=mockai/mock-gpt-a"
    (tmp_path / "gated.conf").write_text(
        "entries: [\n"
        f'  {{description: "mimic_rrs:data_path=rrs,jury_config_path=judges.yaml,{model}", priority: 1}},\n'
        f'  {{description: "mimiciv_billing_code:data_path=icd.feather,{model}", priority: 1}},\n'
        f'  {{description: "n2c2_ct_matching:subject=CREATININE,{model},data_path=n2c2", priority: 1}},\n'
        "]\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    assert run_main(["--conf-paths", "gated.conf", "--suite", "gated", "--max-eval-instances", "10",
                     "--num-threads", "2", "--output-path", "out", "--local-path", "prod_env"]) == 0
    runs = tmp_path / "out" / "runs" / "gated"

    def stat_names(run):
        return {s["name"]["name"] for s in json.loads((runs / run / "stats.json").read_text())}

    rrs = "mimic_rrs:model=mockai_mock-gpt-a,model_deployment=mockai_mock-gpt-a"
    assert {"mimic_rrs_accuracy", "rouge_l"} <= stat_names(rrs)
    state = json.loads((runs / rrs / "scenario_state.json").read_text())["request_states"][0]
    judged = state["annotations"]["mimic_rrs"]
    assert set(judged) >= {"prompt_text", "gpt"} and set(judged["gpt"]) == {"accuracy", "completeness", "clarity"}
    finding = state["instance"]["input"]["text"]
    assert judged["prompt_text"].startswith("You are tasked with evaluating the quality of the generated impression")
    assert f"<user_request>\n{finding}\n</user_request>" in judged["prompt_text"]  # HELM: instance.input.text
    assert {"mimiciv_billing_code_precision", "mimiciv_billing_code_recall", "mimiciv_billing_code_f1"} <= \
        stat_names("mimiciv_billing_code:model=mockai_mock-gpt-a,model_deployment=mockai_mock-gpt-a")
    assert "exact_match" in stat_names(
        "n2c2_ct_matching:subject=CREATININE,model=mockai_mock-gpt-a,model_deployment=mockai_mock-gpt-a")

    schema = SHARED / "helm" / "schema_medhelm.yaml"
    assert summarize_main(["--suite", "gated", "--output-path", "out", "--schema-path", str(schema)]) == 0
    for group in ("mimic_rrs", "mimiciv_billing_code", "n2c2_ct_matching"):
        tables = json.loads((runs / "groups" / f"{group}.json").read_text())
        values = [cell.get("value") for t in tables for row in t["rows"] for cell in row[1:]]
        assert any(isinstance(v, (int, float)) for v in values), group
