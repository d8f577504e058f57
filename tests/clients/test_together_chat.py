"""HELM's TogetherChatClient / TogetherCompletionClient (medhelm_core/clients/together.py) against a
loopback mock of Together's API (`GET /v1/models` -> a list with each model's `config.stop`,
`POST /v1/chat/completions`, `POST /v1/completions`): the wire body as the `together` SDK dumps it
(key order, floats, the model's default stop tokens, logprobs/top_k/echo/n), the reply parsing
(tokens and logprobs, thinking, no finish_reason), error classification, credentials and secrets;
and, side by side, HELM 0.5.16's own classes from the wheel with the real `together` SDK (1.6.0,
what crfm-helm[together] installs) against the same mock: same bytes, same RequestResult.
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from medhelm_core.clients import client_for_deployment, factories
from medhelm_core.clients.together import (CHAT_CLASS_NAME, COMPLETION_CLASS_NAME, TOGETHER_SDK_VERSION,
                                           TogetherChatClient, TogetherCompletionClient, _StopTokens,
                                           parse_thinking, sdk_base_url)
from medhelm_core.helm_config.deployments import Deployment, parse_credentials
from medhelm_core.errors import MedhelmError

KEY = "tgp-secret-key-0123456789abcdef"
ROOT = Path(__file__).resolve().parents[2]
LLAMA = "meta-llama/Llama-3.3-70B-Instruct-Turbo"
LLAMA_STOP = ["<|eot_id|>", "<|eom_id|>"]
R1 = "deepseek-ai/DeepSeek-R1"


def _model(model_id, stop):
    """One entry of Together's `GET /v1/models` (a bare JSON list)."""
    return {"id": model_id, "object": "model", "created": 1733000000, "type": "chat", "display_name": model_id,
            "organization": "Meta", "link": "https://huggingface.co/x", "license": "other", "context_length": 131072,
            "config": {"chat_template": "{{ messages }}", "stop": stop, "bos_token": "<s>", "eos_token": stop[0]},
            "pricing": {"hourly": 0, "input": 0.88, "output": 0.88, "base": 0, "finetune": 0}}


MODELS = [_model(LLAMA, LLAMA_STOP), _model(R1, ["<｜end▁of▁sentence｜>"]),
          _model("togethercomputer/RedPajama-INCITE-7B-Base", ["<human>"]),
          _model("Qwen/Qwen3-235B-A22B-fp8-tput", ["<|im_end|>"])]


def _chat(*choices, usage=True):
    reply = {"id": "8f1b2c", "object": "chat.completion", "created": 1733000001, "model": LLAMA, "prompt": [],
             "choices": [{"index": i, "seed": 42, "finish_reason": "eos", "logprobs": None,
                          "message": {"role": "assistant", "content": "", "tool_calls": []}, **c}
                         for i, c in enumerate(choices)]}
    if usage:
        reply["usage"] = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
    return reply


def _msg(content, **kw):
    return {"message": {"role": "assistant", "content": content, "tool_calls": [], **kw}}


class TogetherMock:
    """Loopback HTTP server: records (method, path, headers, raw body); answers `GET /v1/models` with
    `self.models` and POSTs with the queued (status, json, headers) replies, repeating the last one."""

    def __init__(self):
        self.requests: list[tuple[str, str, dict, bytes]] = []
        self.models: object = MODELS
        self.models_reply: tuple[int, dict] | None = None
        self.replies = [(200, _chat(_msg("Hello")), {})]
        mock = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _send(self, status, body, headers):
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                mock.requests.append(("GET", self.path, {k.lower(): v for k, v in self.headers.items()}, b""))
                if self.path != "/v1/models":
                    return self._send(404, {"error": {"message": "not found"}}, {})
                if mock.models_reply:
                    return self._send(*mock.models_reply, {})
                self._send(200, mock.models, {})

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                mock.requests.append(("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, raw))
                status, body, headers = mock.replies.pop(0) if len(mock.replies) > 1 else mock.replies[0]
                self._send(status, body, headers)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def answer(self, *replies):
        self.replies = list(replies)

    @property
    def posts(self) -> list[tuple[str, str, dict, bytes]]:
        return [r for r in self.requests if r[0] == "POST"]

    @property
    def bodies(self) -> list[dict]:
        return [json.loads(r[3]) for r in self.posts]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def mock():
    _StopTokens.forget()
    m = TogetherMock()
    yield m
    m.close()
    _StopTokens.forget()


def _request(**kw):
    req = {"model": "meta/llama-3.3-70b-instruct-turbo", "model_deployment": "together/llama-3.3-70b-instruct-turbo",
           "embedding": False, "prompt": "The capital of France is", "temperature": 0.0, "num_completions": 1,
           "top_k_per_token": 1, "max_tokens": 5, "stop_sequences": [], "echo_prompt": False, "top_p": 1,
           "presence_penalty": 0, "frequency_penalty": 0}
    req.update(kw)
    return req


def _client(mock, together_model=LLAMA, **kw):
    return TogetherChatClient(KEY, together_model=together_model, base_url=mock.base_url, **kw)


# ---------------------------------------------------------------------------------------------
# Wire
# ---------------------------------------------------------------------------------------------
def test_wire_models_then_chat_body_bytes_and_headers(mock):
    got = _client(mock).attempt(_request())
    assert got.kind == "ok", got
    (m_method, m_path, m_headers, _), (method, path, headers, raw) = mock.requests
    assert (m_method, m_path, method, path) == ("GET", "/v1/models", "POST", "/v1/chat/completions")
    for h in (m_headers, headers):
        assert h["authorization"] == f"Bearer {KEY}"
        assert h["user-agent"] == f"Together/v1 PythonBindings/{TOGETHER_SDK_VERSION}"
        meta = json.loads(h["x-together-client-user-agent"])
        assert meta["bindings_version"] == TOGETHER_SDK_VERSION and meta["publisher"] == "together"
    assert "content-type" not in m_headers and headers["content-type"] == "application/json"
    want = {"messages": [{"role": "user", "content": "The capital of France is"}], "model": LLAMA, "max_tokens": 5,
            "stop": LLAMA_STOP, "temperature": 0.0, "top_p": 1.0, "top_k": 1, "stream": False, "logprobs": 1,
            "echo": False, "n": 1}
    # the SDK's json.dumps of its request model: field order, floats (top_p 1 -> 1.0), no nulls
    assert raw == json.dumps(want).encode()
    assert b"null" not in raw and b'"top_p": 1.0' in raw


def test_models_list_is_fetched_once_per_base_url(mock):
    client = _client(mock)
    for _ in range(3):
        assert client.attempt(_request()).kind == "ok"
    assert [r[0] for r in mock.requests] == ["GET", "POST", "POST", "POST"]
    other = _client(mock)  # another deployment on the same API: the table is shared, as in HELM's process
    assert other.attempt(_request()).kind == "ok"
    assert [r[0] for r in mock.requests].count("GET") == 1


def test_request_stop_sequences_come_before_the_models_default_stop_tokens(mock):
    _client(mock).attempt(_request(stop_sequences=["\n", "###"]))
    assert mock.bodies[0]["stop"] == ["\n", "###", *LLAMA_STOP]


def test_model_lookup_is_case_insensitive_and_sent_as_given(mock):
    _client(mock, together_model="META-LLAMA/llama-3.3-70b-instruct-turbo").attempt(_request())
    body = mock.bodies[0]
    assert body["model"] == "META-LLAMA/llama-3.3-70b-instruct-turbo" and body["stop"] == LLAMA_STOP


def test_without_together_model_the_request_model_is_sent(mock):
    mock.models = [*MODELS, _model("meta/llama-3.3-70b-instruct-turbo", ["</s>"])]
    _client(mock, together_model=None).attempt(_request())
    assert mock.bodies[0]["model"] == "meta/llama-3.3-70b-instruct-turbo" and mock.bodies[0]["stop"] == ["</s>"]


def test_unknown_together_model_fails_the_deployment(mock):
    got = _client(mock, together_model="nobody/unknown").attempt(_request())
    assert got.kind == "fatal_endpoint" and "Unknown together_model nobody/unknown" in got.message
    assert not mock.posts


@pytest.mark.parametrize("kw,want", [
    (dict(top_k_per_token=5), {"top_k": 5, "logprobs": 1}),
    (dict(top_k_per_token=0), {"top_k": 0, "logprobs": 0}),
    (dict(echo_prompt=True, num_completions=3), {"echo": True, "n": 3}),
    (dict(temperature=1, top_p=0.9, max_tokens=100), {"temperature": 1.0, "top_p": 0.9, "max_tokens": 100}),
])
def test_sampling_fields(mock, kw, want):
    _client(mock).attempt(_request(**kw))
    body = mock.bodies[0]
    assert {k: body[k] for k in want} == want
    assert all(type(body[k]) is type(v) for k, v in want.items())
    # presence/frequency penalties are never sent by HELM's class
    assert "presence_penalty" not in body and "frequency_penalty" not in body


def test_disable_logprobs_sends_zero(mock):
    _client(mock, disable_logprobs=True).attempt(_request(top_k_per_token=1))
    assert mock.bodies[0]["logprobs"] == 0 and mock.bodies[0]["top_k"] == 1


def test_messages_are_sent_in_the_sdk_models_key_order(mock):
    messages = [{"content": "You are terse.", "role": "system"},
                {"role": "user", "content": "Hi", "name": "dr", "extra": None}]
    _client(mock).attempt(_request(prompt="", messages=messages))
    assert mock.posts[0][3].startswith(
        b'{"messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi", '
        b'"name": "dr"}], "model": ')


def test_multimodal_prompt_becomes_content_parts(mock):
    mm = {"media_objects": [{"content_type": "image/png", "location": "https://x/img.png"},
                            {"content_type": "text/plain", "text": "What is this?"}]}
    _client(mock).attempt(_request(prompt="", multimodal_prompt=mm))
    assert mock.bodies[0]["messages"] == [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://x/img.png"}}, {"type": "text", "text": "What is this?"}]}]


def test_response_format_json_schema(mock):
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    _client(mock).attempt(_request(response_format={"json_schema": schema}))
    assert list(mock.bodies[0])[-1] == "response_format"
    assert mock.bodies[0]["response_format"] == {"type": "json_object", "schema": schema}


@pytest.mark.parametrize("kw", [dict(messages=[{"role": "user", "content": "x"}]),
                                dict(messages=[{"role": "developer", "content": "x"}], prompt=""),
                                dict(temperature="hot")])
def test_invalid_requests_are_fatal_before_sending(mock, kw):
    got = _client(mock).attempt(_request(**kw))
    assert got.kind == "fatal" and not mock.posts


def test_non_ascii_is_escaped_as_json_dumps_does(mock):
    _client(mock).attempt(_request(prompt='Café ☕ "q"'))
    assert b'"content": "Caf\\u00e9 \\u2615 \\"q\\""' in mock.posts[0][3]


def test_base_url_resolution(monkeypatch):
    monkeypatch.delenv("TOGETHER_BASE_URL", raising=False)
    assert sdk_base_url(None) == "https://api.together.xyz/v1/"
    assert sdk_base_url("http://127.0.0.1:9/v1") == "http://127.0.0.1:9/v1/"
    monkeypatch.setenv("TOGETHER_BASE_URL", "http://127.0.0.1:7/v1/")
    assert sdk_base_url(None) == "http://127.0.0.1:7/v1/"
    assert TogetherChatClient(KEY).endpoint == "http://127.0.0.1:7"
    assert TogetherChatClient(KEY, base_url="https://proxy.example:8443/v1").endpoint == "https://proxy.example:8443"


# ---------------------------------------------------------------------------------------------
# Reply parsing
# ---------------------------------------------------------------------------------------------
def test_result_shape_and_usage(mock):
    got = _client(mock).attempt(_request())
    assert got.kind == "ok" and got.usage == {"prompt_tokens": 12, "completion_tokens": 3}
    r = got.result
    assert list(r) == ["success", "embedding", "completions", "cached", "request_time", "request_datetime"]
    assert r["success"] is True and r["cached"] is False and r["embedding"] == []
    assert isinstance(r["request_datetime"], int) and r["request_time"] >= 0
    # no finish_reason (HELM never sets one for this class), no tokens without logprobs
    assert r["completions"] == [{"text": "Hello", "logprob": 0.0, "tokens": []}]


def test_logprobs_become_tokens(mock):
    mock.answer((200, _chat({**_msg("Paris is"), "logprobs": {
        "tokens": ["Paris", " is", None], "token_logprobs": [-0.5, None, -9.0], "token_ids": [1, 2, 3]}}), {}))
    c = _client(mock).attempt(_request()).result["completions"][0]
    assert c["tokens"] == [{"text": "Paris", "logprob": -0.5}, {"text": " is", "logprob": 0.0}]
    assert c["logprob"] == -0.5 and c["text"] == "Paris is"


def test_more_tokens_than_logprobs(mock):
    mock.answer((200, _chat({**_msg("ab"), "logprobs": {"tokens": ["a", "b"], "token_logprobs": [-1]}}), {}))
    c = _client(mock).attempt(_request()).result["completions"][0]
    assert c["tokens"] == [{"text": "a", "logprob": -1.0}, {"text": "b", "logprob": 0.0}]
    assert isinstance(c["tokens"][0]["logprob"], float)


def test_no_truncation_at_stop_sequences_nor_max_tokens(mock):
    mock.answer((200, _chat(_msg("A\nB C D E F G")), {}))
    got = _client(mock).attempt(_request(stop_sequences=["\n"], max_tokens=1))
    assert got.result["completions"][0]["text"] == "A\nB C D E F G"
    assert got.untruncated == ["A\nB C D E F G"]


def test_several_choices(mock):
    mock.answer((200, _chat(_msg("one"), _msg("two")), {}))
    got = _client(mock).attempt(_request(num_completions=2))
    assert [c["text"] for c in got.result["completions"]] == ["one", "two"]


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_reasoning_fields_become_thinking(mock, key):
    mock.answer((200, _chat(_msg("42", **{key: "Let me think"})), {}))
    c = _client(mock).attempt(_request()).result["completions"][0]
    assert c == {"text": "42", "logprob": 0.0, "tokens": [], "thinking": {"text": "Let me think"}}


def test_parse_thinking_by_model_name(mock):
    mock.answer((200, _chat(_msg("<think>\nhmm\n</think>\n\nParis")), {}))
    client = _client(mock, together_model=R1, parse_thinking=True, disable_logprobs=True)
    c = client.attempt(_request(model="deepseek-ai/deepseek-r1-0528")).result["completions"][0]
    assert c["text"] == "Paris" and c["thinking"] == {"text": "hmm"}


@pytest.mark.parametrize("text,model,want", [
    ("<think>\na\n</think>\nb", "deepseek-ai/deepseek-r1", ("a", "b")),
    ("<think>\nunfinished", "qwen/qwen3-235b-a22b-fp8-tput", ("unfinished", "")),
    ("no tags", "qwen/qwen3-next-80b-a3b-thinking", ("no tags", "")),
    ("\n<think>x</think>y", "zai-org/glm-4.5-air-fp8", ("x", "y")),
])
def test_parse_thinking(text, model, want):
    assert parse_thinking(text, model) == want


def test_parse_thinking_without_a_parser_is_fatal(mock):
    got = _client(mock, parse_thinking=True).attempt(_request())
    assert got.kind == "server_error" and "No thinking parser" in got.message


def test_output_processor(mock):
    mock.answer((200, _chat(_msg("<think>x</think>\n\nAnswer")), {}))
    client = _client(mock, together_model=R1,
                     output_processor="helm.benchmark.metrics.output_processors.remove_deepseek_r1_thinking")
    assert client.attempt(_request()).result["completions"][0]["text"] == "Answer"


@pytest.mark.parametrize("body", [
    {"choices": None}, [], {"choices": [{"message": {"role": "user", "content": "x"}}]},
    {"choices": [{**_msg("x"), "finish_reason": "content_filter"}]},
    {"choices": [{**_msg("x"), "logprobs": {"tokens": [1]}}]}, b"not json",
])
def test_malformed_replies_are_server_errors(mock, body):
    mock.answer((200, body, {}))
    assert _client(mock).attempt(_request()).kind == "server_error"


# ---------------------------------------------------------------------------------------------
# Errors, rate limits
# ---------------------------------------------------------------------------------------------
def _error(message, etype="invalid_request_error"):
    return {"error": {"message": message, "type": etype, "param": None, "code": None}}


def test_429_with_togethers_rate_limit_headers(mock):
    mock.answer((429, _error("rate limit exceeded", "rate_limit"),
                 {"x-ratelimit-limit": "600", "x-ratelimit-remaining": "0", "x-ratelimit-reset": "2",
                  "x-tokenlimit-remaining": "120", "retry-after": "3"}))
    got = _client(mock).attempt(_request())
    assert got.kind == "rate_limited" and got.status == 429 and got.retry_after_s == 3.0
    assert got.headers["x-ratelimit-remaining-requests"] == "0"
    assert got.headers["x-ratelimit-reset-requests"] == "2"
    assert got.headers["x-ratelimit-remaining-tokens"] == "120"
    assert got.message.startswith("Error code: 429 - ") and "rate limit exceeded" in got.message


def test_ok_replies_carry_the_rate_limit_headers(mock):
    mock.answer((200, _chat(_msg("x")), {"x-ratelimit-remaining": "599", "x-ratelimit-reset": "1"}))
    got = _client(mock).attempt(_request())
    assert got.headers["x-ratelimit-remaining-requests"] == "599"


@pytest.mark.parametrize("status,kind", [(401, "fatal_endpoint"), (403, "fatal_endpoint"), (404, "fatal_endpoint"),
                                         (400, "fatal"), (422, "fatal"), (500, "server_error"),
                                         (503, "server_error"), (408, "server_error")])
def test_status_classification(mock, status, kind):
    mock.answer((status, _error(f"bad {status} for {KEY}"), {}))
    got = _client(mock).attempt(_request())
    assert got.kind == kind and got.status == status
    assert KEY not in got.message


def test_models_list_errors_are_classified_and_not_remembered(mock):
    mock.models_reply = (401, _error("Invalid API key provided"))
    got = _client(mock).attempt(_request())
    assert got.kind == "fatal_endpoint" and "Invalid API key" in got.message and not mock.posts
    mock.models_reply = None
    assert _client(mock).attempt(_request()).kind == "ok"


def test_models_list_without_config_fails(mock):
    mock.models = [{"id": LLAMA, "object": "model", "pricing": {}}]
    got = _client(mock).attempt(_request())
    assert got.kind == "server_error" and not mock.posts


def test_connection_error():
    _StopTokens.forget()
    client = TogetherChatClient(KEY, together_model=LLAMA, base_url="http://127.0.0.1:9/v1")
    got = client.attempt(_request())
    assert got.kind == "connection" and KEY not in got.message


# ---------------------------------------------------------------------------------------------
# Completion client
# ---------------------------------------------------------------------------------------------
def test_completion_client_wire_and_result(mock):
    model = "togethercomputer/RedPajama-INCITE-7B-Base"
    mock.answer((200, {"id": "x", "object": "text.completion", "created": 1, "model": model, "prompt": [],
                       "choices": [{"index": 0, "text": " Paris", "finish_reason": "length", "seed": 1,
                                    "logprobs": {"tokens": [" Paris"], "token_logprobs": [-0.25]}}],
                       "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}, {}))
    client = TogetherCompletionClient(KEY, together_model=model, base_url=mock.base_url)
    got = client.attempt(_request(stop_sequences=["\n"]))
    _, path, _, raw = mock.posts[0]
    assert path == "/v1/completions"
    assert raw == json.dumps({"prompt": "The capital of France is", "model": model, "max_tokens": 5,
                              "stop": ["\n", "<human>"], "temperature": 0.0, "top_p": 1.0, "top_k": 1,
                              "stream": False, "logprobs": 1, "echo": False, "n": 1}).encode()
    assert got.result["completions"] == [{"text": " Paris", "logprob": -0.25,
                                          "tokens": [{"text": " Paris", "logprob": -0.25}]}]


def test_completion_client_empty_text_is_an_error(mock):
    mock.answer((200, {"choices": [{"index": 0, "text": "", "finish_reason": "eos"}]}, {}))
    client = TogetherCompletionClient(KEY, together_model="togethercomputer/RedPajama-INCITE-7B-Base",
                                      base_url=mock.base_url)
    assert client.attempt(_request()).kind == "server_error"


# ---------------------------------------------------------------------------------------------
# Factory, credentials, secrets
# ---------------------------------------------------------------------------------------------
def _deployment(name="together/llama-3.3-70b-instruct-turbo", class_name=CHAT_CLASS_NAME, **args):
    return Deployment.model_validate({"name": name, "model_name": "meta/llama-3.3-70b-instruct-turbo",
                                      "client_spec": {"class_name": class_name, "args": args}})


@pytest.fixture
def no_env(monkeypatch):
    for name in ("TOGETHER_API_KEY", "MEDHELM_API_KEY_TOGETHER", "TOGETHER_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_factories_are_registered():
    assert CHAT_CLASS_NAME in factories() and COMPLETION_CLASS_NAME in factories()
    from medhelm_core.clients.openai_compatible import OPENAI_COMPATIBLE_CLIENTS
    assert CHAT_CLASS_NAME not in OPENAI_COMPATIBLE_CLIENTS


def test_factory_credentials_env_and_repr(no_env):
    creds = parse_credentials(f'togetherApiKey: "{KEY}"', "prod_env/credentials.conf")
    client = client_for_deployment(_deployment(together_model=LLAMA, disable_logprobs=True), creds)
    assert isinstance(client, TogetherChatClient) and client.disable_logprobs
    assert client.endpoint == "https://api.together.xyz" and client.together_model == LLAMA
    assert KEY not in repr(client) and KEY not in client.redact(f"oops {KEY}")
    no_env.setenv("TOGETHER_API_KEY", "from-env-key-123456")
    env_client = client_for_deployment(_deployment(), parse_credentials("", "prod_env/credentials.conf"))
    assert env_client._secret == "from-env-key-123456"


def test_factory_base_url_from_credentials(no_env, mock):
    creds = parse_credentials(f'togetherApiKey: "{KEY}"\ntogetherBaseUrl: "{mock.base_url}"', "c.conf")
    client = client_for_deployment(_deployment(together_model=LLAMA), creds)
    assert client.endpoint == mock.base_url.rsplit("/v1", 1)[0]
    assert client.attempt(_request()).kind == "ok"


def test_factory_missing_key_names_the_settings(no_env):
    with pytest.raises(MedhelmError) as e:
        client_for_deployment(_deployment(), parse_credentials("", "prod_env/credentials.conf"))
    assert "togetherApiKey" in str(e.value) and "$TOGETHER_API_KEY" in str(e.value) and "\n" not in str(e.value)


def test_factory_rejects_unknown_args_and_processors(no_env):
    creds = parse_credentials(f'togetherApiKey: "{KEY}"', "c.conf")
    with pytest.raises(MedhelmError, match="no argument 'openai_model_name'"):
        client_for_deployment(_deployment(openai_model_name="x"), creds)
    with pytest.raises(MedhelmError, match="unknown output_processor"):
        client_for_deployment(_deployment(output_processor="no.such.processor"), creds)
    client = client_for_deployment(_deployment(class_name=COMPLETION_CLASS_NAME, together_model="x"), creds)
    assert isinstance(client, TogetherCompletionClient)


def test_no_sdk_needed(no_env, monkeypatch):
    monkeypatch.setitem(sys.modules, "together", None)
    creds = parse_credentials(f'togetherApiKey: "{KEY}"', "c.conf")
    assert isinstance(client_for_deployment(_deployment(), creds), TogetherChatClient)


def test_builtin_deployments_build(no_env):
    from medhelm_core.helm_config.deployments import load_model_registry

    creds = parse_credentials(f'togetherApiKey: "{KEY}"', "c.conf")
    registry = load_model_registry(None)
    names = [n for n, d in registry.deployments.items() if d.client_spec.class_name == CHAT_CLASS_NAME]
    assert len(names) == 48
    for name in names:
        client = client_for_deployment(registry.get_deployment(name), creds)
        assert isinstance(client, TogetherChatClient) and client.endpoint == "https://api.together.xyz"


# ---------------------------------------------------------------------------------------------
# HELM's own classes (from the wheel, with the real together SDK) against the same mock
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def helm_together(monkeypatch, mock):
    wheels = sorted((ROOT / ".cache" / "reference").glob("crfm_helm-0.5.16-*.whl"))
    if not wheels:
        pytest.skip("HELM's wheel is not in .cache/reference")
    monkeypatch.setenv("TOGETHER_NO_BANNER", "1")
    together = pytest.importorskip("together", reason="Together's SDK (together==1.6.0) is not installed")
    if getattr(together, "version", None) != TOGETHER_SDK_VERSION:
        pytest.skip(f"the wire is together {TOGETHER_SDK_VERSION}'s; installed: {together.version}")
    monkeypatch.syspath_prepend(str(wheels[0]))
    for name in [m for m in sys.modules if m == "helm.clients.together_client"]:
        monkeypatch.delitem(sys.modules, name)
    try:
        together_client = importlib.import_module("helm.clients.together_client")
        from helm.common.cache import BlackHoleCacheConfig
        from helm.common.request import Request
    except Exception as e:  # HELM's dependencies not installed
        pytest.skip(f"HELM's together_client cannot be imported: {e}")
    # HELM passes the SDK no base URL: the SDK reads $TOGETHER_BASE_URL.
    monkeypatch.setenv("TOGETHER_BASE_URL", mock.base_url)
    monkeypatch.setattr(together_client, "_MODEL_TO_DEFAULT_STOP_TOKENS", None)
    return together_client, BlackHoleCacheConfig, Request


def _without_nones(value):
    if isinstance(value, dict):
        return {k: _without_nones(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nones(v) for v in value]
    return value


def _helm_request(Request, request):
    fields = {f.name for f in dataclasses.fields(Request)}
    return Request(**{k: v for k, v in request.items() if k in fields})


CHAT_CASES = [
    (dict(), {}, [_msg("Paris")]),
    (dict(stop_sequences=["\n"], num_completions=2, temperature=0.7, top_p=0.9, top_k_per_token=5),
     {}, [{**_msg("A\nB"), "logprobs": {"tokens": ["A", "\n", "B"], "token_logprobs": [-1.0, -2.0, None]}},
          {**_msg("C"), "logprobs": {"tokens": ["C", None], "token_logprobs": [-0.5]}}]),
    (dict(echo_prompt=True, max_tokens=1, prompt="", messages=[{"role": "system", "content": "Be brief."},
                                                             {"role": "user", "content": "Café ☕?"}]),
     {}, [_msg("Oui", reasoning="because")]),
    (dict(), dict(disable_logprobs=True), [_msg("x", reasoning_content="r", reasoning="s")]),
    (dict(model="deepseek-ai/deepseek-r1-0528"), dict(together_model=R1, parse_thinking=True, disable_logprobs=True),
     [_msg("<think>\nhmm\n</think>\n\nParis")]),
    (dict(model="qwen/qwen3-235b-a22b-fp8-tput"),
     dict(together_model="Qwen/Qwen3-235B-A22B-fp8-tput", parse_thinking=True), [_msg("<think>\nunfinished")]),
]


@pytest.mark.parametrize("kw,args,choices", CHAT_CASES)
def test_same_wire_and_result_as_helms_chat_class(helm_together, mock, kw, args, choices):
    together_client, cache_config, Request = helm_together
    request = _request(**kw)
    args = {"together_model": LLAMA, **args}
    mock.answer((200, _chat(*choices), {}))
    helm = together_client.TogetherChatClient(cache_config(), api_key=KEY, **args)
    want = _without_nones(dataclasses.asdict(helm.make_request(_helm_request(Request, request))))
    helm_requests = list(mock.requests)
    mock.requests.clear()
    got = _client(mock, **args).attempt(request)
    assert got.kind == "ok", got
    assert [(m, p) for m, p, _, _ in helm_requests] == [(m, p) for m, p, _, _ in mock.requests] == [
        ("GET", "/v1/models"), ("POST", "/v1/chat/completions")]
    for (_, _, helm_headers, helm_raw), (_, _, headers, raw) in zip(helm_requests, mock.requests):
        assert raw == helm_raw
        sdk_names = ("authorization", "user-agent", "x-together-client-user-agent", "content-type")
        assert [headers.get(h) for h in sdk_names] == [helm_headers.get(h) for h in sdk_names]
        assert set(headers) == set(helm_headers)  # the transports add the same names (Host, Accept...)
    for key in ("request_time", "request_datetime"):
        want.pop(key)
        got.result.pop(key)
    assert got.result == want


def test_same_failure_as_helms_chat_class_for_an_unknown_model(helm_together, mock):
    together_client, cache_config, Request = helm_together
    helm = together_client.TogetherChatClient(cache_config(), api_key=KEY, together_model="nobody/unknown")
    with pytest.raises(ValueError, match="Unknown together_model nobody/unknown"):
        helm.make_request(_helm_request(Request, _request()))
    assert "Unknown together_model nobody/unknown" in _client(mock, together_model="nobody/unknown").attempt(
        _request()).message


def test_same_wire_and_result_as_helms_completion_class(helm_together, mock):
    together_client, cache_config, Request = helm_together
    model = "togethercomputer/RedPajama-INCITE-7B-Base"
    mock.answer((200, {"id": "x", "object": "text.completion", "created": 1, "model": model, "prompt": [],
                       "choices": [{"index": 0, "text": " Paris\nX", "finish_reason": "length", "seed": 1,
                                    "logprobs": {"tokens": [" Paris", "\n", "X"],
                                                 "token_logprobs": [-0.25, None, -1.5]}}],
                       "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}, {}))
    request = _request(stop_sequences=["\n"], top_k_per_token=2)
    helm = together_client.TogetherCompletionClient(cache_config(), api_key=KEY, together_model=model)
    want = _without_nones(dataclasses.asdict(helm.make_request(_helm_request(Request, request))))
    helm_raw = mock.posts[0][3]
    mock.requests.clear()
    got = TogetherCompletionClient(KEY, together_model=model, base_url=mock.base_url).attempt(request)
    assert mock.posts[0][3] == helm_raw
    for key in ("request_time", "request_datetime"):
        want.pop(key)
        got.result.pop(key)
    assert got.result == want


def test_same_multimodal_wire_as_helms_chat_class(helm_together, mock, tmp_path):
    PIL = pytest.importorskip("PIL.Image")
    together_client, cache_config, Request = helm_together
    from helm.common.media_object import MediaObject, MultimediaObject

    image = tmp_path / "x.png"
    PIL.new("RGBA", (4, 3), (200, 10, 10, 128)).save(image)
    media = [{"content_type": "image/png", "location": str(image)},
             {"content_type": "image/jpeg", "location": "https://example.org/a.jpg"},
             {"content_type": "text/plain", "text": "Describe."}]
    request = _request(prompt="", multimodal_prompt={"media_objects": media})
    helm_request = _helm_request(Request, {**request, "multimodal_prompt": MultimediaObject(
        media_objects=[MediaObject(**m) for m in media])})
    helm = together_client.TogetherChatClient(cache_config(), api_key=KEY, together_model=LLAMA)
    assert helm.make_request(helm_request).success
    helm_raw = mock.posts[0][3]
    mock.requests.clear()
    assert _client(mock).attempt(request).kind == "ok"
    assert mock.posts[0][3] == helm_raw and b"data:image/jpeg;base64," in helm_raw


@pytest.mark.parametrize("status,kind", [(400, "fatal"), (401, "fatal_endpoint"), (422, "fatal")])
def test_same_error_text_as_helms_chat_class(helm_together, mock, status, kind):
    together_client, cache_config, Request = helm_together
    mock.answer((status, {"error": {"message": "Input validation error", "type": "invalid_request_error",
                                    "param": None, "code": None, "id": "abc"}}, {}))
    helm = together_client.TogetherChatClient(cache_config(), api_key=KEY, together_model=LLAMA)
    failed = helm.make_request(_helm_request(Request, _request()))
    assert not failed.success and failed.error_flags is None  # HELM retries it, then the run fails
    got = _client(mock).attempt(_request())
    assert got.kind == kind and got.message == failed.error
