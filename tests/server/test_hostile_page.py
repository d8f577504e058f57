"""Hostile input for the page server and the export (issue 38), through the real commands of .venv/bin.

The page: a foreign `Host` (DNS rebinding), a foreign `Origin`, a cross-origin non-GET or cross-site
subresource request get 403, one plain-text line and none of the private-tier text that the same
request with an allowed `Host` gets; loopback names, the bound address and `--allowed-host` names are
answered; no answer carries `Access-Control-Allow-Origin`; in Chromium a cross-origin fetch fails and
a rebound name (`--host-resolver-rules`) reads nothing.

The export: every refused or failed export exits non-zero with one line on stderr and leaves the
target exactly as it was (and nothing beside it); a re-export replaces only what an export made.
"""
from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.browser import chromium

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".venv" / "bin"
ALLOWED = "medhelm.test"


# --------------------------------------------------------------------------- the page

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(connect: str, port: int, path: str, host: str | None = None, method: str = "GET",
            headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    """One request to `connect:port` with the given Host (None: no Host header at all)."""
    conn = http.client.HTTPConnection(connect, port, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        if host is not None:
            conn.putheader("Host", host)
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        conn.endheaders()
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode("utf-8", "replace")
    finally:
        conn.close()


@contextlib.contextmanager
def page_server(out: Path, *args: str, connect: str = "127.0.0.1"):
    """`medhelm-server --suite example` on a free port, as a user starts it; yields (port, process,
    the file its stderr goes to)."""
    import tempfile

    port = _free_port()
    log = Path(tempfile.mkstemp(prefix="medhelm-server-", suffix=".log")[1])
    with open(log, "w") as err:
        proc = subprocess.Popen([str(BIN / "medhelm-server"), "--suite", "example", "--output-path", str(out),
                                 "--port", str(port), *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                status, _, _ = request(connect, port, "/api/meta", f"localhost:{port}")
                assert status == 200
                break
            except OSError:
                if proc.poll() is not None:
                    raise AssertionError(f"medhelm-server exited {proc.returncode}: {log.read_text()}") from None
                assert time.monotonic() < deadline, "medhelm-server did not start"
                time.sleep(0.2)
        yield port, proc, log
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.unlink()


@pytest.fixture(scope="module")
def page(example):
    """A server with one --allowed-host, the path of a private-tier run, and that run's private text."""
    out, _ = example
    with page_server(out, "--allowed-host", ALLOWED) as (port, proc, log):
        status, _, body = request("127.0.0.1", port, "/api/runs", f"localhost:{port}")
        assert status == 200
        runs = json.loads(body)
        assert runs and all(r["tier"] != "public" for r in runs)   # the example is private-tier
        path = "/api/run?run=" + quote(runs[0]["run_name"], safe="")
        status, _, body = request("127.0.0.1", port, path, f"localhost:{port}")
        assert status == 200
        prompt = json.loads(body)["instances"][0]["prompt"]
        assert "Patient ID" in prompt   # private text, served to the local page
        yield port, path, prompt.splitlines()[0], (proc, log)


def assert_refused(status: int, headers: dict[str, str], body: str, secret: str) -> None:
    assert status == 403, (status, body[:300])
    assert headers["content-type"].startswith("text/plain")
    assert body.startswith("medhelm-server: refused: ") and len(body.strip().splitlines()) == 1, body
    assert secret not in body and "Patient ID" not in body
    assert not any(k.startswith("access-control-") for k in headers), headers


@pytest.mark.parametrize("host", ["attacker.example:{port}", "attacker.example", "ATTACKER.example.:{port}",
                                  "foo.localhost:{port}", "192.0.2.77:{port}", "localhost.attacker.example:{port}",
                                  "127.0.0.1.nip.io:{port}", "user@localhost:{port}", "localhost:{port}:1",
                                  "[::1", "::1", "", "x" * 5000])
@pytest.mark.parametrize("path", ["run", "/", "/static/app.js", "/api/meta", "/api/runs", "/nope"])
def test_a_foreign_host_gets_403_and_no_data(page, host, path):
    port, run_path, secret, _ = page
    path = run_path if path == "run" else path
    assert_refused(*request("127.0.0.1", port, path, host.format(port=port)), secret)


def test_no_host_or_two_hosts_are_refused(page):
    port, run_path, secret, _ = page
    assert_refused(*request("127.0.0.1", port, run_path, None), secret)
    # HTTP/1.0 without Host, by hand
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(f"GET {run_path} HTTP/1.0\r\n\r\n".encode())
        raw = b""
        while chunk := s.recv(65536):
            raw += chunk
    assert raw.split(b" ")[1] == b"403" and secret.encode() not in raw and b"Patient ID" not in raw
    assert_refused(*request("127.0.0.1", port, run_path, f"localhost:{port}", headers={"Host": "attacker.example"}),
                   secret)


@pytest.mark.parametrize("host", ["localhost:{port}", "LocalHost:{port}", "localhost", "127.0.0.1:{port}",
                                  "[::1]:{port}", "127.0.0.2:{port}", ALLOWED + ":{port}", ALLOWED.upper()])
def test_loopback_names_and_allowed_hosts_are_answered(page, host):
    port, run_path, secret, _ = page
    status, headers, body = request("127.0.0.1", port, run_path, host.format(port=port))
    assert status == 200 and secret in body
    assert headers["cross-origin-resource-policy"] == "same-origin"
    assert not any(k.startswith("access-control-") for k in headers), headers
    status, _, body = request("127.0.0.1", port, "/", host.format(port=port))
    assert status == 200 and "<html" in body.lower()


def test_foreign_origins_and_cross_site_requests_are_refused(page):
    port, run_path, secret, _ = page
    host = f"localhost:{port}"
    same = f"http://{host}"
    for headers in ({"Origin": "http://attacker.example"}, {"Origin": f"http://attacker.example:{port}"},
                    {"Origin": f"http://127.0.0.1:{port}"},            # another origin, though loopback
                    {"Origin": "http://localhost:1"}, {"Origin": "null"}, {"Origin": f"http://{host}.evil"},
                    {"Origin": same + "/path"}, {"Origin": ""},
                    {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"},
                    {"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "cors"}):
        assert_refused(*request("127.0.0.1", port, run_path, host, headers=headers), secret)
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS", "PROPFIND"):
        for headers in ({}, {"Origin": "http://attacker.example"},
                        {"Origin": "http://attacker.example", "Access-Control-Request-Method": "GET"}):
            assert_refused(*request("127.0.0.1", port, run_path, host, method, headers), secret)
    # this page itself: a same-origin GET and a top-level navigation from another site are answered;
    # a same-origin POST is refused as a method the page does not have
    for headers in ({"Origin": same}, {"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"},
                    {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}):
        status, _, body = request("127.0.0.1", port, run_path, host, headers=headers)
        assert status == 200 and secret in body, headers
    status, resp, body = request("127.0.0.1", port, run_path, host, "POST", {"Origin": same, "Content-Length": "0"})
    assert status == 405 and secret not in body and "access-control-allow-origin" not in resp


def test_refusals_are_logged_one_line_each_and_the_server_keeps_running(page):
    port, run_path, secret, (proc, log) = page
    assert request("127.0.0.1", port, run_path, "rebound.attacker.example")[0] == 403
    assert request("127.0.0.1", port, run_path, f"localhost:{port}")[0] == 200
    assert proc.poll() is None
    [line] = [x for x in log.read_text().splitlines() if "rebound.attacker.example" in x]
    assert line.startswith("medhelm-server: refused GET /api/run") and secret not in line


def _non_loopback_address() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))   # no packet is sent; this finds the address of the default route
            addr = s.getsockname()[0]
        except OSError:
            return None
    return None if addr.startswith("127.") or addr == "0.0.0.0" else addr


@pytest.mark.parametrize("bind", ["address", "hostname", "wildcard"])
def test_the_bound_address_is_answered_and_nothing_else(example, bind):
    """--host ADDRESS: Host ADDRESS is answered; --host NAME: Host NAME; --host 0.0.0.0: the address
    the request reached. A foreign Host is refused on each, and --allowed-host is rejected when it is
    no host name."""
    out, _ = example
    addr = _non_loopback_address()
    if bind == "hostname":
        name = socket.gethostname()
        try:
            connect = socket.getaddrinfo(name, None, socket.AF_INET)[0][4][0]
        except OSError:
            pytest.skip(f"the host name {name!r} does not resolve")
        host_arg, good = name, name
    else:
        if addr is None:
            pytest.skip("this machine has no non-loopback IPv4 address")
        connect, good = addr, addr
        host_arg = addr if bind == "address" else "0.0.0.0"
    with page_server(out, "--host", host_arg, "--redact", connect=connect) as (port, _, _):
        status, _, body = request(connect, port, "/api/runs", f"{good}:{port}")
        assert status == 200 and json.loads(body)
        status, headers, body = request(connect, port, "/api/runs", f"attacker.example:{port}")
        assert_refused(status, headers, body, "run_name")
        if bind != "wildcard" or addr is None:
            return
        # bound to 0.0.0.0, an address of this machine that the request did not reach is refused
        status, headers, body = request(connect, port, "/api/runs", f"192.0.2.254:{port}")
        assert_refused(status, headers, body, "run_name")


@pytest.mark.parametrize("bad", ["http://medhelm.test", "medhelm.test:8000", "*.example.com", "a b", ""])
def test_a_bad_allowed_host_is_one_line_and_nothing_is_served(example, bad):
    out, _ = example
    port = _free_port()
    r = subprocess.run([str(BIN / "medhelm-server"), "--suite", "example", "--output-path", str(out),
                        "--port", str(port), "--allowed-host", bad], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    [line] = r.stderr.strip().splitlines()
    assert line.startswith("medhelm-server: error: --allowed-host") and "host name" in line
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass


def test_in_chromium_cross_origin_fetches_and_rebound_names_read_nothing(page):
    """The page at http://localhost:PORT works; from it, a fetch of http://127.0.0.1:PORT (another
    origin) fails; a name rebound to 127.0.0.1 (as an attacker's DNS does) gets the refusal only."""
    port, run_path, secret, _ = page
    with chromium("--host-resolver-rules=MAP attacker.example 127.0.0.1",
                  "--disable-features=HttpsUpgrades,HttpsFirstBalancedModeAutoEnable") as driver:
        driver.set_script_timeout(30)
        fetch = """
            const done = arguments[arguments.length - 1];
            fetch(arguments[0]).then(r => r.text().then(t => done({status: r.status, text: t})))
                               .catch(e => done({error: String(e)}));"""
        driver.get(f"http://localhost:{port}/")
        same = driver.execute_async_script(fetch, run_path)
        assert same.get("status") == 200 and secret in same["text"]          # the control: same origin reads it
        cross = driver.execute_async_script(fetch, f"http://127.0.0.1:{port}{run_path}")
        assert "error" in cross and "TypeError" in cross["error"], cross     # another origin reads nothing
        cross = driver.execute_async_script(fetch, f"http://attacker.example:{port}{run_path}")
        assert "error" in cross, cross
        # from another site's page (no CSP of ours: the request reaches the server, with its Origin)
        driver.get("data:text/html,<p>another site</p>")
        cross = driver.execute_async_script(fetch, f"http://localhost:{port}{run_path}")
        assert "error" in cross and "TypeError" in cross["error"], cross

        driver.get(f"http://attacker.example:{port}/")
        assert secret not in driver.page_source and "refused" in driver.page_source
        rebound = driver.execute_async_script(fetch, run_path)   # same origin as the attacker's page
        assert rebound.get("status") == 403 and secret not in rebound["text"], rebound
        assert "Patient ID" not in rebound["text"]


# --------------------------------------------------------------------------- the export

def tree(path: Path) -> dict[str, tuple]:
    """Everything under `path`: relative name -> (kind, content digest, mode); {} if missing."""
    if not path.exists():
        return {}
    out = {}
    for p in sorted(path.rglob("*")):
        st = p.lstat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() and not p.is_symlink() else None
        out[p.relative_to(path).as_posix()] = ("link" if p.is_symlink() else "dir" if p.is_dir() else "file",
                                               digest, st.st_mode)
    return out


def export(out: Path, dest: Path, *args: str, command: str = "medhelm-export", suite: str = "example",
           **kw) -> subprocess.CompletedProcess:
    cmd = [str(BIN / "medhelm-server"), "export"] if command == "medhelm-server export" else [str(BIN / command)]
    return subprocess.run([*cmd, "--suite", suite, "--output-path", str(out), "--out", str(dest), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, **kw)


def assert_one_line_error(r: subprocess.CompletedProcess, *words: str) -> str:
    assert r.returncode != 0, r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("medhelm-export: error: "), r.stderr[-2000:]
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def exported(example, tmp_path_factory):
    """A good export (with runs), made once: -> (output path, the export's folder)."""
    out, _ = example
    dest = tmp_path_factory.mktemp("exported") / "share"
    r = export(out, dest)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert (dest / "index.html").exists() and (dest / ".medhelm-export.json").exists()
    return out, dest


def copy_of(src: Path, dest: Path) -> Path:
    import shutil

    shutil.copytree(src, dest)
    return dest


@pytest.mark.parametrize("command", ["medhelm-export", "medhelm-server export"])
def test_a_mistyped_suite_leaves_a_good_export_as_it_was(exported, tmp_path, command):
    out, good = exported
    dest = copy_of(good, tmp_path / "share")
    before = tree(dest)
    r = export(out, dest, command=command, suite="exampel")
    assert_one_line_error(r, "exampel")
    assert tree(dest) == before
    assert sorted(os.listdir(tmp_path)) == ["share"]   # nothing left beside it


def test_a_failed_export_into_a_new_folder_creates_nothing(example, tmp_path):
    out, _ = example
    r = export(out, tmp_path / "new" / "deeper" / "share", suite="exampel")
    assert_one_line_error(r, "exampel")
    assert os.listdir(tmp_path) == []


def test_a_folder_with_the_users_files_is_refused_without_force(exported, tmp_path):
    out, good = exported
    # a folder of the user's own files, with an index.html and a data/ as the export's
    mine = tmp_path / "mine"
    (mine / "data").mkdir(parents=True)
    (mine / "data" / "notes.csv").write_text("a,b\n1,2\n")
    (mine / "index.html").write_text("<p>my page</p>")
    before = tree(mine)
    line = assert_one_line_error(export(out, mine), "--force", "data/")
    assert tree(mine) == before
    # an earlier export with a file of the user's added into its data/
    dest = copy_of(good, tmp_path / "share")
    (dest / "data" / "mine.txt").write_text("keep me")
    (dest / "extra").mkdir()
    before = tree(dest)
    line = assert_one_line_error(export(out, dest), "--force")
    assert "data/mine.txt" in line or "extra/" in line
    assert tree(dest) == before
    assert sorted(os.listdir(tmp_path)) == ["mine", "share"]
    # --force replaces the folder: the export's files only
    r = export(out, dest, "--force", "--no-runs")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    after = tree(dest)
    assert "data/mine.txt" not in after and "extra" not in after and "index.html" in after
    made = json.loads((dest / ".medhelm-export.json").read_text())["files"]
    assert sorted(made) == sorted(k for k, v in after.items() if v[0] == "file" and k != ".medhelm-export.json")
    assert sorted(os.listdir(tmp_path)) == ["mine", "share"]


def test_a_re_export_replaces_what_the_export_made(exported, tmp_path):
    out, good = exported
    dest = copy_of(good, tmp_path / "share")
    full = tree(dest)
    r = export(out, dest, "--no-runs", command="medhelm-server export")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    fewer = tree(dest)
    assert "index.html" in fewer and len([k for k in fewer if k.startswith("data/")]) < \
        len([k for k in full if k.startswith("data/")])   # the run files of the first export are gone
    assert export(out, dest).returncode == 0 and set(tree(dest)) == set(full)
    # an empty folder is fine too
    (tmp_path / "empty").mkdir()
    assert export(out, tmp_path / "empty", "--no-runs").returncode == 0
    assert sorted(os.listdir(tmp_path)) == ["empty", "share"]


def test_a_file_as_out_is_refused(example, tmp_path):
    out, _ = example
    target = tmp_path / "share.html"
    target.write_text("mine")
    assert_one_line_error(export(out, target), "share.html", "not a folder")
    assert target.read_text() == "mine" and sorted(os.listdir(tmp_path)) == ["share.html"]


def test_a_write_failing_half_way_leaves_the_target_as_it_was(exported, tmp_path):
    """A disk that fills up while the copy is written (a file-size limit, with SIGXFSZ ignored so the
    write fails with EFBIG): one line, the earlier export untouched, no staging folder left."""
    import resource

    out, good = exported
    dest = copy_of(good, tmp_path / "share")
    before = tree(dest)

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    r = export(out, dest, preexec_fn=limit)
    assert_one_line_error(r, "File too large")
    assert tree(dest) == before
    assert sorted(os.listdir(tmp_path)) == ["share"]


def test_force_never_replaces_a_folder_that_is_plainly_not_an_export(exported, tmp_path):
    """--force through a link to, or naming, a git checkout or a folder with a DuckDB file is refused,
    and the folder stays as it was."""
    out, _ = exported
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    (checkout / "notes.txt").write_text("mine")
    (tmp_path / "link").symlink_to(checkout)
    store = tmp_path / "store"
    store.mkdir()
    (store / "medhelm.duckdb").write_bytes(b"not really")
    for dest, why in [(tmp_path / "link", "a git checkout"), (checkout, "a git checkout"), (store, "DuckDB")]:
        before = tree(dest)
        assert_one_line_error(export(out, dest, "--force"), "--force would delete", why)
        assert tree(dest) == before
    assert sorted(os.listdir(tmp_path)) == ["checkout", "link", "store"]
