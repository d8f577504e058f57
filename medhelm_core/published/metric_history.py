"""Why a re-scored stat differs from the published one when the published run was made by an older
HELM: the changes of `metric_history.yaml` (which stats, which metric classes, from which HELM
release) that apply to a run, given its run spec and the date its suite or release was summarized."""
from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from medhelm_core.yamlio import safe_load

HISTORY_PATH = Path(__file__).with_name("metric_history.yaml")


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

    def affected(self, run_spec: dict[str, Any]) -> list[str]:
        """The stat names of this run the change affects."""
        names = list(self.stats)
        if self.stats_arg:
            for m in run_spec.get("metric_specs", []):
                if not self.classes or m.get("class_name") in self.classes:
                    names.extend(n for n in (m.get("args") or {}).get(self.stats_arg) or [] if isinstance(n, str))
        return list(dict.fromkeys(names))

    def applies(self, run_spec: dict[str, Any], run_date: Optional[dt.date]) -> bool:
        """The run computes these stats with one of the classes, meets the condition, and is not known
        to be newer than the change's release."""
        classes = {m.get("class_name") for m in run_spec.get("metric_specs", [])}
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
    doc = safe_load(HISTORY_PATH.read_text(encoding="utf-8"))
    out = []
    for c in doc.get("changes", []):
        released = c["released"] if isinstance(c["released"], dt.date) else dt.date.fromisoformat(str(c["released"]))
        out.append(MetricChange(stats=tuple(c.get("stats") or ()), classes=tuple(c.get("classes") or ()),
                                version=str(c["version"]), released=released, commit=str(c["commit"]), what=c["what"],
                                when=c.get("when"), stats_arg=c.get("stats_arg")))
    return tuple(out)


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
