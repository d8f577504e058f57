"""Each vendor client class against HELM 0.5.16's own (issue 39, item 5).

For every HELM client class MedHELM's deployments use, HELM's client (from its wheel, built by HELM's
AutoClient from a prod_env; tests/helm_clients.py) and ours (`client_for_deployment`) send the same
HELM Request to one ../shared/tools/mock_vendor_server.py (tests/mock_vendor_plus.py: the same mock
plus Together's legacy inference API). Asserted per (deployment, request): the requests on the wire
are equal (endpoint kind, path, query such as api-version, the whole JSON body, which auth headers
were sent) and the RequestResults are equal (as scenario_state.json holds them; the wall-clock
request_time/request_datetime only have to exist on both sides).

The deployments are the vendor-clients oracle's prod_env plus HELM's packaged deployments below that
exercise other branches of the same classes (reasoning models with and without base_url, a YAML date
api_version, the default api_version, Claude thinking and Claude 4.5's top_p rule, Gemini thinking
configs, other Bedrock model families, Together's per-model rewrites). Not covered: VertexAIChatClient
(HELM's needs google-cloud-aiplatform and speaks gRPC) and TogetherChatClient (HELM's needs Together's
SDK). Loopback only.
"""
from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

import pytest

from tests.helm_clients import (TOGETHER_ENDPOINT_ENV, VendorMock, copy_prod_env, extract_helm_package, log_lines,
                                run_helm_clients, vendor_env, wire_request, without_clock)
from tests.oracle import VENDOR, VENDOR_MOCK_SERVER

# The shared mock plus Together's legacy inference API (HELM's TogetherClient).
MOCK_PLUS = Path(__file__).resolve().parents[1] / "mock_vendor_plus.py"

# Branches of the same classes beyond the oracle's deployments (HELM's packaged entries, with the
# offline tokenizer; the Responses ones get the mock's base_url, as the oracle's does).
EXTRA_DEPLOYMENTS = """\
  - name: stanfordhealthcare/o3-mini-2025-01-31
    model_name: openai/o3-mini-2025-01-31
    tokenizer_name: simple/tokenizer1
    max_sequence_length: 200000
    client_spec:
      class_name: "helm.clients.stanfordhealthcare_azure_openai_client.StanfordHealthCareAzureOpenAIClient"
      args:
        openai_model_name: o3-mini
        api_version: 2024-12-01-preview
        base_url: "{endpoint}/openai-eastus2"
  - name: stanfordhealthcare/o4-mini-2025-04-16
    model_name: openai/o4-mini-2025-04-16
    tokenizer_name: simple/tokenizer1
    max_sequence_length: 200000
    client_spec:
      class_name: "helm.clients.stanfordhealthcare_azure_openai_client.StanfordHealthCareAzureOpenAIClient"
      args:
        openai_model_name: o4-mini
        api_version: 2024-12-01-preview
  - name: stanfordhealthcare/gpt-4o-mini-2024-07-18
    model_name: openai/gpt-4o-mini-2024-07-18
    tokenizer_name: simple/tokenizer1
    max_sequence_length: 128000
    client_spec:
      class_name: "helm.clients.stanfordhealthcare_azure_openai_client.StanfordHealthCareAzureOpenAIClient"
      args:
        openai_model_name: gpt-4o-mini
        api_version: 2023-05-15
  - name: stanfordhealthcare/claude-3-5-sonnet-20241022
    model_name: anthropic/claude-3-5-sonnet-20241022
    tokenizer_name: simple/tokenizer1
    max_sequence_length: 200000
    client_spec:
      class_name: "helm.clients.stanfordhealthcare_claude_client.StanfordHealthCareClaudeClient"
      args:
        model: anthropic.claude-3-5-sonnet-20241022-v2:0
        deployment: Claude35Sonnetv2/awssig4fa
  - name: stanfordhealthcare/gemini-1.5-pro-001
    model_name: google/gemini-1.5-pro-001
    tokenizer_name: simple/tokenizer1
    max_sequence_length: 1000000
    client_spec:
      class_name: "helm.clients.stanfordhealthcare_google_client.StanfordHealthCareGoogleClient"
      args:
        deployment: gcpgemini/apim-gcp-oauth-fa
  - name: stanfordhealthcare_shc/gpt-4o-mini-2024-07-18
    model_name: openai/gpt-4o-mini-2024-07-18
    tokenizer_name: simple/tokenizer1
    max_sequence_length: 128000
    client_spec:
      class_name: "helm.clients.stanfordhealthcare_shc_openai_client.StanfordHealthCareSHCOpenAIClient"
  - name: azureopenai/gpt-4o-2024-05-13
    model_name: openai/gpt-4o-2024-05-13
    tokenizer_name: simple/tokenizer1
    max_sequence_length: 128000
    client_spec:
      class_name: "helm.clients.azure_openai_client.AzureOpenAIClient"
      args:
        azure_openai_deployment_name: gpt-4o
  - name: anthropic/claude-3-7-sonnet-20250219-thinking-2k
    model_name: anthropic/claude-3-7-sonnet-20250219
    tokenizer_name: simple/tokenizer1
    max_sequence_length: 200000
    client_spec:
      class_name: "helm.clients.anthropic_client.AnthropicMessagesClient"
      args:
        anthropic_model_name: claude-3-7-sonnet-20250219
        thinking_budget_tokens: 2000
  - name: anthropic/claude-sonnet-4-5-20250929
    model_name: anthropic/claude-sonnet-4-5-20250929
    tokenizer_name: simple/tokenizer1
    max_sequence_length: 200000
    client_spec:
      class_name: "helm.clients.anthropic_client.AnthropicMessagesClient"
  - name: google/gemini-2.5-flash
    model_name: google/gemini-2.5-flash
    tokenizer_name: simple/tokenizer1
    max_sequence_length: 1000000
    client_spec:
      class_name: "helm.clients.google_genai_client.GoogleGenAIClient"
      args:
        thinking_config:
          include_thoughts: true
  - name: google/gemini-2.5-flash-lite-thinking-disabled
    model_name: google/gemini-2.5-flash-lite-thinking-disabled
    tokenizer_name: simple/tokenizer1
    max_sequence_length: 1000000
    client_spec:
      class_name: "helm.clients.google_genai_client.GoogleGenAIClient"
      args:
        genai_model: gemini-2.5-flash-lite
        thinking_config:
          thinking_budget: 0
  - name: openai/o3-pro-2025-06-10-high-reasoning-effort
    model_name: openai/o3-pro-2025-06-10-high-reasoning-effort
    tokenizer_name: simple/tokenizer1
    max_sequence_length: 200000
    client_spec:
      class_name: "helm.clients.openai_responses_client.OpenAIResponseClient"
      args:
        openai_model_name: o3-pro-2025-06-10
        reasoning_effort: high
        base_url: "http://127.0.0.1:1/v1"
  - name: openai/gpt-4.1-2025-04-14
    model_name: openai/gpt-4.1-2025-04-14
    tokenizer_name: simple/tokenizer1
    max_sequence_length: 1000000
    client_spec:
      class_name: "helm.clients.openai_responses_client.OpenAIResponseClient"
      args:
        base_url: "http://127.0.0.1:1/v1"
  - name: amazon/nova-premier-v1:0
    model_name: amazon/nova-premier-v1:0
    tokenizer_name: simple/tokenizer1
    max_sequence_length: 1000000
    client_spec:
      class_name: "helm.clients.bedrock_client.BedrockNovaClient"
      args:
        bedrock_model_id: us.amazon.nova-premier-v1:0
        region: us-west-2
  - name: amazon/llama3-1-8b-instruct-v1:0
    model_name: meta/amazon-llama3-1-8b-instruct-v1:0
    tokenizer_name: simple/tokenizer1
    max_sequence_length: 2000
    client_spec:
      class_name: "helm.clients.bedrock_client.BedrockLlamaClient"
      args:
        region: us-west-2
  - name: amazon/mistral-7b-instruct-v0:2
    model_name: mistralai/amazon-mistral-7b-instruct-v0:2
    tokenizer_name: simple/tokenizer1
    max_sequence_length: 32000
    client_spec:
      class_name: "helm.clients.bedrock_client.BedrockMistralClient"
      args:
        region: us-west-2
  - name: amazon/titan-text-lite-v1
    model_name: amazon/titan-text-lite-v1
    tokenizer_name: simple/tokenizer1
    max_sequence_length: 4000
    client_spec:
      class_name: "helm.clients.bedrock_client.BedrockTitanClient"
      args:
        region: us-west-2
  - name: amazon/palmyra-x5-v1-bedrock
    model_name: writer/palmyra-x5-v1-bedrock
    tokenizer_name: simple/tokenizer1
    max_sequence_length: 1040000
    client_spec:
      class_name: "helm.clients.bedrock_client.BedrockPalmyraClient"
      args:
        bedrock_model_id: us.writer.palmyra-x5-v1:0
        region: us-west-2
  - name: together/llama-2-70b
    model_name: meta/llama-2-70b
    tokenizer_name: simple/tokenizer1
    max_sequence_length: 4096
    client_spec:
      class_name: "helm.clients.together_client.TogetherClient"
      args:
        together_model: togethercomputer/llama-2-70b
  - name: together/alpaca-7b
    model_name: stanford/alpaca-7b
    tokenizer_name: simple/tokenizer1
    max_sequence_length: 2048
    client_spec:
      class_name: "helm.clients.together_client.TogetherClient"
      args:
        together_model: togethercomputer/alpaca-7b
  - name: together/gemma-2b
    model_name: google/gemma-2b
    tokenizer_name: simple/tokenizer1
    max_sequence_length: 8192
    client_spec:
      class_name: "helm.clients.together_client.TogetherClient"
"""
# HELM's TogetherClient takes no URL (the child re-points its constant); ours reads <org>BaseUrl.
EXTRA_CREDENTIALS = """\
togetherApiKey: "together-mock-not-a-secret"
togetherBaseUrl: "http://127.0.0.1:1"
"""

# HELM client class -> the deployments that exercise it (oracle's first, then EXTRA_DEPLOYMENTS).
CLASSES = {
    "StanfordHealthCareAzureOpenAIClient": ["stanfordhealthcare/gpt-5-2025-08-07",
                                            "stanfordhealthcare/gpt-4o-2024-05-13",
                                            "stanfordhealthcare/o3-mini-2025-01-31",
                                            "stanfordhealthcare/o4-mini-2025-04-16",
                                            "stanfordhealthcare/gpt-4o-mini-2024-07-18"],
    "StanfordHealthCareSHCOpenAIClient": ["stanfordhealthcare_shc/gpt-4o-2024-05-13",
                                          "stanfordhealthcare_shc/gpt-4o-mini-2024-07-18"],
    "StanfordHealthCareOpenAIClient": ["stanfordhealthcare/deepseek-r1", "stanfordhealthcare/llama-3.3-70b-instruct"],
    "StanfordHealthCareClaudeClient": ["stanfordhealthcare/claude-3-7-sonnet-20250219",
                                       "stanfordhealthcare/claude-3-5-sonnet-20241022"],
    "StanfordHealthCareGoogleClient": ["stanfordhealthcare/gemini-2.0-flash-001",
                                       "stanfordhealthcare/gemini-1.5-pro-001"],
    "AzureOpenAIClient": ["azureopenai/gpt-4o-mini-2024-07-18", "azureopenai/gpt-4o-2024-05-13"],
    "AnthropicMessagesClient": ["anthropic/claude-3-7-sonnet-20250219",
                                "anthropic/claude-3-7-sonnet-20250219-thinking-2k",
                                "anthropic/claude-sonnet-4-5-20250929"],
    "GoogleGenAIClient": ["google/gemini-2.0-flash-001", "google/gemini-2.5-flash",
                          "google/gemini-2.5-flash-lite-thinking-disabled"],
    "OpenAIResponseClient": ["openai/gpt-5-2025-08-07", "openai/o3-pro-2025-06-10-high-reasoning-effort",
                             "openai/gpt-4.1-2025-04-14"],
    "BedrockNovaClient": ["amazon/nova-pro-v1:0", "amazon/nova-premier-v1:0"],
    "BedrockLlamaClient": ["amazon/llama3-8b-instruct-v1:0", "amazon/llama3-1-8b-instruct-v1:0"],
    "BedrockMistralClient": ["amazon/mistral-7b-instruct-v0:2"],
    "BedrockTitanClient": ["amazon/titan-text-lite-v1"],
    "BedrockPalmyraClient": ["amazon/palmyra-x5-v1-bedrock"],
    "TogetherClient": ["together/llama-2-70b", "together/alpaca-7b", "together/gemma-2b"],
}
# The vendor SDK a class needs (HELM's module imports it; so does ours, behind an extra).
SDK = {"AnthropicMessagesClient": "anthropic", "GoogleGenAIClient": "google.genai",
       **{c: "boto3" for c in ("BedrockNovaClient", "BedrockLlamaClient", "BedrockMistralClient", "BedrockTitanClient",
                               "BedrockPalmyraClient")}}

LONG_NOTE = ("Patient Note:\n" + "67-year-old woman admitted with dyspnea; BNP 1200 pg/mL; echo shows EF 25%. " * 40)
PROMPTS = {
    "generation": ("You are a clinical assistant. Write a short plain-language discharge summary.\n\n"
                   "Patient Note:\n43-year-old man, atrial fibrillation, on apixaban 5 mg BID.\n\nSummary:"),
    "multiple_choice": ("Answer the question.\n\nQuestion: Which drug is an anticoagulant?\nA. apixaban\nB. metformin\n"
                        "C. lisinopril\nD. albuterol\nAnswer:"),
    "judge": ("You are an expert in clinical communication. Evaluate the response below and reply with JSON "
              '{"accuracy": {"score": 1-5, "explanation": "..."}}.\n\n<RESPONSE>\nTake apixaban twice a day.\n'
              "</RESPONSE>"),
    "long_sampled": LONG_NOTE + "\n\nQuestion: Does the patient have heart failure?\nAnswer:",
    "short": "Hi",
}
# request name -> (prompt, temperature, max_tokens, stop_sequences[, num_completions])
REQUESTS = {
    "generation": (PROMPTS["generation"], 0.0, 64, []),
    "multiple_choice": (PROMPTS["multiple_choice"], 0.0, 1, ["\n"]),
    "judge": (PROMPTS["judge"], 0.0, 4096, []),
    "long_sampled": (PROMPTS["long_sampled"], 0.7, 200, ["###", "\n\n"]),
    "short": (PROMPTS["short"], 1.0, 16, []),
    "two_completions": (PROMPTS["generation"], 1.0, 32, [], 2),
}


@functools.cache
def _model_names() -> dict[str, str]:
    import yaml

    text = (VENDOR / "inputs" / "prod_env" / "model_deployments.yaml").read_text() + EXTRA_DEPLOYMENTS
    return {d["name"]: d.get("model_name") or d["name"] for d in yaml.safe_load(text)["model_deployments"]}


def helm_request(deployment: str, name: str) -> dict:
    """HELM's Request in its JSON shape (as medhelm_core.adapt.make_request builds it); `model` is the
    deployment's model_name, as the adapter sets it."""
    prompt, temperature, max_tokens, stop, *n = REQUESTS[name]
    return {"model_deployment": deployment, "model": _model_names()[deployment], "embedding": False,
            "prompt": prompt, "temperature": temperature, "num_completions": n[0] if n else 1, "top_k_per_token": 1,
            "max_tokens": max_tokens, "stop_sequences": list(stop), "echo_prompt": False, "top_p": 1,
            "presence_penalty": 0, "frequency_penalty": 0}


def _sdk_installed(cls: str) -> bool:
    module = SDK.get(cls)
    if module is None:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


CASES = [(cls, dep, name) for cls, deps in CLASSES.items() for dep in deps for name in REQUESTS]


def case_id(cls: str, dep: str, name: str) -> str:
    return f"{dep}|{name}"


@pytest.fixture(scope="module")
def parity(tmp_path_factory):
    """One mock; HELM's clients answer every case first (child process), ours then in the tests."""
    root = tmp_path_factory.mktemp("helm-clients")
    mock = VendorMock(MOCK_PLUS, root / "mock_requests.jsonl", "--tools", str(VENDOR_MOCK_SERVER.parent))
    mp = pytest.MonkeyPatch()
    try:
        prod_env = copy_prod_env(VENDOR / "inputs" / "prod_env", root / "prod_env", mock.port, EXTRA_DEPLOYMENTS,
                                 EXTRA_CREDENTIALS)
        env = {**vendor_env(prod_env / "env.json", mock.port),
               TOGETHER_ENDPOINT_ENV: f"{mock.origin}/api/inference"}
        for k, v in env.items():
            mp.setenv(k, v)
        for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
            mp.setenv(k, "1")
        for k in ("HELM_CREDENTIALS", "OPENAI_BASE_URL", "OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT",
                  "AZURE_OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY", "AWS_PROFILE",
                  "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_SESSION_TOKEN", "GOOGLE_CLOUD_PROJECT",
                  "GOOGLE_GENAI_USE_VERTEXAI"):
            mp.delenv(k, raising=False)
        helm_folder = extract_helm_package(root / "helm")
        cases = [{"id": case_id(*c), "request": helm_request(c[1], c[2])} for c in CASES if _sdk_installed(c[0])]
        helm = run_helm_clients(helm_folder, prod_env, cases, mock.log, env=dict(os.environ))
        yield {"mock": mock, "prod_env": prod_env, "helm": helm, "clients": {}}
    finally:
        mp.undo()
        mock.close()


def our_client(parity: dict, deployment: str):
    if deployment not in parity["clients"]:
        from medhelm_core.clients import client_for_deployment
        from medhelm_core.helm_config.deployments import load_credentials, load_model_registry

        registry = load_model_registry(parity["prod_env"])
        dep = registry.get_deployment(deployment)
        parity["clients"][deployment] = client_for_deployment(
            dep, load_credentials(parity["prod_env"]),
            tokenizer_config=registry.tokenizer_configs.get(dep.tokenizer_name))
    return parity["clients"][deployment]


@pytest.mark.parametrize("cls,deployment,request_name", CASES, ids=[case_id(*c) for c in CASES])
def test_same_request_and_result_as_helms_client(parity, cls, deployment, request_name):
    if not _sdk_installed(cls):
        pytest.importorskip(SDK[cls])
    helm = parity["helm"][case_id(cls, deployment, request_name)]
    assert helm["error"] is None, f"HELM's own {cls} failed on the mock (harness problem):\n{helm['error']}"
    assert helm["records"], f"HELM's {cls} sent nothing"

    from medhelm_core.clients import supported_client_classes

    if not any(c.endswith("." + cls) for c in supported_client_classes()):
        pytest.fail(f"no medhelm client for {cls} (supported: {supported_client_classes()})")

    client = our_client(parity, deployment)
    log = parity["mock"].log
    before = len(log_lines(log))
    attempt = client.attempt(helm_request(deployment, request_name))
    ours = log_lines(log)[before:]

    # The wire: one request each (HELM's Anthropic client sends one per completion), equal.
    assert [wire_request(r) for r in ours] == [wire_request(r) for r in helm["records"]]
    assert attempt.kind == "ok", attempt.message
    # The RequestResult as scenario_state.json holds it.
    assert without_clock(attempt.result) == without_clock(helm["result"])
