"""`healthqa_br` (HELM `get_healthqa_br_spec`): joint multiple choice in Portuguese (an inline worked
example in the instructions), the exact-match bundle."""
from __future__ import annotations

from medhelm_core.runspecs.public import build_public_run_spec


def run_spec(bench) -> dict:
    return build_public_run_spec(bench)
