"""Vertex AI batch prediction for Gemini (medhelm_core/batch/vertex.py) through the real google-genai SDK in
Vertex AI mode against a loopback mock of the batchPredictionJobs REST API (tests/mock_vertex_batch.py) that
reads its input from and writes its output to the GCS emulator, and answers each line's request by forwarding
it to the repo's online mock (shared/tools/mock_vendor_server.py, Vertex AI path): a line's request is the
online body byte for byte, batch answers equal online answers (and HELM's golden results), every key comes
back with its own outcome (matched by its echoed request), a create whose answer was lost is found again by
its display name, not paid twice, and a Vertex Gemini jury batched behind an OpenAI model gives the files and
tables of the online run."""
from __future__ import annotations

import json
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("google.genai")
pytest.importorskip("gcsfs")
pytest.importorskip("gcp_storage_emulator")

from medhelm_core.batch import (ANSWERED, FAILED_ITEM, RETRY, batch_api, collect, flavour_of, ledger,  # noqa: E402
                                poll, resume, store_collected, submit)
from medhelm_core.batch.gemini import GeminiBatchAPI  # noqa: E402
from medhelm_core.batch.protocol import ENDED_STATES, GEMINI, VERTEX  # noqa: E402
from medhelm_core.batch.vertex import VertexBatchAPI, canonical, status_error  # noqa: E402
from medhelm_core.clients import client_for_deployment  # noqa: E402
from medhelm_core.clients.google_genai import CLASS_NAME  # noqa: E402
from medhelm_core.clients.vertexai import CLASS_NAME as VERTEXAI_CLASS, VertexAIChatClient  # noqa: E402
from medhelm_core.errors import MedhelmError  # noqa: E402
from medhelm_core.helm_config.deployments import Deployment, parse_credentials  # noqa: E402
from medhelm_core.ratelimit import (CONTENT_FILTER, FATAL, FATAL_ENDPOINT, RATE_LIMITED, SERVER_ERROR,  # noqa: E402
                                    TIMEOUT, SettingsRegistry)
from medhelm_core.store import request_key  # noqa: E402
from tests.batch.conftest import store_answers, without_clock  # noqa: E402
from tests.batch.test_batch_durable import dead_owner  # noqa: E402
from tests.batch.test_gemini_batch import (DEPLOYMENT, Recorder, edge_requests, gemini_request,  # noqa: E402
                                           oracle_states)
from tests.gcs_emulator import Emulator  # noqa: E402
from tests.mock_server import MockServer  # noqa: E402
from tests.mock_vertex_batch import MockVertexBatchServer  # noqa: E402
from tests.oracle import VENDOR_MOCK_SERVER  # noqa: E402

TOKEN = "ya29.vertex-batch-SECRET-0123456789"
PROJECT, LOCATION = "my-proj", "us-central1"


def keyed(requests: list[dict]) -> dict[str, dict]:
    return {request_key(DEPLOYMENT, r): r for r in requests}


def client_at(base_url: str, **args):
    dep = Deployment.model_validate({"name": DEPLOYMENT, "model_name": DEPLOYMENT, "client_spec": {
        "class_name": CLASS_NAME, "args": {"base_url": base_url, "project_id": PROJECT, "location": LOCATION,
                                           **args}}})
    return client_for_deployment(dep, parse_credentials("", "credentials.conf"), timeout_s=30)


@pytest.fixture(autouse=True)
def vertex_env(monkeypatch):
    """No Google environment of the machine's; application-default credentials = a fixed token."""
    import google.auth
    from google.oauth2.credentials import Credentials

    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL",
                 "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION",
                 "MEDHELM_API_KEY_GOOGLE", "GOOGLE_APPLICATION_CREDENTIALS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(google.auth, "default", lambda scopes=None, **kw: (Credentials(token=TOKEN), "adc-project"))


@pytest.fixture(scope="module")
def emulator():
    em = Emulator()
    yield em
    em.close()


@pytest.fixture
def gcs(emulator, monkeypatch):
    """The emulator for the code under test (`$STORAGE_EMULATOR_HOST`, gcsfs's own switch), and a fresh prefix."""
    for k, v in emulator.env().items():
        monkeypatch.setenv(k, v)
    return SimpleNamespace(fs=emulator.fs, uri=emulator.uri(f"batch-{uuid.uuid4().hex[:8]}"))


@pytest.fixture(scope="module")
def vendor_mock():
    if not VENDOR_MOCK_SERVER.is_file():
        pytest.skip("shared/tools/mock_vendor_server.py not present")
    server = MockServer(script=VENDOR_MOCK_SERVER)
    yield server.base_url[: -len("/v1")]
    server.close()


@pytest.fixture
def batch_server(vendor_mock, gcs):
    servers = []

    def make(**kw) -> MockVertexBatchServer:
        kw.setdefault("upstream", vendor_mock)
        server = MockVertexBatchServer(gcs.fs, **kw)
        servers.append(server)
        return server

    yield make
    for s in servers:
        s.close()


def api_at(server: MockVertexBatchServer, gcs, **kw) -> VertexBatchAPI:
    return batch_api(client_at(server.base_url), GEMINI, settings=SimpleNamespace(batch_gcs_uri=gcs.uri), **kw)


def run_batch(store, api, requests, polls: int = 10):
    report = submit(store, api, DEPLOYMENT, requests)
    assert len(report.submitted) == 1, report
    row = report.submitted[0]
    return row, finish(store, api, row.batch_id, polls)


def finish(store, api, batch_id, polls: int = 10):
    for _ in range(polls):
        status = poll(store, api, ledger.get(store, batch_id))
        if status.ended:
            break
    return collect(store, api, batch_id, status)


def online_attempt(status: int, body: dict, request: dict):
    """The Attempt the online Vertex AI client makes of `request` answered `status`/`body`."""
    rec = Recorder(status, body)
    try:
        return client_at(rec.url).attempt(request)
    finally:
        rec.close()


# ---------------------------------------------------------------------------------------------
# What is sent
# ---------------------------------------------------------------------------------------------
def test_lines_are_the_online_body_byte_for_byte(store, batch_server, gcs):
    server = batch_server(token=TOKEN, polls_per_state=100)
    rec = Recorder()
    try:
        online = client_at(rec.url)
        assert online.vertexai
        requests = keyed([st["request"] for st in oracle_states()] + edge_requests())
        assert len(requests) >= 20
        api = api_at(server, gcs)
        assert isinstance(api, VertexBatchAPI) and api.flavour is VERTEX
        expected = []
        for key, request in requests.items():
            assert online.attempt(request).kind == "ok"
            line = api.line(key, request)
            assert line == b'{"request": ' + rec.bodies[-1] + b"}"
            expected.append(line)
    finally:
        rec.close()
    (row,) = submit(store, api, DEPLOYMENT, requests).submitted
    assert row.input_file_id == f"{gcs.uri}/input/medhelm-{row.batch_id}.jsonl"
    gcs.fs.invalidate_cache()
    assert gcs.fs.cat_file(row.input_file_id) == b"".join(line + b"\n" for line in expected)   # to the byte
    assert json.loads(server.create_bodies[0]) == {
        "displayName": f"medhelm-{row.batch_id}", "model": "publishers/google/models/gemini-2.0-flash-001",
        "inputConfig": {"instancesFormat": "jsonl", "gcsSource": {"uris": [row.input_file_id]}},
        "outputConfig": {"predictionsFormat": "jsonl",
                         "gcsDestination": {"outputUriPrefix": f"{gcs.uri}/output/medhelm-{row.batch_id}"}}}
    assert [m + " " + p for m, p in server.log] == [
        f"POST /v1beta1/projects/{PROJECT}/locations/{LOCATION}/batchPredictionJobs"]
    assert server.auth == [f"Bearer {TOKEN}"]
    assert row.vendor == "vertex" and row.state == "JOB_STATE_PENDING" and row.num_requests == len(requests)
    assert row.vendor_batch_id.startswith(f"projects/{PROJECT}/locations/{LOCATION}/batchPredictionJobs/")


def test_requests_the_online_client_refuses_are_not_sent(store, batch_server, gcs):
    server = batch_server()
    online = client_at("http://127.0.0.1:9")
    bad = [gemini_request("echo", echo_prompt=True), gemini_request("", messages=[]),
           gemini_request("x", random="not-an-int")]
    requests = keyed(bad + [gemini_request("fine")])
    report = submit(store, api_at(server, gcs), DEPLOYMENT, requests)
    assert set(report.invalid) == set(list(requests)[:3])
    for key, attempt in report.invalid.items():
        want = online.attempt(requests[key])
        assert (attempt.kind, attempt.message) == (FATAL, want.message)
    assert server.creates == 1 and report.batched_keys == 1


def test_which_class_and_the_one_line_refusals(gcs):
    vertex = client_at("http://127.0.0.1:9")
    assert isinstance(batch_api(vertex, GEMINI, settings=SimpleNamespace(batch_gcs_uri=gcs.uri)), VertexBatchAPI)
    for bad in (None, "s3://bucket/x", "gs://"):
        with pytest.raises(MedhelmError) as e:
            batch_api(vertex, GEMINI, settings=SimpleNamespace(batch_gcs_uri=bad))
        assert "batch_gcs_uri" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(MedhelmError, match="batch_gcs_uri"):
        batch_api(vertex, GEMINI, settings=None)
    with pytest.raises(MedhelmError, match="Vertex AI"):   # the Gemini API's class still refuses Vertex AI
        GeminiBatchAPI(vertex)
    dep = Deployment.model_validate({"name": DEPLOYMENT, "model_name": DEPLOYMENT, "client_spec": {
        "class_name": CLASS_NAME, "args": {"base_url": "http://127.0.0.1:9"}}})
    gemini_api = client_for_deployment(dep, parse_credentials('googleApiKey: "k"', "c.conf"))
    assert type(batch_api(gemini_api, GEMINI)) is GeminiBatchAPI
    with pytest.raises(MedhelmError, match="Gemini API"):
        VertexBatchAPI(gemini_api, gcs_uri=gcs.uri)
    dep = Deployment.model_validate({"name": DEPLOYMENT, "model_name": DEPLOYMENT, "client_spec": {
        "class_name": CLASS_NAME, "args": {"base_url": "http://127.0.0.1:9", "genai_use_vertexai": True}}})
    express = client_for_deployment(dep, parse_credentials('googleApiKey: "k"', "c.conf"))   # a key, no project
    assert express.vertexai
    with pytest.raises(MedhelmError, match="project") as e:
        batch_api(express, GEMINI, settings=SimpleNamespace(batch_gcs_uri=gcs.uri))
    assert "\n" not in str(e.value)


def test_vertex_states_are_running_or_ended():
    for state in ("JOB_STATE_QUEUED", "JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_CANCELLING"):
        assert state not in ENDED_STATES
    for state in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED",
                  "JOB_STATE_PARTIALLY_SUCCEEDED"):
        assert state in ENDED_STATES


# ---------------------------------------------------------------------------------------------
# What comes back
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("echo", ["same", "proto"])
def test_batch_answers_equal_online_answers_and_helms(store, batch_server, vendor_mock, gcs, echo):
    server = batch_server(token=TOKEN, echo=echo)
    online = client_at(vendor_mock)
    states = oracle_states()
    requests = keyed([st["request"] for st in states] + edge_requests())
    golden = {request_key(DEPLOYMENT, st["request"]): st["result"] for st in states}
    api = api_at(server, gcs)
    row, results = run_batch(store, api, requests)
    assert results.state == "JOB_STATE_SUCCEEDED" and results.batch_error is None
    assert set(results.outcomes) == set(requests)
    for key, request in requests.items():
        got, want = results.outcomes[key].attempt, online.attempt(request)
        assert results.outcomes[key].state == ANSWERED, results.outcomes[key].error
        assert (got.kind, got.usage, got.status) == (want.kind, want.usage, want.status)
        assert without_clock(got.result) == without_clock(want.result)
        assert list(got.result) == list(want.result)
        if key in golden:
            assert without_clock(got.result) == without_clock(golden[key])
    assert len(golden) >= 20
    store_collected(store, row.batch_id, results, store_answers(DEPLOYMENT))
    assert ledger.get(store, row.batch_id).state == "collected"
    with store.connect() as conn:
        assert ledger.unbatched(conn, requests) == []
    assert submit(store, api, DEPLOYMENT, requests).submitted == [] and server.creates == 1


def test_keys_with_the_same_body_each_get_a_line(store, batch_server, gcs):
    server = batch_server()
    same = [gemini_request("Same question?"), gemini_request("Same question?", embedding=None)]
    requests = keyed(same + [gemini_request("Other question?")])
    assert len(requests) == 3
    row, results = run_batch(store, api_at(server, gcs), requests)
    assert [o.state for o in results.outcomes.values()] == [ANSWERED] * 3
    a, b, c = (results.outcomes[k].attempt.result for k in requests)
    assert without_clock(a) == without_clock(b) != without_clock(c)


def _candidate(text="", finish="STOP"):
    return {"content": {"role": "model", "parts": [{"text": text}] if text else []}, "finishReason": finish}


def test_errors_blocks_and_missing_keys_come_back_per_key(store, batch_server, gcs):
    reqs = [gemini_request(f"Question {i}: yes or no?") for i in range(9)]
    keys = list(keyed(reqs))
    errors = {0: (429, {"error": {"code": 429, "message": "Resource exhausted.", "status": "RESOURCE_EXHAUSTED"}}),
              1: (500, {"error": {"code": 500, "message": "Internal error encountered.", "status": "INTERNAL"}}),
              2: (400, {"error": {"code": 400, "message": "Please use a valid role: user, model.",
                                  "status": "INVALID_ARGUMENT"}}),
              3: (403, {"error": {"code": 403, "message": "Permission denied on the model",
                                  "status": "PERMISSION_DENIED"}})}
    reasons = {429: "Too Many Requests", 500: "Internal Server Error", 400: "Bad Request", 403: "Forbidden"}
    item_status = {f"Question {i}: yes or no?": f"{reasons[s]}: {json.dumps(b)}" for i, (s, b) in errors.items()}
    responses = {4: {"candidates": [_candidate("unsafe", "SAFETY")]},
                 5: {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}},
                 6: {"candidates": [_candidate("", "MAX_TOKENS")],
                     "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 0}}}
    server = batch_server(item_status=item_status,
                          item_responses={f"Question {i}: yes or no?": r for i, r in responses.items()},
                          drop_prompts={"Question 7: yes or no?"})
    requests = keyed(reqs)
    row, results = run_batch(store, api_at(server, gcs), requests)
    o = results.outcomes
    assert set(o) == set(keys)  # none dropped
    assert [(o[k].state, o[k].attempt.kind) for k in keys[:8]] == [
        (RETRY, RATE_LIMITED), (RETRY, SERVER_ERROR), (FAILED_ITEM, FATAL), (FAILED_ITEM, FATAL_ENDPOINT),
        (ANSWERED, CONTENT_FILTER), (ANSWERED, CONTENT_FILTER), (ANSWERED, "ok"), (RETRY, SERVER_ERROR)]
    assert "missing from the output" in o[keys[7]].error and o[keys[8]].state == ANSWERED
    for i, key in enumerate(keys[:7]):   # each the Attempt the online client makes of the same HTTP answer
        status, body = errors[i] if i in errors else (200, responses[i])
        want, got = online_attempt(status, body, requests[key]), o[key].attempt
        assert (got.kind, got.message, got.status, got.usage) == (want.kind, want.message, want.status, want.usage)
        assert without_clock(got.result) == without_clock(want.result)
    assert o[keys[6]].attempt.result["completions"][0] == {"text": "", "logprob": 0.0, "tokens": [],
                                                           "finish_reason": {"reason": "length"}}
    store_collected(store, row.batch_id, results, store_answers(DEPLOYMENT))
    with store.connect() as conn:  # asked again: the retries and the failures, not the answers
        assert sorted(ledger.unbatched(conn, keys)) == sorted([keys[i] for i in (0, 1, 2, 3, 7)])


def test_status_error_reads_the_text_googles_output_lines_carry():
    assert status_error('Bad Request: {"error": {"code": 400, "message": "m", "status": "INVALID_ARGUMENT"}}') == (
        400, {"error": {"code": 400, "message": "m", "status": "INVALID_ARGUMENT"}})
    assert status_error("Too Many Requests")[0] == 429
    assert status_error("Service Unavailable: try later")[0] == 503
    assert status_error({"code": 8, "message": "quota"})[0] == 429
    assert status_error("something odd")[0] == 500
    assert canonical({"b": [], "a": 1.0, "c": {"d": None}}) == canonical({"a": 1}) != canonical({"a": 1.5})


@pytest.mark.parametrize("how", ["expire", "fail"])
def test_an_expired_or_failed_job_gives_back_every_key(store, batch_server, gcs, how):
    server = batch_server(**{how: True})
    requests = keyed([gemini_request(f"q{i}") for i in range(3)])
    row, results = run_batch(store, api_at(server, gcs), requests)
    assert server.answered == [] and set(results.outcomes) == set(requests)
    if how == "expire":
        assert results.state == "JOB_STATE_EXPIRED" and results.batch_error == f"job {row.vendor_batch_id} expired"
        assert [(o.state, o.attempt.kind) for o in results.outcomes.values()] == [(RETRY, TIMEOUT)] * 3
    else:
        assert results.batch_error == f"job {row.vendor_batch_id} failed: 13: Internal error encountered."
        assert [(o.state, o.attempt.kind) for o in results.outcomes.values()] == [(RETRY, SERVER_ERROR)] * 3
    store_collected(store, row.batch_id, results)
    again = submit(store, api_at(server, gcs), DEPLOYMENT, requests)   # asked again, in a new job
    assert again.batched_keys == 3 and server.creates == 2


def test_a_partially_succeeded_job_keeps_its_answers_and_retries_the_rest(store, batch_server, gcs):
    server = batch_server(partial=True, drop_prompts={"q1"})
    requests = keyed([gemini_request(f"q{i}") for i in range(3)])
    _, results = run_batch(store, api_at(server, gcs), requests)
    assert results.state == "JOB_STATE_PARTIALLY_SUCCEEDED"
    assert [results.outcomes[k].state for k in requests] == [ANSWERED, RETRY, ANSWERED]
    assert "missing from the output" not in results.outcomes[list(requests)[1]].error   # the job says why
    assert results.batch_error == f"job {results.vendor_batch_id} partially_succeeded"


def test_a_cancelled_job_gives_back_every_key(store, batch_server, gcs):
    server = batch_server(polls_per_state=100)
    api = api_at(server, gcs)
    requests = keyed([gemini_request(f"q{i}") for i in range(3)])
    (row,) = submit(store, api, DEPLOYMENT, requests).submitted
    with pytest.raises(MedhelmError, match="still JOB_STATE_PENDING"):
        collect(store, api, row.batch_id)
    assert api.cancel(row.vendor_batch_id).state == "JOB_STATE_CANCELLED"
    assert ("POST", f"/v1beta1/{row.vendor_batch_id}:cancel") in server.log
    results = collect(store, api, row.batch_id)
    assert results.batch_error == f"job {row.vendor_batch_id} cancelled" and server.answered == []
    assert {o.state for o in results.outcomes.values()} == {RETRY} and set(results.outcomes) == set(requests)


# ---------------------------------------------------------------------------------------------
# Durable: a row before the upload, a lost create found again by its display name
# ---------------------------------------------------------------------------------------------
def test_the_row_is_there_before_the_upload_and_the_create(store, batch_server, gcs):
    seen = []
    server = batch_server(on_create=lambda: seen.append(ledger.outstanding(store, DEPLOYMENT)))
    requests = keyed([gemini_request(f"q{i}") for i in range(3)])
    (row,) = submit(store, api_at(server, gcs), DEPLOYMENT, requests).submitted
    (before,) = seen[0]
    assert (before.batch_id, before.state, before.vendor_batch_id) == (row.batch_id, "uploaded", None)
    assert before.input_file_id == row.input_file_id and row.vendor_batch_id in server.jobs


@pytest.mark.parametrize("page_size", [None, 1])
def test_a_lost_create_answer_is_found_by_name_not_created_again(store, batch_server, gcs, page_size):
    server = batch_server(lose_create_answer=True, page_size=page_size)
    api = api_at(server, gcs)
    requests = keyed([gemini_request(f"q{i}") for i in range(3)])
    report = submit(store, api, DEPLOYMENT, requests)
    assert report.submitted == [] and len(report.unacknowledged) == 1 and server.creates == 1
    server.lose_create_answer = False
    for i in range(3):   # newer jobs of ours
        submit(store, api, DEPLOYMENT, keyed([gemini_request(f"later {i}")]))
    assert submit(store, api, DEPLOYMENT, requests).submitted == []   # still held
    (row,) = resume(store, api_at(server, gcs), DEPLOYMENT, include_alive=True)
    assert row.acknowledged and server.creates == 4
    assert server.jobs[row.vendor_batch_id]["displayName"] == f"medhelm-{row.batch_id}"
    assert any("filter=display_name" in path and row.batch_id in path for _, path in server.log)
    results = finish(store, api, row.batch_id)
    assert {o.state for o in results.outcomes.values()} == {ANSWERED} and set(results.outcomes) == set(requests)
    store_collected(store, row.batch_id, results, store_answers(DEPLOYMENT))
    resume(store, api_at(server, gcs), DEPLOYMENT, include_alive=True)   # nothing left to find or create
    assert server.creates == 4 and server.answered.count("q0") == 1   # paid once


def test_a_dead_uploader_whose_file_arrived_is_created_once_from_that_file(store, batch_server, gcs):
    server = batch_server()
    api = api_at(server, gcs)
    requests = keyed([gemini_request(f"q{i}") for i in range(2)])
    batch_id, keys = ledger.reserve(store, DEPLOYMENT, "vertex", api.endpoint, requests, owner=dead_owner())
    lines, _ = api.lines(requests)
    api.upload(b"".join(lines[k] + b"\n" for k in keys), ledger.input_file_name(batch_id))   # never recorded
    fresh = api_at(server, gcs)   # another process: knows nothing of the file
    (row,) = resume(store, fresh, DEPLOYMENT)
    assert row.acknowledged and server.creates == 1
    assert server.jobs[row.vendor_batch_id]["model"] == "publishers/google/models/gemini-2.0-flash-001"
    assert {o.state for o in finish(store, fresh, batch_id).outcomes.values()} == {ANSWERED}


def test_no_secret_reaches_the_tables(store, batch_server, gcs):
    server = batch_server(token=TOKEN)
    requests = keyed([gemini_request("q"), gemini_request("r")])
    row, results = run_batch(store, api_at(server, gcs), requests)
    store_collected(store, row.batch_id, results, store_answers(DEPLOYMENT))
    bad = batch_server(token="another")   # refuses our token: the error is recorded without it
    report = submit(store, api_at(bad, gcs), DEPLOYMENT, keyed([gemini_request("s")]))
    assert list(report.abandoned.values())[0].startswith("vertex batch API: HTTP 401 UNAUTHENTICATED")
    with store.connect() as conn:
        for table in ("batches", "batch_items", "completions"):
            text = json.dumps(conn.execute(f"SELECT * FROM {table}").fetchall(), default=str)
            assert TOKEN not in text and "SECRET" not in text


def test_vertex_batches_at_half_price():
    from medhelm_core.helm_config.deployments import load_model_registry

    assert VERTEX.discount == 0.5 and flavour_of(load_model_registry(None).get_deployment(
        "google/gemini-2.5-flash")) is GEMINI   # the class; its client's mode picks VertexBatchAPI
    settings = SettingsRegistry.load()(DEPLOYMENT)
    assert settings.batch_discount == 0.5 and settings.batch_gcs_uri is None
    assert settings.batch_cost(1_000_000, 1_000_000) == pytest.approx((0.10 + 0.40) / 2)


# ---------------------------------------------------------------------------------------------
# A suite: a Vertex AI Gemini jury batched behind an OpenAI model gives what the online run gives
# ---------------------------------------------------------------------------------------------
def with_vertex_judge(root: Path, base_url: str, batch: bool, gcs_uri: str) -> str:
    from tests.batch.test_batch_pass import MENTAL_A, POLL, PRICES

    env = root / "work" / "prod_env"
    with (env / "model_deployments.yaml").open("a") as f:
        f.write(f"  - name: {DEPLOYMENT}\n    model_name: {DEPLOYMENT}\n    tokenizer_name: simple/tokenizer1\n"
                f"    max_sequence_length: 1000000\n    client_spec:\n"
                f'      class_name: "{CLASS_NAME}"\n      args:\n        base_url: "{base_url}"\n'
                f'        project_id: "{PROJECT}"\n        location: "{LOCATION}"\n')
    (env / "credentials.conf").write_text('mockaiApiKey: "sk-mock-not-a-secret"\n')
    flag = str(batch).lower()
    (env / "medhelm_deployments.yaml").write_text(
        f'deployments:\n  "mockai/*": {{batch: {flag}, batch_poll_seconds: {POLL}, {PRICES}}}\n'
        f'  "google/*": {{batch: {flag}, batch_poll_seconds: {POLL}, input_per_million: 0.1, '
        f'output_per_million: 0.4, batch_gcs_uri: "{gcs_uri}"}}\n')
    (root / "work" / "private" / "jury_vertex.yaml").write_text(
        f'judges:\n  - name: "gemini"\n    model: "{DEPLOYMENT}"\n    model_deployment: "{DEPLOYMENT}"\n')
    return MENTAL_A.replace("jury_config.yaml", "jury_vertex.yaml")


def test_a_vertex_jury_batched_behind_an_openai_model_equals_online(tmp_path_factory, monkeypatch, mock_server,
                                                                    vendor_mock, gcs):
    from medhelm_core.run import datasets, entries
    from medhelm_core.run.batch_pass import batch_pass
    from medhelm_core.run.workspace import Workspace
    from medhelm_core.selections import RunSelection
    from tests.batch.test_batch_pass import PER_INSTANCE, normalised, rows, run_files, run_online, table
    from tests.mock_openai_batch import MockBatchServer
    from tests.oracle import SYNTHETIC
    from tests.parity import lay_out_inputs

    openai_batch = MockBatchServer(upstream=mock_server.base_url)
    vertex_batch = MockVertexBatchServer(gcs.fs, upstream=vendor_mock, token=TOKEN)
    try:
        out = {}
        for mode in ("online", "batch"):
            root = tmp_path_factory.mktemp(f"vertex-{mode}")
            monkeypatch.chdir(root)
            lay_out_inputs(SYNTHETIC / "inputs", root, openai_batch.base_url)
            entry = with_vertex_judge(root, vertex_batch.origin if mode == "batch" else vendor_mock,
                                      batch=mode == "batch", gcs_uri=gcs.uri)
            ws = Workspace(root / "out", root / "work" / "prod_env", num_threads=4)
            selection = RunSelection(conf_paths=[], run_entries=[entry], suite="vertex", max_eval_instances=5)
            with_entries = entries.expand_selection(ws, selection)
            runs = entries.register_runs(ws, "vertex", with_entries)
            for keys in entries.scenario_partitions(with_entries, ws.catalog).values():
                for key in keys:
                    datasets.build_dataset(ws, key)
            report = batch_pass(ws, runs, wait=True) if mode == "batch" else None
            outcomes = run_online(ws, runs)
            out[mode] = (root, report, outcomes)
        root, report, outcomes = out["batch"]
        assert report.requests_submitted == {"model": 5, "judge": 5} and report.answered == 10, report
        assert report.batch_deployments == {"mockai/mock-gpt-a", DEPLOYMENT} and report.errors == []
        assert outcomes[0].new_calls == 0 and vertex_batch.creates == 1 and len(vertex_batch.answered) == 5
        ws = Workspace(root / "out", root / "work" / "prod_env")
        assert {s for (s,) in rows(ws, "SELECT status FROM judge_verdicts")} == {"ok"}
        assert {v for (v,) in rows(ws, "SELECT vendor FROM batches")} == {"openai", "vertex"}
        a, b = run_files(out["online"][0] / "out", "vertex"), run_files(root / "out", "vertex")
        assert set(a) == set(b) and len(a) == 5
        for name in a:
            assert normalised(a[name]) == normalised(b[name]), name
        db_a, db_b = out["online"][0] / "out" / "medhelm.duckdb", root / "out" / "medhelm.duckdb"
        for name in ("annotations", "judge_verdicts", "jury_scores", "instance_stats", "run_stats"):
            got, want = table(db_b, PER_INSTANCE[name]), table(db_a, PER_INSTANCE[name])
            assert got == want and got, name
    finally:
        vertex_batch.close()
        openai_batch.close()


# ---------------------------------------------------------------------------------------------
# HELM's other Gemini class, VertexAIChatClient (raw REST): the same VertexBatchAPI, its own bodies and reading
# ---------------------------------------------------------------------------------------------
def chat_client_at(base_url: str | None, **args):
    """A VertexAIChatClient deployment's online client (application-default credentials: the fixed token)."""
    if base_url is not None:
        args["base_url"] = base_url
    dep = Deployment.model_validate({"name": DEPLOYMENT, "model_name": DEPLOYMENT, "client_spec": {
        "class_name": VERTEXAI_CLASS, "args": {"project_id": PROJECT, "location": LOCATION, **args}}})
    return client_for_deployment(dep, parse_credentials("", "credentials.conf"), timeout_s=30)


def chat_api_at(server: MockVertexBatchServer, gcs, **args) -> VertexBatchAPI:
    client = chat_client_at(server.base_url, **args)
    return batch_api(client, flavour_of(client_deployment(client)), settings=SimpleNamespace(batch_gcs_uri=gcs.uri))


def client_deployment(client) -> Deployment:
    """A deployment of the client's class (what `batch_pass` hands `flavour_of`)."""
    assert isinstance(client, VertexAIChatClient)
    return Deployment.model_validate({"name": DEPLOYMENT, "model_name": DEPLOYMENT,
                                      "client_spec": {"class_name": VERTEXAI_CLASS}})


def chat_requests() -> list[dict]:
    """The oracle's Gemini requests, the Gemini edge requests, and what only this client's body shows."""
    return [st["request"] for st in oracle_states()] + edge_requests() + [
        gemini_request("", messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                                     {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Bye?"}]),
        gemini_request("Echo me: ", echo_prompt=True, stop_sequences=[" "]),
        gemini_request("Sample", temperature=1, top_p=0.5, top_k_per_token=3, max_tokens=7)]


def online_chat_attempt(status: int, body: dict, request: dict, **args):
    """The Attempt the online VertexAIChatClient makes of `request` answered `status`/`body`."""
    rec = Recorder(status, body)
    try:
        return chat_client_at(rec.url, **args).attempt(request)
    finally:
        rec.close()


def test_chat_client_deployments_batch_through_vertex(gcs):
    from medhelm_core.helm_config.deployments import load_model_registry

    registry = load_model_registry(None)
    for name in ("google/gemini-2.0-flash-001", "google/gemini-1.5-pro-001-safety-default"):
        dep = registry.get_deployment(name)
        assert dep.client_spec.class_name == VERTEXAI_CLASS and flavour_of(dep) is VERTEX
    settings = SimpleNamespace(batch_gcs_uri=gcs.uri)
    client = chat_client_at(None, location="us")   # no base URL: the jobs go where the online calls go
    api = batch_api(client, VERTEX, settings=settings)
    assert type(api) is VertexBatchAPI and api.flavour is VERTEX and api.client is client
    assert api._sdk._api_client.vertexai and api._sdk._api_client.project == PROJECT
    assert api._sdk._api_client._http_options.base_url.rstrip("/") == "https://aiplatform.us.rep.googleapis.com"
    assert api.endpoint == client.endpoint == "https://aiplatform.us.rep.googleapis.com"
    with pytest.raises(MedhelmError, match="batch_gcs_uri"):
        batch_api(client, VERTEX, settings=None)
    llama = chat_client_at("http://127.0.0.1:9", vertexai_model="publishers/meta/models/llama-3.1-8b-instruct-maas")
    with pytest.raises(MedhelmError, match="Gemini models") as e:
        batch_api(llama, VERTEX, settings=settings)
    assert "\n" not in str(e.value)
    assert TOKEN not in repr(api)


def test_chat_client_lines_are_its_online_body_byte_for_byte(store, batch_server, gcs):
    server = batch_server(token=TOKEN, polls_per_state=100)
    rec = Recorder()
    try:
        online = chat_client_at(rec.url)
        genai_online = client_at(rec.url)   # the other class's body differs: this test can tell them apart
        requests = keyed(chat_requests())
        assert len(requests) >= 25
        api = chat_api_at(server, gcs)
        assert isinstance(api, VertexBatchAPI) and api.flavour is VERTEX
        expected = []
        for key, request in requests.items():
            assert online.attempt(request).kind == "ok"
            line = api.line(key, request)
            assert line == b'{"request": ' + rec.bodies[-1] + b"}"
            model, body = online.wire_request(request)
            assert body == rec.bodies[-1] and online.url(request) == f"{rec.url}/v1beta1/{model}:generateContent"
            assert model == f"projects/{PROJECT}/locations/{LOCATION}/publishers/google/models/gemini-2.0-flash-001"
            if not request.get("echo_prompt"):
                assert genai_online.attempt(request).kind == "ok" and rec.bodies[-1] != body
            expected.append(line)
    finally:
        rec.close()
    (row,) = submit(store, api, DEPLOYMENT, requests).submitted
    assert row.input_file_id == f"{gcs.uri}/input/medhelm-{row.batch_id}.jsonl"
    gcs.fs.invalidate_cache()
    assert gcs.fs.cat_file(row.input_file_id) == b"".join(line + b"\n" for line in expected)   # to the byte
    assert json.loads(server.create_bodies[0]) == {
        "displayName": f"medhelm-{row.batch_id}", "model": "publishers/google/models/gemini-2.0-flash-001",
        "inputConfig": {"instancesFormat": "jsonl", "gcsSource": {"uris": [row.input_file_id]}},
        "outputConfig": {"predictionsFormat": "jsonl",
                         "gcsDestination": {"outputUriPrefix": f"{gcs.uri}/output/medhelm-{row.batch_id}"}}}
    assert [m + " " + p for m, p in server.log] == [
        f"POST /v1beta1/projects/{PROJECT}/locations/{LOCATION}/batchPredictionJobs"]
    assert server.auth == [f"Bearer {TOKEN}"]
    assert row.vendor == "vertex" and row.num_requests == len(requests)


def test_chat_client_safety_preset_and_model_arg_reach_the_lines_and_the_job(store, batch_server, gcs):
    server = batch_server()
    args = {"safety_settings_preset": "default", "vertexai_model": "gemini-1.5-pro-001"}
    api = chat_api_at(server, gcs, **args)
    rec = Recorder()
    try:
        online = chat_client_at(rec.url, **args)
        request = gemini_request("Is it?")
        online.attempt(request)
        assert api.line("k", request) == b'{"request": ' + rec.bodies[-1] + b"}"
        assert b"safetySettings" not in rec.bodies[-1]
    finally:
        rec.close()
    (row,) = submit(store, api, DEPLOYMENT, keyed([gemini_request("Is it?")])).submitted
    assert json.loads(server.create_bodies[0])["model"] == "publishers/google/models/gemini-1.5-pro-001"


def test_requests_the_online_chat_client_refuses_are_not_sent(store, batch_server, gcs):
    server = batch_server()
    online = chat_client_at("http://127.0.0.1:9")
    bad = [gemini_request("x", multimodal_prompt={"media_objects": []}),
           gemini_request("", messages=[{"role": "user"}]),
           {k: v for k, v in gemini_request("no model").items() if k != "model"}]
    requests = keyed(bad + [gemini_request("fine")])
    report = submit(store, chat_api_at(server, gcs), DEPLOYMENT, requests)
    assert set(report.invalid) == set(list(requests)[:3])
    for key, attempt in report.invalid.items():
        want = online.attempt(requests[key])
        assert want.kind == FATAL and (attempt.kind, attempt.message) == (FATAL, want.message)
    assert server.creates == 1 and report.batched_keys == 1


@pytest.mark.parametrize("echo", ["same", "proto"])
def test_chat_client_batch_end_to_end_equals_online(store, batch_server, vendor_mock, gcs, echo):
    server = batch_server(token=TOKEN, echo=echo)
    online = chat_client_at(vendor_mock)
    requests = keyed(chat_requests())
    api = chat_api_at(server, gcs)
    row, results = run_batch(store, api, requests)
    assert results.state == "JOB_STATE_SUCCEEDED" and results.batch_error is None
    assert set(results.outcomes) == set(requests) and len(server.answered) == len(requests)
    answered = 0
    for key, request in requests.items():
        got, want = results.outcomes[key].attempt, online.attempt(request)
        assert (got.kind, got.message, got.usage, got.status, got.untruncated) == (
            want.kind, want.message, want.usage, want.status, want.untruncated), key
        assert without_clock(got.result) == without_clock(want.result)
        if want.result is not None:
            answered += 1
            assert results.outcomes[key].state == ANSWERED
            assert list(got.result) == list(want.result)
    assert answered >= 20
    store_collected(store, row.batch_id, results, store_answers(DEPLOYMENT))
    assert ledger.get(store, row.batch_id).state == "collected"
    with store.connect() as conn:
        assert ledger.unbatched(conn, [k for k, o in results.outcomes.items() if o.state == ANSWERED]) == []
    assert submit(store, api, DEPLOYMENT, {k: requests[k] for k, o in results.outcomes.items()
                                           if o.state == ANSWERED}).submitted == [] and server.creates == 1


def test_chat_client_errors_and_blocks_come_back_as_its_online_attempts(store, batch_server, gcs):
    reqs = [gemini_request(f"Question {i}: yes or no?", stop_sequences=["\n"]) for i in range(11)]
    keys = list(keyed(reqs))
    retry_info = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"}
    errors = {0: (429, {"error": {"code": 429, "message": "Resource exhausted.", "status": "RESOURCE_EXHAUSTED",
                                  "details": [retry_info]}}),
              1: (503, {"error": {"code": 503, "message": "The service is unavailable.", "status": "UNAVAILABLE"}}),
              2: (400, {"error": {"code": 400, "message": "Please use a valid role: user, model.",
                                  "status": "INVALID_ARGUMENT"}}),
              3: (403, {"error": {"code": 403, "message": "Permission denied on the model",
                                  "status": "PERMISSION_DENIED"}})}
    reasons = {429: "Too Many Requests", 503: "Service Unavailable", 400: "Bad Request", 403: "Forbidden"}
    usage = {"promptTokenCount": 4, "candidatesTokenCount": 2}
    responses = {4: {"candidates": [{**_candidate("unsafe", "SAFETY"), "index": 0}], "usageMetadata": usage},
                 5: {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}},
                 6: {"candidates": [_candidate("", "MAX_TOKENS")],
                     "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 0}},
                 7: {"candidates": [{"content": {"role": "model", "parts": [{"text": "a"}, {"text": "b"}]},
                                     "finishReason": "STOP"}]},
                 8: {"candidates": [_candidate("Yes\nand more", "STOP")], "usageMetadata": usage}}
    item_status = {f"Question {i}: yes or no?": f"{reasons[s]}: {json.dumps(b)}" for i, (s, b) in errors.items()}
    server = batch_server(item_status=item_status,
                          item_responses={f"Question {i}: yes or no?": r for i, r in responses.items()},
                          drop_prompts={"Question 9: yes or no?"})
    requests = keyed(reqs)
    row, results = run_batch(store, chat_api_at(server, gcs), requests)
    o = results.outcomes
    assert set(o) == set(keys)
    assert [(o[k].state, o[k].attempt.kind) for k in keys] == [
        (RETRY, RATE_LIMITED), (RETRY, SERVER_ERROR), (FAILED_ITEM, FATAL), (FAILED_ITEM, FATAL_ENDPOINT),
        (ANSWERED, CONTENT_FILTER), (ANSWERED, CONTENT_FILTER), (ANSWERED, "ok"), (RETRY, SERVER_ERROR),
        (ANSWERED, "ok"), (RETRY, SERVER_ERROR), (ANSWERED, "ok")]
    assert "missing from the output" in o[keys[9]].error
    for i, key in enumerate(keys[:9]):   # each the Attempt the online client makes of the same HTTP answer
        status, body = errors[i] if i in errors else (200, responses[i])
        want, got = online_chat_attempt(status, body, requests[key]), o[key].attempt
        assert (got.kind, got.message, got.status, got.usage, got.retry_after_s, got.untruncated) == (
            want.kind, want.message, want.status, want.usage, want.retry_after_s, want.untruncated), i
        assert without_clock(got.result) == without_clock(want.result), i
    assert o[keys[0]].attempt.retry_after_s == 12.0
    assert o[keys[4]].attempt.result["error"] == "Content blocked: Content blocked with reason: 3"
    assert o[keys[4]].attempt.result["completions"] == [{"text": "", "logprob": 0, "tokens": []}]
    assert o[keys[6]].attempt.result["completions"] == [{"text": "", "logprob": 0, "tokens": []}]
    assert o[keys[8]].attempt.result["completions"] == [{"text": "Yes", "logprob": 0, "tokens": []}]
    assert o[keys[8]].attempt.untruncated == ["Yes\nand more"]


class RawAnswer:
    """A loopback endpoint answering every POST with `status` and the raw bytes `body`."""

    def __init__(self, status: int, body: bytes):
        from http.server import BaseHTTPRequestHandler

        from tests.mock_server import serve_loopback

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.httpd, _ = serve_loopback(Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize("status, body", [
    (200, b"not json"), (502, b"<html>Bad Gateway</html>"), (404, b'{"error": "gone"}'),
    (200, json.dumps({"candidates": [_candidate("Yes", "RECITATION")]}).encode()),
    (200, json.dumps({"candidates": []}).encode()),
    (200, json.dumps({"candidates": [{"content": {"role": "model", "parts": [{"text": "Si"}]}, "index": 0}],
                      "usageMetadata": {"promptTokenCount": 3, "thoughtsTokenCount": 5}}).encode()),
])
def test_chat_client_replay_is_its_online_reading(status, body):
    """`replay` straight, against the online client's reading of the same bytes; the clock fields the caller's."""
    request = gemini_request("q")
    server = RawAnswer(status, body)
    try:
        want = chat_client_at(server.url).attempt(request)
    finally:
        server.close()
    got = chat_client_at("http://127.0.0.1:9").replay(request, status, body, 1000.5, 2.5)
    assert (got.kind, got.message, got.status, got.usage) == (want.kind, want.message, want.status, want.usage)
    assert without_clock(got.result) == without_clock(want.result)
    if got.result is not None and got.result.get("success"):
        assert (got.result["request_time"], got.result["request_datetime"]) == (2.5, 1000)
