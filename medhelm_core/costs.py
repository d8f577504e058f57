"""Dollar cost: prices, the cost views in DuckDB, the pre-run estimate and the budget.

Prices are per deployment, in USD per million prompt (`input_per_million`) and completion
(`output_per_million`) tokens, in the deployments settings (`conf/deployments.yaml`, overridden by
`<local_path>/medhelm_deployments.yaml`; see `ratelimit`). Every completion the engine stores
carries the token usage the API reported (`prompt_tokens`, `completion_tokens`, `usage`) and the
`cost_usd` at the price in force when it was paid; the prices in use are also kept in
`deployment_prices`, so a completion paid before its price was configured gets a cost too.

Views (one completion used by several instances, runs or suites is attributed to each of them;
`completion_costs` counts it once, as it was paid once):

* `completion_costs`   request_key, model_deployment, outcome, tokens, cost_usd
* `instance_costs`     suite, run_name, instance_id: model and judge calls, tokens and USD
* `run_costs`          suite, run_name, model, model_deployment: the same per run (distinct requests)
* `model_costs`        suite, model, model_deployment: its runs' model cost and the jury's cost on them
* `judge_costs`        suite, judge, judge_deployment: calls, tokens, USD
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from medhelm_core.registry import MedhelmError

COST_DDL = [
    """CREATE TABLE IF NOT EXISTS deployment_prices (
        model_deployment VARCHAR PRIMARY KEY, input_per_million DOUBLE, output_per_million DOUBLE,
        updated_at TIMESTAMP DEFAULT current_timestamp)""",
    """CREATE OR REPLACE VIEW completion_costs AS
    SELECT c.request_key, c.model_deployment, c.model, c.outcome, c.success, c.attempts,
           c.prompt_tokens, c.completion_tokens,
           coalesce(c.cost_usd, (c.prompt_tokens * p.input_per_million
                                 + c.completion_tokens * p.output_per_million) / 1e6) AS cost_usd,
           c.completed_at
    FROM completions c LEFT JOIN deployment_prices p ON p.model_deployment = c.model_deployment""",
    """CREATE OR REPLACE VIEW instance_costs AS
    WITH m AS (
        SELECT r.suite, r.run_name, r.instance_id, count(*) AS model_calls,
               sum(cc.prompt_tokens) AS model_prompt_tokens, sum(cc.completion_tokens) AS model_completion_tokens,
               sum(cc.cost_usd) AS model_cost_usd
        FROM requests r LEFT JOIN completion_costs cc ON cc.request_key = r.request_key
        GROUP BY r.suite, r.run_name, r.instance_id),
    j AS (
        SELECT v.suite, v.run_name, v.instance_id, count(*) AS judge_calls,
               sum(cc.prompt_tokens) AS judge_prompt_tokens, sum(cc.completion_tokens) AS judge_completion_tokens,
               sum(cc.cost_usd) AS judge_cost_usd
        FROM judge_verdicts v JOIN completion_costs cc ON cc.request_key = v.request_key
        GROUP BY v.suite, v.run_name, v.instance_id)
    SELECT m.suite, m.run_name, m.instance_id, m.model_calls, m.model_prompt_tokens, m.model_completion_tokens,
           m.model_cost_usd, coalesce(j.judge_calls, 0) AS judge_calls, j.judge_prompt_tokens,
           j.judge_completion_tokens, coalesce(j.judge_cost_usd, 0) AS judge_cost_usd,
           coalesce(m.model_cost_usd, 0) + coalesce(j.judge_cost_usd, 0) AS total_cost_usd
    FROM m LEFT JOIN j USING (suite, run_name, instance_id)""",
    """CREATE OR REPLACE VIEW run_costs AS
    WITH m AS (
        SELECT k.suite, k.run_name, count(*) AS model_calls, count(cc.request_key) AS model_completed,
               sum(cc.prompt_tokens) AS model_prompt_tokens, sum(cc.completion_tokens) AS model_completion_tokens,
               sum(cc.cost_usd) AS model_cost_usd
        FROM (SELECT DISTINCT suite, run_name, request_key FROM requests) k
        LEFT JOIN completion_costs cc ON cc.request_key = k.request_key
        GROUP BY k.suite, k.run_name),
    j AS (
        SELECT k.suite, k.run_name, count(*) AS judge_calls,
               sum(cc.prompt_tokens) AS judge_prompt_tokens, sum(cc.completion_tokens) AS judge_completion_tokens,
               sum(cc.cost_usd) AS judge_cost_usd
        FROM (SELECT DISTINCT suite, run_name, request_key FROM judge_verdicts WHERE request_key IS NOT NULL) k
        JOIN completion_costs cc ON cc.request_key = k.request_key
        GROUP BY k.suite, k.run_name)
    SELECT e.suite, e.run_name, e.model, e.model_deployment, m.model_calls, m.model_completed,
           m.model_prompt_tokens, m.model_completion_tokens, m.model_cost_usd,
           coalesce(j.judge_calls, 0) AS judge_calls, j.judge_prompt_tokens, j.judge_completion_tokens,
           coalesce(j.judge_cost_usd, 0) AS judge_cost_usd,
           coalesce(m.model_cost_usd, 0) + coalesce(j.judge_cost_usd, 0) AS total_cost_usd
    FROM run_entries e JOIN m USING (suite, run_name) LEFT JOIN j USING (suite, run_name)""",
    """CREATE OR REPLACE VIEW model_costs AS
    SELECT suite, model, model_deployment, count(*) AS runs, sum(model_calls) AS model_calls,
           sum(model_prompt_tokens) AS model_prompt_tokens, sum(model_completion_tokens) AS model_completion_tokens,
           sum(model_cost_usd) AS model_cost_usd, sum(judge_calls) AS judge_calls,
           sum(judge_cost_usd) AS judge_cost_usd, sum(total_cost_usd) AS total_cost_usd
    FROM run_costs GROUP BY suite, model, model_deployment""",
    """CREATE OR REPLACE VIEW judge_costs AS
    SELECT k.suite, k.judge, k.judge_deployment, count(*) AS calls,
           sum(cc.prompt_tokens) AS prompt_tokens, sum(cc.completion_tokens) AS completion_tokens,
           sum(cc.cost_usd) AS cost_usd
    FROM (SELECT DISTINCT suite, judge, judge_deployment, request_key FROM judge_verdicts
          WHERE request_key IS NOT NULL) k
    JOIN completion_costs cc ON cc.request_key = k.request_key
    GROUP BY k.suite, k.judge, k.judge_deployment""",
]


def record_prices(conn, prices: dict[str, Any]) -> None:
    """Upsert the prices in use (deployment name -> DeploymentSettings); unpriced ones are skipped."""
    rows = [(name, s.input_per_million, s.output_per_million) for name, s in prices.items() if s.priced]
    for name, inp, out in rows:
        conn.execute("INSERT OR REPLACE INTO deployment_prices (model_deployment, input_per_million,"
                     " output_per_million, updated_at) VALUES (?, ?, ?, current_timestamp)", [name, inp, out])


# ---------------------------------------------------------------------------------------------
# Budget
# ---------------------------------------------------------------------------------------------
class BudgetExhausted(MedhelmError):
    """The --budget cap was reached; what was paid is stored, a rerun continues."""


class Budget:
    """A cap on what one `medhelm-run` invocation may spend (USD).

    Before a request is sent its worst case (prompt tokens + max_tokens at the deployment's price)
    is reserved; it is sent only if committed spend + reservations + it stay within the cap.
    Once a request does not fit, no new request is sent (requests already retrying finish).
    """

    def __init__(self, limit_usd: float):
        if limit_usd < 0:
            raise MedhelmError(f"--budget must be >= 0, got {limit_usd}")
        self.limit = float(limit_usd)
        self.spent = 0.0
        self.reserved = 0.0
        self.paid_calls = 0
        self.skipped = 0
        self.exhausted = False
        self._lock = threading.Lock()

    def reserve(self, estimate: float) -> bool:
        with self._lock:
            if self.exhausted or self.spent + self.reserved + estimate > self.limit + 1e-12:
                self.exhausted = True
                self.skipped += 1
                return False
            self.reserved += estimate
            return True

    def settle(self, estimate: float, actual: float | None, paid: bool) -> None:
        """Release the reservation; add the actual cost (the estimate when the API gave no usage)."""
        with self._lock:
            self.reserved -= estimate
            if paid:
                self.spent += estimate if actual is None else actual
                self.paid_calls += 1

    def message(self) -> str:
        return (f"budget of ${self.limit:,.4f} reached: spent ${self.spent:,.4f} on {self.paid_calls} new "
                f"completions in this invocation; the next request would not fit (worst case: prompt + max_tokens). "
                f"Everything paid is stored: rerun the same command (with a new --budget) to continue where it stopped.")


# ---------------------------------------------------------------------------------------------
# Estimate
# ---------------------------------------------------------------------------------------------
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


@dataclass
class Estimate:
    rows: list[EstimateRow] = field(default_factory=list)
    unpriced: set[str] = field(default_factory=set)
    # deployment -> its tokenizer_name, for deployments whose tokenizer this project cannot load
    approximated: dict[str, str | None] = field(default_factory=dict)

    @property
    def total_usd(self) -> float:
        return sum(r.usd or 0.0 for r in self.rows)

    def by_deployment(self) -> list[EstimateRow]:
        out: dict[tuple, EstimateRow] = {}
        for r in self.rows:
            agg = out.setdefault((r.deployment, r.kind), EstimateRow("", r.kind, r.deployment))
            agg.calls += r.calls
            agg.reused += r.reused
            agg.prompt_tokens += r.prompt_tokens
            agg.output_tokens += r.output_tokens
            agg.usd = None if (agg.usd is None or r.usd is None) else agg.usd + r.usd
            agg.approximate = agg.approximate or r.approximate
        return list(out.values())


def _tokenizer(ws, deployment: str):
    """The deployment's tokenizer, or `tokenizers.ApproximateTokenizer` (4 characters a token) when
    this project has no implementation of its tokenizer_name (HELM's Hugging Face tokenizers). A
    tokenizer it implements but cannot load (tiktoken, or its BPE file, missing) stops the estimate
    with the one-line `TokenizerUnavailable`, as it would stop the run."""
    from medhelm_core.tokenizers import tokenizer_or_approximation

    return tokenizer_or_approximation(ws.deployment(deployment).tokenizer_name)


def estimate_runs(ws, entries: list[tuple[Any, dict]]) -> Estimate:
    """Tokens and dollars the runs would cost, without sending anything (nor writing anything).

    Model calls: prompt tokens by the deployment's tokenizer + max_tokens × num_completions.
    Judge calls (every annotator's judges on every instance): the judge prompt built around the
    model's stored answer when there is one, else around a placeholder counted as the model's
    max_tokens; output = the judge's max_tokens. Completions already stored cost nothing.
    """
    from medhelm_core import adapt, jury, pipeline
    from medhelm_core.registry import ANNOTATORS, SCENARIOS
    from medhelm_core.store import request_key
    from medhelm_core.tokenizers import is_approximate

    est = Estimate()
    instances_by_scenario: dict[str, list[dict]] = {}
    counters: dict[str, Any] = {}

    def count(deployment: str, text: str) -> int:
        if deployment not in counters:
            tokenizer = _tokenizer(ws, deployment)
            counters[deployment] = tokenizer.count
            if is_approximate(tokenizer):
                est.approximated[deployment] = tokenizer.name
        return counters[deployment](text)

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
        key, _ = pipeline.scenario_key(sspec)
        if key not in instances_by_scenario:
            instances_by_scenario[key] = adapt.assign_instance_ids(SCENARIOS[sspec["class_name"]].load(sspec["args"]))
        sampled = adapt.downsample_eval_instances(instances_by_scenario[key], adapter.get("max_eval_instances"),
                                                  adapter.get("eval_splits"))
        dep = adapter["model_deployment"]
        states = adapt.build_request_states(adapter, sampled, pipeline._prompt_fitter(ws, dep, approximate=True))
        keys = [request_key(st["request"]["model_deployment"], st["request"]) for st in states]
        stored = _stored_results(ws, keys)
        row = EstimateRow(spec["name"], "model", dep)
        for st, k in zip(states, keys):
            req = st["request"]
            if k in stored:
                row.reused += 1
                continue
            row.calls += 1
            row.prompt_tokens += count(dep, req["prompt"])
            row.output_tokens += req["max_tokens"] * max(1, req.get("num_completions") or 1)
        row.usd = price(dep, row.prompt_tokens, row.output_tokens)
        row.approximate = row.calls > 0 and approximate(dep)
        est.rows.append(row)

        judge_rows: dict[str, EstimateRow] = {}
        judge_jobs: list[tuple[str, str, int, int]] = []  # (deployment, key or "", prompt tokens, output tokens)
        for aspec in spec.get("annotators") or []:
            factory = ANNOTATORS.get(aspec["class_name"])
            if factory is None:
                raise MedhelmError(f"{spec['name']}: annotator {aspec['class_name']} is not implemented")
            j = factory(aspec["args"])
            if not getattr(j, "judges", None):
                continue  # a local annotator (e.g. EhrSqlAnnotator runs the SQL here): no model call
            for st, k in zip(states, keys):
                result = stored.get(k)
                placeholder = result is None
                filled = {**st, "result": result if result is not None else
                          {"completions": [{"text": "x"}]}}
                prompt = jury.jury_prompt(j, filled)
                if prompt is None:
                    continue  # a stored empty answer: HELM asks no judge
                for info in j.judges.values():
                    jdep = info["model_deployment"]
                    req = jury.judge_request(info, prompt)
                    tokens = count(jdep, prompt)
                    if placeholder:
                        tokens += st["request"]["max_tokens"] - count(jdep, "x")
                    judge_jobs.append((jdep, "" if placeholder else request_key(jdep, req), tokens,
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


def _stored_results(ws, keys: list[str]) -> dict[str, dict]:
    if not keys or not ws.store.path.exists():
        return {}
    with ws.store.connect() as conn:
        rows = conn.execute("SELECT request_key, result FROM completions"
                            " WHERE request_key IN (SELECT unnest(?::VARCHAR[]))", [keys]).fetchall()
    return {k: json.loads(r) for k, r in rows}


def _usd(value: float | None, approximate: bool = False) -> str:
    return "n/a" if value is None else ("~" if approximate else "") + f"{value:,.4f}"


def _tokens(value: int, approximate: bool = False) -> str:
    return ("~" if approximate else "") + f"{value:,}"


def format_estimate(est: Estimate, budget: float | None = None) -> str:
    from tabulate import tabulate

    headers = ["run", "calls of", "deployment", "new calls", "reused", "prompt tokens", "max output tokens", "USD"]
    table = [[r.run_name if r.kind == "model" else "  + jury", r.kind, r.deployment, r.calls, r.reused,
              _tokens(r.prompt_tokens, r.approximate), f"{r.output_tokens:,}", _usd(r.usd, r.approximate)]
             for r in est.rows]
    lines = ["Estimated cost before sending anything (upper bound: prompt tokens by each deployment's tokenizer "
             "+ max_tokens of output; stored completions cost nothing):", "",
             tabulate(table, headers=headers, disable_numparse=True, colalign=("left", "left", "left", "right",
                                                                              "right", "right", "right", "right")),
             "", "By deployment:"]
    dep_rows = [[r.deployment, r.kind, r.calls, r.reused, _tokens(r.prompt_tokens, r.approximate),
                 f"{r.output_tokens:,}", _usd(r.usd, r.approximate)] for r in est.by_deployment()]
    lines.append(tabulate(dep_rows, headers=["deployment", "calls of", "new calls", "reused", "prompt tokens",
                                              "max output tokens", "USD"], disable_numparse=True))
    calls = sum(r.calls for r in est.rows)
    ptok = sum(r.prompt_tokens for r in est.rows)
    otok = sum(r.output_tokens for r in est.rows)
    approx = any(r.approximate for r in est.rows)
    lines += ["", f"Total: {calls:,} new calls, {_tokens(ptok, approx)} prompt tokens, {otok:,} output tokens at "
                  f"most, {'~' if approx else ''}${est.total_usd:,.4f}"
              + (" (priced deployments only)" if est.unpriced else "")]
    if approx:
        names = sorted({str(t) for t in est.approximated.values()})
        lines.append("~ approximate: medhelm has no tokenizer " + ", ".join(names) + " (tokenizer_name of "
                     + ", ".join(sorted(est.approximated)) + "), so those prompts are counted as 4 characters a "
                     "token; for counts by a real tokenizer, set tokenizer_name in <local-path>/model_deployments.yaml "
                     "to one medhelm can load (e.g. openai/o200k_base)")
    if est.unpriced:
        lines.append("No price for: " + ", ".join(sorted(est.unpriced)) + " (set input_per_million and "
                     "output_per_million in conf/deployments.yaml or <local-path>/medhelm_deployments.yaml)")
    if budget is not None:
        verdict = "fits within" if est.total_usd <= budget else "exceeds"
        lines.append(f"The estimate {verdict} --budget ${budget:,.4f}.")
    return "\n".join(lines)


def run_cost(ws, suite: str, run_name: str) -> dict:
    """The run's cost row from `run_costs` (empty dict when the run has no requests yet)."""
    with ws.store.connect() as conn:
        row = conn.execute("SELECT model_cost_usd, judge_cost_usd, total_cost_usd, model_prompt_tokens,"
                           " model_completion_tokens FROM run_costs WHERE suite = ? AND run_name = ?",
                           [suite, run_name]).fetchone()
    if row is None:
        return {}
    return dict(zip(["model_cost_usd", "judge_cost_usd", "total_cost_usd", "model_prompt_tokens",
                     "model_completion_tokens"], row))
