"""`dg launch --assets 'group:leaderboard'` (the docs' Dagster command, docs/how-to/dagster.md) beside `medhelm-summarize`
on the same suite: wall time of each, as a fresh process (start-up included), side by side, and
their ratio (issue 43 asks for the Dagster command within 1.5x of medhelm-summarize).

    .venv/bin/python perf/bench_leaderboard_group.py [--repeat 3] [--output-path DIR --suite S]

Without --output-path it builds the shipped example suite in a temporary folder first (the demo
model server on a free loopback port, `medhelm-run` on conf/example.conf, 10 instances), with a
DAGSTER_HOME of its own holding deploy/local/dagster.yaml. Both commands then summarize the same
suite the docs' way (the edition's packaged schema), alternately, `--repeat` times each; the
median of each is compared. Both write the same tables and files: each run rebuilds the leaderboard.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd[:3])} … failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    return seconds


def build_example(tmp: Path, env: dict[str, str], bindir: Path) -> tuple[Path, Path]:
    """The example suite in tmp/out; returns (output path, the demo server's prod_env)."""
    prod_env = tmp / "demo_prod_env"
    subprocess.run([str(bindir / "medhelm-demo-server"), "start", str(prod_env)], cwd=ROOT, env=env, check=True,
                   capture_output=True, text=True)
    try:
        seconds = timed([str(bindir / "medhelm-run"), "--conf-paths", "conf/example.conf", "--suite", "example",
                         "--max-eval-instances", "10", "--local-path", str(prod_env), "--output-path",
                         str(tmp / "out")], env)
    finally:
        subprocess.run([str(bindir / "medhelm-demo-server"), "stop", str(prod_env)], cwd=ROOT, env=env,
                       capture_output=True)
    print(f"(built the example suite with medhelm-run in {seconds:.1f} s)", flush=True)
    return tmp / "out", prod_env


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3, help="runs of each command (default 3)")
    p.add_argument("--output-path", help="an output path holding the suite (default: build the example)")
    p.add_argument("--local-path", default="examples/prod_env")
    p.add_argument("--suite", default="example")
    args = p.parse_args()
    bindir = Path(sys.executable).parent
    with tempfile.TemporaryDirectory(prefix="bench_lb_") as tmp_name:
        tmp = Path(tmp_name)
        home = tmp / "dagster_home"
        home.mkdir()
        shutil.copy(ROOT / "deploy" / "local" / "dagster.yaml", home / "dagster.yaml")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MEDHELM_", "DAGSTER_"))}
        env |= {"DAGSTER_HOME": str(home), "PATH": f"{bindir}{os.pathsep}{env.get('PATH', '')}"}
        if args.output_path:
            out, local = Path(args.output_path).absolute(), Path(args.local_path).absolute()
        else:
            out, local = build_example(tmp, env, bindir)
        env |= {"MEDHELM_OUTPUT_PATH": str(out), "MEDHELM_LOCAL_PATH": str(local)}
        config = json.dumps({"ops": {"summarize_target": {"config": {"suite": args.suite}}}})
        commands = {
            "dg launch --assets 'group:leaderboard'": [str(bindir / "dg"), "launch", "--assets", "group:leaderboard",
                                                       "--config-json", config],
            f"medhelm-summarize --suite {args.suite}": [str(bindir / "medhelm-summarize"), "--suite", args.suite,
                                                       "--output-path", str(out), "--local-path", str(local)],
        }
        times: dict[str, list[float]] = {label: [] for label in commands}
        for _ in range(args.repeat):
            for label, cmd in commands.items():
                times[label].append(timed(cmd, env))
    print(f"{'command':<44} {'median':>8}   runs (s)")
    for label, runs in times.items():
        print(f"{label:<44} {statistics.median(runs):7.1f}s   " + " ".join(f"{t:.1f}" for t in runs))
    dg_s, summarize_s = (statistics.median(runs) for runs in times.values())
    print(f"ratio dg launch group:leaderboard / medhelm-summarize: {dg_s / summarize_s:.2f}x (issue 43: at most 1.5x)")


if __name__ == "__main__":
    main()
