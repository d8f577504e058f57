"""The built-in registry (medhelm_core/helm_config/*.yaml) is a faithful transcription of HELM 0.5.16's
helm/config/*.yaml: every entry equals HELM's entry of that name, in HELM's order, and the selection
rules of its header hold (each model with all of HELM's deployments, which decide its default one).
HELM's own files come from its wheel (.cache/reference, downloaded by scripts/setup.sh)."""
from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest
import yaml

from medhelm_core.catalog import default_catalog
from medhelm_core.helm_config.deployments import BUILTIN_CONFIG_DIR, load_model_registry
from medhelm_core.helm_config.entry_files import read_run_entries
from medhelm_core.helm_config.expand import run_entries_to_run_specs
from tests.helm_reference import helm_wheel
from tests.oracle import SHARED

FILES = {"model_deployments.yaml": "model_deployments", "model_metadata.yaml": "models",
         "tokenizer_configs.yaml": "tokenizer_configs"}
# Fields HELM's own files carry that are not fields of its dataclasses (HELM ignores them); left out.
NOT_FIELDS = {"huggingface/sabia-7b": {"args"}}
BEDROCK = "helm.clients.bedrock_client."
GATEWAY_ORGS = ("stanfordhealthcare", "stanfordhealthcare_shc")


def _helm(file: str) -> list[dict]:
    try:
        wheel = helm_wheel()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    with zipfile.ZipFile(wheel) as z:
        return yaml.safe_load(z.read(f"helm/config/{file}"))[FILES[file]]


def _ours(file: str) -> list[dict]:
    return yaml.safe_load((Path(BUILTIN_CONFIG_DIR) / file).read_text())[FILES[file]]


def _strip(entry: dict) -> dict:
    drop = NOT_FIELDS.get(entry["name"], set()) | {"release"}  # IBM Granite's stray `release:`
    return {k: v for k, v in entry.items() if k not in drop}


@pytest.mark.parametrize("file", list(FILES))
def test_every_entry_is_helms_in_helms_order(file):
    helm, ours = _helm(file), _ours(file)
    j = 0
    for entry in ours:  # a subsequence of HELM's list, entry for entry
        while j < len(helm) and not (helm[j]["name"] == entry["name"] and _strip(helm[j]) == entry):
            j += 1
        assert j < len(helm), f"{file}: {entry['name']} is not HELM's entry (or out of HELM's order)"
        j += 1


def test_selection_rules():
    helm_deps = _helm("model_deployments.yaml")
    meta = {m["name"]: m for m in reversed(_helm("model_metadata.yaml"))}  # the first of a repeated name
    ours = _ours("model_deployments.yaml")
    names = {d["name"] for d in ours}
    models = {d["model_name"] for d in ours}

    def text(d):
        return "TEXT_MODEL_TAG" in meta.get(d["model_name"], {}).get("tags", [])

    for d in helm_deps:
        host, cls = d["name"].split("/")[0], d["client_spec"]["class_name"]
        must = (host in GATEWAY_ORGS
                or (host in ("openai", "anthropic", "google", "together") and text(d))
                or (host == "amazon" and cls.startswith(BEDROCK))
                or (host == "huggingface" and cls == "helm.clients.huggingface_client.HuggingFaceClient")
                or d["model_name"] in models)  # every deployment of a model that is here
        assert (d["name"] in names) == must, d["name"]
    # Metadata of every model a deployment names, and a config for every tokenizer one uses.
    assert {m["name"] for m in _ours("model_metadata.yaml")} == models & set(meta)
    assert {t["name"] for t in _ours("tokenizer_configs.yaml")} == \
        {d.get("tokenizer_name") for d in ours} & {t["name"] for t in _helm("tokenizer_configs.yaml")}


def test_bedrock_and_gateway_models_have_metadata_and_their_default_deployment():
    registry = load_model_registry(None)
    for model, deployment, cls in [
        ("amazon/nova-pro-v1:0", "amazon/nova-pro-v1:0", BEDROCK + "BedrockNovaClient"),
        ("meta/amazon-llama3-8b-instruct-v1:0", "amazon/llama3-8b-instruct-v1:0", BEDROCK + "BedrockLlamaClient"),
        ("mistralai/amazon-mistral-large-2407-v1:0", "amazon/mistral-large-2407-v1:0",
         BEDROCK + "BedrockMistralClient"),
        ("amazon/titan-text-express-v1", "amazon/titan-text-express-v1", BEDROCK + "BedrockTitanClient"),
        ("writer/palmyra-x5-v1-bedrock", "amazon/palmyra-x5-v1-bedrock", BEDROCK + "BedrockPalmyraClient"),
        ("anthropic/claude-opus-4-5-20251124", "stanfordhealthcare/claude-opus-4-5-20251124",
         "helm.clients.stanfordhealthcare_claude_client.StanfordHealthCareClaudeClient"),
    ]:
        metadata = registry.get_model_metadata(model)
        assert metadata is not None and "TEXT_MODEL_TAG" in metadata.tags, model
        assert registry.default_deployment_for_model(model) == deployment
        assert registry.get_deployment(deployment).client_spec.class_name == cls
        assert registry.get_deployment(deployment).tokenizer_name in registry.tokenizer_configs


def test_a_run_entry_naming_only_a_bedrock_model_expands(tmp_path):
    """`model=amazon/nova-pro-v1:0` alone: HELM's default deployment, its metadata's tags."""
    conf = tmp_path / "nova.conf"
    conf.write_text('entries: [{description: "medication_qa:model=amazon/nova-pro-v1:0", priority: 1}]\n')
    [run] = run_entries_to_run_specs(read_run_entries([conf]), max_eval_instances=10,
                                     registry=load_model_registry(None),
                                     run_spec_functions=default_catalog().run_spec_functions)
    assert run.name == "medication_qa:model=amazon_nova-pro-v1:0"
    assert run.run_spec["adapter_spec"]["model_deployment"] == "amazon/nova-pro-v1:0"


@pytest.mark.skipif(not (SHARED / "helm").is_dir(), reason="needs ../shared/helm")
def test_every_public_conf_model_has_its_deployment_and_metadata():
    text = (SHARED / "helm" / "run_entries_medhelm_public.conf").read_text()
    pairs = set(re.findall(r"model=([^,\"]+),model_deployment=([^,\"]+)", text))
    assert len({m for m, _ in pairs}) == 13
    registry = load_model_registry(None)
    for model, deployment in pairs:
        assert registry.get_model_metadata(model) is not None, model
        assert registry.get_deployment(deployment).model_name == model
