"""The run's workspace: where a suite lives (the output folder: DuckDB + HELM files), its
deployments and clients, its benchmark catalog; and `RunRef`, one run (suite + HELM run name)."""
from __future__ import annotations

import copy
import functools
import inspect
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from medhelm_core import data_sources
from medhelm_core.catalog import Catalog, load_catalog
from medhelm_core.clients import client_for_deployment, factories, is_in_process
from medhelm_core.clients.edition_views import CompletionView
from medhelm_core.clients.huggingface_local import DEFAULT_BATCH_SIZE
from medhelm_core.helm_config.deployments import load_credentials, load_model_registry
from medhelm_core.editions import DEFAULT_EDITION, ClientSwitches, Edition, load_edition
from medhelm_core.engine import CompletionEngine, RunControls
from medhelm_core.errors import MedhelmError
from medhelm_core.model_metadata import DEFAULT_MODEL_METADATA_PATHS
from medhelm_core.ratelimit import SettingsRegistry
from medhelm_core.storage import resolve_storage
from medhelm_core.store import request_key, stable_hash
from medhelm_core.lake_store import open_store
from medhelm_core.tokenizers import TokenizerError, get_tokenizer, tokenizer_or_approximation


_CLIENTS_LOCK = threading.RLock()


@dataclass(frozen=True)
class RunRef:
    suite: str
    run_name: str

    @property
    def key(self) -> str:
        """`<suite>/<run name>`: how the store's queries name a run (its run folder's path)."""
        return f"{self.suite}/{self.run_name}"


@dataclass
class Workspace:
    """Where a suite lives: the output folder (DuckDB + HELM files) and the model deployments."""

    output_path: Path
    local_path: Path = Path("prod_env")
    num_threads: int = 8
    progress: Callable[[int, int], None] | None = None
    # Benchmark folders of the user's own, beside the built-in ones (`--benchmark-path`).
    benchmark_paths: tuple[str, ...] = ()
    # The invocation's budget and progress display (shared by every engine this workspace starts).
    controls: RunControls = field(default_factory=RunControls)
    # The upstream edition this workspace's runs reproduce (`medhelm_core.editions`); a suite has one.
    edition: str = DEFAULT_EDITION
    # Where the tables live (`--storage`, medhelm_core.storage); None: $MEDHELM_STORAGE, else the output path's file.
    storage: str | None = None
    _deployments: dict | None = field(default=None, repr=False)
    _clients: dict = field(default_factory=dict, repr=False)
    _settings: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.output_path = Path(self.output_path)
        self.local_path = Path(self.local_path)
        self.store = open_store(resolve_storage(self.storage, self.output_path), self.output_path)
        self.benchmark_paths = tuple(str(p) for p in self.benchmark_paths)
        self.switches: Edition = load_edition(self.edition)
        self._editions: dict[str, Workspace] = {self.edition: self}
        self._views: dict[tuple, CompletionView] = {}

    def data_scope(self):
        """Online scenario downloads go to `<output-path>/scenarios` (as HELM's) inside this scope."""
        return data_sources.cache_rooted(self.output_path / "scenarios")

    @property
    def catalog(self) -> Catalog:
        """The benchmarks this workspace runs: the built-in folders plus `benchmark_paths`, read for its edition."""
        return load_catalog(self.benchmark_paths, self.edition)

    def for_edition(self, edition: str | None) -> "Workspace":
        """This workspace under another edition: same store, deployments, clients and controls."""
        edition = edition or DEFAULT_EDITION
        with _CLIENTS_LOCK:
            other = self._editions.get(edition)
            if other is None:
                self.registry, self.settings  # noqa: B018 - loaded once, then shared by the copy
                other = copy.copy(self)
                other.edition, other.switches, other._views = edition, load_edition(edition), {}
                self._editions[edition] = other  # the dict is shared: every copy knows every other
            other.controls = self.controls
            return other

    # -- deployments and clients -----------------------------------------------------------
    @property
    def registry(self):
        """HELM's model registry: built-in deployments plus `<local_path>` (prod_env)."""
        if self._deployments is None:
            self._deployments = load_model_registry(self.local_path)
        return self._deployments

    def deployment(self, name: str):
        return self.registry.get_deployment(name)

    def client(self, name: str):
        """The deployment's client as this edition's (`Edition.client_switches` of its class): one per
        deployment and client variant, shared by every edition of this workspace."""
        # Made once, under a lock: the runs of a suite ask from many threads at once, and a client's
        # first construction imports its SDK (a concurrent first import can see a half-made module).
        with _CLIENTS_LOCK:
            dep = self.registry.deployments.get(name)
            switches, variant = self._client_switches(dep.client_spec.class_name) if dep else (None, None)
            key = name if variant is None else (name, variant)
            if key not in self._clients:
                dep = self.deployment(name)  # an unknown one: the one-line error
                settings = self.deployment_settings(name)
                self._clients[key] = client_for_deployment(
                    dep, load_credentials(self.local_path), timeout_s=settings.timeout_s,
                    tokenizer_config=self.tokenizer_config(dep.tokenizer_name), batch_size=settings.batch_size,
                    edition_switches=switches)
            return self._clients[key]

    def _client_switches(self, client_class: str) -> tuple[ClientSwitches, str | None]:
        """(the class's switches under this edition, its client variant: None for the default client).
        A factory without an `edition_switches` argument builds the default client: refused where the
        edition sends other requests (they would be stored as this edition's), else its outcomes stay
        the default edition's."""
        switches = self.switches.client_switches(client_class)
        if switches.client_variant is None:
            return switches, None
        factory = factories().get(client_class)
        if factory is not None and "edition_switches" not in inspect.signature(factory).parameters:
            if switches.request_variant is not None:
                raise MedhelmError(f"edition {self.edition} sends {client_class} requests with "
                                   f"{switches.request_variant}, which medhelm's client of that class cannot send")
            return switches, None
        return switches, switches.client_variant

    def request_key(self, deployment: str, request: dict) -> str:
        """The store key of a request of `deployment` under this edition: `store.request_key`, unless the
        edition's client of that class sends it otherwise (`ClientSwitches.request_variant`): another paid
        call, another key. The default edition's keys are `store.request_key`'s."""
        if not any(c.request_fields for c in self.switches.client_changes):
            return request_key(deployment, request)
        dep = self.registry.deployments.get(deployment)  # unknown: never sent (the run's checks say so)
        variant = self.switches.client_switches(dep.client_spec.class_name).request_variant if dep else None
        if variant is None:
            return request_key(deployment, request)
        return stable_hash({"deployment": deployment, "request": request, "request_variant": variant})

    def tokenizer_config(self, tokenizer_name: str | None):
        """The `tokenizer_configs.yaml` entry of a tokenizer name (built-in, then the local path's)."""
        return self.registry.tokenizer_configs.get(tokenizer_name) if tokenizer_name else None

    def tokenizer(self, tokenizer_name: str | None, approximate: bool = False):
        """The tokenizer HELM's window service uses for this name; `approximate` (the cost
        estimate): one this machine cannot load is replaced by `tokenizers.ApproximateTokenizer`."""
        config = self.tokenizer_config(tokenizer_name)
        return (tokenizer_or_approximation if approximate else get_tokenizer)(tokenizer_name, config)

    @property
    def settings(self):
        """medhelm's per-deployment limits and prices (`conf/deployments.yaml`, then
        `<local_path>/medhelm_deployments.yaml`); see `medhelm_core.ratelimit`."""
        if self._settings is None:
            self._settings = SettingsRegistry.load(self.local_path)
        return self._settings

    def deployment_settings(self, name: str):
        settings = self.settings.for_deployment(name)
        if settings.max_concurrency is None and self._in_process(name):
            # A local model batches the requests that reach it together: let enough of them wait.
            batch = settings.batch_size or DEFAULT_BATCH_SIZE
            settings = settings.model_copy(update={"max_concurrency": max(self.num_threads, 2 * batch)})
        return settings

    def _in_process(self, name: str) -> bool:
        dep = self.registry.deployments.get(name)
        return dep is not None and is_in_process(dep.client_spec.class_name)

    def completion_view(self, name: str, recorded: dict | None = None) -> CompletionView | None:
        """How this edition reads a stored answer of deployment `name` (`recorded`: the deployment as a
        run registered it, else the registry's): `view(result, request, untruncated) -> result`
        (`clients.edition_views.CompletionView`), or None to read it as stored (the edition's client of
        that class makes the same result: `Edition.tokenize_completions`, `Edition.client_changes`)."""
        if recorded is not None:  # the shape run/entries.py records: {"client_spec": {"class_name"}, "tokenizer_name"}
            client_class, tokenizer_name = recorded["client_spec"]["class_name"], recorded["tokenizer_name"]
        else:
            dep = self.deployment(name)
            client_class, tokenizer_name = dep.client_spec.class_name, dep.tokenizer_name
        switches = self.switches.client_switches(client_class)
        if not switches.changes_results:
            return None
        key = (client_class, tokenizer_name)
        view = self._views.get(key)
        if view is None:
            tokenizer = None
            if switches.tokenize_completions or switches.tokenize_response_text:
                try:  # a tokenizer may load a file: not under the clients' lock
                    tokenizer = self.tokenizer(tokenizer_name)
                except (TokenizerError, MedhelmError) as e:
                    raise MedhelmError(f"edition {self.edition} tokenizes the completions of {name} with its "
                                       f"tokenizer {tokenizer_name}, which is not available: {e}") from None
            view = self._views.setdefault(key, CompletionView(switches, tokenizer))
        return view

    def token_counter(self, name: str) -> Callable[[str], int]:
        """Prompt tokens as the deployment's tokenizer counts them (~4 characters a token without one)."""
        try:
            return self.tokenizer(self.deployment(name).tokenizer_name).count
        except (TokenizerError, MedhelmError):
            return lambda text: max(1, len(text) // 4)

    def model_metadata_paths(self) -> list[Path]:
        """Model display names: the project's conf/model_metadata.yaml, then prod_env's."""
        local = self.local_path / "model_metadata.yaml"
        return list(DEFAULT_MODEL_METADATA_PATHS) + ([local] if local.exists() else [])

    def engine(self, priority: float = 0.0) -> CompletionEngine:
        return CompletionEngine(self.store, self.client, num_threads=self.num_threads, progress=self.progress,
                                settings_for=self.deployment_settings, tokens_for=self.token_counter,
                                budget=self.controls.budget, board=self.controls.board, priority=priority)


def in_data_scope(layer: Callable) -> Callable:
    """A layer function `(ws, ...)` that reads scenario data does so inside `ws.data_scope()`."""
    @functools.wraps(layer)
    def scoped(ws: Workspace, *args: Any, **kwargs: Any):
        with ws.data_scope():
            return layer(ws, *args, **kwargs)

    return scoped
