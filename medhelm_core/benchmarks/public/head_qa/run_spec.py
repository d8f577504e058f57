"""`head_qa` (HELM `get_head_qa_run_spec`): multiple choice, the exact-match bundle."""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.runspecs.public import build_public_run_spec


def run_spec(bench: Benchmark, language: str = "en", category: Any = None) -> dict:
    """Name `head_qa:language=<l>,category=<c>` (HELM writes `category=None` literally)."""
    return build_public_run_spec(bench, {"language": language, "category": category},
                                 name_args={"language": language, "category": category})
