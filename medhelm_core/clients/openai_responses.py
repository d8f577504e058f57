"""HELM's `OpenAIResponseClient`: the OpenAI Responses API (`POST {base_url}/responses`).

Body as HELM builds it: `{"model", "input": <prompt string> (or the request's messages), "top_p",
"max_output_tokens": max(16, max_tokens), "temperature", "store": false}`, `reasoning.effort` when the
deployment sets `reasoning_effort`, and for reasoning models (`o<digit>…`, `gpt-5…`)
`reasoning.summary = "detailed"` without temperature and top_p. No stop sequences and no `n`: HELM
asks `num_completions` times with one cache key, so it sends one request and repeats its completion
(and then reports the result as cached). Reply: text = the `output_text` parts of `message` items
joined by blank lines, thinking = the reasoning summaries (and reasoning content) joined the same way;
a refusal is HELM's non-fatal failed result; an output item of another type fails the request as
HELM's ValueError does. logprob 0.0, no tokens, no finish reason, no stop-sequence cut.
The reply is read as JSON (not through the SDK's typed `Response`), so a field the installed SDK
does not know does not matter.
"""
from __future__ import annotations

import time
from typing import Any

import httpx
import openai

from medhelm_core.clients.base import Attempt, model_api
from medhelm_core.clients.openai_compatible import (OpenAICompatibleClient, _non_fatal,
                                                    apply_edition_switches, is_reasoning_model)
from medhelm_core.helm_config.deployments import resolve_api_key, resolve_base_url, resolve_org_id
from medhelm_core.ratelimit import CONTENT_FILTER, FATAL, OK, SERVER_ERROR

OPENAI_RESPONSE_CLIENT = "helm.clients.openai_responses_client.OpenAIResponseClient"


class _UnknownOutput(Exception):
    pass


class OpenAIResponsesClient(OpenAICompatibleClient):
    """Errors are classified as the chat client's (`_status_error`, HELM's `handle_openai_error`)."""

    def __init__(self, base_url: str | None, api_key: str, organization: str | None = None,
                 openai_model_name: str | None = None, reasoning_effort: str | None = None,
                 timeout_s: float = 600.0, max_concurrency: int | None = None, http_client=None):
        sdk = openai.OpenAI(api_key=api_key, organization=organization, base_url=base_url, max_retries=0,
                            timeout=timeout_s, http_client=http_client)
        super().__init__(base_url, api_key, openai_model_name=openai_model_name, timeout_s=timeout_s,
                         max_concurrency=max_concurrency, sdk_client=sdk)
        self.reasoning_effort = reasoning_effort

    def __repr__(self) -> str:
        return (f"OpenAIResponseClient(base_url={str(self._client.base_url)!r}, model={self.openai_model_name!r}, "
                f"reasoning_effort={self.reasoning_effort!r})")

    def raw_request(self, request: dict) -> dict[str, Any]:
        """HELM's `_make_raw_request`; ValueError where HELM raises."""
        engine = request["model"].split("/", 1)[1] if "/" in request["model"] else request["model"]
        messages = request.get("messages")
        if messages is not None:
            if request.get("prompt"):
                raise ValueError("More than one of `prompt`, `messages` and `multimodal_prompt` was set in request")
            for message in messages:
                if not message.get("role") or not message.get("content"):
                    raise ValueError("All messages must have a role and content")
            if not messages or messages[-1]["role"] != "user":
                raise ValueError("Last message must have role 'user'")
            input_: Any = messages
        else:
            input_ = request["prompt"]
        raw: dict[str, Any] = {
            "model": self.openai_model_name or engine,
            "input": input_,
            "top_p": request["top_p"],
            "max_output_tokens": max(16, request["max_tokens"]),  # the API refuses fewer than 16
            "temperature": request["temperature"],
            "store": False,
        }
        # An edition's own fields (medhelm 0.8.0: prompt_cache_retention) follow `store`, as in its client.
        raw.update(self.edition_request_fields)
        if self.reasoning_effort:
            raw["reasoning"] = {"effort": self.reasoning_effort}
        if is_reasoning_model(engine):
            raw.setdefault("reasoning", {})["summary"] = "detailed"
            raw.pop("temperature", None)
            raw.pop("top_p", None)
        return raw

    def _post(self, raw: dict[str, Any]):
        return self._client.post("/responses", body=raw, cast_to=httpx.Response)

    def attempt(self, request: dict, raw: dict[str, Any] | None = None) -> Attempt:
        if raw is None:
            try:
                raw = self.raw_request(request)
            except ValueError as e:
                return Attempt(FATAL, message=f"invalid request: {e}")
        start = time.time()
        sent = self._exchange(raw)
        if isinstance(sent, Attempt):
            return sent
        response, body, headers = sent
        elapsed = time.time() - start
        status = response.status_code
        if not isinstance(body, dict) or not isinstance(body.get("output"), list):
            return Attempt(SERVER_ERROR, message=f"malformed response (HTTP {status})", status=status,
                           headers=headers)
        if body.get("error"):  # HELM asserts there is none: the run stops
            return Attempt(FATAL, message=self.redact(f"error in response: {body['error']}"), status=status,
                           headers=headers)
        usage = _usage(body.get("usage"))
        try:
            parsed = _parse_output(body["output"], request)
        except _UnknownOutput as e:
            return Attempt(FATAL, message=f"Unknown output type {e}", status=status, headers=headers, usage=usage)
        except (KeyError, TypeError, AttributeError) as e:
            return Attempt(SERVER_ERROR, message=f"malformed response (HTTP {status}): {type(e).__name__} {e}",
                           status=status, headers=headers, usage=usage)
        if isinstance(parsed, str):  # a refusal
            error = f"Received refusal from OpenAI API: {parsed}"
            return Attempt(CONTENT_FILTER, result=_non_fatal(error, 1), message=error, status=status,
                           headers=headers, usage=usage)
        n = request.get("num_completions") or 1
        result = {"success": True, "embedding": [], "completions": [dict(parsed) for _ in range(n)],
                  "cached": n > 1,  # HELM's later iterations hit the cache entry of the first
                  "request_time": elapsed, "request_datetime": int(start)}
        return Attempt(OK, result=result, status=status, headers=headers, usage=usage)


def _parse_output(output: list, request: dict) -> dict | str:
    """The completion HELM builds from `response.output`, or the refusal text."""
    reasoning: list[str] = []
    texts: list[str] = [request["prompt"]] if request.get("echo_prompt") else []
    for item in output:
        kind = item.get("type")
        if kind == "reasoning":
            reasoning += [summary["text"] for summary in item.get("summary") or []]
            reasoning += [content["text"] for content in item.get("content") or []]
        elif kind == "message":
            for content in item.get("content") or []:
                if content.get("type") == "output_text":
                    texts.append(content["text"])
                elif content.get("type") == "refusal":
                    return str(content.get("refusal"))
        else:
            raise _UnknownOutput(str(kind))
    completion: dict[str, Any] = {"text": "\n\n".join(texts), "logprob": 0.0, "tokens": []}
    if reasoning:
        completion["thinking"] = {"text": "\n\n".join(reasoning)}
    return completion


def _usage(usage: Any) -> dict | None:
    if not isinstance(usage, dict):
        return None
    return {"prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens")}


@model_api(OPENAI_RESPONSE_CLIENT)
def openai_response_client(deployment, credentials, max_concurrency: int | None = None,
                           timeout_s: float = 600.0, edition_switches=None) -> OpenAIResponsesClient:
    """Args `base_url`, `reasoning_effort`, `openai_model_name`; credentials `<org>ApiKey`,
    `<org>BaseUrl`, `<org>OrgId` (else the SDK's `OPENAI_BASE_URL`, `OPENAI_ORG_ID`)."""
    args = deployment.client_spec.args
    model_name = args.get("openai_model_name")
    effort = args.get("reasoning_effort")
    client = OpenAIResponsesClient(
        base_url=resolve_base_url(deployment, credentials),
        api_key=resolve_api_key(deployment, credentials).get_secret_value(),
        organization=resolve_org_id(deployment, credentials),
        openai_model_name=str(model_name) if model_name is not None else None,
        reasoning_effort=str(effort) if effort else None,
        timeout_s=timeout_s, max_concurrency=max_concurrency,
    )
    return apply_edition_switches(client, edition_switches)
