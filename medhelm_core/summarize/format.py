"""Numbers as HELM's frontend shows them (RowValue.tsx `formatNumber`): `String(Math.round(x*1000)/1000)`,
and "-" for a missing value; and as our page and Markdown previews write them (`page_number`): the
same rounding, always with 3 decimals, as medhelm-summarize's terminal table writes its cells."""
from __future__ import annotations

import math
from typing import Any


def js_round(x: float) -> float:
    """JavaScript's Math.round: the nearest integer, halves toward +infinity."""
    r = math.floor(x)
    return r + 1.0 if x - r >= 0.5 else float(r)


def js_number_str(x: float) -> str:
    """JavaScript's String(number) for the values a leaderboard holds."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == int(x) and abs(x) < 1e21:
        return str(int(x))
    s = repr(x)
    if "e" in s:  # JS writes 1e-7 / 1.5e+21 where Python writes 1e-07 / 1.5e+21
        mant, exp = s.split("e")
        sign = "-" if exp.startswith("-") else "+"
        s = f"{mant}e{sign}{int(exp.lstrip('+-'))}"
    return s


def helm_number(value: Any) -> str:
    """A table cell's text: "-" when it has no value, numbers rounded to 3 decimals as HELM does."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        x = float(value)
        if math.isnan(x) or math.isinf(x):
            return js_number_str(x)
        return js_number_str(js_round(x * 1000) / 1000)
    return str(value)


def page_number(value: Any) -> str:
    """A leaderboard value as the page (app.js `num3`) writes it: HELM's rounding to 3 decimals
    (`Math.round(x*1000)/1000`), written with all 3 decimals (0.500, 230.500), as the terminal table's
    `f"{v:.3f}"` does; "-" when missing; text as it is."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return helm_number(value)
    x = float(value)
    if math.isnan(x) or math.isinf(x):
        return js_number_str(x)
    return f"{js_round(x * 1000) / 1000 + 0.0:.3f}"
