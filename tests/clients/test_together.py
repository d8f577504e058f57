"""HELM's legacy TogetherClient (medhelm_core/clients/together.py) against a small loopback mock of Together's
inference API (`POST /api/inference` -> `{"output": {"choices": [...]}}`): the wire body with HELM's per-model
rewrites, the reply parsing (tokens, logprobs, "▁", finish_reason, truncate_sequence), error classification,
credentials and secrets; and, side by side, HELM 0.5.16's own class from the wheel against the same mock.
"""
from __future__ import annotations

import dataclasses
import json
import sys
import threading
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from medhelm_core.clients import client_for_deployment, factories
from medhelm_core.clients.together import (CLASS_NAME, INFERENCE_URL, TogetherClient, inference_url,
                                           translate_rate_limit_headers)
from medhelm_core.helm_config.deployments import Deployment, parse_credentials
from medhelm_core.errors import MedhelmError

KEY = "tgp-secret-key-0123456789abcdef"
ROOT = Path(__file__).resolve().parents[2]


def _reply(choices, **output):
    return {"status": "finished", "output": {"choices": choices, "result_type": "language-model-inference",
                                             **output}}


class TogetherMock:
    """Loopback HTTP server: records (method, path, headers, raw body); answers the queued
    (status, json, headers) replies, repeating the last one."""

    def __init__(self):
        self.requests: list[tuple[str, str, dict, bytes]] = []
        self.replies = [(200, _reply([{"text": "Hello", "finish_reason": "eos", "index": 0}]), {})]
        mock = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                mock.requests.append(("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, raw))
                status, body, headers = mock.replies.pop(0) if len(mock.replies) > 1 else mock.replies[0]
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/inference"

    def answer(self, *replies):
        self.replies = list(replies)

    @property
    def bodies(self) -> list[dict]:
        return [json.loads(r[3]) for r in self.requests]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def mock():
    m = TogetherMock()
    yield m
    m.close()


def _request(**kw):
    req = {"model": "meta/llama-2-7b", "model_deployment": "together/llama-2-7b", "embedding": False,
           "prompt": "The capital of France is", "temperature": 0.0, "num_completions": 1, "top_k_per_token": 1,
           "max_tokens": 5, "stop_sequences": [], "echo_prompt": False, "top_p": 1, "presence_penalty": 0,
           "frequency_penalty": 0}
    req.update(kw)
    return req


def _client(mock, **kw):
    return TogetherClient(KEY, url=mock.url, **kw)


# ---------------------------------------------------------------------------------------------
# Wire
# ---------------------------------------------------------------------------------------------
def test_wire_body_bytes_and_auth(mock):
    got = _client(mock).attempt(_request())
    method, path, headers, raw = mock.requests[0]
    assert (method, path) == ("POST", "/api/inference")
    assert headers["authorization"] == f"Bearer {KEY}" and headers["content-type"] == "application/json"
    want = {"request_type": "language-model-inference", "model": "meta/llama-2-7b",
            "prompt": "The capital of France is", "temperature": 0.0, "n": 1, "max_tokens": 5, "best_of": 1,
            "stop": None, "echo": False, "top_p": 1}
    assert raw == json.dumps(want).encode()  # requests' json=: key order, ", "/": " separators, null, 0.0 vs 1
    assert got.kind == "ok"


def test_body_is_what_requests_json_sends():
    requests = pytest.importorskip("requests")
    client = TogetherClient(KEY)
    raw = client.raw_request(_request(prompt="Café ☕ \"q\"", stop_sequences=["\n", "###"]))
    prepared = requests.Request("POST", INFERENCE_URL, json=raw).prepare()
    assert json.dumps(raw).encode() == prepared.body


def test_together_model_and_stop_sequences(mock):
    _client(mock, together_model="togethercomputer/llama-2-7b").attempt(_request(stop_sequences=["\n"]))
    body = mock.bodies[0]
    assert body["model"] == "togethercomputer/llama-2-7b" and body["stop"] == ["\n"]


@pytest.mark.parametrize("model,stop,want", [
    ("stanford/alpaca-7b", [], ["</s>"]),
    ("lmsys/vicuna-7b-v1.3", ["\n"], ["\n", "</s>"]),
    ("lmsys/vicuna-13b-v1.3", [], ["</s>"]),
])
def test_eos_token_added_as_stop_sequence(mock, model, stop, want):
    mock.answer((200, _reply([{"text": "ok"}]), {}))
    req = _request(model=model, stop_sequences=stop)
    got = _client(mock).attempt(req)
    assert mock.bodies[0]["stop"] == want and "details" not in mock.bodies[0]
    assert req["stop_sequences"] == stop  # the request is not changed
    assert got.kind == "ok"


@pytest.mark.parametrize("model", ["meta/llama-65b", "meta/llama-2-70b"])
def test_details_true_for_llama_65b_and_2_70b(mock, model):
    _client(mock).attempt(_request(model=model))
    assert mock.bodies[0]["details"] is True and list(mock.bodies[0])[-1] == "details"


# ---------------------------------------------------------------------------------------------
# Reply parsing
# ---------------------------------------------------------------------------------------------
def test_without_logprobs_the_text_is_one_token(mock):
    mock.answer((200, _reply([{"text": "▁Paris▁is", "finish_reason": "length"}], raw_compute_time=0.25,
                             usage={"prompt_tokens": 6, "completion_tokens": 3, "total_tokens": 9}), {}))
    got = _client(mock).attempt(_request())
    assert got.result == {"success": True, "embedding": [], "cached": False, "request_time": 0.25,
                          "completions": [{"text": " Paris is", "logprob": 0, "tokens": [{"text": " Paris is",
                                                                                          "logprob": 0}],
                                           "finish_reason": {"reason": "length"}}]}
    assert list(got.result) == ["success", "embedding", "completions", "cached", "request_time"]
    assert got.usage == {"prompt_tokens": 6, "completion_tokens": 3}


def test_logprobs_become_tokens_and_missing_ones_count_zero(mock):
    choice = {"text": "▁Paris.", "logprobs": {"tokens": ["▁Paris", ".", "▁extra"],
                                              "token_logprobs": [-0.5, None]}}
    mock.answer((200, _reply([choice, {"text": "x", "finish_reason": ""}]), {}))
    got = _client(mock).attempt(_request(num_completions=2))
    first, second = got.result["completions"]
    assert first == {"text": " Paris.", "logprob": -0.5, "tokens": [{"text": " Paris", "logprob": -0.5},
                                                                     {"text": ".", "logprob": 0}]}
    assert "finish_reason" not in second  # an empty finish_reason is none
    assert isinstance(got.result["request_time"], float) and "request_datetime" not in got.result
    assert mock.bodies[0]["n"] == 2


def test_truncate_sequence_at_stop_and_max_tokens(mock):
    choice = {"text": "A\nB", "finish_reason": "stop",
              "logprobs": {"tokens": ["A", "\n", "B"], "token_logprobs": [-1.0, -2.0, -3.0]}}
    mock.answer((200, _reply([choice]), {}))
    got = _client(mock).attempt(_request(stop_sequences=["\n"]))
    # HELM's truncate_sequence rebuilds the completion without finish_reason
    assert got.result["completions"] == [{"text": "A", "logprob": -1.0, "tokens": [{"text": "A", "logprob": -1.0}]}]
    assert got.untruncated == ["A\nB"]
    got = _client(mock).attempt(_request(max_tokens=2))
    assert got.result["completions"] == [{"text": "A\n", "logprob": -3.0, "tokens": [
        {"text": "A", "logprob": -1.0}, {"text": "\n", "logprob": -2.0}]}]
    assert got.untruncated is None


def test_echo_prompt_is_not_truncated(mock):
    mock.answer((200, _reply([{"text": "P A\nB"}]), {}))
    got = _client(mock).attempt(_request(echo_prompt=True, stop_sequences=["\n"], max_tokens=0))
    assert mock.bodies[0]["echo"] is True and got.result["completions"][0]["text"] == "P A\nB"


# ---------------------------------------------------------------------------------------------
# Errors and rate limits
# ---------------------------------------------------------------------------------------------
def test_429_with_retry_after_and_together_limits(mock):
    mock.answer((429, {"error": "too many requests"}, {"Retry-After": "3", "x-ratelimit-remaining": "0",
                                                        "x-ratelimit-reset": "2", "x-tokenlimit-remaining": "10"}))
    got = _client(mock).attempt(_request())
    assert got.kind == "rate_limited" and got.retry_after_s == 3.0 and got.status == 429
    assert got.headers["x-ratelimit-remaining-requests"] == "0"
    assert got.headers["x-ratelimit-reset-requests"] == "2"
    assert got.headers["x-ratelimit-remaining-tokens"] == "10"


def test_translate_keeps_openai_style_names():
    out = translate_rate_limit_headers({"X-RateLimit-Remaining-Requests": "5", "x-ratelimit-remaining": "9"})
    assert out["x-ratelimit-remaining-requests"] == "5"


@pytest.mark.parametrize("status,kind", [(500, "server_error"), (503, "server_error"), (401, "fatal_endpoint"),
                                         (403, "fatal_endpoint"), (404, "fatal_endpoint"), (400, "fatal"),
                                         (422, "fatal")])
def test_status_classification_never_shows_the_key(mock, status, kind):
    mock.answer((status, {"error": f"bad key {KEY}"}, {}))
    got = _client(mock).attempt(_request())
    assert got.kind == kind and got.status == status and got.result is None
    assert KEY not in got.message and str(status) in got.message


@pytest.mark.parametrize("reply", [
    {"status": "failed"},                                  # no output
    {"output": {"error": "model is overloaded"}},          # output.error
    b"not json",
    {"output": {"choices": [{"text": "x", "logprobs": None}]}},  # HELM's parser raises
])
def test_failed_replies_are_server_errors(mock, reply):
    mock.answer((200, reply, {}))
    got = _client(mock).attempt(_request())
    assert got.kind == "server_error" and got.result is None


def test_connection_refused_and_timeout():
    got = TogetherClient(KEY, url="http://127.0.0.1:9/api/inference", timeout_s=5).attempt(_request())
    assert got.kind == "connection" and KEY not in got.message


def test_timeout(mock):
    import httpx

    def slow(request):
        raise httpx.ReadTimeout("slow", request=request)

    client = TogetherClient(KEY, http_client=httpx.Client(transport=httpx.MockTransport(slow)))
    assert client.attempt(_request()).kind == "timeout"


# ---------------------------------------------------------------------------------------------
# Factory
# ---------------------------------------------------------------------------------------------
def _deployment(**args):
    return Deployment.model_validate({"name": "together/llama-2-7b", "model_name": "meta/llama-2-7b",
                                      "client_spec": {"class_name": CLASS_NAME, "args": args}})


@pytest.fixture
def no_env(monkeypatch):
    for name in ("TOGETHER_API_KEY", "MEDHELM_API_KEY_TOGETHER"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_factory_credentials_and_repr(no_env):
    assert CLASS_NAME in factories()
    creds = parse_credentials(f'togetherApiKey: "{KEY}"', "prod_env/credentials.conf")
    client = client_for_deployment(_deployment(together_model="togethercomputer/llama-2-7b"), creds)
    assert isinstance(client, TogetherClient)
    assert client.endpoint == "https://api.together.xyz" and client.url == INFERENCE_URL
    assert client.together_model == "togethercomputer/llama-2-7b"
    assert KEY not in repr(client) and client.redact(f"x {KEY}") == "x ***"


def test_missing_key_names_where_to_put_it_and_env_fallback(no_env):
    creds = parse_credentials("", "prod_env/credentials.conf")
    with pytest.raises(MedhelmError) as e:
        client_for_deployment(_deployment(), creds)
    message = str(e.value)
    assert "togetherApiKey" in message and "prod_env/credentials.conf" in message
    assert "$TOGETHER_API_KEY" in message and "\n" not in message
    no_env.setenv("TOGETHER_API_KEY", KEY)
    assert isinstance(client_for_deployment(_deployment(), creds), TogetherClient)


def test_base_url_from_credentials(no_env, mock):
    creds = parse_credentials(f'togetherApiKey: "{KEY}"\ntogetherBaseUrl: "{mock.url[:-len("/api/inference")]}/v1"',
                              "c.conf")
    client = client_for_deployment(_deployment(), creds)
    assert client.url == mock.url
    assert client.attempt(_request()).kind == "ok" and len(mock.requests) == 1
    assert inference_url("https://proxy.example/together/") == "https://proxy.example/together/api/inference"


def test_unknown_argument_is_refused(no_env):
    creds = parse_credentials(f'togetherApiKey: "{KEY}"', "c.conf")
    with pytest.raises(MedhelmError, match="disable_logprobs"):
        client_for_deployment(_deployment(disable_logprobs=True), creds)


def test_built_in_deployments_build(no_env):
    from medhelm_core.helm_config.deployments import load_model_registry

    registry = load_model_registry(None)
    deps = [d for d in registry.deployments.values() if d.client_spec.class_name == CLASS_NAME]
    assert len(deps) >= 50
    creds = parse_credentials(f'togetherApiKey: "{KEY}"', "c.conf")
    for dep in deps[:3]:
        assert client_for_deployment(dep, creds).endpoint == "https://api.together.xyz"


# ---------------------------------------------------------------------------------------------
# HELM's own TogetherClient (from the wheel) against the same mock
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def helm_together(monkeypatch):
    wheels = sorted((ROOT / ".cache" / "reference").glob("crfm_helm-0.5.16-*.whl"))
    if not wheels:
        pytest.skip("HELM's wheel is not in .cache/reference")
    monkeypatch.syspath_prepend(str(wheels[0]))
    # HELM's module imports the together SDK only for its other classes.
    together = types.ModuleType("together")
    together.Together = object
    together_types = types.ModuleType("together.types")
    together_types.ChatCompletionResponse = together_types.CompletionResponse = object
    monkeypatch.setitem(sys.modules, "together", together)
    monkeypatch.setitem(sys.modules, "together.types", together_types)
    try:
        from helm.clients import together_client
        from helm.common.cache import BlackHoleCacheConfig
        from helm.common.request import Request
    except Exception as e:  # HELM's dependencies not installed
        pytest.skip(f"HELM's TogetherClient cannot be imported: {e}")
    return together_client, BlackHoleCacheConfig, Request


def _without_nones(value):
    if isinstance(value, dict):
        return {k: _without_nones(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nones(v) for v in value]
    return value


CASES = [
    (dict(), [{"text": "▁Paris", "finish_reason": "length"}], {"raw_compute_time": 0.5}),
    (dict(stop_sequences=["\n"], num_completions=2),
     [{"text": "A\nB", "logprobs": {"tokens": ["A", "\n", "B"], "token_logprobs": [-1.0, -2.0, None]}},
      {"text": "C", "finish_reason": "eos"}], {}),
    (dict(max_tokens=2, model="stanford/alpaca-7b", stop_sequences=["###"]),
     [{"text": "▁a▁b▁c",
       "logprobs": {"tokens": ["▁a", "▁b", "▁c"], "token_logprobs": [-0.1, -0.2, -0.3]}}], {}),
    (dict(model="meta/llama-2-70b", echo_prompt=True, temperature=0.7, top_p=0.9, top_k_per_token=3),
     [{"text": "Prompt and more", "finish_reason": "stop"}], {}),
]


@pytest.mark.parametrize("kw,choices,extra", CASES)
def test_same_wire_and_result_as_helms_class(helm_together, mock, monkeypatch, kw, choices, extra):
    together_client, cache_config, Request = helm_together
    monkeypatch.setattr(together_client.TogetherClient, "INFERENCE_ENDPOINT", mock.url)
    request = _request(**kw)
    mock.answer((200, _reply(choices, **extra), {}))
    helm = together_client.TogetherClient(cache_config(), together_model=None, api_key=KEY)
    fields = {f.name for f in dataclasses.fields(Request)}
    want = _without_nones(dataclasses.asdict(helm.make_request(Request(**{k: v for k, v in request.items()
                                                                          if k in fields}))))
    got = _client(mock).attempt(request)
    (_, helm_path, helm_headers, helm_raw), (_, path, headers, raw) = mock.requests
    assert (path, raw) == (helm_path, helm_raw)
    assert set(headers) == set(helm_headers) and headers["authorization"] == helm_headers["authorization"]
    if not extra.get("raw_compute_time"):
        want.pop("request_time")
        got.result.pop("request_time")
    assert got.result == want
