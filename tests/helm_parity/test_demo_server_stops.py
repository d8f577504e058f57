"""scripts/example.sh stops its demo model server with `kill` (SIGTERM). The server must stop even when
it was started by a process that ignores SIGTERM (a disposition children inherit): otherwise it
outlives the script and holds port 8765 for every later test and run."""
import signal
import socket
import subprocess
import sys
import time


def test_the_demo_server_stops_on_sigterm_even_if_its_parent_ignored_it():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "medhelm_core.demo_server", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN))
    try:
        assert "demo model server on" in proc.stdout.readline()
        proc.send_signal(signal.SIGTERM)
        deadline = time.time() + 10
        while proc.poll() is None and time.time() < deadline:
            time.sleep(0.1)
        assert proc.returncode == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
