"""The demo model server takes no fixed port and stops when asked, and only when asked.

- In the foreground it listens on a free port unless `--port N` says otherwise, prints its URL and can
  write its port to `--port-file`; a busy `--port N` is one line.
- `start DIR` (the README's and scripts/example.sh's way) returns once it answers, prints its URL and
  writes DIR as the example's prod_env pointed at it; `status DIR` prints the URL; `stop DIR` stops it
  and nothing else: a pid file naming another process (a reused pid, another user's server) is left.
- It stops on SIGTERM even when started by a process that ignores SIGTERM (a disposition children
  inherit): otherwise it outlives the script that started it and holds its port.
All with the README's old ports held by another socket."""
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from medhelm_core import demo_server
from tests.ports import readme_ports_taken  # noqa: F401  (a fixture)

pytestmark = pytest.mark.usefixtures("readme_ports_taken")
ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "medhelm_core.demo_server"]


def _stats(url: str) -> dict:
    import json

    with urllib.request.urlopen(url.removesuffix("/v1") + "/stats", timeout=5) as r:
        return json.loads(r.read())


def test_the_demo_server_stops_on_sigterm_even_if_its_parent_ignored_it(tmp_path):
    proc = subprocess.Popen(CLI + ["--port-file", str(tmp_path / "port")], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN))
    try:
        banner = proc.stdout.readline()
        m = re.fullmatch(r"demo model server on (http://127\.0\.0\.1:(\d+)/v1)\n", banner)
        assert m and int(m.group(2)) not in (0, 8765), banner
        assert (tmp_path / "port").read_text().strip() == m.group(2)
        assert _stats(m.group(1)) == {"total_requests": 0}
        proc.send_signal(signal.SIGTERM)
        deadline = time.time() + 10
        while proc.poll() is None and time.time() < deadline:
            time.sleep(0.1)
        assert proc.returncode == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_busy_port_is_one_line():
    r = subprocess.run(CLI + ["--port", "8765"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip() == ("medhelm-demo-server: cannot listen on 127.0.0.1:8765: Address already in use "
                                "(--port 0 picks a free port)")


def test_start_writes_the_examples_prod_env_for_its_port_and_stop_stops_only_it(tmp_path):
    env_dir = tmp_path / "demo env"
    r = subprocess.run(CLI + ["start", str(env_dir)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    url = r.stdout.strip()
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", url) and url != "http://127.0.0.1:8765/v1"
        assert f"--local-path {env_dir}" in r.stderr
        assert _stats(url) == {"total_requests": 0}
        # the example's prod_env, every deployment on this server, the rest as shipped
        template = ROOT / "examples" / "prod_env"
        ours = yaml.safe_load((env_dir / "model_deployments.yaml").read_text())["model_deployments"]
        shipped = yaml.safe_load((template / "model_deployments.yaml").read_text())["model_deployments"]
        assert [d["client_spec"]["args"]["base_url"] for d in ours] == [url] * len(shipped)
        for d in shipped:
            d["client_spec"]["args"]["base_url"] = url
        assert ours == shipped
        for name in ("credentials.conf", "model_metadata.yaml"):
            assert (env_dir / name).read_text() == (template / name).read_text()
        # started again: the same server; status: its URL
        again = subprocess.run(CLI + ["start", str(env_dir)], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert again.returncode == 0 and again.stdout.strip() == url and "already running" in again.stderr
        status = subprocess.run(CLI + ["status", str(env_dir)], capture_output=True, text=True, timeout=30)
        assert status.returncode == 0 and status.stdout.strip() == url
        # a pid file naming another process (a reused pid): stop leaves that process alone
        pid_file = env_dir / demo_server.PID_FILE
        server_pid = pid_file.read_text()
        other = subprocess.Popen(["sleep", "60"])
        try:
            pid_file.write_text(f"{other.pid}\n")
            r = subprocess.run(CLI + ["stop", str(env_dir)], capture_output=True, text=True, timeout=30)
            assert r.returncode == 0 and "none running" in r.stderr
            assert other.poll() is None and _stats(url) == {"total_requests": 0}
        finally:
            other.kill()
            other.wait()
        pid_file.write_text(server_pid)
        r = subprocess.run(CLI + ["stop", str(env_dir)], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 and r.stderr == ""
        with pytest.raises(OSError):
            _stats(url)
        assert not pid_file.exists()
        status = subprocess.run(CLI + ["status", str(env_dir)], capture_output=True, text=True, timeout=30)
        assert status.returncode == 1 and status.stdout == ""
    finally:
        subprocess.run(CLI + ["stop", str(env_dir)], capture_output=True, timeout=30)
