"""A vendor's usual key variable ($OPENAI_API_KEY, $ANTHROPIC_API_KEY, $TOGETHER_API_KEY, $GOOGLE_API_KEY)
reaches only that vendor's own API: never a gateway, Azure, another vendor's endpoint, or a host an SDK
base-URL variable points at."""
from __future__ import annotations

import pytest

from medhelm_core.clients import client_for_deployment
from medhelm_core.helm_config.deployments import Deployment, parse_credentials, resolve_api_key, vendor_key_env
from medhelm_core.errors import MedhelmError

KEYS = {"OPENAI_API_KEY": "sk-openai-canary", "ANTHROPIC_API_KEY": "sk-ant-canary",
        "TOGETHER_API_KEY": "tgp-canary", "GOOGLE_API_KEY": "goog-canary", "GEMINI_API_KEY": "gem-canary"}
NO_CREDENTIALS = parse_credentials("", "credentials.conf")

GATEWAY_AND_AZURE = [
    "helm.clients.stanfordhealthcare_azure_openai_client.StanfordHealthCareAzureOpenAIClient",
    "helm.clients.stanfordhealthcare_shc_openai_client.StanfordHealthCareSHCOpenAIClient",
    "helm.clients.stanfordhealthcare_openai_client.StanfordHealthCareOpenAIClient",
    "helm.clients.stanfordhealthcare_claude_client.StanfordHealthCareClaudeClient",
    "helm.clients.stanfordhealthcare_google_client.StanfordHealthCareGoogleClient",
    "helm.clients.azure_openai_client.AzureOpenAIClient",
]


def deployment(name: str, class_name: str, **args) -> Deployment:
    return Deployment.model_validate({"name": name, "model_name": name, "tokenizer_name": "simple/tokenizer1",
                                      "client_spec": {"class_name": class_name, "args": args}})


@pytest.mark.parametrize("org", ["openai", "anthropic", "together", "google", "gemini"])
@pytest.mark.parametrize("class_name", GATEWAY_AND_AZURE)
def test_no_vendor_variable_for_a_gateway_or_azure_class(org, class_name):
    dep = deployment(f"{org}/some-model", class_name)
    assert vendor_key_env(dep, NO_CREDENTIALS, KEYS) == ()
    with pytest.raises(MedhelmError):
        resolve_api_key(dep, NO_CREDENTIALS, KEYS)


@pytest.mark.parametrize("org,class_name,variable,base_env", [
    ("openai", "helm.clients.openai_client.OpenAIClient", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
    ("anthropic", "helm.clients.anthropic_client.AnthropicMessagesClient", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    ("together", "helm.clients.together_client.TogetherChatClient", "TOGETHER_API_KEY", "TOGETHER_BASE_URL"),
    ("google", "helm.clients.google_genai_client.GoogleGenAIClient", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"),
])
def test_the_vendor_variable_only_for_the_vendors_own_endpoint(org, class_name, variable, base_env):
    own = deployment(f"{org}/m", class_name)
    assert variable in vendor_key_env(own, NO_CREDENTIALS, KEYS)
    assert resolve_api_key(own, NO_CREDENTIALS, KEYS).get_secret_value() == KEYS[variable]
    # The SDK's base-URL variable pointing elsewhere: the key stays home.
    elsewhere = {**KEYS, base_env: "https://elsewhere.example/v1"}
    assert vendor_key_env(own, NO_CREDENTIALS, elsewhere) == ()
    # A base_url of another host in the deployment: the same.
    foreign = deployment(f"{org}/m", class_name, base_url="https://elsewhere.example/v1")
    assert vendor_key_env(foreign, NO_CREDENTIALS, KEYS) == ()
    with pytest.raises(MedhelmError):
        resolve_api_key(foreign, NO_CREDENTIALS, KEYS)


@pytest.mark.parametrize("org,class_name,variable", [
    ("mycorp", "helm.clients.together_client.TogetherChatClient", "TOGETHER_API_KEY"),
    ("together", "helm.clients.together_client.TogetherChatClient", "TOGETHER_API_KEY"),
    ("mycorp", "helm.clients.anthropic_client.AnthropicMessagesClient", "ANTHROPIC_API_KEY"),
    ("anthropic", "helm.clients.anthropic_client.AnthropicMessagesClient", "ANTHROPIC_API_KEY"),
    ("mycorp", "helm.clients.together_client.TogetherClient", "TOGETHER_API_KEY"),
])
def test_a_client_for_another_host_does_not_take_the_vendor_variable(org, class_name, variable, monkeypatch):
    """The factories themselves: a deployment sent to a foreign base_url is refused without a key of its
    own, although the vendor's variable is set (it was once taken as a fallback)."""
    if "anthropic" in class_name:
        pytest.importorskip("anthropic")
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    dep = deployment(f"{org}/m", class_name, base_url="https://elsewhere.example/v1")
    with pytest.raises(MedhelmError) as e:
        client_for_deployment(dep, NO_CREDENTIALS)
    assert KEYS[variable] not in str(e.value)


def test_a_judge_without_an_api_key_concept_passes_the_judge_check(tmp_path):
    """A judge on Bedrock (AWS credentials) takes no API key: the judge check asks its client, not
    resolve_api_key; a gateway judge without its key is still named. (In a process of its own:
    building the built-in gateway client leaves process-wide tokenizer state behind.)"""
    pytest.importorskip("boto3")
    import os
    import subprocess
    import sys

    env = tmp_path / "prod_env"
    env.mkdir()
    (env / "model_deployments.yaml").write_text(
        "model_deployments:\n"
        "  - name: amazon/claude-judge\n"
        "    model_name: anthropic/claude-3-7-sonnet-20250219\n"
        "    tokenizer_name: simple/tokenizer1\n"
        "    client_spec:\n"
        "      class_name: helm.clients.bedrock_client.BedrockNovaClient\n"
        "      args: {region: us-west-2, bedrock_model_id: us.anthropic.claude-3-7-sonnet-20250219-v1:0}\n")
    script = (
        "import sys\n"
        "from medhelm_core.helm_config.deployments import parse_credentials\n"
        "from medhelm_core.run.preflight import _judge_deployment_problem\n"
        "from medhelm_core.run.workspace import Workspace\n"
        "ws = Workspace(sys.argv[1], sys.argv[2]); none = parse_credentials('', 'credentials.conf')\n"
        "print(_judge_deployment_problem(ws, 'amazon/claude-judge', none))\n"
        "print(_judge_deployment_problem(ws, 'stanfordhealthcare/gpt-4o-2024-05-13', none))\n")
    aws = {"AWS_ACCESS_KEY_ID": "AKIAMOCKNOTASECRET", "AWS_SECRET_ACCESS_KEY": "mock-not-a-secret",
           "AWS_EC2_METADATA_DISABLED": "true"}
    r = subprocess.run([sys.executable, "-c", script, str(tmp_path / "out"), str(env)], capture_output=True,
                       text=True, timeout=120, env={**os.environ, **aws})
    assert r.returncode == 0, r.stderr[-2000:]
    bedrock, gateway = r.stdout.splitlines()
    assert bedrock == "None"
    assert gateway.startswith("has no API key: add stanfordhealthcareApiKey"), gateway
