"""medhelm 0.8.0's (v0.5.13's) vendor clients where they differ from HELM 0.5.16's, as edition switches
(`Edition.client_changes` -> `ClientSwitches`): the mechanism (client variants, request keys, result
views over one stored answer) and each difference, 0.5.16 vs 0.8.0 for the same request."""
from __future__ import annotations

import json

import httpx
import pytest

from medhelm_core.clients.base import Attempt
from medhelm_core.clients.edition_views import CompletionView, reworded_error
from medhelm_core.clients.openai_compatible import OpenAICompatibleClient, apply_edition_switches
from medhelm_core.editions import ClientChange, Edition, load_edition
from medhelm_core.errors import MedhelmError
from medhelm_core.ratelimit import CONTENT_FILTER, FATAL
from medhelm_core.run.workspace import Workspace
from medhelm_core.store import request_key
from medhelm_core.tokenizers import SimpleTokenizer
from tests.clients.scripted_http import ScriptedServer

HELM, MEDHELM = load_edition("helm-0.5.16"), load_edition("medhelm-0.8.0")
OPENAI = "helm.clients.openai_client.OpenAIClient"
SHC_AZURE = "helm.clients.stanfordhealthcare_azure_openai_client.StanfordHealthCareAzureOpenAIClient"
RESPONSES = "helm.clients.openai_responses_client.OpenAIResponseClient"
ANTHROPIC = "helm.clients.anthropic_client.AnthropicMessagesClient"
SAME_IN_BOTH = [  # byte-identical modules in the two wheels (or differing only in constructor arguments)
    "helm.clients.stanfordhealthcare_claude_client.StanfordHealthCareClaudeClient",
    "helm.clients.stanfordhealthcare_google_client.StanfordHealthCareGoogleClient",
    "helm.clients.google_genai_client.GoogleGenAIClient",
    "helm.clients.vertexai_client.VertexAIChatClient",
    "helm.clients.bedrock_client.BedrockNovaClient",
    "helm.clients.bedrock_client.BedrockLlamaClient",
    "helm.clients.together_client.TogetherClient",
    "helm.clients.together_client.TogetherChatClient",
]
KEY = "sk-test-0123456789abcdef"
AZURE_FILTERED = "Content blocked by Azure's content management filter"
ALL_THREE = "Content blocked by Azure's, Microsoft's, or OpenAI's content management filter"
OPENAI_POLICY = "The response was filtered due to the prompt triggering our content management policy."


def _request(**kw):
    req = {"model": "openai/gpt-4o-2024-05-13", "model_deployment": "myorg/gpt-4o", "embedding": False,
           "prompt": "Say hi", "temperature": 0.0, "num_completions": 1, "top_k_per_token": 1, "max_tokens": 5,
           "stop_sequences": [], "echo_prompt": False, "top_p": 1, "presence_penalty": 0, "frequency_penalty": 0}
    req.update(kw)
    return req


def _ok(*completions):
    return {"success": True, "embedding": [], "completions": list(completions), "cached": False,
            "request_time": 1.0, "request_datetime": 1}


# ---------------------------------------------------------------------------------------------
# The switches
# ---------------------------------------------------------------------------------------------
def test_helm_0516_changes_no_client_and_medhelm_080_the_ones_that_differ():
    for cls in [OPENAI, SHC_AZURE, RESPONSES, ANTHROPIC, *SAME_IN_BOTH]:
        s = HELM.client_switches(cls)
        assert not s.changes_results and s.client_variant is None and s.request_variant is None
    for cls in SAME_IN_BOTH:  # 0.8.0 reads and sends these as 0.5.16 does
        s = MEDHELM.client_switches(cls)
        assert not s.changes_results and s.client_variant is None, cls
    azure = MEDHELM.client_switches(SHC_AZURE)
    assert azure.tokenize_completions and azure.error_texts == {AZURE_FILTERED: ALL_THREE}
    assert azure.non_fatal_errors == {OPENAI_POLICY: ALL_THREE} and azure.request_variant is None
    responses = MEDHELM.client_switches(RESPONSES)
    assert responses.request_fields == {"prompt_cache_retention": "24h"}
    assert not responses.tokenize_completions  # the Responses client never tokenized
    claude = MEDHELM.client_switches(ANTHROPIC)
    assert claude.last_content_block and claude.tokenize_response_text and claude.client_variant is None


def test_client_changes_merge_in_order_and_are_checked():
    e = Edition(name="x", description="d", upstream="u", client_changes=[
        ClientChange(classes=["A", "B"], request_fields={"k": 1}, error_texts={"e": "1"}),
        ClientChange(classes=["B"], request_fields={"k": 2, "j": 3}, last_content_block=True)])
    assert e.client_switches("A").request_fields == {"k": 1} and not e.client_switches("A").last_content_block
    b = e.client_switches("B")
    assert b.request_fields == {"k": 2, "j": 3} and b.error_texts == {"e": "1"} and b.last_content_block
    assert b.request_variant == '{"j": 3, "k": 2}'
    with pytest.raises(ValueError):
        ClientChange(classes=["A"], unknown_switch=True)


# ---------------------------------------------------------------------------------------------
# The mechanism: one workspace, two editions
# ---------------------------------------------------------------------------------------------
def _workspace(tmp_path, edition="helm-0.5.16") -> Workspace:
    env = tmp_path / "prod_env"
    env.mkdir(exist_ok=True)
    (env / "credentials.conf").write_text(f'myorgApiKey: "{KEY}"\n')
    deployments = [
        {"name": "myorg/gpt-4o", "model_name": "openai/gpt-4o-2024-05-13", "tokenizer_name": "simple/tokenizer1",
         "max_sequence_length": 1000, "client_spec": {"class_name": OPENAI, "args": {"base_url": "http://127.0.0.1:9/v1"}}},
        {"name": "myorg/claude", "model_name": "anthropic/claude-3-7-sonnet-20250219",
         "tokenizer_name": "simple/tokenizer1", "max_sequence_length": 1000,
         "client_spec": {"class_name": ANTHROPIC, "args": {"base_url": "http://127.0.0.1:9"}}},
        {"name": "myorg/gpt-5", "model_name": "openai/gpt-5-2025-08-07", "tokenizer_name": "simple/tokenizer1",
         "max_sequence_length": 1000, "client_spec": {"class_name": RESPONSES, "args": {"base_url": "http://127.0.0.1:9/v1"}}},
    ]
    (env / "model_deployments.yaml").write_text(json.dumps({"model_deployments": deployments}))
    return Workspace(tmp_path / "out", env, edition=edition)


def test_request_keys_differ_only_where_an_edition_sends_another_request(tmp_path):
    ws = _workspace(tmp_path)
    other = ws.for_edition("medhelm-0.8.0")
    chat, claude, responses = (_request(model_deployment=d) for d in ("myorg/gpt-4o", "myorg/claude", "myorg/gpt-5"))
    for req in (chat, claude, responses):  # the default edition's keys are the store's, as before
        assert ws.request_key(req["model_deployment"], req) == request_key(req["model_deployment"], req)
    # medhelm 0.8.0 sends the same chat and Messages requests (one paid answer serves both) ...
    assert other.request_key("myorg/gpt-4o", chat) == request_key("myorg/gpt-4o", chat)
    assert other.request_key("myorg/claude", claude) == request_key("myorg/claude", claude)
    # ... but another Responses request (prompt_cache_retention): another paid call, another key.
    assert other.request_key("myorg/gpt-5", responses) != request_key("myorg/gpt-5", responses)


def test_clients_are_built_once_per_deployment_and_variant(tmp_path):
    ws = _workspace(tmp_path)
    other = ws.for_edition("medhelm-0.8.0")
    default, medhelm = ws.client("myorg/gpt-4o"), other.client("myorg/gpt-4o")
    assert default is ws.client("myorg/gpt-4o") and medhelm is other.client("myorg/gpt-4o")
    assert default is not medhelm  # 0.8.0's OpenAIClient ends one more API error as non-fatal
    assert default.edition_non_fatal_errors == {} and medhelm.edition_non_fatal_errors == {OPENAI_POLICY: ALL_THREE}
    assert ws._clients[("myorg/gpt-4o", MEDHELM.client_switches(OPENAI).client_variant)] is medhelm
    assert ws._clients["myorg/gpt-4o"] is default  # the default client's cache key is unchanged


def test_a_request_change_a_client_cannot_make_stops_before_any_call(tmp_path):
    pytest.importorskip("anthropic")
    ws = _workspace(tmp_path)
    ws.switches = Edition(name="x", description="d", upstream="u",
                          client_changes=[ClientChange(classes=[ANTHROPIC], request_fields={"k": 1})])
    with pytest.raises(MedhelmError, match=r"^edition .* sends .*AnthropicMessagesClient requests with "
                                           r"\{\"k\": 1\}, which medhelm's client of that class cannot send"):
        ws.client("myorg/claude")


def test_views_only_where_the_edition_reads_an_answer_otherwise(tmp_path):
    ws = _workspace(tmp_path)
    other = ws.for_edition("medhelm-0.8.0")
    assert ws.completion_view("myorg/gpt-4o") is None and ws.completion_view("myorg/claude") is None
    assert isinstance(other.completion_view("myorg/gpt-4o"), CompletionView)
    assert other.completion_view("myorg/claude") is other.completion_view("myorg/claude")
    recorded = {"client_spec": {"class_name": "helm.clients.together_client.TogetherClient"},
                "tokenizer_name": "simple/tokenizer1"}
    assert other.completion_view("x/y", recorded) is None


# ---------------------------------------------------------------------------------------------
# OpenAIClientUtils.handle_openai_error: OpenAI's own content-policy error, the Azure one's words
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def server():
    s = ScriptedServer()
    yield s
    s.close()


def test_openai_content_policy_error_is_fatal_in_0516_and_non_fatal_in_080(server):
    body = {"error": {"message": OPENAI_POLICY, "type": "invalid_request_error", "code": "content_filter"}}
    helm = OpenAICompatibleClient(base_url=server.url + "/v1", api_key=KEY)
    medhelm = apply_edition_switches(OpenAICompatibleClient(base_url=server.url + "/v1", api_key=KEY),
                                     MEDHELM.client_switches(OPENAI))
    server.reply(400, body)
    server.reply(400, body)
    got = helm.attempt(_request())
    assert got.kind == FATAL and got.result is None  # HELM 0.5.16: "OpenAI error: ...", the run fails
    got = medhelm.attempt(_request())
    assert got.kind == CONTENT_FILTER
    assert got.result == {"success": False, "embedding": [], "completions": [{"text": "", "logprob": 0, "tokens": []}],
                          "cached": False, "error": ALL_THREE,
                          "error_flags": {"is_retriable": False, "is_fatal": False}}
    assert server.requests[0]["raw"] == server.requests[1]["raw"]  # the same request on the wire
    assert KEY not in repr(medhelm)


def test_the_azure_filter_error_is_reworded_by_080s_view():
    stored = {"success": False, "embedding": [], "completions": [{"text": "", "logprob": 0, "tokens": []}],
              "cached": False, "error": AZURE_FILTERED, "error_flags": {"is_retriable": False, "is_fatal": False}}
    view = CompletionView(MEDHELM.client_switches(SHC_AZURE), SimpleTokenizer())
    assert view(stored, _request()) == {**stored, "error": ALL_THREE}
    assert reworded_error(_ok({"text": "x", "logprob": 0, "tokens": []}), {AZURE_FILTERED: ALL_THREE})["success"]
    other = {**stored, "error": "Content blocked by OpenAI filter"}  # the finish_reason one: same words in both
    assert view(other, _request()) == other


# ---------------------------------------------------------------------------------------------
# AnthropicMessagesClient: the last text block, cut and tokenized (v0.5.13), vs all joined (0.5.16)
# ---------------------------------------------------------------------------------------------
def _claude_view():
    return CompletionView(MEDHELM.client_switches(ANTHROPIC), SimpleTokenizer())


def test_claude_080_keeps_the_last_blocks_and_tokenizes():
    stored = _ok({"text": "xy", "logprob": 0.0, "tokens": [], "thinking": {"text": "AB"}})
    out = _claude_view()(stored, _request(), [{"text": "y", "thinking": "B"}])
    assert out["completions"] == [{"text": "y", "logprob": 0.0, "tokens": [{"text": "y", "logprob": 0.0}],
                                   "finish_reason": {"reason": ""}, "thinking": {"text": "B"}}]
    assert {k: v for k, v in out.items() if k != "completions"} == {k: v for k, v in stored.items() if k != "completions"}
    # One block each: nothing kept beside the answer, the stored text is the last block.
    out = _claude_view()(_ok({"text": "Hi", "logprob": 0.0, "tokens": []}), _request())
    assert out["completions"] == [{"text": "Hi", "logprob": 0.0, "tokens": [{"text": c, "logprob": 0.0} for c in "Hi"],
                                   "finish_reason": {"reason": ""}}]


def test_claude_080_cuts_at_stop_sequences_and_max_tokens():
    view = _claude_view()
    out = view(_ok({"text": "A\nB", "logprob": 0.0, "tokens": []}), _request(stop_sequences=["\n"]))
    assert out["completions"][0]["text"] == "A" and out["completions"][0]["finish_reason"] == {"reason": "stop"}
    out = view(_ok({"text": "abcdefgh", "logprob": 0.0, "tokens": []}), _request(max_tokens=3))
    # simple/tokenizer1 ignores truncation (HELM's quirk): the text stays whole, finish_reason "length".
    assert out["completions"][0]["finish_reason"] == {"reason": "length"}
    with pytest.raises(MedhelmError, match="echo_prompt"):
        view(_ok({"text": "x", "logprob": 0.0, "tokens": []}), _request(echo_prompt=True))
    failed = {"success": False, "completions": [], "error": "Anthropic response has empty content"}
    assert view(failed, _request()) is failed


def test_claude_080_view_waits_for_the_stored_blocks_but_never_counts_a_missing_stop_text():
    view = _claude_view()
    assert view.needs_stored_parts(_request()) and not view.stop_cut_unknown(_request(stop_sequences=["\n"]), None)
    chat = CompletionView(MEDHELM.client_switches(OPENAI), SimpleTokenizer())
    assert not chat.needs_stored_parts(_request()) and chat.needs_stored_parts(_request(stop_sequences=["\n"]))
    assert chat.stop_cut_unknown(_request(stop_sequences=["\n"]), None)


def test_claude_client_keeps_the_last_blocks_beside_the_joined_answer():
    anthropic = pytest.importorskip("anthropic")
    from medhelm_core.clients.anthropic_messages import AnthropicMessagesClient

    def client(content):
        def reply(request):
            return httpx.Response(200, json={"id": "m", "type": "message", "role": "assistant", "model": "c",
                                             "content": content, "stop_reason": "end_turn", "stop_sequence": None,
                                             "usage": {"input_tokens": 1, "output_tokens": 1}})
        http = httpx.Client(transport=httpx.MockTransport(reply))
        return AnthropicMessagesClient(anthropic, KEY, base_url="http://127.0.0.1:9", http_client=http)

    req = _request(model="anthropic/claude-3-7-sonnet-20250219", model_deployment="myorg/claude")
    content = [{"type": "thinking", "thinking": "A", "signature": "s"}, {"type": "text", "text": "x"},
               {"type": "thinking", "thinking": "B", "signature": "s"}, {"type": "text", "text": "y"}]
    got: Attempt = client(content).attempt(req)
    assert got.result["completions"] == [{"text": "xy", "logprob": 0.0, "tokens": [], "thinking": {"text": "AB"}}]
    assert got.untruncated == [{"text": "y", "thinking": "B"}]
    # The same stored answer, read by each edition:
    assert _claude_view()(got.result, req, got.untruncated)["completions"][0]["text"] == "y"
    got = client([{"type": "thinking", "thinking": "A", "signature": "s"}, {"type": "text", "text": "Hi"}]).attempt(req)
    assert got.untruncated is None and got.result["completions"][0]["thinking"] == {"text": "A"}


# ---------------------------------------------------------------------------------------------
# The gateway's and OpenAI's other factories build 0.8.0's client; OpenAIResponseClient's body
# ---------------------------------------------------------------------------------------------
GATEWAY_OPENAI = "helm.clients.stanfordhealthcare_openai_client.StanfordHealthCareOpenAIClient"
SHC = "helm.clients.stanfordhealthcare_shc_openai_client.StanfordHealthCareSHCOpenAIClient"
AZURE = "helm.clients.azure_openai_client.AzureOpenAIClient"


def test_every_openai_family_factory_builds_080s_client(tmp_path):
    env = tmp_path / "prod_env"
    env.mkdir()
    (env / "credentials.conf").write_text(f'gwApiKey: "{KEY}"\ngwEndpoint: "http://127.0.0.1:9"\n'
                                          f'azApiKey: "{KEY}"\nazEndpoint: "http://127.0.0.1:9"\n')
    common = {"model_name": "openai/gpt-4o-2024-05-13", "tokenizer_name": "simple/tokenizer1", "max_sequence_length": 1000}
    deployments = [
        {"name": "gw/azure", **common, "client_spec": {"class_name": SHC_AZURE, "args": {"api_version": "2024-10-21",
                                                                                         "openai_model_name": "gpt-4o"}}},
        {"name": "gw/shc", **common, "client_spec": {"class_name": SHC}},
        {"name": "gw/openai", **common, "client_spec": {"class_name": GATEWAY_OPENAI,
                                                        "args": {"base_url": "{endpoint}/llama/v1"}}},
        {"name": "az/gpt-4o", **common, "client_spec": {"class_name": AZURE}},
    ]
    (env / "model_deployments.yaml").write_text(json.dumps({"model_deployments": deployments}))
    ws = Workspace(tmp_path / "out", env)
    other = ws.for_edition("medhelm-0.8.0")
    for name in ("gw/azure", "gw/shc", "gw/openai", "az/gpt-4o"):
        default, medhelm = ws.client(name), other.client(name)
        assert default is not medhelm and type(default) is type(medhelm), name
        assert default.edition_non_fatal_errors == {} and medhelm.edition_non_fatal_errors == {OPENAI_POLICY: ALL_THREE}
        assert default.raw_request(_request()) == medhelm.raw_request(_request())  # the same request


def test_responses_080_adds_prompt_cache_retention_after_store(tmp_path):
    ws = _workspace(tmp_path)
    default, medhelm = ws.client("myorg/gpt-5"), ws.for_edition("medhelm-0.8.0").client("myorg/gpt-5")
    for model in ("openai/gpt-4o-2024-05-13", "openai/gpt-5-2025-08-07"):
        req = _request(model=model, model_deployment="myorg/gpt-5")
        helm_body, medhelm_body = default.raw_request(req), medhelm.raw_request(req)
        keys = list(helm_body)
        assert "prompt_cache_retention" not in helm_body
        at = keys.index("store") + 1
        assert list(medhelm_body) == keys[:at] + ["prompt_cache_retention"] + keys[at:]
        assert medhelm_body == {**helm_body, "prompt_cache_retention": "24h"}
