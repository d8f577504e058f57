"""The Stanford Health Care gateway's StanfordHealthCareOpenAIClient, StanfordHealthCareClaudeClient and
StanfordHealthCareGoogleClient: HELM's wire requests (against the vendor mock and byte for byte), result
parsing (one completion per Claude `content` item, Gemini stream chunks concatenated, no stop cut),
error classification, credentials and secrets."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import SecretStr

from medhelm_core.clients import client_for_deployment
from medhelm_core.clients.stanford_gateway import (GATEWAY_CLAUDE_CLIENT, GATEWAY_GOOGLE_CLIENT,
                                                   GATEWAY_OPENAI_CLIENT)
from medhelm_core.helm_config.deployments import Credentials, Deployment
from medhelm_core.errors import MedhelmError
from medhelm_core.ratelimit import CONNECTION, FATAL, FATAL_ENDPOINT, OK, RATE_LIMITED, SERVER_ERROR
from medhelm_core.run import preflight
from tests.clients.scripted_http import ScriptedServer
from tests.mock_server import MockServer
from tests.oracle import SHARED

KEY = "gw-secret-key-0123456789"
CLAUDE_MODEL = "arn:aws:bedrock:us-west-2:679683451337:inference-profile/us.anthropic.claude-3-7-sonnet-20250219-v1:0"


def _request(model: str, prompt: str = "Answer A or B.\n", **kw) -> dict:
    req = {"model_deployment": "x/y", "model": model, "embedding": False, "prompt": prompt, "temperature": 0.0,
           "num_completions": 1, "top_k_per_token": 1, "max_tokens": 7, "stop_sequences": ["\n"],
           "echo_prompt": False, "top_p": 1, "presence_penalty": 0, "frequency_penalty": 0}
    return {**req, **kw}


def _deployment(name: str, cls: str, model_name: str, **args) -> Deployment:
    return Deployment(name=name, model_name=model_name, tokenizer_name="simple/tokenizer1",
                      client_spec={"class_name": cls, "args": args})


def _credentials(source: str = "/p/credentials.conf", **values) -> Credentials:
    return Credentials(values={k: SecretStr(v) for k, v in values.items()}, source=source)


def _gw(url: str) -> Credentials:
    return _credentials(stanfordhealthcareEndpoint=url, stanfordhealthcareApiKey=KEY)


def _claude(url: str):
    dep = _deployment("stanfordhealthcare/claude-3-7-sonnet-20250219", GATEWAY_CLAUDE_CLIENT,
                      "anthropic/claude-3-7-sonnet-20250219", model=CLAUDE_MODEL,
                      deployment="awssig4claude37/aswsig4claude37")
    return client_for_deployment(dep, _gw(url))


def _gemini(url: str):
    dep = _deployment("stanfordhealthcare/gemini-2.0-flash-001", GATEWAY_GOOGLE_CLIENT, "google/gemini-2.0-flash-001",
                      deployment="gcp-gem20flash-fa/apim-gcp-gem20flash-fa")
    return client_for_deployment(dep, _gw(url))


@pytest.fixture(scope="module")
def vendor_mock(tmp_path_factory):
    log = tmp_path_factory.mktemp("vendor") / "log.jsonl"
    server = MockServer("--log-jsonl", str(log), script=SHARED / "tools" / "mock_vendor_server.py")
    server.log = log
    server.url = f"http://127.0.0.1:{server.port}"
    yield server
    server.close()


@pytest.fixture
def scripted():
    server = ScriptedServer()
    yield server
    server.close()


def _last(log: Path) -> dict:
    return json.loads(log.read_text().splitlines()[-1])


def _secret_headers(record: dict) -> set[str]:
    return {h for h, v in record["headers"].items() if v == "<redacted>"}


def test_gateway_openai_sends_bearer_dummy_and_the_key_header(vendor_mock, scripted):
    dep = _deployment("stanfordhealthcare/llama-3.3-70b-instruct", GATEWAY_OPENAI_CLIENT,
                      "meta/llama-3.3-70b-instruct", base_url="{endpoint}/llama3370b/v1")
    client = client_for_deployment(dep, _gw(vendor_mock.url))
    assert client.endpoint == vendor_mock.url
    got = client.attempt(_request("meta/llama-3.3-70b-instruct", stop_sequences=[], max_tokens=4096))
    rec = _last(vendor_mock.log)
    assert rec["wire"] == "gateway-openai-chat" and rec["path"] == "/llama3370b/v1/chat/completions"
    assert rec["query"] == {} and _secret_headers(rec) == {"authorization", "ocp-apim-subscription-key"}
    assert rec["body"] == {"model": "llama-3.3-70b-instruct",
                           "messages": [{"role": "user", "content": "Answer A or B.\n"}],
                           "temperature": 0.0, "top_p": 1, "n": 1, "stop": None, "max_tokens": 4096,
                           "presence_penalty": 0, "frequency_penalty": 0}
    assert got.kind == OK and got.result["completions"][0]["finish_reason"] == {"reason": "stop"}
    # The values: the real key only in Ocp-Apim-Subscription-Key, "dummy" as the bearer token.
    client = client_for_deployment(dep, _gw(scripted.url))
    scripted.reply(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": "A"},
                                      "finish_reason": "stop"}]})
    client.attempt(_request("meta/llama-3.3-70b-instruct"))
    headers = scripted.requests[-1]["headers"]
    assert headers["authorization"] == "Bearer dummy" and headers["ocp-apim-subscription-key"] == KEY


def test_gateway_deepseek_thinking_is_removed_before_the_stop_cut(vendor_mock):
    dep = _deployment("stanfordhealthcare/deepseek-r1", GATEWAY_OPENAI_CLIENT, "deepseek-ai/deepseek-r1",
                      openai_model_name="deepseek-chat", base_url="{endpoint}/deepseekr1/v1",
                      output_processor="helm.benchmark.metrics.output_processors.remove_deepseek_r1_thinking")
    client = client_for_deployment(dep, _gw(vendor_mock.url))
    got = client.attempt(_request("deepseek-ai/deepseek-r1", max_tokens=400, stop_sequences=[]))
    rec = _last(vendor_mock.log)
    assert rec["path"] == "/deepseekr1/v1/chat/completions" and rec["body"]["model"] == "deepseek-chat"
    text = got.result["completions"][0]["text"]
    assert "<think>" not in text and text and rec["completions"][0].endswith(text)


def test_gateway_openai_needs_endpoint_key_and_base_url(monkeypatch):
    monkeypatch.delenv("MEDHELM_API_KEY_STANFORDHEALTHCARE", raising=False)
    dep = _deployment("stanfordhealthcare/llama", GATEWAY_OPENAI_CLIENT, "meta/llama-3.3-70b-instruct",
                      base_url="{endpoint}/llama3370b/v1")
    for creds, named in [(_credentials(stanfordhealthcareApiKey=KEY), "stanfordhealthcareEndpoint"),
                         (_credentials(stanfordhealthcareEndpoint="https://gw.example"), "stanfordhealthcareApiKey")]:
        with pytest.raises(MedhelmError) as e:
            client_for_deployment(dep, creds)
        assert named in str(e.value) and "/p/credentials.conf" in str(e.value) and "\n" not in str(e.value)
    no_base = _deployment("stanfordhealthcare/llama", GATEWAY_OPENAI_CLIENT, "meta/llama-3.3-70b-instruct")
    with pytest.raises(MedhelmError, match="base_url"):
        client_for_deployment(no_base, _gw("https://gw.example"))


def test_claude_request_and_result(vendor_mock):
    client = _claude(vendor_mock.url)
    got = client.attempt(_request("anthropic/claude-3-7-sonnet-20250219", max_tokens=40))
    rec = _last(vendor_mock.log)
    assert rec["wire"] == "gateway-claude" and rec["path"] == "/awssig4claude37/aswsig4claude37"
    assert _secret_headers(rec) == {"ocp-apim-subscription-key"}
    # No stop sequences, top_p or n are sent ...
    assert rec["body"] == {"model_id": CLAUDE_MODEL, "prompt_text": "Answer A or B.\n", "max_tokens": 40,
                           "temperature": 0.0}
    # ... and the text is not cut at the request's "\n": no finish_reason, no request_datetime.
    assert got.kind == OK
    assert got.result["completions"] == [{"text": rec["completions"][0], "logprob": 0, "tokens": []}]
    assert set(got.result) == {"success", "embedding", "completions", "cached", "request_time"}
    assert got.result["cached"] is False and got.usage["prompt_tokens"] > 0
    assert client.endpoint == vendor_mock.url


def test_claude_one_completion_per_content_item_and_list_replies(scripted):
    client = _claude(scripted.url)
    scripted.reply(200, {"content": [{"type": "text", "text": "A\nwhy"}, {"type": "text", "text": "B"}]})
    got = client.attempt(_request("anthropic/claude-3-7-sonnet-20250219"))
    assert [c["text"] for c in got.result["completions"]] == ["A\nwhy", "B"]
    scripted.reply(200, [{"type": "text", "text": "C"}])  # a bare list is HELM's {"content": list}
    got = client.attempt(_request("anthropic/claude-3-7-sonnet-20250219"))
    assert got.kind == OK and got.result["completions"] == [{"text": "C", "logprob": 0, "tokens": []}]


def test_http_body_bytes_are_requests_json(scripted):
    client = _claude(scripted.url)
    scripted.reply(200, {"content": [{"text": "A"}]})
    client.attempt(_request("anthropic/claude-3-7-sonnet-20250219", prompt="Café?\n"))
    req = scripted.requests[-1]
    expected = json.dumps({"model_id": CLAUDE_MODEL, "prompt_text": "Café?\n", "max_tokens": 7,
                           "temperature": 0.0}).encode()
    assert req["raw"] == expected
    assert req["headers"]["content-type"] == "application/json" and req["headers"]["ocp-apim-subscription-key"] == KEY
    assert "authorization" not in req["headers"]


def test_gemini_request_and_stream_chunks(vendor_mock):
    client = _gemini(vendor_mock.url)
    got = client.attempt(_request("google/gemini-2.0-flash-001", max_tokens=60, stop_sequences=[]))
    rec = _last(vendor_mock.log)
    assert rec["wire"] == "gateway-gemini" and rec["path"] == "/gcp-gem20flash-fa/apim-gcp-gem20flash-fa"
    assert _secret_headers(rec) == {"ocp-apim-subscription-key"}
    assert rec["body"] == {"contents": {"role": "user", "parts": {"text": "Answer A or B.\n"}},
                           "generation_config": {"temperature": 0.0, "topP": 1, "topK": 1, "candidateCount": 1,
                                                 "maxOutputTokens": 60, "stopSequences": []}}
    assert rec["chunks"] >= 1
    assert got.result["completions"] == [{"text": rec["completions"][0], "logprob": 0, "tokens": []}]


def test_gemini_concatenates_chunks_with_content_only(scripted):
    client = _gemini(scripted.url)
    scripted.reply(200, [{"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}]},
                         {"candidates": [{"finishReason": "STOP"}]},
                         {"candidates": [{"content": {"role": "model", "parts": [{"text": "lo\nthere"}]}}],
                          "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 2}}])
    got = client.attempt(_request("google/gemini-2.0-flash-001"))
    assert got.result["completions"] == [{"text": "Hello\nthere", "logprob": 0, "tokens": []}]  # no stop cut
    assert got.usage == {"prompt_tokens": 4, "completion_tokens": 2}
    assert scripted.requests[-1]["body"]["generation_config"]["stopSequences"] == ["\n"]


def test_http_errors_are_classified_without_the_key(scripted):
    client = _claude(scripted.url)
    scripted.reply(429, {"message": "Rate limit is exceeded. Try again in 2 seconds."},
                   {"Retry-After": "2", "x-ratelimit-remaining-requests": "0"})
    got = client.attempt(_request("anthropic/claude-3-7-sonnet-20250219"))
    assert got.kind == RATE_LIMITED and got.retry_after_s == 2.0
    assert got.headers == {"retry-after": "2", "x-ratelimit-remaining-requests": "0"}
    scripted.reply(401, {"message": f"Access denied due to invalid subscription key {KEY}."})
    got = client.attempt(_request("anthropic/claude-3-7-sonnet-20250219"))
    assert got.kind == FATAL_ENDPOINT and KEY not in got.message and "401" in got.message
    scripted.reply(503, {"message": "unavailable"})
    assert client.attempt(_request("anthropic/claude-3-7-sonnet-20250219")).kind == SERVER_ERROR
    scripted.reply(400, {"message": "bad"})
    assert client.attempt(_request("anthropic/claude-3-7-sonnet-20250219")).kind == FATAL
    scripted.reply(200, b"<html>gateway</html>")
    assert client.attempt(_request("anthropic/claude-3-7-sonnet-20250219")).kind == SERVER_ERROR
    scripted.reply(200, {"content": [{"type": "thinking", "thinking": "no text key"}]})
    assert client.attempt(_request("anthropic/claude-3-7-sonnet-20250219")).kind == SERVER_ERROR


def test_connection_refused_is_transient():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    got = _gemini(f"http://127.0.0.1:{port}").attempt(_request("google/gemini-2.0-flash-001"))
    assert got.kind == CONNECTION and KEY not in got.message


def test_http_clients_need_endpoint_key_and_deployment(monkeypatch):
    monkeypatch.delenv("MEDHELM_API_KEY_STANFORDHEALTHCARE", raising=False)
    dep = _deployment("stanfordhealthcare/gemini-2.0-flash-001", GATEWAY_GOOGLE_CLIENT, "google/gemini-2.0-flash-001",
                      deployment="gcp-gem20flash-fa/apim-gcp-gem20flash-fa")
    for creds, named in [(_credentials(stanfordhealthcareApiKey=KEY), "stanfordhealthcareEndpoint"),
                         (_credentials(stanfordhealthcareEndpoint="https://gw.example"), "stanfordhealthcareApiKey")]:
        with pytest.raises(MedhelmError) as e:
            client_for_deployment(dep, creds)
        assert named in str(e.value) and "/p/credentials.conf" in str(e.value) and "\n" not in str(e.value)
    no_path = _deployment("stanfordhealthcare/gemini", GATEWAY_GOOGLE_CLIENT, "google/gemini-2.0-flash-001")
    with pytest.raises(MedhelmError, match="client_spec.args.deployment"):
        client_for_deployment(no_path, _gw("https://gw.example"))


def test_no_secret_in_repr_or_redacted_text():
    for client in (_claude("https://gw.example"), _gemini("https://gw.example")):
        assert KEY not in repr(client) and "gw.example" in repr(client)
        assert KEY not in client.redact(f"key={KEY}")


def test_preflight_for_the_http_clients(tmp_path):
    creds_file = str(tmp_path / "credentials.conf")
    dep = _deployment("stanfordhealthcare/claude", GATEWAY_CLAUDE_CLIENT, "anthropic/claude-3-7-sonnet-20250219",
                      model=CLAUDE_MODEL, deployment="a/b")
    ws = SimpleNamespace(local_path=tmp_path)
    problem = preflight._endpoint_problem(ws, dep, _credentials(creds_file, stanfordhealthcareApiKey=KEY))
    assert f"set stanfordhealthcareEndpoint in {creds_file}" in problem and "\n" not in problem
    assert preflight._endpoint_problem(ws, dep, _credentials(creds_file, stanfordhealthcareApiKey=KEY,
                                                             stanfordhealthcareEndpoint="https://gw.example")) is None
    llama = _deployment("stanfordhealthcare/llama", GATEWAY_OPENAI_CLIENT, "meta/llama-3.3-70b-instruct",
                        base_url="{endpoint}/llama3370b/v1")
    problem = preflight._endpoint_problem(ws, llama, _credentials(creds_file, stanfordhealthcareApiKey=KEY))
    assert "stanfordhealthcareEndpoint" in problem and creds_file in problem
    assert preflight._endpoint_problem(ws, llama, _credentials(creds_file, stanfordhealthcareApiKey=KEY,
                                                               stanfordhealthcareEndpoint="https://gw.example")) is None
