"""Where the tables live: one storage setting for every command and the Dagster resource.

    --storage URL   (medhelm-run, medhelm-summarize, medhelm-import, medhelm-server, medhelm-export)
    $MEDHELM_STORAGE (the same, for Dagster runs and any command without the flag)

Values:
  duckdb:PATH      a DuckDB file anywhere; without a setting, `duckdb:<output-path>/medhelm.duckdb`
                   (the embedded default)
  ducklake:postgresql://USER[:PASSWORD]@HOST[:PORT]/DB?data_path=DIR_OR_GS_URL[&sslmode=…]
                   DuckDB's lakehouse format: its catalog in that PostgreSQL database, its data as
                   Parquet files under DIR or gs://BUCKET/PATH, shared by every process that attaches it.  Needs the
                   [ducklake] extra: DuckDB 1.5.5 and its `ducklake` and `postgres` extensions from
                   PyPI (`open_ducklake`); every command reads and writes it through
                   `lake_store.open_store`, and any number of processes on any machines share it.
HELM's files (`runs/`, `groups/`, the page's exports) stay under the output path whichever storage
holds the tables.
"""
from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional
from urllib.parse import parse_qs, unquote, urlsplit

import duckdb

from medhelm_core.errors import MedhelmError

ENV = "MEDHELM_STORAGE"
DB_FILENAME = "medhelm.duckdb"


@dataclass(frozen=True)
class Storage:
    """A resolved storage setting: 'duckdb' and the database file's path, or 'ducklake' with its
    catalog's PostgreSQL connection (libpq keywords, the password apart) and the Parquet files' folder."""

    kind: str
    path: Optional[Path] = None
    catalog: Optional[dict] = None
    data_path: Optional[str] = None
    password: Optional[str] = None   # given to libpq as $PGPASSWORD, never in a connection string

    def __str__(self) -> str:   # never the password: this is what logs and errors show
        if self.kind == "duckdb":
            return f"duckdb:{self.path}"
        c = self.catalog or {}
        return (f"ducklake:postgresql://{c.get('user', '')}@{c.get('host', '')}:{c.get('port', 5432)}/"
                f"{c.get('dbname', '')}?data_path={self.data_path}")

    @property
    def catalog_dsn(self) -> str:
        """The catalog as a libpq connection string (dbname='…' host='…' …; no password: libpq takes
        it from $PGPASSWORD or ~/.pgpass, and DuckDB's errors quote the connection string)."""
        return " ".join(f"{k}='{_libpq_value(v)}'" for k, v in (self.catalog or {}).items())


def resolve_storage(url: Optional[str], output_path: str | Path, flag: str = "--storage") -> Storage:
    """The storage of a command: its flag's URL, else $MEDHELM_STORAGE, else the output path's file."""
    if not url and os.environ.get(ENV):
        url, flag = os.environ[ENV], f"${ENV}"
    if not url:
        return Storage("duckdb", Path(output_path) / DB_FILENAME)
    return parse_storage(url, flag)


def parse_storage(url: str, flag: str = "--storage") -> Storage:
    scheme, sep, rest = url.partition(":")
    if not sep or scheme not in ("duckdb", "ducklake"):
        raise MedhelmError(f"{flag} {_shown(url)!r}: expected duckdb:PATH (a DuckDB file) or "
                           f"ducklake:postgresql://USER@HOST:PORT/DB?data_path=DIR")
    if scheme == "ducklake":
        return _parse_ducklake(url, rest, flag)
    if not rest.strip():
        raise MedhelmError(f"{flag} {url!r}: duckdb: needs the database file's path, e.g. duckdb:results/medhelm.duckdb")
    path = Path(rest).expanduser()
    if path.is_dir():
        raise MedhelmError(f"{flag} {url!r}: {path} is a folder; name the database file, e.g. duckdb:{path / DB_FILENAME}")
    return Storage("duckdb", path)


def on_ducklake(conn) -> bool:
    """Whether the connection's current database is a DuckLake (a lake store's writing cursor says so
    itself: the query costs milliseconds on a lake, in its write turn)."""
    known = getattr(conn, "on_ducklake", None)
    if isinstance(known, bool):
        return known
    rows = conn.execute("SELECT type FROM duckdb_databases() WHERE database_name = current_database()").fetchall()
    return bool(rows) and rows[0][0] == "ducklake"


def run_ddl(conn, sql: str) -> None:
    """DDL in the form the connection's current database takes (`ducklake_ddl` on a DuckLake)."""
    conn.execute(ducklake_ddl(sql) if on_ducklake(conn) else sql)


def sql_str(s: str) -> str:
    """`s` as a SQL string literal (where DuckDB takes no parameter: ATTACH, LOAD, COPY ... TO, a view's text)."""
    return "'" + s.replace("'", "''") + "'"


def _libpq_value(v) -> str:
    return str(v).replace("\\", "\\\\").replace("'", "\\'")


def _shown(url: str) -> str:
    """The URL without its password (errors and logs), up to the last @ before the host."""
    return re.sub(r"(//[^:/@]+):[^/]*@", r"\1:***@", url)


def _parse_ducklake(url: str, rest: str, flag: str) -> Storage:
    where = f"{flag} {_shown(url)!r}"
    u = urlsplit(rest)
    if u.scheme not in ("postgresql", "postgres") or not u.hostname or not u.path.strip("/"):
        raise MedhelmError(f"{where}: the catalog must be a PostgreSQL URL, "
                           f"ducklake:postgresql://USER@HOST:PORT/DB?data_path=DIR")
    query = {k: v[-1] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
    data_path = query.pop("data_path", "")
    if not data_path:
        raise MedhelmError(f"{where}: name the Parquet files' folder, ?data_path=DIR")
    if data_path.startswith("gcs://"):
        data_path = "gs://" + data_path[len("gcs://"):]
    if "://" in data_path and not data_path.startswith("gs://"):
        raise MedhelmError(f"{where}: data_path must be a folder or a Google Cloud Storage URL, gs://BUCKET/PATH")
    if data_path.startswith("gs://") and not data_path.endswith("/"):
        data_path += "/"
    try:
        port = u.port or 5432
    except ValueError:
        raise MedhelmError(f"{where}: the port must be a number") from None
    catalog = {"dbname": unquote(u.path.strip("/")), "host": u.hostname, "port": port}
    if u.username:
        catalog["user"] = unquote(u.username)
    catalog.update(query)   # other libpq keywords (sslmode=require, connect_timeout=10, …) as given
    # better in $PGPASSWORD or ~/.pgpass; given in the URL, it goes to libpq through $PGPASSWORD
    return Storage("ducklake", catalog=catalog, data_path=data_path,
                   password=unquote(u.password) if u.password else None)


# -- DuckLake ------------------------------------------------------------------------------------
# The PyPI packages that carry DuckDB's extensions for one DuckDB version each (the [ducklake] extra).
DUCKLAKE_EXTENSIONS = (("duckdb_extension_postgres_scanner", "postgres_scanner"),
                       ("duckdb_extension_ducklake", "ducklake"))
LAKE = "medhelm"   # the attached DuckLake's name in every connection


def extension_file(package: str, name: str, duckdb_version: str) -> Path:
    """The extension binary a PyPI extension package ships for this DuckDB version."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MedhelmError(f"ducklake: storage needs the [ducklake] extra (DuckDB 1.5.5 with its ducklake and "
                           f"postgres extensions): pip install \"medhelm-build[ducklake]\" ({package} is not installed)")
    path = Path(list(spec.submodule_search_locations)[0]) / "extensions" / f"v{duckdb_version}" / f"{name}.duckdb_extension"
    if not path.is_file():
        raise MedhelmError(f"ducklake: {package} has no {name} extension for DuckDB {duckdb_version} ({path} is "
                           f"missing): install the [ducklake] extra, which pins DuckDB to the extensions' version")
    return path


def attach_ducklake(conn, storage: Storage, alias: str = LAKE, read_only: bool = False) -> None:
    """Attach the DuckLake to a connection as `alias`, its extensions loaded from their PyPI packages
    (nothing downloaded); the catalog is created on the first read-write attach."""
    for pkg, name in DUCKLAKE_EXTENSIONS:
        conn.execute(f"LOAD {sql_str(str(extension_file(pkg, name, duckdb.__version__)))}")
    if storage.data_path.startswith("gs://"):
        _register_gcs(conn)
    if storage.password:   # the postgres extension opens connections later too: libpq reads it from here
        os.environ["PGPASSWORD"] = storage.password
    if not read_only and "://" not in storage.data_path:
        Path(storage.data_path).mkdir(parents=True, exist_ok=True)
    try:
        conn.execute(f"ATTACH {sql_str('ducklake:postgres:' + storage.catalog_dsn)} AS {alias} "
                     f"(DATA_PATH {sql_str(storage.data_path)}{', READ_ONLY' if read_only else ''})")
    except duckdb.Error as e:   # (libpq's message quotes the connection string, which holds no password)
        raise MedhelmError(f"{storage}: cannot attach the DuckLake: {str(e).splitlines()[0]}") from None


def _register_gcs(conn) -> None:
    """Parquet files in a gs:// bucket, read and written through gcsfs (the project's GCS client, as the
    published import's): credentials by Google's default chain (GOOGLE_APPLICATION_CREDENTIALS, the
    GKE workload identity, gcloud's); a GCS emulator ($STORAGE_EMULATOR_HOST, which gcsfs honours)
    takes none. DuckLake refuses an object-store data path unless DuckDB's httpfs extension is
    loaded, so it is, from its PyPI package; the registered gcsfs serves gs:// in its place."""
    conn.execute(f"LOAD {sql_str(str(extension_file('duckdb_extension_httpfs', 'httpfs', duckdb.__version__)))}")
    os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")   # the plain GCS client (published/source.py)
    from gcsfs.core import GCSFileSystem

    conn.register_filesystem(GCSFileSystem(token="anon" if os.environ.get("STORAGE_EMULATOR_HOST") else None))


def lake_connection():
    """A DuckDB connection that never downloads or autoloads an extension."""
    return duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})


def open_ducklake(storage: Storage, read_only: bool = False):
    """A DuckDB connection with the DuckLake attached as `medhelm` and in use."""
    conn = lake_connection()
    try:
        attach_ducklake(conn, storage, read_only=read_only)
        conn.execute(f"USE {LAKE}")
        if not read_only:   # the long JSON columns (prompts, completions, annotations) compress far better than with Snappy
            conn.execute(f"CALL {LAKE}.set_option('parquet_compression', 'zstd')")
        return conn
    except BaseException:
        conn.close()
        raise


_PRIMARY_KEY_CLAUSE = re.compile(r",\s*PRIMARY KEY\s*\([^)]*\)", re.IGNORECASE)
_PRIMARY_KEY_COLUMN = re.compile(r"\s+PRIMARY KEY\b", re.IGNORECASE)
_COMPRESSION = re.compile(r"\s+USING COMPRESSION\s+\w+", re.IGNORECASE)


def ducklake_ddl(sql: str) -> str:
    """Our DDL (sql/ddl/*.sql) in the form DuckLake takes: no PRIMARY KEY (DuckLake has no unique
    constraints; the writers keep keys unique) and no per-column compression (the lake's Parquet
    files are ZSTD-compressed as a whole)."""
    return _COMPRESSION.sub("", _PRIMARY_KEY_COLUMN.sub("", _PRIMARY_KEY_CLAUSE.sub("", sql)))


def add_storage_argument(parser) -> None:
    parser.add_argument("--storage", default=None, metavar="URL",
                        help=f"where the tables live: duckdb:PATH (default: duckdb:<output-path>/{DB_FILENAME}), "
                             f"or ducklake:postgresql://USER@HOST:PORT/DB?data_path=DIR (shared by many "
                             f"processes and machines; the [ducklake] extra); ${ENV}")
