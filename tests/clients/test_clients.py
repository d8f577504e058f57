"""The OpenAI-compatible client against a real HTTP server: HELM's request mapping and results."""
import json

import pytest

from medhelm_core.clients.base import RequestFailed, RetryPolicy
from medhelm_core.clients.openai_compatible import OpenAICompatibleClient, remove_deepseek_r1_thinking, truncate_sequence
from tests.mock_server import MockServer
from tests.oracle import SYNTHETIC, load, run_dirs


def _client(server, **kw):
    return OpenAICompatibleClient(server.base_url, "sk-test-key", **kw)


def test_completions_equal_the_golden_ones(mock_server):
    run = run_dirs(SYNTHETIC, "oracle-private")[0]
    states = load(run / "scenario_state.json")["request_states"][:10]
    model = load(run / "run_spec.json")["adapter_spec"]["model"].split("/")[1]
    client = _client(mock_server, openai_model_name=model)
    for st in states:
        got = client.complete(st["request"])
        assert got["completions"][0]["text"] == st["result"]["completions"][0]["text"]
        assert got["completions"][0]["finish_reason"] == st["result"]["completions"][0]["finish_reason"]
        assert got["success"] is True and got["completions"][0]["tokens"] == []


def test_reasoning_models_get_max_completion_tokens_and_no_sampling_params():
    client = OpenAICompatibleClient("http://127.0.0.1:9/v1", "k")
    req = {"model": "openai/o3-mini-2025-01-31", "prompt": "p", "temperature": 0.0, "top_p": 1,
           "num_completions": 1, "stop_sequences": [], "max_tokens": 4000, "presence_penalty": 0,
           "frequency_penalty": 0}
    raw = client.raw_request(req)
    assert raw == {"model": "o3-mini-2025-01-31", "messages": [{"role": "user", "content": "p"}], "n": 1,
                   "max_completion_tokens": 4000}
    raw = client.raw_request({**req, "model": "openai/gpt-4o"})
    assert raw["max_tokens"] == 4000 and raw["temperature"] == 0.0 and raw["stop"] is None


def test_transient_failures_are_retried_to_the_same_answer():
    flaky = MockServer("--fail-rate", "0.5", "--fail-codes", "429,500", "--retry-after-ms", "5")
    steady = MockServer()
    try:
        req = {"model": "mockai/mock-gpt-a", "model_deployment": "mockai/mock-gpt-a", "prompt": "Say hi to the team",
               "temperature": 0.0, "top_p": 1, "num_completions": 1, "stop_sequences": [], "max_tokens": 20,
               "presence_penalty": 0, "frequency_penalty": 0, "top_k_per_token": 1, "echo_prompt": False,
               "embedding": False}
        retries = []
        for i in range(8):
            r = {**req, "prompt": f"{req['prompt']} #{i}"}
            a = _client(flaky, retry=RetryPolicy(max_attempts=8, base_delay_s=0.01)).complete(r, retries.append)
            b = _client(steady).complete(r)
            assert a["completions"] == b["completions"]
        assert retries, "the flaky server should have forced at least one retry"
    finally:
        flaky.close()
        steady.close()


def test_exhausted_retries_raise_without_leaking_the_key():
    flaky = MockServer("--fail-rate", "1.0", "--fail-max-consecutive", "0", "--retry-after-ms", "1")
    try:
        client = OpenAICompatibleClient(flaky.base_url, "sk-SECRET-123", retry=RetryPolicy(max_attempts=2))
        with pytest.raises(RequestFailed) as exc:
            client.complete({"model": "m/x", "prompt": "p", "temperature": 0.0, "top_p": 1, "num_completions": 1,
                             "stop_sequences": [], "max_tokens": 5, "presence_penalty": 0, "frequency_penalty": 0})
        assert "SECRET" not in str(exc.value) and "after 2 attempts" in str(exc.value)
    finally:
        flaky.close()


def test_truncate_sequence_cuts_at_stop_and_drops_finish_reason_like_helm():
    c = {"text": "abc\ndef", "logprob": 0, "tokens": [], "finish_reason": {"reason": "stop"}}
    out = truncate_sequence(c, {"stop_sequences": ["\n"], "max_tokens": 10})
    assert out == {"text": "abc", "logprob": 0, "tokens": []}
    assert truncate_sequence(c, {"stop_sequences": [], "max_tokens": 10}) == c


def test_deepseek_thinking_removed():
    assert remove_deepseek_r1_thinking("<think>x</think>\n\nanswer") == "answer"
    assert remove_deepseek_r1_thinking("<think>x</think>answer") == "answer"
    assert remove_deepseek_r1_thinking("<think>unclosed") == ""
    assert remove_deepseek_r1_thinking("plain") == "plain"


def test_attempt_reports_usage_and_rate_limit_headers_only():
    from tests.mock_server import ScriptedServer

    headers = {"x-ratelimit-remaining-requests": "41", "x-ratelimit-reset-tokens": "6m0s", "x-secret-thing": "no"}
    server = ScriptedServer(lambda prompt, n, srv: (200, None, headers, 0))
    try:
        att = _client(server).attempt({"model": "m/x", "prompt": "two words", "temperature": 0.0, "top_p": 1,
                                       "num_completions": 1, "stop_sequences": [], "max_tokens": 5,
                                       "presence_penalty": 0, "frequency_penalty": 0})
    finally:
        server.close()
    assert att.kind == "ok" and att.usage["prompt_tokens"] == 2 and att.completion_tokens == 3
    assert att.headers == {"x-ratelimit-remaining-requests": "41", "x-ratelimit-reset-tokens": "6m0s"}
    assert att.result["completions"][0]["text"] == "answer to two words"


def test_error_texts_never_carry_the_key():
    """A gateway that echoes the key (or part of it) in its error: the message we keep is redacted."""
    from tests.mock_server import ScriptedServer, error_body

    key = "sk-SECRET-abcdef123456"

    def behave(prompt, n, srv):
        if "auth" in prompt:
            return 401, error_body(f"Incorrect API key provided: {key} (Bearer {key})"), {}, 0
        return 500, error_body(f"upstream failed for key {key[:12]}***{key[-4:]}"), {}, 0

    server = ScriptedServer(behave)
    try:
        client = OpenAICompatibleClient(server.base_url, key, retry=RetryPolicy(max_attempts=1))
        base = {"model": "m/x", "temperature": 0.0, "top_p": 1, "num_completions": 1, "stop_sequences": [],
                "max_tokens": 5, "presence_penalty": 0, "frequency_penalty": 0}
        auth = client.attempt({**base, "prompt": "auth"})
        upstream = client.attempt({**base, "prompt": "other"})
        with pytest.raises(RequestFailed) as exc:
            client.complete({**base, "prompt": "auth"})
    finally:
        server.close()
    assert auth.kind == "fatal_endpoint" and upstream.kind == "server_error"
    for text in (auth.message, upstream.message, str(exc.value), repr(client)):
        assert "SECRET" not in text and "abcdef" not in text, text
    assert "provided: ***" in auth.message and "sk-SECRET-abcd***" not in upstream.message


def test_a_completion_of_a_request_with_stops_keeps_the_text_the_api_returned():
    """The stored answer is HELM 0.5.16's (cut at the stop); the whole text is kept beside it, so an
    edition that tokenizes completions (medhelm 0.8.0) can redo the cut without asking again."""
    from tests.mock_server import ScriptedServer

    server = ScriptedServer(lambda prompt, n, srv: (200, None, {}, 0))
    base = {"model": "m/x", "temperature": 0.0, "top_p": 1, "num_completions": 1, "max_tokens": 5,
            "presence_penalty": 0, "frequency_penalty": 0}
    try:
        cut = _client(server).attempt({**base, "prompt": "two words", "stop_sequences": [" to"]})
        whole = _client(server).attempt({**base, "prompt": "two words", "stop_sequences": ["\n"]})
        no_stop = _client(server).attempt({**base, "prompt": "two words", "stop_sequences": []})
    finally:
        server.close()
    assert cut.result["completions"][0]["text"] == "answer" and cut.untruncated == ["answer to two words"]
    # With stop sequences the API's text is always kept (nothing cut this time); without, never.
    assert whole.result["completions"][0]["text"] == "answer to two words" and whole.untruncated == ["answer to two words"]
    assert no_stop.untruncated is None


@pytest.mark.parametrize("cls, org_source, sent", [
    ("helm.clients.openai_client.OpenAIClient", {"credentials": "org-clinic"}, "org-clinic"),
    ("helm.clients.openai_client.OpenAIClient", {"args": "org-from-args", "credentials": "org-clinic"},
     "org-from-args"),
    ("helm.clients.openai_client.OpenAILegacyCompletionsClient", {"credentials": "org-clinic"}, "org-clinic"),
    ("helm.clients.openai_client.OpenAIClient", {}, None),
    ("helm.clients.vllm_client.VLLMChatClient", {"credentials": "org-clinic"}, None),  # HELM passes org_id=None
])
def test_the_organization_is_sent_as_helms_openai_client_sends_it(cls, org_source, sent):
    """HELM's auto client gives OpenAIClient `org_id` = client_spec.args.org_id, else credentials
    `<org>OrgId`; the SDK sends it as the OpenAI-Organization header."""
    from pydantic import SecretStr

    from medhelm_core.clients import client_for_deployment
    from medhelm_core.helm_config.deployments import Credentials, Deployment
    from tests.clients.scripted_http import ScriptedServer

    server = ScriptedServer()
    try:
        args = {"base_url": server.url + "/v1", **({"org_id": org_source["args"]} if "args" in org_source else {})}
        dep = Deployment(name="openai/gpt-4o-2024-05-13", model_name="openai/gpt-4o-2024-05-13",
                         tokenizer_name="simple/tokenizer1", client_spec={"class_name": cls, "args": args})
        values = {"openaiApiKey": "sk-test", **({"openaiOrgId": org_source["credentials"]}
                                                 if "credentials" in org_source else {})}
        client = client_for_deployment(dep, Credentials(values={k: SecretStr(v) for k, v in values.items()},
                                                        source="/p/credentials.conf"))
        legacy = cls.endswith("LegacyCompletionsClient")
        server.reply(200, {"id": "x", "object": "text_completion" if legacy else "chat.completion", "created": 0,
                           "model": "m", "choices": [{"index": 0, "finish_reason": "stop", "text": "A",
                                                      "message": {"role": "assistant", "content": "A"}}],
                           "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
        client.attempt({"model_deployment": dep.name, "model": dep.model_name, "embedding": False, "prompt": "Q",
                        "temperature": 0.0, "num_completions": 1, "top_k_per_token": 1, "max_tokens": 1,
                        "stop_sequences": [], "echo_prompt": False, "top_p": 1, "presence_penalty": 0,
                        "frequency_penalty": 0})
        [req] = server.requests
        assert req["headers"].get("openai-organization") == sent
    finally:
        server.close()
