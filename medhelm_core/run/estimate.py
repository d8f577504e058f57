"""The pre-run estimate: tokens and dollars the runs would cost, before anything is sent.

`medhelm-run --estimate-cost` prints `format_estimate(estimate_runs(...))`; prices come from the
deployments settings (see `costs`), token counts from each deployment's tokenizer.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tabulate import tabulate

from medhelm_core import adapt, jury
from medhelm_core.data_sources import DataNotHere, cached_data_only
from medhelm_core.run.workspace import in_data_scope
from medhelm_core.run.datasets import scenario_key
from medhelm_core.run.recorded_sizes import recorded_size
from medhelm_core.run.requests import prompt_fitter
from medhelm_core.tokenizers import is_approximate


@dataclass
class EstimateRow:
    run_name: str
    kind: str  # "model" or "judge"
    deployment: str
    calls: int = 0
    reused: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    usd: float | None = 0.0
    approximate: bool = False  # prompt tokens counted by tokenizers.ApproximateTokenizer
    # `with_batch_prices`: the same calls where the batched deployments go through their batch API
    # (their batch price; the online price for the others), and whether this row's deployment batches.
    batch_usd: float | None = None
    batched: bool = False


@dataclass
class Estimate:
    rows: list[EstimateRow] = field(default_factory=list)
    unpriced: set[str] = field(default_factory=set)
    # deployment -> its tokenizer_name, for deployments whose tokenizer this project cannot load
    approximated: dict[str, str | None] = field(default_factory=dict)
    # tokenizer_name -> the ApproximateTokenizer standing in for it (what is missing, said once)
    approximation_reasons: dict[str | None, Any] = field(default_factory=dict)
    # run name -> the benchmark's size.yaml it was estimated from (its data not on this machine)
    from_records: dict[str, str] = field(default_factory=dict)
    # run name -> why it could not be estimated (no data here, no recorded size)
    not_estimated: dict[str, str] = field(default_factory=dict)

    @property
    def total_usd(self) -> float:
        return sum(r.usd or 0.0 for r in self.rows)

    @property
    def priced_for_batch(self) -> bool:
        """`with_batch_prices` was applied and some deployment batches."""
        return any(r.batched for r in self.rows)

    @property
    def total_batch_usd(self) -> float:
        return sum((r.batch_usd if r.batch_usd is not None else r.usd) or 0.0 for r in self.rows)

    def by_deployment(self) -> list[EstimateRow]:
        out: dict[tuple, EstimateRow] = {}
        for r in self.rows:
            first = (r.deployment, r.kind) not in out
            agg = out.setdefault((r.deployment, r.kind), EstimateRow("", r.kind, r.deployment))
            agg.calls += r.calls
            agg.reused += r.reused
            agg.prompt_tokens += r.prompt_tokens
            agg.output_tokens += r.output_tokens
            agg.usd = None if (agg.usd is None or r.usd is None) else agg.usd + r.usd
            agg.batch_usd = r.batch_usd if first else (
                None if (agg.batch_usd is None or r.batch_usd is None) else agg.batch_usd + r.batch_usd)
            agg.approximate = agg.approximate or r.approximate
            agg.batched = agg.batched or r.batched
        return list(out.values())


def _tokenizer(ws, deployment: str):
    """The deployment's tokenizer, or `tokenizers.ApproximateTokenizer` (4 characters a token) when
    this project has no implementation of its tokenizer_name (HELM's Hugging Face tokenizers). A
    tokenizer it implements but cannot load (tiktoken, or its BPE file, missing) stops the estimate
    with the one-line `TokenizerUnavailable`, as it would stop the run."""
    return ws.tokenizer(ws.deployment(deployment).tokenizer_name, approximate=True)


def token_counter(ws, est: Estimate) -> Callable[[str, str], int]:
    """`count(deployment, text)`: the text's tokens by the deployment's tokenizer (`_tokenizer`, loaded
    once a deployment); a deployment counted by an approximate tokenizer is noted in `est.approximated`
    (and the reason in `est.approximation_reasons`)."""
    counters: dict[str, Callable[[str], int]] = {}

    def count(deployment: str, text: str) -> int:
        if deployment not in counters:
            tokenizer = _tokenizer(ws, deployment)
            counters[deployment] = tokenizer.count
            if is_approximate(tokenizer):
                est.approximated[deployment] = tokenizer.name
                est.approximation_reasons.setdefault(tokenizer.name, tokenizer)
        return counters[deployment](text)

    return count


@in_data_scope
def estimate_runs(ws, entries: list[tuple[Any, dict]]) -> Estimate:
    """Tokens and dollars the runs would cost, without sending anything (nor writing anything).

    Model calls: prompt tokens by the deployment's tokenizer + max_tokens × num_completions.
    Judge calls (every annotator's judges on every instance): the judge prompt built around the
    model's stored answer when there is one, else around a placeholder counted as the model's
    max_tokens; output = the judge's max_tokens. Completions already stored cost nothing.
    """
    est = Estimate()
    instances_by_scenario: dict[str, list[dict]] = {}
    count = token_counter(ws, est)

    def approximate(deployment: str) -> bool:
        return deployment in est.approximated

    def price(deployment: str, prompt_tokens: int, output_tokens: int) -> float | None:
        s = ws.deployment_settings(deployment)
        if not s.priced:
            est.unpriced.add(deployment)
            return None
        return s.cost(prompt_tokens, output_tokens)

    for _, spec in entries:
        adapter = spec["adapter_spec"]
        sspec = spec["scenario_spec"]
        try:
            with cached_data_only():  # offline-first: what is mirrored, cached or on disk; nothing downloaded
                key, _ = scenario_key(sspec, ws.catalog)
                if key not in instances_by_scenario:
                    instances_by_scenario[key] = adapt.assign_instance_ids(
                        ws.catalog.scenario(sspec["class_name"]).load(sspec["args"]))
        except DataNotHere as e:
            _estimate_from_record(ws, est, spec, e, price)
            continue
        sampled = adapt.downsample_eval_instances(instances_by_scenario[key], adapter.get("max_eval_instances"),
                                                  adapter.get("eval_splits"))
        dep = adapter["model_deployment"]
        states = adapt.build_request_states(adapter, sampled, prompt_fitter(ws, dep, approximate=True))
        keys = [ws.request_key(st["request"]["model_deployment"], st["request"]) for st in states]
        stored = _stored_results(ws, keys, {k: st["request"] for st, k in zip(states, keys)})
        row = EstimateRow(spec["name"], "model", dep)
        for st, k in zip(states, keys):
            req = st["request"]
            if k in stored:
                row.reused += 1
                continue
            row.calls += 1
            row.prompt_tokens += count(dep, req["prompt"] if req.get("messages") is None  # chat: what is sent
                                       else "\n".join(str(m.get("content", "")) for m in req["messages"]))
            row.output_tokens += req["max_tokens"] * max(1, req.get("num_completions") or 1)
        row.usd = price(dep, row.prompt_tokens, row.output_tokens)
        row.approximate = row.calls > 0 and approximate(dep)
        est.rows.append(row)

        judge_rows: dict[str, EstimateRow] = {}
        judge_jobs: list[tuple[str, str, int, int]] = []  # (deployment, key or "", prompt tokens, output tokens)
        for aspec in spec.get("annotators") or []:
            j = ws.catalog.annotator(aspec, spec["name"])
            if not getattr(j, "judges", None):
                continue  # a local annotator (e.g. EhrSqlAnnotator runs the SQL here): no model call
            for st, k in zip(states, keys):
                result = stored.get(k)
                placeholder = result is None
                filled = {**st, "result": result if result is not None else
                          {"completions": [{"text": "x"}]}}
                calls = jury.judge_calls(j, filled)
                if calls is None:
                    continue  # a stored empty answer: HELM asks no judge
                for judge, judge_calls in calls.items():
                    info = j.judges[judge]
                    jdep = info["model_deployment"]
                    for call in judge_calls:
                        req = jury.judge_request(info, call.prompt)
                        tokens = count(jdep, call.prompt)
                        if placeholder:
                            tokens += st["request"]["max_tokens"] - count(jdep, "x")
                        judge_jobs.append((jdep, "" if placeholder else ws.request_key(jdep, req), tokens,
                                           req["max_tokens"]))
        judge_stored = _stored_results(ws, [k for _, k, _, _ in judge_jobs if k])
        for jdep, k, tokens, out_tokens in judge_jobs:
            jr = judge_rows.setdefault(jdep, EstimateRow(spec["name"], "judge", jdep))
            if k and k in judge_stored:
                jr.reused += 1
                continue
            jr.calls += 1
            jr.prompt_tokens += tokens
            jr.output_tokens += out_tokens
        for jr in judge_rows.values():
            jr.usd = price(jr.deployment, jr.prompt_tokens, jr.output_tokens)
            jr.approximate = jr.calls > 0 and approximate(jr.deployment)
            est.rows.append(jr)
    return est


def with_batch_prices(ws, est: Estimate, force_batch: bool = False) -> Estimate:
    """`est` with each row's price by batch beside the online one (`--estimate-cost` with batch mode): the
    deployments that batch (their `batch` setting, or every one with a batch API under `force_batch`: see
    `batch_pass.batch_flavour`) at online x (1 - batch_discount), the others at their online price."""
    from medhelm_core.run.batch_pass import batch_flavour  # here: the vendors' SDKs load in a second or two

    for r in est.rows:
        flavour = batch_flavour(ws, r.deployment, force_batch)
        r.batched = flavour is not None and r.calls > 0
        if not r.batched or r.usd is None:
            r.batch_usd = r.usd
            continue
        r.batch_usd = ws.deployment_settings(r.deployment).batch_cost(r.prompt_tokens, r.output_tokens,
                                                                      flavour.discount)
    return est


def _estimate_from_record(ws, est: Estimate, spec: dict, absent: DataNotHere, price) -> None:
    """A run whose data is not here, counted from its benchmark's recorded size (approximate), or
    listed as not estimated."""
    adapter = spec["adapter_spec"]
    rec = recorded_size(ws.catalog, spec["scenario_spec"])
    if rec is None:
        est.not_estimated[spec["name"]] = str(absent)
        return
    est.from_records[spec["name"]] = str(rec.source)
    n = rec.eval_instances if adapter.get("max_eval_instances") is None else \
        min(rec.eval_instances, adapter["max_eval_instances"])
    n *= max(1, adapter.get("num_train_trials") or 1)
    dep = adapter["model_deployment"]
    max_tokens = adapter.get("max_tokens") or 0
    completions = 1 if adapter.get("method") == adapt.ADAPT_MULTIPLE_CHOICE_JOINT else \
        max(1, adapter.get("num_outputs") or 1)
    row = EstimateRow(spec["name"], "model", dep, calls=n, prompt_tokens=round(n * rec.mean_prompt_tokens),
                      output_tokens=n * max_tokens * completions, approximate=True)
    row.usd = price(dep, row.prompt_tokens, row.output_tokens)
    est.rows.append(row)
    for aspec in spec.get("annotators") or []:
        j = ws.catalog.annotator(aspec, spec["name"])
        if not getattr(j, "judges", None) or rec.mean_judge_prompt_tokens is None:
            continue
        calls = round(n * (rec.judge_calls_per_instance or 1))
        for info in j.judges.values():
            jdep = info["model_deployment"]
            out = jury.judge_request(info, "")["max_tokens"]
            jr = EstimateRow(spec["name"], "judge", jdep, calls=calls,
                             prompt_tokens=round(calls * (rec.mean_judge_prompt_tokens + max_tokens)),
                             output_tokens=calls * out, approximate=True)
            jr.usd = price(jdep, jr.prompt_tokens, jr.output_tokens)
            est.rows.append(jr)


def records_notice(est: Estimate) -> list[str]:
    """One line for the runs counted from recorded sizes, one for those not counted at all."""
    lines = []
    if est.from_records:
        benches = sorted({Path(p).parent.name for p in est.from_records.values()})
        lines.append(f"~ {len(est.from_records)} run(s) estimated from recorded sizes (their data is not on this "
                     f"machine, and an estimate downloads nothing): {', '.join(benches)} (size.yaml of each "
                     "benchmark folder: instances and mean prompt tokens)")
    if est.not_estimated:
        first = next(iter(est.not_estimated.values()))
        lines.append(f"Not estimated: {len(est.not_estimated)} run(s) whose data is not here and whose benchmark "
                     f"records no size: {', '.join(sorted(est.not_estimated))} (first: {first})")
    return lines


def _stored_results(ws, keys: list[str], requests: dict[str, dict] | None = None) -> dict[str, dict]:
    """The stored answers of these keys; with `requests` (key -> request), each read as the
    workspace's edition reads it (`Workspace.completion_view`)."""
    if not keys or not ws.store.exists():
        return {}
    with ws.store.connect() as conn:
        rows = conn.execute("SELECT request_key, result, untruncated FROM completions"
                            " WHERE request_key IN (SELECT unnest(?::VARCHAR[]))", [keys]).fetchall()
    out = {}
    for k, r, untruncated in rows:
        result = json.loads(r)
        if requests is not None:
            view = ws.completion_view(requests[k]["model_deployment"])
            if view is not None:
                result = view(result, requests[k], json.loads(untruncated) if untruncated else None)
        out[k] = result
    return out


def _usd(value: float | None, approximate: bool = False) -> str:
    return "n/a" if value is None else ("~" if approximate else "") + f"{value:,.4f}"


def _tokens(value: int, approximate: bool = False) -> str:
    return ("~" if approximate else "") + f"{value:,}"


def approximation_notice(est: Estimate) -> str:
    """One line: which tokenizers could not be loaded here, what is missing, and how their prompts
    were counted. Hugging Face files missing for one cause (no hub, downloads off) share one clause."""
    by_cause: dict[str, list[str]] = {}
    for name in sorted(est.approximation_reasons, key=str):
        tokenizer = est.approximation_reasons[name]
        deployments = ", ".join(sorted(d for d, t in est.approximated.items() if t == name))
        cause, missing = getattr(tokenizer, "cause", None), getattr(tokenizer, "missing", None)
        if cause and missing:
            files = f"{missing}, " if missing != name else ""
            by_cause.setdefault(f"their Hugging Face files are {cause}", []).append(
                f"{name} ({files}tokenizer_name of {deployments})")
        else:
            reason = getattr(tokenizer, "reason", None) or f"medhelm has no tokenizer {name}"
            prefix = f"tokenizer {name}: "  # TokenizerNotHere's own prefix, said already
            by_cause.setdefault(reason[len(prefix):] if reason.startswith(prefix) else reason, []).append(
                f"{name} (tokenizer_name of {deployments})")
    parts = [", ".join(names) + ": " + cause for cause, names in by_cause.items()]
    return ("~ approximate: prompts counted as 4 characters a token for tokenizers that cannot be loaded here: "
            + "; ".join(parts) + ". For the real counts, put their files in the Hugging Face cache (HF_HOME), or set "
            "tokenizer_name in <local-path>/model_deployments.yaml to one medhelm can load (e.g. openai/o200k_base)")


def judges_share(est: Estimate) -> str | None:
    """One line: what the LLM jury's calls cost of the total (often nearly all of it), and how to
    judge with fewer (`--judges`); None when no run has a judge call to make."""
    judge_rows = [r for r in est.rows if r.kind == "judge"]
    if not any(r.calls for r in judge_rows):
        return None
    approx = any(r.approximate for r in judge_rows)
    usd = sum(r.usd or 0.0 for r in judge_rows)
    total = est.total_usd
    tilde = "~" if approx or any(r.approximate for r in est.rows) else ""
    pct = f" ({100 * usd / total:.1f}%)" if total > 0 else ""
    judges = len({r.deployment for r in judge_rows if r.calls})
    calls = sum(r.calls for r in judge_rows)
    return (f"Judges' share: {'~' if approx else ''}${usd:,.4f} of {tilde}${total:,.4f}{pct}, {calls:,} of "
            f"{sum(r.calls for r in est.rows):,} new calls, {judges} judge deployment{'s' if judges != 1 else ''}"
            + (" (priced ones only)" if any(r.usd is None for r in judge_rows) else "")
            + ("; judge with fewer: e.g. --judges public:gpt or stanford:gpt" if judges > 1 else ""))


def batch_line(est: Estimate) -> str | None:
    """One line: the batch price beside the online one (`with_batch_prices`), None when nothing batches."""
    if not est.priced_for_batch:
        return None
    approx = "~" if any(r.approximate for r in est.rows) else ""
    batched = [r for r in est.by_deployment() if r.batched]
    calls = sum(r.calls for r in batched)
    saved = est.total_usd - est.total_batch_usd
    return (f"By batch: {approx}${est.total_batch_usd:,.4f} instead of {approx}${est.total_usd:,.4f} online "
            f"(saves {approx}${saved:,.4f}): {calls:,} of {sum(r.calls for r in est.rows):,} new calls through the "
            f"vendors' batch APIs ({', '.join(sorted({r.deployment for r in batched}))}), answered within 24 hours "
            f"instead of at once")


def format_estimate(est: Estimate, budget: float | None = None) -> str:
    by_batch = est.priced_for_batch  # a column of batch prices (`with_batch_prices`)
    headers = ["run", "calls of", "deployment", "new calls", "reused", "prompt tokens", "max output tokens", "USD"]
    headers += ["USD by batch"] if by_batch else []
    table = [[r.run_name if r.kind == "model" else "  + jury", r.kind, r.deployment, r.calls, r.reused,
              _tokens(r.prompt_tokens, r.approximate), f"{r.output_tokens:,}", _usd(r.usd, r.approximate)]
             + ([_usd(r.batch_usd, r.approximate)] if by_batch else [])
             for r in est.rows]
    lines = ["Estimated cost before sending anything (upper bound: prompt tokens by each deployment's tokenizer "
             "+ max_tokens of output; stored completions cost nothing):", "",
             tabulate(table, headers=headers, disable_numparse=True, colalign=("left", "left", "left", "right",
                                                                              "right", "right", "right", "right",
                                                                              "right")[:len(headers)]),
             "", "By deployment:"]
    dep_rows = [[r.deployment, r.kind, r.calls, r.reused, _tokens(r.prompt_tokens, r.approximate),
                 f"{r.output_tokens:,}", _usd(r.usd, r.approximate)]
                + ([_usd(r.batch_usd, r.approximate) + (" (batch)" if r.batched else "")] if by_batch else [])
                for r in est.by_deployment()]
    lines.append(tabulate(dep_rows, headers=["deployment", "calls of", "new calls", "reused", "prompt tokens",
                                              "max output tokens", "USD"] + (["USD by batch"] if by_batch else []),
                          disable_numparse=True))
    calls = sum(r.calls for r in est.rows)
    ptok = sum(r.prompt_tokens for r in est.rows)
    otok = sum(r.output_tokens for r in est.rows)
    approx = any(r.approximate for r in est.rows)
    lines += ["", f"Total: {calls:,} new calls, {_tokens(ptok, approx)} prompt tokens, {otok:,} output tokens at "
                  f"most, {'~' if approx else ''}${est.total_usd:,.4f}"
              + (" (priced deployments only)" if est.unpriced else "")]
    by_batch_line = batch_line(est)
    if by_batch_line:
        lines.append(by_batch_line)
    lines += records_notice(est)
    share = judges_share(est)
    if share:
        lines.append(share)
    if est.approximation_reasons:
        lines.append(approximation_notice(est))
    if est.unpriced:
        lines.append("No price for: " + ", ".join(sorted(est.unpriced)) + " (set input_per_million and "
                     "output_per_million in conf/deployments.yaml or <local-path>/medhelm_deployments.yaml)")
    if budget is not None:  # against what will be charged: the batch price where batching
        total = est.total_batch_usd if by_batch else est.total_usd
        verdict = "fits within" if total <= budget else "exceeds"
        lines.append(f"The estimate{' by batch' if by_batch else ''} {verdict} --budget ${budget:,.4f}.")
    return "\n".join(lines)
