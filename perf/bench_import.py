"""Import throughput through gs:// against a sequential download of the same objects, side by side.

Starts gcp-storage-emulator on loopback (threaded, as in the tests), uploads a HELM tree (default:
the public-n50 golden suite; `--scale M,K` writes a bigger one with synth_release.py), then for
each --latency-ms (a loopback proxy that delays every request, standing in for the round trip to
storage.googleapis.com; 0 = straight to the emulator):

  sequential download   one gcsfs `cat_file` after another of every object the import reads
                        (what a plain script or `gcloud storage cp` of these files does, minus parsing)
  medhelm-import        list + concurrent fetch (--jobs) + parse + DuckDB insert, fresh database
  re-import             the same again: nothing changed, nothing fetched

    .venv/bin/python perf/bench_import.py [--latency-ms 0,50] [--jobs 16] [--scale 4,200] [--no-completions]
"""
from __future__ import annotations

import argparse
import http.client
import http.server
import os
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = Path(os.environ.get("MEDHELM_SHARED", ROOT.parent / "shared"))
PUBLIC = SHARED / "oracle" / "public" / "benchmark_output"


class LatencyProxy:
    """Forwards every request to the emulator after sleeping `latency_s` (per request, concurrently)."""

    def __init__(self, upstream_port: int, latency_s: float):
        up, lat = upstream_port, latency_s

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                time.sleep(lat)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) or None
                conn = http.client.HTTPConnection("127.0.0.1", up, timeout=120)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _forward

            def log_message(self, *args) -> None:
                pass

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            request_queue_size = 256

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency-ms", default="0,50")
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--scale", default=None, help="models,instances: a synth_release.py suite instead of public-n50")
    ap.add_argument("--no-completions", action="store_true", help="leave scenario_state.json out")
    a = ap.parse_args()

    from tests.gcs_emulator import Emulator

    tmp = Path(tempfile.mkdtemp(prefix="medhelm-bench-import-"))
    emu = Emulator()
    try:
        if a.scale:
            m, k = a.scale.split(",")
            subprocess.run([sys.executable, str(SHARED / "tools" / "synth_release.py"), str(PUBLIC / "runs" / "public-n50"),
                            str(tmp / "bo"), "-m", m, "-k", k, "--jobs", "2"], check=True, capture_output=True)
            tree, suite = tmp / "bo", f"synth-{m}x{k}"
        else:
            tree, suite = PUBLIC, "public-n50"
        keep = (lambda rel: rel.split("/")[-1] in ("run_spec.json", "stats.json", "per_instance_stats.json",
                                                   "scenario_state.json", "scenario.json", "summary.json",
                                                   "schema.json", "groups.json"))
        t = time.time()
        n = emu.upload_tree(tree, "bo", select=keep)
        print(f"uploaded {n} objects of {tree} in {time.time() - t:.1f}s; load average {os.getloadavg()[0]:.1f} "
              f"on {os.cpu_count()} cores", file=sys.stderr)

        from medhelm_core.published.importer import Importer, list_target, wanted_kinds
        from medhelm_core.published.source import open_source
        from medhelm_core.store import Store

        rows = []
        for lat in [float(x) for x in a.latency_ms.split(",")]:
            proxy = LatencyProxy(emu.port, lat / 1000) if lat > 0 else None
            endpoint = f"http://127.0.0.1:{proxy.port}" if proxy else emu.endpoint
            os.environ["STORAGE_EMULATOR_HOST"] = endpoint
            try:
                source = open_source(emu.uri("bo"))
                listing = list_target(source, None, suite, wanted_kinds(True, not a.no_completions), source.fetch)
                objs = [p.obj for p in listing.wanted()]
                t = time.time()
                nbytes = sum(len(source.fetch(o)) for o in objs)
                seq = time.time() - t
                out = tmp / f"out-{int(lat)}"
                t = time.time()
                rep = Importer(Store.in_output_path(out), open_source(emu.uri("bo")), suite=suite,
                               with_completions=not a.no_completions, jobs=a.jobs).run()
                imp = time.time() - t
                t = time.time()
                again = Importer(Store.in_output_path(out), open_source(emu.uri("bo")), suite=suite,
                                 with_completions=not a.no_completions, jobs=a.jobs).run()
                re_imp = time.time() - t
                assert rep.fetched == len(objs) and again.fetched == 0
                rows.append((lat, len(objs), nbytes, seq, imp, re_imp))
            finally:
                if proxy:
                    proxy.close()
        print(f"\n{'latency':>8}{'objects':>9}{'MB':>8}{'sequential s':>14}{'import s':>10}{'ratio':>8}"
              f"{'seq MB/s':>10}{'import MB/s':>13}{'re-import s':>13}")
        for lat, n, nbytes, seq, imp, re_imp in rows:
            print(f"{lat:>6.0f}ms{n:>9}{nbytes / 1e6:>8.1f}{seq:>14.2f}{imp:>10.2f}{seq / imp:>7.1f}x"
                  f"{nbytes / 1e6 / seq:>10.1f}{nbytes / 1e6 / imp:>13.1f}{re_imp:>13.2f}")
        print(f"\n(import = list + fetch with {a.jobs} concurrent downloads + parse + insert into DuckDB; "
              f"ratio = sequential download time / import time)")
    finally:
        emu.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
