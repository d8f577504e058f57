"""Re-judging: the completions a target already holds, sent to another jury, landed as a target of its own.

    plan = plan_rejudge(ws, "public-n50", load_jury("my_judges.yaml"))   # reads only
    print(format_estimate(estimate_rejudge(ws, plan)))                    # what it would cost
    summary = rejudge(ws, plan)                                           # pays, writes, rebuilds

The target is one of our own suites (`medhelm-run`'s runs: `run_entries`) or a target imported with
`medhelm-import --with-completions` (`published_targets`: a release or a suite). Nothing of it is
changed: the re-judged runs are a suite of their own per original suite, `<suite>@<jury>`, and the
target `<target>@<jury>`, where the jury's name is the judges file's top-level `name:` if it has one
(HELM's judges.yaml has none; HELM ignores the key), else the file's stem (`my_judges`), or the preset
(`public`, `public-gpt-claude` for `public:gpt,claude`, `stanford`).

Every run keeps its completions, run name, instances and every stat but the jury's: each annotator and
metric spec with `annotator_models` gets the new judges (as HELM's run with that judges file as
`jury_config_path` would record them), the judges are asked through the completion engine (a judge
call already paid, by any run or re-judge of this store, is reused; none is paid twice; no model is
asked anything) and the jury metrics are computed again on the new annotations; runs without a jury
are copied as they are. Our own suite's copy is a whole suite (`run_entries`, `requests` with the same
completions, annotations, verdicts, scores): `medhelm-summarize --suite <suite>@<jury>` summarizes it
as any suite. An imported target's copy holds what we computed (`runs`, `run_stats`, `instance_stats`,
`annotations`, `judge_verdicts`, `jury_scores`); its completions stay in the published tables.

`rejudged_runs` says where each re-judged run came from (the SQL models' input: `jury_variant_scores`
adds the variant `jury:<original target>`, the original jury's scores of the same completions, so
`jury_rank_stability` and `jury_variant_leaderboard` compare the two juries), `rejudged_targets` what
each re-judged target is. `rebuild_rejudged` summarizes the target in a scratch database (the working
leaderboard tables are left alone) and keeps its tables as `leaderboard.*` under `<target>@<jury>`.
"""
from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from medhelm_core.engine import EngineReport, Job
from medhelm_core.errors import MedhelmError, shorten
from medhelm_core.jury.judges import DefaultJudges, default_judges, load_judges_config, normalize_annotator_models
from medhelm_core.jury.presets import FLAG, PRESETS, missing_judge_keys, parse_judges
from medhelm_core.options import NAME_CHARS, NAME_MAX, is_name
from medhelm_core.yamlio import safe_load

SUITE, PUBLISHED = "suite", "published"   # where the target's completions are
SEP = "@"                                  # <target>@<jury>


# --------------------------------------------------------------------------- the jury

@dataclass(frozen=True)
class Jury:
    """A judges file (HELM's judges.yaml form) as a jury: its `name` (what the re-judged target is
    called after), the file, and {judge name: {"model_name", "model_deployment"}}."""
    name: str
    path: str
    judges: dict[str, dict[str, str]]


def load_jury(value: str, name: Optional[str] = None, flag: str = FLAG) -> Jury:
    """A judges file, or a `--judges` preset (`stanford`, `public`, `public:gpt,claude`). The name is
    `name` if given, else the file's top-level `name:`, else the preset or the file's stem. Any problem
    is one MedhelmError line naming the file (and field), and `flag` (the option that gave the file)."""
    try:
        return _load_jury(value, name)
    except MedhelmError as e:
        text = str(e)
        raise MedhelmError(flag + text[len(FLAG):] if text.startswith(FLAG) else text) from None


def _load_jury(value: str, name: Optional[str]) -> Jury:
    choice = parse_judges(value)   # one line for a missing file, a folder, a malformed judges list
    preset = str(value).strip().partition(":")[0].lower()
    if choice is None:             # HELM's default jury (the `stanford` preset)
        choice = DefaultJudges(PRESETS["stanford"], None, "stanford")
    with default_judges(choice):
        config = load_judges_config(None)
    judges = normalize_annotator_models(
        {j["name"]: {"model_name": j["model"], "model_deployment": j["model_deployment"]} for j in config["judges"]},
        where=choice.path)
    if name is None:
        if preset in PRESETS:      # (as parse_judges reads it: a preset, not a file of that name)
            name = preset + "".join(f"-{n}" for n in choice.names or ())
        else:
            name = _file_name(choice.path)
    if not is_name(name):
        raise MedhelmError(f"{choice.path}: name {shorten(repr(name))}: a jury's name (it names the target "
                           f"<target>{SEP}<name>) takes {NAME_CHARS}, at most {NAME_MAX} characters")
    return Jury(name, choice.path, judges)


def _file_name(path: str) -> Any:
    """The judges file's top-level `name:`, else its stem."""
    with open(path, "r") as f:
        config = safe_load(f)
    if "name" in config:
        return config["name"]
    return Path(path).stem


def with_jury(spec: dict, judges: dict[str, dict[str, str]]) -> tuple[dict, Optional[dict], list[int]]:
    """(the run spec with `judges` wherever an annotator or metric spec names its `annotator_models`,
    the first replaced annotator's judges (None: the run has no jury), the replaced metric specs'
    positions)."""
    new = copy.deepcopy(spec)
    original = None
    for aspec in new.get("annotators") or []:
        args = aspec.get("args")
        if isinstance(args, dict) and isinstance(args.get("annotator_models"), dict):
            if original is None:
                original = normalize_annotator_models(args["annotator_models"], where=f"{spec.get('name')}: annotator")
            args["annotator_models"] = copy.deepcopy(judges)
    metrics = []
    for i, mspec in enumerate(new.get("metric_specs") or []):
        args = mspec.get("args")
        if original is not None and isinstance(args, dict) and isinstance(args.get("annotator_models"), dict):
            args["annotator_models"] = copy.deepcopy(judges)
            metrics.append(i)
    return new, original, metrics


# --------------------------------------------------------------------------- the plan (reads only)

@dataclass
class RunPlan:
    """One run of the target and its re-judged copy."""
    suite: str                       # the original (local) suite
    run_name: str
    new_suite: str
    spec: dict                       # the run spec with the new jury
    edition: Optional[str]
    original_judges: Optional[dict]  # None: no jury, copied as it is
    jury_metrics: list[int] = field(default_factory=list)
    states: list[dict] = field(default_factory=list)   # with their results, without annotations
    published_suite: Optional[str] = None              # an imported run: its published suite and folder
    published_dir: Optional[str] = None
    plan: Any = None                                   # run.annotations.JuryPlan of the new spec
    jobs: list[Job] = field(default_factory=list)

    @property
    def judged(self) -> bool:
        return self.original_judges is not None


@dataclass
class RejudgePlan:
    origin: str                      # SUITE or PUBLISHED
    target: str
    new_target: str
    mode: str                        # 'suite' or 'release' (as summarized)
    suites: list[str]                # the original local suites, in the target's order
    jury: Jury
    runs: list[RunPlan]

    @property
    def new_suites(self) -> list[str]:
        return [rejudged_name(s, self.jury) for s in self.suites]

    @property
    def jobs(self) -> list[Job]:
        return [j for r in self.runs for j in r.jobs]


def rejudged_name(target: str, jury: Jury) -> str:
    return f"{target}{SEP}{jury.name}"


def plan_rejudge(ws, target: str, jury: Jury) -> RejudgePlan:
    """What re-judging `target` (an imported target, else our own suite of that name) with `jury`
    asks: every run's new spec, request states and judge jobs. Reads only; a problem (no such target,
    no completions, a judge that cannot be called, a name taken) is one line."""
    from medhelm_core.published.tables import ensure_published_tables

    if not ws.store.exists():
        raise MedhelmError(f"nothing to re-judge: {ws.store.where} does not exist")
    with ws.store.connect() as conn:
        ensure_published_tables(conn)
        published = conn.execute("SELECT mode, suites, local_suites, date FROM published_targets WHERE target = ?",
                                 [target]).fetchone()
        own = conn.execute("SELECT count(*) FROM run_entries WHERE suite = ?", [target]).fetchone()[0]
        derived = conn.execute("SELECT original_target FROM rejudged_targets WHERE target = ? AND origin = ?",
                               [target, PUBLISHED]).fetchone()
    if published is not None:
        plan = _plan_published(ws, target, jury, published)
    elif own:
        plan = _plan_own(ws, target, jury)
    elif derived is not None:
        raise MedhelmError(f"{target!r} is an imported target re-judged ({derived[0]!r} with another jury): "
                           f"re-judge {derived[0]!r} instead")
    else:
        raise MedhelmError(f"{target!r} is neither an imported target (medhelm-import --with-completions) nor a "
                           f"suite of your own (medhelm-run) in {ws.store.where}")
    if not any(r.judged for r in plan.runs):
        raise MedhelmError(f"{target}: no run has an LLM jury (an annotator with annotator_models) to re-judge")
    _check_names(ws, plan)
    _check_judges(ws, plan)   # before the request states are read: a large release's take a while
    _load_states(ws, plan)
    for r in plan.runs:
        if r.judged:
            _plan_jobs(ws, r, jury)
    return plan


def _load_states(ws, plan: RejudgePlan) -> None:
    """The judged runs' request states with their results (no annotations): for our own suite, each
    answer as the run's edition reads it (what its judges were shown); for an imported one, as published."""
    from medhelm_core.published.rescore import published_request_states
    from medhelm_core.run.annotations import load_request_states
    from medhelm_core.run.workspace import RunRef

    judged = [r for r in plan.runs if r.judged]
    if plan.origin == SUITE:
        for r in judged:
            r.states = load_request_states(ws, RunRef(r.suite, r.run_name), with_annotations=False)
        return
    with ws.store.connect() as conn:
        for r in judged:
            r.states = [{k: v for k, v in st.items() if k != "annotations"}
                        for st in published_request_states(conn, r.published_suite, r.published_dir)]


def _plan_own(ws, suite: str, jury: Jury) -> RejudgePlan:
    with ws.store.connect() as conn:
        rows = conn.execute("SELECT e.run_name, e.run_spec, e.edition FROM run_entries e JOIN runs r"
                            " ON r.suite = e.suite AND r.run_name = e.run_name WHERE e.suite = ? ORDER BY e.run_name",
                            [suite]).fetchall()
    if not rows:
        raise MedhelmError(f"suite {suite!r} has no scored run yet: run it to the end (medhelm-run) first")
    runs = []
    for run_name, spec_text, edition in rows:
        spec, original, metrics = with_jury(json.loads(spec_text), jury.judges)
        runs.append(RunPlan(suite, run_name, rejudged_name(suite, jury), spec, edition, original, metrics))
    return RejudgePlan(SUITE, suite, rejudged_name(suite, jury), "suite", [suite], jury, runs)


def _plan_published(ws, target: str, jury: Jury, info: tuple) -> RejudgePlan:
    from medhelm_core.published.metric_history import parse_date, with_retired_classes_replaced

    mode, suites, local_suites, date = info
    made_by = parse_date(date)
    runs, missing = [], []
    with ws.store.connect() as conn:
        for pub, loc in dict.fromkeys(zip(suites, local_suites)):
            rows = conn.execute("""
                SELECT p.run_name, p.spec_name, p.run_spec,
                       EXISTS (SELECT 1 FROM published_request_states s
                               WHERE s.suite = p.suite AND s.run_name = p.run_name)
                FROM published_runs p JOIN runs r ON r.suite = ? AND r.run_name = p.spec_name
                WHERE p.suite = ? ORDER BY p.spec_name""", [loc, pub]).fetchall()
            for run_dir, run_name, spec_text, has_states in rows:
                spec = with_retired_classes_replaced(json.loads(spec_text), made_by)  # HELM 0.5.5-0.5.7 juries
                spec, original, metrics = with_jury(spec, jury.judges)
                r = RunPlan(loc, run_name, rejudged_name(loc, jury), spec, None, original, metrics,
                            published_suite=pub, published_dir=run_dir)
                if r.judged and not has_states:
                    missing.append(f"{pub}/{run_dir}")
                    continue
                runs.append(r)
    if missing:
        raise MedhelmError(f"{target}: {len(missing)} judged run(s) have no completions in the store (first: "
                           f"{missing[0]}); re-judging reads them: import with --with-completions")
    if not runs:
        raise MedhelmError(f"{target}: no imported run to re-judge")
    return RejudgePlan(PUBLISHED, target, rejudged_name(target, jury), mode, list(local_suites), jury, runs)


def _check_names(ws, plan: RejudgePlan) -> None:
    """The new suites must be free, or this re-judge's own from before (then rewritten)."""
    with ws.store.connect() as conn:
        for new in dict.fromkeys(plan.new_suites):
            mine = conn.execute("SELECT count(*) FROM rejudged_targets WHERE target = ? AND list_contains(suites, ?)",
                                [plan.new_target, new]).fetchone()[0]
            if mine:
                continue
            taken = conn.execute("SELECT (SELECT count(*) FROM runs WHERE suite = ?) + "
                                 "(SELECT count(*) FROM run_entries WHERE suite = ?)", [new, new]).fetchone()[0]
            if taken:
                raise MedhelmError(f"suite {new!r} in {ws.store.where} already holds runs that are not this "
                                   f"re-judge's; name the jury otherwise (a `name:` in {plan.jury.path})")


def _check_judges(ws, plan: RejudgePlan) -> None:
    """Every judge callable (defined, a key where it needs one, a price under --budget), before any
    request state is read or anything is paid."""
    from medhelm_core.helm_config.deployments import load_credentials
    from medhelm_core.run.preflight import VENDOR_KEY_MISSING, _judge_deployment_problem

    credentials = load_credentials(ws.local_path)
    judged = [(None, r.spec) for r in plan.runs if r.judged]
    keys_line = missing_judge_keys(ws.for_edition(plan.runs[0].edition), judged[:1], credentials)
    if keys_line:
        raise MedhelmError(keys_line)
    for name, info in plan.jury.judges.items():
        problem = _judge_deployment_problem(ws, info["model_deployment"], credentials)
        if problem and not problem.startswith(VENDOR_KEY_MISSING):
            raise MedhelmError(f"{plan.jury.path}: judge {name!r}: deployment {info['model_deployment']} {problem}")
        if ws.controls.budget is not None and not ws.deployment_settings(info["model_deployment"]).priced:
            raise MedhelmError(f"{plan.jury.path}: judge {name!r}: --budget needs a price for deployment "
                               f"{info['model_deployment']!r}: set input_per_million and output_per_million for it "
                               f"in {ws.settings.describe()} or {ws.local_path}/medhelm_deployments.yaml")


def _plan_jobs(ws, r: RunPlan, jury: Jury) -> None:
    from medhelm_core.run.annotations import JuryPlan
    from medhelm_core.run.workspace import RunRef

    run_ws = ws.for_edition(r.edition)
    jp = JuryPlan(run_ws, RunRef(r.new_suite, r.run_name), spec=r.spec)
    for j in jp.juries:
        if dict(j.judges) != jury.judges:   # a jury whose judges its benchmark fixes otherwise
            raise MedhelmError(f"{r.suite}/{r.run_name}: its jury {j.name} does not take its judges from "
                               f"annotator_models (it asks {', '.join(j.judges)}): it cannot be re-judged")
    jp.local_annotators = []   # not asked again: their annotations are copied (they call no model)
    r.plan = jp
    r.jobs = [job for st in r.states for job in jp.judge_jobs(st)]


# --------------------------------------------------------------------------- the estimate

def estimate_rejudge(ws, plan: RejudgePlan):
    """`run.estimate.Estimate` of the re-judge: per judged run, its model row (every answer stored:
    nothing to pay) and a row per judge deployment (prompt tokens by the judge's tokenizer, output
    at most the judge request's max_tokens; answers already stored, and a question asked again, count
    as reused). Sends nothing."""
    from medhelm_core.run.estimate import Estimate, EstimateRow, _stored_results, token_counter

    est = Estimate()
    count = token_counter(ws, est)

    stored = _stored_results(ws, list(dict.fromkeys(j.key for j in plan.jobs)))
    asked: set[str] = set(stored)   # a question asked twice (the same answer judged twice) is paid once
    for r in plan.runs:
        if not r.judged:
            continue
        est.rows.append(EstimateRow(r.run_name, "model", r.spec["adapter_spec"]["model_deployment"],
                                    reused=len(r.states), usd=0.0))
        rows: dict[str, EstimateRow] = {}
        for job in r.jobs:
            row = rows.setdefault(job.deployment, EstimateRow(r.run_name, "judge", job.deployment))
            if job.key in asked:
                row.reused += 1
                continue
            asked.add(job.key)
            row.calls += 1
            row.prompt_tokens += count(job.deployment, job.request["prompt"])
            row.output_tokens += job.request["max_tokens"]
        for row in rows.values():
            s = ws.deployment_settings(row.deployment)
            if s.priced:
                row.usd = s.cost(row.prompt_tokens, row.output_tokens)
            else:
                row.usd = None
                est.unpriced.add(row.deployment)
            row.approximate = row.calls > 0 and row.deployment in est.approximated
            est.rows.append(row)
    return est


def estimate_line(plan: RejudgePlan, est) -> str:
    """One line: what the re-judge asks and what it would cost at most."""
    calls = sum(r.calls for r in est.rows if r.kind == "judge")
    reused = sum(r.reused for r in est.rows if r.kind == "judge")
    approx = "~" if any(r.approximate for r in est.rows) else ""
    unpriced = f" (no price for {', '.join(sorted(est.unpriced))})" if est.unpriced else ""
    judges = ", ".join(f"{n}: {i['model_deployment']}" for n, i in plan.jury.judges.items())
    return (f"{plan.new_target}: {sum(r.judged for r in plan.runs)} run(s) to re-judge with {plan.jury.name} "
            f"({judges}): {calls:,} judge "
            f"call(s) to pay, {reused:,} already stored or asked twice, no model call; at most "
            f"{approx}${est.total_usd:,.4f}{unpriced}")


# --------------------------------------------------------------------------- the re-judge

@dataclass
class RejudgeSummary:
    target: str
    new_target: str
    jury: str
    runs: int = 0            # runs re-judged
    copied: int = 0          # runs without a jury, copied as they are
    report: EngineReport = field(default_factory=EngineReport)
    statuses: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    rebuild_seconds: float = 0.0

    def lines(self) -> list[str]:
        r = self.report
        statuses = ", ".join(f"{k} {v:,}" for k, v in sorted(self.statuses.items()))
        return [f"{self.new_target}: re-judged {self.runs} run(s) of {self.target} with {self.jury} "
                f"({self.copied} without a jury copied as they are): {r.total:,} judge call(s), {r.new:,} paid now "
                f"(${r.cost_usd:,.4f}), {r.reused:,} already stored, {r.failed:,} failed; no model call; verdicts: "
                f"{statuses or 'none'}; {self.seconds:.1f}s (summarized in {self.rebuild_seconds:.1f}s)"]


def rejudge(ws, plan: RejudgePlan, progress: Optional[Callable[[str], None]] = None,
            output_dir: Optional[str] = None) -> RejudgeSummary:
    """Pay the plan's judge calls (each stored answer reused), write the re-judged suites in one
    transaction (every row of them, or none), then summarize the new target (`rebuild_rejudged`).
    A budget that stops the judges stops here, before anything is written (`BudgetExhausted`)."""
    from medhelm_core.costs import BudgetExhausted

    start = time.time()
    say = progress or (lambda m: None)
    summary = RejudgeSummary(plan.target, plan.new_target, plan.jury.name)
    jobs = plan.jobs
    say(f"{len(jobs):,} judge request(s) for {sum(r.judged for r in plan.runs)} run(s)")
    results, report = ws.engine().run(jobs) if jobs else ({}, EngineReport())
    summary.report = report
    if report.budget_stopped:
        budget = ws.controls.budget
        head = budget.message() if budget is not None else "budget reached"
        raise BudgetExhausted(f"{head} Stopped re-judging {plan.target}: {report.skipped} judge requests not sent "
                              f"({report.new} new, {report.reused} already stored); nothing of "
                              f"{plan.new_target} was written")
    outputs = [_run_outputs(ws, plan, r, results, report, summary) for r in plan.runs]
    _write(ws, plan, outputs)
    summary.runs = sum(r.judged for r in plan.runs)
    summary.copied = len(plan.runs) - summary.runs
    say(f"re-judged runs written; summarizing {plan.new_target}")
    t = time.time()
    rebuild_rejudged(ws, plan.new_target, output_dir=output_dir)
    summary.rebuild_seconds = time.time() - t
    summary.seconds = time.time() - start
    return summary


def rejudge_target(ws, target: str, judges: str, *, progress: Optional[Callable[[str], None]] = None,
                   estimate_only: bool = False, output_dir: Optional[str] = None,
                   say: Callable[[str], None] = print, flag: str = FLAG) -> Optional[RejudgeSummary]:
    """What a command does for `--judges FILE` / `--rejudge FILE` on `target`: plan, print the
    estimate line (the whole estimate table with `estimate_only`, and stop there), then re-judge and
    print the summary. Returns the summary (None with `estimate_only`)."""
    from medhelm_core.run.estimate import format_estimate

    plan = plan_rejudge(ws, target, load_jury(judges, flag=flag))
    est = estimate_rejudge(ws, plan)
    if estimate_only:
        say(format_estimate(est, ws.controls.budget.limit if ws.controls.budget is not None else None)
            .replace(f"{FLAG} ", f"{flag} "))
        say(estimate_line(plan, est))
        return None
    say(estimate_line(plan, est))
    summary = rejudge(ws, plan, progress=progress, output_dir=output_dir)
    for line in summary.lines():
        say(line)
    return summary


def judged_by_another_jury(ws, suite: str, judges: str) -> bool:
    """Whether our own suite `suite` holds scored runs whose jury is not `judges`' (a judges file or a
    preset): what `medhelm-run --judges FILE` re-judges (`rejudge_target`) instead of judging the suite
    again in place. False for a suite not run yet, or run with those judges already."""
    if not ws.store.exists():
        return False
    wanted = load_jury(judges).judges
    with ws.store.connect() as conn:
        specs = conn.execute("SELECT e.run_spec FROM run_entries e JOIN runs r ON r.suite = e.suite AND "
                             "r.run_name = e.run_name WHERE e.suite = ?", [suite]).fetchall()
    for (text,) in specs:
        original = with_jury(json.loads(text), wanted)[1]
        if original is not None and original != wanted:
            return True
    return False


@dataclass
class _Outputs:
    run: RunPlan
    ann_rows: list = field(default_factory=list)
    verdict_rows: list = field(default_factory=list)
    jury_rows: list = field(default_factory=list)
    run_stats: list = field(default_factory=list)        # None: copy the original's
    instance_stats: list = field(default_factory=list)


def _run_outputs(ws, plan: RejudgePlan, r: RunPlan, results: dict, report: EngineReport,
                 summary: RejudgeSummary) -> _Outputs:
    """The re-judged run's rows: verdicts and annotations from the judges' answers, the jury metrics
    computed again on them, merged into the original's stats."""
    from medhelm_core.metrics.evaluate import evaluate_run_partial
    from medhelm_core.run.annotations import annotation_rows
    from medhelm_core.run.scores import _jury_score_rows
    from medhelm_core.tokenizers import UncountedTokenizer

    out = _Outputs(r)
    if not r.judged:
        return out
    run_ws = ws.for_edition(r.edition)
    out.ann_rows, out.verdict_rows, counts = annotation_rows(run_ws, r.plan, r.states, results, report)
    for k, v in counts.items():
        summary.statuses[k] = summary.statuses.get(k, 0) + v
    by_pos: dict[int, dict] = {}
    for _, _, pos, _, annotator, annotation in out.ann_rows:
        by_pos.setdefault(pos, {})[annotator] = json.loads(annotation)
    states = [{**st, "annotations": by_pos[pos]} if pos in by_pos else st for pos, st in enumerate(r.states)]
    jury_spec = {**r.spec, "metric_specs": [r.spec["metric_specs"][i] for i in r.jury_metrics]}
    per_instance, stats, not_computed = evaluate_run_partial(jury_spec, states, UncountedTokenizer(None),
                                                             run_ws.catalog.metrics)
    out.jury_rows = _jury_score_rows(_Ref(r.new_suite, r.run_name), r.spec, states, run_ws.switches.jury_score_type)
    out.run_stats, out.instance_stats = _merged_stats(ws, plan, r, per_instance, stats)
    return out


@dataclass(frozen=True)
class _Ref:
    suite: str
    run_name: str


def _stat_tuple(stat: dict) -> tuple:
    """(name, split, sub_split, perturbation JSON, perturbation name, computed_on, count, sum, sum_squared,
    min, max, mean, variance, stddev) of a HELM Stat dict."""
    name = stat["name"]
    pert = name.get("perturbation")
    return (name["name"], name.get("split"), name.get("sub_split"), json.dumps(pert) if pert else None,
            (pert or {}).get("name"), (pert or {}).get("computed_on"), stat["count"], stat["sum"],
            stat["sum_squared"], stat.get("min"), stat.get("max"), stat.get("mean"), stat.get("variance"),
            stat.get("stddev"))


def _merged_stats(ws, plan: RejudgePlan, r: RunPlan, per_instance: list[dict], stats: list[dict]):
    """The original's run and per-instance stats with the jury metrics' stats replaced by the new
    ones (in place: where the first of them was; stats.json's order otherwise kept)."""
    names = {s["name"]["name"] for s in stats} | {s["name"]["name"] for e in per_instance for s in e["stats"]}
    with ws.store.connect() as conn:
        run_rows = conn.execute("SELECT name, split, sub_split, perturbation, perturbation_name, computed_on, count,"
                                " sum, sum_squared, min, max, mean, variance, stddev FROM run_stats"
                                " WHERE suite = ? AND run_name = ? ORDER BY ordinal", [r.suite, r.run_name]).fetchall()
        cols = ("instance_id, train_trial_index, ordinal, name, split, sub_split, perturbation, count, sum,"
                " sum_squared, min, max, mean, variance, stddev")
        if plan.origin == SUITE:
            inst_rows = conn.execute(f"SELECT {cols} FROM instance_stats WHERE suite = ? AND run_name = ?"
                                     " ORDER BY rowid", [r.suite, r.run_name]).fetchall()
        else:   # what the published rebuild reads: the unperturbed instances
            inst_rows = conn.execute(f"SELECT {cols} FROM published_instance_stats WHERE suite = ? AND run_name = ?"
                                     " AND instance_perturbation IS NULL ORDER BY entry_pos, ordinal",
                                     [r.published_suite, r.published_dir]).fetchall()
    new_run = [_stat_tuple(s) for s in stats]
    merged: list[tuple] = []
    placed = False
    for row in run_rows:
        if row[0] in names:
            if not placed:
                merged += new_run
                placed = True
            continue
        merged.append(tuple(row))
    if not placed:
        merged += new_run
    run_stats = [(r.new_suite, r.run_name, i) + row for i, row in enumerate(merged)]

    new_inst: dict[tuple[str, Any], list[tuple]] = {}
    for entry in per_instance:   # the jury metric's own entry: its ordinals as HELM numbers them
        key = (str(entry["instance_id"]), entry["train_trial_index"])
        new_inst.setdefault(key, []).extend(
            (k,) + _stat_tuple(s)[:4] + _stat_tuple(s)[6:] for k, s in enumerate(entry["stats"]))
    groups: dict[tuple[str, Any], list[tuple]] = {}
    for row in inst_rows:
        groups.setdefault((row[0], row[1]), []).append(row[2:])
    instance_stats = []
    for key in list(groups) + [k for k in new_inst if k not in groups]:
        rows, done = [], False
        for row in groups.get(key, []):
            if row[1] in names:
                if not done:
                    rows += new_inst.get(key, [])
                    done = True
                continue
            rows.append(tuple(row))
        if not done:
            rows += new_inst.get(key, [])
        instance_stats += [(r.new_suite, r.run_name) + key + tuple(row) for row in rows]
    return run_stats, instance_stats


RUN_STAT_COLUMNS = ["suite", "run_name", "ordinal", "name", "split", "sub_split", "perturbation", "perturbation_name",
                    "computed_on", "count", "sum", "sum_squared", "min", "max", "mean", "variance", "stddev"]
INSTANCE_STAT_COLUMNS = ["suite", "run_name", "instance_id", "train_trial_index", "ordinal", "name", "split",
                         "sub_split", "perturbation", "count", "sum", "sum_squared", "min", "max", "mean", "variance",
                         "stddev"]
NEW_SUITE_TABLES = ("runs", "run_stats", "instance_stats", "jury_scores", "annotations", "judge_verdicts",
                    "requests", "run_entries", "rejudged_runs")


def _write(ws, plan: RejudgePlan, outputs: list[_Outputs]) -> None:
    """Every row of the re-judged suites in one transaction (the suites' rows from before replaced)."""
    from medhelm_core.run.annotations import insert_annotation_rows
    from medhelm_core.store import in_transaction, insert_rows

    new_suites = list(dict.fromkeys(plan.new_suites))
    with ws.store.connect() as conn, in_transaction(conn):
        for table in NEW_SUITE_TABLES:
            conn.execute(f"DELETE FROM {table} WHERE suite IN (SELECT unnest(?::VARCHAR[]))", [new_suites])
        for o in outputs:
            r = o.run
            juries = [j.name for j in r.plan.juries] if r.plan is not None else []
            _copy_run(conn, plan, r, juries)
            insert_annotation_rows(conn, o.ann_rows, o.verdict_rows)
            insert_rows(conn, "jury_scores", ["suite", "run_name", "instance_id", "metric", "helm_value",
                                              "corrected_value", "judges_ok", "judges_total"], o.jury_rows)
            if r.judged:
                insert_rows(conn, "run_stats", RUN_STAT_COLUMNS, o.run_stats)
                insert_rows(conn, "instance_stats", INSTANCE_STAT_COLUMNS, o.instance_stats)
                conn.execute("INSERT INTO rejudged_runs (target, suite, run_name, original_target, original_suite,"
                             " jury, judges, original_judges) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                             [plan.new_target, r.new_suite, r.run_name, plan.target, r.suite, plan.jury.name,
                              json.dumps(plan.jury.judges), json.dumps(r.original_judges)])
        conn.execute("DELETE FROM rejudged_targets WHERE target = ?", [plan.new_target])
        conn.execute("INSERT INTO rejudged_targets (target, original_target, origin, mode, suites, original_suites, "
                     "jury, judges_file, judges) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     [plan.new_target, plan.target, plan.origin, plan.mode, plan.new_suites, plan.suites,
                      plan.jury.name, str(plan.jury.path), json.dumps(plan.jury.judges)])


def _copy_run(conn, plan: RejudgePlan, r: RunPlan, juries: list[str]) -> None:
    """The run's rows that the new jury does not change, under the new suite: `runs` (with the new
    spec), the stats of a run without a jury, the annotations of its other annotators (e.g. EhrSql's),
    and for our own suite its `run_entries` and `requests` (the same completions)."""
    old, new = [r.suite, r.run_name], [r.new_suite]
    spec = json.dumps(r.spec, ensure_ascii=False)
    path = conn.execute("SELECT run_path FROM runs WHERE suite = ? AND run_name = ?", old).fetchone()
    run_path = _moved(path[0] if path else None, r.suite, r.new_suite)
    conn.execute("INSERT INTO runs BY NAME SELECT * REPLACE (? AS suite, CAST(? AS JSON) AS run_spec, ? AS run_path)"
                 " FROM runs WHERE suite = ? AND run_name = ?", [r.new_suite, spec, run_path] + old)
    if not r.judged:
        conn.execute("INSERT INTO run_stats BY NAME SELECT * REPLACE (? AS suite) FROM run_stats"
                     " WHERE suite = ? AND run_name = ? ORDER BY ordinal", new + old)
        if plan.origin == SUITE:
            conn.execute("INSERT INTO instance_stats BY NAME SELECT * REPLACE (? AS suite) FROM instance_stats"
                         " WHERE suite = ? AND run_name = ? ORDER BY rowid", new + old)
        else:
            conn.execute("INSERT INTO instance_stats BY NAME SELECT ? AS suite, ? AS run_name, instance_id, "
                         "train_trial_index, ordinal, name, split, sub_split, perturbation, count, sum, sum_squared, "
                         "min, max, mean, variance, stddev FROM published_instance_stats WHERE suite = ?"
                         " AND run_name = ? AND instance_perturbation IS NULL ORDER BY entry_pos, ordinal",
                         [r.new_suite, r.run_name, r.published_suite, r.published_dir])
    if plan.origin == SUITE:
        conn.execute("INSERT INTO run_entries BY NAME SELECT * REPLACE (? AS suite, CAST(? AS JSON) AS run_spec) "
                     "FROM run_entries WHERE suite = ? AND run_name = ?", [r.new_suite, spec] + old)
        conn.execute("INSERT INTO requests BY NAME SELECT * REPLACE (? AS suite) FROM requests "
                     "WHERE suite = ? AND run_name = ?", new + old)
        conn.execute("INSERT INTO annotations BY NAME SELECT * REPLACE (? AS suite) FROM annotations "
                     "WHERE suite = ? AND run_name = ? AND annotator NOT IN (SELECT unnest(?::VARCHAR[]))",
                     new + old + [juries])
        if not r.judged:
            for table in ("judge_verdicts", "jury_scores"):   # (none: no jury)
                conn.execute(f"INSERT INTO {table} BY NAME SELECT * REPLACE (? AS suite) FROM {table} "
                             f"WHERE suite = ? AND run_name = ?", new + old)
    else:
        conn.execute("INSERT INTO annotations (suite, run_name, position, instance_id, annotator, annotation) "
                     "SELECT ?, ?, position, instance_id, annotator, annotation FROM published_annotations "
                     "WHERE suite = ? AND run_name = ? AND annotator NOT IN (SELECT unnest(?::VARCHAR[])) "
                     "AND annotation IS NOT NULL",
                     [r.new_suite, r.run_name, r.published_suite, r.published_dir, juries])


def _moved(run_path: Optional[str], suite: str, new_suite: str) -> Optional[str]:
    """`<...>/runs/<suite>/<run dir>` under the new suite (its last part, the run folder, fixes the read order)."""
    if not run_path:
        return run_path
    head, sep, tail = run_path.rpartition(f"/{suite}/")
    return f"{head}/{new_suite}/{tail}" if sep else run_path


# --------------------------------------------------------------------------- the new target's tables

def rebuild_rejudged(ws, target: str, output_dir: Optional[str] = None) -> str:
    """Summarize a re-judged target with the SQL models in a scratch database (the store's working
    leaderboard tables are left alone) and keep its tables as `leaderboard.*` under `target`;
    optionally write HELM's files under `output_dir`. The inputs: the re-judged suites' runs, stats,
    annotations and (their original's) completions, `rejudged_runs`, the original's annotations (the
    `jury:<original target>` variant), the store's settings, prices and clinicians' ratings; the schema:
    an imported target's own schema.json, our own suite's edition's."""
    from medhelm_core.published.leaderboard import _record_release_prices
    from medhelm_core.published.tables import ensure_published_tables, memory_bound
    from medhelm_core.store import sql_str
    from medhelm_core.summarize.pipeline import keep, prepare, resolve_schema, run_models, write_files
    from medhelm_core.summarize.tables import SummarizeTarget, ensure_input_tables

    with ws.store.connect() as conn, memory_bound(conn):
        ensure_published_tables(conn)
        info = conn.execute("SELECT original_target, origin, mode, suites, original_suites FROM rejudged_targets "
                            "WHERE target = ?", [target]).fetchone()
        if info is None:
            raise MedhelmError(f"{target!r} is not a re-judged target")
        original, origin, mode, suites, original_suites = info
        doc = conn.execute("SELECT content FROM published_documents WHERE target = ? AND name = 'schema.json'",
                           [original]).fetchone() if origin == PUBLISHED else None
        published_of = dict(conn.execute("SELECT local_suite, suite FROM published_suites").fetchall())
        main_db = conn.execute("SELECT current_database()").fetchone()[0]
        src = f'"{main_db}".main'
        new = list(dict.fromkeys(suites))
        pairs = list(dict.fromkeys(zip(original_suites, suites)))
        in_new = "(" + ", ".join(sql_str(s) for s in new) + ")"
        scratch = "medhelm_rejudge"
        conn.execute(f"ATTACH ':memory:' AS {scratch}")
        try:
            conn.execute(f"USE {scratch}")
            ensure_input_tables(conn)
            for table in ("runs", "run_stats", "rejudged_runs"):
                conn.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {src}.{table} WHERE suite IN {in_new}")
            conn.execute(f"INSERT INTO analytics_settings SELECT * FROM {src}.analytics_settings")
            _record_release_prices(conn, main_db)
            conn.execute(f"INSERT INTO human_ratings BY NAME SELECT file_row, dataset_name, model_key, instance_id, "
                         f"accuracy, completeness, clarity FROM {src}.human_ratings")
            # the original's verdicts beside the new ones (jury_variant_scores' `jury:` variant)
            if origin == PUBLISHED:
                mapped = " UNION ALL ".join(
                    f"SELECT {sql_str(loc)} AS suite, run_name, instance_id, annotator, entry, value "
                    f"FROM {src}.published_annotation_entries WHERE suite = {sql_str(published_of.get(loc, loc))}"
                    for loc, _ in pairs)
                completions = " UNION ALL ".join(
                    f"SELECT {sql_str(n)} AS suite, run_name, instance_id, train_trial_index, completion "
                    f"FROM {src}.published_completions WHERE suite = {sql_str(published_of.get(o, o))}"
                    for o, n in pairs)
            else:
                originals = "(" + ", ".join(sql_str(o) for o, _ in pairs) + ")"
                mapped = (f"SELECT suite, run_name, instance_id, annotator, entry, value "
                          f"FROM {src}.instance_annotation_entries WHERE suite IN {originals}")
                completions = (f"SELECT suite, run_name, instance_id, train_trial_index, completion "
                               f"FROM {src}.instance_completions WHERE suite IN {in_new}")
            views = {
                "instance_annotation_entries": f"SELECT suite, run_name, instance_id, annotator, entry, value "
                                               f"FROM {src}.instance_annotation_entries WHERE suite IN {in_new} "
                                               f"UNION ALL {mapped}",
                "instance_completions": completions,
                "instance_stats": f"SELECT * FROM {src}.instance_stats WHERE suite IN {in_new}",
            }
            for view, sql in views.items():
                conn.execute(f"DROP TABLE IF EXISTS {view}")
                conn.execute(f"CREATE VIEW {view} AS {sql}")
            selected = (SummarizeTarget.select(release=target, suites=list(suites)) if mode == "release"
                        else SummarizeTarget.select(suite=new[0]))
            schema, registry = resolve_schema(conn, selected, imported_schema=json.loads(doc[0]) if doc else None,
                                              model_metadata_paths=ws.model_metadata_paths())
            prepare(conn, selected, schema, registry)
            run_models(conn)
            keep(conn, as_target=target, into=main_db)
            written = write_files(conn, output_dir) if output_dir else ""
        finally:
            conn.execute(f'USE "{main_db}"')
            conn.execute(f"DETACH {scratch}")
    return written
