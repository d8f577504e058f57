"""The per-run layers of a MedHELM run, Dagster-free.

Each function takes a `Workspace` and one run (suite + HELM run name), reads its inputs from DuckDB
and replaces its own rows in one transaction. Dagster assets and the command line both call these,
so there is one code path:

    register_runs → build_dataset (per scenario spec) → build_requests → run_completions → run_annotations
                  → compute_stats → write_run_files
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from medhelm_core import adapt, jury
from medhelm_core.engine import CompletionEngine, EngineReport, Job
from medhelm_core.helm_files import run_dir, write_run_files
from medhelm_core.registry import ANNOTATORS, SCENARIOS, LocalAnnotatorDef, MedhelmError, load_all
from medhelm_core.store import Store, insert_rows, request_key, stable_hash


@dataclass(frozen=True)
class RunRef:
    suite: str
    run_name: str

    @property
    def partition_key(self) -> str:
        return f"{self.suite}/{self.run_name}"

    @classmethod
    def from_partition_key(cls, key: str) -> "RunRef":
        suite, _, run_name = key.partition("/")
        if not run_name:
            raise MedhelmError(f"partition key {key!r} is not '<suite>/<run name>'")
        return cls(suite, run_name)


@dataclass
class Workspace:
    """Where a suite lives: the output folder (DuckDB + HELM files) and the model deployments."""

    output_path: Path
    local_path: Path = Path("prod_env")
    num_threads: int = 8
    progress: Callable[[int, int], None] | None = None
    _deployments: dict | None = field(default=None, repr=False)
    _clients: dict = field(default_factory=dict, repr=False)
    _settings: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.output_path = Path(self.output_path)
        self.local_path = Path(self.local_path)
        self.store = Store.in_output_path(self.output_path)
        from medhelm_core import data_sources

        data_sources.set_cache_root(self.output_path / "scenarios")  # online downloads, as HELM's
        load_all()

    # -- deployments and clients -----------------------------------------------------------
    @property
    def registry(self):
        """HELM's model registry: built-in deployments plus `<local_path>` (prod_env)."""
        if self._deployments is None:
            from medhelm_core.conf.deployments import load_model_registry

            self._deployments = load_model_registry(self.local_path)
        return self._deployments

    def deployment(self, name: str):
        return self.registry.get_deployment(name)

    def client(self, name: str):
        if name not in self._clients:
            from medhelm_core.clients import client_for_deployment
            from medhelm_core.conf.deployments import load_credentials

            self._clients[name] = client_for_deployment(self.deployment(name), load_credentials(self.local_path),
                                                        timeout_s=self.deployment_settings(name).timeout_s)
        return self._clients[name]

    @property
    def settings(self):
        """medhelm's per-deployment limits and prices (`conf/deployments.yaml`, then
        `<local_path>/medhelm_deployments.yaml`); see `medhelm_core.ratelimit`."""
        if self._settings is None:
            from medhelm_core.ratelimit import SettingsRegistry

            self._settings = SettingsRegistry.load(self.local_path)
        return self._settings

    def deployment_settings(self, name: str):
        return self.settings.for_deployment(name)

    def token_counter(self, name: str) -> Callable[[str], int]:
        """Prompt tokens as the deployment's tokenizer counts them (~4 characters a token without one)."""
        from medhelm_core.tokenizers import TokenizerError, get_tokenizer

        try:
            return get_tokenizer(self.deployment(name).tokenizer_name).count
        except (TokenizerError, MedhelmError):
            return lambda text: max(1, len(text) // 4)

    def model_metadata_paths(self) -> list[Path]:
        """Model display names: the project's conf/model_metadata.yaml, then prod_env's."""
        from medhelm_core.model_metadata import DEFAULT_MODEL_METADATA_PATH

        local = self.local_path / "model_metadata.yaml"
        return [DEFAULT_MODEL_METADATA_PATH] + ([local] if local.exists() else [])

    def engine(self, label: str = "") -> CompletionEngine:
        from medhelm_core.engine import CONTROLS

        return CompletionEngine(self.store, self.client, num_threads=self.num_threads, progress=self.progress,
                                settings_for=self.deployment_settings, tokens_for=self.token_counter,
                                budget=CONTROLS.budget, progress_factory=CONTROLS.progress_factory, label=label)


# ---------------------------------------------------------------------------------------------
def tier_of(run_spec: dict) -> str:
    cls = run_spec["scenario_spec"]["class_name"]
    defn = SCENARIOS.get(cls)
    if defn is None:
        raise MedhelmError(f"{run_spec['name']}: no scenario implementation for {cls}")
    return defn.tier


TIERS = ("public", "gated", "private")


def scenario_partition_key(scenario_spec: dict) -> str:
    """A readable, stable name for one scenario spec: `<Class>:<arg>=<value>,...` (args sorted)."""
    short = scenario_spec["class_name"].rsplit(".", 1)[-1]
    args = scenario_spec.get("args") or {}
    return short + ":" + ",".join(f"{k}={args[k]}" for k in sorted(args))


def register_runs(ws: Workspace, suite: str, entries: list[tuple[Any, dict]]) -> list[RunRef]:
    """Record what the suite asks for: (run entry, run spec) pairs from the confs, and the scenario
    specs (dataset partitions) they need."""
    rows, scenario_rows = [], {}
    for entry, spec in entries:
        adapter = spec["adapter_spec"]
        tier = tier_of(spec)
        rows.append((suite, spec["name"], entry.description, entry.priority, entry.location, tier,
                     adapter.get("model"), adapter.get("model_deployment"), json.dumps(spec, ensure_ascii=False)))
        sspec = spec["scenario_spec"]
        scenario_rows[scenario_partition_key(sspec)] = (tier, json.dumps(sspec, ensure_ascii=False))
    with ws.store.transaction() as conn:
        conn.executemany(
            "INSERT OR REPLACE INTO run_entries (suite, run_name, description, priority, conf_path, tier, model,"
            " model_deployment, run_spec) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        conn.executemany("INSERT OR REPLACE INTO scenario_specs (partition_key, tier, scenario_spec) VALUES (?, ?, ?)",
                         [(k, t, sp) for k, (t, sp) in scenario_rows.items()])
    return [RunRef(suite, spec["name"]) for _, spec in entries]


def scenario_partitions(entries: list[tuple[Any, dict]]) -> dict[str, list[str]]:
    """Dataset partitions per tier for these run specs, in first-use order."""
    out: dict[str, list[str]] = {t: [] for t in TIERS}
    for _, spec in entries:
        key = scenario_partition_key(spec["scenario_spec"])
        tier = tier_of(spec)
        if key not in out[tier]:
            out[tier].append(key)
    return out


def load_run_spec(ws: Workspace, run: RunRef) -> dict:
    with ws.store.connect() as conn:
        row = conn.execute("SELECT run_spec FROM run_entries WHERE suite = ? AND run_name = ?",
                           [run.suite, run.run_name]).fetchone()
    if row is None:
        raise MedhelmError(f"run {run.run_name!r} is not registered in suite {run.suite!r}")
    return json.loads(row[0])


_DIGESTS: dict[tuple, str] = {}


def _file_digest(path: str) -> str:
    """sha256 of a file (or of a folder's files), cached by (path, size, mtime) within the process."""
    p = Path(path)
    files = sorted(q for q in p.rglob("*") if q.is_file()) if p.is_dir() else [p]
    h = hashlib.sha256()
    for f in files:
        st = f.stat()
        memo = (str(f.resolve()), st.st_size, st.st_mtime_ns)
        if memo not in _DIGESTS:
            fh_hash = hashlib.sha256()
            with open(f, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    fh_hash.update(chunk)
            _DIGESTS[memo] = fh_hash.hexdigest()
        h.update(str(f).encode())
        h.update(_DIGESTS[memo].encode())
    return h.hexdigest()


def scenario_key(scenario_spec: dict) -> tuple[str, str]:
    """(key, content hash) of a dataset: scenario class + args + bytes of its data files.
    A changed data file gives a new key, so everything downstream is rebuilt."""
    defn = SCENARIOS[scenario_spec["class_name"]]
    files = defn.data_files(scenario_spec["args"])
    missing = [f for f in files if not os.path.exists(f)]
    if missing:
        # Let the scenario raise its own one-line error naming the file and the arg.
        defn.load(scenario_spec["args"])
        raise MedhelmError(f"{scenario_partition_key(scenario_spec)}: data file not found: {missing[0]}")
    content = stable_hash([(f, _file_digest(f)) for f in files])
    return stable_hash({"scenario_spec": scenario_spec, "content": content})[:24], content


def build_dataset(ws: Workspace, partition_key: str) -> dict:
    """Instances of one scenario spec (ids assigned as HELM does). Skipped when the same spec and
    the same data-file bytes were already built."""
    with ws.store.connect() as conn:
        row = conn.execute("SELECT scenario_spec FROM scenario_specs WHERE partition_key = ?",
                           [partition_key]).fetchone()
    if row is None:
        raise MedhelmError(f"dataset {partition_key!r} is not used by any registered run entry")
    sspec = json.loads(row[0])
    key, content = scenario_key(sspec)
    defn = SCENARIOS[sspec["class_name"]]
    with ws.store.connect() as conn:
        have = conn.execute("SELECT num_instances FROM datasets WHERE scenario_key = ?", [key]).fetchone()
    built = False
    if have is None:
        instances = adapt.assign_instance_ids(defn.load(sspec["args"]))
        rows = [(key, i, inst.get("id"), inst["split"], json.dumps(inst, ensure_ascii=False))
                for i, inst in enumerate(instances)]
        with ws.store.transaction() as conn:
            conn.execute("DELETE FROM instances WHERE scenario_key = ?", [key])
            insert_rows(conn, "instances", ["scenario_key", "position", "instance_id", "split", "instance"], rows)
            conn.execute(
                "INSERT OR REPLACE INTO datasets (scenario_key, class_name, args, tier, content_hash, num_instances,"
                " scenario, scenario_metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [key, sspec["class_name"], json.dumps(sspec["args"]), defn.tier, content, len(rows),
                 json.dumps(defn.metadata(sspec["args"])), json.dumps(_helm_metadata(defn, sspec["args"]))])
        n, built = len(rows), True
    else:
        n = have[0]
    with ws.store.transaction() as conn:
        conn.execute("UPDATE scenario_specs SET scenario_key = ?, content_hash = ? WHERE partition_key = ?",
                     [key, content, partition_key])
    return {"scenario_key": key, "content_hash": content, "num_instances": n, "built": built, "tier": defn.tier}


def _helm_metadata(defn, args: dict) -> dict | None:
    try:
        return defn.helm_metadata(args)
    except NotImplementedError:  # HELM's summarizer skips scenarios without get_metadata()
        return None


def prompt_fitter(ws: Workspace, deployment_name: str, approximate: bool = False):
    """HELM's context-window fitting for the deployment (`truncate_from_right`). `approximate`
    (the cost estimate): a tokenizer this project does not implement is replaced by
    `tokenizers.ApproximateTokenizer` instead of being an error."""
    from medhelm_core.tokenizers import get_tokenizer, tokenizer_or_approximation

    dep = ws.deployment(deployment_name)
    max_len = getattr(dep, "max_sequence_length", None)
    if not max_len:
        return None
    tokenizer = (tokenizer_or_approximation if approximate else get_tokenizer)(dep.tokenizer_name)

    def fit(prompt: str, max_tokens: int) -> tuple[str, bool]:
        budget = max_len - max_tokens
        if tokenizer.count(prompt) <= budget:
            return prompt, False
        if not hasattr(tokenizer, "decode"):
            raise MedhelmError(f"prompt of {deployment_name} exceeds max_sequence_length={max_len} and tokenizer "
                               f"{dep.tokenizer_name} cannot truncate")
        text = tokenizer.decode(tokenizer.encode(prompt)[:budget])
        while tokenizer.count(text) > budget:
            text = text[:-1]
        return text, len(text) < len(prompt)

    return fit


def build_requests(ws: Workspace, run: RunRef) -> dict:
    spec = load_run_spec(ws, run)
    adapter_spec = spec["adapter_spec"]
    key, _ = scenario_key(spec["scenario_spec"])
    with ws.store.connect() as conn:
        built = conn.execute("SELECT 1 FROM datasets WHERE scenario_key = ?", [key]).fetchone()
        rows = conn.execute("SELECT instance FROM instances WHERE scenario_key = ? ORDER BY position",
                            [key]).fetchall()
    if built is None:
        raise MedhelmError(f"{run.run_name}: dataset {scenario_partition_key(spec['scenario_spec'])!r} is not built "
                           f"(materialize its {tier_of(spec)}_datasets partition first)")
    instances = [json.loads(r[0]) for r in rows]
    sampled = adapt.downsample_eval_instances(instances, adapter_spec.get("max_eval_instances"),
                                              adapter_spec.get("eval_splits"))
    states = adapt.build_request_states(adapter_spec, sampled,
                                        prompt_fitter(ws, adapter_spec["model_deployment"]))
    out = []
    for i, st in enumerate(states):
        req = st["request"]
        out.append((run.suite, run.run_name, i, st["instance"]["id"], st["instance"]["split"],
                    st["train_trial_index"], request_key(req["model_deployment"], req), req["model_deployment"],
                    req["prompt"], json.dumps(st, ensure_ascii=False)))
    with ws.store.transaction() as conn:
        conn.execute("UPDATE run_entries SET scenario_key = ? WHERE suite = ? AND run_name = ?",
                     [key, run.suite, run.run_name])
        conn.execute("DELETE FROM requests WHERE suite = ? AND run_name = ?", [run.suite, run.run_name])
        insert_rows(conn, "requests", ["suite", "run_name", "position", "instance_id", "split", "train_trial_index",
                                       "request_key", "model_deployment", "prompt", "request_state"], out)
    return {"num_requests": len(out), "digest": stable_hash([r[6] for r in out])[:16]}


def _request_rows(ws: Workspace, run: RunRef) -> list[tuple]:
    with ws.store.connect() as conn:
        return conn.execute(
            "SELECT position, request_key, model_deployment, request_state FROM requests"
            " WHERE suite = ? AND run_name = ? ORDER BY position", [run.suite, run.run_name]).fetchall()


def run_completions(ws: Workspace, run: RunRef) -> EngineReport:
    rows = _request_rows(ws, run)
    if not rows:
        raise MedhelmError(f"{run.run_name}: no requests built yet")
    jobs = [Job(k, dep, json.loads(state)["request"]) for _, k, dep, state in rows]
    from medhelm_core.clients.dspy_program import set_current_run_spec_name

    set_current_run_spec_name(run.run_name)  # HELM's runner global, read by DSPy deployments
    _, report = ws.engine(f"{run.run_name} completions").run(jobs)
    if report.budget_stopped:
        _budget_stop(ws, run, report, "model requests")
    if report.failed:
        first = next(iter(report.errors.values()))
        raise MedhelmError(f"{run.run_name}: {report.failed} of {len(jobs)} requests failed "
                           f"(kept {report.new} new completions; rerun to retry the rest). First error: {first}")
    return report


def load_request_states(ws: Workspace, run: RunRef, with_annotations: bool = True) -> list[dict]:
    """The run's request states with results (and annotations), in HELM's order."""
    with ws.store.connect() as conn:
        rows = conn.execute(
            "SELECT r.position, r.request_state, c.result FROM requests r"
            " LEFT JOIN completions c ON c.request_key = r.request_key"
            " WHERE r.suite = ? AND r.run_name = ? ORDER BY r.position", [run.suite, run.run_name]).fetchall()
        ann = {}
        if with_annotations:
            for pos, annotator, annotation in conn.execute(
                    "SELECT position, annotator, annotation FROM annotations WHERE suite = ? AND run_name = ?"
                    " ORDER BY position, annotator", [run.suite, run.run_name]).fetchall():
                ann.setdefault(pos, {})[annotator] = json.loads(annotation)
    states = []
    for pos, state, result in rows:
        st = json.loads(state)
        if result is None:
            raise MedhelmError(f"{run.run_name}: request {pos} has no completion yet; materialize completions first")
        ordered = {k: st[k] for k in ("instance", "train_trial_index", "output_mapping", "request") if k in st}
        ordered["result"] = json.loads(result)
        for k in ("num_train_instances", "prompt_truncated", "num_conditioning_tokens"):
            ordered[k] = st[k]
        if pos in ann:
            ordered["annotations"] = ann[pos]
        states.append(ordered)
    return states


def run_annotations(ws: Workspace, run: RunRef) -> dict:
    spec = load_run_spec(ws, run)
    juries, local_annotators = [], []
    for aspec in spec.get("annotators") or []:
        factory = ANNOTATORS.get(aspec["class_name"])
        if factory is None:
            raise MedhelmError(f"{run.run_name}: no annotator implementation for {aspec['class_name']}")
        defn = factory(aspec["args"])
        (local_annotators if isinstance(defn, LocalAnnotatorDef) else juries).append(defn)
    states = load_request_states(ws, run, with_annotations=False)
    plan = []  # (position, instance_id, jury, prompt, [(judge, info, key, request)])
    jobs = []
    for pos, st in enumerate(states):
        for j in juries:
            prompt = jury.jury_prompt(j, st)
            calls = []
            if prompt is not None:
                for judge, info in j.judges.items():
                    req = jury.judge_request(info, prompt)
                    key = request_key(info["model_deployment"], req)
                    calls.append((judge, info, key))
                    jobs.append(Job(key, info["model_deployment"], req))
            plan.append((pos, st["instance"]["id"], j, prompt, calls))
    results, report = ws.engine(f"{run.run_name} judges").run(jobs) if jobs else ({}, EngineReport())
    if report.budget_stopped:
        _budget_stop(ws, run, report, "judge requests")  # before writing: no verdict from a call never made
    ann_rows, verdict_rows = [], []
    counts: dict[str, int] = {}
    for pos, iid, j, prompt, calls in plan:
        verdicts = []
        if prompt is None:
            verdicts = [jury.Verdict(name, jury.SKIPPED_EMPTY_OUTPUT) for name in j.judges]
            keyed = {name: None for name in j.judges}
        else:
            keyed = {}
            for judge, info, key in calls:
                keyed[judge] = key
                result = results.get(key)
                if result is None or not result.get("success"):
                    err = report.errors.get(key) or (result or {}).get("error") or "request failed"
                    verdicts.append(jury.Verdict(judge, jury.REQUEST_FAILED, error=err))
                else:
                    verdicts.append(jury.parse_judge_output(j, judge, result["completions"][0]["text"]))
        for v in verdicts:
            counts[v.status] = counts.get(v.status, 0) + 1
            verdict_rows.append((run.suite, run.run_name, pos, iid, j.name, v.judge,
                                 j.judges[v.judge]["model_deployment"], v.status, keyed.get(v.judge), v.raw_text,
                                 json.dumps(v.parsed) if v.parsed is not None else None, v.error))
        ann_rows.append((run.suite, run.run_name, pos, iid, j.name,
                         json.dumps(jury.assemble_annotation(prompt, verdicts), ensure_ascii=False)))
    for pos, st in enumerate(states):  # local annotators (e.g. EhrSqlAnnotator): no model, no verdicts
        for la in local_annotators:
            ann_rows.append((run.suite, run.run_name, pos, st["instance"]["id"], la.name,
                             json.dumps(la.annotate(st), ensure_ascii=False)))
    with ws.store.transaction() as conn:
        conn.execute("DELETE FROM annotations WHERE suite = ? AND run_name = ?", [run.suite, run.run_name])
        conn.execute("DELETE FROM judge_verdicts WHERE suite = ? AND run_name = ?", [run.suite, run.run_name])
        insert_rows(conn, "annotations", ["suite", "run_name", "position", "instance_id", "annotator", "annotation"],
                    ann_rows)
        insert_rows(conn, "judge_verdicts", ["suite", "run_name", "position", "instance_id", "annotator", "judge",
                                             "judge_deployment", "status", "request_key", "raw_text", "parsed",
                                             "error"], verdict_rows)
    return {"annotated": len(ann_rows), "judge_calls_new": report.new, "judge_calls_reused": report.reused,
            "statuses": counts, "report": report}


def _budget_stop(ws: Workspace, run: RunRef, report: EngineReport, what: str):
    from medhelm_core.costs import BudgetExhausted
    from medhelm_core.engine import CONTROLS

    budget = CONTROLS.budget
    head = budget.message() if budget is not None else "budget reached"
    raise BudgetExhausted(f"{head} Stopped in {run.run_name}: {report.skipped} {what} not sent "
                          f"({report.new} new, {report.reused} already stored).")


STAT_COLUMNS = ["ordinal", "name", "split", "sub_split", "perturbation", "count", "sum", "sum_squared", "min",
                "max", "mean", "variance", "stddev"]
INSTANCE_STAT_COLUMNS = ["suite", "run_name", "instance_id", "train_trial_index"] + STAT_COLUMNS
RUN_STAT_COLUMNS = ["suite", "run_name"] + STAT_COLUMNS[:5] + ["perturbation_name", "computed_on"] + STAT_COLUMNS[5:]


def _stat_row(prefix: tuple, ordinal: int, stat: dict) -> tuple:
    name = stat["name"]
    return prefix + (ordinal, name["name"], name.get("split"), name.get("sub_split"),
                     json.dumps(name["perturbation"]) if name.get("perturbation") else None,
                     stat["count"], stat["sum"], stat["sum_squared"], stat.get("min"), stat.get("max"),
                     stat.get("mean"), stat.get("variance"), stat.get("stddev"))


def compute_stats(ws: Workspace, run: RunRef) -> dict:
    from medhelm_core.metrics.evaluate import evaluate_run

    spec = load_run_spec(ws, run)
    states = load_request_states(ws, run)
    dep = ws.deployment(spec["adapter_spec"]["model_deployment"])
    per_instance, stats = evaluate_run(spec, states, dep.tokenizer_name)
    inst_rows = []
    for entry in per_instance:
        prefix = (run.suite, run.run_name, entry["instance_id"], entry["train_trial_index"])
        inst_rows += [_stat_row(prefix, i, s) for i, s in enumerate(entry["stats"])]
    stat_rows = []
    for i, s in enumerate(stats):
        row = _stat_row((run.suite, run.run_name), i, s)
        pert = s["name"].get("perturbation") or {}
        # run_stats columns: suite, run_name, ordinal, name, split, sub_split, perturbation,
        # perturbation_name, computed_on, count, sum, sum_squared, min, max, mean, variance, stddev
        stat_rows.append(row[:7] + (pert.get("name"), pert.get("computed_on")) + row[7:])
    jury_rows = _jury_score_rows(run, spec, states)
    with ws.store.connect() as conn:
        meta = conn.execute(
            "SELECT d.scenario_metadata FROM run_entries r JOIN datasets d USING (scenario_key)"
            " WHERE r.suite = ? AND r.run_name = ?", [run.suite, run.run_name]).fetchone()
    path = str(run_dir(ws.output_path, run.suite, run.run_name))
    with ws.store.transaction() as conn:
        for table in ("instance_stats", "run_stats", "jury_scores", "runs"):
            conn.execute(f"DELETE FROM {table} WHERE suite = ? AND run_name = ?", [run.suite, run.run_name])
        insert_rows(conn, "instance_stats", INSTANCE_STAT_COLUMNS, inst_rows)
        insert_rows(conn, "run_stats", RUN_STAT_COLUMNS, stat_rows)
        insert_rows(conn, "jury_scores", ["suite", "run_name", "instance_id", "metric", "helm_value",
                                          "corrected_value", "judges_ok", "judges_total"], jury_rows)
        conn.execute("INSERT INTO runs (suite, run_name, run_spec, scenario_metadata, run_path) VALUES (?, ?, ?, ?, ?)",
                     [run.suite, run.run_name, json.dumps(spec, ensure_ascii=False), meta[0] if meta else None, path])
    return {"per_instance_rows": len(inst_rows), "run_stats": len(stat_rows), "instances": len(per_instance),
            "per_instance_stats": per_instance, "stats": stats, "request_states": states, "run_spec": spec}


def _jury_score_rows(run: RunRef, spec: dict, states: list[dict]) -> list[tuple]:
    """HELM's jury value beside the corrected one (None when no judge scored)."""
    from medhelm_core.metrics.jury import jury_score, jury_score_corrected

    rows = []
    for mspec in spec.get("metric_specs", []):
        if not mspec["class_name"].endswith("LLMJuryMetric"):
            continue
        args = mspec["args"]
        judges = list((args.get("annotator_models") or {}).keys())
        for st in states:
            annotation = (st.get("annotations") or {}).get(args["scenario_name"])
            if annotation is None:
                continue
            ok = sum(1 for j in judges if isinstance(annotation.get(j), dict))
            rows.append((run.suite, run.run_name, st["instance"]["id"], args["metric_name"],
                         jury_score(annotation, judges, args.get("default_score", 0.0)),
                         jury_score_corrected(annotation, judges), ok, len(judges)))
    return rows


def write_files(ws: Workspace, run: RunRef, computed: dict | None = None) -> Path:
    """Write the run's HELM files from DuckDB."""
    computed = computed or stored_run_outputs(ws, run)
    spec = computed["run_spec"]
    defn = SCENARIOS[spec["scenario_spec"]["class_name"]]
    directory = run_dir(ws.output_path, run.suite, run.run_name)
    write_run_files(directory, spec, defn.metadata(spec["scenario_spec"]["args"]), computed["request_states"],
                    spec.get("annotators"), computed["stats"], computed["per_instance_stats"])  # None: no annotator_specs
    return directory


def stored_run_outputs(ws: Workspace, run: RunRef) -> dict:
    """The run spec, request states, stats and per-instance stats as stored (no recomputation)."""
    spec = load_run_spec(ws, run)
    states = load_request_states(ws, run)
    with ws.store.connect() as conn:
        stats = stats_from_rows(conn.execute(
            "SELECT name, split, sub_split, perturbation, count, sum, sum_squared, min, max, mean, variance, stddev"
            " FROM run_stats WHERE suite = ? AND run_name = ? ORDER BY ordinal", [run.suite, run.run_name]).fetchall())
        rows = conn.execute(
            "SELECT instance_id, train_trial_index, name, split, sub_split, perturbation, count, sum, sum_squared,"
            " min, max, mean, variance, stddev FROM instance_stats WHERE suite = ? AND run_name = ?"
            " ORDER BY rowid", [run.suite, run.run_name]).fetchall()
    per_instance: list[dict] = []
    index: dict[tuple, dict] = {}
    ids = {str(st["instance"]["id"]): st["instance"]["id"] for st in states}  # int ids (medcalc) stay ints
    for r in rows:
        key = (r[0], r[1])
        if key not in index:
            index[key] = {"instance_id": ids.get(r[0], r[0]), "train_trial_index": r[1], "stats": []}
            per_instance.append(index[key])
        index[key]["stats"] += stats_from_rows([r[2:]])
    return {"run_spec": spec, "request_states": states, "stats": stats, "per_instance_stats": per_instance}


def stats_from_rows(rows: list[tuple]) -> list[dict]:
    """(name, split, sub_split, perturbation, count, sum, sum_squared, min, max, mean, variance, stddev)
    rows → HELM Stat dicts (count-0 stats carry no min/max/mean/variance/stddev, as HELM writes them)."""
    out = []
    for name, split, sub_split, pert, count, total, sq, lo, hi, mean, var, sd in rows:
        metric: dict[str, Any] = {"name": name, "split": split}
        if sub_split is not None:
            metric["sub_split"] = sub_split
        if pert is not None:
            metric["perturbation"] = json.loads(pert)
        stat: dict[str, Any] = {"name": metric, "count": count, "sum": total, "sum_squared": sq}
        for key, value in (("min", lo), ("max", hi), ("mean", mean), ("variance", var), ("stddev", sd)):
            if value is not None:
                stat[key] = value
        out.append(stat)
    return out


# credentials.conf values that are a shipped example's placeholder, not a key (examples/prod_env_public_apis).
PLACEHOLDER_KEY_PREFIX = "REPLACE_ME"


def validate_runs(ws: Workspace, entries: list[tuple[Any, dict]]) -> None:
    """Everything that can be checked before any row is written or any call is paid for:
    scenario implemented, data files present, model deployments known with their API keys, a real
    (not placeholder) key, an endpoint that is a URL and a tokenizer that loads; the juries' judge
    deployments too. Each problem is one line naming the deployment and the file to edit."""
    from medhelm_core.conf.deployments import load_credentials
    from medhelm_core.engine import CONTROLS

    credentials = load_credentials(ws.local_path)
    checked: set[tuple[str, str]] = set()
    for entry, spec in entries:
        where = f"{entry.location or 'run entry'}: {spec['name']}"
        cls = spec["scenario_spec"]["class_name"]
        defn = SCENARIOS.get(cls)
        if defn is None:
            raise MedhelmError(f"{where}: scenario {cls} is not implemented")
        files = defn.data_files(spec["scenario_spec"]["args"])
        for f in files:
            if not os.path.exists(f):
                defn.load(spec["scenario_spec"]["args"])  # raises the scenario's own message
                raise MedhelmError(f"{where}: data file not found: {f}")
        model = spec["adapter_spec"]["model_deployment"]
        judges: list[tuple[str, str]] = []  # (judge deployment, jury name)
        for aspec in spec.get("annotators") or []:
            factory = ANNOTATORS.get(aspec["class_name"])
            if factory is None:
                raise MedhelmError(f"{where}: annotator {aspec['class_name']} is not implemented")
            annotator = factory(aspec["args"])
            judges += [(j["model_deployment"], getattr(annotator, "name", aspec["class_name"]))
                       for j in getattr(annotator, "judges", {}).values()]
        if ("model", model) not in checked:
            problem = _model_deployment_problem(ws, model, credentials)
            if problem:
                raise MedhelmError(f"{where}: {problem}")
            checked.add(("model", model))
        for name, jury_name in judges:
            if ("judge", name) not in checked:
                problem = _judge_deployment_problem(ws, name, credentials)
                if problem:
                    raise MedhelmError(f"judge deployment {name} (jury of {jury_name}) {problem}")
                checked.add(("judge", name))
        for name in [model] + [name for name, _ in judges]:
            if CONTROLS.budget is not None and not ws.deployment_settings(name).priced:
                raise MedhelmError(f"{where}: --budget needs a price for deployment {name!r}: set input_per_million "
                                   f"and output_per_million for it in {ws.settings.describe()} or "
                                   f"{ws.local_path}/medhelm_deployments.yaml")


def _credentials_file(ws: Workspace, credentials) -> str:
    source = str(credentials.source)
    return source if source.startswith("$") else str(ws.local_path / "credentials.conf")


def _builtin_hint(ws: Workspace, deployment) -> str:
    """For HELM's built-in `stanfordhealthcare*` deployments (gateways only Stanford reaches)."""
    from medhelm_core.conf.deployments import BUILTIN_CONFIG_DIR

    if (deployment.source is None or Path(deployment.source).parent != BUILTIN_CONFIG_DIR
            or not deployment.host_organization.startswith("stanfordhealthcare")):
        return ""
    return (" (the built-in deployment calls Stanford Health Care's gateway, which only Stanford can reach; "
            "examples/prod_env_public_apis/ maps the public tier to public APIs)")


def _endpoint_problem(ws: Workspace, deployment, credentials) -> str | None:
    """A placeholder API key, or a base_url that is not an http(s) URL (e.g. HELM's unfilled
    `{endpoint}/...` of the Stanford gateway). The key itself is never shown."""
    from medhelm_core.conf.deployments import resolve_api_key, resolve_base_url

    deployments_file = ws.local_path / "model_deployments.yaml"
    try:
        key = resolve_api_key(deployment, credentials).get_secret_value()
    except MedhelmError:
        key = None
    if key is not None and key.strip().startswith(PLACEHOLDER_KEY_PREFIX):
        return (f"still has the example's placeholder API key (a value starting with {PLACEHOLDER_KEY_PREFIX}): "
                f"replace it with your key in {_credentials_file(ws, credentials)}")
    explicit = deployment.client_spec.args.get("base_url")
    base_url = resolve_base_url(deployment, credentials)
    if base_url is not None and ("{" in base_url or not base_url.lower().startswith(("http://", "https://"))):
        shown = f"client_spec.args.base_url {base_url!r} of {deployment.source}" if explicit is not None else \
            f"{deployment.host_organization}BaseUrl in {_credentials_file(ws, credentials)}"
        return (f"has no endpoint it can call: {shown} is not an http(s) URL: set client_spec.args.base_url "
                f"in {deployments_file}" + _builtin_hint(ws, deployment))
    return None


def _model_deployment_problem(ws: Workspace, name: str, credentials) -> str | None:
    from medhelm_core.tokenizers import TokenizerError, get_tokenizer

    try:
        ws.client(name)  # known, supported client class, API key found
    except MedhelmError as e:
        dep = ws.registry.deployments.get(name)
        return str(e) + (_builtin_hint(ws, dep) if dep is not None else "")
    dep = ws.deployment(name)
    problem = _endpoint_problem(ws, dep, credentials)
    if problem:
        return f"model deployment {name} {problem}"
    try:  # prompt fitting and the metrics need it: fail now, not after the completions are paid for
        get_tokenizer(dep.tokenizer_name)
    except TokenizerError as e:
        return f"model deployment {name} (tokenizer_name in {dep.source}): {e}"
    return None


def _judge_deployment_problem(ws: Workspace, name: str, credentials) -> str | None:
    """Why a judge cannot be called (not defined, no key, placeholder key, no endpoint, client class
    not callable), as the rest of `judge deployment <name> (jury of <jury>) ...`."""
    from medhelm_core.conf.deployments import resolve_api_key

    deployments_file = ws.local_path / "model_deployments.yaml"
    dep = ws.registry.deployments.get(name)
    if dep is None:
        searched = ", ".join(ws.registry.deployment_files)
        return f"is not defined: map the judge in {deployments_file} (searched: {searched})"
    try:
        resolve_api_key(dep, credentials)
    except MedhelmError:
        return (f"has no API key: add {dep.host_organization}ApiKey to {_credentials_file(ws, credentials)} "
                f"or map the judge in {deployments_file}" + _builtin_hint(ws, dep))
    from medhelm_core.clients import supported_client_classes

    cls = dep.client_spec.class_name
    if cls not in supported_client_classes():
        return (f"uses client class {cls}, which medhelm cannot call (it calls OpenAI-compatible endpoints): "
                f"map the judge in {deployments_file}" + _builtin_hint(ws, dep))
    problem = _endpoint_problem(ws, dep, credentials)
    if problem:
        return problem
    try:
        ws.client(name)
    except MedhelmError as e:
        return f"cannot be called: {e}: map the judge in {deployments_file}"
    return None
