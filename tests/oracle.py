"""Paths to the golden upstream output in ../shared/oracle (read-only): HELM 0.5.16's, and medhelm 0.8.0's
on the same inputs."""
from __future__ import annotations

import json
import os
from pathlib import Path

# ../shared beside the checkout (as in every session and in CI), or wherever MEDHELM_SHARED says.
SHARED = Path(os.environ.get("MEDHELM_SHARED") or Path(__file__).resolve().parents[2] / "shared")
SYNTHETIC = SHARED / "oracle" / "synthetic"
PUBLIC = SHARED / "oracle" / "public"
MEDHELM_080 = SHARED / "oracle" / "medhelm-0.8.0"
SYNTHETIC_080 = MEDHELM_080 / "synthetic"
PUBLIC_080 = MEDHELM_080 / "public"
MOCK_SERVER = SHARED / "tools" / "mock_openai_server.py"
# HELM 0.5.16 through its vendor-specific clients (Azure, Anthropic, Gemini, Bedrock, the Stanford gateway)
# against the multi-vendor mock.
VENDOR = SHARED / "oracle" / "vendor-clients"
VENDOR_MOCK_SERVER = SHARED / "tools" / "mock_vendor_server.py"


def run_dirs(root: Path, suite: str) -> list[Path]:
    base = root / "benchmark_output" / "runs" / suite
    return sorted(p for p in base.iterdir() if p.is_dir() and (p / "run_spec.json").exists())


def load(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))
