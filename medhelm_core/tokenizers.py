"""Tokenizers as HELM's metrics use them (`WindowService.get_num_tokens`).

`BasicGenerationMetric` counts `num_prompt_tokens` with the model deployment's window service:
`len(window_service.encode(request.prompt).tokens)` (or the text part of `multimodal_prompt`),
with `truncation=False`, i.e. the full token count of the prompt actually sent. The window service
tokenizes with the deployment's `tokenizer_name`:

* `simple/tokenizer1` (HELM's `SimpleTokenizer`): one token per Unicode code point (`ord(c)`),
  so the count is `len(text)`. HELM's mock/test deployments use it.
* `openai/cl100k_base`, `openai/o200k_base`, ... (HELM's `TiktokenTokenizer`):
  `tiktoken.get_encoding(<part after "/">).encode(text)`, with tiktoken's default special-token
  handling. Only available when `tiktoken` is importable (an optional extra); tiktoken itself
  needs its BPE file (downloaded once, or from `TIKTOKEN_CACHE_DIR`).
* `None`: a deployment with no tokenizer and no length limits gets HELM's
  `NoTokenizerWindowService`, whose `get_num_tokens` is always 1.

Tokenizers are built once per name and cached (`get_tokenizer` is cheap on repeated calls).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Optional, Protocol


class TokenizerError(ValueError):
    """Unknown or unavailable tokenizer."""


class Tokenizer(Protocol):
    name: Optional[str]

    def encode(self, text: str) -> list: ...

    def count(self, text: str) -> int: ...


class SimpleTokenizer:
    """HELM's `simple/tokenizer1`: each character is a token whose id is its code point."""

    def __init__(self, name: str = "simple/tokenizer1"):
        self.name = name

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, tokens: list[int]) -> str:
        return "".join(chr(t) for t in tokens)

    def tokenize(self, text: str) -> list[str]:
        return list(text)

    def count(self, text: str) -> int:
        return len(text)


class NoTokenizer:
    """HELM's `NoTokenizerWindowService`: no tokenizer, every text counts as 1 token."""

    name = None

    def encode(self, text: str) -> list[str]:
        raise TokenizerError("the model deployment has no tokenizer_name: encoding is not supported")

    def tokenize(self, text: str) -> list[str]:
        return [text]

    def count(self, text: str) -> int:
        return 1


class TiktokenTokenizer:
    """HELM's `TiktokenTokenizer`: `tiktoken.get_encoding(<encoding>).encode(text)`."""

    def __init__(self, name: str, encoding_name: str):
        import tiktoken  # optional dependency

        self.name = name
        self._encoding = tiktoken.get_encoding(encoding_name)

    def encode(self, text: str) -> list[int]:
        return self._encoding.encode(text)

    def decode(self, tokens: list[int]) -> str:
        return self._encoding.decode(tokens)

    def tokenize(self, text: str) -> list[str]:
        return [self._encoding.decode([t]) for t in self._encoding.encode(text)]

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text))


# HELM's tokenizer_configs.yaml entries that use TiktokenTokenizer (name -> tiktoken encoding).
TIKTOKEN_TOKENIZERS: dict[str, str] = {
    "openai/cl100k_base": "cl100k_base",
    "openai/o200k_base": "o200k_base",
    "openai/p50k_base": "p50k_base",
    "openai/r50k_base": "r50k_base",
    "openai/p50k_edit": "p50k_edit",
}

SIMPLE_TOKENIZERS = ("simple/tokenizer1",)


def tiktoken_available() -> bool:
    try:
        import tiktoken  # noqa: F401
    except ImportError:
        return False
    return True


@lru_cache(maxsize=None)
def get_tokenizer(name: Optional[str]) -> Tokenizer:
    """The tokenizer HELM uses for a deployment's `tokenizer_name` (cached per name)."""
    if name is None:
        return NoTokenizer()
    if name in SIMPLE_TOKENIZERS:
        return SimpleTokenizer(name)
    if name in TIKTOKEN_TOKENIZERS:
        if not tiktoken_available():
            raise TokenizerError(
                f"tokenizer {name!r} (model deployment field tokenizer_name) needs the optional package "
                f"'tiktoken', which is not installed"
            )
        return TiktokenTokenizer(name, TIKTOKEN_TOKENIZERS[name])
    known = ", ".join(sorted((*SIMPLE_TOKENIZERS, *TIKTOKEN_TOKENIZERS)))
    raise TokenizerError(
        f"unknown tokenizer {name!r} (model deployment field tokenizer_name); supported: {known}"
    )
