"""Per-deployment limits: settings files, header parsing, token buckets, AIMD, pauses, and the
engine's classification of what an endpoint answers (real HTTP on loopback)."""
import time
from email.utils import formatdate

import pytest

from medhelm_core.clients.openai_compatible import OpenAICompatibleClient
from medhelm_core.engine import CompletionEngine, Job
from medhelm_core.ratelimit import (CONTENT_FILTER, FATAL, FATAL_ENDPOINT, OK, RATE_LIMITED, SERVER_ERROR, TIMEOUT,
                                    DeploymentSettings, EndpointLimiter, SettingsRegistry, TokenBucket,
                                    parse_duration, retry_after_seconds)
from medhelm_core.errors import MedhelmError
from medhelm_core.store import Store, request_key
from tests.mock_server import ScriptedServer, error_body


def _req(prompt, model="mockai/m"):
    return {"model": model, "model_deployment": model, "prompt": prompt, "temperature": 0.0, "top_p": 1,
            "num_completions": 1, "stop_sequences": [], "max_tokens": 10, "presence_penalty": 0,
            "frequency_penalty": 0, "echo_prompt": False}


def _jobs(n, dep="mockai/m", tag="p"):
    out = []
    for i in range(n):
        r = _req(f"{tag} {i}", dep)
        out.append(Job(request_key(dep, r), dep, r))
    return out


# -- settings ----------------------------------------------------------------------------------
def test_settings_layering_patterns_and_unknown_keys(tmp_path):
    project = tmp_path / "deployments.yaml"
    project.write_text("defaults: {max_attempts: 4}\n"
                       "deployments:\n"
                       "  '*/gpt-4o*': {input_per_million: 5, output_per_million: 15, max_concurrency: 10}\n"
                       "  openai/gpt-4o: {max_concurrency: 20}\n")
    local = tmp_path / "prod_env"
    local.mkdir()
    (local / "medhelm_deployments.yaml").write_text(
        "defaults: {timeout_s: 30}\n"
        "deployments:\n"
        "  'openai/*': {requests_per_minute: 600}\n"
        "  openai/gpt-4o: {output_per_million: 10}\n")
    reg = SettingsRegistry.load(local, project_conf=project)
    s = reg("openai/gpt-4o")
    assert (s.max_attempts, s.timeout_s, s.max_concurrency, s.requests_per_minute) == (4, 30, 20, 600)
    assert (s.input_per_million, s.output_per_million) == (5, 10) and s.priced
    assert s.cost(1_000_000, 500_000) == pytest.approx(10.0)
    other = reg("stanfordhealthcare/gpt-4o-2024-05-13")
    assert other.max_concurrency == 10 and other.output_per_million == 15 and other.requests_per_minute is None
    assert not reg("x/unpriced").priced and reg("x/unpriced").cost(10, 10) is None
    (local / "medhelm_deployments.yaml").write_text("deployments:\n  a/b: {max_concurency: 3}\n")
    with pytest.raises(MedhelmError, match=r"medhelm_deployments.yaml: deployments.'a/b': unknown setting 'max_concurency'"):
        SettingsRegistry.load(local, project_conf=project)
    (local / "medhelm_deployments.yaml").write_text("deployments:\n  a/b: {max_concurrency: 0}\n")
    with pytest.raises(MedhelmError, match="max_concurrency"):
        SettingsRegistry.load(local, project_conf=project)


def test_shipped_conf_parses_and_prices_medhelm_models():
    reg = SettingsRegistry.load(None)
    assert reg("stanfordhealthcare/gpt-4o-2024-05-13").priced
    assert reg("openai/gpt-4o-2024-05-13-dspy-zs-cot").priced
    # Open-weight models: a documented default (Together's list price), overridden locally per host.
    llama, r1 = reg("stanfordhealthcare/llama-3.3-70b-instruct"), reg("stanfordhealthcare/deepseek-r1")
    assert (llama.input_per_million, llama.output_per_million) == (0.88, 0.88)
    assert (r1.input_per_million, r1.output_per_million) == (3.00, 7.00)
    assert not reg("together/deepseek-r1-distill-llama-70b").priced  # another model, not DeepSeek-R1's price


# -- headers -------------------------------------------------------------------------------------
def test_duration_and_retry_after_parsing():
    assert parse_duration("1s") == 1.0 and parse_duration("6m0s") == 360.0 and parse_duration("20ms") == 0.02
    assert parse_duration("1h2m3.5s") == pytest.approx(3723.5) and parse_duration("0.5") == 0.5
    assert parse_duration("soon") is None and parse_duration(None) is None
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert 8 <= retry_after_seconds({"retry-after": formatdate(time.time() + 10, usegmt=True)}) <= 10
    assert retry_after_seconds({}) is None


# -- limiter ---------------------------------------------------------------------------------------
def test_token_bucket_paces_evenly():
    bucket = TokenBucket(6000)  # 100 a second, one second's worth of burst
    start = time.monotonic()
    for _ in range(150):
        bucket.take(1)
    assert 0.4 <= time.monotonic() - start <= 2.0  # 100 from the burst, then 50 at 100/s


def test_aimd_cuts_once_per_burst_and_grows_per_healthy_round():
    lim = EndpointLimiter("d", DeploymentSettings(max_concurrency=8, cooldown_s=0.2, decrease_factor=0.5))
    assert lim.current_limit == 8
    for _ in range(5):  # one burst of 429s: one cut
        lim.release(lim.acquire(), RATE_LIMITED)
    assert lim.current_limit == 4
    time.sleep(0.25)
    lim.release(lim.acquire(), RATE_LIMITED)  # a new episode: cut again
    assert lim.current_limit == 2
    time.sleep(0.25)
    for _ in range(2):
        lim.release(lim.acquire(), OK)
    assert lim.current_limit == 3  # a full round of 2 successes: +1
    for _ in range(3):
        lim.release(lim.acquire(), SERVER_ERROR)  # 5xx: no cut, no growth
    assert lim.current_limit == 3
    for _ in range(30):
        lim.release(lim.acquire(), OK)
    assert lim.current_limit == 8  # grows back, never past max_concurrency
    assert lim.in_flight == 0


def test_retry_after_and_exhausted_headers_pause_the_deployment():
    lim = EndpointLimiter("d", DeploymentSettings(max_concurrency=4))
    lim.release(lim.acquire(), RATE_LIMITED, retry_after_s=0.3)
    start = time.monotonic()
    lim.release(lim.acquire(), OK)
    assert time.monotonic() - start >= 0.25
    lim.release(lim.acquire(), OK, headers={"x-ratelimit-remaining-requests": "0",
                                            "x-ratelimit-reset-requests": "300ms"})
    start = time.monotonic()
    lim.release(lim.acquire(), OK)
    assert time.monotonic() - start >= 0.25


def test_a_freed_slot_goes_to_the_first_in_line_and_wakes_no_one_else():
    """Lowest priority first, then arrival; a release wakes the one waiter first in line (each
    waiter sleeps on its own condition), so dozens of runs' workers waiting on one deployment do
    not all wake for every answer."""
    import threading

    lim = EndpointLimiter("d", DeploymentSettings(max_concurrency=1))
    held = lim.acquire()
    order, wakeups = [], {}
    stop = threading.Event()

    def waiter(priority):
        lease = lim.acquire(stop=stop, priority=priority)
        order.append(priority)
        lim.release(lease, OK)

    threads = []
    for p in (3.0, 1.0, 2.0, 5.0, 4.0):
        t = threading.Thread(target=waiter, args=(p,))
        t.start()
        threads.append(t)
        while len(lim._waiting) < len(threads):
            time.sleep(0.005)
    # Count the wake-ups of each waiting condition from here on.
    for _, _, cond in lim._waiting:
        real = cond.notify
        wakeups[id(cond)] = 0

        def counted(n=1, _real=real, _key=id(cond)):
            wakeups[_key] += 1
            _real(n)
        cond.notify = counted
    lim.release(held, OK)
    for t in threads:
        t.join(5)
    assert order == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert all(n == 1 for n in wakeups.values()), wakeups  # each waiter woken once: when its turn came
    assert lim.in_flight == 0 and not lim._waiting


def test_a_stopped_waiter_leaves_the_line_and_hands_on_its_turn():
    import threading

    lim = EndpointLimiter("d", DeploymentSettings(max_concurrency=1))
    held = lim.acquire()
    stop_first, got = threading.Event(), []
    first = threading.Thread(target=lambda: got.append(("first", lim.acquire(stop=stop_first, priority=0.0))))
    second = threading.Thread(target=lambda: got.append(("second", lim.acquire(priority=1.0))))
    first.start()
    while len(lim._waiting) < 1:
        time.sleep(0.005)
    second.start()
    while len(lim._waiting) < 2:
        time.sleep(0.005)
    stop_first.set()
    first.join(2)
    lim.release(held, OK)
    second.join(2)
    assert dict(got)["first"] is None and dict(got)["second"] is not None
    assert lim.in_flight == 1 and not lim._waiting


# -- the engine against scripted endpoints ---------------------------------------------------------
def _engine(tmp_path, server, settings, key="sk-test", **kw):
    client = OpenAICompatibleClient(server.base_url, key, openai_model_name="m", timeout_s=settings.timeout_s)
    return CompletionEngine(Store(tmp_path / "t.duckdb"), lambda d: client, settings_for=lambda d: settings, **kw)


def test_429_bursts_shrink_concurrency_and_every_request_completes(tmp_path):
    def behave(prompt, n, srv):
        if srv.in_flight > 4:  # the endpoint allows 4 in flight
            return 429, error_body("Rate limit reached", "rate_limit_error", "rate_limit_exceeded"), \
                {"retry-after-ms": "30"}, 0
        return 200, None, {}, 0.03

    server = ScriptedServer(behave)
    try:
        settings = DeploymentSettings(max_concurrency=16, cooldown_s=0.1, max_attempts=30, base_delay_s=0.01)
        results, report = _engine(tmp_path, server, settings).run(_jobs(120))
    finally:
        server.close()
    assert report.new == 120 and report.failed == 0 and len(results) == 120
    assert report.attempts_by_kind[RATE_LIMITED] > 0 and report.retries == report.attempts_by_kind[RATE_LIMITED]
    assert report.concurrency["mockai/m"] < 16  # adapted down from 16 towards what the endpoint accepts
    assert all(r["completions"][0]["text"].startswith("answer to p") for r in results.values())


def test_requests_per_minute_is_respected(tmp_path):
    server = ScriptedServer(lambda prompt, n, srv: (200, None, {}, 0))
    try:
        settings = DeploymentSettings(max_concurrency=8, requests_per_minute=1200)  # 20 a second
        start = time.monotonic()
        _, report = _engine(tmp_path, server, settings).run(_jobs(40))
        elapsed = time.monotonic() - start
    finally:
        server.close()
    assert report.new == 40 and elapsed >= 0.8  # a burst of one second's worth (20), then 20 at 20/s


def test_classification_content_filter_fatal_timeout(tmp_path):
    azure = ("The response was filtered due to the prompt triggering Azure OpenAI's content management policy.")

    def behave(prompt, n, srv):
        if "blocked" in prompt:
            return 400, error_body(azure, code="content_filter"), {}, 0
        if "flagged" in prompt:
            return 200, {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                         "choices": [{"index": 0, "finish_reason": "content_filter",
                                      "message": {"role": "assistant", "content": ""}}],
                         "usage": {"prompt_tokens": 7, "completion_tokens": 0, "total_tokens": 7}}, {}, 0
        if "bad" in prompt:
            return 400, error_body("This model's maximum context length is 10 tokens"), {}, 0
        if "slow" in prompt:
            return 200, None, {}, 1.0
        return 200, None, {}, 0

    server = ScriptedServer(behave)
    try:
        settings = DeploymentSettings(max_concurrency=4, timeout_s=0.3, max_attempts=2, base_delay_s=0.01)
        jobs = [Job(request_key("mockai/m", _req(p)), "mockai/m", _req(p))
                for p in ("fine", "blocked", "flagged", "bad", "slow")]
        engine = _engine(tmp_path, server, settings)
        results, report = engine.run(jobs)
        sent = server.count
    finally:
        server.close()
    by_prompt = {j.request["prompt"]: j.key for j in jobs}
    assert results[by_prompt["fine"]]["success"] is True
    blocked = results[by_prompt["blocked"]]
    assert blocked["success"] is False and blocked["completions"] == [{"text": "", "logprob": 0, "tokens": []}]
    assert blocked["error"] == "Content blocked by Azure's content management filter"
    assert results[by_prompt["flagged"]]["error"] == "Content blocked by OpenAI filter"
    assert by_prompt["bad"] not in results and by_prompt["slow"] not in results
    assert "maximum context length" in report.errors[by_prompt["bad"]]
    assert "timed out" in report.errors[by_prompt["slow"]] and "after 2 attempts" in report.errors[by_prompt["slow"]]
    assert sent == 6  # the timeout was tried twice, nothing else retried
    assert (report.new, report.failed, report.content_filtered) == (3, 2, 2)
    with engine.store.connect() as conn:
        outcomes = dict(conn.execute("SELECT request_key, outcome FROM completions").fetchall())
        kinds = dict(conn.execute("SELECT request_key, kind FROM completion_errors").fetchall())
        tokens = conn.execute("SELECT prompt_tokens FROM completions WHERE request_key = ?",
                              [by_prompt["flagged"]]).fetchone()[0]
    assert outcomes == {by_prompt["fine"]: OK, by_prompt["blocked"]: CONTENT_FILTER,
                        by_prompt["flagged"]: CONTENT_FILTER}
    assert kinds == {by_prompt["bad"]: FATAL, by_prompt["slow"]: TIMEOUT}
    assert tokens == 7  # usage is kept even for a filtered answer (it may be billed)


def test_auth_failure_stops_the_deployment_without_sending_the_rest(tmp_path):
    server = ScriptedServer(lambda prompt, n, srv: (401, error_body("Incorrect API key provided: sk-abc***xyz",
                                                                    code="invalid_api_key"), {}, 0.02))
    try:
        settings = DeploymentSettings(max_concurrency=2, max_attempts=5)
        _, report = _engine(tmp_path, server, settings).run(_jobs(30))
        sent = server.count
    finally:
        server.close()
    assert report.failed == 30 and report.new == 0
    assert sent <= 3  # what was already in flight; the others were never sent
    assert all("401" in e for e in report.errors.values())
    assert report.attempts_by_kind == {FATAL_ENDPOINT: sent}
