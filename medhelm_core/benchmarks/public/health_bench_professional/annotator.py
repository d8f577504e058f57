"""HealthBenchProfessionalAnnotator (medhelm 0.8.0 `annotation/health_bench_annotator.py`): every
judge grades every rubric item in a call of its own, then (physician_response not None) compares the
answer with the physician's on a 1-10 scale; score = (rubric score + k / 10) / 2.

Upstream bug reproduced: ONE list of grading responses is shared by all judges, so every judge's
rubric fraction is the first judge's and every judge's stored `criteria` is the whole list (see
`medhelm_core/jury/rubric.py`, which also documents the HealthBench scoring bugs kept here). Each
judge's corrected score (its own responses) is stored beside HELM's, in judge_verdicts."""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.jury.rubric import rubric_jury
from medhelm_core.parts import JuryDef


def annotator(bench: Benchmark, args: dict[str, Any]) -> JuryDef:
    return rubric_jury(bench, args, shared_responses=True)
