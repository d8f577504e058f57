"""Layer 2, the datasets: the instances of one scenario spec, keyed by the spec and the bytes of its
data files (a changed file gives a new key, so everything downstream is rebuilt)."""
from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

from medhelm_core import adapt
from medhelm_core.catalog import Catalog
from medhelm_core.data_sources import DataNotHere
from medhelm_core.errors import MedhelmError, shorten
from medhelm_core.options import check_data_file
from medhelm_core.parts import ScenarioDef
from medhelm_core.run.entries import scenario_partition_key
from medhelm_core.run.workspace import Workspace, in_data_scope
from medhelm_core.store import insert_rows, stable_hash, upsert


_DIGESTS: dict[tuple, str] = {}


def _file_digest(path: str) -> str:
    """sha256 of a file (or of a folder's files), cached by (path, size, mtime) within the process."""
    p = Path(path)
    files = sorted(q for q in p.rglob("*") if q.is_file()) if p.is_dir() else [p]
    h = hashlib.sha256()
    for f in files:
        st = f.stat()
        memo = (str(f.resolve()), st.st_size, st.st_mtime_ns)
        if memo not in _DIGESTS:
            fh_hash = hashlib.sha256()
            with open(f, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    fh_hash.update(chunk)
            _DIGESTS[memo] = fh_hash.hexdigest()
        h.update(str(f).encode())
        h.update(_DIGESTS[memo].encode())
    return h.hexdigest()


def existing_data_files(defn: ScenarioDef, args: dict, where: str) -> list[str]:
    """The data files a scenario spec reads, all present; for a missing one the scenario raises its
    own one-line error naming the file and the argument (else `<where>: data file not found: ...`)."""
    files = defn.data_files(args)
    missing = [f for f in files if not os.path.exists(f)]
    if missing:
        try:
            defn.load(args)
        except DataNotHere:
            raise
        except MedhelmError as e:  # the scenario's own words for its missing file
            raise DataNotHere(str(e)) from None
        raise DataNotHere(f"{where}: data file not found: {shorten(missing[0])}")
    for f in files:   # regular files of a bounded size (never /dev/zero, read forever)
        check_data_file(f, where)
    return files


# Instances loaded before the first write (`check_datasets_load`), kept for the build that follows
# in this process: (edition, class name, args JSON, content hash) -> instances.
_PRELOADED: dict[tuple[str, str, str, str], list] = {}
PRELOAD_MAX_BYTES = 256 * 1024 * 1024   # a larger dataset is read (and checked) when it is built; and
                                        # at most this much of the checked ones is kept for the build


def _data_bytes(files: list[str]) -> int:
    total = 0
    for f in files:
        if os.path.isdir(f):
            total += sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(f) for n in names)
        else:
            total += os.path.getsize(f)
    return total


@in_data_scope
def check_datasets_load(ws: Workspace, entries: list) -> None:
    """Read each dataset of the user's own data files that is not built yet, before anything is
    written: a file that is not text, not UTF-8, malformed, or holds no instance stops the command
    with one line naming the run entry and the file (the instances are kept for the build)."""
    seen: set[str] = set()
    kept = 0   # bytes of data files whose instances are kept for the build (the rest are read again then)
    for entry, spec in entries:
        sspec = spec["scenario_spec"]
        ident = json.dumps([sspec["class_name"], sspec["args"], ws.edition], sort_keys=True, default=str)
        if ident in seen:
            continue
        seen.add(ident)
        defn = ws.catalog.find_scenario(sspec["class_name"])
        if defn is None:
            continue   # validate_runs names it
        where = f"{shorten(entry.location or 'run entry')}: {shorten(spec['name'])}"
        files = existing_data_files(defn, sspec["args"], where)
        size = _data_bytes(files) if files else 0
        if not files or size > PRELOAD_MAX_BYTES:
            continue
        content = stable_hash([(f, _file_digest(f)) for f in files])
        memo = _memo(ws, sspec, content)
        if memo in _PRELOADED or _already_built(ws, sspec):
            continue
        shown = shorten(files[0]) if len(files) == 1 else f"{shorten(files[0])} (and {len(files) - 1} more)"
        try:
            instances = defn.load(sspec["args"])
        except MedhelmError:
            raise
        except UnicodeDecodeError as e:
            raise MedhelmError(f"{where}: data file {shown} is not UTF-8 text (byte {e.start}): save it as "
                               f"UTF-8") from None
        except Exception as e:  # noqa: BLE001 - any reader's failure on a user's file: one line
            raise MedhelmError(f"{where}: cannot read data file {shown}: {type(e).__name__}: "
                               f"{shorten((str(e).strip().splitlines() or [''])[0], 300)}") from None
        if not instances:
            raise MedhelmError(f"{where}: data file {shown} holds no instances (empty, or a header without "
                               f"rows?): give a file with at least one row")
        if kept + size <= PRELOAD_MAX_BYTES:
            _PRELOADED[memo] = instances
            kept += size


def _already_built(ws: Workspace, sspec: dict) -> bool:
    """A dataset of this spec and these bytes is in the store (only read when the store exists)."""
    if not ws.store.exists():
        return False
    key, _ = scenario_key(sspec, ws.catalog)
    with ws.store.connect(read_only=True) as conn:
        try:
            return conn.execute("SELECT count(*) FROM datasets WHERE scenario_key = ?", [key]).fetchone()[0] > 0
        except Exception:  # noqa: BLE001 - no datasets table yet
            return False


def _memo(ws: Workspace, sspec: dict, content: str) -> tuple[str, str, str, str]:
    return ws.edition, sspec["class_name"], json.dumps(sspec["args"], sort_keys=True, default=str), content


def _load(ws: Workspace, defn: ScenarioDef, sspec: dict, content: str) -> list:
    """The instances of a spec: those read by `check_datasets_load`, else read now."""
    preloaded = _PRELOADED.pop(_memo(ws, sspec, content), None)
    return preloaded if preloaded is not None else defn.load(sspec["args"])


def scenario_key(scenario_spec: dict, catalog: Catalog) -> tuple[str, str]:
    """(key, content hash) of a dataset: scenario class + args + bytes of its data files.
    A changed data file gives a new key, so everything downstream is rebuilt."""
    defn = catalog.scenario(scenario_spec["class_name"])
    files = existing_data_files(defn, scenario_spec["args"], scenario_partition_key(scenario_spec, catalog.edition))
    content = stable_hash([(f, _file_digest(f)) for f in files])
    keyed = {"scenario_spec": scenario_spec, "content": content}
    if defn.edition_overlay is not None:
        keyed["edition_overlay"] = defn.edition_overlay
    return stable_hash(keyed)[:24], content


# One builder per dataset in this process: medhelm-run starts its runs before the Dagster job that
# records the datasets, so a run that needs its dataset and that job may ask for it at once.
_BUILD_LOCKS: dict[str, threading.Lock] = {}
_BUILD_LOCKS_GUARD = threading.Lock()
_BUILT_FOR_RUNS: dict[str, str] = {}  # partition key -> scenario key a run of this process built


def build_dataset(ws: Workspace, partition_key: str, for_run: bool = False) -> dict:
    """Instances of one scenario spec (ids assigned as HELM does). Skipped when the same spec and
    the same data-file bytes were already built. `for_run`: asked by a run before its requests;
    the job that records the datasets then reports that build as its own (`built`)."""
    with _BUILD_LOCKS_GUARD:
        lock = _BUILD_LOCKS.setdefault(partition_key, threading.Lock())
    with lock:
        info = _build_dataset(ws, partition_key)
        if for_run:
            if info["built"]:
                _BUILT_FOR_RUNS[partition_key] = info["scenario_key"]
        elif _BUILT_FOR_RUNS.pop(partition_key, None) == info["scenario_key"]:
            info["built"] = True
        return info


@in_data_scope
def _build_dataset(ws: Workspace, partition_key: str) -> dict:
    with ws.store.connect() as conn:
        row = conn.execute("SELECT scenario_spec, edition, scenario_key, content_hash FROM scenario_specs"
                           " WHERE partition_key = ?", [partition_key]).fetchone()
    if row is None:
        raise MedhelmError(f"dataset {partition_key!r} is not used by any registered run entry")
    sspec, ws = json.loads(row[0]), ws.for_edition(row[1])
    key, content = scenario_key(sspec, ws.catalog)
    defn = ws.catalog.scenario(sspec["class_name"])
    with ws.store.connect() as conn:
        have = conn.execute("SELECT num_instances FROM datasets WHERE scenario_key = ?", [key]).fetchone()
        if have is not None and (row[2], row[3]) == (key, content):
            # Built and recorded: what every run of the dataset after the first finds (no write turn).
            return {"scenario_key": key, "content_hash": content, "num_instances": have[0], "built": False,
                    "tier": defn.tier}
    built = False
    if have is None:
        instances = adapt.assign_instance_ids(_load(ws, defn, sspec, content))
        rows = [(key, i, inst.get("id"), inst["split"], json.dumps(inst, ensure_ascii=False))
                for i, inst in enumerate(instances)]
        with ws.store.transaction() as conn:
            conn.execute("DELETE FROM instances WHERE scenario_key = ?", [key])
            insert_rows(conn, "instances", ["scenario_key", "position", "instance_id", "split", "instance"], rows)
            upsert(conn, "datasets", ["scenario_key"],
                   ["scenario_key", "class_name", "args", "tier", "content_hash", "num_instances", "scenario",
                    "scenario_metadata"],
                   [(key, sspec["class_name"], json.dumps(sspec["args"]), defn.tier, content, len(rows),
                     json.dumps(defn.metadata(sspec["args"])), json.dumps(_helm_metadata(defn, sspec["args"])))])
        n, built = len(rows), True
    else:
        n = have[0]
    with ws.store.transaction() as conn:
        conn.execute("UPDATE scenario_specs SET scenario_key = ?, content_hash = ? WHERE partition_key = ?",
                     [key, content, partition_key])
    return {"scenario_key": key, "content_hash": content, "num_instances": n, "built": built, "tier": defn.tier}


# The positions HELM's draw keeps, per (dataset key, max_eval_instances, eval_splits, with_train): a
# key names the bytes of its instances, so the draw never changes; each model's run of a benchmark
# takes it from here instead of reading and shuffling every instance's split again.
_KEPT: dict[tuple, list[int]] = {}


def sampled_instances(ws: Workspace, key: str, max_eval_instances: int | None, eval_splits: list | None,
                      with_train: bool = True) -> list[dict]:
    """`adapt.downsample_eval_instances` over the instances of the built dataset `key`, decoding only
    those it keeps: its draw reads nothing but each instance's split (a column of `instances`), so a
    run of 5 instances does not parse every instance of a benchmark of thousands. `with_train=False`
    leaves out the train instances it keeps (a run without in-context examples never reads them)."""
    memo = (key, max_eval_instances, None if eval_splits is None else tuple(eval_splits), with_train)
    with ws.store.connect() as conn:
        kept = _KEPT.get(memo)
        if kept is None:
            stubs = [{"split": split, "position": position} for position, split in conn.execute(
                "SELECT position, split FROM instances WHERE scenario_key = ? ORDER BY position", [key]).fetchall()]
            kept = _KEPT[memo] = [stub["position"] for stub in adapt.downsample_eval_instances(
                stubs, max_eval_instances, eval_splits) if with_train or stub["split"] != adapt.TRAIN_SPLIT]
        rows = dict(conn.execute("SELECT position, instance FROM instances WHERE scenario_key = ?"
                                 " AND position IN (SELECT unnest(?::INTEGER[]))", [key, kept]).fetchall())
    return [json.loads(rows[position]) for position in kept]


@in_data_scope
def is_current(ws: Workspace, partition_key: str) -> bool:
    """The dataset was built from the spec and the data-file bytes it has now (nothing to rebuild)."""
    with ws.store.connect() as conn:
        row = conn.execute("SELECT s.scenario_spec, s.scenario_key, d.scenario_key IS NOT NULL, s.edition"
                           " FROM scenario_specs s LEFT JOIN datasets d ON d.scenario_key = s.scenario_key"
                           " WHERE s.partition_key = ?", [partition_key]).fetchone()
    if row is None or not row[2]:
        return False
    try:
        return scenario_key(json.loads(row[0]), ws.for_edition(row[3]).catalog)[0] == row[1]
    except MedhelmError:
        return False  # building it says what is wrong


def _helm_metadata(defn, args: dict) -> dict | None:
    try:
        return defn.helm_metadata(args)
    except NotImplementedError:  # HELM's summarizer skips scenarios without get_metadata()
        return None
