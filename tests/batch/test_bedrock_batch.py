"""Amazon Bedrock batch inference (medhelm_core/batch/bedrock.py) through the real boto3 clients, against a
loopback mock of the Bedrock control plane (tests/mock_bedrock_batch.py) and moto's S3 server: each record's
modelInput is the online body byte for byte, each job's records are answered by the repo's online runtime
mock (shared/tools/mock_vendor_server.py), so batch answers equal online answers (and HELM's golden
results); every key comes back answered, to ask again or failed; a lost create is found, not paid twice;
fewer records than Bedrock's minimum are left to the online path."""
from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

boto3 = pytest.importorskip("boto3")
moto_server = pytest.importorskip("moto.server")

from medhelm_core.batch import (ANSWERED, FAILED_ITEM, RETRY, batch_api, collect, flavour_of, ledger,  # noqa: E402
                                poll, resume, store_collected, submit)
from medhelm_core.batch.bedrock import BedrockBatchAPI, job_name, record_id, request_token  # noqa: E402
from medhelm_core.batch.protocol import BEDROCK, ENDED_STATES, RUNNING_STATES  # noqa: E402
from medhelm_core.clients import client_for_deployment  # noqa: E402
from medhelm_core.errors import MedhelmError  # noqa: E402
from medhelm_core.helm_config.deployments import Credentials, load_model_registry  # noqa: E402
from medhelm_core.ratelimit import FATAL, RATE_LIMITED, SERVER_ERROR, TIMEOUT, SettingsRegistry  # noqa: E402
from medhelm_core.store import request_key  # noqa: E402
from tests.batch.conftest import store_answers, without_clock  # noqa: E402
from tests.batch.test_batch_durable import dead_owner  # noqa: E402
from tests.clients.test_bedrock import _request, aws_env  # noqa: E402,F401 - aws_env: a fixture
from tests.mock_bedrock_batch import MockBedrockBatchServer  # noqa: E402
from tests.mock_server import MockServer  # noqa: E402
from tests.oracle import VENDOR, VENDOR_MOCK_SERVER, load  # noqa: E402

NOVA, LLAMA = "amazon/nova-pro-v1:0", "amazon/llama3-8b-instruct-v1:0"
ROLE = "arn:aws:iam::123456789012:role/medhelm-batch"


@pytest.fixture(scope="module")
def s3_endpoint():
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{server._server.server_address[1]}"
    server.stop()


@pytest.fixture(scope="module")
def runtime_mock():
    if not VENDOR_MOCK_SERVER.is_file():
        pytest.skip("shared/tools/mock_vendor_server.py not present")
    server = MockServer(script=VENDOR_MOCK_SERVER)
    yield f"http://127.0.0.1:{server.port}"
    server.close()


@pytest.fixture
def bucket(aws_env, s3_endpoint):  # noqa: F811
    name = f"medhelm-{uuid.uuid4().hex[:20]}"   # a bucket of its own per test
    aws_env.setenv("AWS_ENDPOINT_URL_S3", s3_endpoint)
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    return name


@pytest.fixture
def bedrock(aws_env, bucket, s3_endpoint, runtime_mock):  # noqa: F811
    """make(**mock options) -> (mock, api of a deployment)."""
    servers = []
    aws_env.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", runtime_mock)

    def make(deployment: str = NOVA, min_requests: int = 5, **kw):
        kw.setdefault("min_records", min_requests)
        server = MockBedrockBatchServer(s3_endpoint, upstream=runtime_mock, **kw)
        servers.append(server)
        aws_env.setenv("AWS_ENDPOINT_URL_BEDROCK", server.endpoint)
        api = BedrockBatchAPI(oracle_client(deployment), s3_uri=f"s3://{bucket}/medhelm-batch", role_arn=ROLE,
                              min_requests=min_requests)
        return server, api

    yield make
    for s in servers:
        s.close()


_REGISTRY = None


def oracle_client(name: str):
    """The online client of one of the oracle's Bedrock deployments (as HELM's prod_env has them)."""
    global _REGISTRY
    _REGISTRY = _REGISTRY or load_model_registry(VENDOR / "inputs" / "prod_env")
    dep = _REGISTRY.get_deployment(name)
    return client_for_deployment(dep, Credentials(), tokenizer_config=_REGISTRY.tokenizer_configs.get(dep.tokenizer_name))


def oracle_states(deployment: str) -> list[dict]:
    """HELM 0.5.16's own request states of a Bedrock deployment (model runs and the jury demo)."""
    tag = deployment.replace("/", "_")
    runs = sorted((VENDOR / "benchmark_output" / "runs").glob(f"*/*model_deployment={tag}"))
    return [st for run in runs for st in load(run / "scenario_state.json")["request_states"]]


def edge_requests(deployment: str) -> list[dict]:
    model = _REGISTRY.get_deployment(deployment).model_name
    return [_request(model=model, model_deployment=deployment, prompt=p, max_tokens=n) | {"model_deployment": deployment}
            for p, n in [("Réponds: « oui » ou « non »?\u2028 \U0001f600 \"quoted\" \\ tab\t", 5),
                         ("Does the patient smoke? Answer yes or no.", 3), ("List three words", 40)]]


def keyed(deployment: str, requests: list[dict]) -> dict[str, dict]:
    return {request_key(deployment, r): r for r in requests}


def finish(store, api, batch_id, polls: int = 12):
    for _ in range(polls):
        status = poll(store, api, ledger.get(store, batch_id))
        if status.ended:
            break
    return collect(store, api, batch_id, status)


def run_batch(store, api, deployment, requests):
    report = submit(store, api, deployment, requests)
    assert len(report.submitted) == 1 and not report.online, report
    row = report.submitted[0]
    return row, finish(store, api, row.batch_id)


def read_s3(uri: str) -> bytes:
    bucket, _, key = uri[len("s3://"):].partition("/")
    return boto3.client("s3", region_name="us-west-2").get_object(Bucket=bucket, Key=key)["Body"].read()


# ---------------------------------------------------------------------------------------------
# What is sent
# ---------------------------------------------------------------------------------------------
class Recorder:
    """A loopback Bedrock runtime for the online client: keeps each raw body, answers a short reply."""

    def __init__(self):
        self.bodies: list[tuple[str, bytes]] = []
        rec = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                rec.bodies.append((self.path, self.rfile.read(int(self.headers["Content-Length"]))))
                if self.path.endswith("/converse"):
                    reply = {"output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
                             "stopReason": "end_turn", "usage": {"inputTokens": 1, "outputTokens": 1},
                             "metrics": {"latencyMs": 5}}
                else:
                    reply = {"generation": "ok", "prompt_token_count": 1, "generation_token_count": 1,
                             "stop_reason": "stop"}
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"


@pytest.mark.parametrize("deployment,invocation", [(NOVA, "Converse"), (LLAMA, "InvokeModel")])
def test_records_are_the_online_bodies_byte_for_byte(store, bedrock, aws_env, deployment, invocation):  # noqa: F811
    server, api = bedrock(deployment)
    rec = Recorder()
    aws_env.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", rec.url)
    online = oracle_client(deployment)
    requests = keyed(deployment, [st["request"] for st in oracle_states(deployment)] + edge_requests(deployment))
    assert len(requests) >= 20
    expected = []
    for key, request in requests.items():
        assert online.attempt(request).kind == "ok"
        path, body = rec.bodies[-1]
        assert path.endswith("/converse" if invocation == "Converse" else "/invoke")
        assert online.wire_body(online.raw_request(request)) == body   # the online client's own builder
        line = api.line(key, request)
        assert line == b'{"recordId":"' + key.encode() + b'","modelInput":' + body + b"}"
        expected.append(line)
    rec.httpd.shutdown()
    (row,) = submit(store, api, deployment, requests).submitted
    # The S3 input file holds each online body, to the byte; the job is the deployment's model's.
    assert read_s3(row.input_file_id) == b"".join(line + b"\n" for line in expected)
    assert row.input_file_id.endswith(f"/medhelm-batch/input/medhelm-{row.batch_id}.jsonl")
    (create,) = server.create_bodies
    model_id = online.raw_request(next(iter(requests.values())))["modelId"]
    assert create == {"jobName": job_name(row.batch_id), "roleArn": ROLE, "clientRequestToken": request_token(row.batch_id),
                      "modelId": model_id, "modelInvocationType": invocation,
                      "inputDataConfig": {"s3InputDataConfig": {"s3Uri": row.input_file_id, "s3InputFormat": "JSONL"}},
                      "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": api.output_prefix}}}
    assert row.vendor == "bedrock" and row.state == "Submitted" and row.vendor_batch_id.startswith("arn:aws:bedrock:")
    assert all(a.startswith("AWS4-HMAC-SHA256 Credential=AKIAMOCK") for a in server.auth)  # SigV4, the deployment's keys


def test_requests_the_online_client_refuses_are_fatal_before_any_upload(store, bedrock):
    server, api = bedrock(LLAMA, min_requests=1)
    good = _request(model="meta/amazon-llama3-8b-instruct-v1:0", prompt="fine?")
    both = _request(model="meta/amazon-llama3-8b-instruct-v1:0", prompt="")
    both.pop("prompt")          # no prompt at all: HELM raises before sending
    echo = _request(model="meta/amazon-llama3-8b-instruct-v1:0", echo_prompt=True)
    requests = keyed(LLAMA, [good, both, echo])
    report = submit(store, api, LLAMA, requests)
    online = oracle_client(LLAMA)
    assert set(report.invalid) == {request_key(LLAMA, both), request_key(LLAMA, echo)}
    for key, attempt in report.invalid.items():
        assert attempt.kind == FATAL and attempt.message == online.attempt(requests[key]).message
    assert [r.num_requests for r in report.submitted] == [1] and server.creates == 1


# ---------------------------------------------------------------------------------------------
# What comes back
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("deployment", [NOVA, LLAMA])
def test_batch_answers_equal_online_answers_and_helms(store, bedrock, deployment):
    server, api = bedrock(deployment)
    online = oracle_client(deployment)
    states = oracle_states(deployment)
    requests = keyed(deployment, [st["request"] for st in states] + edge_requests(deployment))
    golden = {request_key(deployment, st["request"]): st["result"] for st in states}
    row, results = run_batch(store, api, deployment, requests)
    assert results.state == "Completed" and results.batch_error is None
    assert set(results.outcomes) == set(requests)
    for key, request in requests.items():
        got, want = results.outcomes[key].attempt, online.attempt(request)
        assert results.outcomes[key].state == ANSWERED, results.outcomes[key].error
        assert (got.kind, got.untruncated) == (want.kind, want.untruncated)
        assert without_clock(got.result) == without_clock(want.result)
        assert list(got.result) == list(want.result)   # the same fields in the same order, clock included
        if deployment == NOVA:  # Converse: the reply's own latencyMs, as online
            assert got.result["request_time"] == want.result["request_time"]
            assert got.usage == want.usage
        if key in golden:                              # and HELM's own result
            assert without_clock(got.result) == without_clock(golden[key])
    assert len(golden) >= 20
    assert ledger.get(store, row.batch_id).request_counts == {"total": len(requests), "processed": len(requests),
                                                              "succeeded": len(requests), "failed": 0}
    store_collected(store, row.batch_id, results, store_answers(deployment))
    assert ledger.get(store, row.batch_id).state == "collected"
    assert submit(store, api, deployment, requests).submitted == [] and server.creates == 1


def test_errors_partial_completion_and_odd_records_come_back_per_key(store, bedrock):
    requests = keyed(LLAMA, [_request(model="meta/amazon-llama3-8b-instruct-v1:0", prompt=f"q{i}") for i in range(8)])
    keys = list(requests)
    server, api = bedrock(LLAMA, item_errors={keys[0]: (400, "Malformed input request"),
                                              keys[1]: (429, "Too many requests"),
                                              keys[2]: (500, "Internal error"),
                                              keys[3]: ("ModelTimeoutException", "Model timed out")},
                          unprocessed={keys[4]})
    row, results = run_batch(store, api, LLAMA, requests)
    assert results.state == "PartiallyCompleted" and "PartiallyCompleted" in results.batch_error
    assert set(results.outcomes) == set(requests)                        # none dropped
    o = results.outcomes
    assert (o[keys[0]].state, o[keys[0]].attempt.kind) == (FAILED_ITEM, FATAL)   # refused as online
    assert "ValidationException (HTTP 400): Malformed input request" in o[keys[0]].error
    assert (o[keys[1]].state, o[keys[1]].attempt.kind) == (RETRY, RATE_LIMITED)
    assert (o[keys[2]].state, o[keys[2]].attempt.kind) == (RETRY, SERVER_ERROR)
    assert (o[keys[3]].state, o[keys[3]].attempt.kind) == (RETRY, SERVER_ERROR)
    assert (o[keys[4]].state, o[keys[4]].attempt.kind) == (RETRY, TIMEOUT) and "not run" in o[keys[4]].error
    assert {o[k].state for k in keys[5:]} == {ANSWERED}
    store_collected(store, row.batch_id, results, store_answers(LLAMA))
    items = ledger.items(store, row.batch_id)
    assert [items[k][0] for k in keys] == ["failed", "retry", "retry", "retry", "retry"] + ["answered"] * 3
    with store.connect() as conn:   # what was not answered is free for the next batch or the online path
        assert ledger.unbatched(conn, requests) == keys[:5]


def test_an_expired_job_gives_every_key_back(store, bedrock):
    server, api = bedrock(NOVA, expire=True)
    requests = keyed(NOVA, [_request(prompt=f"q{i}") for i in range(6)])
    row, results = run_batch(store, api, NOVA, requests)
    assert results.state == "Expired" and "Expired" in results.batch_error
    assert {(o.state, o.attempt.kind) for o in results.outcomes.values()} == {(RETRY, TIMEOUT)}
    assert set(results.outcomes) == set(requests)
    assert not any(m == "POST" and "/model/" in p for m, p in server.log)


def test_a_stopped_job_gives_every_key_back(store, bedrock):
    server, api = bedrock(NOVA, polls_per_state=100)
    requests = keyed(NOVA, [_request(prompt=f"q{i}") for i in range(6)])
    (row,) = submit(store, api, NOVA, requests).submitted
    assert poll(store, api, row).state in RUNNING_STATES
    assert api.cancel(row.vendor_batch_id).state in ("Stopping", "Stopped")
    server.polls_per_state = 1
    results = finish(store, api, row.batch_id)
    assert results.state == "Stopped" and results.state in ENDED_STATES
    assert {o.state for o in results.outcomes.values()} == {RETRY} and set(results.outcomes) == set(requests)
    assert all("not run: job" in o.error and "Stopped" in o.error for o in results.outcomes.values())


def test_a_failed_job_says_why_and_asks_everything_again(store, bedrock):
    server, api = bedrock(NOVA, min_requests=2, min_records=10)   # the account's quota is higher than we were told
    requests = keyed(NOVA, [_request(prompt=f"q{i}") for i in range(3)])
    row, results = run_batch(store, api, NOVA, requests)
    assert results.state == "Failed" and "below the minimum" in results.batch_error
    assert {o.state for o in results.outcomes.values()} == {RETRY}
    assert "below the minimum" in ledger.get(store, row.batch_id).error


# ---------------------------------------------------------------------------------------------
# The minimum: fewer records than Bedrock takes go online
# ---------------------------------------------------------------------------------------------
def test_fewer_records_than_the_minimum_are_left_to_the_online_path(store, bedrock):
    server, api = bedrock(NOVA, min_requests=100)
    assert BEDROCK.min_requests == 100 and api.min_requests == 100
    requests = keyed(NOVA, [_request(prompt=f"q{i}") for i in range(99)])
    report = submit(store, api, NOVA, requests)
    assert report.submitted == [] and report.online == list(requests) and report.skipped == []
    assert server.creates == 0 and server.log == [] and ledger.outstanding(store) == []
    with store.connect() as conn:
        assert ledger.unbatched(conn, requests) == list(requests)    # held by nothing: online asks them


def test_jobs_are_even_within_the_quota_and_one_model_each(bedrock):
    _, api = bedrock(NOVA, min_requests=50)
    api.max_requests = 120
    lines, _ = api.lines(keyed(NOVA, [_request(prompt=f"q{i}") for i in range(150)]))
    assert [len(c) for c in api.chunks(lines)] == [75, 75]        # not 120 + 30 (below the minimum)
    api.min_requests = 100                                        # two jobs cannot both reach 100:
    assert [len(c) for c in api.chunks(lines)] == [120]           # one full job, 30 left online
    lines, _ = api.lines(keyed(NOVA, [_request(prompt=f"q{i}") for i in range(260)]))
    assert [len(c) for c in api.chunks(lines)] == [120, 120]      # 20 more than two jobs hold: online
    api.min_requests = 50
    assert [len(c) for c in api.chunks(lines)] == [87, 86, 87]
    other = BedrockBatchAPI(oracle_client(LLAMA), s3_uri="s3://bkt", role_arn=ROLE, min_requests=2)
    mixed = {request_key(LLAMA, r): r for r in [_request(model="meta/amazon-llama3-8b-instruct-v1:0", prompt=f"q{i}")
                                                for i in range(3)]
             + [_request(model="meta/amazon-llama3-70b-instruct-v1:0", prompt=f"q{i}") for i in range(2)]
             + [_request(model="meta/amazon-llama3-1b-instruct-v1:0", prompt="alone")]}
    lines, _ = other.lines(mixed)
    assert [len(c) for c in other.chunks(lines)] == [3, 2]        # the model asked once is left online


# ---------------------------------------------------------------------------------------------
# Durable
# ---------------------------------------------------------------------------------------------
def test_the_row_and_the_upload_are_there_before_the_create_is_sent(store, bedrock):
    seen = []
    server, api = bedrock(NOVA)
    server.on_create = lambda: seen.append(ledger.outstanding(store, NOVA))
    requests = keyed(NOVA, [_request(prompt=f"q{i}") for i in range(5)])
    (row,) = submit(store, api, NOVA, requests).submitted
    (before,) = seen[0]
    assert (before.batch_id, before.state, before.vendor_batch_id) == (row.batch_id, "uploaded", None)
    assert before.input_file_id == row.input_file_id and read_s3(before.input_file_id).count(b"\n") == 5
    assert sorted(ledger.item_keys(store, row.batch_id, "queued")) == sorted(requests)


def test_a_lost_create_answer_is_found_again_not_paid_twice(store, bedrock):
    server, api = bedrock(NOVA, lose_create_answer=True)
    requests = keyed(NOVA, [_request(prompt=f"q{i}") for i in range(5)])
    report = submit(store, api, NOVA, requests)
    assert report.submitted == [] and len(report.unacknowledged) == 1 and server.creates == 1
    assert ledger.get(store, report.unacknowledged[0]).state == "uploaded"
    assert submit(store, api, NOVA, requests).submitted == []       # still held
    server.lose_create_answer = False
    (row,) = resume(store, api, NOVA)     # its submitter is done: found by jobName, not created again
    assert server.creates == 1 and row.vendor_batch_id == next(iter(server.jobs.values()))["jobArn"]
    assert any(m == "GET" and "nameContains=" + job_name(row.batch_id) in p for m, p in server.log)
    results = finish(store, api, row.batch_id)
    assert {o.state for o in results.outcomes.values()} == {ANSWERED} and len(results.outcomes) == 5


def test_a_create_again_is_the_same_job_by_its_request_token(store, bedrock, monkeypatch):
    server, api = bedrock(NOVA, lose_create_answer=True)
    requests = keyed(NOVA, [_request(prompt=f"q{i}") for i in range(5)])
    (batch_id,) = submit(store, api, NOVA, requests).unacknowledged
    server.lose_create_answer = False
    monkeypatch.setattr(api, "find_batch", lambda *a, **k: None)   # a list that does not show it yet
    (row,) = resume(store, api, NOVA)      # created again: the same clientRequestToken, the same job
    assert server.creates == 1 and len(server.create_bodies) == 1 and row.vendor_batch_id is not None
    assert row.vendor_batch_id == next(iter(server.jobs.values()))["jobArn"]
    assert {o.state for o in finish(store, api, row.batch_id).outcomes.values()} == {ANSWERED}


def test_an_upload_never_recorded_is_found_by_name_or_abandoned(store, bedrock):
    server, api = bedrock(NOVA)
    requests = keyed(NOVA, [_request(prompt=f"q{i}") for i in range(5)])
    lines, _ = api.lines(requests)
    batch_id, keys = ledger.reserve(store, NOVA, "bedrock", api.endpoint, requests, dead_owner())
    # Killed after the PUT, before record_upload: resume finds the object by its name and creates the job once.
    api.upload(b"".join(lines[k] + b"\n" for k in keys), ledger.input_file_name(batch_id))
    (row,) = resume(store, api, NOVA)
    assert row.input_file_id.endswith(ledger.input_file_name(batch_id)) and server.creates == 1
    # Killed before the PUT: nothing at the vendor, the keys are free again.
    more = keyed(NOVA, [_request(prompt=f"r{i}") for i in range(5)])
    other, _ = ledger.reserve(store, NOVA, "bedrock", api.endpoint, more, dead_owner())
    resume(store, api, NOVA)
    assert ledger.get(store, other).state == "abandoned" and server.creates == 1


# ---------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------
def test_bedrock_deployments_batch_at_half_price_with_their_bucket_and_role(bedrock, bucket):
    registry = load_model_registry(None)
    for name in ("amazon/nova-pro-v1:0", "amazon/llama3-8b-instruct-v1:0"):
        assert flavour_of(registry.get_deployment(name)) is BEDROCK
    assert BEDROCK.discount == 0.5 and BEDROCK.uploads
    settings = SettingsRegistry.load()("amazon/nova-pro-v1:0")
    assert settings.effective_batch_discount(BEDROCK.discount) == 0.5
    client = oracle_client(NOVA)
    with pytest.raises(MedhelmError, match="batch_s3_uri"):
        batch_api(client, BEDROCK, settings=settings)
    with pytest.raises(MedhelmError, match="batch_role_arn"):
        batch_api(client, BEDROCK, settings=settings.model_copy(update={"batch_s3_uri": f"s3://{bucket}/x"}))
    api = batch_api(client, BEDROCK, 500, settings.model_copy(update={"batch_s3_uri": f"s3://{bucket}/x/",
                                                                      "batch_role_arn": ROLE}))
    assert isinstance(api, BedrockBatchAPI) and api.prefix == f"s3://{bucket}/x" and api.max_requests == 500
    assert record_id("a" * 64) == "a" * 64 and len(record_id("k/with:odd chars")) == 64


# ---------------------------------------------------------------------------------------------
# A suite by batch against the same suite online (HELM's vendor-clients oracle, its Bedrock runs)
# ---------------------------------------------------------------------------------------------
SUITE_ENTRIES = [
    "medhelm_configurable_benchmark:model=amazon/nova-pro-v1:0,model_deployment=amazon/nova-pro-v1:0,"
    "config_path=work/benchmarks/exact_match_demo/config.yaml",
    "medhelm_configurable_benchmark:model=amazon/nova-pro-v1:0,model_deployment=amazon/nova-pro-v1:0,"
    "config_path=work/benchmarks/jury_demo/config.yaml",
    "medhelm_configurable_benchmark:model=meta/amazon-llama3-8b-instruct-v1:0,"
    "model_deployment=amazon/llama3-8b-instruct-v1:0,config_path=work/benchmarks/exact_match_demo/config.yaml",
    "medhelm_configurable_benchmark:model=meta/amazon-llama3-8b-instruct-v1:0,"
    "model_deployment=amazon/llama3-8b-instruct-v1:0,config_path=work/benchmarks/jury_demo/config.yaml",
]


@pytest.fixture(scope="module")
def suite_pair(tmp_path_factory, s3_endpoint):
    """The oracle's four Bedrock runs (two with a Stanford-gateway jury, asked online) run online, and with
    the Bedrock deployments by batch, against one runtime mock."""
    import shutil

    from medhelm_core.run import datasets, entries, suite
    from medhelm_core.run.batch_pass import batch_pass
    from medhelm_core.run.workspace import Workspace
    from medhelm_core.selections import RunSelection
    from tests.helm_clients import VendorMock, log_lines, make_writable, repoint, vendor_env

    if not VENDOR_MOCK_SERVER.is_file():
        pytest.skip("shared/tools/mock_vendor_server.py not present")
    base = tmp_path_factory.mktemp("bedrock-suite")
    mock = VendorMock(VENDOR_MOCK_SERVER, base / "runtime.jsonl")
    mp = pytest.MonkeyPatch()
    servers = []
    try:
        for k in ("AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL",
                  "BEDROCK_ASSUME_ROLE", "HELM_CREDENTIALS", "MEDHELM_STORAGE"):
            mp.delenv(k, raising=False)
        for k, v in vendor_env(VENDOR / "inputs" / "prod_env" / "env.json", mock.port).items():
            mp.setenv(k, v)
        mp.setenv("AWS_CONFIG_FILE", str(base / "absent-config"))
        mp.setenv("AWS_SHARED_CREDENTIALS_FILE", str(base / "absent-credentials"))
        mp.setenv("AWS_ENDPOINT_URL_S3", s3_endpoint)
        boto3.client("s3", region_name="us-west-2").create_bucket(
            Bucket="medhelm-suite", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        out = {}
        for mode in ("online", "batch"):
            root = base / mode
            shutil.copytree(VENDOR / "inputs", root / "work")
            make_writable(root / "work")
            repoint(root / "work" / "prod_env", mock.port)
            server = MockBedrockBatchServer(s3_endpoint, upstream=mock.origin, min_records=5)
            servers.append(server)
            mp.setenv("AWS_ENDPOINT_URL_BEDROCK", server.endpoint)
            (root / "work" / "prod_env" / "medhelm_deployments.yaml").write_text(
                'deployments:\n  "amazon/*": {batch: %s, batch_poll_seconds: 0.05, batch_min_requests: 5,'
                ' batch_s3_uri: "s3://medhelm-suite/%s", batch_role_arn: "%s"}\n' % (
                    str(mode == "batch").lower(), mode, ROLE))
            mp.chdir(root)
            ws = Workspace(root / "out", root / "work" / "prod_env", num_threads=4)
            selection = RunSelection(conf_paths=[], run_entries=SUITE_ENTRIES, suite="bedrock", max_eval_instances=10)
            with_entries = entries.expand_selection(ws, selection)
            runs = entries.register_runs(ws, selection.suite, with_entries)
            for keys in entries.scenario_partitions(with_entries, ws.catalog).values():
                for key in keys:
                    datasets.build_dataset(ws, key)
            events = []
            report = batch_pass(ws, runs, wait=True, on_event=events.append, sleep=lambda s: None) \
                if mode == "batch" else None
            before = len(log_lines(mock.log))
            outcomes = list(suite.run_suite(ws, runs))
            assert [o.error for o in outcomes] == [None] * len(runs)
            online_calls = [r for r in log_lines(mock.log)[before:] if r.get("wire", "").startswith("bedrock")]
            out[mode] = {"ws": ws, "root": root, "report": report, "events": events, "server": server,
                         "bedrock_calls_in_runs": len(online_calls)}
        yield out
    finally:
        mp.undo()
        for s in servers:
            s.close()
        mock.close()


def test_a_suite_by_batch_asks_bedrock_nothing_online(suite_pair):
    batch = suite_pair["batch"]
    report = batch["report"]
    assert report.errors == [] and report.retry == 0 and report.failed == 0
    assert report.requests_submitted == {"model": report.answered} and report.answered == 40
    assert len(report.submitted) == 2 and batch["server"].creates == 2      # one job per deployment
    assert batch["bedrock_calls_in_runs"] == 0                               # every Bedrock answer came by batch
    assert suite_pair["online"]["bedrock_calls_in_runs"] == 40
    assert any("amazon/nova-pro-v1:0: submitted batch" in e for e in batch["events"])


def test_a_suite_by_batch_writes_the_files_and_tables_of_the_online_run(suite_pair):
    from tests.batch.test_batch_pass import PER_INSTANCE, completions, normalised, run_files, table

    online, batch = suite_pair["online"], suite_pair["batch"]
    a, b = run_files(online["root"] / "out", "bedrock"), run_files(batch["root"] / "out", "bedrock")
    assert set(a) == set(b) and len(a) >= 4 * 5
    for name in a:
        assert normalised(a[name]) == normalised(b[name]), name
    db_a, db_b = online["root"] / "out" / "medhelm.duckdb", batch["root"] / "out" / "medhelm.duckdb"
    for name, sql in PER_INSTANCE.items():
        got, want = table(db_b, sql), table(db_a, sql)
        assert got == want, name
    assert completions(db_b) == completions(db_a)


def test_a_suite_by_batch_equals_helms_golden_completions(suite_pair):
    out = suite_pair["batch"]["root"] / "out" / "runs" / "bedrock"
    n = 0
    for gold_file in sorted((VENDOR / "benchmark_output" / "runs").glob("vendor-cfg/*amazon*/scenario_state.json")):
        ours = load(out / gold_file.parent.name / "scenario_state.json")["request_states"]
        gold = load(gold_file)["request_states"]
        assert len(ours) == len(gold)
        for o, g in zip(ours, gold):
            assert o["request"] == g["request"]
            assert without_clock(o["result"]) == without_clock(g["result"])
            n += 1
    assert n == 40
