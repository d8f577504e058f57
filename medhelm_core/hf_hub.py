"""Loading Hugging Face tokenizers and models as HELM does, with errors a user can act on.

HELM (`HuggingFaceTokenizer.create_tokenizer`, `HuggingFaceServer`) calls `from_pretrained` on the
configured `pretrained_model_name_or_path` (a hub id, or a folder, resolved against the working
directory). For tokenizers it first tries `local_files_only=True`, then the hub. We do the same for
both, but when the hub cannot be reached (no network, `HF_HUB_OFFLINE=1`) the error is one line that
names the model and the cache folder the files were looked for in, instead of a stack of
`requests` errors. The packages come from the `[local]` extra; without them the error names it.

Before going to the hub we check, once per endpoint and process, that it can be reached at all
(`hub_unreachable`: a name look-up and a TCP connect to `$HF_ENDPOINT` or its proxy, within
`HUB_PROBE_TIMEOUT_S`). Without that, huggingface_hub retries a refused or unresolvable connection
five times with back-off, about 40-50 s per file, before the same error; with it, a machine without
network learns in a few seconds what is missing (one line), and the cost estimate counts instead.
"""
from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any, Callable, Optional
from urllib.parse import urlsplit

from medhelm_core.errors import MedhelmError, first_line  # noqa: F401 - first_line: also what its importers take from here

LOCAL_EXTRA = 'pip install "medhelm-build[local]"'
DEFAULT_ENDPOINT = "https://huggingface.co"
HUB_PROBE_TIMEOUT_S = 3.0  # name look-up + connect; a reachable hub answers a SYN well within this


class LocalModelUnavailable(MedhelmError):
    """A Hugging Face tokenizer or model that cannot be loaded here (package, files or network).
    When its files are missing: `missing` (the hub id or folder) and `cause` (why they cannot be had,
    the same text for every id), so that a notice about several can say the cause once."""

    def __init__(self, message: str, missing: Optional[str] = None, cause: Optional[str] = None):
        super().__init__(message)
        self.missing, self.cause = missing, cause


def _not_here(what: str, name_or_path: str, unreachable: str) -> LocalModelUnavailable:
    cause = f"not in the Hugging Face cache ({hub_cache_dir()}), and {unreachable}"
    return LocalModelUnavailable(f"{what}: {name_or_path!r} is neither a folder nor in the Hugging Face cache "
                                 f"({hub_cache_dir()}), and {unreachable}", missing=name_or_path, cause=cause)


# torch's answer, asked once per process: importing torch costs about 1.5 s and 180 MB, which the
# process that sends a suite's requests needs for nothing else, so a child process imports it.
_DEVICE_PROBE = "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')"
_device: dict[str, Any] = {}
_device_lock = threading.Lock()


def start_torch_device_probe() -> None:
    """Start `torch_device_name`'s child process now (it runs beside the work that comes before
    the answer is needed)."""
    with _device_lock:
        _start_probe()


def _start_probe() -> None:
    if "name" in _device or "probe" in _device or "torch" in sys.modules:
        return
    if _cpu_only_torch():
        _device["name"] = "cpu"
        return
    _device["probe"] = subprocess.Popen([sys.executable, "-c", _DEVICE_PROBE], stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def _cpu_only_torch() -> bool:
    """No torch, or a build without CUDA and ROCm libraries: `torch.cuda.is_available()` is False
    there whatever the machine has (a CPU build lacks `torch._C._cuda_getDeviceCount`)."""
    spec = importlib.util.find_spec("torch")
    if spec is None:
        return True
    libs = Path(spec.origin or "").parent / "lib"
    if not libs.is_dir():
        return False   # an unusual layout: ask torch
    return not any(libs.glob("libtorch_cuda*")) and not any(libs.glob("libtorch_hip*"))


def torch_device_name() -> str:
    """HELM's `get_torch_device_name()` on this machine: "cuda" when torch sees a GPU, else "cpu" (also
    without torch: nothing could run on a GPU here). Where HELM's metrics run, and what its run specs
    record as SummarizationMetric's device. Asked in a child process unless torch is imported here."""
    with _device_lock:
        if "name" not in _device:
            _start_probe()
        if "name" not in _device:
            probe = _device.pop("probe", None)
            answer = probe.communicate()[0].strip() if probe is not None else ""
            if probe is not None and probe.returncode == 0 and answer in ("cuda", "cpu"):
                _device["name"] = answer
            else:   # torch already imported here, or the child could not tell: ask in this process
                _device["name"] = _torch_device_here()
        return _device["name"]


def _torch_device_here() -> str:
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


def downloads_off() -> bool:
    """HF_HUB_OFFLINE, TRANSFORMERS_OFFLINE or MEDHELM_OFFLINE is set: nothing is fetched from the hub."""
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes", "on")
               for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "MEDHELM_OFFLINE"))


def hub_endpoint() -> str:
    """The hub huggingface_hub talks to: `$HF_ENDPOINT`, else its default."""
    env = os.environ.get("HF_ENDPOINT", "").strip()
    if env:
        return env.rstrip("/")
    try:
        from huggingface_hub import constants

        return str(constants.ENDPOINT).rstrip("/")
    except ImportError:  # pragma: no cover - transformers depends on huggingface_hub
        return DEFAULT_ENDPOINT


_PROBED: dict[tuple[str, Optional[str]], Optional[str]] = {}
_PROBE_LOCK = threading.Lock()


def _connect_target(endpoint: str) -> tuple[str, int, Optional[str]]:
    """(host, port, proxy URL or None) of the first hop a request to `endpoint` takes."""
    parts = urlsplit(endpoint)
    scheme = (parts.scheme or "https").lower()
    host = parts.hostname or ""
    port = parts.port or (443 if scheme == "https" else 80)
    proxy = urllib.request.getproxies().get(scheme)
    if proxy and not urllib.request.proxy_bypass(host):
        p = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        if p.hostname:
            return p.hostname, p.port or (443 if p.scheme == "https" else 80), f"{p.scheme}://{p.hostname}"
    return host, port, None


def _probe(host: str, port: int, timeout_s: float) -> Optional[str]:
    """None if a TCP connection to host:port opens within timeout_s (look-up included), else why not."""
    outcome: list[Optional[str]] = []

    def attempt() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout_s).close()
            outcome.append(None)
        except socket.gaierror:
            outcome.append(f"no name look-up of {host}")
        except socket.timeout:
            outcome.append(f"no answer from {host}:{port} within {timeout_s:g} s")
        except OSError as e:
            outcome.append(f"{host}:{port}: {e.strerror or type(e).__name__}")

    # getaddrinfo has no timeout of its own: a thread bounds the whole attempt.
    worker = threading.Thread(target=attempt, name="medhelm-hub-probe", daemon=True)
    worker.start()
    worker.join(timeout_s + 1.0)
    return outcome[0] if outcome else f"no answer from {host} within {timeout_s:g} s"


def hub_unreachable() -> Optional[str]:
    """Why the Hugging Face hub cannot be used from here (downloads turned off, or no connection to
    its endpoint), or None when it can. The connection is tried once per endpoint (and proxy) and
    process."""
    if downloads_off():
        return "downloads are off (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE / MEDHELM_OFFLINE)"
    return hub_connection_problem()


def hub_connection_problem() -> Optional[str]:
    """Why no connection to the hub's endpoint can be made from here (tried once per endpoint, proxy
    and process), or None."""
    endpoint = hub_endpoint()
    host, port, proxy = _connect_target(endpoint)
    if not host:
        return f"HF_ENDPOINT {endpoint!r} names no host"
    key = (endpoint, proxy)
    with _PROBE_LOCK:
        if key not in _PROBED:
            why = _probe(host, port, HUB_PROBE_TIMEOUT_S)
            _PROBED[key] = None if why is None else (
                f"the Hugging Face hub {endpoint} cannot be reached" + (f" through proxy {proxy}" if proxy else "")
                + f" ({why})")
        return _PROBED[key]


def forget_hub_probes() -> None:
    """Probe again on the next lookup (tests; a network that came back)."""
    with _PROBE_LOCK:
        _PROBED.clear()


def cached_repo_dir(repo_id: str) -> str:
    """The folder huggingface_hub keeps a model repository's files in (`models--<org>--<name>`)."""
    return os.path.join(hub_cache_dir(), "models--" + repo_id.replace("/", "--"))


def require_local_or_hub(name_or_path: str, what: str) -> None:
    """Raise the one-line `LocalModelUnavailable` at once when `name_or_path` is neither a folder nor
    in the cache and the hub cannot be used, before transformers is even imported (seconds)."""
    if os.path.isdir(name_or_path) or os.path.isdir(cached_repo_dir(name_or_path)):
        return
    unreachable = hub_unreachable()
    if unreachable:
        raise _not_here(what, name_or_path, unreachable)


def from_pretrained(load: Callable[..., Any], name_or_path: str, what: str, **kwargs: Any) -> Any:
    """`load(name_or_path, **kwargs)` from local files first, then (online) from the hub.

    `what` names the object for the error ("tokenizer huggingface/gpt2", "model local/tiny-gpt2")."""
    try:
        return load(name_or_path, local_files_only=True, **kwargs)
    except OSError as local_error:
        if os.path.isdir(name_or_path):  # a folder that is there but unreadable as a model: say why
            raise LocalModelUnavailable(f"{what}: {name_or_path} is not a loadable Hugging Face folder: "
                                        f"{first_line(local_error)}") from None
        unreachable = hub_unreachable()
        if unreachable:
            raise _not_here(what, name_or_path, unreachable) from None
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


