"""HELM's Bedrock clients (medhelm_core/clients/bedrock.py) through boto3, on loopback only: the wire requests
and results of the vendor-clients oracle (against ../shared/tools/mock_vendor_server.py), HELM's
truncate_and_tokenize_response_text quirks, Claude on Bedrock through Converse, and the classification of
Bedrock's errors (against a small stub that answers as Bedrock does)."""
from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("boto3")

from medhelm_core.clients import client_for_deployment, supported_client_classes  # noqa: E402
from medhelm_core.clients.base import truncate_and_tokenize_response_text  # noqa: E402
from medhelm_core.clients.bedrock import LLAMA, MISTRAL, NOVA, PALMYRA, TITAN  # noqa: E402
from medhelm_core.helm_config.deployments import Credentials, Deployment, load_model_registry, parse_credentials  # noqa: E402
from medhelm_core.errors import MedhelmError  # noqa: E402
from medhelm_core.ratelimit import (CONNECTION, FATAL, FATAL_ENDPOINT, OK, RATE_LIMITED, SERVER_ERROR,  # noqa: E402
                                    TIMEOUT)
from medhelm_core.tokenizers import SimpleTokenizer  # noqa: E402
from tests.mock_server import MockServer  # noqa: E402
from tests.oracle import SHARED, load  # noqa: E402

VENDOR = SHARED / "oracle" / "vendor-clients"
VENDOR_MOCK = SHARED / "tools" / "mock_vendor_server.py"
ACCESS_KEY = "AKIAMOCKNOTASECRET12"
SECRET_KEY = "mockSecretKeyValue/abcdefghijklmnopqrstuv"  # 40 characters, as AWS secrets


@pytest.fixture
def aws_env(monkeypatch, tmp_path):
    """Fake static keys, no ~/.aws, no instance metadata, no endpoint override."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
                 "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "AWS_ENDPOINT_URL_STS",
                 "BEDROCK_ASSUME_ROLE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "absent-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "absent-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    return monkeypatch


def _deployment(class_name=NOVA, name="amazon/nova-pro-v1:0", model_name=None, tokenizer="simple/tokenizer1",
                **args):
    return Deployment(name=name, model_name=model_name or name, tokenizer_name=tokenizer,
                      client_spec={"class_name": class_name, "args": {"region": "us-west-2", **args}})


def _request(model="amazon/nova-pro-v1:0", prompt="Does the patient smoke?", max_tokens=5, stops=(), **kw):
    return {"model": model, "model_deployment": model, "prompt": prompt, "temperature": 0.0, "top_p": 1,
            "num_completions": 1, "top_k_per_token": 1, "max_tokens": max_tokens, "stop_sequences": list(stops),
            "presence_penalty": 0, "frequency_penalty": 0, "echo_prompt": False, "embedding": False, **kw}


# --------------------------------------------------------------------------------------------
# Against the vendor mock: the oracle's requests and results
# --------------------------------------------------------------------------------------------
@pytest.fixture
def vendor_mock(aws_env):
    log = Path(tempfile.mkdtemp()) / "requests.jsonl"
    server = MockServer("--log-jsonl", str(log), script=VENDOR_MOCK)
    server.log = log
    aws_env.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", f"http://127.0.0.1:{server.port}")
    yield server
    server.close()


def _logged(path: Path, wire_prefix: str = "bedrock") -> list[dict]:
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("wire", "").startswith(wire_prefix)]


def _wire_key(rec: dict):
    return rec["path"], json.dumps(rec["query"], sort_keys=True), json.dumps(rec["body"], sort_keys=True)


@pytest.mark.skipif(not (VENDOR / "mock_requests.jsonl").exists(), reason="vendor-clients oracle not here")
def test_the_oracle_bedrock_requests_and_results_are_helms(vendor_mock):
    registry = load_model_registry(VENDOR / "inputs" / "prod_env")
    clients, n = {}, 0
    for state_file in sorted((VENDOR / "benchmark_output" / "runs").glob("*/*amazon*/scenario_state.json")):
        for rs in load(state_file)["request_states"]:
            request, expected = rs["request"], rs["result"]
            name = request["model_deployment"]
            if name not in clients:
                dep = registry.get_deployment(name)
                clients[name] = client_for_deployment(dep, Credentials(),
                                                      tokenizer_config=registry.tokenizer_configs.get(
                                                          dep.tokenizer_name))
            got = clients[name].attempt(request)
            assert got.kind == OK, got.message
            # Same keys, in HELM's order; same completions (text, logprob, one token a character, finish_reason).
            assert list(got.result) == list(expected)
            assert got.result["completions"] == expected["completions"]
            if "nova" in name:  # Converse: request_time is the reply's metrics.latencyMs / 1000
                assert got.result["request_time"] == expected["request_time"]
            assert isinstance(got.result["request_datetime"], int)
            assert got.usage["prompt_tokens"] is not None and got.usage["completion_tokens"] is not None
            n += 1
    assert n == 80
    ours, theirs = _logged(vendor_mock.log), _logged(VENDOR / "mock_requests.jsonl")
    assert {_wire_key(r) for r in ours} == {_wire_key(r) for r in theirs}
    assert {tuple(sorted(r["headers"])) for r in ours} == {tuple(sorted(r["headers"])) for r in theirs}
    # One attempt per request: botocore does not retry (the engine does).
    assert {r["headers"]["amz-sdk-request"] for r in ours} == {"attempt=1; max=1"}
    assert {r["headers"]["authorization"] for r in ours} == {"<redacted>"}  # SigV4-signed


def test_claude_on_bedrock_through_converse(vendor_mock):
    """HELM 0.5.16 has no Bedrock Claude class: BedrockNovaClient + bedrock_model_id reaches Claude (Converse)."""
    model_id = "anthropic.claude-3-7-sonnet-20250219-v1:0"
    dep = _deployment(NOVA, name="amazon/claude-3-7-sonnet-20250219",
                      model_name="anthropic/claude-3-7-sonnet-20250219", bedrock_model_id=model_id)
    client = client_for_deployment(dep, Credentials())
    got = client.attempt(_request(model="anthropic/claude-3-7-sonnet-20250219", max_tokens=3))
    assert got.kind == OK, got.message
    profile = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us." + model_id
    dep = _deployment(NOVA, name="amazon/claude-profile", model_name="anthropic/claude-3-7-sonnet-20250219",
                      bedrock_model_id=profile)
    assert client_for_deployment(dep, Credentials()).attempt(_request(model="x/y")).kind == OK
    paths = [r["path"] for r in _logged(vendor_mock.log)]
    assert paths == ["/model/anthropic.claude-3-7-sonnet-20250219-v1%3A0/converse",
                     "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic."
                     "claude-3-7-sonnet-20250219-v1%3A0/converse"]
    body = _logged(vendor_mock.log)[0]["body"]
    assert body == {"messages": [{"role": "user", "content": [{"text": "Does the patient smoke?"}]}],
                    "inferenceConfig": {"temperature": 0.0, "maxTokens": 3, "topP": 1}}
    assert "stopSequences" not in json.dumps(body)


def test_converse_sends_chat_messages_and_no_stop_sequences(vendor_mock):
    client = client_for_deployment(_deployment(NOVA), Credentials())
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                {"role": "user", "content": "Does the patient smoke?"}]
    got = client.attempt(_request(prompt="", messages=messages, stops=["\n"]))
    assert got.kind == OK
    [rec] = _logged(vendor_mock.log)
    assert rec["path"] == "/model/amazon.nova-pro-v1%3A0/converse"
    assert rec["body"]["messages"] == [{"role": m["role"], "content": [{"text": m["content"]}]} for m in messages]
    assert client.attempt(_request(messages=messages)).kind == FATAL  # prompt and messages: HELM raises


def test_invoke_model_bodies_and_model_ids(vendor_mock):
    cases = [
        (LLAMA, "meta/amazon-llama3-8b-instruct-v1:0", "/model/meta.llama3-8b-instruct-v1%3A0/invoke",
         {"prompt": "[INST]Q?[/INST]", "temperature": 0.0, "top_p": 1, "max_gen_len": 4}),
        (MISTRAL, "mistralai/amazon-mistral-7b-instruct-v0:2", "/model/mistral.mistral-7b-instruct-v0%3A2/invoke",
         {"prompt": "[INST]Q?[/INST]", "temperature": 0.0, "top_p": 1, "max_tokens": 4}),
        (TITAN, "amazon/titan-text-lite-v1", "/model/amazon.titan-text-lite-v1/invoke",
         {"inputText": "Q?", "textGenerationConfig": {"maxTokenCount": 4, "stopSequences": [], "temperature": 0.0,
                                                       "topP": 1}}),
        (PALMYRA, "writer/amazon-palmyra-x5-v1:0", "/model/writer.palmyra-x5-v1%3A0/invoke",
         {"messages": [{"role": "user", "content": "Q?"}], "temperature": 0.0, "top_p": 1, "max_tokens": 4,
          "stop": ["\n"], "seed": None, "presence_penalty": 0, "frequency_penalty": 0}),
    ]
    for class_name, model, path, body in cases:
        client = client_for_deployment(_deployment(class_name, name="amazon/x", model_name=model), Credentials())
        got = client.attempt(_request(model=model, prompt="Q?", max_tokens=4, stops=["\n"]))
        assert got.kind == OK, (class_name, got.message)
        rec = _logged(vendor_mock.log)[-1]
        assert (rec["path"], rec["body"]) == (path, body), class_name
        sent = client.raw_request(_request(model=model, prompt="Q?", max_tokens=4, stops=["\n"]))["body"]
        assert list(sent) == list(body)  # json.dumps of HELM's dict: the same key order
        assert rec["headers"]["accept"] == rec["headers"]["content-type"] == "application/json"
        [completion] = got.result["completions"]
        assert completion["tokens"] == [{"text": c, "logprob": 0.0} for c in completion["text"]]
    # bedrock_model_id wins over the derived id
    client = client_for_deployment(_deployment(LLAMA, name="amazon/x", model_name="meta/amazon-llama3-8b",
                                               bedrock_model_id="us.meta.llama3-8b-instruct-v1:0"), Credentials())
    assert client.attempt(_request(model="meta/amazon-llama3-8b")).kind == OK
    assert _logged(vendor_mock.log)[-1]["path"] == "/model/us.meta.llama3-8b-instruct-v1%3A0/invoke"


def test_the_bedrock_classes_are_discovered_and_the_endpoint_is_the_sdks(aws_env):
    assert {NOVA, LLAMA, MISTRAL, TITAN, PALMYRA} <= set(supported_client_classes())
    client = client_for_deployment(_deployment(NOVA), Credentials())
    assert client.endpoint == "https://bedrock-runtime.us-west-2.amazonaws.com"
    aws_env.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9/some/path")
    assert client_for_deployment(_deployment(NOVA), Credentials()).endpoint == "http://127.0.0.1:9"
    aws_env.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "https://vpce-1.bedrock-runtime.example.com:8443")
    assert client_for_deployment(_deployment(NOVA), Credentials()).endpoint == \
        "https://vpce-1.bedrock-runtime.example.com:8443"
    # region from the environment when the deployment names none
    aws_env.delenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME")
    aws_env.delenv("AWS_ENDPOINT_URL")
    aws_env.setenv("AWS_REGION", "eu-central-1")
    dep = Deployment(name="amazon/nova-pro-v1:0", tokenizer_name="simple/tokenizer1",
                     client_spec={"class_name": NOVA, "args": {}})
    assert client_for_deployment(dep, Credentials()).endpoint == "https://bedrock-runtime.eu-central-1.amazonaws.com"


# --------------------------------------------------------------------------------------------
# truncate_and_tokenize_response_text
# --------------------------------------------------------------------------------------------
class _Words:
    name = "test/words"

    def tokenize(self, text):
        parts = text.split(" ")
        return [p + " " for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])

    def encode(self, text):
        return self.tokenize(text)

    def decode(self, tokens):
        return "".join(tokens)


def test_truncate_and_tokenize_quirks():
    simple = SimpleTokenizer()
    req = _request(max_tokens=3)
    # simple/tokenizer1 ignores truncation: the text stays whole, finish_reason "length", a token a character
    got = truncate_and_tokenize_response_text("Yes it is", req, simple, "end_turn")
    assert got == {"text": "Yes it is", "logprob": 0.0, "tokens": [{"text": c, "logprob": 0.0} for c in "Yes it is"],
                   "finish_reason": {"reason": "length"}}
    # the stop reason passed as the end-of-text string cuts the text where it occurs
    got = truncate_and_tokenize_response_text("ab end_turn cd", _request(max_tokens=50), simple, "end_turn")
    assert (got["text"], got["finish_reason"]) == ("ab ", {"reason": "stop"})
    got = truncate_and_tokenize_response_text("The length is 3", _request(max_tokens=50), simple, "length")
    assert (got["text"], got["finish_reason"]) == ("The ", {"reason": "stop"})
    # otherwise "endoftext", and stop sequences cut first
    got = truncate_and_tokenize_response_text("A\nB", _request(max_tokens=50), simple, "end_turn")
    assert got["finish_reason"] == {"reason": "endoftext"}
    got = truncate_and_tokenize_response_text("A\nB", _request(max_tokens=50, stops=["\n"]), simple, "end_turn")
    assert (got["text"], got["finish_reason"]) == ("A", {"reason": "stop"})
    # a tokenizer that truncates (tiktoken, Hugging Face): cut to max_tokens tokens
    got = truncate_and_tokenize_response_text("one two three four", req, _Words(), "end_turn")
    assert got["text"] == "one two three " and got["finish_reason"] == {"reason": "length"}
    assert [t["text"] for t in got["tokens"]] == ["one ", "two ", "three "]
    with pytest.raises(ValueError):
        truncate_and_tokenize_response_text("x", _request(echo_prompt=True), simple)


# --------------------------------------------------------------------------------------------
# Errors, against a stub that answers as Bedrock does
# --------------------------------------------------------------------------------------------
class _Stub:
    """Loopback HTTP server: each POST gets the next scripted (status, headers, body, delay_s); logs requests."""

    def __init__(self):
        self.script: list[tuple[int, dict, object, float]] = []
        self.requests: list[dict] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def date_time_string(self, timestamp=None):
                return getattr(self, "fixed_date", None) or super().date_time_string(timestamp)

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n)
                stub.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                      "body": raw.decode()})
                status, headers, body, delay = stub.script.pop(0) if stub.script else (500, {}, {}, 0)
                time.sleep(delay)
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                headers = dict(headers)
                self.fixed_date = headers.pop("Date", None)  # send_response sends the one Date header
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def error(self, status, code, message="boom", delay=0.0, headers=None):
        self.script.append((status, {"x-amzn-ErrorType": f"{code}:http://internal.amazon.com/coral/",
                                     "Content-Type": "application/json", **(headers or {})},
                            {"message": message}, delay))

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub(aws_env):
    s = _Stub()
    aws_env.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", s.url)
    yield s
    s.close()


def test_bedrock_errors_are_classified_once_each(stub):
    client = client_for_deployment(_deployment(NOVA), Credentials())
    llama = client_for_deployment(_deployment(LLAMA, name="amazon/l", model_name="meta/amazon-llama3-8b-v1:0"),
                                  Credentials())
    cases = [
        (429, "ThrottlingException", RATE_LIMITED), (400, "ServiceQuotaExceededException", RATE_LIMITED),
        (503, "ServiceUnavailableException", SERVER_ERROR), (429, "ModelNotReadyException", SERVER_ERROR),
        (500, "InternalServerException", SERVER_ERROR), (424, "ModelErrorException", SERVER_ERROR),
        (408, "ModelTimeoutException", SERVER_ERROR), (400, "ValidationException", FATAL),
        (403, "AccessDeniedException", FATAL_ENDPOINT), (403, "UnrecognizedClientException", FATAL_ENDPOINT),
        (404, "ResourceNotFoundException", FATAL_ENDPOINT), (401, "SomethingNew", FATAL_ENDPOINT),
    ]
    for status, code, kind in cases:
        for c in (client, llama):
            before = len(stub.requests)
            stub.error(status, code)
            got = c.attempt(_request())
            assert got.kind == kind, (code, got.kind, got.message)
            assert got.status == status and code in got.message
            assert len(stub.requests) == before + 1  # no SDK retry
    stub.error(429, "ThrottlingException", headers={"Retry-After": "7"})
    got = client.attempt(_request())
    assert got.kind == RATE_LIMITED and got.retry_after_s == 7.0 and got.headers == {"retry-after": "7"}
    # a malformed reply is a server error (HELM raises and retries)
    stub.script.append((200, {"Content-Type": "application/json", "Date": "Sun, 06 Dec 2026 00:24:29 GMT"},
                        {"output": {}}, 0))
    assert client.attempt(_request()).kind == SERVER_ERROR
    stub.script.append((200, {"Content-Type": "application/json"}, "not json", 0))
    assert llama.attempt(_request(model="meta/amazon-llama3-8b-v1:0")).kind == SERVER_ERROR


def test_timeouts_and_connection_errors(stub, aws_env):
    dep = _deployment(LLAMA, name="amazon/l", model_name="meta/amazon-llama3-8b-v1:0")
    client = client_for_deployment(dep, Credentials(), timeout_s=0.3)
    stub.script.append((200, {"Content-Type": "application/json"}, {"generation": "x", "stop_reason": "stop"}, 1.5))
    got = client.attempt(_request(model="meta/amazon-llama3-8b-v1:0"))
    assert got.kind == TIMEOUT, got.message
    assert len(stub.requests) == 1
    aws_env.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "http://127.0.0.1:9")  # nothing listens on port 9
    client = client_for_deployment(dep, Credentials(), timeout_s=5)
    assert client.attempt(_request(model="meta/amazon-llama3-8b-v1:0")).kind == CONNECTION


def test_converse_result_and_usage_from_a_bedrock_reply(stub):
    client = client_for_deployment(_deployment(NOVA), Credentials())
    reply = {"output": {"message": {"role": "assistant", "content": [{"text": "\n Yes end_turn more"}]}},
             "stopReason": "end_turn", "usage": {"inputTokens": 12, "outputTokens": 4, "totalTokens": 16},
             "metrics": {"latencyMs": 321}}
    stub.script.append((200, {"Content-Type": "application/json", "Date": "Sun, 06 Dec 2026 00:24:29 GMT"},
                        reply, 0))
    got = client.attempt(_request(max_tokens=50))
    assert got.kind == OK, got.message
    expected_dt = int(__import__("datetime").datetime(2026, 12, 6, 0, 24, 29).timestamp())  # naive, as HELM
    assert got.result == {"success": True, "embedding": [],
                          "completions": [{"text": "Yes ", "logprob": 0.0,
                                           "tokens": [{"text": c, "logprob": 0.0} for c in "Yes "],
                                           "finish_reason": {"reason": "stop"}}],
                          "cached": False, "request_time": 0.321, "request_datetime": expected_dt}
    assert got.usage == {"prompt_tokens": 12, "completion_tokens": 4}
    # InvokeModel: Bedrock's token-count headers first
    llama = client_for_deployment(_deployment(LLAMA, name="amazon/l", model_name="meta/amazon-llama3-8b-v1:0"),
                                  Credentials())
    stub.script.append((200, {"Content-Type": "application/json", "X-Amzn-Bedrock-Input-Token-Count": "30",
                              "X-Amzn-Bedrock-Output-Token-Count": "2"},
                        {"generation": " No", "stop_reason": "stop", "prompt_token_count": 29,
                         "generation_token_count": 1}, 0))
    got = llama.attempt(_request(model="meta/amazon-llama3-8b-v1:0", max_tokens=5))
    assert got.kind == OK and got.usage == {"prompt_tokens": 30, "completion_tokens": 2}
    assert got.result["completions"][0]["text"] == "No"
    assert got.result["completions"][0]["finish_reason"] == {"reason": "endoftext"}


# --------------------------------------------------------------------------------------------
# Credentials, role, extras, secrets
# --------------------------------------------------------------------------------------------
def test_assumed_role_goes_through_sts_and_signs_with_the_session_token(stub, aws_env):
    sts_xml = """<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult>
<Credentials><AccessKeyId>ASIATEMPORARYKEY123</AccessKeyId><SecretAccessKey>tempSecret</SecretAccessKey>
<SessionToken>tempSessionToken</SessionToken><Expiration>2099-01-01T00:00:00Z</Expiration></Credentials>
<AssumedRoleUser><AssumedRoleId>AROA1:crfm-helm</AssumedRoleId><Arn>arn:aws:sts::1:assumed-role/r/crfm-helm</Arn>
</AssumedRoleUser></AssumeRoleResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata>
</AssumeRoleResponse>"""
    aws_env.setenv("AWS_ENDPOINT_URL_STS", stub.url)
    aws_env.setenv("BEDROCK_ASSUME_ROLE", "arn:aws:iam::123456789012:role/bedrock-runner")
    client = client_for_deployment(_deployment(NOVA), Credentials())
    assert stub.requests == []  # nothing is sent when the client is built
    stub.script.append((200, {"Content-Type": "text/xml"}, sts_xml, 0))
    stub.script.append((200, {"Content-Type": "application/json", "Date": "Sun, 06 Dec 2026 00:24:29 GMT"},
                        {"output": {"message": {"content": [{"text": "Yes"}]}}, "stopReason": "end_turn",
                         "metrics": {"latencyMs": 5}, "usage": {"inputTokens": 1, "outputTokens": 1}}, 0))
    got = client.attempt(_request())
    assert got.kind == OK, got.message
    sts, converse = stub.requests
    form = urllib.parse.parse_qs(sts["body"])
    assert form["Action"] == ["AssumeRole"] and form["RoleSessionName"] == ["crfm-helm"]
    assert form["RoleArn"] == ["arn:aws:iam::123456789012:role/bedrock-runner"]
    assert ACCESS_KEY in sts["headers"]["authorization"]
    assert converse["headers"]["x-amz-security-token"] == "tempSessionToken"
    assert "ASIATEMPORARYKEY123" in converse["headers"]["authorization"]


def test_credentials_conf_keys_region_and_redaction(stub, aws_env):
    aws_env.delenv("AWS_ACCESS_KEY_ID")
    aws_env.delenv("AWS_SECRET_ACCESS_KEY")
    creds = parse_credentials(f'amazonAccessKeyId: "AKIACONFKEY000000000"\namazonSecretAccessKey: "{SECRET_KEY}"\n'
                              'amazonRegion: "ap-south-1"\n', "credentials.conf")
    dep = Deployment(name="amazon/nova-pro-v1:0", tokenizer_name="simple/tokenizer1",
                     client_spec={"class_name": NOVA, "args": {}})
    client = client_for_deployment(dep, creds)
    assert client.region == "ap-south-1"
    assert SECRET_KEY not in repr(client) and "AKIACONF" not in repr(client)
    stub.error(403, "UnrecognizedClientException", f"bad key AKIACONFKEY000000000 / {SECRET_KEY}")
    got = client.attempt(_request())
    assert got.kind == FATAL_ENDPOINT
    assert SECRET_KEY not in got.message and "AKIACONFKEY000000000" not in got.message
    assert "AKIACONFKEY000000000" in stub.requests[0]["headers"]["authorization"]
    assert "ap-south-1" in stub.requests[0]["headers"]["authorization"]


def test_missing_credentials_region_tokenizer_or_extra_stop_at_build(aws_env, monkeypatch):
    aws_env.delenv("AWS_ACCESS_KEY_ID")
    aws_env.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(MedhelmError, match="AWS_ACCESS_KEY_ID") as e:
        client_for_deployment(_deployment(NOVA), Credentials(source="prod_env/credentials.conf"))
    assert "\n" not in str(e.value) and "prod_env/credentials.conf" in str(e.value)
    aws_env.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    aws_env.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    dep = Deployment(name="amazon/nova-pro-v1:0", tokenizer_name="simple/tokenizer1",
                     client_spec={"class_name": NOVA, "args": {}})
    with pytest.raises(MedhelmError, match="AWS_REGION"):
        client_for_deployment(dep, Credentials())
    with pytest.raises(MedhelmError, match="tokenizer_name"):
        client_for_deployment(_deployment(NOVA, tokenizer=None), Credentials())
    monkeypatch.setitem(sys.modules, "boto3", None)
    with pytest.raises(MedhelmError, match=r"\[aws\] extra") as e:
        client_for_deployment(_deployment(NOVA), Credentials())
    assert "\n" not in str(e.value)


def test_one_client_serves_many_threads(vendor_mock):
    from concurrent.futures import ThreadPoolExecutor

    client = client_for_deployment(_deployment(NOVA), Credentials(), max_concurrency=None)
    requests = [_request(prompt=f"Question {i}: does the patient smoke?", max_tokens=4) for i in range(24)]
    sequential = [client.attempt(r).result["completions"] for r in requests]
    with ThreadPoolExecutor(8) as pool:
        parallel = list(pool.map(lambda r: client.attempt(r), requests))
    assert [a.kind for a in parallel] == [OK] * 24
    assert [a.result["completions"] for a in parallel] == sequential
