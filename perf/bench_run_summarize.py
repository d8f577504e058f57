"""Wall time of medhelm-run + medhelm-summarize on the synthetic oracle inputs (6 runs × 50 instances
per suite), beside HELM 0.5.16's figures measured on this hardware (from the issue: helm-run ≈ 35 s,
helm-summarize 15–23 s, 12–18 s of each being start-up).

    .venv/bin/python perf/bench_run_summarize.py [--shared ../shared]

Each command runs as a fresh process (start-up included), as a user would run it.
"""
from __future__ import annotations

import argparse
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HELM = {"helm-run (one suite, 6 runs)": 35.0, "helm-summarize (one suite)": 19.0}


def main() -> None:
    here = Path(__file__).resolve().parents[1]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shared", default=str(here.parent / "shared"))
    args = p.parse_args()
    shared = Path(args.shared)
    bindir = Path(sys.executable).parent
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        shutil.copytree(shared / "oracle" / "synthetic" / "inputs", root / "work")
        for f in (root / "work").rglob("*"):
            f.chmod(f.stat().st_mode | stat.S_IWUSR)
        port_file = root / "port"
        mock = subprocess.Popen([sys.executable, str(shared / "tools" / "mock_openai_server.py"), "--port", "0",
                                 "--port-file", str(port_file), "--max-seconds", "900"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while not (port_file.exists() and port_file.read_text().strip()):
                time.sleep(0.05)
            dep = root / "work" / "prod_env" / "model_deployments.yaml"
            dep.write_text(re.sub(r"127\.0\.0\.1:\d+", f"127.0.0.1:{port_file.read_text().strip()}", dep.read_text()))
            env_cmd = {"cwd": root, "env": {"DAGSTER_HOME": str(root / "dh"), "PATH": str(bindir)}}

            def timed(label: str, cmd: list[str]) -> float:
                start = time.perf_counter()
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **env_cmd)
                seconds = time.perf_counter() - start
                print(f"{label:<52} {seconds:7.1f} s", flush=True)
                return seconds

            run = [str(bindir / "medhelm-run"), "--max-eval-instances", "50", "--num-threads", "4",
                   "--output-path", "out", "--local-path", "work/prod_env"]
            first = timed("medhelm-run oracle-private (6 runs, 600 calls)",
                          run + ["--conf-paths", "work/conf/private.conf", "--suite", "oracle-private"])
            again = timed("medhelm-run oracle-private again (0 calls)",
                          run + ["--conf-paths", "work/conf/private.conf", "--suite", "oracle-private"])
            summ = timed("medhelm-summarize oracle-private",
                         [str(bindir / "medhelm-summarize"), "--suite", "oracle-private", "--output-path", "out",
                          "--schema-path", str(shared / "helm" / "schema_medhelm.yaml")])
            start_up = timed("start-up only (medhelm-run --help + dagster import)",
                             [str(bindir / "python"), "-c", "import medhelm_dagster.definitions"])
        finally:
            mock.terminate()
    print()
    print(f"ratio helm-run / medhelm-run (first run):      {HELM['helm-run (one suite, 6 runs)'] / first:5.2f}x")
    print(f"ratio helm-run / medhelm-run (rerun, cached):  {HELM['helm-run (one suite, 6 runs)'] / again:5.2f}x")
    print(f"ratio helm-summarize / medhelm-summarize:      {HELM['helm-summarize (one suite)'] / summ:5.2f}x"
          " (HELM 15–23 s; midpoint used)")
    print(f"(our start-up, importing Dagster and the definitions: {start_up:.1f} s)")


if __name__ == "__main__":
    main()
