"""HELM's GoogleGenAIClient (medhelm_core/clients/google_genai.py) through the google-genai SDK, against
loopback servers only: the shared vendor mock (HELM's own requests and results from the vendor-clients
oracle) and a scripted stub (replies, errors, rate limits, Vertex AI mode with a fake token)."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("google.genai")

from medhelm_core.clients import client_for_deployment  # noqa: E402
from medhelm_core.clients.google_genai import CLASS_NAME, google_genai_client, retry_delay_seconds  # noqa: E402
from medhelm_core.helm_config.deployments import Deployment, parse_credentials  # noqa: E402
from medhelm_core.errors import MedhelmError  # noqa: E402

SHARED = Path(__file__).resolve().parents[3] / "shared"
VENDOR = SHARED / "oracle" / "vendor-clients"
VENDOR_MOCK = SHARED / "tools" / "mock_vendor_server.py"
KEY = "goog-test-key-0123456789"
TOKEN = "ya29.fake-access-token-0123456789"
ENV = ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL", "GOOGLE_CLOUD_PROJECT",
       "GOOGLE_CLOUD_LOCATION", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE", "MEDHELM_API_KEY_GOOGLE",
       "GOOGLE_APPLICATION_CREDENTIALS")


def _deployment(name="google/gemini-2.0-flash-001", **args) -> Deployment:
    spec = {"class_name": CLASS_NAME}
    if args:
        spec["args"] = args
    return Deployment.model_validate({"name": name, "model_name": name, "client_spec": spec})


def _creds(text=f'googleApiKey: "{KEY}"'):
    return parse_credentials(text, "prod_env/credentials.conf")


def _request(**kw) -> dict:
    req = {"model_deployment": "google/gemini-2.0-flash-001", "model": "google/gemini-2.0-flash-001",
           "embedding": False, "prompt": "Is the sky blue?", "temperature": 0.0, "num_completions": 1,
           "top_k_per_token": 1, "max_tokens": 5, "stop_sequences": [], "echo_prompt": False, "top_p": 1,
           "presence_penalty": 0, "frequency_penalty": 0}
    req.update(kw)
    return req


def _reply(*candidates, usage=None, **extra) -> dict:
    body = {"candidates": list(candidates), "modelVersion": "gemini-2.0-flash-001", **extra}
    if usage is not None:
        body["usageMetadata"] = usage
    return body


def _candidate(*texts, finish="STOP", thought=()):
    parts = [{"text": t, "thought": True} for t in thought] + [{"text": t} for t in texts]
    out = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        out["finishReason"] = finish
    return out


class Stub:
    """A scripted loopback HTTP server: answers the queued (status, body, headers, delay) in turn
    (the last one again when the queue runs out) and records every request."""

    def __init__(self):
        self.script: list = []
        self.requests: list[dict] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                stub.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                      "body": json.loads(raw or b"null")})
                status, body, headers, delay = stub.script.pop(0) if len(stub.script) > 1 else stub.script[0]
                if delay:
                    time.sleep(delay)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def answer(self, status=200, body=None, headers=None, delay=0.0):
        self.script.append((status, body if body is not None else _reply(_candidate("Yes")), headers, delay))
        return self

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def no_env(monkeypatch):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def stub(no_env, monkeypatch):
    s = Stub()
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", s.url)
    monkeypatch.setenv("GOOGLE_VERTEX_BASE_URL", s.url)
    yield s
    s.close()


def _client(**args):
    return client_for_deployment(_deployment(**args), _creds(), timeout_s=5.0)


# ---------------------------------------------------------------------------------------------
# HELM's own requests and results (the vendor-clients oracle) against the shared mock
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def vendor_mock(tmp_path, no_env, monkeypatch):
    if not VENDOR_MOCK.is_file():
        pytest.skip("shared/tools/mock_vendor_server.py not present")
    port_file, log = tmp_path / "port", tmp_path / "log.jsonl"
    proc = subprocess.Popen([sys.executable, str(VENDOR_MOCK), "--port", "0", "--port-file", str(port_file),
                             "--log-jsonl", str(log)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if port_file.is_file() and port_file.read_text().strip():
                break
            time.sleep(0.05)
        origin = f"http://127.0.0.1:{port_file.read_text().strip()}"
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", origin)
        monkeypatch.setenv("GOOGLE_VERTEX_BASE_URL", origin)
        yield origin, log
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _oracle_runs():
    runs = sorted((VENDOR / "benchmark_output" / "runs").glob("*/*model_deployment=google_gemini*"))
    if not runs:
        pytest.skip("oracle/vendor-clients not present")
    return runs


def _without_clock(result: dict) -> dict:
    return {k: v for k, v in result.items() if not k.startswith("request_")}


def test_helms_requests_and_results_from_the_oracle(vendor_mock):
    origin, log = vendor_mock
    client = client_for_deployment(_deployment(), _creds('googleApiKey: "goog-mock-key-not-a-secret"'))
    assert client.endpoint == origin
    for run in _oracle_runs():
        for state in json.loads((run / "scenario_state.json").read_text())["request_states"]:
            got = client.attempt(state["request"])
            assert got.kind == "ok", got.message
            assert list(got.result) == list(state["result"])  # the same keys, in HELM's order
            assert _without_clock(got.result) == _without_clock(state["result"])
            assert got.usage["prompt_tokens"] > 0
    sent = [json.loads(line) for line in log.read_text().splitlines()]
    helm = [json.loads(line) for line in (VENDOR / "mock_requests.jsonl").read_text().splitlines()]
    helm = [r for r in helm if r["wire"] == "gemini-generate-content"]
    key = lambda r: (r["path"], json.dumps(r["query"], sort_keys=True), json.dumps(r["body"], sort_keys=True))  # noqa: E731
    assert sorted(map(key, sent)) == sorted(map(key, helm))
    # the same header names (x-goog-api-key; no X-Server-Timeout, which HttpOptions.timeout would add)
    assert {tuple(sorted(r["headers"])) for r in sent} == {tuple(sorted(r["headers"])) for r in helm}


# ---------------------------------------------------------------------------------------------
# The wire body, quirk by quirk
# ---------------------------------------------------------------------------------------------
def test_prompt_body_floats_and_empty_stop_sequences(stub):
    stub.answer()
    got = _client().attempt(_request(top_k_per_token=5, num_completions=1))
    assert got.kind == "ok"
    sent = stub.requests[0]
    assert sent["path"] == "/v1beta/models/gemini-2.0-flash-001:generateContent"
    assert sent["headers"]["x-goog-api-key"] == KEY and "authorization" not in sent["headers"]
    assert json.dumps(sent["body"], sort_keys=True) == json.dumps({
        "contents": [{"parts": [{"text": "Is the sky blue?"}], "role": "user"}],
        "generationConfig": {"candidateCount": 1, "frequencyPenalty": 0.0, "maxOutputTokens": 5,
                             "presencePenalty": 0.0, "stopSequences": [], "temperature": 0.0, "topK": 5.0,
                             "topP": 1.0}}, sort_keys=True)


def test_messages_system_instruction_seed_and_thinking_config(stub):
    stub.answer()
    client = _client(thinking_config={"thinking_budget": 0}, genai_model="gemini-2.5-flash")
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Bye"}]
    got = client.attempt(_request(prompt="", messages=messages, random="7", stop_sequences=["\n"],
                                  num_completions=2, presence_penalty=0.5))
    assert got.kind == "ok"
    sent = stub.requests[0]
    assert sent["path"] == "/v1beta/models/gemini-2.5-flash:generateContent"  # genai_model wins
    body = sent["body"]
    assert body["contents"] == [{"parts": [{"text": "Hi"}], "role": "user"},
                                {"parts": [{"text": "Hello"}], "role": "model"},
                                {"parts": [{"text": "Bye"}], "role": "user"}]
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}], "role": "user"}
    cfg = body["generationConfig"]
    assert cfg["seed"] == 7 and cfg["stopSequences"] == ["\n"] and cfg["candidateCount"] == 2
    # google-genai 1.75 passes the ThinkingConfig through with its Python field names (so does HELM's call)
    assert cfg["presencePenalty"] == 0.5 and cfg["thinkingConfig"] == {"thinking_budget": 0}


def test_no_seed_without_random_and_no_system_instruction_for_a_prompt(stub):
    stub.answer()
    _client().attempt(_request())
    body = stub.requests[0]["body"]
    assert "seed" not in body["generationConfig"] and "systemInstruction" not in body


def test_requests_helm_refuses_are_fatal_and_not_sent(stub):
    stub.answer()
    client = _client()
    for req in (_request(echo_prompt=True), _request(random="abc"),
                _request(messages=[{"role": "user", "content": "x"}])):  # prompt and messages both set
        got = client.attempt(req)
        assert got.kind == "fatal" and got.result is None
    assert stub.requests == []


# ---------------------------------------------------------------------------------------------
# Reply parsing (HELM's result shape)
# ---------------------------------------------------------------------------------------------
def test_thought_parts_finish_reasons_and_usage(stub):
    stub.answer(body=_reply(_candidate("An", "swer", thought=["let me think"]),
                            {**_candidate("cut", finish="MAX_TOKENS"), "index": 1},
                            {**_candidate("x", finish="OTHER"), "index": 2},
                            {**_candidate("y", finish=None), "index": 3},
                            usage={"promptTokenCount": 11, "candidatesTokenCount": 4, "thoughtsTokenCount": 6}))
    got = _client().attempt(_request(num_completions=4))
    assert got.kind == "ok"
    assert got.result["completions"] == [
        {"text": "Answer", "logprob": 0.0, "tokens": [], "finish_reason": {"reason": "stop"},
         "thinking": {"text": "let me think"}},
        {"text": "cut", "logprob": 0.0, "tokens": [], "finish_reason": {"reason": "length"}},
        {"text": "x", "logprob": 0.0, "tokens": [], "finish_reason": {"reason": "OTHER"}},
        {"text": "y", "logprob": 0.0, "tokens": []},
    ]
    assert list(got.result) == ["success", "embedding", "completions", "cached", "request_time", "request_datetime"]
    assert got.usage == {"prompt_tokens": 11, "completion_tokens": 10}


def test_no_stop_sequence_cut_on_helms_side(stub):
    stub.answer(body=_reply(_candidate("Yes\nand more")))
    got = _client().attempt(_request(stop_sequences=["\n"]))
    assert got.result["completions"][0]["text"] == "Yes\nand more"


def test_max_tokens_without_parts_is_an_empty_text(stub):
    stub.answer(body=_reply({"content": {"role": "model"}, "finishReason": "MAX_TOKENS", "index": 0}))
    got = _client().attempt(_request())
    assert got.kind == "ok"
    assert got.result["completions"] == [{"text": "", "logprob": 0.0, "tokens": [],
                                          "finish_reason": {"reason": "length"}}]


@pytest.mark.parametrize("body, error", [
    (_reply(_candidate("bad", finish="SAFETY")), "Content blocked: Content blocked with reason: "),
    (_reply(_candidate("bad", finish="PROHIBITED_CONTENT")), "Content blocked: Content blocked with reason: "),
    ({"promptFeedback": {"blockReason": "SAFETY"}}, "Content blocked: Prompt blocked with reason: "),
    (_reply(), "Content blocked: No candidates in response: "),
    (_reply({"content": {"role": "model", "parts": []}, "finishReason": "STOP"}),
     "Content blocked: No content parts in candidate: "),
])
def test_blocked_content_is_helms_non_fatal_failure(stub, body, error):
    stub.answer(body=body)
    got = _client().attempt(_request())
    assert got.kind == "content_filter"
    assert got.result["error"].startswith(error)
    assert got.result["success"] is False and got.result["error_flags"] == {"is_retriable": False, "is_fatal": False}
    assert got.result["completions"] == [{"text": "", "logprob": 0, "tokens": []}]  # HELM's executor's empty one


def test_candidate_without_content_fails_as_helms_assert(stub):
    stub.answer(body=_reply({"finishReason": "SAFETY", "index": 0}))
    got = _client().attempt(_request())
    assert got.kind == "server_error" and got.result is None


def test_malformed_reply_is_a_server_error(stub):
    stub.answer(body=b"<html>oops</html>")
    got = _client().attempt(_request())
    assert got.kind == "server_error" and got.result is None


# ---------------------------------------------------------------------------------------------
# Errors, rate limits, no SDK retries
# ---------------------------------------------------------------------------------------------
def _error(code, status, message, details=()):
    return {"error": {"code": code, "message": message, "status": status, "details": list(details)}}


def test_429_with_retry_info_is_rate_limited_with_the_delay(stub):
    stub.answer(429, _error(429, "RESOURCE_EXHAUSTED", "Quota exceeded", [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "30s"}]))
    got = _client().attempt(_request())
    assert got.kind == "rate_limited" and got.status == 429
    assert got.retry_after_s == 30.0 and got.headers["retry-after"] == "30"
    assert len(stub.requests) == 1  # the SDK does not retry


def test_retry_delay_forms():
    info = "type.googleapis.com/google.rpc.RetryInfo"
    assert retry_delay_seconds({"error": {"details": [{"@type": info, "retryDelay": "1.5s"}]}}) == 1.5
    assert retry_delay_seconds({"error": {"details": [{"@type": info, "retryDelay": {"seconds": 2}}]}}) == 2.0
    assert retry_delay_seconds({"error": {"details": []}}) is None and retry_delay_seconds(None) is None


def test_429_without_retry_info_keeps_a_retry_after_header(stub):
    stub.answer(429, _error(429, "RESOURCE_EXHAUSTED", "slow down"), headers={"Retry-After": "7"})
    got = _client().attempt(_request())
    assert got.kind == "rate_limited" and got.retry_after_s == 7.0


@pytest.mark.parametrize("code, status, kind", [
    (500, "INTERNAL", "server_error"), (503, "UNAVAILABLE", "server_error"), (504, "DEADLINE_EXCEEDED", "server_error"),
    (401, "UNAUTHENTICATED", "fatal_endpoint"), (403, "PERMISSION_DENIED", "fatal_endpoint"),
    (404, "NOT_FOUND", "fatal_endpoint"), (400, "INVALID_ARGUMENT", "fatal"),
])
def test_http_errors_are_classified(stub, code, status, kind):
    stub.answer(code, _error(code, status, f"API key {KEY} is bad"))
    got = _client().attempt(_request())
    assert got.kind == kind and got.status == code and got.result is None
    assert KEY not in got.message
    assert len(stub.requests) == 1


def test_timeout(stub):
    stub.answer(delay=2.0)
    client = client_for_deployment(_deployment(), _creds(), timeout_s=0.3)
    assert client.attempt(_request()).kind == "timeout"


def test_connection_refused(no_env, monkeypatch):
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:9")
    assert _client().attempt(_request()).kind == "connection"


# ---------------------------------------------------------------------------------------------
# Configuration: keys, Vertex AI, base URLs, secrets, the extra
# ---------------------------------------------------------------------------------------------
def test_env_key_and_missing_key(stub, monkeypatch):
    with pytest.raises(MedhelmError) as e:
        client_for_deployment(_deployment(), _creds(""))
    message = str(e.value)
    assert "googleApiKey" in message and "prod_env/credentials.conf" in message and "\n" not in message
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    stub.answer()
    assert client_for_deployment(_deployment(), _creds("")).attempt(_request()).kind == "ok"
    assert stub.requests[0]["headers"]["x-goog-api-key"] == KEY


def test_secrets_stay_out_of_repr_and_messages(stub):
    client = _client()
    assert KEY not in repr(client) and KEY not in str(client)
    assert client.redact(f"bad key {KEY}") == "bad key ***"


def test_base_url_from_credentials_wins_over_the_sdk_env(stub, monkeypatch):
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:9")
    client = client_for_deployment(_deployment(), _creds(f'googleApiKey: "{KEY}"\ngoogleBaseUrl: "{stub.url}"'))
    assert client.endpoint == stub.url
    stub.answer()
    assert client.attempt(_request()).kind == "ok"


def test_default_endpoint_is_googles(no_env):
    assert _client().endpoint == "https://generativelanguage.googleapis.com"


@pytest.fixture
def fake_adc(monkeypatch):
    import google.auth
    from google.oauth2.credentials import Credentials

    calls = []

    def default(scopes=None, **kw):
        calls.append(scopes)
        return Credentials(token=TOKEN), "adc-project"

    monkeypatch.setattr(google.auth, "default", default)
    return calls


def test_vertex_ai_with_project_and_location(stub, fake_adc):
    stub.answer(body=_reply(_candidate("Yes")))
    client = client_for_deployment(_deployment(), _creds('googleProjectId: "my-proj"\ngoogleLocation: "europe-west4"'))
    assert client.vertexai and fake_adc == [["https://www.googleapis.com/auth/cloud-platform"]]
    got = client.attempt(_request())
    assert got.kind == "ok" and got.result["completions"][0]["text"] == "Yes"
    sent = stub.requests[0]
    assert sent["path"] == ("/v1beta1/projects/my-proj/locations/europe-west4/publishers/google/models/"
                            "gemini-2.0-flash-001:generateContent")
    assert sent["headers"]["authorization"] == f"Bearer {TOKEN}" and "x-goog-api-key" not in sent["headers"]
    assert sent["body"]["generationConfig"]["topK"] == 1.0
    assert TOKEN not in repr(client) and client.redact(f"token {TOKEN}") == "token ***"


def test_vertex_ai_flag_with_env_project_and_adc_project(stub, fake_adc, monkeypatch):
    stub.answer()
    client = client_for_deployment(_deployment(genai_use_vertexai=True, location="global"), _creds(""))
    client.attempt(_request())
    assert stub.requests[0]["path"].startswith("/v1beta1/projects/adc-project/locations/global/")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "env-proj")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-east5")
    client_for_deployment(_deployment(genai_use_vertexai=True), _creds("")).attempt(_request())
    assert stub.requests[1]["path"].startswith("/v1beta1/projects/env-proj/locations/us-east5/")


def test_genai_use_vertexai_false_prefers_the_key(stub, fake_adc):
    creds = _creds(f'googleApiKey: "{KEY}"\ngoogleProjectId: "p"\ngoogleLocation: "l"')
    assert client_for_deployment(_deployment(genai_use_vertexai=False), creds).vertexai is False
    assert client_for_deployment(_deployment(), creds).vertexai is True  # HELM: project+location before a key


def test_vertex_ai_without_application_default_credentials(no_env, monkeypatch):
    import google.auth
    import google.auth.exceptions

    def default(scopes=None, **kw):
        raise google.auth.exceptions.DefaultCredentialsError("none")

    monkeypatch.setattr(google.auth, "default", default)
    with pytest.raises(MedhelmError) as e:
        client_for_deployment(_deployment(genai_use_vertexai=True), _creds(""))
    message = str(e.value)
    assert "application-default credentials" in message and "GOOGLE_APPLICATION_CREDENTIALS" in message
    assert "googleProjectId" in message and "\n" not in message


def test_missing_extra_names_it(no_env, monkeypatch):
    monkeypatch.setitem(sys.modules, "google.genai", None)
    with pytest.raises(MedhelmError) as e:
        client_for_deployment(_deployment(), _creds())
    assert "[google]" in str(e.value) and "\n" not in str(e.value) and KEY not in str(e.value)


def test_unknown_args_and_bad_thinking_config_are_refused(no_env):
    with pytest.raises(MedhelmError, match="no argument 'vertexai_model'"):
        google_genai_client(_deployment(vertexai_model="x"), _creds())
    with pytest.raises(MedhelmError, match="thinking_config"):
        google_genai_client(_deployment(thinking_config={"thinking_budget": "lots"}), _creds())
