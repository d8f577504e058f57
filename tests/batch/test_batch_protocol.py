"""The batch protocol against loopback servers: the JSONL body is the online body byte for byte, batch
answers equal online answers, and every item comes back with its own outcome."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from medhelm_core.batch import (ANSWERED, AZURE, FAILED_ITEM, OPENAI, RETRY, BatchAPI, collect, ledger, poll,
                                store_collected, submit)
from medhelm_core.clients.azure_openai import AzureOpenAIChatClient
from medhelm_core.clients.openai_compatible import OpenAICompatibleClient
from medhelm_core.errors import MedhelmError
from medhelm_core.ratelimit import FATAL, RATE_LIMITED, SERVER_ERROR, TIMEOUT
from tests.batch.conftest import DEPLOYMENT, KEY, base_request, golden_requests, keyed, store_answers, without_clock


class Capture:
    """Records the raw bytes of every POSTed body and answers a fixed chat completion."""

    def __init__(self):
        self.bodies: list[tuple[str, bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.bodies.append((self.path, raw))
                data = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                                   "choices": [{"index": 0, "finish_reason": "stop",
                                                "message": {"role": "assistant", "content": "ok"}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.origin = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _body_of(line: bytes) -> bytes:
    head, sep, body = line.partition(b',"body":')
    assert sep and body.endswith(b"}")
    return body[:-1]


@pytest.mark.parametrize("vendor", ["openai", "azure"])
def test_the_jsonl_body_is_the_online_body_byte_for_byte(vendor):
    capture = Capture()
    try:
        if vendor == "openai":
            client = OpenAICompatibleClient(capture.origin + "/v1", KEY, openai_model_name="gpt-4o-mini-2024-07-18")
            api = BatchAPI(client, OPENAI)
        else:
            client = AzureOpenAIChatClient(KEY, "2024-10-21", azure_endpoint=capture.origin,
                                           deployment_name="gpt-4o-mini-batch")
            api = BatchAPI(client, AZURE)
        requests = keyed(golden_requests())
        for key, request in requests.items():
            line = api.line(key, request)
            assert client.attempt(request).kind == "ok"
            path, sent = capture.bodies[-1]
            assert _body_of(line) == sent
            parsed = json.loads(line)
            assert parsed["custom_id"] == key and parsed["method"] == "POST"
            assert parsed["url"] == ("/v1/chat/completions" if vendor == "openai" else "/chat/completions")
            assert b"\n" not in line
        if vendor == "azure":
            assert path.startswith("/openai/deployments/gpt-4o-mini-batch/chat/completions")
    finally:
        capture.close()


def test_a_request_helm_refuses_is_fatal_before_any_upload(store, batch_server):
    server = batch_server()
    client = OpenAICompatibleClient(server.base_url, KEY)
    bad = base_request("", messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])
    requests = keyed([bad, base_request("fine: yes or no?")])
    report = submit(store, BatchAPI(client, OPENAI), DEPLOYMENT, requests)
    (bad_key,) = report.invalid
    assert report.invalid[bad_key].kind == FATAL
    assert report.invalid[bad_key].message == client.attempt(bad).message  # as online
    assert len(server.uploads) == 1 and bad_key.encode() not in server.uploads[0]


def _run_batch(store, api, requests, polls: int = 10):
    report = submit(store, api, DEPLOYMENT, requests)
    assert len(report.submitted) == 1, report
    row = report.submitted[0]
    for _ in range(polls):
        status = poll(store, api, ledger.get(store, row.batch_id))
        if status.ended:
            break
    return row, collect(store, api, row.batch_id, status)


def test_batch_answers_equal_online_answers(store, batch_server, mock_server):
    server = batch_server(api_key=KEY)
    batch_client = OpenAICompatibleClient(server.base_url, KEY, openai_model_name="gpt-4o-mini-2024-07-18")
    online = OpenAICompatibleClient(mock_server.base_url, KEY, openai_model_name="gpt-4o-mini-2024-07-18")
    requests = keyed(golden_requests())
    row, results = _run_batch(store, BatchAPI(batch_client, OPENAI), requests)
    assert results.state == "completed" and results.batch_error is None
    assert set(results.outcomes) == set(requests)
    for key, request in requests.items():
        got, want = results.outcomes[key].attempt, online.attempt(request)
        assert results.outcomes[key].state == ANSWERED
        assert (got.kind, got.usage, got.untruncated) == (want.kind, want.usage, want.untruncated)
        assert without_clock(got.result) == without_clock(want.result)
        assert set(got.result) == set(want.result)  # same fields, the clock's included
    assert set(server.auth) == {f"Bearer {KEY}"}  # the online client's auth
    store_collected(store, row.batch_id, results, store_answers(DEPLOYMENT))
    assert ledger.get(store, row.batch_id).state == "collected"
    with store.connect() as conn:
        assert ledger.unbatched(conn, requests) == []  # all answered: a rerun asks nothing
    assert submit(store, BatchAPI(batch_client, OPENAI), DEPLOYMENT, requests).submitted == []
    assert len(server.uploads) == 1 and server.creates == 1


def test_azure_global_batch_answers_equal_online_answers(store, batch_server, mock_server):
    server = batch_server(api_key=KEY, flavour="azure", deployments={"gpt-4o-mini-batch"})
    client = AzureOpenAIChatClient(KEY, "2024-10-21", azure_endpoint=server.azure_endpoint,
                                   deployment_name="gpt-4o-mini-batch")
    # The same body online (the mock answers by model and prompt; Azure's deployment name is the model).
    online = OpenAICompatibleClient(mock_server.base_url, KEY, openai_model_name="gpt-4o-mini-batch")
    requests = keyed(golden_requests(8))
    row, results = _run_batch(store, BatchAPI(client, AZURE), requests)
    assert results.state == "completed"
    for key, request in requests.items():
        assert without_clock(results.outcomes[key].attempt.result) == without_clock(online.attempt(request).result)
    assert all(path.startswith("/openai/") and "api-version=2024-10-21" in path for _, path in server.log)
    assert set(server.auth) == {KEY}
    assert ledger.get(store, row.batch_id).vendor == "azure"


def test_failed_and_expired_items_come_back_per_key(store, batch_server, mock_server):
    reqs = [base_request(f"Question {i}: yes or no?") for i in range(8)]
    keys = list(keyed(reqs))
    azure_filter = {"error": {"message": "The response was filtered due to the prompt triggering Azure OpenAI's "
                              "content management policy.", "type": None, "param": "prompt", "code": "content_filter",
                              "status": 400}}
    server = batch_server(
        item_errors={keys[0]: (429, {"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}),
                     keys[1]: (500, {"error": {"message": "The server had an error", "type": "server_error"}}),
                     keys[2]: (400, {"error": {"message": "Invalid 'max_tokens'", "type": "invalid_request_error"}}),
                     keys[3]: (400, azure_filter)},
        expire={keys[4]})
    client = OpenAICompatibleClient(server.base_url, KEY)
    requests = keyed(reqs)
    row, results = _run_batch(store, BatchAPI(client, OPENAI), requests)
    assert results.state == "expired" and "expired" in results.batch_error
    assert set(results.outcomes) == set(keys)  # none dropped
    o = results.outcomes
    assert (o[keys[0]].state, o[keys[0]].attempt.kind) == (RETRY, RATE_LIMITED)
    assert (o[keys[1]].state, o[keys[1]].attempt.kind) == (RETRY, SERVER_ERROR)
    assert (o[keys[2]].state, o[keys[2]].attempt.kind) == (FAILED_ITEM, FATAL)
    assert o[keys[3]].state == ANSWERED  # HELM's non-fatal result, as online
    assert o[keys[3]].attempt.result == client.error_attempt(400, azure_filter).result
    assert o[keys[3]].attempt.result["error"] == "Content blocked by Azure's content management filter"
    assert (o[keys[4]].state, o[keys[4]].attempt.kind) == (RETRY, TIMEOUT)
    assert "batch_expired" in o[keys[4]].error
    assert {k for k in keys[5:] if o[k].state == ANSWERED} == set(keys[5:])
    store_collected(store, row.batch_id, results, store_answers(DEPLOYMENT))
    items = ledger.items(store, row.batch_id)
    assert {k: s for k, (s, _) in items.items()} == {k: o[k].state for k in keys}
    with store.connect() as conn:  # asked again: the retries and the failure, not the answers
        assert sorted(ledger.unbatched(conn, keys)) == sorted([keys[0], keys[1], keys[2], keys[4]])
    again = submit(store, BatchAPI(client, OPENAI), DEPLOYMENT, requests)
    assert sorted(ledger.item_keys(store, again.submitted[0].batch_id)) == sorted([keys[0], keys[1], keys[2], keys[4]])


def test_a_whole_batch_that_fails_says_so_and_every_key_is_retried(store, batch_server):
    server = batch_server(flavour="azure", deployments={"another-deployment"})  # not a global batch deployment
    client = AzureOpenAIChatClient(KEY, "2024-10-21", azure_endpoint=server.azure_endpoint, deployment_name="dep")
    requests = keyed([base_request(f"q{i}") for i in range(3)])
    row, results = _run_batch(store, BatchAPI(client, AZURE), requests)
    assert results.state == "failed"
    assert "model_not_found" in results.batch_error and "line 1" in results.batch_error
    assert {o.state for o in results.outcomes.values()} == {RETRY} and set(results.outcomes) == set(requests)
    assert ledger.get(store, row.batch_id).error.startswith("model_not_found")
    assert server.answered == []


def test_a_batch_that_expires_whole(store, batch_server):
    server = batch_server(expire=True)
    requests = keyed([base_request(f"q{i}") for i in range(3)])
    _, results = _run_batch(store, BatchAPI(OpenAICompatibleClient(server.base_url, KEY), OPENAI), requests)
    assert results.state == "expired" and server.answered == []
    assert [o.attempt.kind for o in results.outcomes.values()] == [TIMEOUT] * 3


def test_a_cancelled_batch_gives_back_every_key_to_ask_again(store, batch_server):
    server = batch_server(polls_per_state=100)  # stays validating
    api = BatchAPI(OpenAICompatibleClient(server.base_url, KEY), OPENAI)
    requests = keyed([base_request(f"q{i}") for i in range(3)])
    (row,) = submit(store, api, DEPLOYMENT, requests).submitted
    assert api.cancel(row.vendor_batch_id).state == "cancelling"
    server.polls_per_state = 1
    results = collect(store, api, row.batch_id, poll(store, api, row))
    assert results.state == "cancelled" and results.batch_error == f"batch {row.vendor_batch_id} cancelled"
    assert {o.state for o in results.outcomes.values()} == {RETRY} and set(results.outcomes) == set(requests)
    assert all("batch_cancelled" in o.error for o in results.outcomes.values())


def test_collecting_a_running_batch_is_refused(store, batch_server):
    server = batch_server(polls_per_state=100)
    api = BatchAPI(OpenAICompatibleClient(server.base_url, KEY), OPENAI)
    (row,) = submit(store, api, DEPLOYMENT, keyed([base_request("q")])).submitted
    with pytest.raises(MedhelmError, match="still validating"):
        collect(store, api, row.batch_id)
    assert [r.batch_id for r in ledger.outstanding(store)] == [row.batch_id]


def test_chunks_keep_the_vendor_limits_and_one_model_per_file():
    client = OpenAICompatibleClient("http://127.0.0.1:9/v1", KEY)
    api = BatchAPI(client, OPENAI, max_requests=2)
    reqs = [base_request(f"q{i}") for i in range(5)] + [base_request("o", model="openai/o3-mini-2025-01-31")]
    lines, _ = api.lines(keyed(reqs))
    chunks = list(api.chunks(lines))
    assert [len(c) for c in chunks] == [2, 2, 1, 1]
    assert sum(chunks, []) == list(lines)
    assert BatchAPI(client, OPENAI, max_requests=10 ** 6).max_requests == 50_000
    assert BatchAPI(client, AZURE).max_requests == 100_000


def test_no_secret_reaches_the_tables(store, batch_server):
    server = batch_server(api_key=KEY, fail_batch="bad file")
    requests = keyed([base_request("q")])
    _run_batch(store, BatchAPI(OpenAICompatibleClient(server.base_url, KEY), OPENAI), requests)
    with store.connect() as conn:
        for table in ("batches", "batch_items"):
            text = json.dumps(conn.execute(f"SELECT * FROM {table}").fetchall(), default=str)
            assert KEY not in text and "SECRET" not in text
        assert conn.execute("SELECT endpoint FROM batches").fetchone()[0] == server.origin
