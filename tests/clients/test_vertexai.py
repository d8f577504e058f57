"""HELM's VertexAIChatClient (medhelm_core/clients/vertexai.py): the vertexai SDK's GenerateContentRequest as
Vertex AI's documented REST call (httpx + google-auth), against loopback servers only: the shared vendor
mock (the oracle's Gemini prompts, sent the Vertex way) and a scripted stub (replies, errors, auth)."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("google.auth")

from medhelm_core.clients import client_for_deployment  # noqa: E402
from medhelm_core.clients.vertexai import (CLASS_NAME, HARM_CATEGORIES, resource_name, vertex_host,  # noqa: E402
                                           vertexai_chat_client)
from medhelm_core.helm_config.deployments import Deployment, parse_credentials  # noqa: E402
from medhelm_core.errors import MedhelmError  # noqa: E402

SHARED = Path(__file__).resolve().parents[3] / "shared"
VENDOR = SHARED / "oracle" / "vendor-clients"
VENDOR_MOCK = SHARED / "tools" / "mock_vendor_server.py"
TOKEN = "ya29.fake-access-token-0123456789"
ENV = ("GOOGLE_VERTEX_BASE_URL", "GOOGLE_CLOUD_PROJECT", "CLOUD_ML_PROJECT_ID", "GOOGLE_CLOUD_REGION",
       "CLOUD_ML_REGION", "GOOGLE_CLOUD_LOCATION", "GOOGLE_APPLICATION_CREDENTIALS")
CREDS = 'googleProjectId: "my-proj"\ngoogleLocation: "us-central1"'
BLOCK_NONE = [{"category": c, "threshold": "BLOCK_NONE"} for c in HARM_CATEGORIES]
MODEL_PATH = "/v1beta1/projects/my-proj/locations/us-central1/publishers/google/models/{}:generateContent"


class FakeCredentials:
    """google-auth credentials with a fixed token; `valid` False until refreshed once."""

    def __init__(self, valid=True, quota_project_id=None, fail=None):
        self.token = TOKEN if valid else None
        self.valid = valid
        self.quota_project_id = quota_project_id
        self.refreshes = 0
        self.fail = fail

    def refresh(self, request):
        self.refreshes += 1
        if self.fail:
            raise self.fail
        self.token, self.valid = TOKEN, True

    def apply(self, headers, token=None):
        headers["authorization"] = f"Bearer {self.token}"
        if self.quota_project_id:
            headers["x-goog-user-project"] = self.quota_project_id


def _deployment(name="google/gemini-2.0-flash-001", **args) -> Deployment:
    spec = {"class_name": CLASS_NAME}
    if args:
        spec["args"] = args
    return Deployment.model_validate({"name": name, "model_name": name, "client_spec": spec})


def _creds(text=CREDS):
    return parse_credentials(text, "prod_env/credentials.conf")


def _client(google_credentials=None, creds=CREDS, timeout_s=5.0, **args):
    return vertexai_chat_client(_deployment(**args), _creds(creds), timeout_s=timeout_s,
                                google_credentials=google_credentials or FakeCredentials())


def _request(**kw) -> dict:
    req = {"model_deployment": "google/gemini-2.0-flash-001", "model": "google/gemini-2.0-flash-001",
           "embedding": False, "prompt": "Is the sky blue?", "temperature": 0.0, "num_completions": 1,
           "top_k_per_token": 1, "max_tokens": 5, "stop_sequences": [], "echo_prompt": False, "top_p": 1,
           "presence_penalty": 0, "frequency_penalty": 0}
    req.update(kw)
    return req


def _candidate(*texts, finish="STOP"):
    out = {"content": {"role": "model", "parts": [{"text": t} for t in texts]}, "index": 0}
    if finish is not None:
        out["finishReason"] = finish
    return out


def _reply(*candidates, **extra):
    return {"candidates": list(candidates), "modelVersion": "gemini-2.0-flash-001", **extra}


class Stub:
    """A scripted loopback HTTP server (answers the queued replies in turn, records every request)."""

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
    monkeypatch.setenv("GOOGLE_VERTEX_BASE_URL", s.url)
    yield s
    s.close()


# ---------------------------------------------------------------------------------------------
# The oracle's prompts, sent the Vertex way, through the shared mock (which speaks generateContent)
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
        monkeypatch.setenv("GOOGLE_VERTEX_BASE_URL", origin)
        yield origin, log
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_oracle_prompts_through_the_mock(vendor_mock):
    runs = sorted((VENDOR / "benchmark_output" / "runs").glob("*/*model_deployment=google_gemini*"))
    if not runs:
        pytest.skip("oracle/vendor-clients not present")
    origin, log = vendor_mock
    client = client_for_deployment(_deployment(), _creds(), google_credentials=FakeCredentials())
    assert client.endpoint == origin
    states = [s for run in runs for s in json.loads((run / "scenario_state.json").read_text())["request_states"]]
    for state in states:
        got = client.attempt(state["request"])
        assert got.kind == "ok", got.message
        # The mock answers from (model, prompt): GoogleGenAIClient's text for the same prompt, but
        # VertexAIChatClient's result shape (logprob 0, no finish_reason).
        want = [{"text": c["text"], "logprob": 0, "tokens": []} for c in state["result"]["completions"]]
        assert got.result["completions"] == want
        assert list(got.result) == ["success", "embedding", "completions", "cached", "request_time",
                                    "request_datetime"]
    sent = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(sent) == len(states)
    for record, state in zip(sent, states):
        req = state["request"]
        assert record["path"] == MODEL_PATH.format("gemini-2.0-flash-001")
        assert record["headers"]["authorization"] == "<redacted>" and "x-goog-api-key" not in record["headers"]
        assert json.dumps(record["body"], sort_keys=True) == json.dumps({
            "contents": [{"role": "user", "parts": [{"text": req["prompt"]}]}],
            "safetySettings": BLOCK_NONE,
            "generationConfig": {"temperature": float(req["temperature"]), "topP": 1.0,
                                 "topK": float(req["top_k_per_token"]), "candidateCount": 1,
                                 "maxOutputTokens": req["max_tokens"]}}, sort_keys=True)


# ---------------------------------------------------------------------------------------------
# The wire body
# ---------------------------------------------------------------------------------------------
def test_prompt_body_as_the_sdk_sends_it(stub):
    stub.answer()
    got = _client().attempt(_request(stop_sequences=["\n"], num_completions=2, top_k_per_token=5))
    assert got.kind == "ok"
    sent = stub.requests[0]
    assert sent["path"] == MODEL_PATH.format("gemini-2.0-flash-001")
    assert sent["headers"]["authorization"] == f"Bearer {TOKEN}"
    assert sent["headers"]["content-type"] == "application/json"
    # key order of the protobuf JSON form (field numbers), floats for the float fields, no penalties
    assert json.dumps(sent["body"]) == json.dumps({
        "contents": [{"role": "user", "parts": [{"text": "Is the sky blue?"}]}],
        "safetySettings": BLOCK_NONE,
        "generationConfig": {"temperature": 0.0, "topP": 1.0, "topK": 5.0, "candidateCount": 2,
                             "maxOutputTokens": 5, "stopSequences": ["\n"]}})
    assert len(BLOCK_NONE) == 7 and BLOCK_NONE[0]["category"] == "HARM_CATEGORY_UNSPECIFIED"


def test_messages_map_every_role_and_keep_the_system_message(stub):
    stub.answer()
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Bye"}]
    _client().attempt(_request(prompt="", messages=messages))
    assert stub.requests[0]["body"]["contents"] == [
        {"role": "user", "parts": [{"text": "Be brief."}]}, {"role": "user", "parts": [{"text": "Hi"}]},
        {"role": "model", "parts": [{"text": "Hello"}]}, {"role": "user", "parts": [{"text": "Bye"}]}]


def test_default_safety_preset_sends_none_and_vertexai_model_wins(stub):
    stub.answer()
    _client(safety_settings_preset="default", vertexai_model="gemini-1.5-pro-001").attempt(_request())
    sent = stub.requests[0]
    assert "safetySettings" not in sent["body"]
    assert sent["path"] == MODEL_PATH.format("gemini-1.5-pro-001")


def test_unknown_safety_preset_and_args_are_refused(no_env):
    with pytest.raises(MedhelmError, match="Unknown safety_settings_preset"):
        _client(safety_settings_preset="strict")
    with pytest.raises(MedhelmError, match="no argument 'genai_model'"):
        _client(genai_model="x")


def test_hosts_and_resource_names():
    assert vertex_host("us-central1") == "https://us-central1-aiplatform.googleapis.com"
    assert vertex_host("global") == "https://aiplatform.googleapis.com"
    assert vertex_host("us") == "https://aiplatform.us.rep.googleapis.com"
    assert resource_name("gemini-x", "p", "l") == "projects/p/locations/l/publishers/google/models/gemini-x"
    assert resource_name("models/gemini-x", "p", "l") == "projects/p/locations/l/publishers/google/models/gemini-x"
    full = "projects/q/locations/europe-west4/endpoints/123"
    assert resource_name(full, "p", "l") == full
    with pytest.raises(ValueError):
        resource_name("google/gemini-x", "p", "l")


def test_default_endpoint_and_resource_location(no_env):
    client = _client(creds='googleProjectId: "my-proj"\ngoogleLocation: "europe-west4"')
    assert client.endpoint == "https://europe-west4-aiplatform.googleapis.com"
    assert client.url(_request()) == ("https://europe-west4-aiplatform.googleapis.com/v1beta1/projects/my-proj/"
                                      "locations/europe-west4/publishers/google/models/gemini-2.0-flash-001"
                                      ":generateContent")
    other = _client(vertexai_model="projects/q/locations/asia-east1/publishers/google/models/m")
    assert other.url(_request()).startswith("https://asia-east1-aiplatform.googleapis.com/v1beta1/projects/q/")


def test_project_and_location_from_env_and_defaults(no_env, monkeypatch):
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "env-proj")
    client = _client(creds="")
    assert (client.project, client.location) == ("env-proj", "us-central1")
    monkeypatch.setenv("GOOGLE_CLOUD_REGION", "europe-west1")
    assert _client(creds="").location == "europe-west1"


# ---------------------------------------------------------------------------------------------
# Reply parsing (HELM's result shape and content-blocked rules)
# ---------------------------------------------------------------------------------------------
def test_text_is_cut_at_the_stop_sequence_and_has_no_finish_reason(stub):
    stub.answer(body=_reply(_candidate("Yes\nmore"), usageMetadata={"promptTokenCount": 9, "candidatesTokenCount": 3}))
    got = _client().attempt(_request(stop_sequences=["\n"]))
    assert got.kind == "ok"
    assert got.result["completions"] == [{"text": "Yes", "logprob": 0, "tokens": []}]
    assert got.untruncated == ["Yes\nmore"] and got.usage == {"prompt_tokens": 9, "completion_tokens": 3}


def test_echo_prompt_and_several_candidates(stub):
    stub.answer(body=_reply(_candidate(" yes"), {**_candidate(" no"), "index": 1}))
    got = _client().attempt(_request(echo_prompt=True, num_completions=2, stop_sequences=[" "]))
    assert [c["text"] for c in got.result["completions"]] == ["Is the sky blue? yes", "Is the sky blue? no"]


def test_max_tokens_without_parts_is_an_empty_text(stub):
    stub.answer(body=_reply({"content": {"role": "model"}, "finishReason": "MAX_TOKENS"}))
    got = _client().attempt(_request())
    assert got.kind == "ok" and got.result["completions"] == [{"text": "", "logprob": 0, "tokens": []}]


@pytest.mark.parametrize("body, error", [
    (_reply(_candidate("bad", finish="SAFETY")), "Content blocked: Content blocked with reason: 3"),
    (_reply(_candidate("bad", finish="RECITATION")), "Content blocked: Content blocked with reason: 4"),
    (_reply(_candidate("bad", finish="SPII")), "Content blocked: Content blocked with reason: 8"),
    (_reply({"finishReason": "SAFETY"}), "Content blocked: Content blocked with reason: 3"),
    ({"promptFeedback": {"blockReason": "SAFETY"}}, "Content blocked: Prompt blocked with reason: 1"),
    ({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}}, "Content blocked: Prompt blocked with reason: 4"),
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
    assert got.result["completions"] == [{"text": "", "logprob": 0, "tokens": []}]


@pytest.mark.parametrize("candidate", [
    _candidate("a", "b"),  # the SDK's `Content.text`: "Multiple content parts are not supported."
    {"content": {"role": "model", "parts": [{"functionCall": {"name": "f"}}]}, "finishReason": "STOP"},
])
def test_replies_the_sdk_cannot_read_are_server_errors(stub, candidate):
    stub.answer(body=_reply(candidate))
    got = _client().attempt(_request())
    assert got.kind == "server_error" and got.result is None


def test_unreadable_body_is_a_server_error(stub):
    stub.answer(body=b"not json")
    assert _client().attempt(_request()).kind == "server_error"


# ---------------------------------------------------------------------------------------------
# Errors and rate limits
# ---------------------------------------------------------------------------------------------
def _error(code, status, message, details=()):
    return {"error": {"code": code, "message": message, "status": status, "details": list(details)}}


def test_429_with_retry_info(stub):
    stub.answer(429, _error(429, "RESOURCE_EXHAUSTED", "Quota exceeded", [
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"}]))
    got = _client().attempt(_request())
    assert got.kind == "rate_limited" and got.retry_after_s == 12.0 and got.headers["retry-after"] == "12"


@pytest.mark.parametrize("code, status, kind", [
    (500, "INTERNAL", "server_error"), (503, "UNAVAILABLE", "server_error"),
    (401, "UNAUTHENTICATED", "fatal_endpoint"), (403, "PERMISSION_DENIED", "fatal_endpoint"),
    (404, "NOT_FOUND", "fatal_endpoint"), (400, "INVALID_ARGUMENT", "fatal"),
])
def test_http_errors_are_classified(stub, code, status, kind):
    stub.answer(code, _error(code, status, f"bad token {TOKEN}"))
    got = _client().attempt(_request())
    assert got.kind == kind and got.status == code and TOKEN not in got.message


def test_timeout_and_connection_refused(stub, monkeypatch):
    stub.answer(delay=2.0)
    assert _client(timeout_s=0.3).attempt(_request()).kind == "timeout"
    monkeypatch.setenv("GOOGLE_VERTEX_BASE_URL", "http://127.0.0.1:9")
    assert _client().attempt(_request()).kind == "connection"


def test_requests_helm_refuses_are_fatal(stub):
    stub.answer()
    got = _client(vertexai_model="google/gemini-x").attempt(_request())
    assert got.kind == "fatal" and stub.requests == []


# ---------------------------------------------------------------------------------------------
# Credentials, secrets, the extra
# ---------------------------------------------------------------------------------------------
def test_token_is_refreshed_when_invalid_and_quota_project_sent(stub):
    stub.answer()
    creds = FakeCredentials(valid=False, quota_project_id="billing-proj")
    client = _client(google_credentials=creds)
    client.attempt(_request())
    client.attempt(_request())
    assert creds.refreshes == 1
    assert stub.requests[0]["headers"]["authorization"] == f"Bearer {TOKEN}"
    assert stub.requests[0]["headers"]["x-goog-user-project"] == "billing-proj"


def test_refresh_failure_is_fatal_endpoint_without_the_token(stub):
    import google.auth.exceptions

    stub.answer()
    creds = FakeCredentials(valid=False, fail=google.auth.exceptions.RefreshError(f"invalid_grant {TOKEN}"))
    got = _client(google_credentials=creds).attempt(_request())
    assert got.kind == "fatal_endpoint" and stub.requests == []


def test_secrets_stay_out_of_repr(stub):
    client = _client()
    assert TOKEN not in repr(client) and client.redact(f"x {TOKEN}") == "x ***"


def test_application_default_credentials_and_their_project(no_env, monkeypatch):
    import google.auth

    monkeypatch.setattr(google.auth, "default", lambda scopes=None, **kw: (FakeCredentials(), "adc-proj"))
    client = client_for_deployment(_deployment(), _creds(""))
    assert client.project == "adc-proj" and client.location == "us-central1"


def test_missing_application_default_credentials(no_env, monkeypatch):
    import google.auth
    import google.auth.exceptions

    def default(scopes=None, **kw):
        raise google.auth.exceptions.DefaultCredentialsError("none")

    monkeypatch.setattr(google.auth, "default", default)
    with pytest.raises(MedhelmError) as e:
        client_for_deployment(_deployment(), _creds(""))
    message = str(e.value)
    assert "application-default credentials" in message and "googleProjectId" in message
    assert "prod_env/credentials.conf" in message and "\n" not in message


def test_missing_extra_names_it(no_env, monkeypatch):
    monkeypatch.setitem(sys.modules, "google.auth", None)
    with pytest.raises(MedhelmError) as e:
        client_for_deployment(_deployment(), _creds())
    assert "[google]" in str(e.value) and "\n" not in str(e.value)
