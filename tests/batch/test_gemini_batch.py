"""The Gemini API's batch mode (medhelm_core/batch/gemini.py) through the real google-genai SDK against a
loopback mock of the batch and Files APIs (tests/mock_gemini_batch.py) that answers each line's request by
forwarding it to the repo's online Gemini mock (shared/tools/mock_vendor_server.py): a line's request is the
online body byte for byte, batch answers equal online answers (and HELM's golden results), every key comes
back with its own outcome, a create whose answer was lost is found again by name, not paid twice, and a
Gemini jury batched behind an OpenAI model gives the files and tables of the online run."""
from __future__ import annotations

import json
import textwrap
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

pytest.importorskip("google.genai")

from medhelm_core.batch import (ANSWERED, FAILED_ITEM, RETRY, batch_api, collect, flavour_of, ledger,  # noqa: E402
                                poll, resume, store_collected, submit)
from medhelm_core.batch.gemini import GeminiBatchAPI, http_error  # noqa: E402
from medhelm_core.batch.protocol import ENDED_STATES, GEMINI, RUNNING_STATES, VERTEX  # noqa: E402
from medhelm_core.clients import client_for_deployment  # noqa: E402
from medhelm_core.clients.google_genai import CLASS_NAME  # noqa: E402
from medhelm_core.errors import MedhelmError  # noqa: E402
from medhelm_core.helm_config.deployments import Deployment, parse_credentials  # noqa: E402
from medhelm_core.jury.annotation import judge_request  # noqa: E402
from medhelm_core.ratelimit import (CONTENT_FILTER, FATAL, FATAL_ENDPOINT, RATE_LIMITED, SERVER_ERROR,  # noqa: E402
                                    TIMEOUT, SettingsRegistry)
from medhelm_core.store import request_key  # noqa: E402
from tests.batch.conftest import kill_9_when, spawn_python, store_answers, without_clock  # noqa: E402
from tests.batch.test_batch_durable import dead_owner  # noqa: E402
from tests.mock_gemini_batch import MockGeminiBatchServer  # noqa: E402
from tests.mock_server import MockServer, serve_loopback  # noqa: E402
from tests.oracle import VENDOR, VENDOR_MOCK_SERVER, load  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
KEY = "goog-batch-SECRET-0123456789"
DEPLOYMENT = "google/gemini-2.0-flash-001"


def gemini_request(prompt: str, **kw) -> dict:
    return {"model": DEPLOYMENT, "model_deployment": DEPLOYMENT, "embedding": False, "prompt": prompt,
            "temperature": 0.0, "num_completions": 1, "top_k_per_token": 1, "max_tokens": 40, "stop_sequences": [],
            "echo_prompt": False, "top_p": 1, "presence_penalty": 0, "frequency_penalty": 0, **kw}


def oracle_states() -> list[dict]:
    """HELM 0.5.16's own request states through its GoogleGenAIClient (model runs and jury demo)."""
    runs = sorted((VENDOR / "benchmark_output" / "runs").glob("*/*model_deployment=google_gemini*"))
    return [st for run in runs for st in load(run / "scenario_state.json")["request_states"]]


def edge_requests() -> list[dict]:
    return [
        gemini_request("", messages=[{"role": "system", "content": "Be brief; answer « oui » or « non »."},
                                     {"role": "user", "content": "Le cœur est-il un muscle?\u2028 Réponds."}]),
        gemini_request("Réponds: « oui » ou « non »?\u2028 \U0001f600 \"quoted\" \\ tab\t",
                       stop_sequences=["\n", "Réponse:"]),
        gemini_request("Sample freely, please.", temperature=0.7, top_p=0.95, top_k_per_token=5, random="7"),
        gemini_request("List three words", num_completions=2, max_tokens=5),
        judge_request({"model_deployment": DEPLOYMENT, "model_name": DEPLOYMENT},
                      'Rate the RESPONSE.\n<response>Le patient «va bien»</response>\nReply as JSON: '
                      '{"accuracy": {"score": 1-5, "explanation": "..."}}'),
    ]


def keyed(requests: list[dict]) -> dict[str, dict]:
    return {request_key(DEPLOYMENT, r): r for r in requests}


def client_at(base_url: str, key: str = KEY, **args):
    dep = Deployment.model_validate({"name": DEPLOYMENT, "model_name": DEPLOYMENT, "client_spec": {
        "class_name": CLASS_NAME, "args": {"base_url": base_url, **args}}})
    return client_for_deployment(dep, parse_credentials(f'googleApiKey: "{key}"', "credentials.conf"), timeout_s=30)


def api_at(server: MockGeminiBatchServer, **kw) -> GeminiBatchAPI:
    return batch_api(client_at(server.base_url), GEMINI, **kw)


@pytest.fixture(autouse=True)
def no_google_env(monkeypatch):
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_GENAI_USE_VERTEXAI",
                 "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "MEDHELM_API_KEY_GOOGLE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def vendor_mock():
    if not VENDOR_MOCK_SERVER.is_file():
        pytest.skip("shared/tools/mock_vendor_server.py not present")
    server = MockServer(script=VENDOR_MOCK_SERVER)
    yield server.base_url[: -len("/v1")]
    server.close()


@pytest.fixture
def batch_server(vendor_mock):
    servers = []

    def make(**kw) -> MockGeminiBatchServer:
        kw.setdefault("upstream", vendor_mock)
        server = MockGeminiBatchServer(**kw)
        servers.append(server)
        return server

    yield make
    for s in servers:
        s.close()


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


class Recorder:
    """A loopback Gemini endpoint for the online client: keeps each raw body, answers `status`/`body`."""

    def __init__(self, status: int = 200, body: dict | None = None):
        self.bodies: list[bytes] = []
        self.status = status
        self.body = body or {"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]},
                                             "finishReason": "STOP"}]}
        rec = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                rec.bodies.append(self.rfile.read(int(self.headers.get("content-length") or 0)))
                data = json.dumps(rec.body).encode()
                self.send_response(rec.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.httpd, _ = serve_loopback(Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


# ---------------------------------------------------------------------------------------------
# What is sent
# ---------------------------------------------------------------------------------------------
def test_lines_are_the_online_body_byte_for_byte(store, batch_server):
    server = batch_server(api_key=KEY, polls_per_state=100)
    rec = Recorder()
    try:
        online = client_at(rec.url)
        requests = keyed([st["request"] for st in oracle_states()] + edge_requests())
        assert len(requests) >= 20
        api = api_at(server)
        expected = []
        for key, request in requests.items():
            assert online.attempt(request).kind == "ok"
            body = rec.bodies[-1]
            line = api.line(key, request)
            assert line == b'{"key": "' + key.encode() + b'", "request": ' + body + b"}"
            expected.append(line)
    finally:
        rec.close()
    (row,) = submit(store, api, DEPLOYMENT, requests).submitted
    (uploaded,) = [f for f in server.files.values() if f["source"] == "UPLOADED"]
    assert uploaded["_data"] == b"".join(line + b"\n" for line in expected)   # the online bodies, to the byte
    assert uploaded["displayName"] == f"{row.input_file_name} models/gemini-2.0-flash-001"
    assert json.loads(server.create_bodies[0]) == {"batch": {"displayName": f"medhelm-{row.batch_id} "
                                                             f"{row.input_file_id}",
                                                             "inputConfig": {"fileName": row.input_file_id}}}
    assert [m + " " + p.split("?")[0] for m, p in server.log] == [
        "POST /upload/v1beta/files", "POST /upload/v1beta/files",
        "POST /v1beta/models/gemini-2.0-flash-001:batchGenerateContent"]
    assert row.vendor == "gemini" and row.state == "JOB_STATE_PENDING" and row.num_requests == len(requests)
    assert set(server.keys[:1] + server.keys[2:]) == {KEY}


def test_requests_the_online_client_refuses_are_not_sent(store, batch_server):
    server = batch_server()
    online = client_at("http://127.0.0.1:9")
    bad = [gemini_request("echo", echo_prompt=True), gemini_request("", messages=[]),
           gemini_request("x", random="not-an-int")]
    requests = keyed(bad + [gemini_request("fine")])
    report = submit(store, api_at(server), DEPLOYMENT, requests)
    assert set(report.invalid) == set(list(requests)[:3])
    for key, attempt in report.invalid.items():
        want = online.attempt(requests[key])
        assert (attempt.kind, attempt.message) == (FATAL, want.message)
    assert server.creates == 1 and report.batched_keys == 1


def test_a_vertex_ai_deployment_is_refused_with_one_line():
    class Vertex:
        vertexai = True
    with pytest.raises(MedhelmError, match="Vertex AI"):
        GeminiBatchAPI(Vertex())


def test_gemini_states_are_running_or_ended():
    for state in ("JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_CANCELLING"):
        assert state in RUNNING_STATES and state not in ENDED_STATES
    for state in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"):
        assert state in ENDED_STATES and state not in RUNNING_STATES


# ---------------------------------------------------------------------------------------------
# What comes back
# ---------------------------------------------------------------------------------------------
def test_batch_answers_equal_online_answers_and_helms(store, batch_server, vendor_mock):
    server = batch_server(api_key=KEY)
    online = client_at(vendor_mock)
    states = oracle_states()
    requests = keyed([st["request"] for st in states] + edge_requests())
    golden = {request_key(DEPLOYMENT, st["request"]): st["result"] for st in states}
    api = api_at(server)
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


def _candidate(text="", finish="STOP"):
    return {"content": {"role": "model", "parts": [{"text": text}] if text else []}, "finishReason": finish}


def test_errors_blocks_and_missing_keys_come_back_per_key(store, batch_server):
    reqs = [gemini_request(f"Question {i}: yes or no?") for i in range(9)]
    keys = list(keyed(reqs))
    item_errors = {keys[0]: {"code": 8, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED"},
                   keys[1]: {"code": 13, "message": "Internal error encountered.", "status": "INTERNAL"},
                   keys[2]: {"code": 3, "message": "Request contains an invalid argument.",
                             "status": "INVALID_ARGUMENT"},
                   keys[3]: {"code": 7, "message": "Permission denied on the model"}}
    item_responses = {keys[4]: {"candidates": [_candidate("unsafe", "SAFETY")]},
                      keys[5]: {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}},
                      keys[6]: {"candidates": [_candidate("", "MAX_TOKENS")],
                                "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 0}}}
    server = batch_server(item_errors=item_errors, item_responses=item_responses, drop_keys={keys[7]})
    requests = keyed(reqs)
    row, results = run_batch(store, api_at(server), requests)
    o = results.outcomes
    assert set(o) == set(keys)  # none dropped
    assert [(o[k].state, o[k].attempt.kind) for k in keys[:8]] == [
        (RETRY, RATE_LIMITED), (RETRY, SERVER_ERROR), (FAILED_ITEM, FATAL), (FAILED_ITEM, FATAL_ENDPOINT),
        (ANSWERED, CONTENT_FILTER), (ANSWERED, CONTENT_FILTER), (ANSWERED, "ok"), (RETRY, SERVER_ERROR)]
    assert "missing from the output" in o[keys[7]].error and o[keys[8]].state == ANSWERED
    # Each is the Attempt the online client makes of the same HTTP answer.
    for key in keys[:7]:
        if key in item_errors:
            status, body = http_error(item_errors[key])
        else:
            status, body = 200, item_responses[key]
        rec = Recorder(status, body)
        try:
            want = client_at(rec.url).attempt(requests[key])
        finally:
            rec.close()
        got = o[key].attempt
        assert (got.kind, got.message, got.status, got.usage) == (want.kind, want.message, want.status, want.usage)
        assert without_clock(got.result) == without_clock(want.result)
    assert o[keys[4]].attempt.result["error"].startswith("Content blocked: Content blocked with reason:")
    assert o[keys[6]].attempt.result["completions"][0] == {"text": "", "logprob": 0.0, "tokens": [],
                                                           "finish_reason": {"reason": "length"}}
    store_collected(store, row.batch_id, results, store_answers(DEPLOYMENT))
    with store.connect() as conn:  # asked again: the retries and the failures, not the answers
        assert sorted(ledger.unbatched(conn, keys)) == sorted([keys[i] for i in (0, 1, 2, 3, 7)])


def test_http_error_maps_rpc_codes_to_http_statuses():
    assert http_error({"code": 8, "message": "m"}) == (429, {"error": {"code": 429, "message": "m",
                                                                        "status": "RESOURCE_EXHAUSTED"}})
    assert http_error({"code": 14, "status": "UNAVAILABLE", "message": "x"})[0] == 503
    assert http_error({"code": 404, "status": "NOT_FOUND", "message": "x"})[0] == 404
    assert http_error({"status": "INVALID_ARGUMENT", "message": "x"})[0] == 400


def test_a_batch_that_expires_gives_back_every_key(store, batch_server):
    server = batch_server(expire=True)
    requests = keyed([gemini_request(f"q{i}") for i in range(3)])
    row, results = run_batch(store, api_at(server), requests)
    assert results.state == "JOB_STATE_EXPIRED" and server.answered == []
    assert results.batch_error == f"batch {row.vendor_batch_id} expired"
    assert [(o.state, o.attempt.kind) for o in results.outcomes.values()] == [(RETRY, TIMEOUT)] * 3
    store_collected(store, row.batch_id, results)
    again = submit(store, api_at(server), DEPLOYMENT, requests)   # asked again, in a new batch
    assert again.batched_keys == 3 and server.creates == 2


def test_a_failed_batch_gives_back_every_key(store, batch_server):
    server = batch_server(fail=True)
    requests = keyed([gemini_request(f"q{i}") for i in range(2)])
    _, results = run_batch(store, api_at(server), requests)
    assert results.state == "JOB_STATE_FAILED" and {o.state for o in results.outcomes.values()} == {RETRY}


def test_a_cancelled_batch_gives_back_every_key(store, batch_server):
    server = batch_server(polls_per_state=100)
    api = api_at(server)
    requests = keyed([gemini_request(f"q{i}") for i in range(3)])
    (row,) = submit(store, api, DEPLOYMENT, requests).submitted
    with pytest.raises(MedhelmError, match="still JOB_STATE_PENDING"):
        collect(store, api, row.batch_id)
    assert api.cancel(row.vendor_batch_id).state == "JOB_STATE_CANCELLED"
    results = collect(store, api, row.batch_id)
    assert results.batch_error == f"batch {row.vendor_batch_id} cancelled" and server.answered == []
    assert {o.state for o in results.outcomes.values()} == {RETRY} and set(results.outcomes) == set(requests)


# ---------------------------------------------------------------------------------------------
# Durable: a row before the upload, a lost create found again by name
# ---------------------------------------------------------------------------------------------
def test_the_row_is_there_before_the_upload_and_the_create(store, batch_server):
    seen = []
    server = batch_server(on_create=lambda: seen.append(ledger.outstanding(store, DEPLOYMENT)))
    requests = keyed([gemini_request(f"q{i}") for i in range(3)])
    (row,) = submit(store, api_at(server), DEPLOYMENT, requests).submitted
    (before,) = seen[0]
    assert (before.batch_id, before.state, before.vendor_batch_id) == (row.batch_id, "uploaded", None)
    assert before.input_file_id == row.input_file_id and row.vendor_batch_id in server.batches


@pytest.mark.parametrize("page_size", [None, 2])
def test_a_lost_create_answer_is_found_by_name_not_created_again(store, batch_server, page_size):
    server = batch_server(lose_create_answer=True, page_size=page_size)
    api = api_at(server)
    requests = keyed([gemini_request(f"q{i}") for i in range(3)])
    report = submit(store, api, DEPLOYMENT, requests)
    assert report.submitted == [] and len(report.unacknowledged) == 1 and server.creates == 1
    server.lose_create_answer = False
    for i in range(5):   # newer batches of ours: the lost one is past the first page
        submit(store, api, DEPLOYMENT, keyed([gemini_request(f"later {i}")]))
    assert submit(store, api, DEPLOYMENT, requests).submitted == []   # still held
    (row,) = resume(store, GeminiBatchAPI(client_at(server.base_url)), DEPLOYMENT, include_alive=True)
    assert row.acknowledged and server.creates == 6
    assert server.batches[row.vendor_batch_id]["displayName"] == f"medhelm-{row.batch_id} {row.input_file_id}"
    if page_size:
        assert any("pageToken=" in path for _, path in server.log)
    results = finish(store, api, row.batch_id)
    assert {o.state for o in results.outcomes.values()} == {ANSWERED} and set(results.outcomes) == set(requests)


def test_a_dead_uploader_whose_file_arrived_is_created_once_from_that_file(store, batch_server):
    server = batch_server()
    api = api_at(server)
    requests = keyed([gemini_request(f"q{i}") for i in range(2)])
    batch_id, keys = ledger.reserve(store, DEPLOYMENT, "gemini", api.endpoint, requests, owner=dead_owner())
    lines, _ = api.lines(requests)
    data = b"".join(lines[k] + b"\n" for k in keys)
    api.upload(data, ledger.input_file_name(batch_id))   # its answer never recorded
    fresh = GeminiBatchAPI(client_at(server.base_url))   # another process: knows nothing of the file
    (row,) = resume(store, fresh, DEPLOYMENT)
    assert row.acknowledged and server.creates == 1 and len(server.files) == 1
    assert server.batches[row.vendor_batch_id]["model"] == "models/gemini-2.0-flash-001"
    assert {o.state for o in finish(store, fresh, batch_id).outcomes.values()} == {ANSWERED}


CHILD = textwrap.dedent("""
    import sys
    from medhelm_core.batch import batch_api, submit
    from medhelm_core.batch.protocol import GEMINI
    from medhelm_core.store import Store
    from tests.batch.test_gemini_batch import DEPLOYMENT, client_at, gemini_request, keyed
    api = batch_api(client_at(sys.argv[2]), GEMINI)
    submit(Store(sys.argv[1]), api, DEPLOYMENT, keyed([gemini_request(f"Question {i}: yes or no?") for i in range(5)]))
    print("submitted")
""")


def test_kill_9_while_the_batch_is_being_created_pays_nothing_twice(store, batch_server):
    server = batch_server(create_delay_s=30)  # the vendor makes the batch; its answer is slow
    child = spawn_python(CHILD, str(store.path), server.base_url, cwd=ROOT)
    kill_9_when(child, lambda: server.creates > 0, timeout_s=60)
    server.create_delay_s = 0
    api = api_at(server)
    (before,) = ledger.outstanding(store, DEPLOYMENT)
    assert before.state == "uploaded" and before.vendor_batch_id is None  # the row and its file were there first
    requests = keyed([gemini_request(f"Question {i}: yes or no?") for i in range(5)])
    assert submit(store, api, DEPLOYMENT, requests).submitted == []  # held, not submitted again
    (row,) = resume(store, api, DEPLOYMENT)
    assert row.vendor_batch_id in server.batches and server.creates == 1
    results = finish(store, api, row.batch_id)
    assert set(results.outcomes) == set(requests) and {o.state for o in results.outcomes.values()} == {ANSWERED}
    store_collected(store, row.batch_id, results, store_answers(DEPLOYMENT))
    with store.connect() as conn:
        assert conn.execute("SELECT count(*) FROM completions").fetchone()[0] == 5
    assert server.creates == 1 and len([f for f in server.files.values() if f["source"] == "UPLOADED"]) == 1


def test_no_secret_reaches_the_tables(store, batch_server):
    server = batch_server(api_key=KEY)
    requests = keyed([gemini_request("q"), gemini_request("r")])
    row, results = run_batch(store, api_at(server), requests)
    store_collected(store, row.batch_id, results, store_answers(DEPLOYMENT))
    bad = batch_server(api_key="another")   # refuses our key: the error is recorded without it
    report = submit(store, api_at(bad), DEPLOYMENT, keyed([gemini_request("s")]))
    assert list(report.abandoned.values())[0].startswith("gemini batch API: HTTP 400 INVALID_ARGUMENT")
    with store.connect() as conn:
        for table in ("batches", "batch_items", "completions"):
            text = json.dumps(conn.execute(f"SELECT * FROM {table}").fetchall(), default=str)
            assert KEY not in text and "SECRET" not in text


# ---------------------------------------------------------------------------------------------
# Which deployments, at what price
# ---------------------------------------------------------------------------------------------
def test_gemini_deployments_batch_at_half_price_not_the_gateways():
    from medhelm_core.helm_config.deployments import load_model_registry

    registry = load_model_registry(None)
    assert flavour_of(registry.get_deployment("google/gemini-2.5-flash")) is GEMINI
    assert flavour_of(registry.get_deployment("google/gemini-2.0-flash-001")) is VERTEX   # VertexAIChatClient
    assert flavour_of(registry.get_deployment("stanfordhealthcare/gemini-2.0-flash-001")) is None
    assert GEMINI.discount == 0.5
    settings = SettingsRegistry.load()("google/gemini-2.0-flash-001")
    assert settings.batch_discount == 0.5
    assert settings.batch_cost(1_000_000, 1_000_000) == pytest.approx((0.10 + 0.40) / 2)


# ---------------------------------------------------------------------------------------------
# A suite: a Gemini jury batched behind an OpenAI model gives what the online run gives
# ---------------------------------------------------------------------------------------------
def with_gemini_judge(root: Path, base_url: str, batch: bool) -> str:
    from tests.batch.test_batch_pass import MENTAL_A, POLL, PRICES

    env = root / "work" / "prod_env"
    with (env / "model_deployments.yaml").open("a") as f:
        f.write(f"  - name: {DEPLOYMENT}\n    model_name: {DEPLOYMENT}\n    tokenizer_name: simple/tokenizer1\n"
                f"    max_sequence_length: 1000000\n    client_spec:\n"
                f'      class_name: "{CLASS_NAME}"\n      args:\n        base_url: "{base_url}"\n')
    (env / "credentials.conf").write_text('mockaiApiKey: "sk-mock-not-a-secret"\n'
                                          'googleApiKey: "goog-mock-not-a-secret"\n')
    flag = str(batch).lower()
    (env / "medhelm_deployments.yaml").write_text(
        f'deployments:\n  "mockai/*": {{batch: {flag}, batch_poll_seconds: {POLL}, {PRICES}}}\n'
        f'  "google/*": {{batch: {flag}, batch_poll_seconds: {POLL}, input_per_million: 0.1, '
        f'output_per_million: 0.4}}\n')
    (root / "work" / "private" / "jury_gemini.yaml").write_text(
        f'judges:\n  - name: "gemini"\n    model: "{DEPLOYMENT}"\n    model_deployment: "{DEPLOYMENT}"\n')
    return MENTAL_A.replace("jury_config.yaml", "jury_gemini.yaml")


def test_a_gemini_jury_batched_behind_an_openai_model_equals_online(tmp_path_factory, monkeypatch, mock_server,
                                                                    vendor_mock):
    from medhelm_core.run import datasets, entries
    from medhelm_core.run.batch_pass import batch_pass
    from medhelm_core.run.workspace import Workspace
    from medhelm_core.selections import RunSelection
    from tests.batch.test_batch_pass import PER_INSTANCE, normalised, rows, run_files, run_online, table
    from tests.mock_openai_batch import MockBatchServer
    from tests.oracle import SYNTHETIC
    from tests.parity import lay_out_inputs

    openai_batch = MockBatchServer(upstream=mock_server.base_url)
    gemini_batch = MockGeminiBatchServer(upstream=vendor_mock)
    try:
        out = {}
        for mode in ("online", "batch"):
            root = tmp_path_factory.mktemp(f"gemini-{mode}")
            monkeypatch.chdir(root)
            lay_out_inputs(SYNTHETIC / "inputs", root, openai_batch.base_url)
            entry = with_gemini_judge(root, gemini_batch.origin if mode == "batch" else vendor_mock,
                                      batch=mode == "batch")
            ws = Workspace(root / "out", root / "work" / "prod_env", num_threads=4)
            selection = RunSelection(conf_paths=[], run_entries=[entry], suite="gemini", max_eval_instances=5)
            with_entries = entries.expand_selection(ws, selection)
            runs = entries.register_runs(ws, "gemini", with_entries)
            for keys in entries.scenario_partitions(with_entries, ws.catalog).values():
                for key in keys:
                    datasets.build_dataset(ws, key)
            report = batch_pass(ws, runs, wait=True) if mode == "batch" else None
            outcomes = run_online(ws, runs)
            out[mode] = (root, report, outcomes)
        root, report, outcomes = out["batch"]
        assert report.requests_submitted == {"model": 5, "judge": 5} and report.answered == 10, report
        assert report.batch_deployments == {"mockai/mock-gpt-a", DEPLOYMENT} and report.errors == []
        assert outcomes[0].new_calls == 0 and gemini_batch.creates == 1 and len(gemini_batch.answered) == 5
        ws = Workspace(root / "out", root / "work" / "prod_env")
        assert {s for (s,) in rows(ws, "SELECT status FROM judge_verdicts")} == {"ok"}
        a, b = run_files(out["online"][0] / "out", "gemini"), run_files(root / "out", "gemini")
        assert set(a) == set(b) and len(a) == 5
        for name in a:
            assert normalised(a[name]) == normalised(b[name]), name
        db_a, db_b = out["online"][0] / "out" / "medhelm.duckdb", root / "out" / "medhelm.duckdb"
        for name in ("annotations", "judge_verdicts", "jury_scores", "instance_stats", "run_stats"):
            got, want = table(db_b, PER_INSTANCE[name]), table(db_a, PER_INSTANCE[name])
            assert got == want and got, name
    finally:
        gemini_batch.close()
        openai_batch.close()


def test_the_mock_serves_the_documented_download_path(batch_server):
    server = batch_server()
    requests = keyed([gemini_request("q")])
    api = api_at(server)
    lines, _ = api.lines(requests)
    file_id = api.upload(b"".join(v + b"\n" for v in lines.values()), "medhelm-x.jsonl")
    job = api.create(file_id, {"medhelm_batch_id": "mb-x"})
    while not api.retrieve(job.vendor_batch_id).ended:
        pass
    output = api.retrieve(job.vendor_batch_id).output_file_id
    import urllib.request
    with urllib.request.urlopen(f"{server.origin}/download/v1beta/{output}:download?alt=media") as r:
        assert r.read() == api.content(output) and b'"key"' in api.content(output)
