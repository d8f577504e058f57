"""`medhelm-server export --out DIR`: a shareable static copy of the page.

DIR/index.html opens from disk (file://) or any static web host: the same page, reading
`data/*.js` files (one per API answer, listed in `data/manifest.js`) instead of the server.
Every run is written through `redact_run` (and every judges' verdicts page through `redact_verdicts`),
so for runs whose tier is not shareable (anything but public) no prompt, reference, input,
completion, judge explanation, raw judge answer or annotation text leaves the machine; scores,
statuses, ids, clinicians' ratings and the leaderboard numbers do.

The export is all or nothing (see `export_static`): built beside DIR, swapped in when complete,
refused where DIR holds files it did not make (unless --force).
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from .app import STATIC_DIR, api_answer
from .data import Reader

STATIC_MARKER = "<!--MEDHELM_STATIC-->"
EXPORT_MANIFEST = ".medhelm-export.json"   # what the export made (so a later export knows what it may replace)


def data_key(endpoint: str, params: dict[str, str] | None = None) -> str:
    """The page's cache key of an API answer (app.js `dataKey`)."""
    params = params or {}
    if not params:
        return endpoint
    return endpoint + "?" + "&".join(f"{k}={params[k]}" for k in sorted(params))


def _write_data(data_dir: Path, manifest: dict[str, str], keys: list[str], value: Any) -> None:
    name = hashlib.sha1(keys[0].encode("utf-8")).hexdigest()[:16] + ".js"
    payload = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    with open(data_dir / name, "w", encoding="utf-8") as f:
        calls = "".join(f"window.__medhelmData({json.dumps(k)},v);" for k in keys)
        f.write(f"(function(v){{{calls}}})({payload});\n")
    for k in keys:
        manifest[k] = name


def export_static(reader: Reader, out_dir: str | Path, include_runs: bool = True, force: bool = False) -> dict:
    """Write the shareable copy to `out_dir`, all or nothing; return counts.

    Everything is checked first (the target is a folder holding only what an earlier export made, or
    `force`; the suite or release can be read); the copy is then built in a new folder beside the
    target (same parent, so on one file system) and swapped in only when complete: the old target is
    renamed aside, the new one renamed in, the old one removed. A failure at any point leaves the
    target as it was. An export lists what it made in `EXPORT_MANIFEST`; files not listed there are
    the user's, and the target is refused while it holds any, unless `force` (which replaces the whole
    folder, those files included)."""
    target = Path(os.path.abspath(out_dir))
    if target.is_symlink():
        target = target.resolve()
    if target.parent == target:
        raise ExportError(f"--out {out_dir}: cannot replace a file system's root; name a folder to write")
    if target.exists() and not target.is_dir():
        raise ExportError(f"--out {out_dir} is a file, not a folder; name a folder to write")
    foreign = foreign_files(target)
    if foreign and force:
        guarded = _never_replaced(target)
        if guarded:
            raise ExportError(f"--out {out_dir}: --force would delete {guarded}; name a folder of its own for "
                              f"the export")
    if foreign and not force:
        more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
        raise ExportError(f"--out {out_dir} holds files this export did not make ({foreign[0]}{more}): "
                          f"name an empty or new folder, or give --force to replace the folder and them")
    reader.snapshot()   # the suite or release exists and is readable, before anything is written

    created = _make_parents(target.parent)
    staging = target.parent / f".{target.name}.medhelm-export-{secrets.token_hex(4)}"
    try:
        staging.mkdir()
        if target.is_dir():
            os.chmod(staging, stat.S_IMODE(target.stat().st_mode))
        info = _write(reader, staging, include_runs)
        made = sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file())
        (staging / EXPORT_MANIFEST).write_text(
            json.dumps({"made_by": "medhelm-export", "files": made}, indent=1) + "\n", encoding="utf-8")
        _swap_in(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for d in reversed(created):
            try:
                d.rmdir()
            except OSError:
                break
        raise
    return {**info, "out": str(out_dir)}


def _never_replaced(target: Path) -> str | None:
    """Why `--force` must not replace `target` (a folder that is plainly not an export), else None: the
    home folder, the working folder or one above it, a folder holding a git checkout or a DuckDB file."""
    home, cwd = Path.home().resolve(), Path.cwd().resolve()
    if target == home:
        return "your home folder"
    if target == cwd or target in cwd.parents:
        return "the working folder" if target == cwd else "a folder above the working folder"
    if (target / ".git").exists():
        return "a git checkout"
    if any(target.rglob("*.duckdb")):
        return "a folder holding a DuckDB database"
    return None


class ExportError(Exception):
    """A target the export refuses, with the one-line reason."""


def foreign_files(target: Path) -> list[str]:
    """The files and folders under `target` that no earlier export made (by its `EXPORT_MANIFEST`),
    as sorted relative paths; everything, if it has no readable manifest; [] for a missing target."""
    if not target.is_dir():
        return []
    made: set[str] = set()
    try:
        listed = json.loads((target / EXPORT_MANIFEST).read_text(encoding="utf-8"))
        if isinstance(listed, dict) and listed.get("made_by") == "medhelm-export":
            made = {f for f in listed.get("files") or [] if isinstance(f, str)} | {EXPORT_MANIFEST}
    except (OSError, UnicodeDecodeError, ValueError):
        pass
    made_dirs = {parent.as_posix() for f in made for parent in PurePosixPath(f).parents if parent.as_posix() != "."}
    foreign: list[str] = []
    for root, dirs, files in os.walk(target):
        rel_root = Path(root).relative_to(target)
        for d in list(dirs):
            rel = (rel_root / d).as_posix()
            if rel not in made_dirs or os.path.islink(os.path.join(root, d)):
                foreign.append(rel + "/")
                dirs.remove(d)
        foreign.extend(rel for f in files if (rel := (rel_root / f).as_posix()) not in made)
    return sorted(foreign)


def _make_parents(parent: Path) -> list[Path]:
    """Create the missing folders above the target (outermost first), to be removed on failure."""
    missing = [p for p in [parent, *parent.parents] if not p.exists()][::-1]
    for p in missing:
        if p.is_symlink() or (p.exists() and not p.is_dir()):
            raise ExportError(f"--out: {p} is not a folder")
        p.mkdir()
    return missing


def _swap_in(staging: Path, target: Path) -> None:
    """Rename the complete copy to `target`; an existing target is renamed aside first and restored
    if the copy cannot take its place, then removed."""
    if not target.exists():
        os.rename(staging, target)
        return
    aside = target.parent / f".{target.name}.medhelm-old-{secrets.token_hex(4)}"
    os.rename(target, aside)
    try:
        os.rename(staging, target)
    except BaseException:
        os.rename(aside, target)
        raise
    shutil.rmtree(aside, ignore_errors=True)


def _write(reader: Reader, out: Path, include_runs: bool) -> dict:
    """The export's files, written into the empty folder `out`."""
    data_dir = out / "data"
    data_dir.mkdir()
    (out / "static").mkdir()
    for name in ("app.js", "style.css"):
        shutil.copyfile(STATIC_DIR / name, out / "static" / name)
    index = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    index = index.replace(STATIC_MARKER, '<script>window.MEDHELM_STATIC = true;</script>\n'
                                         '<script src="data/manifest.js"></script>')
    (out / "index.html").write_text(index, encoding="utf-8")

    manifest: dict[str, str] = {}

    def put(endpoint: str, params: dict[str, str] | None = None, extra_keys: list[str] | None = None) -> Any:
        value = api_answer(reader, endpoint, params or {}, redact=True)
        _write_data(data_dir, manifest, [data_key(endpoint, params), *(extra_keys or [])], value)
        return value

    put("meta")
    groups = put("groups")
    for g in groups["groups"]:
        put("group", {"name": g["name"]})
    runs = put("runs")
    put("comparison")
    put("plots")
    jury = put("jury")
    n_runs = n_redacted = 0
    if include_runs:
        # the judges' verdicts of every (benchmark, model) the judges page links to, redacted as the runs are
        for b in jury["benchmarks"]:
            for m in b["models"]:
                if m["n_judged"]:
                    put("verdicts", {"benchmark": b["benchmark"], "model": m["model"]})
        last_suite = {r["run_name"]: r["suite"] for r in runs}
        for r in runs:
            extra = [data_key("run", {"run": r["run_name"]})] if last_suite[r["run_name"]] == r["suite"] else []
            value = put("run", {"run": r["run_name"], "suite": r["suite"]}, extra)
            n_runs += 1
            n_redacted += bool(value.get("redacted"))
    (data_dir / "manifest.js").write_text(
        "window.MEDHELM_MANIFEST = " + json.dumps(manifest, ensure_ascii=False, indent=0) + ";\n", encoding="utf-8")
    return {"out": str(out), "files": len(set(manifest.values())) + 1, "runs": n_runs, "redacted_runs": n_redacted}
