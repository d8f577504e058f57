"""What a hostile or careless user finds (issue 38), through the real commands (.venv/bin/medhelm-*
as subprocesses): every bad input gives a non-zero exit, exactly one line on stderr that names what
is wrong, and leaves the working folder (the output path, its Dagster home, the inputs) untouched.

The next hostile case is one more row of CASES: the command's argv, a setup function that lays out
what the case needs (beside the shared inputs), the exit code and a regex the one stderr line must
match. The concurrent and import cases, which must succeed, follow the table.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import pytest

from tests.oracle import SYNTHETIC

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SOURCE = SYNTHETIC / "benchmark_output"
pytestmark = pytest.mark.skipif(not (SOURCE / "releases" / "oracle").exists() or not (BIN / "medhelm-run").exists(),
                                reason="golden files or the installed commands not available")

GOOD = ("shc_ptbm_med:data_path=work/private/shc_ptbm_med.csv,model=mockai/mock-gpt-a,"
        "model_deployment=mockai/mock-gpt-a")


def entry(data_path: str) -> str:
    return GOOD.replace("work/private/shc_ptbm_med.csv", data_path)


def run_args(*extra: str, desc: str = GOOD) -> list[str]:
    """medhelm-run on one private-tier entry; later flags win over these."""
    return ["medhelm-run", "-r", desc, "--suite", "s", "--max-eval-instances", "3", "--output-path", "out",
            "--local-path", "work/prod_env", *extra]


# -- setups: each lays out what its case needs under the working folder `w` -----------------------
def nothing(w: Path) -> None:
    pass


def write(rel: str, data: bytes) -> Callable[[Path], None]:
    def setup(w: Path) -> None:
        (w / rel).parent.mkdir(parents=True, exist_ok=True)
        (w / rel).write_bytes(data)
    return setup


def imported(w: Path) -> None:
    """out/: the oracle release imported (a good DuckDB file)."""
    shutil.copytree(_imported_once(), w / "out")


def truncated_db(w: Path) -> None:
    imported(w)
    db = w / "out" / "medhelm.duckdb"
    db.write_bytes(db.read_bytes()[:20000])
    (w / "out" / "medhelm.duckdb.lock").unlink(missing_ok=True)


def garbage_db(w: Path) -> None:
    (w / "out").mkdir()
    (w / "out" / "medhelm.duckdb").write_bytes(os.urandom(300_000))


def big_conf(w: Path) -> None:
    desc = GOOD + ",foo=" + "x" * 20_000_000
    (w / "big.conf").write_text(f'entries: [{{description: "{desc}", priority: 1}}]\n')


@dataclass
class Case:
    id: str
    argv: list[str]
    match: str                           # the one stderr line must match this (re.search)
    setup: Callable[[Path], None] = nothing
    code: Optional[int] = 2              # None: any non-zero exit
    env: dict = field(default_factory=dict)
    xfail: str = ""                      # a known gap, with whose it is to close


def _params(cases: list[Case]) -> list:
    return [pytest.param(c, id=c.id, marks=[pytest.mark.xfail(reason=c.xfail, strict=True)] if c.xfail else [])
            for c in cases]


CASES = [
    # options, checked before anything is written
    Case("max-eval-instances-0", run_args("--max-eval-instances", "0"), r"--max-eval-instances 0: .*at least 1"),
    Case("max-eval-instances-negative", run_args("--max-eval-instances", "-1"), r"--max-eval-instances -1: .*at least 1"),
    Case("max-eval-instances-negative-dry-run", run_args("--max-eval-instances", "-1", "--dry-run"),
         r"--max-eval-instances -1"),
    Case("num-threads-0", run_args("--num-threads", "0"), r"--num-threads 0: .*at least 1"),
    Case("num-train-trials-0", run_args("--num-train-trials", "0"), r"--num-train-trials 0: .*at least 1"),
    Case("priority-negative", run_args("--priority", "-1"), r"--priority -1: .*at least 0"),
    Case("budget-negative", run_args("--budget", "-1"), r"--budget -1(\.0)?: .*at least 0"),
    Case("suite-with-slash", run_args("--suite", "a/b"), r"--suite 'a/b': .*letters, digits"),
    Case("suite-dot-dot", run_args("--suite", ".."), r"--suite '\.\.': .*letters, digits"),
    Case("conf-paths-folder", ["medhelm-run", "--conf-paths", "work/conf", "--suite", "s", "--max-eval-instances",
                               "3", "--output-path", "out", "--local-path", "work/prod_env"],
         r"--conf-paths work/conf: is a folder"),
    Case("conf-paths-missing", ["medhelm-run", "--conf-paths", "nope.conf", "--suite", "s", "--max-eval-instances",
                                "3", "--output-path", "out", "--local-path", "work/prod_env"],
         r"--conf-paths nope\.conf: no such file"),
    Case("conf-paths-not-utf8", ["medhelm-run", "--conf-paths", "bin.conf", "--suite", "s", "--max-eval-instances",
                                 "3", "--output-path", "out", "--local-path", "work/prod_env"],
         r"bin\.conf: not UTF-8", setup=write("bin.conf", b"\xff\xfe\x00entries")),
    Case("conf-paths-device", ["medhelm-run", "--conf-paths", "/dev/zero", "--suite", "s", "--max-eval-instances",
                               "3", "--output-path", "out", "--local-path", "work/prod_env"],
         r"--conf-paths /dev/zero: is not a regular file"),
    Case("output-path-file", run_args("--output-path", "afile"), r"--output-path afile: is a file",
         setup=write("afile", b"mine\n")),
    Case("output-path-under-file", run_args("--output-path", "afile/sub"), r"--output-path afile/sub: .*afile is a file",
         setup=write("afile", b"mine\n")),
    Case("local-path-file", run_args("--local-path", "afile"), r"--local-path afile: is a file",
         setup=write("afile", b"mine\n")),
    Case("benchmark-path-missing", run_args("--benchmark-path", "nope"), r"--benchmark-path nope: no such folder"),
    # the DuckDB file
    Case("run-truncated-db", run_args(), r"out/medhelm\.duckdb: cannot open .*fresh --output-path", setup=truncated_db),
    Case("run-garbage-db", run_args(), r"out/medhelm\.duckdb: cannot open .*fresh --output-path", setup=garbage_db),
    Case("summarize-truncated-db", ["medhelm-summarize", "--suite", "oracle-private", "--output-path", "out"],
         r"out/medhelm\.duckdb: cannot open .*fresh --output-path", setup=truncated_db),
    Case("summarize-garbage-db", ["medhelm-summarize", "--suite", "oracle-private", "--output-path", "out"],
         r"out/medhelm\.duckdb: cannot open .*fresh --output-path", setup=garbage_db),
    Case("import-truncated-db", ["medhelm-import", "--source", str(SOURCE), "--release", "oracle", "--output-path",
                                 "out"], r"out/medhelm\.duckdb: cannot open .*fresh --output-path", setup=truncated_db),
    Case("server-truncated-db", ["medhelm-server", "--suite", "oracle-private", "--output-path", "out", "--port", "0"],
         r"out/medhelm\.duckdb.*fresh --output-path", setup=truncated_db),
    # the schema
    Case("schema-missing", ["medhelm-summarize", "--suite", "oracle-private", "--output-path", "out", "--schema",
                            "nope.yaml"], r"--schema-path nope\.yaml: no such file", setup=imported),
    Case("schema-malformed", ["medhelm-summarize", "--suite", "oracle-private", "--output-path", "out", "--schema",
                              "bad.yaml"], r"--schema-path bad\.yaml: not valid YAML at line 1",
         setup=lambda w: (imported(w), write("bad.yaml", b"{{{ : [\n")(w))),
    Case("schema-not-a-mapping", ["medhelm-summarize", "--suite", "oracle-private", "--output-path", "out",
                                  "--schema", "list.yaml"], r"--schema-path list\.yaml: a schema is a mapping",
         setup=lambda w: (imported(w), write("list.yaml", b"[1, 2]\n")(w))),
    Case("schema-bad-entry", ["medhelm-summarize", "--suite", "oracle-private", "--output-path", "out",
                              "--schema", "entry.yaml"], r"--schema-path entry\.yaml: not a HELM schema",
         setup=lambda w: (imported(w), write("entry.yaml", b"metrics: [3]\n")(w))),
    Case("schema-folder", ["medhelm-summarize", "--suite", "oracle-private", "--output-path", "out",
                           "--schema", "work"], r"--schema-path work: is a folder", setup=imported),
    Case("summarize-output-path-file", ["medhelm-summarize", "--suite", "s", "--output-path", "afile"],
         r"--output-path afile: is a file", setup=write("afile", b"mine\n")),
    Case("summarize-release-name", ["medhelm-summarize", "--release", "../x", "--suites", "oracle-private",
                                    "--output-path", "out"], r"--release '\.\./x': .*letters, digits", setup=imported),
    # data files: read before anything is written
    Case("data-not-utf8", run_args(desc=entry("work/private/bad.csv")), r"work/private/bad\.csv.*(utf-8|UTF-8)",
         setup=write("work/private/bad.csv", b"prompt,context,label\nfoo,\xff\xfe bad,A\n")),
    Case("data-malformed", run_args(desc=entry("work/private/mal.csv")), r"work/private/mal\.csv",
         setup=write("work/private/mal.csv", b'prompt,context,label\n"a,b\n')),
    Case("data-empty", run_args(desc=entry("work/private/empty.csv")), r"work/private/empty\.csv holds no instances",
         setup=write("work/private/empty.csv", b"")),
    Case("data-header-only", run_args(desc=entry("work/private/hdr.csv")), r"work/private/hdr\.csv holds no instances",
         setup=write("work/private/hdr.csv", b"prompt,context,label\n")),
    Case("data-dev-zero", run_args(desc=entry("/dev/zero")), r"/dev/zero is not a regular file"),
    Case("data-above-limit", run_args(), r"shc_ptbm_med\.csv is .*above the limit .*MEDHELM_MAX_DATA_FILE_MB",
         env={"MEDHELM_MAX_DATA_FILE_MB": "0.001"}),
    # limits on what a message echoes
    Case("description-20mb", ["medhelm-run", "--conf-paths", "big.conf", "--suite", "s", "--max-eval-instances",
                              "3", "--output-path", "out", "--local-path", "work/prod_env"],
         r"^.{0,2500}$", setup=big_conf),
    # the model endpoint: nothing listens there
    Case("endpoint-refused", run_args(), r"mockai/mock-gpt-a: nothing listens at http://127\.0\.0\.1:\d+ "
                                         r"\(connection refused\)"),
    # import options
    Case("import-jobs-0", ["medhelm-import", "--source", str(SOURCE), "--release", "oracle", "--output-path", "out",
                           "--jobs", "0"], r"--jobs 0: .*at least 1"),
    Case("import-no-such-release", ["medhelm-import", "--source", str(SOURCE), "--release", "nope", "--output-path",
                                    "out"], r"no release 'nope' at .*releases there: oracle"),
    Case("import-source-file", ["medhelm-import", "--source", "afile", "--release", "oracle", "--output-path", "out"],
         r"afile is not a folder", setup=write("afile", b"mine\n")),
    Case("import-release-name", ["medhelm-import", "--source", str(SOURCE), "--release", "a/b", "--output-path", "out"],
         r"--release 'a/b': .*letters, digits"),
    Case("summarize-schema-and-auto", ["medhelm-summarize", "--suite", "oracle-private", "--output-path", "out",
                                       "--schema", "x.yaml", "--auto-generate-schema"],
         r"--schema-path or --auto-generate-schema, not both", setup=imported),
    Case("import-output-path-file", ["medhelm-import", "--source", str(SOURCE), "--release", "oracle",
                                     "--output-path", "afile"], r"--output-path afile: is a file",
         setup=write("afile", b"mine\n")),
]


# -- the harness -----------------------------------------------------------------------------------
def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MEDHELM_", "DAGSTER_HOME", "OPENAI_", "HELM_"))}
    env.update({"PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "DAGSTER_DISABLE_TELEMETRY": "1",
                "PYTHONWARNINGS": "ignore"})
    env.update(extra or {})
    return env


def _command(argv: list[str], cwd: Path, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / argv[0]), *argv[1:]], cwd=cwd, env=_env(env), capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


_IMPORTED: list[Path] = []


def _imported_once() -> Path:
    """The oracle release imported once per session (copied by each case that needs a good file)."""
    if not _IMPORTED:
        import tempfile

        base = Path(tempfile.mkdtemp(prefix="medhelm-hostile-"))
        done = _command(["medhelm-import", "--source", str(SOURCE), "--release", "oracle", "--output-path",
                         str(base / "out"), "--no-compare", "-q"], cwd=base)
        assert done.returncode == 0, done.stderr
        _IMPORTED.append(base / "out")
    return _IMPORTED[0]


def snapshot(root: Path) -> dict[str, tuple]:
    """Every path under `root`: its kind and, for a file, its size and content hash."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = ("link", os.readlink(p))
        elif p.is_dir():
            out[rel] = ("dir",)
        else:
            out[rel] = ("file", p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest())
    return out


@pytest.fixture
def work(tmp_path) -> Path:
    """The shared inputs at work/ (writable), their endpoint a loopback port where nothing listens."""
    shutil.copytree(SYNTHETIC / "inputs", tmp_path / "work")
    for p in (tmp_path / "work").rglob("*"):
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    deployments = tmp_path / "work" / "prod_env" / "model_deployments.yaml"
    deployments.write_text(re.sub(r"http://127\.0\.0\.1:\d+/v1", f"http://127.0.0.1:{_closed_port()}/v1",
                                  deployments.read_text()))
    (tmp_path / "work" / "prod_env" / "credentials.conf").write_text('mockaiApiKey: "sk-hostile-not-a-secret"\n')
    return tmp_path


@pytest.mark.parametrize("case", _params(CASES))
def test_bad_input_gives_one_line_and_writes_nothing(case: Case, work: Path):
    case.setup(work)
    before = snapshot(work)
    done = _command(case.argv, cwd=work, env=case.env)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode != 0, done.stderr[-3000:]
    if case.code is not None:
        assert done.returncode == case.code, done.stderr[-3000:]
    assert len(lines) == 1, done.stderr[-3000:]
    assert re.search(case.match, lines[0]), lines[0][:3000]
    assert "Traceback" not in done.stderr and "dagster" not in done.stderr.lower()
    assert "sk-hostile-not-a-secret" not in done.stderr + done.stdout
    assert snapshot(work) == before


def test_every_case_has_a_unique_id():
    assert len({c.id for c in CASES}) == len(CASES)


# -- many processes on one output path ---------------------------------------------------------------
def _import(out: Path, cwd: Path, source: Path = SOURCE, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([str(BIN / "medhelm-import"), "--source", str(source), "--release", "oracle",
                             "--output-path", str(out), "--no-compare", *extra], cwd=cwd, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def test_two_imports_on_one_output_path_both_succeed(tmp_path):
    """Each import stages in a folder of its own (they used to share and delete one: 3 of 4 trials
    failed with a raw FileNotFoundError); the file lock orders their writes."""
    for trial in range(3):
        out = tmp_path / f"out{trial}"
        procs = [_import(out, tmp_path) for _ in range(2)]
        results = [(p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for p in procs]
        for code, stdout, stderr in results:
            assert code == 0, stderr
            assert "Traceback" not in stderr and "FileNotFoundError" not in stderr
            assert re.search(r"imported release oracle .*: 12 runs in 2 suite\(s\).*0 problem\(s\)", stdout), stdout
        assert not (out / ".published_staging").exists()   # each cleaned its own, the last the root


def test_an_import_leaves_another_running_imports_staged_files_alone(tmp_path):
    """Deterministic form of the race above: while one import has objects staged, another import on
    the same output path runs from start to end; the first one's staged files are still there."""
    from medhelm_core.lake_store import open_store
    from medhelm_core.published.importer import Importer
    from medhelm_core.published.source import open_source
    from medhelm_core.storage import resolve_storage

    out = tmp_path / "out"
    store = open_store(resolve_storage(None, out), out)
    first = Importer(store, open_source(str(SOURCE)), release="oracle")
    first.staging.mkdir(parents=True)   # what its fetch does before it writes an object there
    staged = first.staging / "tmp-staged.json"
    staged.write_text("{}")
    report = Importer(open_store(resolve_storage(None, out), out), open_source(str(SOURCE)), release="oracle").run()
    assert report.runs == 12 and not report.problems
    assert staged.exists()


def test_a_dead_imports_staging_is_removed_and_a_live_ones_kept(tmp_path):
    from medhelm_core.owners import HOST, process_start

    root = tmp_path / "out" / ".published_staging"
    tag = HOST.replace("_", "-").replace("/", "-") or "-"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = root / f"{tag}_{dead.pid}_{process_start(dead.pid) or '1'}_abc123"
    stale.mkdir(parents=True)
    (stale / "tmp1.json").write_text("{}")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        live = root / f"{tag}_{sleeper.pid}_{process_start(sleeper.pid)}_def456"
        live.mkdir()
        (live / "tmp2.json").write_text("{}")
        other = root / "not-an-import-folder"
        other.mkdir()
        p = _import(tmp_path / "out", tmp_path)
        assert p.wait(timeout=300) == 0, p.stderr.read()
        assert not stale.exists()
        assert (live / "tmp2.json").exists() and other.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


# -- the import's limits ---------------------------------------------------------------------------
def _source_copy(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    shutil.copytree(SOURCE, src)
    for p in src.rglob("*"):
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    return src


RUN_A = "runs/oracle-cfg/ROUGE-DEMO:model=mockai_mock-gpt-a,model_deployment=mockai_mock-gpt-a"
RUN_B = "runs/oracle-cfg/ROUGE-DEMO:model=mockai_mock-gpt-b,model_deployment=mockai_mock-gpt-b"


def test_an_object_too_large_for_memory_is_reported_and_the_rest_imported(tmp_path):
    import json

    src = _source_copy(tmp_path)
    spec = json.loads((src / RUN_A / "run_spec.json").read_text())
    spec["huge"] = "x" * 30_000_000   # valid JSON, 30 MB: past the import's memory with its batch
    (src / RUN_A / "run_spec.json").write_text(json.dumps(spec))
    p = _import(tmp_path / "out", tmp_path, src)
    code, stdout, stderr = p.wait(timeout=600), p.stdout.read(), p.stderr.read()
    assert code == 0, stderr
    assert re.search(r"11 runs in 2 suite\(s\).* 1 problem\(s\)", stdout), stdout
    warnings = [line for line in stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and f"{RUN_A}/run_spec.json" in warnings[0], stderr
    assert "MEDHELM_IMPORT_MEMORY_LIMIT" in warnings[0] and "Out of Memory" not in stderr


def test_an_empty_per_instance_stats_is_a_problem(tmp_path):
    src = _source_copy(tmp_path)
    (src / RUN_B / "per_instance_stats.json").write_bytes(b"")
    p = _import(tmp_path / "out", tmp_path, src)
    code, stdout, stderr = p.wait(timeout=300), p.stdout.read(), p.stderr.read()
    assert code == 0, stderr
    assert re.search(r"12 runs in 2 suite\(s\).* 1 problem\(s\)", stdout), stdout
    warnings = [line for line in stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and f"{RUN_B}/per_instance_stats.json" in warnings[0] and "empty" in warnings[0], stderr


def test_two_runs_and_an_import_on_one_output_path_all_succeed(tmp_path):
    """Any commands on one output path at once: each succeeds (the writes take turns on the file's
    lock; a request one run is asking, the other waits for instead of paying for it again)."""
    from tests.mock_server import MockServer
    from tests.parity import lay_out_inputs

    server = MockServer()
    try:
        env_dir = lay_out_inputs(SYNTHETIC / "inputs", tmp_path, server.base_url) / "prod_env"
        (env_dir / "credentials.conf").write_text('mockaiApiKey: "sk-hostile-not-a-secret"\n')

        def run(suite: str) -> subprocess.Popen:
            return subprocess.Popen([str(BIN / "medhelm-run"), "--conf-paths", "work/conf/private.conf", "--suite",
                                     suite, "--max-eval-instances", "5", "--output-path", "out", "--local-path",
                                     "work/prod_env"], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)

        procs = [run("s1"), run("s2"), _import(tmp_path / "out", tmp_path)]
        results = [(p.wait(timeout=600), p.stdout.read(), p.stderr.read()) for p in procs]
    finally:
        server.close()
    for code, _, stderr in results:
        assert code == 0, stderr[-3000:]
        assert "Traceback" not in stderr and "FileNotFoundError" not in stderr
    for _, _, stderr in results[:2]:
        assert stderr.strip().splitlines()[-1].startswith("6 runs: 0 reused"), stderr[-3000:]
    assert "12 runs in 2 suite(s)" in results[2][1]


def test_the_first_commands_on_a_new_output_path_create_dagsters_storage_in_turn(tmp_path):
    """Two `medhelm-run`s started at once on a new output path both create its Dagster home's SQLite
    storage; at once, Dagster's migrations race ("table secondary_indexes already exists")."""
    code = ("import sys; sys.path.insert(0, sys.argv[2]); from medhelm_dagster.instance import dagster_instance; "
            "i = dagster_instance(sys.argv[1]); i.event_log_storage.get_asset_keys(); i.get_runs_count()")
    env = {k: v for k, v in _env().items() if k != "DAGSTER_HOME"}
    for trial in range(2):
        procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / f"out{trial}"), str(ROOT)], env=env,
                                  stderr=subprocess.PIPE, text=True) for _ in range(4)]
        for p in procs:
            err = p.communicate(timeout=300)[1]
            assert p.returncode == 0, err[-2000:]
