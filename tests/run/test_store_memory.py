"""The store's DuckDB memory is bounded (`$MEDHELM_DUCKDB_MEMORY_LIMIT`, default 256MB), and an
import's own bound gives it back to that, not to DuckDB's 80% of the machine."""
import pytest

from medhelm_core.errors import MedhelmError
from medhelm_core.published.tables import memory_bound
from medhelm_core.store import Store


def _limit(conn) -> int:
    return conn.execute("SELECT value FROM duckdb_settings() WHERE name = 'memory_limit'").fetchone()[0]


def test_the_store_opens_with_its_memory_limit_and_imports_return_to_it(tmp_path, monkeypatch):
    monkeypatch.delenv("MEDHELM_DUCKDB_MEMORY_LIMIT", raising=False)
    store = Store(tmp_path / "a.duckdb")
    with store.connect() as conn:
        assert _limit(conn) == "244.1 MiB"   # 256MB as DuckDB prints it
        with memory_bound(conn):
            assert _limit(conn) == "488.2 MiB"   # the import's 512MB
        assert _limit(conn) == "244.1 MiB"
    monkeypatch.setenv("MEDHELM_DUCKDB_MEMORY_LIMIT", "1GB")
    store = Store(tmp_path / "b.duckdb")
    with store.connect() as conn:
        assert _limit(conn) == "953.6 MiB"


@pytest.mark.parametrize("value, why", [
    ("lots", "must be a size such as 256MB or 2GB"), ("512", "must be a size such as 256MB or 2GB"),
    ("-5MB", "must be a size such as 256MB or 2GB"), ("0MB", "must be at least 16MB"),
    ("3kb", "must be at least 16MB"), ("15.9MB", "must be at least 16MB")])
def test_a_malformed_or_tiny_limit_is_one_line_naming_the_variable(tmp_path, monkeypatch, value, why):
    monkeypatch.setenv("MEDHELM_DUCKDB_MEMORY_LIMIT", value)
    with pytest.raises(MedhelmError, match=rf"^\$MEDHELM_DUCKDB_MEMORY_LIMIT {why}, got '{value}'$"):
        with Store(tmp_path / "c.duckdb").connect():
            pass
    assert not (tmp_path / "c.duckdb").exists()


@pytest.mark.parametrize("value, shown", [("16MB", "15.2 MiB"), ("12 GB", "11.1 GiB"), ("2gib", "2.0 GiB")])
def test_every_unit_duckdb_takes_is_taken(tmp_path, monkeypatch, value, shown):
    monkeypatch.setenv("MEDHELM_DUCKDB_MEMORY_LIMIT", value)
    with Store(tmp_path / "d.duckdb").connect() as conn:
        assert _limit(conn) == shown
