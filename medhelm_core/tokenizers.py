"""Tokenizers as HELM's metrics use them (`WindowService.get_num_tokens`).

`BasicGenerationMetric` counts `num_prompt_tokens` with the model deployment's window service:
`len(window_service.encode(request.prompt).tokens)` (or the text part of `multimodal_prompt`),
with `truncation=False`, i.e. the full token count of the prompt actually sent. The window service
tokenizes with the deployment's `tokenizer_name`:

* `simple/tokenizer1` (HELM's `SimpleTokenizer`): one token per Unicode code point (`ord(c)`),
  so the count is `len(text)`. HELM's mock/test deployments use it.
* `openai/cl100k_base`, `openai/o200k_base`, ... (HELM's `TiktokenTokenizer`):
  `tiktoken.get_encoding(<part after "/">).encode(text)`, with tiktoken's default special-token
  handling. Only available when `tiktoken` is importable (an optional extra). The encoding comes
  from `tiktoken_encoding` (below), the one loader of the project (the gated scenarios use it too):
  1. the BPE file LiteLLM ships (installed with the `[dspy]` extra; cl100k_base, o200k_base,
     p50k_base) when it is there and its sha256 is tiktoken's: no network attempt at all;
  2. else tiktoken's normal path: `$TIKTOKEN_CACHE_DIR` (default `<tmp>/data-gym-cache`), then a
     download from openaipublic.blob.core.windows.net;
  3. else a one-line `TokenizerUnavailable` naming the file, its URL and TIKTOKEN_CACHE_DIR.
* `None`: a deployment with no tokenizer and no length limits gets HELM's
  `NoTokenizerWindowService`, whose `get_num_tokens` is always 1.

* a name whose `tokenizer_configs.yaml` entry (built-in or the local path's) is HELM's
  `HuggingFaceTokenizer` (`huggingface/gpt2`, `meta/llama-3.3-70b-instruct`, a local model's own):
  `AutoTokenizer.from_pretrained` of its `pretrained_model_name_or_path`, with the `[local]` extra
  (`HuggingFaceTokenizer` below; files from the Hugging Face cache, or a folder).

A tokenizer that cannot be had here (a name this project does not implement, or a Hugging Face one
whose files or packages are missing) is an error for a run (metrics need exact counts), but
`tokenizer_or_approximation` gives the cost estimate an `ApproximateTokenizer`: 4 characters a token
(rounded up), flagged `approximate` so the printout marks every number it touched, with the `reason`
(what is missing) that the estimate prints once, in one line. A Hugging Face tokenizer whose files
are not cached fails in seconds when the hub cannot be reached (`hf_hub.require_local_or_hub`), not
after huggingface_hub's retries, and the failure is remembered until its files appear.

Tokenizers are built once per name and cached (`get_tokenizer` is cheap on repeated calls).
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
import threading
from functools import lru_cache
from pathlib import Path
from typing import Optional, Protocol

from medhelm_core import hf_hub
from medhelm_core.errors import MedhelmError


class TokenizerError(MedhelmError, ValueError):
    """Unknown or unavailable tokenizer (a one-line user error)."""


class TokenizerUnavailable(TokenizerError):
    """A tokenizer this project implements, whose package or data file is missing here."""


class TokenizerNotHere(TokenizerError):
    """A Hugging Face tokenizer whose files are not on this machine, or whose packages are not
    installed: an error for a run, an approximation for a cost estimate."""


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


class UncountedTokenizer:
    """Stands for a tokenizer that is not here, when the counts it would give may be left out (a
    re-score of published stats): every count is NaN, so the stats built on it are dropped."""

    def __init__(self, name: Optional[str]):
        self.name = name

    def encode(self, text: str) -> list:
        raise TokenizerError(f"tokenizer {self.name!r} is not available here")

    def count(self, text: str) -> float:
        return float("nan")


class NoTokenizer:
    """HELM's `NoTokenizerWindowService`: no tokenizer, every text counts as 1 token."""

    name = None

    def encode(self, text: str) -> list[str]:
        raise TokenizerError("the model deployment has no tokenizer_name: encoding is not supported")

    def tokenize(self, text: str) -> list[str]:
        return [text]

    def count(self, text: str) -> int:
        return 1


class ApproximateTokenizer:
    """Stands in for a tokenizer this project cannot load, in the cost estimate only: 4 characters
    a token, rounded up (`encode` cuts the text into 4-character pieces so prompt fitting works)."""

    CHARS_PER_TOKEN = 4
    approximate = True

    def __init__(self, name: Optional[str], reason: Optional[str] = None, missing: Optional[str] = None,
                 cause: Optional[str] = None):
        self.name = name
        # What is missing, for the estimate's one-line notice: the whole reason, or the Hugging Face
        # files (`missing`) and why they cannot be had (`cause`, shared by every tokenizer it hits).
        self.reason = reason or f"medhelm has no tokenizer {name}"
        self.missing, self.cause = missing, cause

    def encode(self, text: str) -> list[str]:
        n = self.CHARS_PER_TOKEN
        return [text[i:i + n] for i in range(0, len(text), n)]

    def decode(self, tokens: list[str]) -> str:
        return "".join(tokens)

    def tokenize(self, text: str) -> list[str]:
        return self.encode(text)

    def count(self, text: str) -> int:
        return -(-len(text) // self.CHARS_PER_TOKEN)


# --------------------------------------------------------------------------------------------
# tiktoken encodings: the bundled BPE file first, then tiktoken's cache / download
# --------------------------------------------------------------------------------------------
TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/{file}"
# encoding -> (BPE file, its sha256 as tiktoken_ext/openai_public.py checks it)
TIKTOKEN_FILES: dict[str, tuple[str, str]] = {
    "cl100k_base": ("cl100k_base.tiktoken", "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"),
    "o200k_base": ("o200k_base.tiktoken", "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"),
    "p50k_base": ("p50k_base.tiktoken", "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069"),
    "p50k_edit": ("p50k_base.tiktoken", "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069"),
    "r50k_base": ("r50k_base.tiktoken", "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"),
}
# The encodings whose BPE file LiteLLM ships (litellm/litellm_core_utils/tokenizers/).
LITELLM_BUNDLED = ("cl100k_base", "o200k_base", "p50k_base", "p50k_edit")
TIKTOKEN_EXTRA = 'pip install "medhelm-build[gated]"'
BUNDLE_EXTRA = 'pip install "medhelm-build[dspy]"'
_ENV_LOCK = threading.Lock()  # TIKTOKEN_CACHE_DIR is process-wide: one redirection at a time
_VERIFIED: dict[tuple[str, int, int], bool] = {}


def tiktoken_url(encoding_name: str) -> Optional[str]:
    entry = TIKTOKEN_FILES.get(encoding_name)
    return TIKTOKEN_URL.format(file=entry[0]) if entry else None


def tiktoken_cache_name(encoding_name: str) -> Optional[str]:
    """The file name tiktoken looks for in its cache: sha1 of the download URL."""
    url = tiktoken_url(encoding_name)
    return hashlib.sha1(url.encode()).hexdigest() if url else None


def bundled_bpe_dir() -> Optional[Path]:
    """LiteLLM (installed with the `[dspy]` extra) ships tiktoken's cl100k_base / o200k_base /
    p50k_base BPE files in tiktoken's cache layout (named by the sha1 of the download URL) under
    `litellm/litellm_core_utils/tokenizers/`. Found without importing LiteLLM (which is slow)."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        folder = Path(location) / "litellm_core_utils" / "tokenizers"
        if folder.is_dir():
            return folder
    return None


def bundled_bpe_file(encoding_name: str) -> Optional[Path]:
    """The bundled BPE file of this encoding if it is there with tiktoken's sha256 (else None, so
    tiktoken never sees, nor deletes, a file that does not match)."""
    folder, name = bundled_bpe_dir(), tiktoken_cache_name(encoding_name)
    if folder is None or name is None or not (folder / name).is_file():
        return None
    path = folder / name
    st = path.stat()
    memo = (str(path), st.st_size, st.st_mtime_ns)
    if memo not in _VERIFIED:
        _VERIFIED[memo] = hashlib.sha256(path.read_bytes()).hexdigest() == TIKTOKEN_FILES[encoding_name][1]
    return path if _VERIFIED[memo] else None


def tiktoken_cache_dir() -> str:
    """Where tiktoken's `read_file_cached` looks (same precedence as tiktoken)."""
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            return os.environ[var] or "'' (caching disabled)"
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def tiktoken_encoding(encoding_name: str, tokenizer_name: Optional[str] = None):
    """`tiktoken.get_encoding(encoding_name)`, from the bundled BPE file when there is one (no
    network), else tiktoken's cache or download; else a one-line `TokenizerUnavailable`."""
    what = f"tokenizer {tokenizer_name!r}" if tokenizer_name else f"the tiktoken encoding {encoding_name}"
    try:
        import tiktoken
    except ImportError:
        raise TokenizerUnavailable(f"{what} needs the optional package 'tiktoken', which is not installed "
                                   f"({TIKTOKEN_EXTRA})") from None
    bundled = bundled_bpe_file(encoding_name)
    if bundled is not None:
        with _ENV_LOCK:
            previous = os.environ.get("TIKTOKEN_CACHE_DIR")
            os.environ["TIKTOKEN_CACHE_DIR"] = str(bundled.parent)
            try:
                return tiktoken.get_encoding(encoding_name)
            except Exception:  # noqa: BLE001 - fall back to tiktoken's own path
                pass
            finally:
                if previous is None:
                    os.environ.pop("TIKTOKEN_CACHE_DIR", None)
                else:
                    os.environ["TIKTOKEN_CACHE_DIR"] = previous
    try:
        return tiktoken.get_encoding(encoding_name)
    except Exception as e:  # noqa: BLE001 - no network and no cached BPE file (or an unknown encoding)
        url = tiktoken_url(encoding_name)
        if url is None:
            raise TokenizerUnavailable(f"{what}: tiktoken cannot load encoding {encoding_name!r} "
                                       f"({type(e).__name__})") from None
        file = TIKTOKEN_FILES[encoding_name][0]
        bundle = (f", or install LiteLLM, which bundles it ({BUNDLE_EXTRA})"
                  if encoding_name in LITELLM_BUNDLED and bundled_bpe_dir() is None else "")
        raise TokenizerUnavailable(
            f"{what} needs tiktoken's BPE file {file} ({url}), which is neither bundled nor cached and could "
            f"not be downloaded ({type(e).__name__}): save it as {tiktoken_cache_name(encoding_name)} in "
            f"TIKTOKEN_CACHE_DIR (now {tiktoken_cache_dir()}){bundle}"
        ) from None


class TiktokenTokenizer:
    """HELM's `TiktokenTokenizer`: `tiktoken.get_encoding(<encoding>).encode(text)`."""

    def __init__(self, name: str, encoding_name: str):
        self.name = name
        self._encoding = tiktoken_encoding(encoding_name, name)

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
HUGGINGFACE_TOKENIZER_CLASS = "helm.tokenizers.huggingface_tokenizer.HuggingFaceTokenizer"


# --------------------------------------------------------------------------------------------
# Hugging Face tokenizers (a tokenizer_configs.yaml entry of class HuggingFaceTokenizer)
# --------------------------------------------------------------------------------------------
_SPACE_MARKED = ("TsinghuaKEG/ice", "bigscience/T0pp", "google/t5-11b", "google/flan-t5-xxl", "google/ul2",
                 "Yandex/yalm", "ai21/j1", "together")


def cleanup_token(token: str, tokenizer_name: Optional[str]) -> str:
    """HELM's `cleanup_str`: the space markers some tokenizers put in their token strings, removed."""
    if tokenizer_name in _SPACE_MARKED:
        return token.replace("\u2581", " ")
    if tokenizer_name is not None and (tokenizer_name.startswith("huggingface") or tokenizer_name.endswith("gpt2")):
        return token.replace("\u0120", " ")
    return token


class HuggingFaceTokenizer:
    """HELM's `HuggingFaceTokenizer` seen through its `LocalWindowService`.

    `AutoTokenizer.from_pretrained(pretrained_model_name_or_path, use_fast=True, **args)` (local files
    first), one per HELM tokenizer name and process. Counting and prompt fitting encode without
    special tokens; decoding keeps tokenization spaces (`clean_up_tokenization_spaces=False`), as
    HELM's window service asks. Transformers' tokenizers are not thread-safe: calls hold a lock."""

    def __init__(self, name: str, pretrained_model_name_or_path: Optional[str] = None, **kwargs):
        self.name = name
        self.path = pretrained_model_name_or_path or name
        hf_hub.require_local_or_hub(self.path, f"tokenizer {name}")  # no files, no hub: fail in seconds
        transformers = hf_hub.transformers_module()
        kwargs.setdefault("use_fast", True)
        self.hf = hf_hub.from_pretrained(transformers.AutoTokenizer.from_pretrained, self.path,
                                         f"tokenizer {name}", **kwargs)
        self.lock = threading.RLock()

    def encode(self, text: str) -> list[int]:
        with self.lock:
            return self.hf.encode(text, add_special_tokens=False)

    def decode(self, tokens: list[int]) -> str:
        with self.lock:
            return self.hf.decode(tokens, clean_up_tokenization_spaces=False)

    def tokenize(self, text: str) -> list[str]:
        """The window service's `tokenize` (token strings, space markers cleaned)."""
        with self.lock:
            if "gpt" in self.name or self.name in ("bigscience/bloom", "Writer/palmyra-base", "facebook/opt-66b"):
                tokens = [self.hf.convert_tokens_to_string([t]) for t in self.hf.tokenize(text)]
            else:
                tokens = self.hf.tokenize(text)
                if tokens and isinstance(tokens[0], bytes):
                    tokens = [t.decode(errors="ignore") for t in tokens]
                tokens = [cleanup_token(t, self.name) for t in tokens]  # the tokenizer's own cleanup ...
        return [cleanup_token(t, self.name) for t in tokens]  # ... and the window service's, as in HELM

    def count(self, text: str) -> int:
        return len(self.encode(text))


_HF_TOKENIZERS: dict[tuple, HuggingFaceTokenizer] = {}
_HF_MISSING: dict[tuple, "hf_hub.LocalModelUnavailable"] = {}  # why it could not be loaded (asked once)
_HF_LOCK = threading.Lock()


def huggingface_tokenizer(name: str, args: dict) -> HuggingFaceTokenizer:
    """One tokenizer per HELM tokenizer name, folder and arguments, per process (`hf_hub.instance_key`).
    One that cannot be loaded is not tried again (every run of a suite asks for it)."""
    path = str(args.get("pretrained_model_name_or_path") or name)
    key = hf_hub.instance_key(name, path, args)
    # A failure is remembered with what it depended on: files put in place later are seen.
    where = (*key, hf_hub.hub_cache_dir(), hf_hub.hub_endpoint(), hf_hub.downloads_off(),
             os.path.isdir(path), os.path.isdir(hf_hub.cached_repo_dir(path)))
    with _HF_LOCK:
        if where in _HF_MISSING:
            known = _HF_MISSING[where]
            raise hf_hub.LocalModelUnavailable(str(known), missing=known.missing, cause=known.cause)
        if key not in _HF_TOKENIZERS:
            try:
                _HF_TOKENIZERS[key] = HuggingFaceTokenizer(name, **args)
            except hf_hub.LocalModelUnavailable as e:
                _HF_MISSING[where] = e
                raise
        return _HF_TOKENIZERS[key]


def tiktoken_available() -> bool:
    try:
        import tiktoken  # noqa: F401
    except ImportError:
        return False
    return True


def get_tokenizer(name: Optional[str], config=None) -> Tokenizer:
    """The tokenizer HELM uses for a deployment's `tokenizer_name` (cached per name). `config` is the
    name's `tokenizer_configs.yaml` entry (`helm_config.deployments.TokenizerConfig`), when the registry has
    one: a HuggingFaceTokenizer entry is loaded from its `pretrained_model_name_or_path`."""
    spec = getattr(config, "tokenizer_spec", None)
    if name is not None and spec is not None and spec.class_name == HUGGINGFACE_TOKENIZER_CLASS:
        try:
            return huggingface_tokenizer(name, dict(spec.args))
        except hf_hub.LocalModelUnavailable as e:
            error = TokenizerNotHere(str(e))
            error.missing, error.cause = e.missing, e.cause
            raise error from None
    return _builtin_tokenizer(name)


def clear_cache() -> None:
    """Forget every tokenizer built so far (tests that change how one loads)."""
    _builtin_tokenizer.cache_clear()
    with _HF_LOCK:
        _HF_TOKENIZERS.clear()
        _HF_MISSING.clear()
    hf_hub.forget_hub_probes()


@lru_cache(maxsize=None)
def _builtin_tokenizer(name: Optional[str]) -> Tokenizer:
    if name is None:
        return NoTokenizer()
    if name in SIMPLE_TOKENIZERS:
        return SimpleTokenizer(name)
    if name in TIKTOKEN_TOKENIZERS:
        if not tiktoken_available():
            raise TokenizerUnavailable(
                f"tokenizer {name!r} (model deployment field tokenizer_name) needs the optional package "
                f"'tiktoken', which is not installed ({TIKTOKEN_EXTRA})"
            )
        return TiktokenTokenizer(name, TIKTOKEN_TOKENIZERS[name])
    known = ", ".join(sorted((*SIMPLE_TOKENIZERS, *TIKTOKEN_TOKENIZERS)))
    raise TokenizerError(
        f"unknown tokenizer {name!r} (model deployment field tokenizer_name); supported: {known}"
    )


def tokenizer_or_approximation(name: Optional[str], config=None) -> Tokenizer:
    """`get_tokenizer(name, config)`, or an `ApproximateTokenizer` for a name this project does not
    implement, or a Hugging Face tokenizer not on this machine (for estimates only). A tiktoken
    tokenizer it cannot load here (tiktoken or its BPE file missing) is still an error: that is
    fixable, and the run itself would stop on it."""
    try:
        return get_tokenizer(name, config)
    except TokenizerUnavailable:
        raise
    except TokenizerNotHere as e:
        return ApproximateTokenizer(name, reason=str(e), missing=getattr(e, "missing", None),
                                    cause=getattr(e, "cause", None))
    except TokenizerError:
        return ApproximateTokenizer(name)


def is_approximate(tokenizer) -> bool:
    return bool(getattr(tokenizer, "approximate", False))
