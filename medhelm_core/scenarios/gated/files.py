"""Shared pieces of the gated-tier scenarios: missing-data errors, optional packages, tokenizers.

A gated dataset is one the user downloads with their own credentials (PhysioNet, a Stanford data use
agreement, the n2c2 portal) and names with the run entry's `data_path`. Whatever is missing - the
file, the folder, or a package of the `[gated]` extra - stops with ONE line that names it and says
where to get it (the `access` block of the benchmark's
medhelm_core/benchmarks/gated/<name>/benchmark.yaml, read from `bench.text`).
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable

from medhelm_core.errors import MedhelmError
from medhelm_core.scenarios.common import first_line, require_arg
from medhelm_core.tokenizers import bundled_bpe_dir, tiktoken_encoding  # noqa: F401 (bundled_bpe_dir: re-export)

if TYPE_CHECKING:  # for annotations only (nothing imported at run time)
    from medhelm_core.catalog import Benchmark

GATED_EXTRA = 'pip install "medhelm-build[gated]"'


def access_hint(bench: Benchmark) -> str:
    access = bench.text["access"]
    return f"{access['source']}: {access['url']} ({access['how']})"


def missing_data(bench: Benchmark, what: str, path: str) -> MedhelmError:
    """`<entry>: <what> not found: <path> - get <dataset>: <url> (<how>)`, on one line."""
    return MedhelmError(f"{bench.name}: {what} not found: {path} - get {access_hint(bench)}")


def require_exists(bench: Benchmark, path: str, what: str) -> None:
    """HELM's `check_file_exists` (os.path.exists), with the gated error."""
    if not os.path.exists(path):
        raise missing_data(bench, what, path)


def data_path_arg(args: dict[str, Any], name: str) -> str:
    value = require_arg(args, "data_path", name)
    if not isinstance(value, str):
        raise MedhelmError(f"{name}: data_path must be a path string, got {value!r}")
    return value


def bad_data(name: str, path: str, exc: BaseException | str) -> MedhelmError:
    detail = exc if isinstance(exc, str) else first_line(exc)
    return MedhelmError(f"{name}: cannot read {path}: {detail}")


# ----------------------------------------------------------------------------- optional packages
def require_pyarrow(name: str, what: str) -> None:
    """Parquet and Feather need pyarrow (the `[gated]` extra)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise MedhelmError(f"{name}: reading {what} needs the package 'pyarrow' ({GATED_EXTRA})") from None


def _tiktoken_encoding(encoding_name: str):
    """`tiktoken.get_encoding(encoding_name)` through the project's one loader
    (`medhelm_core.tokenizers.tiktoken_encoding`: LiteLLM's bundled BPE file first, then tiktoken's
    cache or download, else one line naming the file, its URL and TIKTOKEN_CACHE_DIR)."""
    return tiktoken_encoding(encoding_name)


# Tests replace this with a fake encoder (an object with encode(str) -> list and decode(list) -> str).
ENCODING_FACTORY: Callable[[str], Any] = _tiktoken_encoding
_ENCODINGS: dict[str, Any] = {}


def encoding(encoding_name: str):
    """`tiktoken.get_encoding(encoding_name)`, built once per process."""
    factory = ENCODING_FACTORY
    key = f"{id(factory)}:{encoding_name}"
    if key not in _ENCODINGS:
        _ENCODINGS[key] = factory(encoding_name)
    return _ENCODINGS[key]


# tiktoken.encoding_for_model: the models the gated scenarios name.
_MODEL_ENCODINGS = {"gpt-4": "cl100k_base"}


def encoding_for_model(model: str):
    """`tiktoken.encoding_for_model(model)` for the model names HELM's gated scenarios use."""
    if model not in _MODEL_ENCODINGS:
        raise MedhelmError(f"no tiktoken encoding known for model {model!r}")
    return encoding(_MODEL_ENCODINGS[model])
