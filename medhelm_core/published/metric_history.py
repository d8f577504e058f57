"""Published runs made by older HELM versions, re-scored with today's metrics (`metric_history.yaml`):

* why a re-scored stat differs from the published one: the definition changes (which stats, which
  metric classes, from which HELM release) that apply to a run, given its run spec and the date its
  suite or release was summarized;
* the per-scenario jury classes HELM 0.5.5-0.5.7 wrote in run specs, replaced by the LLMJuryMetric
  spec that computes what they computed, so their jury scores are recomputed too."""
from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from medhelm_core.jury.metric import LLMJuryMetric
from medhelm_core.metrics.base import HELM_METRIC_ATTRIBUTE
from medhelm_core.yamlio import safe_load

HISTORY_PATH = Path(__file__).with_name("metric_history.yaml")
# the HELM class our LLMJuryMetric implements: what a retired class's spec becomes
LLM_JURY_METRIC = getattr(LLMJuryMetric, HELM_METRIC_ATTRIBUTE)[0]
RETIRED_MARK = "retired_class"  # on a metric spec that stands for a retired HELM class


@dataclass(frozen=True)
class MetricChange:
    stats: tuple[str, ...]
    classes: tuple[str, ...]
    version: str
    released: dt.date
    commit: str
    what: str
    when: Optional[str] = None
    stats_arg: Optional[str] = None
    retired_only: bool = False

    def affected(self, run_spec: dict[str, Any]) -> list[str]:
        """The stat names of this run the change affects."""
        names = list(self.stats)
        if self.stats_arg:
            for m in run_spec.get("metric_specs", []):
                if not self.classes or m.get("class_name") in self.classes:
                    value = (m.get("args") or {}).get(self.stats_arg) or []
                    names.extend([value] if isinstance(value, str) else [n for n in value if isinstance(n, str)])
        return list(dict.fromkeys(names))

    def applies(self, run_spec: dict[str, Any], run_date: Optional[dt.date]) -> bool:
        """The run computes these stats with one of the classes, meets the condition, and is not known
        to be newer than the change's release."""
        classes = {m.get("class_name") for m in run_spec.get("metric_specs", [])}
        if self.retired_only and not any(m.get(RETIRED_MARK) for m in run_spec.get("metric_specs", [])):
            return False
        if self.classes and not classes & set(self.classes):
            return False
        if self.when and _field(run_spec, self.when) in (None, "", [], {}):
            return False
        return run_date is None or run_date < self.released

    def cause(self, run_date: Optional[dt.date]) -> str:
        made = f"the run's release is dated {run_date}" if run_date else "the run's HELM version is unknown"
        return (f"metric changed since the run's HELM version: {self.what} (HELM {self.version}, released "
                f"{self.released}, commit {self.commit}; {made})")


def _field(spec: dict[str, Any], dotted: str) -> Any:
    value: Any = spec
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


@functools.cache
def metric_changes() -> tuple[MetricChange, ...]:
    doc = _history()
    out = []
    for c in doc.get("changes", []):
        out.append(MetricChange(stats=tuple(c.get("stats") or ()), classes=tuple(c.get("classes") or ()),
                                version=str(c["version"]), released=_as_date(c["released"]), commit=str(c["commit"]),
                                what=c["what"],
                                when=c.get("when"), stats_arg=c.get("stats_arg"),
                                retired_only=bool(c.get("retired_only"))))
    return tuple(out)


@functools.cache
def _history() -> dict[str, Any]:
    return safe_load(HISTORY_PATH.read_text(encoding="utf-8"))


def _as_date(value: Any) -> dt.date:
    return value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value))


def with_retired_classes_replaced(run_spec: dict[str, Any], run_date: Optional[dt.date]) -> dict[str, Any]:
    """`run_spec` with each retired per-scenario jury class (HELM 0.5.5-0.5.7) replaced by the
    LLMJuryMetric spec that computes what it computed in the run's HELM version (`retired_jury_classes`);
    the replaced specs carry `RETIRED_MARK` (the class they stand for)."""
    retired = _history().get("retired_jury_classes") or {}
    classes = retired.get("classes") or {}
    if not any(m.get("class_name") in classes for m in run_spec.get("metric_specs", [])):
        return run_spec
    default = retired["default_score"]
    score = default["then"] if run_date is not None and run_date < _as_date(default["before"]) else default["otherwise"]
    specs = []
    for m in run_spec.get("metric_specs", []):
        scenario = classes.get(m.get("class_name"))
        if scenario is None:
            specs.append(m)
            continue
        specs.append({"class_name": LLM_JURY_METRIC, RETIRED_MARK: m["class_name"],
                      "args": {"metric_name": f"{scenario}_accuracy", "scenario_name": scenario,
                               "annotator_models": {j: {} for j in retired["judges"]}, "default_score": float(score)}})
    return {**run_spec, "metric_specs": specs}


def parse_date(text: Optional[str]) -> Optional[dt.date]:
    """A summary.json date ("2025-06-20", or with a time) as a date; None when absent or unreadable."""
    if not text:
        return None
    try:
        return dt.date.fromisoformat(str(text)[:10])
    except ValueError:
        return None


def drift_causes(run_spec: dict[str, Any], run_date: Optional[dt.date]) -> dict[str, str]:
    """Stat name -> the change that explains a difference, for the changes that apply to this run."""
    out: dict[str, str] = {}
    for change in metric_changes():
        if change.applies(run_spec, run_date):
            for name in change.affected(run_spec):
                out.setdefault(name, change.cause(run_date))
    return out
