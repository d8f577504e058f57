"""HELM's `Stat` and `MetricName`, with HELM's arithmetic and JSON shape.

A metric name is a plain dict in HELM's JSON shape::

    {"name": "exact_match", "split": "test", "sub_split": ..., "perturbation": {...}}

(`sub_split` / `perturbation` absent when None). A perturbation is
`{"name", "robustness", "fairness", "computed_on", "seed"?}`.

`Stat` reproduces HELM 0.5.16 `metrics/statistic.py` exactly, including Python's numeric types:
a stat fed ints keeps an int `sum` (HELM writes `"sum": 3`), `mean` is always a float,
the population variance is clamped to the int `0` when rounding makes it negative, and a
count-0 stat has no min/max/mean/variance/stddev.
"""
from __future__ import annotations

import math
from typing import Any, Optional

PERTURBATION_ORIGINAL = "original"
PERTURBATION_PERTURBED = "perturbed"
PERTURBATION_WORST = "worst"

# Field order of HELM's PerturbationDescription / MetricName, with defaults.
_PERTURBATION_DEFAULTS: tuple[tuple[str, Any], ...] = (
    ("name", None),
    ("robustness", False),
    ("fairness", False),
    ("computed_on", PERTURBATION_PERTURBED),
    ("seed", None),
)


def perturbation(
    name: str,
    robustness: bool = False,
    fairness: bool = False,
    computed_on: str = PERTURBATION_PERTURBED,
    seed: Optional[int] = None,
) -> dict[str, Any]:
    """A PerturbationDescription dict (None-valued fields dropped, as HELM writes it)."""
    p: dict[str, Any] = {"name": name, "robustness": robustness, "fairness": fairness, "computed_on": computed_on}
    if seed is not None:
        p["seed"] = seed
    return p


def normalize_perturbation(p: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """Fill a (possibly partial) perturbation dict with HELM's defaults, in field order."""
    if p is None:
        return None
    out: dict[str, Any] = {}
    for key, default in _PERTURBATION_DEFAULTS:
        value = p.get(key, default)
        if value is not None:
            out[key] = value
    return out


def perturbation_key(p: Optional[dict[str, Any]]) -> Optional[tuple]:
    if p is None:
        return None
    return tuple(p.get(key, default) for key, default in _PERTURBATION_DEFAULTS)


def metric_name(
    name: str,
    split: Optional[str] = None,
    sub_split: Optional[str] = None,
    perturbation: Optional[dict[str, Any]] = None,
) -> dict[str, Any]:
    """A MetricName dict; None-valued fields are omitted, as in HELM's JSON."""
    mn: dict[str, Any] = {"name": name}
    if split is not None:
        mn["split"] = split
    if sub_split is not None:
        mn["sub_split"] = sub_split
    if perturbation is not None:
        mn["perturbation"] = perturbation
    return mn


def name_key(name: dict[str, Any]) -> tuple:
    """Hashable identity of a MetricName dict (HELM's frozen-dataclass equality)."""
    return (name["name"], name.get("split"), name.get("sub_split"), perturbation_key(name.get("perturbation")))


def replace_name(name: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """`dataclasses.replace` for a MetricName dict (a value of None removes the field)."""
    fields = {
        "name": name["name"],
        "split": name.get("split"),
        "sub_split": name.get("sub_split"),
        "perturbation": name.get("perturbation"),
    }
    fields.update(changes)
    return metric_name(**fields)


class Stat:
    """A mutable aggregate of numbers (HELM's `Stat`).

    `name` is a MetricName dict; a bare string is accepted as `{"name": <str>}`.
    """

    __slots__ = ("name", "count", "sum", "sum_squared", "min", "max", "mean", "variance", "stddev", "_key")

    def __init__(
        self,
        name: dict[str, Any] | str,
        count: int = 0,
        sum: Any = 0,  # noqa: A002 - HELM's field name
        sum_squared: Any = 0,
        min: Any = None,  # noqa: A002
        max: Any = None,  # noqa: A002
        mean: Any = None,
        variance: Any = None,
        stddev: Any = None,
    ):
        self.name: dict[str, Any] = {"name": name} if isinstance(name, str) else name
        self.count = count
        self.sum = sum
        self.sum_squared = sum_squared
        self.min = min
        self.max = max
        self.mean = mean
        self.variance = variance
        self.stddev = stddev
        self._key: Optional[tuple] = None

    # -- identity ---------------------------------------------------------------------------
    @property
    def key(self) -> tuple:
        if self._key is None:
            self._key = name_key(self.name)
        return self._key

    # -- HELM's operations ------------------------------------------------------------------
    def add(self, x: Any) -> "Stat":
        if x is None:
            return self
        if isinstance(x, bool):
            x = 1 if x is True else 0
        self.sum += x
        self.sum_squared += x * x
        self.min = min(self.min, x) if self.min is not None else x
        self.max = max(self.max, x) if self.max is not None else x
        self.count += 1
        self._update_mean_variance_stddev()
        return self

    def merge(self, other: "Stat") -> "Stat":
        # Like HELM, other.name is ignored.
        self.sum += other.sum
        self.sum_squared += other.sum_squared
        if other.min is not None:
            self.min = min(self.min, other.min) if self.min is not None else other.min
        if other.max is not None:
            self.max = max(self.max, other.max) if self.max is not None else other.max
        self.count += other.count
        self._update_mean_variance_stddev()
        return self

    def _update_mean_variance_stddev(self) -> None:
        if self.count == 0:
            return
        self.mean = self.sum / self.count
        pvariance = self.sum_squared / self.count - self.mean**2
        self.variance = 0 if pvariance < 0 else pvariance
        self.stddev = math.sqrt(self.variance)

    def take_mean(self) -> "Stat":
        """A stat holding only the mean (count 1); a count-0 stat is returned as is."""
        if self.count == 0:
            return self
        return Stat(self.name).add(self.mean)

    def copy(self, name: Optional[dict[str, Any]] = None) -> "Stat":
        """`dataclasses.replace(stat)` (optionally with another name)."""
        return Stat(
            self.name if name is None else name,
            self.count,
            self.sum,
            self.sum_squared,
            self.min,
            self.max,
            self.mean,
            self.variance,
            self.stddev,
        )

    # -- JSON -------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """HELM's `asdict_without_nones(stat)`."""
        out: dict[str, Any] = {
            "name": _name_to_json(self.name),
            "count": self.count,
            "sum": self.sum,
            "sum_squared": self.sum_squared,
        }
        for field in ("min", "max", "mean", "variance", "stddev"):
            value = getattr(self, field)
            if value is not None:
                out[field] = value
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "Stat":
        name = dict(obj["name"])
        if name.get("perturbation") is not None:
            name["perturbation"] = normalize_perturbation(name["perturbation"])
        return cls(
            name,
            obj.get("count", 0),
            obj.get("sum", 0),
            obj.get("sum_squared", 0),
            obj.get("min"),
            obj.get("max"),
            obj.get("mean"),
            obj.get("variance"),
            obj.get("stddev"),
        )

    @property
    def value(self) -> Optional[float]:
        return self.mean

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Stat):
            return NotImplemented
        return self.to_json() == other.to_json()

    def __repr__(self) -> str:
        return f"Stat({self.to_json()!r})"


def _name_to_json(name: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name["name"]}
    for field in ("split", "sub_split"):
        if name.get(field) is not None:
            out[field] = name[field]
    if name.get("perturbation") is not None:
        out["perturbation"] = normalize_perturbation(name["perturbation"])
    return out


def merge_stat(stats: dict[tuple, Stat], stat: Stat) -> None:
    """HELM's `merge_stat`: copy a new name in, or merge into the existing stat of that name."""
    existing = stats.get(stat.key)
    if existing is None:
        stats[stat.key] = stat.copy()
    else:
        existing.merge(stat)


def is_nan(x: Any) -> bool:
    try:
        return math.isnan(x)
    except TypeError:
        return False
