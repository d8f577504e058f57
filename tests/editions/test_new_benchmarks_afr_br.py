"""`healthqa_br` and `mmlu_clinical_afr`, benchmarks of both editions: medhelm 0.8.0's runs
(../shared/oracle/medhelm-0.8.0/new-benchmarks) reproduced under `--edition medhelm-0.8.0`, and the
run specs of the default edition equal to what HELM 0.5.16's run-spec functions build
(`run_specs/healthqa_br_run_specs.py`, `run_specs/mmlu_clinical_afr_run_specs.py`; the values below are
read from that source and written out)."""
from __future__ import annotations

import pytest

from medhelm_core.catalog import load_catalog
from medhelm_core.editions import DEFAULT_EDITION
from medhelm_core.errors import MedhelmError
from medhelm_core.helm_types import drop_nones
from tests.editions.new_benchmarks import assert_run_equals_medhelm, golden_runs

BENCHMARKS = ["healthqa_br", "mmlu_clinical_afr"]
RUNS = [run for benchmark in BENCHMARKS for run in golden_runs(benchmark)]
AFR_CLASS = "helm.benchmark.scenarios.mmlu_clinical_afr_scenario.MMLU_Clinical_Afr_Scenario"


def test_every_benchmark_has_golden_runs():
    assert len(RUNS) == 6  # healthqa_br x 2 models, mmlu_clinical_afr x (ck/af, virology/am) x 2 models


@pytest.mark.parametrize("run", RUNS)
def test_run_equals_medhelm(out, run):
    assert_run_equals_medhelm(out, run)


# ----------------------------------------------------------------------------- HELM 0.5.16's run specs
EXACT_MATCH = [
    {"class_name": "helm.benchmark.metrics.basic_metrics.BasicGenerationMetric",
     "args": {"names": ["exact_match", "quasi_exact_match", "prefix_exact_match", "quasi_prefix_exact_match"]}},
    {"class_name": "helm.benchmark.metrics.basic_metrics.BasicReferenceMetric", "args": {}},
    {"class_name": "helm.benchmark.metrics.basic_metrics.InstancesPerSplitMetric", "args": {}},
]
DATA_AUGMENTER = {
    "perturbation_specs": [], "should_augment_train_instances": False, "should_include_original_train": False,
    "should_skip_unchanged_train": False, "should_augment_eval_instances": False,
    "should_include_original_eval": False, "should_skip_unchanged_eval": False, "seeds_per_instance": 1,
}


def _mc_joint_adapter(instructions: str, input_prefix: str, output_prefix: str) -> dict:
    """HELM 0.5.16's get_multiple_choice_joint_adapter_spec defaults, as `asdict_without_nones` writes
    them (model / model_deployment, "" in the dataclass, are always set by the run expanders)."""
    return {
        "method": "multiple_choice_joint", "global_prefix": "", "global_suffix": "", "instructions": instructions,
        "input_prefix": input_prefix, "input_suffix": "\n", "reference_prefix": "A. ", "reference_suffix": "\n",
        "chain_of_thought_prefix": "", "chain_of_thought_suffix": "\n", "output_prefix": output_prefix,
        "output_suffix": "\n", "instance_prefix": "\n", "substitutions": [], "max_train_instances": 5,
        "num_outputs": 5, "num_train_trials": 1, "num_trials": 1, "sample_train": True, "temperature": 0.0,
        "max_tokens": 1, "stop_sequences": ["\n"], "multi_label": False,
    }


HEALTHQA_BR_INSTRUCTIONS = (
    "\n"
    "        Escolha a alternativa correta para as questões de medicina (responda apenas com a letra).\n"
    "        Exemplo de Pergunta com a resposta:\n"
    "        Qual dos seguintes órgãos é responsável pela produção da insulina no corpo humano?\n"
    "        A) Fígado\n"
    "        B) Rins\n"
    "        C) Pâncreas\n"
    "        D) Baço\n"
    "        E) Coração\n"
    "\n"
    "        Resposta correta: C\n"
    "\n"
    "        A partir disso, responda:\n"
    "        \n"
)

HELM_0516_RUN_SPECS = {
    "healthqa_br": ({}, {
        "name": "healthqa_br",
        "scenario_spec": {"class_name": "helm.benchmark.scenarios.healthqa_br_scenario.HEALTHQA_BR_Scenario",
                          "args": {}},
        "adapter_spec": _mc_joint_adapter(HEALTHQA_BR_INSTRUCTIONS, "Pergunta: ", "Resposta: "),
        "metric_specs": EXACT_MATCH,
        "data_augmenter_spec": DATA_AUGMENTER,
        "groups": ["healthqa_br"],
    }),
    "mmlu_clinical_afr": ({"subject": "clinical_knowledge", "lang": "af"}, {
        "name": "mmlu_clinical_afr:subject=clinical_knowledge,lang=af,method=multiple_choice_joint",
        "scenario_spec": {"class_name": AFR_CLASS, "args": {"subject": "clinical_knowledge", "lang": "af"}},
        "adapter_spec": _mc_joint_adapter(
            "The following are multiple choice questions (with answers) about clinical knowledge in Afrikaans.\n",
            "Question: ", "Answer: "),
        "metric_specs": EXACT_MATCH,
        "data_augmenter_spec": DATA_AUGMENTER,
        "groups": ["mmlu_clinical_afr_clinical_knowledge", "mmlu_clinical_afr_clinical_knowledge_af"],
    }),
}


@pytest.mark.parametrize("entry", sorted(HELM_0516_RUN_SPECS))
def test_default_edition_run_spec_equals_helm_0516(entry):
    kwargs, expected = HELM_0516_RUN_SPECS[entry]
    spec = load_catalog((), DEFAULT_EDITION).run_spec_functions[entry](**kwargs)
    assert spec["annotators"] is None  # HELM's RunSpec default: no "annotators" key in run_spec.json
    got = drop_nones(spec)
    assert got == expected
    assert list(got) == list(expected) and list(got["adapter_spec"]) == list(expected["adapter_spec"])


@pytest.mark.parametrize("edition", [DEFAULT_EDITION, "medhelm-0.8.0"])
def test_both_editions_build_the_same_run_specs(edition):
    cat = load_catalog((), edition)
    for entry, (kwargs, expected) in HELM_0516_RUN_SPECS.items():
        assert drop_nones(cat.run_spec_functions[entry](**kwargs)) == expected


def test_mmlu_clinical_afr_run_spec_arguments():
    fn = load_catalog((), DEFAULT_EDITION).run_spec_functions["mmlu_clinical_afr"]
    spec = fn(subject="virology", lang="am", method="multiple_choice_joint")
    assert spec["name"] == "mmlu_clinical_afr:subject=virology,lang=am,method=multiple_choice_joint"
    assert spec["adapter_spec"]["instructions"] == (
        "The following are multiple choice questions (with answers) about virology in Amharic.\n")
    assert spec["groups"] == ["mmlu_clinical_afr_virology", "mmlu_clinical_afr_virology_am"]
    # HELM does not check the subject (only the scenario finds no file for it)
    assert fn(subject="anatomy", lang="zu")["adapter_spec"]["instructions"].endswith("about anatomy in Zulu.\n")
    with pytest.raises(MedhelmError, match="unknown lang 'xx'"):
        fn(subject="virology", lang="xx")
    with pytest.raises(MedhelmError, match="method=multiple_choice_separate_original is not supported"):
        fn(subject="virology", lang="am", method="multiple_choice_separate_original")


def test_mmlu_clinical_afr_metadata_differs_between_editions():
    """HELM 0.5.16's get_metadata() (always named and displayed as clinical knowledge); medhelm 0.8.0's
    scenario has none."""
    args = {"subject": "virology", "lang": "am"}
    helm = load_catalog((), DEFAULT_EDITION).scenario(AFR_CLASS)
    assert helm.helm_metadata(args) == {
        "name": "mmlu_clinical_afr_clinical_knowledge_am",
        "display_name": "MMLU Clinical Knowledge (Amharic)",
        "short_display_name": "MMLU Clinical Knowledge (Amharic)",
        "description": "The virology subject in the Massive Multitask Language Understanding (MMLU) "
                       "([Hendrycks et al. 2021](https://arxiv.org/abs/2009.03300)) benchmark translated to "
                       "Amharic by human translators.",
        "taxonomy": {"task": "multiple-choice question answering", "what": "virology", "when": "before 2021",
                     "who": "various online sources", "language": "Amharic"},
        "main_metric": "exact_match",
        "main_split": "test",
    }
    medhelm = load_catalog((), "medhelm-0.8.0").scenario(AFR_CLASS)
    with pytest.raises(NotImplementedError):
        medhelm.helm_metadata(args)
    assert helm.metadata(args) == medhelm.metadata(args)  # scenario.json (the URL prefix is set per edition later)
    with pytest.raises(MedhelmError, match="takes only 'subject' and 'lang'"):
        helm.metadata({"subject": "virology", "lang": "am", "extra": 1})


def test_mmlu_clinical_afr_reads_the_cached_release_zip(tmp_path, monkeypatch):
    """Online, the CSVs are the `.../mmlu_cm_ck_vir/<file>` members of the zip HELM downloads (cached
    once: a cached zip is never fetched again); the same instances as from the mirror layout."""
    import zipfile

    from medhelm_core import data_sources as ds
    from tests.editions.new_benchmarks import NEW

    csvs = NEW / "inputs" / "data" / "mmlu_clinical_afr" / "mmlu_cm_ck_vir"
    cache = tmp_path / "scenarios"
    (cache / "mmlu_clinical_afr").mkdir(parents=True)
    with zipfile.ZipFile(cache / "mmlu_clinical_afr" / "evaluation_benchmarks_afr_release.zip", "w") as zf:
        for name in ("clinical_knowledge_dev_af.csv", "clinical_knowledge_test_af.csv"):  # no val file
            zf.write(csvs / name, f"evaluation_benchmarks_afr_release/mmlu_cm_ck_vir/{name}")
    defn = load_catalog((), "medhelm-0.8.0").scenario(AFR_CLASS)
    args = {"subject": "clinical_knowledge", "lang": "af"}
    monkeypatch.delenv(ds.MIRROR_ENV, raising=False)
    with ds.cache_rooted(cache):
        online = defn.load(args)
        assert defn.data_files(args) == [str(cache / "mmlu_clinical_afr" / "evaluation_benchmarks_afr_release.zip")]
        with pytest.raises(MedhelmError, match="no data for subject=virology, lang=af"):
            defn.load({"subject": "virology", "lang": "af"})
    monkeypatch.setenv(ds.MIRROR_ENV, str(NEW / "inputs" / "data"))
    mirrored = defn.load(args)
    assert [i["split"] for i in mirrored].count("valid") == 29
    assert online == [i for i in mirrored if i["split"] != "valid"]
    assert [i["split"] for i in online] == ["train"] * 5 + ["test"] * 265
