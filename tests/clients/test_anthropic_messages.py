"""HELM's AnthropicMessagesClient (medhelm_core/clients/anthropic_messages.py): the wire body per HELM quirk,
the reply parsing, the error classification with Anthropic's rate-limit headers, credentials and secrets.

Most tests answer from an in-memory httpx transport (nothing leaves the process); the oracle test replays
HELM's own Anthropic requests against the shared loopback mock (shared/tools/mock_vendor_server.py).
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

anthropic = pytest.importorskip("anthropic")

from medhelm_core.clients import client_for_deployment, factories  # noqa: E402
from medhelm_core.clients.anthropic_messages import (CLASS_NAME, AnthropicMessagesClient,  # noqa: E402
                                                     translate_rate_limit_headers)
from medhelm_core.helm_config.deployments import Deployment, parse_credentials  # noqa: E402
from medhelm_core.errors import MedhelmError  # noqa: E402
from tests.oracle import SHARED, load  # noqa: E402

KEY = "sk-ant-api03-secretvalue-0123456789"
VENDOR = SHARED / "oracle" / "vendor-clients"
VENDOR_MOCK = SHARED / "tools" / "mock_vendor_server.py"


def _request(**kw):
    req = {"model": "anthropic/claude-3-7-sonnet-20250219",
           "model_deployment": "anthropic/claude-3-7-sonnet-20250219", "embedding": False, "prompt": "Say hi",
           "temperature": 0.0, "num_completions": 1, "top_k_per_token": 1, "max_tokens": 20, "stop_sequences": [],
           "echo_prompt": False, "top_p": 1, "presence_penalty": 0, "frequency_penalty": 0}
    req.update(kw)
    return req


def _message(content, model="claude-3-7-sonnet-20250219", usage=(3, 1)):
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]}}


class Recorder:
    """An in-memory Anthropic endpoint: records each request, answers with `reply(request)`."""

    def __init__(self, reply=None):
        self.requests: list[httpx.Request] = []
        self.reply = reply or (lambda req: httpx.Response(200, json=_message([{"type": "text", "text": "Hi"}])))

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.reply(request)

    @property
    def bodies(self) -> list[dict]:
        return [json.loads(r.content) for r in self.requests]


def _client(recorder: Recorder, **kw) -> AnthropicMessagesClient:
    http = httpx.Client(transport=httpx.MockTransport(recorder))
    return AnthropicMessagesClient(anthropic, KEY, base_url="http://127.0.0.1:9", http_client=http, **kw)


# ---------------------------------------------------------------------------------------------
# Wire
# ---------------------------------------------------------------------------------------------
def test_body_headers_and_result_as_helm():
    rec = Recorder()
    got = _client(rec).attempt(_request())
    req = rec.requests[0]
    assert req.method == "POST" and req.url.path == "/v1/messages" and not req.url.query
    assert req.headers["x-api-key"] == KEY and req.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in req.headers and "x-stainless-raw-response" not in req.headers
    assert req.headers["x-stainless-retry-count"] == "0" and req.headers["x-stainless-timeout"] == "600"
    # HELM's keys (stop_sequences even when empty; top_p an int as the request has it)
    assert rec.bodies[0] == {"max_tokens": 20, "messages": [{"role": "user", "content": "Say hi"}],
                             "model": "claude-3-7-sonnet-20250219", "stop_sequences": [], "temperature": 0.0,
                             "top_k": 1, "top_p": 1}
    assert b'"top_p":1' in req.content and b'"temperature":0.0' in req.content
    assert got.kind == "ok" and got.usage == {"prompt_tokens": 3, "completion_tokens": 1}
    result = dict(got.result)
    assert isinstance(result.pop("request_time"), float) and isinstance(result.pop("request_datetime"), int)
    assert list(got.result) == ["success", "embedding", "completions", "cached", "request_time", "request_datetime"]
    assert result == {"success": True, "embedding": [], "completions": [{"text": "Hi", "logprob": 0.0, "tokens": []}],
                      "cached": False}
    assert got.untruncated is None


def test_model_name_system_message_and_stop_sequences():
    rec = Recorder()
    client = _client(rec, anthropic_model_name="claude-3-5-sonnet-20241022")
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q?"}]
    client.attempt(_request(prompt="", messages=messages, stop_sequences=["\n"], top_k_per_token=5))
    body = rec.bodies[0]
    assert body["model"] == "claude-3-5-sonnet-20241022" and body["system"] == "Be brief."
    assert body["messages"] == [{"role": "user", "content": "Q?"}]
    assert body["stop_sequences"] == ["\n"] and body["top_k"] == 5
    # no system message: no `system` key
    client.attempt(_request(prompt="", messages=[{"role": "user", "content": "Q?"}]))
    assert "system" not in rec.bodies[1]
    # prompt and messages together: HELM's validate() raises before sending
    got = client.attempt(_request(messages=[{"role": "user", "content": "Q?"}]))
    assert got.kind == "fatal" and len(rec.requests) == 2


def test_thinking_drops_top_k_and_claude_4_5_drops_top_p():
    rec = Recorder()
    _client(rec, thinking_budget_tokens=1024).attempt(_request(max_tokens=2048))
    body = rec.bodies[0]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024} and "top_k" not in body
    assert body["top_p"] == 1
    for model in ("claude-sonnet-4-5-20250929", "claude-opus-4-6", "claude-haiku-4-5-20251001"):
        _client(rec).attempt(_request(model=f"anthropic/{model}"))
        assert "top_p" not in rec.bodies[-1] and rec.bodies[-1]["top_k"] == 1, model
    _client(rec).attempt(_request(model="anthropic/claude-sonnet-4-20250514"))
    assert rec.bodies[-1]["top_p"] == 1


def test_max_tokens_over_64000_fails_before_sending():
    rec = Recorder()
    got = _client(rec).attempt(_request(max_tokens=64001))
    assert got.kind == "fatal" and "64000" in got.message and not rec.requests


def test_sdk_refuses_long_non_streamed_requests_as_under_helm():
    # The SDK's own check (default 600 s timeout): max_tokens 30000 non-streamed would take > 10 min.
    rec = Recorder()
    got = _client(rec).attempt(_request(max_tokens=30000))
    assert got.kind == "fatal" and "Streaming" in got.message and not rec.requests


def test_num_completions_sends_that_many_requests():
    texts = iter(["one", "two", "three"])
    rec = Recorder(lambda r: httpx.Response(200, json=_message([{"type": "text", "text": next(texts)}],
                                                               usage=(4, 2))))
    got = _client(rec).attempt(_request(num_completions=3))
    assert len(rec.requests) == 3 and len({r.content for r in rec.requests}) == 1
    assert [c["text"] for c in got.result["completions"]] == ["one", "two", "three"]
    assert got.usage == {"prompt_tokens": 12, "completion_tokens": 6}


def _sse(events):
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def test_stream_with_thinking_joins_blocks():
    start = _message([], usage=(5, 1))
    events = [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me "}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "think."}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hello"}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": " world"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": {"output_tokens": 7}},
        {"type": "message_stop"},
    ]
    rec = Recorder(lambda r: httpx.Response(200, content=_sse(events),
                                            headers={"content-type": "text/event-stream",
                                                     "anthropic-ratelimit-requests-remaining": "7"}))
    got = _client(rec, thinking_budget_tokens=10000, stream=True).attempt(_request(max_tokens=12000))
    body = rec.bodies[0]
    assert body["stream"] is True and body["thinking"]["budget_tokens"] == 10000 and "top_k" not in body
    assert got.kind == "ok"
    assert got.result["completions"] == [{"text": "Hello world", "logprob": 0.0, "tokens": [],
                                          "thinking": {"text": "Let me think."}}]
    assert got.usage == {"prompt_tokens": 5, "completion_tokens": 7}
    assert got.headers["x-ratelimit-remaining-requests"] == "7"


# ---------------------------------------------------------------------------------------------
# Reply parsing
# ---------------------------------------------------------------------------------------------
def test_text_and_thinking_blocks_are_joined():
    content = [{"type": "thinking", "thinking": "A", "signature": "s"}, {"type": "text", "text": "x"},
               {"type": "thinking", "thinking": "B", "signature": "s"}, {"type": "text", "text": "y"}]
    got = _client(Recorder(lambda r: httpx.Response(200, json=_message(content)))).attempt(_request())
    assert got.result["completions"] == [{"text": "xy", "logprob": 0.0, "tokens": [], "thinking": {"text": "AB"}}]


def test_stop_sequences_are_not_cut_by_helm():
    rec = Recorder(lambda r: httpx.Response(200, json=_message([{"type": "text", "text": "A\nB"}])))
    got = _client(rec).attempt(_request(stop_sequences=["\n"], max_tokens=1))
    assert got.result["completions"][0]["text"] == "A\nB" and "finish_reason" not in got.result["completions"][0]


@pytest.mark.parametrize("content", [[], [{"type": "thinking", "thinking": "hm", "signature": "s"}]])
def test_empty_content_is_helms_non_fatal_failure(content):
    got = _client(Recorder(lambda r: httpx.Response(200, json=_message(content)))).attempt(_request())
    assert got.kind == "content_filter"
    assert got.result == {"success": False, "embedding": [], "completions": [{"text": "", "logprob": 0, "tokens": []}],
                          "cached": False, "error": "Anthropic response has empty content",
                          "error_flags": {"is_retriable": False, "is_fatal": False}}


def test_content_moderation_400_is_a_failed_result_with_times():
    body = {"type": "error", "error": {"type": "invalid_request_error",
                                       "message": "Output blocked by content filtering policy"}}
    got = _client(Recorder(lambda r: httpx.Response(400, json=body))).attempt(_request())
    assert got.kind == "content_filter" and got.status == 400
    result = dict(got.result)
    assert isinstance(result.pop("request_time"), float) and isinstance(result.pop("request_datetime"), int)
    assert list(got.result) == ["success", "embedding", "completions", "cached", "request_time", "request_datetime",
                                "error", "error_flags"]
    assert result == {"success": False, "embedding": [], "completions": [{"text": "", "logprob": 0, "tokens": []}],
                      "cached": False, "error": "Output blocked by content filtering policy",
                      "error_flags": {"is_retriable": False, "is_fatal": False}}


# ---------------------------------------------------------------------------------------------
# Errors and rate limits
# ---------------------------------------------------------------------------------------------
def _error(status, headers=None, message="boom"):
    body = {"type": "error", "error": {"type": "x", "message": message}}
    return Recorder(lambda r: httpx.Response(status, json=body, headers=headers or {}))


def test_429_translates_anthropic_rate_limit_headers():
    reset = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=30)).isoformat().replace("+00:00", "Z")
    headers = {"retry-after": "12", "anthropic-ratelimit-requests-remaining": "0",
               "anthropic-ratelimit-requests-reset": reset, "anthropic-ratelimit-tokens-remaining": "150",
               "anthropic-ratelimit-tokens-reset": reset, "request-id": "req_1"}
    got = _client(_error(429, headers)).attempt(_request())
    assert got.kind == "rate_limited" and got.status == 429 and got.retry_after_s == 12.0
    assert got.headers["x-ratelimit-remaining-requests"] == "0"
    assert got.headers["x-ratelimit-remaining-tokens"] == "150"
    assert 25 < float(got.headers["x-ratelimit-reset-requests"]) <= 30
    assert got.headers["retry-after"] == "12" and "request-id" not in got.headers


def test_translate_rate_limit_headers_units():
    out = translate_rate_limit_headers({"Anthropic-RateLimit-Input-Tokens-Remaining": "9",
                                        "anthropic-ratelimit-input-tokens-reset": "2030-01-01T00:00:10Z"},
                                       now=dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc).timestamp())
    assert out["x-ratelimit-remaining-tokens"] == "9" and out["x-ratelimit-reset-tokens"] == "10.000"
    assert "x-ratelimit-remaining-requests" not in out
    assert translate_rate_limit_headers({"anthropic-ratelimit-requests-reset": "soon"}) == {
        "anthropic-ratelimit-requests-reset": "soon"}


@pytest.mark.parametrize("status,kind", [(529, "server_error"), (500, "server_error"), (503, "server_error"),
                                         (408, "server_error"), (401, "fatal_endpoint"), (403, "fatal_endpoint"),
                                         (404, "fatal_endpoint"), (400, "fatal"), (413, "fatal")])
def test_status_classification_never_shows_the_key(status, kind):
    got = _client(_error(status, message=f"bad key {KEY}")).attempt(_request())
    assert got.kind == kind and got.status == status and got.result is None
    assert KEY not in got.message and "secretvalue" not in got.message


def test_timeout_and_connection_errors():
    def slow(request):
        raise httpx.ReadTimeout("slow", request=request)

    assert _client(Recorder(slow)).attempt(_request()).kind == "timeout"
    # nothing listens on port 9 of the loopback
    client = AnthropicMessagesClient(anthropic, KEY, base_url="http://127.0.0.1:9", timeout_s=5)
    got = client.attempt(_request())
    assert got.kind == "connection" and KEY not in got.message


def test_malformed_reply_is_a_server_error():
    rec = Recorder(lambda r: httpx.Response(200, content=b"<html>oops</html>",
                                            headers={"content-type": "text/html"}))
    got = _client(rec).attempt(_request())
    assert got.kind == "server_error" and "oops" in got.message


# ---------------------------------------------------------------------------------------------
# Factory: credentials, base URL, extra, secrets
# ---------------------------------------------------------------------------------------------
def _deployment(**args):
    return Deployment.model_validate({"name": "anthropic/claude-3-7-sonnet-20250219",
                                      "model_name": "anthropic/claude-3-7-sonnet-20250219",
                                      "client_spec": {"class_name": CLASS_NAME, "args": args}})


@pytest.fixture
def no_env(monkeypatch):
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "MEDHELM_API_KEY_ANTHROPIC"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_factory_is_discovered_and_reads_credentials(no_env):
    assert CLASS_NAME in factories()
    creds = parse_credentials(f'anthropicApiKey: "{KEY}"', "prod_env/credentials.conf")
    client = client_for_deployment(_deployment(anthropic_model_name="claude-x", thinking_budget_tokens=10000,
                                               stream=True), creds, timeout_s=30)
    assert isinstance(client, AnthropicMessagesClient)
    assert client.endpoint == "https://api.anthropic.com"
    assert (client.anthropic_model_name, client.thinking_budget_tokens, client.stream) == ("claude-x", 10000, True)
    assert KEY not in repr(client) and "secretvalue" not in repr(client)
    assert client.redact(f"oops {KEY}") == "oops ***"


def test_base_url_from_sdk_env_then_credentials(no_env):
    no_env.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:4321")
    creds = parse_credentials(f'anthropicApiKey: "{KEY}"', "c.conf")
    assert client_for_deployment(_deployment(), creds).endpoint == "http://127.0.0.1:4321"
    creds = parse_credentials(f'anthropicApiKey: "{KEY}"\nanthropicBaseUrl: "http://localhost:7"', "c.conf")
    assert client_for_deployment(_deployment(), creds).endpoint == "http://localhost:7"


def test_key_from_the_sdk_env_and_a_missing_key_names_where_to_put_it(no_env):
    creds = parse_credentials("", "prod_env/credentials.conf")
    with pytest.raises(MedhelmError) as e:
        client_for_deployment(_deployment(), creds)
    message = str(e.value)
    assert "anthropicApiKey" in message and "prod_env/credentials.conf" in message
    assert "$ANTHROPIC_API_KEY" in message and "\n" not in message
    no_env.setenv("ANTHROPIC_API_KEY", KEY)
    assert isinstance(client_for_deployment(_deployment(), creds), AnthropicMessagesClient)


def test_unknown_argument_is_refused(no_env):
    creds = parse_credentials(f'anthropicApiKey: "{KEY}"', "c.conf")
    with pytest.raises(MedhelmError, match="thinking_budget"):
        client_for_deployment(_deployment(thinking_budget=5), creds)


def test_missing_extra_names_it(no_env, monkeypatch):
    monkeypatch.setitem(sys.modules, "anthropic", None)
    creds = parse_credentials(f'anthropicApiKey: "{KEY}"', "c.conf")
    with pytest.raises(MedhelmError) as e:
        client_for_deployment(_deployment(), creds)
    assert "[anthropic]" in str(e.value) and "\n" not in str(e.value) and KEY not in str(e.value)


# ---------------------------------------------------------------------------------------------
# HELM's own requests (oracle) against the shared loopback mock
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def vendor_mock(tmp_path):
    if not VENDOR_MOCK.is_file():
        pytest.skip("shared/tools/mock_vendor_server.py not present")
    port_file, log = tmp_path / "port", tmp_path / "log.jsonl"
    proc = subprocess.Popen([sys.executable, str(VENDOR_MOCK), "--port", "0", "--port-file", str(port_file),
                             "--log-jsonl", str(log)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if port_file.is_file() and port_file.read_text().strip():
                break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port_file.read_text().strip()}", log
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_helms_requests_and_results_from_the_oracle(vendor_mock):
    runs = sorted((VENDOR / "benchmark_output" / "runs").glob("*/*model_deployment=anthropic_claude*"))
    if not runs:
        pytest.skip("oracle/vendor-clients not present")
    base_url, log = vendor_mock
    client = AnthropicMessagesClient(anthropic, KEY, base_url=base_url)
    for run in runs:
        for state in load(run / "scenario_state.json")["request_states"]:
            got = client.attempt(state["request"])
            assert got.kind == "ok"
            want = state["result"]
            assert list(got.result) == list(want)
            assert {k: v for k, v in got.result.items() if not k.startswith("request_")} == \
                   {k: v for k, v in want.items() if not k.startswith("request_")}
    sent = [json.loads(line) for line in log.read_text().splitlines()]
    helm = [json.loads(line) for line in (VENDOR / "mock_requests.jsonl").read_text().splitlines()]
    helm = [r for r in helm if r["wire"] == "anthropic-messages"]

    def key(r):
        return r["path"], json.dumps(r["query"], sort_keys=True), json.dumps(r["body"], sort_keys=True)

    assert sorted(map(key, sent)) == sorted(map(key, helm))
    assert {tuple(sorted(r["headers"])) for r in sent} == {tuple(sorted(r["headers"])) for r in helm}


def test_built_in_deployments_build(no_env):
    from medhelm_core.helm_config.deployments import load_model_registry

    deps = [d for d in load_model_registry(None).deployments.values() if d.client_spec.class_name == CLASS_NAME]
    assert len(deps) >= 10 and any(d.client_spec.args.get("stream") for d in deps)
    creds = parse_credentials(f'anthropicApiKey: "{KEY}"', "c.conf")
    for dep in deps:
        assert client_for_deployment(dep, creds).endpoint == "https://api.anthropic.com"


# ---------------------------------------------------------------------------------------------
# HELM's own AnthropicMessagesClient (from the wheel), side by side with ours
# ---------------------------------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def helm_anthropic(monkeypatch):
    wheels = sorted((ROOT / ".cache" / "reference").glob("crfm_helm-0.5.16-*.whl"))
    if not wheels:
        pytest.skip("HELM's wheel is not in .cache/reference")
    monkeypatch.syspath_prepend(str(wheels[0]))
    try:
        from helm.clients import anthropic_client
        from helm.common.cache import BlackHoleCacheConfig
        from helm.common.request import Request
    except Exception as e:  # HELM's dependencies (e.g. websocket-client) not installed
        pytest.skip(f"HELM's AnthropicMessagesClient cannot be imported: {e}")

    def make(base_url, request, **args):
        monkeypatch.setenv("ANTHROPIC_BASE_URL", base_url)
        client = anthropic_client.AnthropicMessagesClient(BlackHoleCacheConfig(), api_key=KEY, **args)
        fields = {f.name for f in dataclasses.fields(Request)}
        return _without_nones(dataclasses.asdict(client.make_request(
            Request(**{k: v for k, v in request.items() if k in fields}))))

    return make


def _without_nones(value):
    if isinstance(value, dict):
        return {k: _without_nones(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nones(v) for v in value]
    return value


def _comparable(result: dict) -> dict:
    out = {k: v for k, v in result.items() if not k.startswith("request_")}
    if not out["success"]:  # HELM's executor stores one empty completion for a non-fatal failure
        out["completions"] = [{"text": "", "logprob": 0, "tokens": []}]
    return out


QUIRKS = [
    ({}, dict(stop_sequences=["\n"], max_tokens=5)),
    ({}, dict(prompt="", messages=[{"role": "system", "content": "Be brief."},
                                   {"role": "user", "content": "Is it?"}], top_k_per_token=5)),
    ({"thinking_budget_tokens": 1024}, dict(max_tokens=2048)),
    ({}, dict(model="anthropic/claude-sonnet-4-5-20250929", temperature=0.3)),
    ({"anthropic_model_name": "claude-3-5-sonnet-20241022"}, dict(num_completions=2, max_tokens=3)),
]


@pytest.mark.parametrize("args,kw", QUIRKS)
def test_same_wire_and_result_as_helms_class(helm_anthropic, vendor_mock, args, kw):
    base_url, log = vendor_mock
    request = _request(**kw)
    want = helm_anthropic(base_url, request, **args)
    got = AnthropicMessagesClient(anthropic, KEY, base_url=base_url, **args).attempt(request)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    n = request["num_completions"]
    assert len(records) == 2 * n
    helm_sent, ours_sent = records[:n], records[n:]
    assert [r["body"] for r in ours_sent] == [r["body"] for r in helm_sent]
    assert [sorted(r["headers"]) for r in ours_sent] == [sorted(r["headers"]) for r in helm_sent]
    assert list(got.result) == list(want) and _comparable(got.result) == _comparable(want)


class CannedAnthropic:
    """Loopback server answering every POST with one canned (status, JSON) reply."""

    def __init__(self, status, body):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        import threading

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("status,body", [
    (200, _message([])),
    (200, _message([{"type": "thinking", "thinking": "hm", "signature": "s"}])),
    (200, _message([{"type": "thinking", "thinking": "A", "signature": "s"}, {"type": "text", "text": "x"},
                    {"type": "text", "text": "y"}])),
    (400, {"type": "error", "error": {"type": "invalid_request_error",
                                      "message": "Output blocked by content filtering policy"}}),
])
def test_same_parsing_as_helms_class(helm_anthropic, status, body):
    server = CannedAnthropic(status, body)
    try:
        want = helm_anthropic(server.url, _request())
        got = AnthropicMessagesClient(anthropic, KEY, base_url=server.url).attempt(_request())
    finally:
        server.close()
    assert list(got.result) == list(want) and _comparable(got.result) == _comparable(want)
