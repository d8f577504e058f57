"""One storage setting (`--storage`, $MEDHELM_STORAGE) for every command: where the tables live."""
import os
import re
import shutil
from pathlib import Path

import duckdb
import pytest

from medhelm_core.errors import MedhelmError
from medhelm_core.lake_store import _private, only_reads
from medhelm_core.storage import ENV, resolve_storage
from tests.oracle import PUBLIC

ROOT = Path(__file__).resolve().parents[1]


def test_flag_then_environment_then_the_output_paths_file(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert str(resolve_storage(None, tmp_path / "out")) == f"duckdb:{tmp_path / 'out' / 'medhelm.duckdb'}"
    monkeypatch.setenv(ENV, f"duckdb:{tmp_path / 'env.duckdb'}")
    assert resolve_storage(None, "out").path == tmp_path / "env.duckdb"
    assert resolve_storage(f"duckdb:{tmp_path / 'flag.duckdb'}", "out").path == tmp_path / "flag.duckdb"


@pytest.mark.parametrize("url, says", [
    ("sqlite:x.db", "expected duckdb:PATH"),
    ("results/medhelm.duckdb", "expected duckdb:PATH"),
    ("duckdb:", "needs the database file's path"),
    ("ducklake:mysql://medhelm@127.0.0.1/medhelm?data_path=/data", "the catalog must be a PostgreSQL URL"),
    ("ducklake:postgresql://medhelm@127.0.0.1:5432/medhelm", "?data_path=DIR"),
    ("ducklake:postgresql://medhelm@127.0.0.1:54x/medhelm?data_path=/d", "the port must be a number"),
    ("ducklake:postgresql://medhelm@127.0.0.1/medhelm?data_path=s3://bucket/lake", "a Google Cloud Storage URL, gs://"),
])
def test_a_bad_setting_is_one_line_naming_the_flag(url, says, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(MedhelmError) as e:
        resolve_storage(url, "out")
    assert str(e.value).startswith(f"--storage {url!r}: ") and says in str(e.value) and "\n" not in str(e.value)
    monkeypatch.setenv(ENV, url)
    with pytest.raises(MedhelmError, match=re.escape(f"${ENV} {url!r}: ")):
        resolve_storage(None, "out")


def test_a_ducklake_url_and_its_password_never_shown(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    s = resolve_storage("ducklake:postgresql://team:s3cret@db.example:6543/lake?data_path=/srv/lake&sslmode=require", "out")
    assert s.kind == "ducklake" and s.data_path == "/srv/lake" and s.password == "s3cret"
    assert s.catalog_dsn == "dbname='lake' host='db.example' port='6543' user='team' sslmode='require'"
    assert "s3cret" not in str(s) and str(s) == "ducklake:postgresql://team@db.example:6543/lake?data_path=/srv/lake"
    odd = resolve_storage("ducklake:postgresql://o%27brien:p%40ss%20w@db/my%20db?data_path=/d", "out")
    assert odd.catalog_dsn == "dbname='my db' host='db' port='5432' user='o\\'brien'" and odd.password == "p@ss w"
    for url in ("ducklake:mysql://team:s3cret@db/lake?data_path=/d", "ducklake:mysql://team:s3@cret@db/lake?data_path=/d"):
        with pytest.raises(MedhelmError) as e:
            resolve_storage(url, "out")
        assert "s3" not in str(e.value) and "cret" not in str(e.value)


def test_a_bucket_data_path_is_a_gs_url_ending_with_a_slash(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    for given in ("gs://team-bucket/medhelm-lake", "gcs://team-bucket/medhelm-lake", "gs://team-bucket/medhelm-lake/"):
        s = resolve_storage(f"ducklake:postgresql://medhelm@db/lake?data_path={given}", "out")
        assert s.data_path == "gs://team-bucket/medhelm-lake/"


def test_a_folder_is_not_a_database_file(tmp_path):
    with pytest.raises(MedhelmError, match="is a folder; name the database file"):
        resolve_storage(f"duckdb:{tmp_path}", "out")


def test_run_summarize_serve_and_import_use_the_storage_and_not_the_output_path(tmp_path, monkeypatch):
    """The example suite run into a file outside the output folder (flag), summarized from it (the
    environment), run again with nothing new to call, exported from it; a published suite imported
    into another file. HELM's files stay under the output path; no medhelm.duckdb appears there."""
    from medhelm_cli import run_main, summarize_main
    from medhelm_core import demo_server
    from medhelm_cli.imports import main as import_main
    from medhelm_cli.serve import export_main

    monkeypatch.delenv(ENV, raising=False)
    server = demo_server.serve(0)
    try:
        prod_env = tmp_path / "prod_env"
        shutil.copytree(ROOT / "examples" / "prod_env", prod_env)
        deployments = prod_env / "model_deployments.yaml"
        deployments.write_text(re.sub(r"127\.0\.0\.1:\d+", f"127.0.0.1:{server.server_address[1]}",
                                      deployments.read_text()))
        monkeypatch.chdir(ROOT)  # the example's paths are relative to the project root
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
        out, db = tmp_path / "out", tmp_path / "tables" / "example.duckdb"
        run = ["--conf-paths", "conf/example.conf", "--suite", "example", "--max-eval-instances", "10",
               "--local-path", str(prod_env), "--output-path", str(out)]
        assert run_main([*run, "--storage", f"duckdb:{db}"]) == 0
        monkeypatch.setenv(ENV, f"duckdb:{db}")
        assert summarize_main(["--suite", "example", "--output-path", str(out), "--local-path", str(prod_env),
                               "--auto-generate-schema"]) == 0
        assert run_main(run) == 0   # the stored answers are found through the environment: no new call
    finally:
        server.shutdown()
    assert (out / "runs" / "example" / "groups.json").exists() and not (out / "medhelm.duckdb").exists()
    with duckdb.connect(str(db), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM runs WHERE suite = 'example'").fetchone()[0] == 6
        calls = conn.execute("SELECT count(*) FROM completions").fetchone()[0]
        assert calls > 0 and conn.execute("SELECT count(*) FROM leaderboard.table_cells WHERE target = 'example'").fetchone()[0] > 0
    monkeypatch.delenv(ENV)
    assert export_main(["--suite", "example", "--output-path", str(out), "--storage", f"duckdb:{db}",
                        "--out", str(tmp_path / "site"), "--no-runs"]) == 0
    assert (tmp_path / "site" / "index.html").exists()
    assert export_main(["--suite", "example", "--output-path", str(out), "--out", str(tmp_path / "site2")]) == 2

    published = tmp_path / "published.duckdb"
    assert import_main(["--source", str(PUBLIC / "benchmark_output"), "--suite", "public-n50", "--no-per-instance",
                        "-o", str(tmp_path / "imported"), "--storage", f"duckdb:{published}", "-q"]) == 0
    assert not (tmp_path / "imported" / "medhelm.duckdb").exists()
    with duckdb.connect(str(published), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM published_runs").fetchone()[0] > 0


def test_resetting_a_setting_does_not_take_the_lakes_write_turn():
    """RESET (the import's memory limit given back) is a setting, as SET: no write turn to wait for."""
    assert only_reads("RESET memory_limit") and only_reads("SET memory_limit = '512MB'")
    assert not only_reads("INSERT INTO completions SELECT 1")


def test_the_journal_links_are_trusted_only_in_a_folder_no_one_else_can_write(tmp_path):
    """What the links of the host's journal folder point to is replayed into the lake: a folder that
    another user could write in (or that is not this user's) is not read."""
    import os

    from medhelm_core.lake_store import _private

    os.chmod(tmp_path, 0o700)
    folder = tmp_path / "lake"
    folder.mkdir(mode=0o700)
    assert _private(folder)
    os.chmod(folder, 0o777)
    assert not _private(folder)
    os.chmod(folder, 0o700)
    os.chmod(tmp_path, 0o777)
    assert not _private(folder)
    os.chmod(tmp_path, 0o700)
    (tmp_path / "elsewhere").symlink_to(folder)
    assert not _private(tmp_path / "elsewhere")
