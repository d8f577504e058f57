"""The benchmark catalog: every benchmark is one folder, found by looking, never by registration.

A benchmark folder (`medhelm_core/benchmarks/<tier>/<name>/`, or any folder given by path) holds:

* `benchmark.yaml` (required): the benchmark's literal text and parameters, transcribed from HELM
  (`run_spec`, `scenario`, `data`, `helm_metadata`, `jury`, ...). `only_in_editions: [<edition>]`
  makes a benchmark exist only in those editions (one that upstream added later). An optional top-level `editions:`
  maps an edition name (`medhelm-0.8.0`) to an overlay that is deep-merged over the rest when the
  catalog is built for that edition (mappings merge key by key; any other value replaces), so one
  folder carries the values of every upstream edition. `tier:` is read for folders outside the
  built-in tiers (default `private`: text of a benchmark of unknown origin never leaves the machine).
* `run_spec.py` (required): `run_spec(bench, **args) -> RunSpec dict`, HELM's run-spec function for
  the run-entry name `<name>`; its parameters after `bench` are the ones the run entry may give.
* `scenario.py` (required): `load(bench, args) -> [Instance dict]` and `files(bench, args) -> [path]`
  for the scenario class `run_spec.scenario_class`; optional `check(bench, args)` (HELM's
  constructor's argument checks, run before anything else) and `metadata` / `helm_metadata` (both
  `(bench, args)`, to replace the ones read from `scenario:` / `helm_metadata:`).
* `annotator.py` (optional): `annotator(bench, args) -> JuryDef | LocalAnnotatorDef` for the class
  `run_spec.annotator_class`. Without one, a `jury:` block makes the LLM jury (name, prompt
  template and criteria from the text; judges from the AnnotatorSpec's `annotator_models`).
* `metric.py` (optional): metric classes marked `@helm_metric(<HELM class_name>)`; one whose
  constructor has a keyword `bench` is built with the benchmark (to read `bench.text`).
* any other `<module>.py`: the folder's own code, reached as `bench.module("<module>")` (e.g. the
  configurable benchmark's `config.py`, shared by its scenario, run spec and annotator).

The `bench` every function receives is this module's `Benchmark`. What several folders share lives in
public helper modules: `medhelm_core.scenarios.common` (arguments, files, CSV, scenario.json),
`medhelm_core.scenarios.public.base` and its readers (upstream files, Hugging Face splits),
`medhelm_core.scenarios.gated.files` (credentialed data), `medhelm_core.scenarios.shc` (the SHC CSVs),
`medhelm_core.helm_types` (HELM's Instance/RunSpec shapes), `medhelm_core.runspecs` (adapter and
metric bundles).

`Catalog` indexes the folders by run-entry name, scenario class, annotator class and metric class;
`load_catalog(paths, edition)` builds one (cached), `default_catalog()` the built-in one plus the
folders named by `$MEDHELM_BENCHMARK_PATH` (os.pathsep-separated).
"""
from __future__ import annotations

import copy
import functools
import importlib.util
import inspect
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable, Mapping

import yaml

from medhelm_core.editions import DEFAULT_EDITION, known_editions, load_edition
from medhelm_core.errors import MedhelmError, first_line
from medhelm_core.jury import metric as jury_metric
from medhelm_core.jury.judges import fixed_jury
from medhelm_core.metrics import MetricFactory, basic, metric_table, summarization
from medhelm_core.parts import JuryDef, LocalAnnotatorDef, ScenarioDef, scenario_json
from medhelm_core.resources import BENCHMARKS_DIR
from medhelm_core.yamlio import safe_load

BUILTIN_ROOT = BENCHMARKS_DIR
TIERS = ("public", "gated", "private")
BENCHMARK_FILE = "benchmark.yaml"
PATH_ENV = "MEDHELM_BENCHMARK_PATH"
_LOADING = threading.RLock()  # one import of a folder's module at a time (runs execute concurrently)
_MODULE_PREFIX = "medhelm_benchmarks"


def deep_merge(base: Any, overlay: Any) -> Any:
    """`overlay` over `base`: mappings merge key by key, anything else replaces (a copy)."""
    if isinstance(base, Mapping) and isinstance(overlay, Mapping):
        out = {k: copy.deepcopy(v) for k, v in base.items()}
        for k, v in overlay.items():
            out[k] = deep_merge(base[k], v) if k in base else copy.deepcopy(v)
        return out
    return copy.deepcopy(overlay)


def read_benchmark_yaml(path: Path) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = safe_load(f)
    except OSError as e:
        raise MedhelmError(f"cannot read benchmark file {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise MedhelmError(f"benchmark file {path} is not valid YAML: {first_line(e)}") from None
    if not isinstance(data, dict):
        raise MedhelmError(f"benchmark file {path} must hold a mapping")
    return data


@dataclass(eq=False)
class Benchmark:
    """One benchmark folder, read for one edition."""

    name: str
    tier: str
    folder: Path
    edition: str
    raw: dict[str, Any] = field(repr=False)
    _modules: dict[str, ModuleType | None] = field(default_factory=dict, repr=False)

    @property
    def overlay(self) -> dict[str, Any] | None:
        """What this edition changes in benchmark.yaml (None: nothing)."""
        return (self.raw.get("editions") or {}).get(self.edition)

    @functools.cached_property
    def text(self) -> dict[str, Any]:
        """benchmark.yaml with this edition's overlay applied (treat as read-only)."""
        base = {k: v for k, v in self.raw.items() if k != "editions"}
        return deep_merge(base, self.overlay) if self.overlay else base

    @property
    def yaml_path(self) -> Path:
        return self.folder / BENCHMARK_FILE

    def _field(self, *keys: str) -> Any:
        value: Any = self.text
        for key in keys:
            if not isinstance(value, Mapping) or key not in value:
                raise MedhelmError(f"{self.yaml_path}: missing field {'.'.join(keys)}")
            value = value[key]
        return value

    @property
    def scenario_class(self) -> str:
        return self._field("run_spec", "scenario_class")

    @property
    def annotator_class(self) -> str | None:
        return (self.text.get("run_spec") or {}).get("annotator_class")

    def module(self, part: str) -> ModuleType | None:
        """The folder's `<part>.py` (imported once, even when runs ask for it at once), or None when
        the folder has none."""
        with _LOADING:
            return self._load(part)

    def _load(self, part: str) -> ModuleType | None:
        if part not in self._modules:
            path = self.folder / f"{part}.py"
            if not path.is_file():
                self._modules[part] = None
            else:
                name = f"{_MODULE_PREFIX}.{self.tier}.{self.name}.{part}"
                spec = importlib.util.spec_from_file_location(name, path)
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                try:
                    spec.loader.exec_module(module)
                except SyntaxError as e:
                    del sys.modules[name]
                    raise MedhelmError(f"{path}:{e.lineno}: {e.msg}") from e
                except Exception as e:  # the folder's code failed to import: say which file, on one line
                    del sys.modules[name]
                    raise MedhelmError(f"{path}: cannot be loaded: {type(e).__name__}: {first_line(e)}") from e
                self._modules[part] = module
        return self._modules[part]

    def _required(self, part: str, attr: str) -> Callable:
        module = self.module(part)
        fn = getattr(module, attr, None) if module is not None else None
        if fn is None:
            raise MedhelmError(f"benchmark {self.name} ({self.folder}): {part}.py must define {attr}()")
        return fn

    # -- the parts ---------------------------------------------------------------------------
    def run_spec_function(self) -> Callable[..., dict]:
        """HELM's run-spec function: the folder's `run_spec` with `bench` bound (its signature
        without `bench`, which is what a run entry's arguments are checked against)."""
        fn = self._required("run_spec", "run_spec")

        @functools.wraps(fn)
        def bound(*args: Any, **kwargs: Any) -> dict:
            return fn(self, *args, **kwargs)

        params = list(inspect.signature(fn).parameters.values())[1:]
        bound.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        return bound

    def scenario(self) -> ScenarioDef:
        module = self.module("scenario")
        load = self._required("scenario", "load")
        files = self._required("scenario", "files")
        check = getattr(module, "check", None)
        own_metadata = getattr(module, "metadata", None)
        own_helm_metadata = getattr(module, "helm_metadata", None)

        def checked(args: dict[str, Any]) -> None:
            if check is not None:
                check(self, args)

        def metadata(args: dict[str, Any]) -> dict[str, Any]:
            checked(args)
            if own_metadata is not None:
                return own_metadata(self, args)
            spec = self._field("scenario")
            return scenario_json(spec["name"], spec["description"], spec["tags"], spec["definition_path"])

        def helm_metadata(args: dict[str, Any]) -> dict[str, Any]:
            checked(args)
            if own_helm_metadata is not None:
                return own_helm_metadata(self, args)
            meta = self.text.get("helm_metadata")
            if meta is None:  # HELM's class has no get_metadata(): helm-summarize skips it
                raise NotImplementedError(f"{self.scenario_class} has no get_metadata() in HELM")
            return copy.deepcopy(meta)

        def checked_load(args: dict[str, Any]) -> list[dict]:
            checked(args)
            return load(self, args)

        def checked_files(args: dict[str, Any]) -> list[str]:
            checked(args)
            return [str(p) for p in files(self, args)]

        return ScenarioDef(class_name=self.scenario_class, tier=self.tier, load=checked_load, metadata=metadata,
                           data_files=checked_files, helm_metadata=helm_metadata,
                           edition_overlay=self.overlay)

    def annotator(self) -> Callable[[dict[str, Any]], JuryDef | LocalAnnotatorDef] | None:
        """The annotator factory (called with the AnnotatorSpec's args), or None without one."""
        module = self.module("annotator")
        if module is not None:
            fn = self._required("annotator", "annotator")
            return functools.partial(fn, self)
        if self.text.get("jury") is not None and self.annotator_class:
            return functools.partial(fixed_jury, self.text["jury"], self.annotator_class)
        return None

    def metrics(self) -> dict[str, MetricFactory]:
        """The folder's metric classes; one with a `bench` parameter is given this benchmark (its
        edition-resolved text), the others only their MetricSpec args."""
        module = self.module("metric")
        if module is None:
            return {}
        out: dict[str, MetricFactory] = {}
        for cls, factory in metric_table([module]).items():
            takes_bench = "bench" in inspect.signature(factory).parameters
            out[cls] = functools.partial(factory, bench=self) if takes_bench else factory
        return out


def _folders(root: Path) -> Iterable[tuple[Path, str | None]]:
    """(benchmark folder, tier or None) under a root: the built-in tier layout, a folder of
    benchmark folders, or one benchmark folder."""
    if (root / BENCHMARK_FILE).is_file():
        yield root, None
        return
    tiered = [t for t in TIERS if (root / t).is_dir()]
    if tiered:
        for tier in tiered:
            for folder in sorted((root / tier).iterdir()):
                if (folder / BENCHMARK_FILE).is_file():
                    yield folder, tier
        return
    for folder in sorted(root.iterdir()):
        if (folder / BENCHMARK_FILE).is_file():
            yield folder, None


class _RunSpecFunctions(Mapping):
    def __init__(self, benchmarks: Mapping[str, Benchmark], elsewhere: Mapping[str, list[str]]):
        self._benchmarks = benchmarks
        self._elsewhere = elsewhere
        self._functions: dict[str, Callable[..., dict]] = {}

    def why_missing(self, name: str) -> str | None:
        """Why a run entry name has no function here (a benchmark of other editions), or None."""
        editions = self._elsewhere.get(name)
        if not editions:
            return None
        return f"{name} is a benchmark of {' and '.join(editions)} only: run it with --edition {editions[0]}"

    def __getitem__(self, name: str) -> Callable[..., dict]:
        if name not in self._functions:
            self._functions[name] = self._benchmarks[name].run_spec_function()  # KeyError: no such entry
        return self._functions[name]

    def __iter__(self):
        return iter(self._benchmarks)

    def __len__(self) -> int:
        return len(self._benchmarks)


class Catalog:
    """The benchmarks of some roots, read for one edition, indexed by what the pipeline looks up."""

    def __init__(self, roots: Iterable[str | Path] = (BUILTIN_ROOT,), edition: str = DEFAULT_EDITION):
        load_edition(edition)  # an unknown edition stops here, with the known ones named
        self.edition = edition
        known = set(known_editions())
        self.benchmarks: dict[str, Benchmark] = {}
        self.elsewhere: dict[str, list[str]] = {}  # benchmark -> the editions it exists in (not this one)
        self._built: dict[str, ScenarioDef | None] = {}
        for root in roots:
            root = Path(root)
            if not root.is_dir():
                raise MedhelmError(f"benchmark folder not found: {root}")
            for folder, tier in _folders(root):
                raw = read_benchmark_yaml(folder / BENCHMARK_FILE)
                tier = tier or raw.get("tier", "private")
                if tier not in TIERS:
                    raise MedhelmError(f"{folder / BENCHMARK_FILE}: tier must be one of {', '.join(TIERS)}, got {tier!r}")
                editions = raw.get("editions") or {}
                unknown = sorted(set(editions) - known) if isinstance(editions, dict) else ["(not a mapping)"]
                if unknown:
                    raise MedhelmError(f"{folder / BENCHMARK_FILE}: editions: unknown edition {unknown[0]!r} "
                                       f"(known: {', '.join(sorted(known))})")
                name = folder.name
                only = raw.get("only_in_editions")
                if only is not None:
                    if not isinstance(only, list) or set(only) - known:
                        raise MedhelmError(f"{folder / BENCHMARK_FILE}: only_in_editions must list known editions "
                                           f"({', '.join(sorted(known))}), got {only!r}")
                    if edition not in only:
                        self.elsewhere[name] = list(only)
                        continue
                if name in self.benchmarks:
                    raise MedhelmError(f"benchmark {name} is defined twice: {self.benchmarks[name].folder} and {folder}")
                self.benchmarks[name] = Benchmark(name, tier, folder, edition, raw)

    def __repr__(self) -> str:
        return f"Catalog({len(self.benchmarks)} benchmarks, edition={self.edition!r})"

    def benchmark(self, name: str) -> Benchmark:
        try:
            return self.benchmarks[name]
        except KeyError:
            raise MedhelmError(f"no benchmark named {name!r}") from None

    @functools.cached_property
    def run_spec_functions(self) -> Mapping[str, Callable[..., dict]]:
        """Run-entry name -> HELM run-spec function (HELM's `@run_spec_function` registry); a
        folder's run_spec.py is loaded when its entry is first looked up."""
        return _RunSpecFunctions(self.benchmarks, self.elsewhere)

    @functools.cached_property
    def _by_scenario_class(self) -> dict[str, Benchmark]:
        out: dict[str, Benchmark] = {}
        for b in self.benchmarks.values():
            out.setdefault(b.scenario_class, b)  # several run entries of one class: the first folder builds it
        return out

    def find_scenario(self, class_name: str) -> ScenarioDef | None:
        """The ScenarioDef of a HELM scenario class, or None; only that folder's code is loaded."""
        if class_name not in self._built:
            bench = self._by_scenario_class.get(class_name)
            self._built[class_name] = bench.scenario() if bench is not None else None
        return self._built[class_name]

    def benchmark_of_scenario(self, class_name: str) -> Benchmark | None:
        """The folder that builds a HELM scenario class (None: no folder does)."""
        return self._by_scenario_class.get(class_name)

    def tier_of(self, class_name: str) -> str | None:
        bench = self._by_scenario_class.get(class_name)
        return bench.tier if bench is not None else None

    @property
    def scenarios(self) -> dict[str, ScenarioDef]:
        """HELM scenario class_name -> ScenarioDef, every folder's (loads all of their code)."""
        return {cls: self.find_scenario(cls) for cls in self._by_scenario_class}

    @functools.cached_property
    def annotators(self) -> dict[str, Callable[[dict[str, Any]], JuryDef | LocalAnnotatorDef]]:
        """HELM annotator class_name -> factory (called with the AnnotatorSpec's args)."""
        out = {}
        for b in self.benchmarks.values():
            factory = b.annotator()
            if factory is not None and b.annotator_class not in out:
                out[b.annotator_class] = factory
        return out

    @functools.cached_property
    def metrics(self) -> dict[str, MetricFactory]:
        """HELM metric class_name -> implementation: the library's and every folder's `metric.py`;
        one with an `edition` parameter is given this catalog's edition (its behaviour switches)."""
        out = dict(library_metrics())
        for b in self.benchmarks.values():
            for cls, factory in b.metrics().items():
                if cls in out and out[cls] is not factory:
                    raise MedhelmError(f"metric {cls} is defined twice ({b.folder / 'metric.py'})")
                out[cls] = factory
        edition = load_edition(self.edition)
        return {cls: functools.partial(f, edition=edition) if _takes(f, "edition") else f for cls, f in out.items()}

    def annotator(self, annotator_spec: Mapping[str, Any], where: str) -> JuryDef | LocalAnnotatorDef:
        """The annotator a run spec's AnnotatorSpec `{"class_name", "args"}` describes."""
        factory = self.annotators.get(annotator_spec["class_name"])
        if factory is None:
            raise MedhelmError(f"{where}: annotator {annotator_spec['class_name']} is not implemented")
        return factory(annotator_spec["args"])

    def scenario(self, class_name: str) -> ScenarioDef:
        defn = self.find_scenario(class_name)
        if defn is None:
            raise MedhelmError(f"scenario class {class_name} is not implemented (no benchmark folder of "
                               f"{self!r} has it; a folder of your own is given with ${PATH_ENV} or --benchmark-path)")
        return defn


def _takes(factory: Callable, parameter: str) -> bool:
    target = factory.func if isinstance(factory, functools.partial) else factory
    return parameter in inspect.signature(target).parameters


@functools.cache
def library_metrics() -> dict[str, MetricFactory]:
    """The metrics many benchmarks share: HELM's basic and summarization metrics, the LLM jury's."""
    return metric_table([basic, summarization, jury_metric])


@functools.lru_cache(maxsize=None)
def load_catalog(paths: tuple[str, ...] = (), edition: str = DEFAULT_EDITION) -> Catalog:
    """The built-in benchmarks plus the folders at `paths`, for one edition (one instance per arguments)."""
    return Catalog((BUILTIN_ROOT, *(Path(p).resolve() for p in paths)), edition)


def benchmark_paths_from_env() -> tuple[str, ...]:
    return tuple(p for p in os.environ.get(PATH_ENV, "").split(os.pathsep) if p)


def default_catalog() -> Catalog:
    return load_catalog(benchmark_paths_from_env())
