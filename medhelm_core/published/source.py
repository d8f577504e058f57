"""Where published HELM results are read from: `gs://…` (gcsfs), a local folder, or any fsspec URL.

One code path for every backend: list objects with their version (GCS generation, else etag,
else modification time) and size, and fetch an object's bytes. Objects stored gzip-compressed
at rest (HELM's public bucket since 2026-04, Content-Encoding: gzip) come back either as the
stored gzip bytes or already decompressed, depending on the HTTP client and the server; the
readers look at the gzip magic number, never at headers or file names.

gcsfs is imported lazily, after `GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false` is set, and we use its
core `GCSFileSystem` class explicitly (its zonal/hierarchical-namespace "extended" class issues
extra calls that neither anonymous access nor the emulator answer).  The GCS endpoint is gcsfs's own choice (`--endpoint-url`,
else `$STORAGE_EMULATOR_HOST`, else storage.googleapis.com); `preflight()` checks that it can be
reached at all before gcsfs starts its minute of retries, so an offline import fails fast.
"""
from __future__ import annotations

import os
import re
import socket
import threading
import urllib.parse
from dataclasses import dataclass
from typing import Any, Optional

from medhelm_core.errors import MedhelmError
from medhelm_core.selections import DEFAULT_GCS_SOURCE  # noqa: F401  (re-exported)

GZIP_MAGIC = b"\x1f\x8b"


class SourceUnreachable(MedhelmError):
    """The source's server cannot be reached (no network, DNS failure, refused connection)."""


@dataclass(frozen=True)
class ObjectInfo:
    """One listed object: `key` is its path relative to the source root ('releases/R/summary.json')."""

    key: str
    size: int
    version: str           # GCS generation, else etag / md5, else mtime: what "unchanged" means


def _version_of(info: dict[str, Any]) -> str:
    for k in ("generation", "etag", "ETag", "md5Hash", "md5"):
        v = info.get(k)
        if v not in (None, ""):
            return f"{k}:{v}"
    for k in ("mtime", "LastModified", "updated", "last_modified", "created"):
        v = info.get(k)
        if v not in (None, ""):
            return f"{k}:{v!r}" if isinstance(v, float) else f"{k}:{v}"
    return "size-only"


class Source:
    """A `benchmark_output` folder behind an fsspec filesystem."""

    def __init__(self, uri: str, token: Optional[str] = None, endpoint_url: Optional[str] = None,
                 storage_options: Optional[dict[str, Any]] = None):
        self.uri = uri.rstrip("/") if "://" in uri else os.path.abspath(os.path.expanduser(uri))
        self.protocol = urllib.parse.urlparse(self.uri).scheme if "://" in self.uri else "file"
        if self.protocol == "gcs":
            self.protocol = "gs"
        options = dict(storage_options or {})
        if self.protocol == "gs":
            os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
            try:
                # the plain GCS filesystem, whatever the import order: `gcsfs.GCSFileSystem` becomes the
                # zonal/HNS "extended" class when gcsfs was first imported without the variable above,
                # and that class makes calls neither anonymous access nor the emulator answer (it hangs)
                from gcsfs.core import GCSFileSystem
            except ImportError as e:  # pragma: no cover - gcsfs is a dependency
                raise MedhelmError("reading gs:// needs the package 'gcsfs'") from e
            # anonymous unless credentials are given (a token kind, or a service-account JSON path)
            options.setdefault("token", token or "anon")
            if endpoint_url:
                options["endpoint_url"] = endpoint_url
            self.fs = GCSFileSystem(**options)
            self.root = self.uri.split("://", 1)[1]
        else:
            import fsspec

            if token:
                options.setdefault("token", token)
            if self.protocol == "file":
                self.fs = fsspec.filesystem("file")
                self.root = self.uri
            else:
                self.fs, self.root = fsspec.core.url_to_fs(self.uri, **options)
        self.root = self.root.rstrip("/")
        self._preflight_done = False
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ reachability
    @property
    def is_local(self) -> bool:
        return self.protocol == "file"

    def endpoint(self) -> Optional[tuple[str, int]]:
        """(host, port) of the server behind the source, for network sources."""
        if self.protocol == "gs":
            loc = self.fs._location  # gcsfs's resolved endpoint (emulator or storage.googleapis.com)
        elif self.protocol in ("http", "https", "s3", "s3a", "az", "abfs"):
            loc = self.uri if self.protocol in ("http", "https") else None
            if loc is None:
                return None
        else:
            return None
        u = urllib.parse.urlparse(loc)
        return u.hostname or "", u.port or (443 if u.scheme == "https" else 80)

    def preflight(self, timeout_s: float = 5.0) -> None:
        """Fail within seconds when a network source's server cannot be reached."""
        if self._preflight_done:
            return
        ep = self.endpoint()
        if ep is not None:
            host, port = ep
            err: list[BaseException] = []

            def probe() -> None:
                try:
                    socket.create_connection((host, port), timeout=timeout_s).close()
                except BaseException as e:  # noqa: BLE001
                    err.append(e)

            t = threading.Thread(target=probe, daemon=True)
            t.start()
            t.join(timeout_s + 1)
            if t.is_alive():
                err.append(TimeoutError(f"no answer within {timeout_s:.0f}s"))
            if err:
                reason = err[0].strerror if isinstance(err[0], OSError) and err[0].strerror else str(err[0])
                raise SourceUnreachable(f"cannot reach {host}:{port} for {self.uri} ({reason})")
        elif self.is_local and not os.path.isdir(self.root):
            raise MedhelmError(f"{self.uri} is not a folder (expected a HELM benchmark_output folder)")
        self._preflight_done = True

    # ------------------------------------------------------------------ listing and reading
    def full_path(self, key: str) -> str:
        return f"{self.root}/{key}" if self.root else key

    def display(self, key: str) -> str:
        """The object's address as the user would write it."""
        return f"{self.uri}/{key}"

    def list(self, prefix: str) -> list[ObjectInfo]:
        """Every object under `prefix` (relative, e.g. 'runs/v2.0.0/'), recursively, sorted by key."""
        base = self.full_path(prefix.rstrip("/"))
        try:
            found = self.fs.find(base, detail=True)
        except FileNotFoundError:
            return []
        strip = self.fs._strip_protocol(self.root) if self.root else ""
        out = []
        for path, info in found.items():
            if info.get("type") == "directory":
                continue
            p = self.fs._strip_protocol(path)
            key = p[len(strip):].lstrip("/") if strip and p.startswith(strip) else p
            out.append(ObjectInfo(key, int(info.get("size") or 0), _version_of(info)))
        out.sort(key=lambda o: o.key)
        return out

    def releases(self) -> list[str]:
        """The release names under `releases/` (its sub-folders)."""
        self.preflight()
        try:
            entries = self.fs.ls(self.full_path("releases"), detail=True)
        except FileNotFoundError:
            return []
        return sorted({e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries if e.get("type") == "directory"})

    def info(self, key: str) -> Optional[ObjectInfo]:
        try:
            info = self.fs.info(self.full_path(key))
        except FileNotFoundError:
            return None
        if info.get("type") == "directory":
            return None
        return ObjectInfo(key, int(info.get("size") or 0), _version_of(info))

    def local_path(self, key: str) -> Optional[str]:
        """The object's file on this machine when the source is a local folder (read in place)."""
        return self.full_path(key) if self.is_local else None

    def fetch(self, obj: ObjectInfo) -> bytes:
        """The object's bytes (as stored: possibly gzip), pinned to the listed GCS generation."""
        kwargs = {}
        if self.protocol == "gs" and obj.version.startswith("generation:"):
            kwargs["generation"] = obj.version.split(":", 1)[1]
        return self.fs.cat_file(self.full_path(obj.key), **kwargs)


def _version_key(name: str) -> tuple:
    """v2.10.0 > v2.9.1 > v2.0.0 > names that are not versions (ordered by name)."""
    m = re.fullmatch(r"v?(\d+(?:\.\d+)*)", name)
    return (1, tuple(int(x) for x in m.group(1).split(".")), name) if m else (0, (), name)


def newest_release(names: list[str]) -> Optional[str]:
    return max(names, key=_version_key) if names else None


def open_source(uri: str, token: Optional[str] = None, endpoint_url: Optional[str] = None,
                storage_options: Optional[dict[str, Any]] = None) -> Source:
    return Source(uri, token=token, endpoint_url=endpoint_url, storage_options=storage_options)


def is_gzip(head: bytes) -> bool:
    return head[:2] == GZIP_MAGIC


def decode_bytes(data: bytes) -> bytes:
    """Plain bytes of an object that may be stored gzip-compressed."""
    if is_gzip(data):
        import gzip

        return gzip.decompress(data)
    return data
