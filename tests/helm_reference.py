"""HELM 0.5.16's own code, as a test reference: modules taken from its wheel (scripts/setup.sh
downloads it into .cache/reference) and imported only by tests that compare our numbers with
HELM's. The project never imports it."""
from __future__ import annotations

import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WHEELS = ROOT / ".cache" / "reference"


def helm_wheel() -> Path:
    found = sorted(WHEELS.glob("crfm_helm-0.5.16-*.whl"))
    if not found:
        raise FileNotFoundError(f"HELM 0.5.16's wheel is not in {WHEELS}: run scripts/setup.sh "
                                "(it downloads it with `pip download --no-deps crfm-helm==0.5.16`)")
    return found[0]


def extract_helm_modules(folder: Path, package: str) -> Path:
    """`package`'s files (e.g. "helm/benchmark/metrics/summac") and the package __init__ files above
    it, extracted into `folder`; returns the folder to put on sys.path."""
    parts = package.split("/")
    wanted = {"/".join(parts[:i]) + "/__init__.py" for i in range(1, len(parts))}
    with zipfile.ZipFile(helm_wheel()) as wheel:
        for name in wheel.namelist():
            if name in wanted or name.startswith(package + "/"):
                wheel.extract(name, folder)
    return folder
