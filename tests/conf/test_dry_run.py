"""`medhelm-run --dry-run` on the four MedHELM confs prints exactly HELM's run names, in conf order,
with the REAL registered run-spec functions and the built-in deployments / model metadata
(medhelm_core/resources/helm_registry/model_deployments.yaml and model_metadata.yaml, transcribed from HELM).

The expected names are derived here independently of medhelm's expansion code, by HELM's rules
(helm-output-summarize.md §1.2, HELM `run_specs/medhelm_run_specs.py` read by hand):
the run-spec function's own name, then the run-expander args in description order, each appended
with ":" if the name has no ":" yet, else ",", as `key=value` with "/" -> "_".
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from medhelm_cli import run_main
from medhelm_core.catalog import default_catalog
from medhelm_core.helm_config import load_model_registry, read_run_entries, run_entries_to_run_specs
from tests.oracle import SHARED

HELM_CONFS = SHARED / "helm"
CONF_COUNTS = {"public": 221, "gated": 143, "private_stanford": 338, "dspy": 64}
needs_shared = pytest.mark.skipif(not HELM_CONFS.is_dir(), reason="shared/helm confs not available")

# Run-spec function name -> the name HELM's function gives its RunSpec (medhelm_run_specs.py).
BASE_NAMES = {
    "medhelm_med_qa": "med_qa",
    "medhelm_med_mcqa": "med_mcqa",
    "ehrshot": "ehrshot:subject={subject}",
    "n2c2_ct_matching": "n2c2_ct_matching:subject={subject}",
    "clear": "clear:condition={condition}",
    "head_qa": "head_qa:language={language},category={category}",
    "med_dialog": "med_dialog,subset={subset}",
}
DEFAULTS = {"head_qa": {"language": "en", "category": "None"}}
# HELM's RUN_EXPANDERS keys that occur in the MedHELM confs.
EXPANDERS = {"model", "model_deployment", "num_output_tokens", "max_eval_instances"}


def helm_name(description: str) -> str:
    prefix, _, rest = description.partition(":")
    args = dict(kv.split("=", 1) for kv in rest.split(",")) if rest else {}
    values = {**DEFAULTS.get(prefix, {}), **{k: v for k, v in args.items() if k not in EXPANDERS}}
    name = BASE_NAMES.get(prefix, prefix).format(**values)
    for key, value in args.items():
        if key in EXPANDERS:
            name += ("," if ":" in name else ":") + f"{key}={value.replace('/', '_')}"
    return name.replace("/", "_")


def conf_descriptions(conf: str) -> list[str]:
    return re.findall(r'description: "([^"]+)"', (HELM_CONFS / f"run_entries_medhelm_{conf}.conf").read_text())


def _require_functions(conf: str) -> None:
    missing = sorted({d.split(":")[0] for d in conf_descriptions(conf)} - set(default_catalog().run_spec_functions))
    assert not missing, f"HELM run entries without a benchmark folder: {missing}"


@needs_shared
@pytest.mark.parametrize("conf", list(CONF_COUNTS))
def test_dry_run_prints_helm_run_names(conf, tmp_path, capsys):
    _require_functions(conf)
    expected = [helm_name(d) for d in conf_descriptions(conf)]
    assert len(expected) == CONF_COUNTS[conf]
    # no prod_env: the built-in deployments and model metadata are enough, as in HELM
    code = run_main(["--conf-paths", str(HELM_CONFS / f"run_entries_medhelm_{conf}.conf"), "--suite", "dry",
                     "--max-eval-instances", "1000", "--dry-run", "--output-path", str(tmp_path / "out"),
                     "--local-path", str(tmp_path / "no_prod_env")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.splitlines() == expected


# Names worked out by hand from HELM's rules for specific conf lines.
HAND_DERIVED = {
    "public": {
        0: "medcalc_bench:model=google_gemini-1.5-pro-001,model_deployment=stanfordhealthcare_gemini-1.5-pro-001",
    },
    "gated": {
        0: "ehrshot:subject=guo_readmission,model=google_gemini-1.5-pro-001,"
           "model_deployment=stanfordhealthcare_gemini-1.5-pro-001",
        7: "ehrshot:subject=guo_readmission,num_output_tokens=4000,model=deepseek-ai_deepseek-r1,"
           "model_deployment=stanfordhealthcare_deepseek-r1",
        142: "mimiciv_billing_code:num_output_tokens=4000,model=google_gemini-2.5-pro-preview-05-06,"
             "model_deployment=stanfordhealthcare_gemini-2.5-pro-preview-05-06",
    },
    "private_stanford": {
        0: "clear:condition=alcohol_dependence,max_eval_instances=100,model=google_gemini-1.5-pro-001,"
           "model_deployment=stanfordhealthcare_gemini-1.5-pro-001",
    },
    "dspy": {
        0: "medcalc_bench:model=anthropic_claude-3-7-sonnet-20250219-dspy-zs-predict,"
           "model_deployment=anthropic_claude-3-7-sonnet-20250219-dspy-zs-predict",
        63: "medbullets:num_output_tokens=4000,model=openai_o3-mini-2025-01-31-dspy-fs-miprov2,"
            "model_deployment=openai_o3-mini-2025-01-31-dspy-fs-miprov2",
    },
}


@needs_shared
@pytest.mark.parametrize("conf", list(CONF_COUNTS))
def test_hand_derived_names(conf):
    _require_functions(conf)
    descriptions = conf_descriptions(conf)
    for index, name in HAND_DERIVED[conf].items():
        assert helm_name(descriptions[index]) == name
    runs = run_entries_to_run_specs(read_run_entries([HELM_CONFS / f"run_entries_medhelm_{conf}.conf"]),
                                    max_eval_instances=1000, registry=load_model_registry(None),
                                    run_spec_functions=default_catalog().run_spec_functions)
    for index, name in HAND_DERIVED[conf].items():
        assert runs[index].name == name


@needs_shared
def test_gated_run_specs_with_builtin_metadata():
    """The built-in metadata tags reach the run specs as in HELM: Claude 3 models lose the
    whitespace-only stop sequence of the multiple-choice adapters; nothing else changes."""
    _require_functions("gated")
    runs = run_entries_to_run_specs(read_run_entries([HELM_CONFS / "run_entries_medhelm_gated.conf"]),
                                    max_eval_instances=1000, registry=load_model_registry(None),
                                    run_spec_functions=default_catalog().run_spec_functions)
    by_name = {r.name: r.run_spec for r in runs}
    claude = by_name["ehrshot:subject=guo_readmission,model=anthropic_claude-3-7-sonnet-20250219,"
                     "model_deployment=stanfordhealthcare_claude-3-7-sonnet-20250219"]
    gpt = by_name["ehrshot:subject=guo_readmission,model=openai_gpt-4o-2024-05-13,"
                  "model_deployment=stanfordhealthcare_gpt-4o-2024-05-13"]
    assert claude["adapter_spec"]["stop_sequences"] == [] and gpt["adapter_spec"]["stop_sequences"] == ["\n"]
    assert gpt["scenario_spec"] == {"class_name": "helm.benchmark.scenarios.ehrshot_scenario.EHRSHOTScenario",
                                    "args": {"subject": "guo_readmission", "max_length": 100000,
                                             "data_path": "/share/pi/nigam/data/medhelm/ehrshot/meds/"}}
    a = gpt["adapter_spec"]
    assert (a["method"], a["max_train_instances"], a["num_train_trials"], a["max_tokens"], a["num_outputs"]) == \
        ("multiple_choice_joint", 0, 1, 1, 5)
    assert a["instructions"] == "Answer A for yes, B for no.\n" and a["input_prefix"] == ": "
    bhc = by_name["mimic_bhc:num_output_tokens=10000,model=openai_gpt-5-2025-08-07,"
                 "model_deployment=stanfordhealthcare_gpt-5-2025-08-07"]
    assert bhc["adapter_spec"]["max_tokens"] == 10000
    assert [m["class_name"].rsplit(".", 1)[1] for m in bhc["metric_specs"]] == [
        "SummarizationMetric", "BasicGenerationMetric", "BasicReferenceMetric", "InstancesPerSplitMetric",
        "LLMJuryMetric"]
    assert bhc["annotators"][0]["class_name"] == "helm.benchmark.annotation.mimic_bhc_annotator.MIMICBHCAnnotator"
    assert list(bhc["annotators"][0]["args"]["annotator_models"]) == ["gpt", "llama", "claude"]



def test_summarize_reads_the_builtin_registry_layer():
    """helm-summarize's model metadata is the built-in registry layer itself (conf/model_metadata.yaml
    links to it), so every model a built-in deployment serves has its HELM display name, e.g. Bedrock's."""
    from medhelm_core.model_metadata import DEFAULT_MODEL_METADATA_PATHS
    from medhelm_core.model_metadata import load_model_registry as summarize_registry

    root = Path(__file__).resolve().parents[2]
    assert (root / "conf" / "model_metadata.yaml").resolve() == DEFAULT_MODEL_METADATA_PATHS[0].resolve()
    registry = summarize_registry(DEFAULT_MODEL_METADATA_PATHS)
    builtin = load_model_registry(None)
    for deployment in builtin.deployment_list:
        meta = registry.metadata_for(deployment.model_name, deployment.name)
        assert meta["creator_organization_name"] != "Unknown", deployment.name
    assert registry.metadata_for("amazon/nova-pro-v1:0", "amazon/nova-pro-v1:0")["display_name"] == "Amazon Nova Pro"
    assert registry.metadata_for(None, "stanfordhealthcare/gpt-4o-2024-05-13")["name"] == "openai/gpt-4o-2024-05-13"


@needs_shared
def test_every_conf_deployment_is_builtin():
    registry = load_model_registry(None)
    for conf in CONF_COUNTS:
        for d in conf_descriptions(conf):
            args = dict(kv.split("=", 1) for kv in d.partition(":")[2].split(","))
            deployment = registry.get_deployment(args["model_deployment"])
            assert deployment.model_name == args["model"]
    # HELM's default deployment of a model: the last registered non-deprecated one
    assert registry.default_deployment_for_model("openai/gpt-4o-2024-05-13") == "openai/gpt-4o-2024-05-13"
    assert registry.default_deployment_for_model("deepseek-ai/deepseek-r1") == "stanfordhealthcare/deepseek-r1"
