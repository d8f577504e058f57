"""HELM's OpenAIResponseClient (the Responses API): the request body per quirk (max_output_tokens >= 16,
store false, reasoning summary and no sampling params for reasoning models, reasoning effort), reply
parsing (text and thinking joins, refusal, unknown items, n completions from one request), errors."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import SecretStr

from medhelm_core.clients import client_for_deployment
from medhelm_core.clients.openai_responses import OPENAI_RESPONSE_CLIENT
from medhelm_core.helm_config.deployments import Credentials, Deployment
from medhelm_core.ratelimit import CONTENT_FILTER, FATAL, FATAL_ENDPOINT, OK, RATE_LIMITED, SERVER_ERROR
from tests.clients.scripted_http import ScriptedServer
from tests.mock_server import MockServer
from tests.oracle import SHARED

KEY = "sk-responses-secret-0123456789"


def _request(model: str = "openai/gpt-5-2025-08-07", prompt: str = "Yes or No?", **kw) -> dict:
    req = {"model_deployment": "openai/x", "model": model, "embedding": False, "prompt": prompt, "temperature": 0.0,
           "num_completions": 1, "top_k_per_token": 1, "max_tokens": 1, "stop_sequences": ["\n"], "echo_prompt": False,
           "top_p": 1, "presence_penalty": 0, "frequency_penalty": 0}
    return {**req, **kw}


def _client(base_url: str | None, model_name: str = "openai/gpt-5-2025-08-07", credentials: dict | None = None, **args):
    if base_url is not None:
        args["base_url"] = base_url
    dep = Deployment(name=model_name, model_name=model_name, tokenizer_name="simple/tokenizer1",
                     client_spec={"class_name": OPENAI_RESPONSE_CLIENT, "args": args})
    values = {"openaiApiKey": KEY, **(credentials or {})}
    return client_for_deployment(dep, Credentials(values={k: SecretStr(v) for k, v in values.items()},
                                                  source="/p/credentials.conf"))


@pytest.fixture(scope="module")
def vendor_mock(tmp_path_factory):
    log = tmp_path_factory.mktemp("vendor") / "log.jsonl"
    server = MockServer("--log-jsonl", str(log), script=SHARED / "tools" / "mock_vendor_server.py")
    server.log = log
    yield server
    server.close()


@pytest.fixture
def scripted():
    server = ScriptedServer()
    yield server
    server.close()


def _last(log: Path) -> dict:
    return json.loads(log.read_text().splitlines()[-1])


def _reply(*output, usage=None, **extra):
    return {"id": "resp_1", "object": "response", "created_at": 1, "status": "completed", "error": None,
            "model": "gpt-5", "output": list(output), "usage": usage or {"input_tokens": 5, "output_tokens": 2},
            **extra}


def _message(*texts):
    return {"type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": t, "annotations": []} for t in texts]}


def test_reasoning_model_request_and_result(vendor_mock):
    client = _client(vendor_mock.base_url)
    got = client.attempt(_request())
    rec = _last(vendor_mock.log)
    assert rec["wire"] == "openai-responses" and rec["path"] == "/v1/responses" and rec["query"] == {}
    assert {h for h, v in rec["headers"].items() if v == "<redacted>"} == {"authorization"}
    assert rec["body"] == {"model": "gpt-5-2025-08-07", "input": "Yes or No?", "max_output_tokens": 16,
                           "store": False, "reasoning": {"summary": "detailed"}}
    assert got.kind == OK
    completion = got.result["completions"][0]
    assert completion["text"] == rec["completions"][0] and completion["logprob"] == 0.0
    assert isinstance(completion["logprob"], float) and completion["tokens"] == []
    assert completion["thinking"]["text"].startswith("Mock reasoning summary")
    assert "finish_reason" not in completion
    assert set(got.result) == {"success", "embedding", "completions", "cached", "request_time", "request_datetime"}
    assert got.usage["prompt_tokens"] > 0


def test_non_reasoning_model_keeps_sampling_params_and_effort(vendor_mock):
    client = _client(vendor_mock.base_url, "openai/gpt-4.1-2025-04-14", reasoning_effort="low",
                     openai_model_name="gpt-4.1")
    client.attempt(_request("openai/gpt-4.1-2025-04-14", max_tokens=300))
    body = _last(vendor_mock.log)["body"]
    assert body == {"model": "gpt-4.1", "input": "Yes or No?", "top_p": 1, "max_output_tokens": 300,
                    "temperature": 0.0, "store": False, "reasoning": {"effort": "low"}}
    client = _client(vendor_mock.base_url, "openai/o3-2025-04-16", reasoning_effort="high")
    client.attempt(_request("openai/o3-2025-04-16"))
    assert _last(vendor_mock.log)["body"]["reasoning"] == {"effort": "high", "summary": "detailed"}


def test_messages_are_sent_as_input(scripted):
    client = _client(scripted.url + "/v1")
    scripted.reply(200, _reply(_message("No")))
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q?"}]
    assert client.attempt(_request(prompt="", messages=messages)).kind == OK
    assert scripted.requests[-1]["body"]["input"] == messages
    bad = client.attempt(_request(prompt="", messages=[{"role": "user", "content": "Q?"},
                                                       {"role": "assistant", "content": "A"}]))
    assert bad.kind == FATAL and "Last message must have role 'user'" in bad.message


def test_parsing_joins_texts_and_thinking_and_ignores_unknown_fields(scripted):
    client = _client(scripted.url + "/v1")
    reasoning = {"type": "reasoning", "id": "rs", "summary": [{"type": "summary_text", "text": "s1"},
                                                              {"type": "summary_text", "text": "s2"}],
                 "content": [{"type": "reasoning_text", "text": "c1"}], "new_field_from_a_newer_api": 1}
    scripted.reply(200, _reply(reasoning, _message("A", "B"), _message("C"), prompt_cache_retention="in_memory",
                               usage={"input_tokens": 5, "output_tokens": 2,
                                      "input_tokens_details": {"cached_tokens": 0}}))
    got = client.attempt(_request(echo_prompt=True, num_completions=2))
    assert len(scripted.requests) == 1  # HELM's later iterations are answered by its cache
    expected = {"text": "Yes or No?\n\nA\n\nB\n\nC", "logprob": 0.0, "tokens": [],
                "thinking": {"text": "s1\n\ns2\n\nc1"}}
    assert got.result["completions"] == [expected, expected] and got.result["cached"] is True
    assert got.usage == {"prompt_tokens": 5, "completion_tokens": 2}


def test_refusal_and_unknown_items(scripted):
    client = _client(scripted.url + "/v1")
    scripted.reply(200, _reply({"type": "message", "role": "assistant",
                                "content": [{"type": "refusal", "refusal": "I can't help with that."}]}))
    got = client.attempt(_request())
    assert got.kind == CONTENT_FILTER and got.result["success"] is False
    assert got.result["error"] == "Received refusal from OpenAI API: I can't help with that."
    assert got.result["error_flags"] == {"is_retriable": False, "is_fatal": False}
    scripted.reply(200, _reply({"type": "web_search_call", "id": "ws"}, _message("A")))
    got = client.attempt(_request())
    assert got.kind == FATAL and "web_search_call" in got.message
    scripted.reply(200, {"unexpected": True})
    assert client.attempt(_request()).kind == SERVER_ERROR


def test_errors_are_classified_without_the_key(scripted):
    client = _client(scripted.url + "/v1")
    scripted.reply(429, {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}},
                   {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "20ms",
                    "x-ratelimit-remaining-tokens": "100", "x-ratelimit-reset-tokens": "1s", "retry-after-ms": "20"})
    got = client.attempt(_request())
    assert got.kind == RATE_LIMITED and got.retry_after_s == pytest.approx(0.02)
    assert got.headers["x-ratelimit-reset-requests"] == "20ms" and got.headers["x-ratelimit-remaining-tokens"] == "100"
    scripted.reply(401, {"error": {"message": f"Incorrect API key provided: {KEY}", "code": "invalid_api_key"}})
    got = client.attempt(_request())
    assert got.kind == FATAL_ENDPOINT and KEY not in got.message
    scripted.reply(500, {"error": {"message": "oops"}})
    assert client.attempt(_request()).kind == SERVER_ERROR
    assert KEY not in repr(client)


def test_credentials_base_url_and_organization(scripted):
    client = _client(None, credentials={"openaiBaseUrl": scripted.url + "/v1", "openaiOrgId": "org-clinic"})
    assert client.endpoint == scripted.url
    scripted.reply(200, _reply(_message("A")))
    assert client.attempt(_request()).kind == OK
    req = scripted.requests[-1]
    assert req["path"] == "/v1/responses" and req["headers"]["openai-organization"] == "org-clinic"
    assert req["headers"]["authorization"] == f"Bearer {KEY}"
