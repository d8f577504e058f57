"""`medhelm-server export --out DIR`: a shareable static copy of the page.

DIR/index.html opens from disk (file://) or any static web host: the same page, reading
`data/*.js` files (one per API answer, listed in `data/manifest.js`) instead of the server.
Every run is written through `redact_run`, so for runs whose tier is not shareable (anything but
public) no prompt, reference, input, completion, judge explanation, raw judge answer or annotation
text leaves the machine; scores, statuses, ids and the leaderboard numbers do.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from .app import STATIC_DIR, api_answer
from .data import Reader

STATIC_MARKER = "<!--MEDHELM_STATIC-->"


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


def export_static(reader: Reader, out_dir: str | Path, include_runs: bool = True) -> dict:
    """Write the shareable copy; return counts."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data_dir = out / "data"
    if data_dir.exists():
        shutil.rmtree(data_dir)
    data_dir.mkdir()
    (out / "static").mkdir(exist_ok=True)
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
    n_runs = n_redacted = 0
    if include_runs:
        last_suite = {r["run_name"]: r["suite"] for r in runs}
        for r in runs:
            extra = [data_key("run", {"run": r["run_name"]})] if last_suite[r["run_name"]] == r["suite"] else []
            value = put("run", {"run": r["run_name"], "suite": r["suite"]}, extra)
            n_runs += 1
            n_redacted += bool(value.get("redacted"))
    (data_dir / "manifest.js").write_text(
        "window.MEDHELM_MANIFEST = " + json.dumps(manifest, ensure_ascii=False, indent=0) + ";\n", encoding="utf-8")
    return {"out": str(out), "files": len(set(manifest.values())) + 1, "runs": n_runs, "redacted_runs": n_redacted}
