"""HealthBenchAnnotator (medhelm 0.8.0 `annotation/health_bench_annotator.py`): every judge grades
every rubric item in a call of its own; its score is medhelm's `calculate_score` of its responses.
The rules and the upstream bugs reproduced (negative items counted as 10 + points and earned when
met; failed calls dropped, which shifts the pairing of responses and items) are documented in
`medhelm_core/jury/rubric.py`; each judge's corrected score is stored beside HELM's (a `summary`
row in judge_verdicts)."""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.jury.rubric import rubric_jury
from medhelm_core.parts import JuryDef


def annotator(bench: Benchmark, args: dict[str, Any]) -> JuryDef:
    return rubric_jury(bench, args)
