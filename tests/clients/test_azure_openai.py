"""HELM's Azure OpenAI clients (AzureOpenAIClient, the gateway's StanfordHealthCareAzureOpenAIClient and
StanfordHealthCareSHCOpenAIClient): the wire request against the vendor mock (path, api-version, auth
header names, body quirks), result parsing, error classification, credentials and the run's checks."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import SecretStr

from medhelm_core.clients import client_for_deployment
from medhelm_core.clients.azure_openai import (AZURE_OPENAI_CLIENT, GATEWAY_AZURE_OPENAI_CLIENT,
                                               GATEWAY_SHC_OPENAI_CLIENT, AzureOpenAIChatClient)
from medhelm_core.helm_config.deployments import Credentials, Deployment
from medhelm_core.errors import MedhelmError
from medhelm_core.ratelimit import CONTENT_FILTER, FATAL_ENDPOINT, OK, RATE_LIMITED, SERVER_ERROR
from medhelm_core.run import preflight
from tests.clients.scripted_http import ScriptedServer
from tests.mock_server import MockServer
from tests.oracle import SHARED

KEY = "gw-secret-key-0123456789"


def _request(model: str, prompt: str = "Is the sky blue?", **kw) -> dict:
    req = {"model_deployment": "x/y", "model": model, "embedding": False, "prompt": prompt, "temperature": 0.0,
           "num_completions": 1, "top_k_per_token": 1, "max_tokens": 5, "stop_sequences": [], "echo_prompt": False,
           "top_p": 1, "presence_penalty": 0, "frequency_penalty": 0}
    return {**req, **kw}


def _deployment(name: str, cls: str, model_name: str, **args) -> Deployment:
    return Deployment(name=name, model_name=model_name, tokenizer_name="simple/tokenizer1",
                      client_spec={"class_name": cls, "args": args})


def _credentials(source: str = "/p/credentials.conf", **values) -> Credentials:
    return Credentials(values={k: SecretStr(v) for k, v in values.items()}, source=source)


@pytest.fixture(scope="module")
def vendor_mock(tmp_path_factory):
    log = tmp_path_factory.mktemp("vendor") / "log.jsonl"
    server = MockServer("--log-jsonl", str(log), script=SHARED / "tools" / "mock_vendor_server.py")
    server.log = log
    server.url = f"http://127.0.0.1:{server.port}"
    yield server
    server.close()


def _last(log: Path) -> dict:
    return json.loads(log.read_text().splitlines()[-1])


@pytest.fixture
def scripted():
    server = ScriptedServer()
    yield server
    server.close()


def _secret_headers(record: dict) -> set[str]:
    return {h for h, v in record["headers"].items() if v == "<redacted>"}


def test_gateway_azure_with_endpoint_sends_helms_request(vendor_mock):
    dep = _deployment("stanfordhealthcare/gpt-4o-2024-05-13", GATEWAY_AZURE_OPENAI_CLIENT, "openai/gpt-4o-2024-05-13",
                      openai_model_name="gpt-4o", api_version="2023-05-15")
    client = client_for_deployment(dep, _credentials(stanfordhealthcareEndpoint=vendor_mock.url,
                                                     stanfordhealthcareApiKey=KEY))
    got = client.attempt(_request("openai/gpt-4o-2024-05-13", max_tokens=4096))
    rec = _last(vendor_mock.log)
    assert rec["path"] == "/openai/deployments/gpt-4o/chat/completions"
    assert rec["query"] == {"api-version": "2023-05-15"}
    assert _secret_headers(rec) == {"api-key", "ocp-apim-subscription-key"}
    # gpt-4o is a vision-language model in HELM's metadata: no "stop": null.
    assert rec["body"] == {"model": "gpt-4o", "messages": [{"role": "user", "content": "Is the sky blue?"}],
                           "temperature": 0.0, "top_p": 1, "n": 1, "max_tokens": 4096, "presence_penalty": 0,
                           "frequency_penalty": 0}
    assert got.kind == OK and got.usage["prompt_tokens"] > 0
    assert got.result["completions"] == [{"text": rec["completions"][0], "logprob": 0, "tokens": [],
                                          "finish_reason": {"reason": "stop"}}]
    assert set(got.result) == {"success", "embedding", "completions", "cached", "request_time", "request_datetime"}
    assert client.endpoint == vendor_mock.url


def test_gateway_azure_base_url_template_and_reasoning_model(vendor_mock):
    dep = _deployment("stanfordhealthcare/gpt-5-2025-08-07", GATEWAY_AZURE_OPENAI_CLIENT, "openai/gpt-5-2025-08-07",
                      openai_model_name="gpt-5", api_version="2024-12-01-preview", base_url="{endpoint}/openai-eastus2")
    client = client_for_deployment(dep, _credentials(stanfordhealthcareEndpoint=vendor_mock.url,
                                                     stanfordhealthcareApiKey=KEY))
    assert client.endpoint == vendor_mock.url  # the formatted URL's origin
    got = client.attempt(_request("openai/gpt-5-2025-08-07", max_tokens=1))
    rec = _last(vendor_mock.log)
    assert rec["path"] == "/openai-eastus2/deployments/gpt-5/chat/completions"
    assert rec["query"] == {"api-version": "2024-12-01-preview"}
    assert _secret_headers(rec) == {"api-key", "ocp-apim-subscription-key"}
    assert rec["body"] == {"model": "gpt-5", "messages": [{"role": "user", "content": "Is the sky blue?"}], "n": 1,
                           "max_completion_tokens": 1}
    assert got.kind == OK


def test_shc_uses_the_model_engine_and_its_api_version(vendor_mock):
    dep = _deployment("stanfordhealthcare_shc/gpt-4o-2024-05-13", GATEWAY_SHC_OPENAI_CLIENT,
                      "openai/gpt-4o-2024-05-13")
    client = client_for_deployment(dep, _credentials(stanfordhealthcare_shcEndpoint=vendor_mock.url,
                                                     stanfordhealthcare_shcApiKey=KEY))
    client.attempt(_request("openai/gpt-4o-2024-05-13", stop_sequences=["\n"]))
    rec = _last(vendor_mock.log)
    assert rec["path"] == "/openai/deployments/gpt-4o-2024-05-13/chat/completions"
    assert rec["query"] == {"api-version": "2024-08-01-preview"}
    assert _secret_headers(rec) == {"api-key"}
    assert rec["body"]["model"] == "gpt-4o-2024-05-13" and rec["body"]["stop"] == ["\n"]


def test_azure_openai_client_sends_stop_null_to_a_text_model(vendor_mock, monkeypatch):
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    dep = _deployment("azureopenai/gpt-4-0613", AZURE_OPENAI_CLIENT, "openai/gpt-4-0613",
                      azure_openai_deployment_name="gpt-4")
    client = client_for_deployment(dep, _credentials(azureopenaiEndpoint=vendor_mock.url, azureopenaiApiKey=KEY))
    got = client.attempt(_request("openai/gpt-4-0613"))
    rec = _last(vendor_mock.log)
    assert rec["path"] == "/openai/deployments/gpt-4/chat/completions"
    assert rec["query"] == {"api-version": "2024-07-01-preview"}  # HELM's default
    assert _secret_headers(rec) == {"api-key"}
    assert "stop" in rec["body"] and rec["body"]["stop"] is None
    assert got.kind == OK


def test_azure_endpoint_and_key_from_the_sdk_environment(scripted, monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", scripted.url)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-must-not-be-sent")
    monkeypatch.delenv("MEDHELM_API_KEY_AZUREOPENAI", raising=False)
    dep = _deployment("azureopenai/gpt-4o-mini-2024-07-18", AZURE_OPENAI_CLIENT, "openai/gpt-4o-mini-2024-07-18",
                      azure_openai_deployment_name="gpt-4o-mini", api_version="2024-10-21",
                      default_headers={"X-Team": "clinic"})
    client = client_for_deployment(dep, _credentials())
    scripted.reply(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Yes"},
                                      "finish_reason": "stop"}]})
    assert client.attempt(_request("openai/gpt-4o-mini-2024-07-18")).kind == OK
    req = scripted.requests[-1]
    assert req["path"] == "/openai/deployments/gpt-4o-mini/chat/completions"
    assert req["query"] == {"api-version": "2024-10-21"}
    assert req["headers"]["api-key"] == KEY and req["headers"]["x-team"] == "clinic"
    assert "authorization" not in req["headers"]


def test_azure_needs_exactly_one_of_endpoint_and_base_url(monkeypatch):
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    dep = _deployment("azureopenai/gpt-4", AZURE_OPENAI_CLIENT, "openai/gpt-4-0613")
    with pytest.raises(MedhelmError) as e:
        client_for_deployment(dep, _credentials(azureopenaiApiKey=KEY))
    assert "azureopenaiEndpoint" in str(e.value) and "/p/credentials.conf" in str(e.value)
    assert "AZURE_OPENAI_ENDPOINT" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(MedhelmError) as e:
        client_for_deployment(dep, _credentials(azureopenaiApiKey=KEY, azureopenaiEndpoint="https://a.example",
                                                azureopenaiBaseUrl="https://b.example/openai"))
    assert "not both" in str(e.value)
    monkeypatch.delenv("AZURE_OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-must-not-be-used")
    monkeypatch.delenv("MEDHELM_API_KEY_AZUREOPENAI", raising=False)
    with pytest.raises(MedhelmError) as e:
        client_for_deployment(dep, _credentials(azureopenaiEndpoint="https://a.example"))
    assert "azureopenaiApiKey" in str(e.value) and "AZURE_OPENAI_API_KEY" in str(e.value)


@pytest.mark.parametrize("missing,named", [("stanfordhealthcareApiKey", "stanfordhealthcareApiKey"),
                                           ("stanfordhealthcareEndpoint", "stanfordhealthcareEndpoint")])
def test_gateway_credentials_missing_is_one_line(missing, named, monkeypatch):
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    monkeypatch.delenv("MEDHELM_API_KEY_STANFORDHEALTHCARE", raising=False)
    values = {"stanfordhealthcareApiKey": KEY, "stanfordhealthcareEndpoint": "https://gw.example"}
    values.pop(missing)
    for args in ({}, {"base_url": "{endpoint}/openai-eastus2"}):
        dep = _deployment("stanfordhealthcare/gpt-4.1", GATEWAY_AZURE_OPENAI_CLIENT, "openai/gpt-4.1-2025-04-14",
                          openai_model_name="gpt-4.1", api_version="2025-01-01-preview", **args)
        with pytest.raises(MedhelmError) as e:
            client_for_deployment(dep, _credentials(**values))
        message = str(e.value)
        assert named in message and "/p/credentials.conf" in message and "\n" not in message
        assert KEY not in message


def _chat_reply(content="Yes", finish="stop"):
    return {"id": "x", "object": "chat.completion", "created": 1, "model": "gpt-4o",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}


def _gateway_client(scripted) -> AzureOpenAIChatClient:
    dep = _deployment("stanfordhealthcare/gpt-4o-2024-05-13", GATEWAY_AZURE_OPENAI_CLIENT, "openai/gpt-4o-2024-05-13",
                      openai_model_name="gpt-4o", api_version="2023-05-15")
    return client_for_deployment(dep, _credentials(stanfordhealthcareEndpoint=scripted.url,
                                                   stanfordhealthcareApiKey=KEY))


def test_azure_rate_limit_headers_reach_the_limiter(scripted):
    client = _gateway_client(scripted)
    scripted.reply(429, {"error": {"code": "429", "message": "Requests exceeded. Retry after 1 second."}},
                   {"retry-after-ms": "750", "retry-after": "1", "x-ratelimit-remaining-requests": "0",
                    "x-ratelimit-remaining-tokens": "1200", "x-ms-region": "East US"})
    got = client.attempt(_request("openai/gpt-4o-2024-05-13"))
    assert got.kind == RATE_LIMITED and got.status == 429
    assert got.retry_after_s == pytest.approx(0.75)
    assert got.headers == {"retry-after-ms": "750", "retry-after": "1", "x-ratelimit-remaining-requests": "0",
                           "x-ratelimit-remaining-tokens": "1200"}


@pytest.mark.parametrize("status,kind", [(401, FATAL_ENDPOINT), (404, FATAL_ENDPOINT), (500, SERVER_ERROR),
                                         (503, SERVER_ERROR)])
def test_error_statuses_are_classified(scripted, status, kind):
    client = _gateway_client(scripted)
    scripted.reply(status, {"error": {"message": f"bad key {KEY}"}})
    got = client.attempt(_request("openai/gpt-4o-2024-05-13"))
    assert got.kind == kind and got.status == status
    assert KEY not in got.message


def test_content_filters_are_helms_non_fatal_results(scripted):
    client = _gateway_client(scripted)
    scripted.reply(200, _chat_reply("", "content_filter"))
    got = client.attempt(_request("openai/gpt-4o-2024-05-13"))
    assert got.kind == CONTENT_FILTER and got.result["success"] is False
    assert got.result["error"] == "Content blocked by OpenAI filter"
    scripted.reply(400, {"error": {"code": "content_filter", "message": "The response was filtered due to the prompt "
                                   "triggering Azure OpenAI's content management policy. Please modify your prompt"}})
    got = client.attempt(_request("openai/gpt-4o-2024-05-13"))
    assert got.kind == CONTENT_FILTER and got.result["error"] == "Content blocked by Azure's content management filter"


def test_reply_parsing_cuts_at_stop_sequences(scripted):
    client = _gateway_client(scripted)
    scripted.reply(200, _chat_reply("B\nbecause"))
    got = client.attempt(_request("openai/gpt-4o-2024-05-13", stop_sequences=["\n"]))
    assert got.result["completions"] == [{"text": "B", "logprob": 0, "tokens": []}]  # HELM's truncate_sequence
    assert got.untruncated == ["B\nbecause"] and got.usage["completion_tokens"] == 1


def test_no_secret_in_repr(scripted):
    client = _gateway_client(scripted)
    assert KEY not in repr(client) and "StanfordHealthCareAzureOpenAIClient" in repr(client)
    assert client.redact(f"header {KEY}") == "header ***"


def _ws(tmp_path):
    return SimpleNamespace(local_path=tmp_path)


def test_preflight_accepts_a_filled_gateway_template(tmp_path, monkeypatch):
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    creds_file = str(tmp_path / "credentials.conf")
    dep = _deployment("stanfordhealthcare/gpt-5", GATEWAY_AZURE_OPENAI_CLIENT, "openai/gpt-5-2025-08-07",
                      openai_model_name="gpt-5", api_version="2024-12-01-preview", base_url="{endpoint}/openai-eastus2")
    ok = _credentials(creds_file, stanfordhealthcareEndpoint="https://gw.example", stanfordhealthcareApiKey=KEY)
    assert preflight._endpoint_problem(_ws(tmp_path), dep, ok) is None
    problem = preflight._endpoint_problem(_ws(tmp_path), dep, _credentials(creds_file, stanfordhealthcareApiKey=KEY))
    assert "stanfordhealthcareEndpoint" in problem and creds_file in problem and "\n" not in problem
    bad = _credentials(creds_file, stanfordhealthcareEndpoint="gw.example", stanfordhealthcareApiKey=KEY)
    problem = preflight._endpoint_problem(_ws(tmp_path), dep, bad)
    assert "http(s)" in problem and "stanfordhealthcareEndpoint" in problem and "gw.example" not in problem


def test_preflight_wants_the_endpoint_of_endpoint_clients(tmp_path, monkeypatch):
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    creds_file = str(tmp_path / "credentials.conf")
    dep = _deployment("stanfordhealthcare_shc/gpt-4o-2024-05-13", GATEWAY_SHC_OPENAI_CLIENT, "openai/gpt-4o-2024-05-13")
    creds = _credentials(creds_file, stanfordhealthcare_shcApiKey=KEY)
    problem = preflight._endpoint_problem(_ws(tmp_path), dep, creds)
    assert f"set stanfordhealthcare_shcEndpoint in {creds_file}" in problem and "\n" not in problem
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://res.openai.azure.com")
    assert preflight._endpoint_problem(_ws(tmp_path), dep, creds) is None
