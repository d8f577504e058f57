"""How an edition reads a stored answer: the result its own client would have made of the same reply.

A stored answer is what the default edition's (HELM 0.5.16's) client made of the API's reply, plus,
in `completions.untruncated`, what of the reply it did not keep: per completion, the text before
HELM's stop-sequence cut (a string), or the parts another edition's client reads instead (a dict:
`text`, the last text block; `thinking`, the last thinking block). An edition's `ClientSwitches`
(`medhelm_core.editions`) say which readings apply to a client class:

* `tokenize_completions`: v0.5.13's OpenAIClient tokenizes each chat completion (`base.tokenized_result`);
* `last_content_block`: v0.5.13's AnthropicMessagesClient keeps the last text (and thinking) block;
* `tokenize_response_text`: ... and cuts and tokenizes it (`base.truncate_and_tokenize_response_text`,
  finish_reason "" unless a stop sequence or max_tokens cut it);
* `error_texts`: a non-fatal failure's error as that edition's client words it.
"""
from __future__ import annotations

from typing import Any, Callable

from medhelm_core.clients.base import stop_cut_unknown, tokenized_result, truncate_and_tokenize_response_text
from medhelm_core.editions import ClientSwitches
from medhelm_core.errors import MedhelmError


def reworded_error(result: dict, error_texts: dict[str, str]) -> dict:
    """A failed result with its error worded as the edition's client words it."""
    if result.get("success") or result.get("error") not in error_texts:
        return result
    return {**result, "error": error_texts[result["error"]]}


def _kept_part(untruncated: list | None, i: int) -> dict:
    entry = untruncated[i] if untruncated and i < len(untruncated) else None
    return entry if isinstance(entry, dict) else {}


def response_text_result(result: dict, request: dict, untruncated: list | None, last_content_block: bool,
                         tokenizer: Any = None) -> dict:
    """A successful result as v0.5.13's AnthropicMessagesClient makes it: the last text block and the
    last thinking block (`last_content_block`; the stored completion joins them all), through
    `truncate_and_tokenize_response_text` when a `tokenizer` is given."""
    if not result.get("success") or not result.get("completions"):
        return result
    completions = []
    for i, c in enumerate(result["completions"]):
        kept = _kept_part(untruncated, i) if last_content_block else {}
        text = kept.get("text", c["text"])
        thinking = kept.get("thinking", (c.get("thinking") or {}).get("text"))
        if tokenizer is not None:
            try:
                made = truncate_and_tokenize_response_text(text, request, tokenizer, original_finish_reason="")
            except ValueError as e:  # echo_prompt: that client raises and the run fails
                raise MedhelmError(f"{request.get('model_deployment')}: {e}") from None
        else:
            made = {k: v for k, v in c.items() if k != "thinking"}
            made["text"] = text
        if thinking is not None:
            made["thinking"] = {"text": thinking}
        completions.append(made)
    return {**result, "completions": completions}


class CompletionView:
    """One deployment's stored answers as an edition reads them: `view(result, request, untruncated)`."""

    def __init__(self, switches: ClientSwitches, tokenizer: Any = None):
        self.switches = switches
        self.tokenizer = tokenizer  # needed by tokenize_completions / tokenize_response_text
        self._tokenize: Callable[[str], list[str]] | None = tokenizer.tokenize if tokenizer is not None else None

    def __call__(self, result: dict, request: dict, untruncated: list | None = None) -> dict:
        s = self.switches
        if s.error_texts:
            result = reworded_error(result, s.error_texts)
        if s.last_content_block or s.tokenize_response_text:
            result = response_text_result(result, request, untruncated, s.last_content_block,
                                          self.tokenizer if s.tokenize_response_text else None)
        if s.tokenize_completions:
            result = tokenized_result(result, request, self._tokenize,
                                      [u if isinstance(u, str) else None for u in untruncated] if untruncated else None)
        return result

    def needs_stored_parts(self, request: dict) -> bool:
        """An answer that has just arrived cannot be read yet: the parts of the reply this view reads
        are in the store (`completions.untruncated`), not in the result."""
        s = self.switches
        return s.last_content_block or (s.tokenize_completions and bool(request.get("stop_sequences")))

    def stop_cut_unknown(self, request: dict, untruncated: list | None) -> bool:
        """A stored answer whose text before HELM's stop cut was never kept (`base.stop_cut_unknown`)."""
        return self.switches.tokenize_completions and stop_cut_unknown(request, untruncated)
