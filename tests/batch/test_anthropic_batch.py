"""Anthropic's Message Batches (medhelm_core/batch/anthropic.py) against a loopback mock of the batch API
(tests/mock_anthropic_batch.py) that answers each request's params by forwarding them to the repo's online
Anthropic Messages mock (shared/tools/mock_vendor_server.py): the params are the online body byte for
byte, batch answers equal online answers (and HELM's golden results), every item comes back with its own
outcome, and a create whose answer was lost is found again, not paid twice."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import httpx
import pytest

anthropic = pytest.importorskip("anthropic")

from medhelm_core.batch import (ANSWERED, ANTHROPIC, FAILED_ITEM, RETRY, batch_api, collect, flavour_of,  # noqa: E402
                                ledger, poll, resume, store_collected, submit)
from medhelm_core.batch.anthropic import AnthropicBatchAPI, custom_id, custom_ids  # noqa: E402
from medhelm_core.clients.anthropic_messages import AnthropicMessagesClient  # noqa: E402
from medhelm_core.errors import MedhelmError  # noqa: E402
from medhelm_core.jury.annotation import judge_request  # noqa: E402
from medhelm_core.ratelimit import (CONTENT_FILTER, FATAL, FATAL_ENDPOINT, RATE_LIMITED, SERVER_ERROR,  # noqa: E402
                                    TIMEOUT, SettingsRegistry)
from medhelm_core.store import request_key  # noqa: E402
from tests.batch.conftest import kill_9_when, spawn_python, store_answers, without_clock  # noqa: E402
from tests.batch.test_batch_durable import dead_owner  # noqa: E402
from tests.mock_anthropic_batch import MockAnthropicBatchServer  # noqa: E402
from tests.mock_server import MockServer  # noqa: E402
from tests.oracle import VENDOR, VENDOR_MOCK_SERVER, load  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-ant-api03-batch-SECRET-5678"
DEPLOYMENT = "anthropic/claude-3-7-sonnet-20250219"
MODEL = "anthropic/claude-3-7-sonnet-20250219"


def claude_request(prompt: str, **kw) -> dict:
    return {"model": MODEL, "model_deployment": DEPLOYMENT, "embedding": False, "prompt": prompt,
            "temperature": 0.0, "num_completions": 1, "top_k_per_token": 1, "max_tokens": 40, "stop_sequences": [],
            "echo_prompt": False, "top_p": 1, "presence_penalty": 0, "frequency_penalty": 0, **kw}


def oracle_states() -> list[dict]:
    """HELM 0.5.16's own request states through its AnthropicMessagesClient (model runs and jury demo)."""
    runs = sorted((VENDOR / "benchmark_output" / "runs").glob("*/*model_deployment=anthropic_claude*"))
    return [st for run in runs for st in load(run / "scenario_state.json")["request_states"]]


def edge_requests() -> list[dict]:
    """What the body mapping must get right beside HELM's own requests."""
    return [
        claude_request("", messages=[{"role": "system", "content": "Be brief; answer « oui » or « non »."},
                                     {"role": "user", "content": "Le cœur est-il un muscle?\u2028 Réponds."}]),
        claude_request("Réponds: « oui » ou « non »?\u2028 \u00e9\u00e8 \U0001f600 \"quoted\" \\ tab\t",
                       stop_sequences=["\n", "Réponse:", "###"]),
        claude_request("Sample freely, please.", temperature=0.7, top_p=0.95, top_k_per_token=5, max_tokens=64),
        claude_request("A newer model drops top_p", model="anthropic/claude-sonnet-4-5-20250929"),
        claude_request("List three words", num_completions=2, max_tokens=5),
        judge_request({"model_deployment": DEPLOYMENT, "model_name": MODEL},
                      'Rate the RESPONSE.\n<response>Le patient «va bien»</response>\nReply as JSON: '
                      '{"accuracy": {"score": 1-5, "explanation": "..."}}'),
    ]


def keyed(requests: list[dict]) -> dict[str, dict]:
    return {request_key(DEPLOYMENT, r): r for r in requests}


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

    def make(**kw) -> MockAnthropicBatchServer:
        kw.setdefault("upstream", vendor_mock)
        server = MockAnthropicBatchServer(**kw)
        servers.append(server)
        return server

    yield make
    for s in servers:
        s.close()


def client_at(base_url: str, **kw) -> AnthropicMessagesClient:
    return AnthropicMessagesClient(anthropic, KEY, base_url=base_url, **kw)


def api_at(server: MockAnthropicBatchServer, **kw) -> AnthropicBatchAPI:
    return batch_api(client_at(server.base_url, **kw), ANTHROPIC)


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


# ---------------------------------------------------------------------------------------------
# What is sent
# ---------------------------------------------------------------------------------------------
class Recorder:
    """An in-memory Anthropic endpoint for the online client: keeps each body, answers a message (or,
    for a streaming call, the same message as server-sent events)."""

    def __init__(self):
        self.bodies: list[bytes] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(request.read())
        message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
                   "stop_sequence": None, "content": [{"type": "text", "text": "ok"}],
                   "usage": {"input_tokens": 1, "output_tokens": 1}}
        if not json.loads(self.bodies[-1]).get("stream"):
            return httpx.Response(200, json=message)
        events = [{"type": "message_start", "message": {**message, "content": []}},
                  {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                  {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
                  {"type": "content_block_stop", "index": 0},
                  {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                   "usage": {"output_tokens": 1}},
                  {"type": "message_stop"}]
        sse = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
        return httpx.Response(200, content=sse, headers={"content-type": "text/event-stream"})


def recording_client(rec: Recorder, **kw) -> AnthropicMessagesClient:
    return AnthropicMessagesClient(anthropic, KEY, base_url="http://127.0.0.1:9",
                                   http_client=httpx.Client(transport=httpx.MockTransport(rec)), **kw)


def test_params_are_the_online_body_byte_for_byte(store, batch_server):
    server = batch_server(api_key=KEY, polls_per_state=100)
    rec = Recorder()
    online = recording_client(rec)
    requests = keyed([st["request"] for st in oracle_states()] + edge_requests())
    assert len(requests) >= 30
    api = api_at(server)
    expected = []
    for key, request in requests.items():
        n = request["num_completions"]
        sent = len(rec.bodies)
        assert online.attempt(request).kind == "ok"
        assert len(rec.bodies) == sent + n and len(set(rec.bodies[sent:])) == 1
        body = rec.bodies[-1]
        assert online.wire_body(online.raw_request(request)) == body   # the online client's own builder
        assert api.params(request) == body
        expected += [b'{"custom_id":"' + custom_id(key, i, n).encode() + b'","params":' + body + b"}"
                     for i in range(n)]
    (row,) = submit(store, api, DEPLOYMENT, requests).submitted
    # The create body the vendor received holds each online body, to the byte, in the SDK's own framing.
    assert server.create_bodies == [b'{"requests":[' + b",".join(expected) + b"]}"]
    raw = server.create_bodies[0].decode("utf-8")
    assert "\u2028" in raw and "«" in raw and "\U0001f600" in raw and '"system":"Be brief;' in raw
    assert '"stop_sequences":["\\n","Réponse:","###"]' in raw
    assert row.vendor == "anthropic" and row.num_requests == len(requests) and row.state == "in_progress"
    assert set(server.keys) == {KEY} and set(server.versions) == {"2023-06-01"}
    assert [m for m, _ in server.log] == ["POST"] and server.log[0][1] == "/v1/messages/batches"


def test_a_streaming_deployment_sends_its_online_body_without_stream():
    rec = Recorder()
    args = dict(anthropic_model_name="claude-3-7-sonnet-20250219", thinking_budget_tokens=10000, stream=True)
    online = recording_client(rec, **args)
    request = claude_request("Think, then answer: yes or no?", max_tokens=12000)
    assert online.attempt(request).kind == "ok"
    assert rec.bodies[0].endswith(b',"stream":true}')
    api = AnthropicBatchAPI(recording_client(Recorder(), **args))
    assert api.params(request) == rec.bodies[0][: -len(b',"stream":true}')] + b"}"
    assert json.loads(api.params(request))["thinking"] == {"type": "enabled", "budget_tokens": 10000}


def test_requests_the_online_client_refuses_are_fatal_before_any_create(store, batch_server):
    server = batch_server()
    api = api_at(server)
    online = client_at("http://127.0.0.1:9")
    too_long = claude_request("q", max_tokens=64001)                    # HELM refuses it
    not_streamed = claude_request("q", max_tokens=30000)                # the SDK refuses it non-streamed
    both = claude_request("q", messages=[{"role": "user", "content": "hi"}])  # prompt and messages
    fine = claude_request("fine: yes or no?")
    requests = keyed([too_long, not_streamed, both, fine])
    report = submit(store, api, DEPLOYMENT, requests)
    assert set(report.invalid) == set(list(requests)[:3])
    for key, attempt in report.invalid.items():
        want = online.attempt(requests[key])
        assert (attempt.kind, attempt.message) == (FATAL, want.message)
    assert server.creates == 1 and len(json.loads(server.create_bodies[0])["requests"]) == 1


def test_custom_ids_are_our_keys_or_a_hash_of_key_and_copy():
    key = request_key(DEPLOYMENT, claude_request("q"))
    assert len(key) == 64 and custom_id(key) == key
    odd = "model/key with spaces and more than sixty-four characters ........................................"
    for cid in (custom_id(odd), custom_id(key, 0, 2), custom_id(key, 1, 2)):
        assert len(cid) == 64 and cid.isalnum() and cid != key
    assert custom_id(key, 0, 2) != custom_id(key, 1, 2)
    ids = custom_ids({key: claude_request("q", num_completions=3), odd: claude_request("r")})
    assert sorted(ids.values()) == [(key, 0), (key, 1), (key, 2), (odd, 0)]


def test_chunks_keep_the_vendor_limits_counting_each_copy():
    api = AnthropicBatchAPI(client_at("http://127.0.0.1:9"), max_requests=3)
    reqs = [claude_request(f"q{i}") for i in range(4)] + [claude_request("twice", num_completions=2)]
    lines, _ = api.lines(keyed(reqs))
    chunks = list(api.chunks(lines))
    assert [len(c) for c in chunks] == [3, 2] and sum(chunks, []) == list(lines)
    assert AnthropicBatchAPI(client_at("http://127.0.0.1:9"), max_requests=10 ** 6).max_requests == 100_000


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
    assert results.state == "ended" and results.batch_error is None
    assert set(results.outcomes) == set(requests)
    for key, request in requests.items():
        got, want = results.outcomes[key].attempt, online.attempt(request)
        assert results.outcomes[key].state == ANSWERED, results.outcomes[key].error
        assert (got.kind, got.usage, got.untruncated) == (want.kind, want.usage, want.untruncated)
        assert without_clock(got.result) == without_clock(want.result)
        assert list(got.result) == list(want.result)   # the same fields in the same order, clock included
        if key in golden:                              # and HELM's own result
            assert without_clock(got.result) == without_clock(golden[key])
    assert len(golden) >= 20
    # Results are read by custom_id (the mock gives them in reverse order); a copy per completion.
    n_items = sum(r["num_completions"] for r in requests.values())
    assert ledger.get(store, row.batch_id).request_counts == {"processing": 0, "succeeded": n_items, "errored": 0,
                                                              "canceled": 0, "expired": 0}
    store_collected(store, row.batch_id, results, store_answers(DEPLOYMENT))
    assert ledger.get(store, row.batch_id).state == "collected"
    with store.connect() as conn:
        assert ledger.unbatched(conn, requests) == []
    assert submit(store, api, DEPLOYMENT, requests).submitted == [] and server.creates == 1
    assert set(server.keys) == {KEY} and set(server.versions) == {"2023-06-01"}


def test_a_streaming_deployment_batched_answers_as_online(store, batch_server, vendor_mock):
    # The online mock does not stream: the same body, not streamed, is the online answer to compare with
    # (the mock answers a body whatever its key order).
    args = dict(anthropic_model_name="claude-3-7-sonnet-20250219", thinking_budget_tokens=1024)
    server = batch_server()
    requests = keyed([claude_request(f"Think, then answer {i}: yes or no?", max_tokens=2048) for i in range(3)])
    _, results = run_batch(store, api_at(server, stream=True, **args), requests)
    online = client_at(vendor_mock, **args)
    for key, request in requests.items():
        got, want = results.outcomes[key].attempt, online.attempt(request)
        assert without_clock(got.result) == without_clock(want.result) and got.usage == want.usage
        assert got.result["completions"][0]["thinking"]["text"].startswith("Mock thinking")
    assert all("stream" not in r["params"] for r in json.loads(server.create_bodies[0])["requests"])


def test_a_lost_create_is_found_past_the_first_page_of_batches(store, batch_server):
    server = batch_server(lose_create_answer=True)
    api = api_at(server)
    requests = keyed([claude_request(f"q{i}") for i in range(3)])
    (batch_id,) = submit(store, api, DEPLOYMENT, requests).unacknowledged
    server.lose_create_answer = False
    for i in range(105):   # newer batches of other sizes: ours is on the second page
        _foreign_batch(server, 1 + i % 2, f"later{i}")
    (row,) = resume(store, api, DEPLOYMENT, include_alive=True)
    assert row.acknowledged and row.vendor_batch_id == list(server.batches)[0] and server.creates == 106
    assert any("after_id=" in path for _, path in server.log)


def _error(kind: str, message: str) -> dict:
    return {"type": "error", "error": {"type": kind, "message": message}}


def test_errored_expired_and_odd_items_come_back_per_key(store, batch_server):
    reqs = [claude_request(f"Question {i}: yes or no?") for i in range(10)]
    keys = list(keyed(reqs))
    filtered = _error("invalid_request_error", "Output blocked by content filtering policy")
    server = batch_server(
        item_errors={keys[0]: _error("overloaded_error", "Overloaded"),
                     keys[1]: _error("rate_limit_error", "Number of request tokens has exceeded your rate limit"),
                     keys[2]: _error("api_error", "Internal server error"),
                     keys[3]: _error("invalid_request_error", "max_tokens: 100000 > 64000, the maximum"),
                     keys[4]: filtered,
                     keys[5]: _error("permission_error", "Your API key does not have permission")},
        item_messages={keys[6]: {"id": "msg_e", "type": "message", "role": "assistant", "model": "m",
                                 "content": [], "stop_reason": "end_turn", "stop_sequence": None,
                                 "usage": {"input_tokens": 3, "output_tokens": 0}}},
        expire={keys[7]})
    api = api_at(server)
    requests = keyed(reqs)
    row, results = run_batch(store, api, requests)
    o = results.outcomes
    assert set(o) == set(keys)  # none dropped
    assert (o[keys[0]].state, o[keys[0]].attempt.kind) == (RETRY, SERVER_ERROR)
    assert (o[keys[1]].state, o[keys[1]].attempt.kind) == (RETRY, RATE_LIMITED)
    assert (o[keys[2]].state, o[keys[2]].attempt.kind) == (RETRY, SERVER_ERROR)
    assert (o[keys[3]].state, o[keys[3]].attempt.kind) == (FAILED_ITEM, FATAL)
    assert (o[keys[4]].state, o[keys[4]].attempt.kind) == (ANSWERED, CONTENT_FILTER)  # HELM's non-fatal result
    assert o[keys[4]].attempt.result["error"] == "Output blocked by content filtering policy"
    assert (o[keys[5]].state, o[keys[5]].attempt.kind) == (FAILED_ITEM, FATAL_ENDPOINT)
    assert (o[keys[6]].state, o[keys[6]].attempt.kind) == (ANSWERED, CONTENT_FILTER)
    assert o[keys[6]].attempt.result["error"] == "Anthropic response has empty content"
    assert (o[keys[7]].state, o[keys[7]].attempt.kind) == (RETRY, TIMEOUT) and "expired" in o[keys[7]].error
    assert {o[k].state for k in keys[8:]} == {ANSWERED}
    assert "expired: 1 of 10" in results.batch_error
    # Each errored item is the Attempt the online client makes of the same HTTP answer.
    for key, status, body in ((keys[0], 529, server.item_errors[keys[0]]), (keys[3], 400, server.item_errors[keys[3]]),
                              (keys[1], 429, server.item_errors[keys[1]])):
        rec = lambda r, s=status, b=body: httpx.Response(s, json=b)  # noqa: E731
        want = AnthropicMessagesClient(anthropic, KEY, base_url="http://127.0.0.1:9",
                                       http_client=httpx.Client(transport=httpx.MockTransport(rec))).attempt(
            requests[key])
        assert (o[key].attempt.kind, o[key].attempt.message, o[key].attempt.status) == \
               (want.kind, want.message, want.status)
    store_collected(store, row.batch_id, results, store_answers(DEPLOYMENT))
    assert {k: s for k, (s, _) in ledger.items(store, row.batch_id).items()} == {k: o[k].state for k in keys}
    with store.connect() as conn:  # asked again: the retries and the failures, not the answers
        assert sorted(ledger.unbatched(conn, keys)) == sorted([keys[i] for i in (0, 1, 2, 3, 5, 7)])


def test_a_copy_that_errs_fails_the_whole_request_as_online(store, batch_server):
    request = claude_request("List three words", num_completions=2, max_tokens=5)
    key = request_key(DEPLOYMENT, request)
    server = batch_server(item_errors={custom_id(key, 1, 2): _error("overloaded_error", "Overloaded")})
    _, results = run_batch(store, api_at(server), {key: request})
    assert (results.outcomes[key].state, results.outcomes[key].attempt.kind) == (RETRY, SERVER_ERROR)


def test_a_batch_that_expires_whole(store, batch_server):
    server = batch_server(expire=True)
    requests = keyed([claude_request(f"q{i}") for i in range(3)])
    row, results = run_batch(store, api_at(server), requests)
    assert results.state == "ended" and server.answered == []
    assert "expired: 3 of 3 requests not run within 24 hours" in results.batch_error
    assert [o.attempt.kind for o in results.outcomes.values()] == [TIMEOUT] * 3
    assert {o.state for o in results.outcomes.values()} == {RETRY}
    assert ledger.get(store, row.batch_id).error.startswith("expired: 3 of 3")


def test_a_cancelled_batch_gives_back_every_key_to_ask_again(store, batch_server):
    server = batch_server(polls_per_state=100)
    api = api_at(server)
    requests = keyed([claude_request(f"q{i}") for i in range(3)])
    (row,) = submit(store, api, DEPLOYMENT, requests).submitted
    with pytest.raises(MedhelmError, match="still in_progress"):
        collect(store, api, row.batch_id)
    assert api.cancel(row.vendor_batch_id).state == "canceling"
    server.polls_per_state = 1
    results = collect(store, api, row.batch_id, poll(store, api, row))
    assert results.state == "ended" and results.batch_error == f"batch {row.vendor_batch_id} cancelled: 3 of 3 " \
                                                               f"requests not run"
    assert {o.state for o in results.outcomes.values()} == {RETRY} and set(results.outcomes) == set(requests)
    assert all(o.error.startswith("canceled:") for o in results.outcomes.values()) and server.answered == []


# ---------------------------------------------------------------------------------------------
# Durable: a row before the create, a lost create found again
# ---------------------------------------------------------------------------------------------
def test_the_row_is_there_before_the_create_is_sent(store, batch_server):
    seen = []
    server = batch_server(on_create=lambda: seen.append(ledger.outstanding(store, DEPLOYMENT)))
    api = api_at(server)
    requests = keyed([claude_request(f"q{i}") for i in range(3)])
    (row,) = submit(store, api, DEPLOYMENT, requests).submitted
    (before,) = seen[0]
    assert (before.batch_id, before.state, before.vendor_batch_id) == (row.batch_id, "creating", None)
    assert before.input_file_name is None and before.input_file_id is None
    assert sorted(ledger.item_keys(store, row.batch_id, "queued")) == sorted(requests)
    assert row.vendor_batch_id in server.batches


def test_a_lost_create_answer_is_found_at_the_vendor_not_created_again(store, batch_server):
    server = batch_server(lose_create_answer=True)
    api = api_at(server)
    requests = keyed([claude_request(f"q{i}") for i in range(3)])
    report = submit(store, api, DEPLOYMENT, requests)
    assert report.submitted == [] and len(report.unacknowledged) == 1 and server.creates == 1
    assert ledger.get(store, report.unacknowledged[0]).state == "creating"
    assert submit(store, api, DEPLOYMENT, requests).submitted == []   # still held
    (row,) = resume(store, api, DEPLOYMENT)   # its submitter is done: looked for, found, not created again
    assert row.vendor_batch_id in server.batches and server.creates == 1
    server.lose_create_answer = False
    results = finish(store, api, row.batch_id)
    assert {o.state for o in results.outcomes.values()} == {ANSWERED}


def test_a_create_that_never_arrived_is_created_once(store, batch_server):
    server = batch_server(refuse_create=True)
    api = api_at(server)
    requests = keyed([claude_request(f"q{i}") for i in range(2)])
    (batch_id,) = submit(store, api, DEPLOYMENT, requests).unacknowledged
    assert server.creates == 0
    server.refuse_create = False
    (row,) = resume(store, api, DEPLOYMENT, include_alive=True)
    assert row.batch_id == batch_id and row.acknowledged and server.creates == 1
    assert resume(store, api, DEPLOYMENT, include_alive=True) == []


_STRANGERS: dict[str, object] = {}


def _foreign_batch(server, n: int, tag: str) -> str:
    """A batch someone else made in the same workspace (same size, other custom_ids)."""
    sdk = _STRANGERS.get(server.base_url)
    if sdk is None:
        sdk = _STRANGERS[server.base_url] = anthropic.Anthropic(api_key="another-key", base_url=server.base_url,
                                                                max_retries=0)
    reqs = [{"custom_id": f"{tag}-{i}", "params": {"model": "claude-3-7-sonnet-20250219", "max_tokens": 5,
                                                    "messages": [{"role": "user", "content": f"{tag} {i}"}]}}
            for i in range(n)]
    return sdk.messages.batches.create(requests=reqs).id


def test_several_batches_that_could_be_a_lost_create_create_nothing_until_their_results_tell(store, batch_server):
    server = batch_server(lose_create_answer=True, polls_per_state=2)
    api = api_at(server)
    requests = keyed([claude_request(f"q{i}") for i in range(3)])
    # One of ours, acknowledged and of the same size, is never taken for the lost one.
    server.lose_create_answer = False
    (mine,) = submit(store, api, DEPLOYMENT, keyed([claude_request(f"other {i}") for i in range(3)])).submitted
    foreign = _foreign_batch(server, 3, "them")
    server.lose_create_answer = True
    (batch_id,) = submit(store, api, DEPLOYMENT, requests).unacknowledged
    server.lose_create_answer = False
    _foreign_batch(server, 2, "smaller")   # another size: not a candidate
    (row,) = resume(store, api, DEPLOYMENT, include_alive=True)
    assert not row.acknowledged and row.state == "creating" and server.creates == 4
    assert "batches at the vendor that could be this one" in row.error and foreign in row.error
    assert mine.vendor_batch_id not in row.error
    for vendor_id in list(server.batches):   # they all end
        for _ in range(2):
            api.retrieve(vendor_id)
    (row,) = resume(store, api, DEPLOYMENT, include_alive=True)
    assert row.acknowledged and row.vendor_batch_id not in (foreign, mine.vendor_batch_id)
    assert server.creates == 4
    results = collect(store, api, row.batch_id)
    assert {o.state for o in results.outcomes.values()} == {ANSWERED} and set(results.outcomes) == set(requests)


def test_two_lost_creates_of_one_size_wait_for_the_results_rather_than_guess(store, batch_server):
    # One create arrived (its answer lost), the other never did: one running batch could be either's.
    server = batch_server(lose_create_answer=True, polls_per_state=2)
    api = api_at(server)
    first = keyed([claude_request(f"first {i}") for i in range(2)])
    second = keyed([claude_request(f"second {i}") for i in range(2)])
    (arrived,) = submit(store, api, DEPLOYMENT, first).unacknowledged
    server.lose_create_answer, server.refuse_create = False, True
    (lost,) = submit(store, api, DEPLOYMENT, second).unacknowledged
    server.refuse_create = False
    rows = {r.batch_id: r for r in resume(store, api, DEPLOYMENT, include_alive=True)}
    assert not rows[arrived].acknowledged and not rows[lost].acknowledged and server.creates == 1
    (vendor_id,) = server.batches
    assert vendor_id in rows[lost].error
    for _ in range(2):
        api.retrieve(vendor_id)   # it ends: its custom_ids tell whose it is
    rows = {r.batch_id: r for r in resume(store, api, DEPLOYMENT, include_alive=True)}
    assert rows[arrived].vendor_batch_id == vendor_id
    assert rows[lost].acknowledged and rows[lost].vendor_batch_id != vendor_id and server.creates == 2


def test_a_wrong_guess_costs_a_wait_never_a_second_payment(store, batch_server):
    # Our create never arrived, and a stranger's batch of the same size is running: resume takes it for
    # ours; its results hold none of our custom_ids, so every key comes back to be asked again.
    server = batch_server(refuse_create=True, polls_per_state=2)
    api = api_at(server)
    requests = keyed([claude_request(f"q{i}") for i in range(2)])
    (batch_id,) = submit(store, api, DEPLOYMENT, requests).unacknowledged
    server.refuse_create = False
    foreign = _foreign_batch(server, 2, "stranger")
    (row,) = resume(store, api, DEPLOYMENT, include_alive=True)
    assert row.vendor_batch_id == foreign and server.creates == 1
    results = finish(store, api, batch_id)
    assert {o.state for o in results.outcomes.values()} == {RETRY}
    assert "holds none of these requests" in results.batch_error
    store_collected(store, batch_id, results)
    again = submit(store, api, DEPLOYMENT, requests)
    assert len(again.submitted) == 1 and server.creates == 2


CHILD = textwrap.dedent("""
    import sys, anthropic
    from medhelm_core.batch import ANTHROPIC, batch_api, submit
    from medhelm_core.clients.anthropic_messages import AnthropicMessagesClient
    from medhelm_core.store import Store
    from tests.batch.test_anthropic_batch import DEPLOYMENT, KEY, claude_request, keyed
    api = batch_api(AnthropicMessagesClient(anthropic, KEY, base_url=sys.argv[2], timeout_s=120), ANTHROPIC)
    submit(Store(sys.argv[1]), api, DEPLOYMENT, keyed([claude_request(f"Question {i}: yes or no?") for i in range(5)]))
    print("submitted")
""")


def test_kill_9_while_the_batch_is_being_created_pays_nothing_twice(store, batch_server):
    server = batch_server(create_delay_s=30)  # the vendor makes the batch; its answer is slow
    child = spawn_python(CHILD, str(store.path), server.base_url, cwd=ROOT)
    kill_9_when(child, lambda: server.creates > 0, timeout_s=60)
    server.create_delay_s = 0
    api = api_at(server)
    (before,) = ledger.outstanding(store, DEPLOYMENT)
    assert before.state == "creating" and before.vendor_batch_id is None  # the row was there first
    requests = keyed([claude_request(f"Question {i}: yes or no?") for i in range(5)])
    assert submit(store, api, DEPLOYMENT, requests).submitted == []  # held, not submitted again
    (row,) = resume(store, api, DEPLOYMENT)
    assert row.vendor_batch_id in server.batches and server.creates == 1
    results = finish(store, api, row.batch_id)
    assert set(results.outcomes) == set(requests) and {o.state for o in results.outcomes.values()} == {ANSWERED}
    store_collected(store, row.batch_id, results, store_answers(DEPLOYMENT))
    with store.connect() as conn:
        assert conn.execute("SELECT count(*) FROM completions").fetchone()[0] == 5
    assert server.creates == 1


def test_a_dead_submitter_before_its_create_leaves_nothing_at_the_vendor(store, batch_server):
    server = batch_server()
    api = api_at(server)
    requests = keyed([claude_request(f"q{i}") for i in range(2)])
    batch_id, _ = ledger.reserve(store, DEPLOYMENT, "anthropic", api.endpoint, requests, owner=dead_owner(),
                                 state=ledger.CREATING)
    (row,) = resume(store, api, DEPLOYMENT)   # nothing at the vendor can be it: created now, once
    assert row.batch_id == batch_id and row.acknowledged and server.creates == 1
    assert json.loads(server.create_bodies[0])["requests"][0]["custom_id"] in requests


def test_no_secret_reaches_the_tables(store, batch_server):
    server = batch_server(api_key=KEY, item_errors={})
    requests = keyed([claude_request("q"), claude_request("r")])
    row, results = run_batch(store, api_at(server), requests)
    store_collected(store, row.batch_id, results, store_answers(DEPLOYMENT))
    bad = batch_server(api_key="another")   # refuses our key: the error is recorded without it
    report = submit(store, api_at(bad), DEPLOYMENT, keyed([claude_request("s")]))
    assert list(report.abandoned.values())[0].startswith("anthropic batch API: HTTP 401")
    with store.connect() as conn:
        for table in ("batches", "batch_items", "completions"):
            text = json.dumps(conn.execute(f"SELECT * FROM {table}").fetchall(), default=str)
            assert KEY not in text and "SECRET" not in text
        assert conn.execute("SELECT DISTINCT endpoint FROM batches ORDER BY 1").fetchall() == sorted(
            [(server.origin,), (bad.origin,)])


# ---------------------------------------------------------------------------------------------
# Which deployments, at what price
# ---------------------------------------------------------------------------------------------
def test_anthropic_deployments_batch_at_half_price_not_the_gateways():
    from medhelm_core.helm_config.deployments import load_model_registry

    registry = load_model_registry(None)
    assert flavour_of(registry.get_deployment("anthropic/claude-3-7-sonnet-20250219")) is ANTHROPIC
    assert flavour_of(registry.get_deployment("anthropic/claude-sonnet-4-20250514-thinking-10k")) is ANTHROPIC
    assert flavour_of(registry.get_deployment("stanfordhealthcare/claude-3-7-sonnet-20250219")) is None
    assert ANTHROPIC.discount == 0.5 and not ANTHROPIC.uploads
    settings = SettingsRegistry.load()("anthropic/claude-3-7-sonnet-20250219")
    assert settings.batch_discount == 0.5
    assert settings.batch_cost(1_000_000, 1_000_000) == pytest.approx((3.0 + 15.0) / 2)
