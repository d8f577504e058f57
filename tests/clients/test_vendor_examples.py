"""The three ways the README shows to run the leaderboard's models: examples/prod_env_gateway (Stanford
Health Care's gateway, HELM's built-in deployments), examples/prod_env_cloud (Azure OpenAI, Bedrock,
Vertex AI) and examples/prod_env_vendor_apis (OpenAI, Anthropic, Gemini, Together).

For each, with no network (the `offline` fixture refuses every non-loopback connection):
* every model of MedHELM's public conf and every default judge resolves to the example's deployment,
  through the expected HELM client class, and its client builds and says where it sends;
* a dry run prints the 221 runs;
* the README's `--estimate-cost` command runs as printed and prices every model and judge
  (approximate tokenizers said once, in one line);
* a real run stops before any call with one line (placeholder key, missing cloud credentials).
"""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from medhelm_cli import run_main
from medhelm_core.helm_config.deployments import BUILTIN_CONFIG_DIR, load_credentials, load_model_registry
from tests.clients.test_public_apis_env import PUBLIC_CONF, _needed, mirror, offline  # noqa: F401 - fixtures
from tests.readme import code_blocks, commands

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
README_SECTION = "The leaderboard's models three ways"

GATEWAY, CLOUD, VENDORS = "prod_env_gateway", "prod_env_cloud", "prod_env_vendor_apis"
H = "helm.clients."
AZURE, OPENAI, RESPONSES = H + "azure_openai_client.AzureOpenAIClient", H + "openai_client.OpenAIClient", \
    H + "openai_responses_client.OpenAIResponseClient"
ANTHROPIC, GENAI, VERTEX = H + "anthropic_client.AnthropicMessagesClient", \
    H + "google_genai_client.GoogleGenAIClient", H + "vertexai_client.VertexAIChatClient"
NOVA = H + "bedrock_client.BedrockNovaClient"
GW = H + "stanfordhealthcare_"
GW_AZURE, GW_CLAUDE, GW_GOOGLE, GW_OPENAI = (GW + "azure_openai_client.StanfordHealthCareAzureOpenAIClient",
                                             GW + "claude_client.StanfordHealthCareClaudeClient",
                                             GW + "google_client.StanfordHealthCareGoogleClient",
                                             GW + "openai_client.StanfordHealthCareOpenAIClient")
MODELS = ["gpt-4o-2024-05-13", "gpt-4o-mini-2024-07-18", "o3-mini-2025-01-31", "o4-mini-2025-04-16",
          "gpt-5-2025-08-07", "gpt-5-mini-2025-08-07", "claude-3-7-sonnet-20250219", "claude-3-5-sonnet-20241022",
          "gemini-1.5-pro-001", "gemini-2.0-flash-001", "gemini-2.5-pro-preview-05-06", "llama-3.3-70b-instruct",
          "deepseek-r1"]
JUDGES = {"stanfordhealthcare/gpt-4o-2024-05-13", "stanfordhealthcare/llama-3.3-70b-instruct",
          "stanfordhealthcare/claude-3-7-sonnet-20250219"}

AZURE_HOST = "https://replace_me_resource.openai.azure.com"
BEDROCK = "https://bedrock-runtime.us-west-2.amazonaws.com"
VERTEX_HOST = "https://us-central1-aiplatform.googleapis.com"
GATEWAY_HOST = "https://replace_me_gateway_host"
# deployment (after "stanfordhealthcare/") -> (HELM class, endpoint origin), per example
EXPECTED = {
    GATEWAY: {**{m: (GW_AZURE, GATEWAY_HOST) for m in MODELS[:6]},
              **{m: (GW_CLAUDE, GATEWAY_HOST) for m in MODELS[6:8]},
              **{m: (GW_GOOGLE, GATEWAY_HOST) for m in MODELS[8:11]},
              **{m: (GW_OPENAI, GATEWAY_HOST) for m in MODELS[11:]}},
    CLOUD: {**{m: (AZURE, AZURE_HOST) for m in MODELS[:6]},
            **{m: (NOVA, BEDROCK) for m in MODELS[6:8]},
            "gemini-1.5-pro-001": (VERTEX, VERTEX_HOST), "gemini-2.0-flash-001": (VERTEX, VERTEX_HOST),
            "gemini-2.5-pro-preview-05-06": (GENAI, VERTEX_HOST),
            "llama-3.3-70b-instruct": (NOVA, BEDROCK), "deepseek-r1": (OPENAI, AZURE_HOST)},
    VENDORS: {**{m: (OPENAI, "https://api.openai.com") for m in MODELS[:4]},
              **{m: (RESPONSES, "https://api.openai.com") for m in MODELS[4:6]},
              **{m: (ANTHROPIC, "https://api.anthropic.com") for m in MODELS[6:8]},
              **{m: (GENAI, "https://generativelanguage.googleapis.com") for m in MODELS[8:11]},
              **{m: (OPENAI, "https://api.together.xyz") for m in MODELS[11:]}},
}
SDKS = {CLOUD: ("boto3", "google.genai", "google.auth"), VENDORS: ("anthropic", "google.genai"), GATEWAY: ()}


def _name(model: str) -> str:
    return f"stanfordhealthcare/{model}"


def _requires(example: str) -> None:
    for module in SDKS[example]:
        pytest.importorskip(module)


@pytest.fixture
def cloud_accounts(tmp_path, monkeypatch):
    """Stand-ins for the cloud credentials a user has (never used to send anything here): AWS keys in
    the environment and a Google application-default credentials file with a project."""
    adc = tmp_path / "adc.json"
    adc.write_text(json.dumps({"type": "authorized_user", "client_id": "test.apps.googleusercontent.com",
                               "client_secret": "not-a-secret", "refresh_token": "not-a-token"}))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(adc))
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "test-project")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIATESTNOTAKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-not-a-secret")
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
                "BEDROCK_ASSUME_ROLE", "ANTHROPIC_BASE_URL", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL",
                "OPENAI_BASE_URL", "AZURE_OPENAI_ENDPOINT", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_LOCATION"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def no_cloud_accounts(tmp_path, monkeypatch):
    """No AWS or Google credentials anywhere this process could find them."""
    for var in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))  # no gcloud login
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws_config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws_credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("NO_GCE_CHECK", "true")  # google-auth: do not ask a metadata server


@pytest.fixture
def stand_in_tokenizers(monkeypatch):
    """Bedrock clients load the deployment's tokenizer when built (HELM re-tokenizes their replies);
    HELM's Hugging Face tokenizers are not on this machine, so a stand-in is given."""
    from medhelm_core import tokenizers
    from medhelm_core.run import workspace

    def stand_in(name, config=None):
        return tokenizers.SimpleTokenizer(name or "simple/tokenizer1")

    monkeypatch.setattr(tokenizers, "get_tokenizer", stand_in)
    monkeypatch.setattr(workspace, "get_tokenizer", stand_in)


# ------------------------------------------------------------------------------------------------
# The examples' files
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("example", [CLOUD, VENDORS])
def test_example_maps_every_model_and_judge_by_name(example):
    from medhelm_core.ratelimit import SettingsRegistry

    local = load_model_registry(EXAMPLES / example, include_builtin=False)
    assert sorted(local.deployments) == sorted(_name(m) for m in MODELS)
    for model in MODELS:
        dep = local.deployments[_name(model)]
        assert dep.client_spec.class_name == EXPECTED[example][model][0], model
        assert dep.model_name.endswith("/" + model), model
    credentials = load_credentials(EXAMPLES / example, env={})
    assert "stanfordhealthcareApiKey" not in credentials  # it would go to every vendor
    keys = credentials.values["deployments"]
    assert all(v.get_secret_value().startswith("REPLACE_ME_") for v in keys.values())
    settings = SettingsRegistry.load(EXAMPLES / example)  # an unknown key would raise
    for model in MODELS:
        assert settings.for_deployment(_name(model)).priced, model


def test_gateway_example_is_credentials_only():
    assert sorted(p.name for p in (EXAMPLES / GATEWAY).iterdir()) == ["credentials.conf"]
    credentials = load_credentials(EXAMPLES / GATEWAY, env={})
    assert sorted(credentials.values) == ["stanfordhealthcareApiKey", "stanfordhealthcareEndpoint",
                                          "stanfordhealthcare_shcApiKey", "stanfordhealthcare_shcEndpoint"]
    for key in ("stanfordhealthcareApiKey", "stanfordhealthcare_shcApiKey"):
        assert credentials.get(key).get_secret_value().startswith("REPLACE_ME_")


# ------------------------------------------------------------------------------------------------
# Every model and judge resolves, offline
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("example", [GATEWAY, CLOUD, VENDORS])
def test_every_model_and_judge_resolves_and_its_client_builds(example, offline, cloud_accounts,  # noqa: F811
                                                              stand_in_tokenizers):
    _requires(example)
    from medhelm_core.clients import client_for_deployment

    entries, roles = _needed(EXAMPLES / example)
    assert len(entries) == 221
    assert sorted(roles) == sorted(_name(m) for m in MODELS)
    assert {name for name, r in roles.items() if "judge" in r} == JUDGES
    registry = load_model_registry(EXAMPLES / example)
    credentials = load_credentials(EXAMPLES / example, env={})
    for model in MODELS:
        dep = registry.get_deployment(_name(model))
        source = Path(dep.source)
        assert source == (BUILTIN_CONFIG_DIR / "model_deployments.yaml" if example == GATEWAY
                          else EXAMPLES / example / "model_deployments.yaml"), model
        cls, endpoint = EXPECTED[example][model]
        assert dep.client_spec.class_name == cls, model
        client = client_for_deployment(dep, credentials)
        assert client.endpoint == endpoint, (model, client.endpoint)
        assert "_API_KEY" not in repr(client) and "not-a-secret" not in repr(client), model  # no key shown


def test_vendor_sdk_base_url_variables_move_the_endpoints(offline, cloud_accounts, stand_in_tokenizers,  # noqa: F811
                                                          monkeypatch):
    """The SDKs' own variables (a proxy or egress gateway) decide where the examples' requests go."""
    for module in ("anthropic", "google.genai", "boto3"):
        pytest.importorskip(module)
    from medhelm_core.clients import client_for_deployment

    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:18001")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:18002")
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "http://127.0.0.1:18003")
    for example, model, endpoint in [(VENDORS, "claude-3-7-sonnet-20250219", "http://127.0.0.1:18001"),
                                     (VENDORS, "gemini-2.0-flash-001", "http://127.0.0.1:18002"),
                                     (CLOUD, "claude-3-7-sonnet-20250219", "http://127.0.0.1:18003")]:
        dep = load_model_registry(EXAMPLES / example).get_deployment(_name(model))
        client = client_for_deployment(dep, load_credentials(EXAMPLES / example, env={}))
        assert client.endpoint == endpoint, (example, model)


@pytest.mark.parametrize("example", [GATEWAY, CLOUD, VENDORS])
def test_dry_run_prints_every_run(example, offline, tmp_path, capsys):  # noqa: F811
    code = run_main(["--dry-run", "--conf-paths", str(PUBLIC_CONF), "--suite", "x", "--max-eval-instances", "1",
                     "--local-path", str(EXAMPLES / example), "--output-path", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert len(out.splitlines()) == 221 and not _noise(err), err


# ------------------------------------------------------------------------------------------------
# The README's commands, as printed: the estimate prices every model and judge, offline
# ------------------------------------------------------------------------------------------------
def _noise(err: str) -> list[str]:
    """stderr lines other than the one naming the jury's judges."""
    return [line for line in err.splitlines() if line.strip() and not line.startswith("medhelm-run: judges: ")]


def _readme_commands() -> list[str]:
    [block] = code_blocks(README_SECTION, "bash")
    return commands(block)


def test_readme_section_has_one_estimate_per_example():
    cmds = _readme_commands()
    assert [re.search(r"--local-path (\S+)", c).group(1) for c in cmds] == \
        [f"examples/{e}" for e in (GATEWAY, CLOUD, VENDORS)]
    assert all(c.startswith(".venv/bin/medhelm-run ") and c.endswith(" --estimate-cost") for c in cmds)


@pytest.mark.parametrize("index", range(3))
def test_readme_estimate_prices_every_model_and_judge_offline(index, offline, mirror, tmp_path,  # noqa: F811
                                                              monkeypatch, capsys):
    argv = shlex.split(_readme_commands()[index])
    assert argv[0] == ".venv/bin/medhelm-run"
    work = tmp_path / "checkout"  # the command's relative paths, as in a clone; nothing else
    work.mkdir()
    for name in ("conf", "examples"):
        (work / name).symlink_to(ROOT / name, target_is_directory=True)
    monkeypatch.chdir(work)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dh"))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty_tiktoken_cache"))  # bundled BPE files only
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code = run_main(argv[1:])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert not _noise(err), err  # no retry chatter, no warnings
    assert out.startswith("Estimated cost before sending anything")
    by_deployment = out.split("By deployment:")[1].split("Total:")[0].strip().splitlines()
    assert by_deployment[0].split()[:3] == ["deployment", "calls", "of"] and set(by_deployment[1]) <= {"-", " "}
    lines = by_deployment[2:]
    assert sorted((line.split()[0], line.split()[1]) for line in lines) == \
        sorted({(_name(m), "model") for m in MODELS} | {(j, "judge") for j in JUDGES})
    for line in lines:
        assert re.search(r"~?\d[\d,]*\.\d{4}$", line), line  # a price in every row
    total = next(line for line in out.splitlines() if line.startswith("Total:"))
    assert "$" in total and "priced deployments only" not in total and "No price for" not in out
    notices = [line for line in out.splitlines() if line.startswith("~ approximate")]
    assert len(notices) <= 1  # the tokenizers that are not here: said once, in one line
    if notices:
        assert "4 characters a token" in notices[0] and "downloads are off" in notices[0]
    out_path = work / "benchmark_output"  # the default --output-path: the scenarios' data cache at most
    assert not (out_path / "medhelm.duckdb").exists() and not (out_path / "runs").exists()
    assert not (tmp_path / "dh").exists()


# ------------------------------------------------------------------------------------------------
# A real run with the examples as shipped stops before any call, in one line
# ------------------------------------------------------------------------------------------------
def _run(example_path: Path, tmp_path: Path, capsys) -> tuple[int, str]:
    code = run_main(["--conf-paths", str(PUBLIC_CONF), "--suite", "s", "--max-eval-instances", "10",
                     "--local-path", str(example_path), "--output-path", str(tmp_path / "out")])
    return code, capsys.readouterr().err.strip()


def _nothing_written(tmp_path: Path) -> None:
    assert not (tmp_path / "out" / "medhelm.duckdb").exists() and not (tmp_path / "dh").exists()


@pytest.mark.parametrize("example", [GATEWAY, VENDORS])
def test_placeholder_keys_stop_before_any_call(example, offline, mirror, cloud_accounts,  # noqa: F811
                                               stand_in_tokenizers, tmp_path, monkeypatch, capsys):
    _requires(example)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dh"))
    code, err = _run(EXAMPLES / example, tmp_path, capsys)
    assert code == 2 and "\n" not in err, err
    assert "model deployment stanfordhealthcare/gemini-1.5-pro-001 still has the example's placeholder API key" in err
    assert f"replace it with your key in {EXAMPLES / example}/credentials.conf" in err
    assert "REPLACE_ME_" not in err
    _nothing_written(tmp_path)


def test_cloud_example_names_what_is_missing_before_any_call(offline, mirror, no_cloud_accounts,  # noqa: F811
                                                             stand_in_tokenizers, tmp_path, monkeypatch,
                                                             capsys):
    _requires(CLOUD)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dh"))
    code, err = _run(EXAMPLES / CLOUD, tmp_path, capsys)  # no Google credentials at all
    assert code == 2 and "\n" not in err, err
    assert "stanfordhealthcare/gemini-1.5-pro-001" in err and "application-default credentials" in err, err
    _nothing_written(tmp_path)

    # With Google credentials: the Azure deployments still hold the placeholder key.
    adc = tmp_path / "adc.json"
    adc.write_text(json.dumps({"type": "authorized_user", "client_id": "x", "client_secret": "y",
                               "refresh_token": "z"}))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(adc))
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "test-project")
    code, err = _run(EXAMPLES / CLOUD, tmp_path, capsys)
    assert code == 2 and "\n" not in err, err
    assert ("model deployment stanfordhealthcare/gpt-4o-2024-05-13 still has the example's placeholder API key"
            in err), err
    _nothing_written(tmp_path)

    # With an Azure key: Bedrock needs AWS credentials, and says where they come from.
    local = tmp_path / "prod_env"
    local.mkdir()
    for f in (EXAMPLES / CLOUD).iterdir():
        text = f.read_text()
        (local / f.name).write_text(text.replace("REPLACE_ME_AZURE_OPENAI_API_KEY", "test-not-a-key"))
    code, err = _run(local, tmp_path, capsys)
    assert code == 2 and "\n" not in err, err
    assert "stanfordhealthcare/llama-3.3-70b-instruct" in err and "AWS" in err, err
    assert "test-not-a-key" not in err
    _nothing_written(tmp_path)
