"""A local GCS for tests: `gcp-storage-emulator` on loopback, and helpers to upload a HELM tree.

The importer is pointed at it only through `STORAGE_EMULATOR_HOST` (gcsfs's own switch), so
it runs exactly the code that reads gs://crfm-helm-public.
"""
from __future__ import annotations

import gzip
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Optional

os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"   # before gcsfs is imported anywhere

BUCKET = "medhelm-test"

# gcp-storage-emulator serves with a single-threaded http.server.HTTPServer (listen backlog 5), which
# drops the connections of a concurrent client (as the importer is) until they time out; real GCS
# serves requests concurrently, so run the emulator with a threading server.
_LAUNCHER = """
import http.server, socketserver, sys
class _ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 256
http.server.HTTPServer = _ThreadingServer
from gcp_storage_emulator.__main__ import main
main(sys.argv[1:])
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Emulator:
    def __init__(self, bucket: str = BUCKET):
        self.bucket = bucket
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, "start", "--host", "127.0.0.1", "--port", str(self.port),
             "--default-bucket", bucket, "--in-memory", "-q"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.time() > deadline:
                    self.close()
                    raise RuntimeError("gcp-storage-emulator did not start")
                time.sleep(0.1)
        from gcsfs.core import GCSFileSystem   # never the zonal/HNS "extended" class

        self.fs = GCSFileSystem(endpoint_url=self.endpoint, token="anon", project="test")

    def env(self) -> dict[str, str]:
        return {"STORAGE_EMULATOR_HOST": self.endpoint, "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}

    def uri(self, prefix: str) -> str:
        return f"gs://{self.bucket}/{prefix}"

    def upload_tree(self, local: Path, prefix: str, gzip_at_rest: bool = False,
                    select: Optional[Callable[[str], bool]] = None) -> int:
        """Upload every file under `local` to gs://bucket/prefix/…; with `gzip_at_rest`, store each object
        gzip-compressed with Content-Encoding: gzip, as HELM's public bucket does since 2026-04."""
        files = {}
        for p in sorted(Path(local).rglob("*")):
            if not p.is_file():
                continue
            rel = p.relative_to(local).as_posix()
            if select is not None and not select(rel):
                continue
            data = p.read_bytes()
            files[f"{self.bucket}/{prefix}/{rel}"] = gzip.compress(data, mtime=0) if gzip_at_rest else data
        for path, data in files.items():   # one at a time: the emulator's storage is not made for concurrent writes
            if gzip_at_rest:
                self.fs.pipe_file(path, data, fixed_key_metadata={"content_encoding": "gzip"})
            else:
                self.fs.pipe_file(path, data)
        self.fs.invalidate_cache()
        return len(files)

    def put(self, key: str, data: bytes, gzip_at_rest: bool = False) -> None:
        if gzip_at_rest:
            self.fs.pipe_file(f"{self.bucket}/{key}", gzip.compress(data, mtime=0),
                              fixed_key_metadata={"content_encoding": "gzip"})
        else:
            self.fs.pipe_file(f"{self.bucket}/{key}", data)
        self.fs.invalidate_cache()

    def delete(self, key: str) -> None:
        self.fs.rm_file(f"{self.bucket}/{key}")
        self.fs.invalidate_cache()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
