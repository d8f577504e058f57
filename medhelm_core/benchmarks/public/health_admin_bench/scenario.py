"""HealthAdminBenchScenario: tasks from an external HealthAdminBench checkout, run by a Playwright agent
against a remote web portal. medhelm-build does not run these episodes, so `check` stops every run of it
before anything is built or asked, with one line saying what the benchmark needs and what is missing."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.errors import MedhelmError


def checkout(bench: Benchmark, args: dict[str, Any]) -> Path | None:
    """The HealthAdminBench checkout medhelm would use (hab_root=, $HEALTH_ADMIN_BENCH_ROOT, ./ or ../health-admin-bench)."""
    spec = bench.text["scenario"]
    candidates = [args.get("hab_root") or "", os.environ.get(spec["root_env"], "")] + spec["root_folders"]
    version = args.get("version") or "v2"
    for c in candidates:
        if c.strip() and (Path(c.strip()).expanduser() / "benchmark" / version / "tasks").is_dir():
            return Path(c.strip()).expanduser().resolve()
    return None


def check(bench: Benchmark, args: dict[str, Any]) -> None:
    spec = bench.text["scenario"]
    missing = []
    if checkout(bench, args) is None:
        missing.append(f"a HealthAdminBench checkout with benchmark/{args.get('version') or 'v2'}/tasks (hab_root=, "
                       f"${spec['root_env']} or ./health-admin-bench)")
    if importlib.util.find_spec("playwright") is None:
        missing.append("Playwright and its browser (pip install playwright; playwright install chromium)")
    what = "; ".join(missing) if missing else "nothing is missing, but medhelm-build cannot run its episodes yet"
    raise MedhelmError(f"health_admin_bench runs a Playwright agent against {bench.text['run_spec']['defaults']['env_base_url']} "
                       f"(network) and is not run by medhelm-build; it needs: {what}. Remove its run entry to run the rest")


def files(bench: Benchmark, args: dict[str, Any]) -> list[str]:
    check(bench, args)
    return []


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    check(bench, args)
    return []
