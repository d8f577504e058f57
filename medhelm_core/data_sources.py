"""Where the public scenarios' data comes from: a data mirror, or the upstream hosts HELM uses.

One place decides, for every file a public scenario reads, which bytes on disk it reads:

* **Mirror** (`MEDHELM_DATA_MIRROR=DIR`, for air-gapped sites and the tests): `DIR/<scenario>/<name>`
  holds each upstream file under its upstream name (the layout of `../shared/data/public/`), and a
  Hugging Face split is `DIR/huggingface/<org>__<name>[__<config>]/<split>.parquet` (the hub's
  parquet export). A file missing from the mirror is a one-line `MedhelmError` naming the file and
  its upstream source. Nothing is downloaded.
* **Online** (no mirror): each file is downloaded once from the URL HELM uses (plain HTTP; Hugging
  Face through `datasets` with HELM's pinned revision) into the cache
  `<output-path>/scenarios/<scenario>/` -- the same layout as a mirror, so the same reading code
  runs afterwards -- and its provenance (URL, revision, sha256, size, time) is recorded in
  `<output-path>/scenarios/<scenario>/SOURCES.json`. A cached file is never fetched again, which
  pins unpinned upstreams (GitHub branches, directory listings) to what was first downloaded.

`cached_data_only()` (the cost estimate) turns downloads off: a file neither mirrored nor cached is a
`DataNotHere` naming it, and the estimate falls back to the benchmark's recorded size.

Either way a scenario's `data_files(args)` returns the paths it reads, so a changed file changes the
dataset's content hash and its `public_datasets` partition goes stale.

Reading follows HELM's own I/O: text files are decoded as UTF-8 with universal newlines (HELM opens
them with `open(path, "r")`), GitHub raw files fetched with `requests.get(...).text` are decoded with
`errors="replace"`, Hugging Face rows are read back through `datasets`.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import io
import json
import os
import socket
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from medhelm_core.errors import MedhelmError
from medhelm_core.hf_hub import hub_connection_problem

MIRROR_ENV = "MEDHELM_DATA_MIRROR"
HF_DIR = "huggingface"
SOURCES_FILE = "SOURCES.json"
# GitHub's contents API lists at most 1,000 entries of a directory (documented); HELM takes what it
# returns. A mirror answers the listing from the git tree in tree order, cut the same way.
GITHUB_LISTING_LIMIT = 1000
HF_PARQUET_EXPORT = "refs/convert/parquet"

# Where online downloads are cached: `<output-path>/scenarios` inside a workspace's data scope
# (`cache_rooted`, which each run layer enters), else this default.
DEFAULT_CACHE_ROOT = Path("benchmark_output") / "scenarios"
_CACHE_ROOT: ContextVar[Path | None] = ContextVar("medhelm_scenario_cache_root", default=None)
_DOWNLOADS_ON: ContextVar[bool] = ContextVar("medhelm_scenario_downloads", default=True)


class DataNotHere(MedhelmError):
    """A data file that is not on this machine: missing from the mirror, from the user's data folder
    (gated, private), or not cached while downloads are off (`cached_data_only`)."""


@contextlib.contextmanager
def cached_data_only() -> Iterator[None]:
    """Read what is mirrored or cached, download nothing (`--estimate-cost` is offline-first)."""
    token = _DOWNLOADS_ON.set(False)
    try:
        yield
    finally:
        _DOWNLOADS_ON.reset(token)


class NotDownloadedYet(DataNotHere):
    """A public file that a run would download (downloads are off here: `cached_data_only`)."""


def _may_download(scenario: str, source: str) -> None:
    if not _DOWNLOADS_ON.get():
        raise NotDownloadedYet(f"{scenario}: not downloaded yet ({source})")


# ----------------------------------------------------------------------------- configuration
def mirror_root() -> Path | None:
    """The data mirror named by `$MEDHELM_DATA_MIRROR`, or None (online)."""
    value = os.environ.get(MIRROR_ENV, "").strip()
    if not value:
        return None
    root = Path(value).expanduser()
    if not root.is_dir():
        raise MedhelmError(f"{MIRROR_ENV}={value}: not a directory")
    return root


@contextlib.contextmanager
def cache_rooted(path: str | os.PathLike) -> Iterator[None]:
    """Cache online downloads under `path` for what runs inside (this thread or task only)."""
    token = _CACHE_ROOT.set(Path(path))
    try:
        yield
    finally:
        _CACHE_ROOT.reset(token)


def cache_root() -> Path:
    root = _CACHE_ROOT.get()
    return root if root is not None else DEFAULT_CACHE_ROOT


def hf_dir_name(path: str, config: str | None) -> str:
    """`dvilares/head_qa` + `en` -> `dvilares__head_qa__en` (the mirror's folder name)."""
    return path.replace("/", "__") + (f"__{config}" if config else "")


# ----------------------------------------------------------------------------- located files
@dataclass(frozen=True)
class Located:
    """A file on disk, or a member of a zip on disk."""

    path: Path
    member: str | None = None

    def read_bytes(self) -> bytes:
        if self.member is None:
            return self.path.read_bytes()
        with zipfile.ZipFile(self.path) as zf:
            return zf.read(self.member)

    def open_text(self, encoding: str = "utf-8", errors: str = "strict") -> io.TextIOWrapper:
        """What `open(path, "r", encoding=...)` gives: universal newlines."""
        return io.TextIOWrapper(io.BytesIO(self.read_bytes()), encoding=encoding, errors=errors)

    def read_text(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        with self.open_text(encoding, errors) as f:
            return f.read()

    def __str__(self) -> str:
        return f"{self.path}!{self.member}" if self.member else str(self.path)


@dataclass(frozen=True)
class UpstreamFile:
    """One upstream file: kept as `<scenario>/<name>` in a mirror or the cache, fetched from `url`."""

    scenario: str
    name: str
    url: str
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ZipMember:
    """A file HELM takes out of a downloaded zip (`url`), found by the end of its member path.

    In a mirror the member sits under its own base name; online the zip is downloaded into the
    cache as `zip_name` and the member is read from it."""

    scenario: str
    name: str
    zip_name: str
    url: str
    member_suffix: str


@dataclass(frozen=True)
class HFSplit:
    """One split of a Hugging Face dataset as HELM loads it.

    `parquet_export`: a script dataset (`datasets` >= 4 no longer runs loading scripts): online we
    read the hub's parquet export (`refs/convert/parquet`, folder `export_config`).
    `online_path`/`revision` say what is downloaded when that differs from HELM's name (the mirror
    folder always carries HELM's name)."""

    scenario: str
    path: str
    config: str | None
    split: str
    revision: str | None = None
    parquet_export: bool = False
    export_config: str | None = None
    online_path: str | None = None

    @property
    def dir_name(self) -> str:
        return hf_dir_name(self.path, self.config)

    @property
    def source(self) -> str:
        path = self.online_path or self.path
        rev = HF_PARQUET_EXPORT if self.parquet_export else self.revision
        cfg = f" config {self.config}" if self.config else ""
        return f"huggingface.co/datasets/{path}{cfg} split {self.split}" + (f" @ {rev}" if rev else "")


# ----------------------------------------------------------------------------- resolution
def _missing(scenario: str, path: Path, source: str) -> MedhelmError:
    return DataNotHere(f"{scenario}: {path} is missing from the data mirror ({MIRROR_ENV}); upstream source: {source}")


def fetch(up: UpstreamFile) -> Path:
    """The local path of an upstream file (downloaded into the cache when online)."""
    mirror = mirror_root()
    if mirror is not None:
        path = mirror / up.scenario / up.name
        if not path.is_file():
            raise _missing(up.scenario, path, up.url)
        return path
    path = cache_root() / up.scenario / up.name
    if not path.is_file():
        _may_download(up.scenario, up.url)
        data = http_get(up.url, dict(up.headers))
        _write_cached(path, data, up.scenario, up.name, {"url": up.url})
    return path


def fetch_or_mirror_member(up: UpstreamFile, archive: str, member: str) -> Located:
    """`fetch(up)`, except that a mirror lacking the file may hold it as `member` of the zip
    `<mirror>/<scenario>/<archive>` (ehr_sql's train.json, >= 4 MiB upstream, ships inside
    benchmarkdata's eicu.zip byte for byte)."""
    mirror = mirror_root()
    if mirror is not None and not (mirror / up.scenario / up.name).is_file():
        zpath = mirror / up.scenario / archive
        if zpath.is_file():
            return Located(zpath, zip_member_name(zpath, member, up.scenario))
    return Located(fetch(up))


def fetch_member(zm: ZipMember) -> Located:
    """A zip member: `<mirror>/<scenario>/<name>` in a mirror; online, read from the cached zip."""
    mirror = mirror_root()
    if mirror is not None:
        path = mirror / zm.scenario / zm.name
        if not path.is_file():
            raise _missing(zm.scenario, path, f"{zm.url} (zip member .../{zm.member_suffix})")
        return Located(path)
    zpath = fetch(UpstreamFile(zm.scenario, zm.zip_name, zm.url))
    return Located(zpath, zip_member_name(zpath, zm.member_suffix, zm.scenario))


def zip_member_name(zpath: Path, suffix: str, scenario: str) -> str:
    try:
        with zipfile.ZipFile(zpath) as zf:
            names = [n for n in zf.namelist() if n == suffix or n.endswith("/" + suffix)]
    except zipfile.BadZipFile:
        raise MedhelmError(f"{scenario}: {zpath} is not a zip file") from None
    if not names:
        raise MedhelmError(f"{scenario}: {zpath} has no member .../{suffix}")
    return sorted(names, key=len)[0]


def fetch_hf_split(hf: HFSplit) -> Path:
    """The parquet file holding one Hugging Face split (mirror, or the cache after a download)."""
    mirror = mirror_root()
    if mirror is not None:
        path = mirror / HF_DIR / hf.dir_name / f"{hf.split}.parquet"
        if not path.is_file():
            raise _missing(hf.scenario, path, hf.source)
        return path
    path = cache_root() / hf.scenario / HF_DIR / hf.dir_name / f"{hf.split}.parquet"
    if not path.is_file():
        _may_download(hf.scenario, hf.source)
        ds = _download_hf_split(hf)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".part")
        ds.to_parquet(str(tmp))
        os.replace(tmp, path)
        _record(hf.scenario, str(path.relative_to(cache_root() / hf.scenario)), path.read_bytes(),
                {"huggingface": hf.online_path or hf.path, "config": hf.config, "split": hf.split,
                 "revision": HF_PARQUET_EXPORT if hf.parquet_export else hf.revision})
    return path


def _download_hf_split(hf: HFSplit):
    why = hub_connection_problem()  # one probe, not the hub client's five retries per file
    if why:
        raise MedhelmError(f"{hf.scenario}: cannot download {hf.source}: {why} (set {MIRROR_ENV} to a local "
                           "copy of the data)")
    datasets = _datasets()
    path = hf.online_path or hf.path
    try:
        if hf.parquet_export:
            # The export branch holds <config>/<split>/NNNN.parquet (older exports:
            # <config>/<name>-<split>.parquet); read the files with the `parquet` builder.
            folder = hf.export_config or hf.config or "default"
            base = f"hf://datasets/{path}@{HF_PARQUET_EXPORT.replace('/', '%2F')}/{folder}"
            error: Exception | None = None
            for pattern in (f"{base}/{hf.split}/*.parquet", f"{base}/*-{hf.split}.parquet"):
                try:
                    return datasets.load_dataset("parquet", data_files={hf.split: pattern}, split=hf.split,
                                                 cache_dir=str(cache_root() / ".hf_cache"))
                except FileNotFoundError as e:
                    error = e
            raise error  # type: ignore[misc]
        return datasets.load_dataset(path, hf.config, split=hf.split, revision=hf.revision,
                                     cache_dir=str(cache_root() / ".hf_cache"))
    except Exception as e:  # network, auth, missing revision: one line naming the source
        raise MedhelmError(f"{hf.scenario}: cannot download {hf.source}: {type(e).__name__}: "
                           f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}") from None


def load_hf_split(path: Path, split: str):
    """Read one split's parquet file through `datasets` (as `load_dataset` returns hub rows)."""
    datasets = _datasets()
    return datasets.load_dataset("parquet", data_files={split: str(path)}, split=split,
                                 cache_dir=str(cache_root() / ".hf_cache"))


def _datasets():
    try:
        import datasets
    except ImportError:  # pragma: no cover - a declared dependency
        raise MedhelmError("the Hugging Face scenarios need the package 'datasets'") from None
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    datasets.config.HF_UPDATE_DOWNLOAD_COUNTS = False  # else every parquet load pings the hub's S3
    return datasets


# ----------------------------------------------------------------------------- GitHub directory listings
@dataclass(frozen=True)
class GitHubDir:
    """A GitHub directory HELM lists through the contents API and downloads file by file."""

    scenario: str
    dirname: str
    api_url: str
    raw_base: str
    headers: tuple[tuple[str, str], ...] = ()


def github_listing(gd: GitHubDir) -> tuple[list[str], Path | None]:
    """(entry names in listing order, the file the listing was read from).

    Mirror: `<dirname>.tree.json` (the git tree of the commit, in tree order) when present, else
    the directory's names in git's byte order; cut at GitHub's 1,000 entries. Online: the contents
    API's answer, saved as `<dirname>.listing.json` on first use and reused afterwards."""
    mirror = mirror_root()
    if mirror is not None:
        base = mirror / gd.scenario
        tree = base / f"{gd.dirname}.tree.json"
        if tree.is_file():
            names = [e["name"] for e in json.loads(tree.read_text(encoding="utf-8"))["entries"]]
            return names[:GITHUB_LISTING_LIMIT], tree
        folder = base / gd.dirname
        if not folder.is_dir():
            raise _missing(gd.scenario, folder, gd.api_url)
        names = sorted((p.name for p in folder.iterdir()), key=lambda n: n.encode("utf-8"))
        return names[:GITHUB_LISTING_LIMIT], None
    path = cache_root() / gd.scenario / f"{gd.dirname}.listing.json"
    if not path.is_file():
        _may_download(gd.scenario, gd.api_url)
        data = http_get(gd.api_url, dict(gd.headers))
        try:
            entries = json.loads(data)
            if not isinstance(entries, list):
                raise ValueError("not a JSON list")
        except ValueError as e:
            raise MedhelmError(f"{gd.scenario}: unexpected answer from {gd.api_url}: {e}") from None
        _write_cached(path, data, gd.scenario, path.name, {"url": gd.api_url})
    return [e["name"] for e in json.loads(path.read_text(encoding="utf-8"))], path


def github_file(gd: GitHubDir, name: str) -> Path:
    return fetch(UpstreamFile(gd.scenario, f"{gd.dirname}/{name}", gd.raw_base + name))


def requests_text(data: bytes) -> str:
    """`requests.get(url).text` for GitHub's raw host (charset utf-8), written and read back as
    HELM's mtsamples scenarios do: replacement characters for bad bytes, universal newlines."""
    return universal_newlines(data.decode("utf-8", errors="replace"))


def universal_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


# ----------------------------------------------------------------------------- download + provenance
def http_get(url: str, headers: dict[str, str] | None = None, attempts: int = 3) -> bytes:
    """GET with a few retries; any failure is one MedhelmError naming the URL."""
    req = urllib.request.Request(url, headers={"User-Agent": "medhelm-build", **(headers or {})})
    last: Exception | None = None
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                return resp.read()
        except urllib.error.HTTPError as e:
            last = e
            if e.code < 500 and e.code != 429:
                break
        except (urllib.error.URLError, OSError) as e:
            last = e
            if _no_route(e):
                break  # no name resolution or nothing listening: retrying only adds seconds
        time.sleep(2 ** attempt)
    raise MedhelmError(f"cannot download {url}: {last}")


def _no_route(error: BaseException) -> bool:
    reason = getattr(error, "reason", error)
    return isinstance(reason, (socket.gaierror, ConnectionRefusedError))


def _write_cached(path: Path, data: bytes, scenario: str, name: str, info: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    _record(scenario, name, data, info)


def _record(scenario: str, name: str, data: bytes, info: dict[str, Any]) -> None:
    """Append what was downloaded to `<cache>/<scenario>/SOURCES.json`."""
    path = cache_root() / scenario / SOURCES_FILE
    with _locked(path):
        current = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        current[name] = {**info, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
                         "downloaded_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
        path.write_text(json.dumps(current, indent=1, sort_keys=True), encoding="utf-8")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    import filelock

    path.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(path) + ".lock"):
        yield


def recorded_sources(scenario: str) -> dict[str, Any]:
    """What the online cache recorded for a scenario (empty in a mirror or before any download)."""
    path = cache_root() / scenario / SOURCES_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
