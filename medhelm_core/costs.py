"""Dollar cost: prices, the cost views in DuckDB and the budget (the pre-run estimate: `estimate`).

Prices are per deployment, in USD per million prompt (`input_per_million`) and completion
(`output_per_million`) tokens, in the deployments settings (`conf/deployments.yaml`, overridden by
`<local_path>/medhelm_deployments.yaml`; see `ratelimit`). Every completion the engine stores
carries the token usage the API reported (`prompt_tokens`, `completion_tokens`, `usage`) and the
`cost_usd` at the price in force when it was paid; the prices in use are also kept in
`deployment_prices`, so a completion paid before its price was configured gets a cost too.

Views (sql/ddl/costs.sql; one completion used by several instances, runs or suites is attributed to each of them;
`completion_costs` counts it once, as it was paid once):

* `completion_costs`   request_key, model_deployment, outcome, tokens, cost_usd
* `instance_costs`     suite, run_name, instance_id: model and judge calls, tokens and USD
* `run_costs`          suite, run_name, model, model_deployment: the same per run (distinct requests)
* `model_costs`        suite, model, model_deployment: its runs' model cost and the jury's cost on them
* `judge_costs`        suite, judge, judge_deployment: calls, tokens, USD
"""
from __future__ import annotations

import datetime
import threading
import weakref
from typing import Any

from medhelm_core.errors import MedhelmError
from medhelm_core.store import upsert

def record_prices(conn, prices: dict[str, Any]) -> None:
    """Upsert the prices in use (deployment name -> DeploymentSettings); unpriced ones are skipped."""
    now = datetime.datetime.now()
    upsert(conn, "deployment_prices", ["model_deployment"],
           ["model_deployment", "input_per_million", "output_per_million", "updated_at"],
           [(name, s.input_per_million, s.output_per_million, now) for name, s in prices.items() if s.priced])


# The prices each store object (one per invocation's workspace) has written: every engine batch
# hands its prices in use, and they change only when a setting does, so a batch writes (a statement
# and a commit's worth of the store's one writer) only those that differ from what it wrote before.
_WRITTEN: "weakref.WeakKeyDictionary[Any, dict[str, tuple]]" = weakref.WeakKeyDictionary()
_WRITTEN_LOCK = threading.Lock()


def prices_to_record(store, prices: dict[str, Any]) -> dict[str, Any]:
    """The priced deployments of `prices` whose prices this store object has not written yet."""
    with _WRITTEN_LOCK:
        written = _WRITTEN.get(store, {})
        return {name: s for name, s in prices.items()
                if s.priced and written.get(name) != (s.input_per_million, s.output_per_million)}


def prices_recorded(store, prices: dict[str, Any]) -> None:
    """`prices` are in the store now (their transaction committed)."""
    with _WRITTEN_LOCK:
        written = _WRITTEN.setdefault(store, {})
        for name, s in prices.items():
            written[name] = (s.input_per_million, s.output_per_million)


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
