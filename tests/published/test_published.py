"""Published results: import through gs:// (a local gcp-storage-emulator), rebuild, compare, re-score.

The golden HELM 0.5.16 trees in ../shared/oracle are uploaded to an emulated bucket on loopback
(the synthetic release gzip-compressed at rest, as HELM's public bucket stores objects since
2026-04) and imported with `medhelm-import --source gs://…`, the code path that reads
gs://crfm-helm-public; only STORAGE_EMULATOR_HOST differs.
"""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")   # before anything imports gcsfs

from tests.oracle import PUBLIC, SHARED, SYNTHETIC  # noqa: E402

pytest.importorskip("gcp_storage_emulator")
pytest.importorskip("gcsfs")
pytestmark = pytest.mark.skipif(not (SYNTHETIC / "benchmark_output" / "releases" / "oracle").exists()
                                or not (PUBLIC / "benchmark_output").exists(), reason="golden files not available")

ROOT = Path(__file__).resolve().parents[2]
SYN_PREFIX = "syn/benchmark_output"
PUB_PREFIX = "pub/benchmark_output"


def _public_files(rel: str) -> bool:
    """The public tree without the files nothing here reads (keeps the upload short)."""
    return not rel.endswith(("display_predictions.json", "display_requests.json", "instances.json",
                             "scenario_state.json"))


@pytest.fixture(scope="module")
def gcs():
    from tests.gcs_emulator import Emulator

    emu = Emulator()
    old = {k: os.environ.get(k) for k in emu.env()}
    os.environ.update(emu.env())
    try:
        emu.upload_tree(SYNTHETIC / "benchmark_output", SYN_PREFIX, gzip_at_rest=True)
        emu.upload_tree(PUBLIC / "benchmark_output", PUB_PREFIX, select=_public_files)
        yield emu
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        emu.close()


def run_cli(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "medhelm_cli.imports", *args], cwd=ROOT, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def do_import(out: Path, *args: str, **kwargs):
    from medhelm_core.published.importer import Importer
    from medhelm_core.published.source import open_source
    from medhelm_core.store import Store

    source = open_source(args[0])
    return Importer(Store.in_output_path(out), source, **kwargs).run()


def query(out: Path, sql: str, params=None):
    conn = duckdb.connect(str(out / "medhelm.duckdb"), read_only=True)
    try:
        return conn.execute(sql, params or []).fetchall()
    finally:
        conn.close()


def assert_all_equal(out: Path, target: str) -> tuple[int, int]:
    cells, equal, wr, wr_equal = query(out, """
        SELECT count(*), count(*) FILTER (WHERE equal),
               count(*) FILTER (WHERE column_name = 'Mean win rate' AND is_aggregate),
               count(*) FILTER (WHERE column_name = 'Mean win rate' AND is_aggregate AND equal)
        FROM leaderboard_comparison WHERE release = ?""", [target])[0]
    differing = query(out, "SELECT group_name, table_title, row_name, column_name, published_value, rebuilt_value, "
                           "cause FROM leaderboard_comparison WHERE release = ? AND NOT equal LIMIT 5", [target])
    assert cells > 0 and equal == cells, differing
    assert wr > 0 and wr_equal == wr
    return cells, wr


# ----------------------------------------------------------------------------------------------
def test_release_from_gcs_rebuilds_every_cell_and_second_import_fetches_nothing(gcs, tmp_path, monkeypatch):
    uri = gcs.uri(SYN_PREFIX)
    info = gcs.fs.info(f"{gcs.bucket}/{SYN_PREFIX}/releases/oracle/summary.json")
    assert info.get("contentEncoding") == "gzip"        # stored compressed at rest

    r = run_cli("--source", uri, "--release", "oracle", "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    valued = re.search(r"valued cells equal (\d+)/(\d+), missing on both sides (\d+) \((\d+) cells compared\)",
                       r.stdout)
    assert valued and valued[1] == valued[2] and int(valued[1]) > 0, r.stdout
    cells, wr = assert_all_equal(tmp_path, "oracle")
    assert int(valued[2]) + int(valued[3]) == int(valued[4]) == cells
    published = query(tmp_path, "SELECT count(*) FROM published_leaderboard_cells WHERE target = 'oracle'")[0][0]
    assert published == cells
    # both suites of the release, every run, and the release's own schema.json
    assert query(tmp_path, "SELECT suites FROM published_targets WHERE target = 'oracle'")[0][0] == \
        ["oracle-cfg", "oracle-private"]
    assert query(tmp_path, "SELECT count(*) FROM runs WHERE suite IN ('oracle-cfg', 'oracle-private')")[0][0] == 12
    assert query(tmp_path, "SELECT count(*) FROM published_instance_stats")[0][0] > 0
    assert query(tmp_path, "SELECT count(*) FROM published_completions")[0][0] == 0   # not asked for

    again = do_import(tmp_path, uri, release="oracle")
    assert again.fetched == 0 and again.unchanged == again.listed > 0
    rerun = run_cli("--source", uri, "--release", "oracle", "-o", str(tmp_path))   # nothing new: not rebuilt
    assert rerun.returncode == 0 and rerun.stdout.splitlines()[-1] == (
        r.stdout.splitlines()[-1].rsplit("; rebuilt in ", 1)[0] + "; not rebuilt: its inputs are those of the last rebuild")
    forced = run_cli("--source", uri, "--release", "oracle", "-o", str(tmp_path), "--rebuild")
    assert forced.returncode == 0 and "; rebuilt in " in forced.stdout.splitlines()[-1]

    # a re-upload (same bytes, new generation) is fetched again, and only it
    key = f"{SYN_PREFIX}/runs/oracle-cfg/JURY-DEMO:model=mockai_mock-gpt-a,model_deployment=mockai_mock-gpt-a/stats.json"
    gcs.put(key, (SYNTHETIC / "benchmark_output" / key.split("benchmark_output/", 1)[1]).read_bytes(),
            gzip_at_rest=True)
    third = do_import(tmp_path, uri, release="oracle")
    assert third.fetched == 1 and third.data_version != again.data_version
    from medhelm_core.published.leaderboard import rebuild_and_compare
    from medhelm_core.store import Store

    store = Store.in_output_path(tmp_path)
    summary = rebuild_and_compare(store, "oracle")       # a re-uploaded object is a new input: rebuilt
    assert not summary.unchanged and summary.equal == summary.cells == cells
    same = rebuild_and_compare(store, "oracle")
    assert same.unchanged and same.lines()[0].endswith("not rebuilt: its inputs are those of the last rebuild")
    assert (same.cells, same.equal, same.both_missing, same.win_rates) == \
        (summary.cells, summary.equal, summary.both_missing, summary.win_rates)
    with store.transaction() as conn:                    # a setting the analytics read
        conn.execute("INSERT INTO analytics_settings (bootstrap_samples, seed) VALUES (20, 1)")
    assert not rebuild_and_compare(store, "oracle").unchanged
    patterns = tmp_path / "refusals.yaml"                # a file the environment names
    patterns.write_text("patterns: ['^no$']\n")
    monkeypatch.setenv("MEDHELM_REFUSAL_PATTERNS", str(patterns))
    assert not rebuild_and_compare(store, "oracle").unchanged
    patterns.write_text("patterns: ['^never$']\n")
    assert not rebuild_and_compare(store, "oracle").unchanged
    assert rebuild_and_compare(store, "oracle").unchanged
    # Cells empty on both sides are counted apart: the headline is about cells that hold a number.
    both_missing = query(tmp_path, "SELECT count(*) FILTER (both_missing), count(*) FILTER ("
                                   "published_value IS NULL AND rebuilt_value IS NULL) FROM leaderboard_comparison"
                                   " WHERE release = 'oracle'")[0]
    assert both_missing[0] == both_missing[1] == summary.both_missing > 0
    assert 0 < summary.valued == summary.valued_equal < summary.cells
    assert (f"valued cells equal {summary.valued}/{summary.valued}, missing on both sides {summary.both_missing}"
            in summary.lines()[0])


def test_suite_without_release_from_gcs(gcs, tmp_path):
    """The public oracle has a suite (public-n50) and no release: --suite imports it."""
    r = run_cli("--source", gcs.uri(PUB_PREFIX), "--suite", "public-n50", "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert_all_equal(tmp_path, "public-n50")
    assert query(tmp_path, "SELECT count(*) FROM published_runs")[0][0] == 28


@pytest.mark.parametrize("commit_seconds, committed", [("0", 16), ("3600", 0)])
def test_killed_import_resumes_without_duplicates(gcs, tmp_path, commit_seconds, committed):
    """Killed inside its third batch: with a commit after every batch, the two before it are kept;
    with one transaction over all batches (the default commits every 30 s), nothing is."""
    uri = gcs.uri(SYN_PREFIX)
    env = {"MEDHELM_IMPORT_BATCH_OBJECTS": "8", "MEDHELM_IMPORT_CRASH_AFTER": "21",
           "MEDHELM_IMPORT_COMMIT_SECONDS": commit_seconds}
    killed = run_cli("--source", uri, "--release", "oracle", "--with-completions", "-o", str(tmp_path), env=env)
    assert killed.returncode == 75, killed.stderr
    assert query(tmp_path, "SELECT count(*) FROM published_objects")[0][0] == committed
    if committed == 0:   # nothing half-written: the documents and runs of the batches before went too
        assert query(tmp_path, "SELECT (SELECT count(*) FROM published_documents) + (SELECT count(*) "
                               "FROM published_runs)")[0][0] == 0

    resumed = do_import(tmp_path, uri, release="oracle", with_completions=True)
    assert resumed.unchanged == committed and resumed.fetched == resumed.listed - committed

    clean = tmp_path / "clean"
    do_import(clean, uri, release="oracle", with_completions=True)
    for table, key in [("published_objects", "source, key"), ("published_runs", "suite, run_name"),
                       ("published_run_stats", "suite, run_name, ordinal"),
                       ("published_instance_entries", "suite, run_name, entry_pos"),
                       ("published_request_states", "suite, run_name, position"),
                       ("published_annotations", "suite, run_name, position, annotator"),
                       ("published_annotation_entries", "suite, run_name, position, annotator, entry"),
                       ("published_documents", "target, name"), ("runs", "suite, run_name"),
                       ("run_stats", "suite, run_name, ordinal")]:
        n, distinct = query(tmp_path, f"SELECT count(*), count(DISTINCT ({key})) FROM {table}")[0]
        assert n == distinct == query(clean, f"SELECT count(*) FROM {table}")[0][0], table
    from medhelm_core.published.leaderboard import rebuild_and_compare
    from medhelm_core.store import Store

    s = rebuild_and_compare(Store.in_output_path(tmp_path), "oracle")
    assert s.equal == s.cells > 0


def test_corrupt_and_missing_objects_are_reported_and_the_rest_imports(gcs, tmp_path):
    prefix = "broken/benchmark_output"
    gcs.upload_tree(SYNTHETIC / "benchmark_output", prefix, gzip_at_rest=True,
                    select=lambda rel: not rel.endswith(("display_predictions.json", "display_requests.json")))
    cfg = "runs/oracle-cfg/ROUGE-DEMO:model=mockai_mock-gpt-b,model_deployment=mockai_mock-gpt-b"
    priv = "runs/oracle-private/mental_health:model=mockai_mock-gpt-a,model_deployment=mockai_mock-gpt-a"
    other = "runs/oracle-private/shc_ptbm_med:model=mockai_mock-gpt-b,model_deployment=mockai_mock-gpt-b"
    gcs.put(f"{prefix}/{cfg}/stats.json", b'[{"name": {"name": "exact_match", "split": "te', gzip_at_rest=True)
    gcs.delete(f"{prefix}/{priv}/stats.json")
    gcs.put(f"{prefix}/{other}/per_instance_stats.json", b"[{not json", gzip_at_rest=True)
    uri = gcs.uri(prefix)

    # small batches in one transaction: a corrupt object aborts it, and every batch of it is ingested again
    r = run_cli("--source", uri, "--release", "oracle", "-o", str(tmp_path),
                env={"MEDHELM_IMPORT_BATCH_OBJECTS": "4", "MEDHELM_IMPORT_COMMIT_SECONDS": "3600"})
    assert r.returncode == 0, r.stderr
    assert f"warning: corrupt: {uri}/{cfg}/stats.json" in r.stderr
    assert f"warning: missing: {uri}/{priv}/stats.json" in r.stderr
    assert f"warning: corrupt: {uri}/{other}/per_instance_stats.json" in r.stderr
    assert "10 runs in 2 suite(s)" in r.stdout
    problems = query(tmp_path, "SELECT uri, problem FROM published_problems WHERE target = 'oracle' ORDER BY uri")
    assert sorted(problems) == sorted([(f"{uri}/{cfg}/stats.json", "corrupt"), (f"{uri}/{priv}/stats.json", "missing"),
                                       (f"{uri}/{other}/per_instance_stats.json", "corrupt")])
    n_runs = query(tmp_path, "SELECT count(DISTINCT (suite, run_name)) FROM published_run_stats")[0][0]
    assert n_runs == 10
    assert query(tmp_path, "SELECT count(DISTINCT (suite, run_name)) FROM published_instance_entries")[0][0] == 11
    # the leaderboard differs exactly where the two runs are missing, and says so
    causes = query(tmp_path, "SELECT DISTINCT cause FROM leaderboard_comparison WHERE NOT equal")
    assert causes and all(c[0] for c in causes)

    # fixing the object: only it is fetched, and the problem goes away
    good = (SYNTHETIC / "benchmark_output" / cfg / "stats.json").read_bytes()
    gcs.put(f"{prefix}/{cfg}/stats.json", good, gzip_at_rest=True)
    fixed = do_import(tmp_path, uri, release="oracle")
    assert fixed.fetched == 1
    assert [p.problem for p in fixed.problems].count("corrupt") == 1     # the per-instance file remains


def test_offline_gcs_fails_fast_with_one_line(tmp_path):
    """No network (or nothing listening): one line suggesting the local form, in seconds."""
    env = {k: v for k, v in os.environ.items() if k != "STORAGE_EMULATOR_HOST"}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    cases = [["--endpoint-url", dead]]
    try:
        socket.getaddrinfo("storage.googleapis.com", 443)
    except OSError:
        cases.append([])          # really offline: the real bucket address must fail fast too
    for extra in cases:
        start = time.time()
        r = subprocess.run([sys.executable, "-m", "medhelm_cli.imports", "--source",
                            "gs://crfm-helm-public/medhelm/benchmark_output", "--release", "v2.0.0",
                            "-o", str(tmp_path), *extra], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=60)
        assert time.time() - start < 20
        assert r.returncode == 2
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1, r.stderr
        assert "cannot reach" in lines[0] and "--source /path/to/local/benchmark_output --release v2.0.0" in lines[0]


def test_rescore_published_completions_offline(gcs, tmp_path):
    r = run_cli("--source", gcs.uri(SYN_PREFIX), "--release", "oracle", "--rescore", "-o", str(tmp_path),
                "--local-path", str(SYNTHETIC / "inputs" / "prod_env"))
    assert r.returncode == 0, r.stderr
    n, equal, runs = query(tmp_path, "SELECT count(*), count(*) FILTER (WHERE equal), count(DISTINCT (suite, run_name)) "
                                     "FROM rescore_comparison WHERE published_count IS NOT NULL")[0]
    assert runs == 12 and n > 10000 and equal == n
    assert query(tmp_path, "SELECT count(*) FROM published_annotations")[0][0] > 0
    assert query(tmp_path, "SELECT count(*) FROM published_completions WHERE completion IS NULL")[0][0] == 0
    # the annotation entries taken out at import: every entry of HELM's annotations but the judge prompt
    expected = _annotation_entries(query(tmp_path, "SELECT DISTINCT suite, run_name FROM published_request_states"))
    entries_sql = "SELECT suite, run_name, position, instance_id, annotator, entry, value FROM published_annotation_entries"
    got = {(*r[:6], _canonical(r[6])) for r in query(tmp_path, entries_sql)}
    assert len(expected) >= 100 and got == expected
    # a store imported before the entries existed (or whose fill was cut short: one run still has
    # its entries) gets them on its next import (nothing fetched)
    with duckdb.connect(str(tmp_path / "medhelm.duckdb")) as conn:
        conn.execute("DELETE FROM published_annotation_entries WHERE run_name <> "
                     "(SELECT min(run_name) FROM published_annotation_entries)")
    r = run_cli("--source", gcs.uri(SYN_PREFIX), "--release", "oracle", "--with-completions", "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert {(*r[:6], _canonical(r[6])) for r in query(tmp_path, entries_sql)} == expected
    # taken a run per transaction (each run holds more request states than the chunk): the same
    from medhelm_core.published.importer import fill_annotation_entries

    with duckdb.connect(str(tmp_path / "medhelm.duckdb")) as conn:
        judged = conn.execute("SELECT count(DISTINCT (suite, run_name)) FROM published_annotation_entries").fetchone()[0]
        conn.execute("DELETE FROM published_annotation_entries")
        assert fill_annotation_entries(conn, chunk_states=1) >= judged > 1
    assert {(*r[:6], _canonical(r[6])) for r in query(tmp_path, entries_sql)} == expected


def _canonical(value):
    return None if value is None else json.dumps(json.loads(value), sort_keys=True)


def _annotation_entries(runs) -> set:
    """(suite, run, position, instance id, annotator, entry, value) of the golden scenario_state.json files."""
    out = set()
    for suite, run_name in runs:
        states = json.loads((SYNTHETIC / "benchmark_output" / "runs" / suite / run_name / "scenario_state.json")
                            .read_text())["request_states"]
        for pos, st in enumerate(states):
            for annotator, annotation in (st.get("annotations") or {}).items():
                if isinstance(annotation, dict):
                    out |= {(suite, run_name, pos, st["instance"]["id"], annotator, k,
                             None if v is None else json.dumps(v, sort_keys=True))
                            for k, v in annotation.items() if k != "prompt_text"}
    return out


def test_own_suite_and_published_release_in_one_leaderboard(tmp_path):
    """`medhelm-summarize --suites mine public-n50 --release combined`: rows from both suites."""
    from medhelm_core.store import Store
    from medhelm_core.summarize.tables import load_benchmark_output_runs

    mine_out = tmp_path / "synth"
    subprocess.run([sys.executable, str(SHARED / "tools" / "synth_release.py"),
                    str(PUBLIC / "benchmark_output" / "runs" / "public-n50"), str(mine_out), "-m", "2", "-k", "5",
                    "--suite", "mine", "--scenarios", "med_qa,pubmed_qa", "--model-names",
                    "acme/model-x,acme/model-y"], check=True, capture_output=True, timeout=300)
    out = tmp_path / "bo"
    store = Store.in_output_path(out)
    with store.transaction() as conn:          # the user's own suite (as medhelm-run would leave it)
        load_benchmark_output_runs(conn, str(mine_out), "mine")
    do_import(out, str(PUBLIC / "benchmark_output"), suite="public-n50")
    # a published suite may not take the name of a suite holding the user's runs
    from medhelm_core.errors import MedhelmError

    with pytest.raises(MedhelmError, match="--suite-prefix"):
        do_import(out, str(mine_out), suite="mine")
    prefixed = do_import(out, str(mine_out), suite="mine", suite_prefix="published-")
    assert prefixed.local_suites == ["published-mine"]

    from medhelm_cli import summarize_main

    rc = summarize_main(["--suites", "mine", "public-n50", "--release", "combined", "-o", str(out),
                         "--schema", str(ROOT / "schema" / "schema_medhelm.yaml")])
    assert rc == 0
    tables = json.loads((out / "releases" / "combined" / "groups" / "med_qa.json").read_text())
    deployments = {json.dumps(sorted(c.get("run_spec_names", []))) for row in tables[0]["rows"] for c in row[:1]}
    names = " ".join(deployments)
    assert "acme_model-x" in names and "mockai_mock-gpt-a" in names
    suites = json.loads((out / "releases" / "combined" / "runs_to_run_suites.json").read_text())
    assert set(suites.values()) == {"mine", "public-n50"}


def test_dagster_source_asset_follows_the_bucket(gcs, tmp_path):
    import dagster as dg
    from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus

    from medhelm_dagster.published import PUBLISHED_ASSETS, PublishedResource
    from medhelm_dagster.resources import MedhelmResource

    instance = dg.DagsterInstance.ephemeral()
    resources = {"published": PublishedResource(source=gcs.uri(PUB_PREFIX), suite="public-n50"),
                 "medhelm": MedhelmResource(output_path=str(tmp_path), local_path=str(PUBLIC / "inputs" / "prod_env"))}
    defs = dg.Definitions(assets=PUBLISHED_ASSETS, resources=resources)
    source, importer, comparison = PUBLISHED_ASSETS[0], PUBLISHED_ASSETS[1], PUBLISHED_ASSETS[2]

    def observe() -> str:
        from dagster._core.definitions.observe import observe as _observe

        _observe([source], instance=instance, resources=resources)
        ev = instance.get_latest_data_version_record(source.key, is_source=True)
        return ev.data_version.value if hasattr(ev, "data_version") else \
            ev.asset_observation.data_version

    def stale(key) -> StaleStatus:
        from dagster._core.loader import LoadingContextForTest

        resolver = CachingStaleStatusResolver(instance, defs.resolve_asset_graph(), LoadingContextForTest(instance))
        return resolver.get_status(key)

    v1 = observe()
    result = dg.materialize([source, importer, comparison], instance=instance, resources=resources,
                            selection=[importer.key, comparison.key])
    assert result.success
    meta = result.asset_materializations_for_node("published_leaderboard_comparison")[0].metadata
    assert meta["equal"].value == meta["cells"].value > 0
    assert stale(importer.key) == StaleStatus.FRESH
    assert observe() == v1                                     # nothing changed: same version, still fresh
    assert stale(importer.key) == StaleStatus.FRESH and stale(comparison.key) == StaleStatus.FRESH
    key = f"{PUB_PREFIX}/runs/public-n50/med_qa:model=mockai_mock-gpt-a,model_deployment=mockai_mock-gpt-a/stats.json"
    gcs.put(key, (PUBLIC / "benchmark_output" / key.split("benchmark_output/", 1)[1]).read_bytes())
    assert observe() != v1                                     # the bucket changed
    assert stale(importer.key) == StaleStatus.STALE


def test_newest_release_by_version_order():
    from medhelm_core.published.source import newest_release

    assert newest_release(["v2.0.0", "v2.10.0", "v2.9.1", "oracle", "v10"]) == "v10"
    assert newest_release(["v2.0.0", "v2.10.0", "v2.9.1", "oracle"]) == "v2.10.0"
    assert newest_release(["oracle"]) == "oracle" and newest_release([]) is None


def test_latest_release_is_listed_from_the_bucket_and_named(gcs, tmp_path):
    """`--release latest` (reproduce.sh's default): the newest of releases/ on the bucket, printed."""
    base = SYNTHETIC / "benchmark_output" / "releases" / "oracle"
    for name in ("v1.9.0", "v1.10.0"):
        for path in base.rglob("*"):
            if path.is_file():
                gcs.put(f"{SYN_PREFIX}/releases/{name}/{path.relative_to(base)}", path.read_bytes())
    r = run_cli("--source", gcs.uri(SYN_PREFIX), "--release", "latest", "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert f"newest release on {gcs.uri(SYN_PREFIX)}: v1.10.0 (of 3: oracle, v1.10.0, v1.9.0)" in r.stderr
    assert query(tmp_path, "SELECT target FROM published_targets") == [("v1.10.0",)]


def test_reproduce_offline_names_the_local_form_and_writes_nothing(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    env = {k: v for k, v in os.environ.items() if k != "STORAGE_EMULATOR_HOST"}
    out = tmp_path / "out"
    r = subprocess.run(["bash", "scripts/reproduce.sh", "--endpoint-url", dead, "-o", str(out)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    [line] = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert line.endswith("reproduce from a local copy instead: bash scripts/reproduce.sh "
                         "--source /path/to/local/benchmark_output --release <R>"), line
    assert not out.exists()


def test_a_suite_never_summarized_upstream_says_there_is_nothing_to_compare(tmp_path, capsys):
    """A suite imported with its runs but no groups/*.json (helm-summarize never ran on it): the line says so,
    instead of counting every rebuilt cell as a difference."""
    import shutil

    from medhelm_cli.imports import main as import_main

    src = tmp_path / "src"
    shutil.copytree(PUBLIC / "benchmark_output" / "runs" / "public-n50", src / "runs" / "public-n50",
                    ignore=shutil.ignore_patterns("groups", "groups.json", "summary.json", "schema.json"))
    assert import_main(["--source", str(src), "--suite", "public-n50", "-o", str(tmp_path / "out")]) == 0
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("public-n50:")][0]
    assert "no published leaderboard to compare with" in line and "rebuilt" in line and "-" not in line.split("rebuilt")[1][:3]
