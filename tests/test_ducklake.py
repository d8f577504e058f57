"""The shared store's engine: DuckLake, its catalog in a real PostgreSQL (Debian's package, started
here by scripts/postgres.sh) and its data as Parquet files in a folder. The [ducklake] extra pins
DuckDB to its extensions' 1.5.5, so this runs in .venv-ducklake (scripts/setup.sh --with-ducklake)
as separate processes: one creates every table of the store from our DDL and writes, another
attaches the same lake by its URL and reads what the first committed."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import duckdb
import pytest

from medhelm_core.errors import MedhelmError
from medhelm_core.storage import open_ducklake, parse_storage
from tests.oracle import PUBLIC
from tests.ports import readme_ports_taken  # noqa: F401  (a fixture)
from tests.postgres import HAS_PG, LAKE_PY, ROOT, running_postgres, skip_without_lake


WRITER = r"""
import json, sys
from medhelm_core.resources import ddl
from medhelm_core.storage import ducklake_ddl, open_ducklake, parse_storage
from medhelm_core.store import DDL_FILES

conn = open_ducklake(parse_storage(sys.argv[1]))
for name in (*DDL_FILES, "published"):
    conn.execute(ducklake_ddl(ddl(name)))
conn.execute("BEGIN TRANSACTION")
conn.execute('''INSERT INTO completions (request_key, model_deployment, model, request, result, success)
                SELECT 'k' || i, 'mockai/mock-gpt-a', 'mockai/mock-gpt-a', json_object('prompt', 'p' || i),
                       json_object('completions', [json_object('text', 'answer ' || i)]), true
                FROM range(1000) t(i)''')
conn.execute("COMMIT")
tables = [r[0] for r in conn.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = 'medhelm'").fetchall()]
print(json.dumps({"tables": sorted(tables)}))
"""

READER = r"""
import json, sys
from medhelm_core.storage import open_ducklake, parse_storage
from tests.oracle import PUBLIC

conn = open_ducklake(parse_storage(sys.argv[1]))
n, text = conn.execute("SELECT count(*), max(result -> '$.completions[0]' ->> 'text') FROM completions "
                       "WHERE request_key IN ('k7', 'k999')").fetchone()
files = conn.execute("SELECT count(*) FROM ducklake_list_files('medhelm', 'completions')").fetchone()[0]
print(json.dumps({"n": n, "text": text, "files": files, "total": conn.execute("SELECT count(*) FROM completions").fetchone()[0]}))
"""


STAMPS = r"""
import sys
from medhelm_core.server.data import Reader
from medhelm_core.storage import parse_storage

reader = Reader("out", suite="public-n50", lake=parse_storage(sys.argv[1]))
print(reader.stamp(), flush=True)
sys.stdin.readline()
print(reader.stamp(), flush=True)
"""


@pytest.fixture
def lake(tmp_path):
    skip_without_lake()
    with running_postgres() as url:
        yield f"ducklake:{url}?data_path={tmp_path / 'lake'}", tmp_path / "lake"


def _in_lake_env(script: str, url: str, *more: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "MEDHELM_STORAGE"}
    r = subprocess.run([str(LAKE_PY), "-c", script, url, *more], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_every_table_of_the_store_on_a_ducklake_shared_by_two_processes(lake):
    url, data = lake
    wrote = _in_lake_env(WRITER, url)
    for table in ("completions", "requests", "annotations", "completion_claims", "runs", "run_stats",
                  "published_objects", "published_request_states", "published_annotation_entries"):
        assert table in wrote["tables"]
    read = _in_lake_env(READER, url)   # another process, attached by the URL alone
    assert read == {"n": 2, "text": "answer 999", "files": read["files"], "total": 1000} and read["files"] >= 1
    parquet = list(data.rglob("*.parquet"))
    assert parquet and not list(data.rglob("*.duckdb"))


def test_medhelm_import_into_a_ducklake_rebuilds_every_cell_as_into_a_file(lake, tmp_path):
    """The published public-n50 suite imported into the DuckLake (.venv-ducklake) and into a DuckDB
    file (this environment): the same comparison, cell for cell; a second import fetches nothing and
    rebuilds nothing."""
    url, data = lake
    src = ["--source", str(PUBLIC / "benchmark_output"), "--suite", "public-n50"]
    env = {k: v for k, v in os.environ.items() if k != "MEDHELM_STORAGE"}

    def imported(python: Path, *extra: str) -> list[str]:
        r = subprocess.run([str(python), "-m", "medhelm_cli.imports", *src, "-q", *extra], cwd=ROOT,
                           capture_output=True, text=True, timeout=600, env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        return [ln for ln in r.stdout.splitlines() if ln.strip()]

    lake_lines = imported(LAKE_PY, "-o", str(tmp_path / "out"), "--storage", url)
    file_lines = imported(ROOT / ".venv" / "bin" / "python", "-o", str(tmp_path / "file"))
    assert lake_lines[-1].startswith("public-n50: valued cells equal 608/608")
    assert lake_lines[-1].split("; rebuilt")[0] == file_lines[-1].split("; rebuilt")[0]
    # a running page's reader sees the next commit (its cache is keyed on the lake's newest snapshot)
    watcher = subprocess.Popen([str(LAKE_PY), "-c", STAMPS, url], cwd=ROOT, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, env=env)
    before = watcher.stdout.readline().strip()
    again = imported(LAKE_PY, "-o", str(tmp_path / "out"), "--storage", url)
    after, _ = watcher.communicate("\n", timeout=120)
    assert before and after.strip() and after.strip() != before
    assert ", 0 fetched (0.0 MB), 107 unchanged" in again[0]
    assert again[-1] == file_lines[-1].split("; rebuilt")[0] + "; not rebuilt: its inputs are those of the last rebuild"
    assert not (tmp_path / "out" / "medhelm.duckdb").exists() and list(data.rglob("*.parquet"))

    # SQL on either store by its URL (read-only: the lake attached beside any writer)
    sql = "SELECT count(*) AS runs FROM published_runs"
    for python, target in ((LAKE_PY, url), (ROOT / ".venv" / "bin" / "python", f"duckdb:{tmp_path / 'file' / 'medhelm.duckdb'}")):
        r = subprocess.run([str(python), "-m", "medhelm_core.query", target, sql], cwd=ROOT, capture_output=True,
                           text=True, timeout=300, env=env)
        assert r.returncode == 0 and "│ 28 │" in r.stdout.replace("  ", " ").replace("  ", " "), r.stdout + r.stderr

    # the page's export, read from the lake and from the file: the same data, file for file
    for python, where, extra in ((LAKE_PY, "lake_site", ["-o", str(tmp_path / "out"), "--storage", url]),
                                 (ROOT / ".venv" / "bin" / "python", "file_site", ["-o", str(tmp_path / "file")])):
        r = subprocess.run([str(python), "-m", "medhelm_cli.serve", "export", "--suite", "public-n50", *extra,
                            "--out", str(tmp_path / where)], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
        assert r.returncode == 0, r.stderr[-3000:]
    lake_files = sorted(p.relative_to(tmp_path / "lake_site") for p in (tmp_path / "lake_site" / "data").iterdir())
    assert len(lake_files) > 20
    assert lake_files == sorted(p.relative_to(tmp_path / "file_site") for p in (tmp_path / "file_site" / "data").iterdir())
    for rel in lake_files:
        assert _comparable(tmp_path / "lake_site" / rel) == _comparable(tmp_path / "file_site" / rel), rel


def _comparable(path: Path):
    """An exported data file (`(function(v){…})(<JSON>);`) without what names the store or the moment
    (db_path, generated_at), its numbers to 12 significant digits (a mean's last bit depends on the
    order DuckDB adds in, which differs between DuckDB 1.5 and 2.0)."""
    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in ("db_path", "generated_at")}
        if isinstance(x, float):
            return float(f"{x:.12g}")
        return [strip(v) for v in x] if isinstance(x, list) else x
    text = path.read_text()
    head, sep, body = text.partition("})(")
    if not sep or not body.rstrip().endswith(");"):
        return text
    return head, strip(json.loads(body.rstrip()[:-2]))


def test_the_readme_commands_for_the_shared_store_work_as_printed(readme_ports_taken):
    """The README's block as one script, in a fresh copy of the checkout (its folders, .shared-store/,
    inside the copy; PostgreSQL and the demo server on free ports, the README's old ones held by
    another process): a published suite imported, the example suite run by two processes at once (one
    model each, their own output paths), and summarized from a third."""
    from tests.dagster_dev import stop_group
    from tests.readme import code_blocks, commands, readme_checkout, strip_comment

    if not (HAS_PG and LAKE_PY.exists()):
        pytest.skip("needs bash scripts/setup.sh --with-postgres --with-ducklake")
    [block] = code_blocks("The shared store (DuckLake)", "bash")
    cmds = [strip_comment(c) for c in commands(block)]
    assert cmds[0].startswith("PG=$(bash scripts/postgres.sh start") and "postgres.sh stop" in cmds[-1]
    assert sum(c.startswith(".venv-ducklake/bin/medhelm-run") for c in cmds) == 2
    assert not any(p in c for c in cmds for p in ("55433", "8765", "/tmp/"))   # no fixed port or shared folder
    script = ["set -uo pipefail"] + [c if c.endswith("&") else f"{c} || {{ echo 'README command {i + 1} failed' >&2; exit 1; }}"
                                     for i, c in enumerate(cmds)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEDHELM_", "DAGSTER_"))}
    with readme_checkout() as work:
        dirs = [work / ".shared-store" / d for d in ("pg", "out", "lake", "a", "b")]
        proc = subprocess.Popen(["bash", "-c", "\n".join(script)], cwd=work, env=env, start_new_session=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            out, _ = proc.communicate(timeout=900)
            assert proc.returncode == 0, out[-4000:]
            assert "public-n50: valued cells equal 608/608" in out
            assert list(dirs[2].rglob("*.parquet")) and not list((work / ".shared-store").rglob("medhelm.duckdb"))
            runs = sorted(p.name for p in (dirs[1] / "runs" / "example").iterdir() if (p / "stats.json").exists())
            assert len(runs) == 6 and all((dirs[1] / "runs" / "example" / r / "scenario_state.json").exists() for r in runs)
            assert [len(list((d / "runs" / "example").glob("*/stats.json"))) for d in dirs[3:]] == [3, 3]
            assert "| Demo model A |" in out and "| Demo model B |" in out
        finally:
            stop_group(proc.pid)   # the demo server, should a command have failed before stopping it
            subprocess.run(["bash", "scripts/postgres.sh", "stop", str(dirs[0])], cwd=work, capture_output=True, timeout=120)


def test_a_catalog_that_cannot_be_reached_is_one_line_without_the_password(tmp_path):
    if not LAKE_PY.exists():
        pytest.skip("no .venv-ducklake: bash scripts/setup.sh --with-ducklake")
    script = ("import sys\nfrom medhelm_core.errors import MedhelmError\n"
              "from medhelm_core.storage import open_ducklake, parse_storage\n"
              "try:\n    open_ducklake(parse_storage(sys.argv[1]))\nexcept MedhelmError as e:\n    print(e)\n")
    url = f"ducklake:postgresql://medhelm:s3cret@127.0.0.1:1/medhelm?data_path={tmp_path / 'lake'}"
    r = subprocess.run([str(LAKE_PY), "-c", script, url], cwd=ROOT, capture_output=True, text=True, timeout=120)
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1 and "cannot attach the DuckLake" in lines[0] and "127.0.0.1:1/medhelm" in lines[0]
    assert "s3cret" not in r.stdout + r.stderr


def test_without_the_extra_the_error_is_one_line_naming_it(tmp_path):
    storage = parse_storage(f"ducklake:postgresql://medhelm@127.0.0.1:1/medhelm?data_path={tmp_path}")
    try:
        import duckdb_extension_ducklake  # noqa: F401
    except ImportError:
        with pytest.raises(MedhelmError) as e:
            open_ducklake(storage)
        assert 'pip install "medhelm-build[ducklake]"' in str(e.value) and "\n" not in str(e.value)
    else:
        pytest.skip("this environment has the [ducklake] extra")


TURNS = r"""
import json, sys, time
import psycopg2
from medhelm_core.errors import MedhelmError
from medhelm_core.lake_store import _WRITER_KEY, LakeStore
from medhelm_core.storage import parse_storage

storage = parse_storage(sys.argv[1])
store = LakeStore(storage, sys.argv[2], lock_timeout_s=1.0)
with store.transaction() as c:
    c.execute("INSERT INTO completion_errors (request_key) VALUES ('k0')")
holder = psycopg2.connect(**storage.catalog)   # another process (or machine) in its write turn
holder.autocommit = True
holder.cursor().execute("SELECT pg_advisory_lock(%s)", [_WRITER_KEY])
start = time.monotonic()
with store.connect() as c:   # a block that only reads does not wait for the turn
    seen = c.execute("SELECT count(*) FROM completion_errors").fetchall()[0][0]
read_s = time.monotonic() - start
try:
    with store.transaction() as c:
        c.execute("INSERT INTO completion_errors (request_key) VALUES ('k1')")
    refused = None
except MedhelmError as e:
    refused = str(e)
holder.close()   # its session ends, and its turn with it (as a kill -9 would)
with store.transaction() as c:
    c.execute("INSERT INTO completion_errors (request_key) VALUES ('k2')")
pid = store.writer._session.execute("SELECT pg_backend_pid()")[0][0]
killer = psycopg2.connect(**storage.catalog)   # the turn's session ended between turns (a server restart)
killer.autocommit = True
killer.cursor().execute("SELECT pg_terminate_backend(%s)", [pid])
killer.close()
with store.transaction() as c:
    c.execute("INSERT INTO completion_errors (request_key) VALUES ('k3')")
with store.connect(read_only=True) as c:
    keys = [r[0] for r in c.execute("SELECT request_key FROM completion_errors ORDER BY 1").fetchall()]
print(json.dumps({"seen": seen, "read_s": read_s, "refused": refused, "keys": keys}))
"""


def test_writers_take_turns_and_readers_never_wait(lake, tmp_path):
    """While another session holds the lake's write turn, a read goes through at once, a write waits
    its timeout and stops with one line (nothing written); once that session ends, writes go on, and
    they go on when the server ends this process's own session between turns."""
    url, _ = lake
    got = _in_lake_env(TURNS, url, str(tmp_path / "out"))
    assert got["seen"] == 1 and got["read_s"] < 0.9 and got["keys"] == ["k0", "k2", "k3"]
    assert got["refused"] and "another writer held the DuckLake for 1 s" in got["refused"] and "\n" not in got["refused"]


CLAIMS = r"""
import json, os, socket, sys, time
import psycopg2
from medhelm_core import journal, owners
from medhelm_core.claims import TABLE
from medhelm_core.lake_store import journals_on_this_host, open_store
from medhelm_core.storage import parse_storage
from medhelm_core.store import COMPLETION_COLUMNS, insert_answers

storage = parse_storage(sys.argv[1])
a, b = open_store(storage, sys.argv[2] + "/a"), open_store(storage, sys.argv[2] + "/b")   # two sessions, as two machines
with a.transaction() as conn:
    conn.execute("SELECT 1")   # creates the tables
A, B = owners.new_owner_id(), owners.new_owner_id()
owners.register(A); owners.register(B)
got = {"a": sorted(a.claims.claim(["k1", "k2", "k3"], A, 120.0)),
       "b": sorted(b.claims.claim(["k2", "k3", "k4"], B, 120.0))}
row = ["k2", "d", "m", "{}", "{}", True, 1] + [None] * (len(COMPLETION_COLUMNS) - 7)
a.claims.commit(A, ["k2"], lambda conn: insert_answers(conn, [row]))
got["b_after_answer"] = sorted(b.claims.claim(["k2", "k3"], B, 120.0))   # k2 answered, k3 still A's
pg = psycopg2.connect(sys.argv[1].split(":", 1)[1].split("?")[0]); pg.autocommit = True
cur = pg.cursor()
dead = f"{socket.gethostname()}|4194311|-|abc"   # a pid that cannot exist on this host
cur.execute(f"INSERT INTO {TABLE} VALUES ('k9', %s, 1e18), ('k10', %s, 1e18)", [dead, dead])
# the dead owner wrote under a's output path and had journaled k9's answer, not yet in the lake
segment = journal.journal_dir(a.path) / (dead.replace("|", ",") + ".1.jsonl")
segment.parent.mkdir(parents=True, exist_ok=True)
segment.write_text(json.dumps(["k9", "d", "m", "{}", '{"journaled": true}', True, 1] + [None] * (len(COMPLETION_COLUMNS) - 7)) + "\n")
links = journals_on_this_host(storage)
stale, fresh = links / "stale", links / "fresh"   # output paths deleted 8 days ago, and not made yet
os.symlink(sys.argv[2] + "/gone/medhelm.ducklake", stale)
os.symlink(sys.argv[2] + "/soon/medhelm.ducklake", fresh)
os.utime(stale, (time.time() - 8 * 86400,) * 2, follow_symlinks=False)
got["b_takes_over"] = sorted(b.claims.claim(["k9", "k10"], B, 120.0))
got["links"] = [stale.is_symlink(), fresh.is_symlink()]
with b.connect(read_only=True) as conn:
    got["k9"] = conn.execute("SELECT result FROM completions WHERE request_key = 'k9'").fetchall()
got["segment_left"] = segment.exists()
a.claims.release(A)
cur.execute(f"SELECT request_key, owner FROM {TABLE} ORDER BY 1")
got["left"] = [[k, "A" if o == A else "B" if o == B else o] for k, o in cur.fetchall()]
with a.connect(read_only=True) as conn:
    got["lake_claims"] = conn.execute("SELECT count(*) FROM completion_claims").fetchone()[0]
print(json.dumps(got))
"""


def test_request_claims_on_a_lake_are_a_postgres_table_exact_across_sessions(lake, tmp_path):
    """Claims on a DuckLake live in the catalog's PostgreSQL: a key claimed by one session is not won
    by another; once answered (committed to the lake) and settled it is not won again; a dead owner's
    claim is taken over, after what it journaled under another output path of this host is folded in;
    a released owner leaves nothing. The lake's own claims table stays empty."""
    url, _ = lake
    got = _in_lake_env(CLAIMS, url, str(tmp_path))
    assert got["a"] == ["k1", "k2", "k3"] and got["b"] == ["k4"]
    assert got["b_after_answer"] == []
    # k9's answer, journaled by the dead owner under the other output path on this host, is folded in
    # (not asked again); k10 is taken over
    assert got["b_takes_over"] == ["k10"] and len(got["k9"]) == 1 and "journaled" in got["k9"][0][0]
    assert not got["segment_left"] and got["links"] == [False, True]   # a long-gone output path is unlinked
    assert got["left"] == [["k10", "B"], ["k4", "B"]] and got["lake_claims"] == 0


def test_completions_imported_into_a_ducklake_are_those_of_a_file(lake, tmp_path):
    """--with-completions into the DuckLake (a transaction per batch, the batch's request states once
    into a scratch table) and into a DuckDB file: the same request states and jury entries."""
    url, _ = lake
    src = ["--source", str(PUBLIC / "benchmark_output"), "--suite", "public-n50", "--with-completions", "-q",
           "--no-compare"]
    env = {k: v for k, v in os.environ.items() if k != "MEDHELM_STORAGE"}
    for python, extra in ((LAKE_PY, ["-o", str(tmp_path / "out"), "--storage", url]),
                          (ROOT / ".venv" / "bin" / "python", ["-o", str(tmp_path / "file")])):
        r = subprocess.run([str(python), "-m", "medhelm_cli.imports", *src, *extra], cwd=ROOT,
                           capture_output=True, text=True, timeout=600, env=env)
        assert r.returncode == 0, r.stderr[-3000:]
    sql = ("SELECT (SELECT count(*) FROM published_request_states), (SELECT count(*) FROM published_annotation_entries), "
           "(SELECT md5(string_agg(concat_ws('|', suite, run_name, position, instance_id, annotator, entry, "
           "CAST(value AS VARCHAR)), chr(10) ORDER BY suite, run_name, position, annotator, entry)) "
           "FROM published_annotation_entries), "
           "(SELECT md5(string_agg(concat_ws('|', suite, run_name, position, completion), chr(10) "
           "ORDER BY suite, run_name, position)) FROM published_completions)")
    lake_got = _in_lake_env(COUNTS, url, str(tmp_path / "out"), sql)["row"]
    with duckdb.connect(str(tmp_path / "file" / "medhelm.duckdb"), read_only=True) as conn:
        file_got = list(conn.execute(sql).fetchone())
    assert lake_got[0] > 0 and lake_got[1] > 0 and lake_got == file_got


COUNTS = r"""
import json, sys
from medhelm_core.lake_store import open_store
from medhelm_core.storage import parse_storage

store = open_store(parse_storage(sys.argv[1]), sys.argv[2])
with store.connect(read_only=True) as c:
    print(json.dumps({"row": list(c.execute(sys.argv[3]).fetchone())}))
"""
