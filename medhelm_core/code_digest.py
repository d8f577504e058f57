"""One digest of the code a number comes from: every file of this package (the Python, the benchmark
folders, the SQL models, the settings and schema) and of the user's benchmark folders, by relative
path and content; compiled caches left out. A run's fingerprint (`run.suite`), an imported target's
rebuild fingerprint (`published.freshness`) and the Dagster assets' code versions all use it, so a
change anywhere in the package reruns what it may change, and nothing else decides differently."""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=8)
def code_digest(roots: tuple[str, ...] = ()) -> str:
    h = hashlib.sha256()
    for root in (PACKAGE_DIR, *map(Path, roots)):
        for f in sorted(root.rglob("*")):
            if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc":
                h.update(f"{f.relative_to(root)}\n".encode())
                h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()
