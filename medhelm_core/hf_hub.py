"""Loading Hugging Face tokenizers and models as HELM does, with errors a user can act on.

HELM (`HuggingFaceTokenizer.create_tokenizer`, `HuggingFaceServer`) calls `from_pretrained` on the
configured `pretrained_model_name_or_path` (a hub id, or a folder, resolved against the working
directory). For tokenizers it first tries `local_files_only=True`, then the hub. We do the same for
both, but when the hub cannot be reached (no network, `HF_HUB_OFFLINE=1`) the error is one line that
names the model and the cache folder the files were looked for in, instead of a stack of
`requests` errors. The packages come from the `[local]` extra; without them the error names it.
"""
from __future__ import annotations

import os
from typing import Any, Callable

from medhelm_core.errors import MedhelmError

LOCAL_EXTRA = 'pip install "medhelm-build[local]"'


class LocalModelUnavailable(MedhelmError):
    """A Hugging Face tokenizer or model that cannot be loaded here (package, files or network)."""


def torch_device_name() -> str:
    """HELM's `get_torch_device_name()` on this machine: "cuda" when torch sees a GPU, else "cpu" (also
    without torch: nothing could run on a GPU here). Where HELM's metrics run, and what its run specs
    record as SummarizationMetric's device."""
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def transformers_module():
    try:
        import transformers
    except ImportError:
        raise LocalModelUnavailable(
            f"Hugging Face models and tokenizers need torch and transformers, which are not installed "
            f"({LOCAL_EXTRA})") from None
    return transformers


def hub_cache_dir() -> str:
    try:
        from huggingface_hub import constants

        return str(constants.HF_HUB_CACHE)
    except ImportError:  # pragma: no cover - transformers depends on huggingface_hub
        return os.path.join(os.path.expanduser("~"), ".cache", "huggingface", "hub")


def _offline() -> bool:
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes", "on")
               for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "MEDHELM_OFFLINE"))


def from_pretrained(load: Callable[..., Any], name_or_path: str, what: str, **kwargs: Any) -> Any:
    """`load(name_or_path, **kwargs)` from local files first, then (online) from the hub.

    `what` names the object for the error ("tokenizer huggingface/gpt2", "model local/tiny-gpt2")."""
    try:
        return load(name_or_path, local_files_only=True, **kwargs)
    except OSError as local_error:
        if os.path.isdir(name_or_path):  # a folder that is there but unreadable as a model: say why
            raise LocalModelUnavailable(f"{what}: {name_or_path} is not a loadable Hugging Face folder: "
                                        f"{first_line(local_error)}") from None
        if _offline():
            raise LocalModelUnavailable(
                f"{what}: {name_or_path!r} is neither a folder nor in the Hugging Face cache "
                f"({hub_cache_dir()}), and downloads are off (offline)") from None
    try:
        return load(name_or_path, local_files_only=False, **kwargs)
    except OSError as e:
        raise LocalModelUnavailable(
            f"{what}: {name_or_path!r} is neither a folder nor in the Hugging Face cache ({hub_cache_dir()}), "
            f"and it could not be downloaded: {first_line(e)}") from None


def instance_key(name: str, name_or_path: str, kwargs: dict) -> tuple:
    """What one loaded tokenizer or model is cached under: its HELM name (as HELM caches them), its
    folder (two local paths may give the same name different files) and its from_pretrained arguments."""
    path = os.path.abspath(name_or_path) if os.path.exists(name_or_path) else name_or_path
    return name, path, repr(sorted(kwargs.items()))


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
