"""Bad input: a one-line error naming the file or entry, a non-zero exit, nothing written to DuckDB."""
import shutil
import stat
from pathlib import Path

import duckdb
import pytest

from medhelm_cli import run_main
from tests.oracle import SYNTHETIC


@pytest.fixture
def work(tmp_path, monkeypatch):
    shutil.copytree(SYNTHETIC / "inputs", tmp_path / "work")
    for p in (tmp_path / "work").rglob("*"):
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dh"))
    for var in ("OPENAI_API_KEY", "MEDHELM_API_KEY_MOCKAI", "HELM_CREDENTIALS"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def _conf(work: Path, *descriptions: str) -> str:
    body = ",\n".join(f'  {{description: "{d}", priority: 1}}' for d in descriptions)
    path = work / "work" / "conf" / "bad.conf"
    path.write_text(f"entries: [\n{body}\n]\n")
    return str(path.relative_to(work))


def _run(conf: str, capsys) -> tuple[int, str]:
    code = run_main(["--conf-paths", conf, "--suite", "bad", "--max-eval-instances", "5",
                     "--output-path", "out", "--local-path", "work/prod_env"])
    err = capsys.readouterr().err.strip()
    return code, err


def _nothing_written(work: Path) -> None:
    """Not even an empty output folder (nor a Dagster home) is left behind."""
    assert not (work / "out").exists()
    assert not (work / "dh").exists()


GOOD = "shc_ptbm_med:data_path=work/private/shc_ptbm_med.csv,model=mockai/mock-gpt-a,model_deployment=mockai/mock-gpt-a"


def _assert_one_line(code, err, *needles):
    assert code != 0
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    for n in needles:
        assert n in lines[0], lines[0]


def test_unknown_scenario(work, capsys):
    code, err = _run(_conf(work, GOOD, "no_such_scenario:model=mockai/mock-gpt-a"), capsys)
    _assert_one_line(code, err, "no_such_scenario", "bad.conf")
    _nothing_written(work)


def test_malformed_conf_line(work, capsys):
    path = work / "work" / "conf" / "bad.conf"
    path.write_text('entries: [\n  {description: "x:model=a/b", priority: 1},\n  {description: "oops\n]\n')
    code, err = _run("work/conf/bad.conf", capsys)
    _assert_one_line(code, err, "bad.conf:3")
    _nothing_written(work)


def test_missing_data_file(work, capsys):
    code, err = _run(_conf(work, GOOD, GOOD.replace("shc_ptbm_med.csv", "missing.csv")), capsys)
    _assert_one_line(code, err, "work/private/missing.csv")
    _nothing_written(work)


def test_unknown_deployment(work, capsys):
    code, err = _run(_conf(work, GOOD.replace("model_deployment=mockai/mock-gpt-a", "model_deployment=mockai/nope")),
                     capsys)
    _assert_one_line(code, err, "mockai/nope")
    _nothing_written(work)


def test_missing_api_key(work, capsys):
    (work / "work" / "prod_env" / "credentials.conf").write_text("# no keys\n")
    code, err = _run(_conf(work, GOOD), capsys)
    _assert_one_line(code, err, "mockai/mock-gpt-a", "mockaiApiKey")
    _nothing_written(work)


def test_malformed_judges_file(work, capsys):
    (work / "work" / "private" / "jury_config.yaml").write_text("judges: [ {name: gpt, model: }\n")
    desc = ("mental_health:data_path=work/private/mental_health.csv,jury_config_path=work/private/jury_config.yaml,"
            "model=mockai/mock-gpt-a,model_deployment=mockai/mock-gpt-a")
    code, err = _run(_conf(work, desc), capsys)
    _assert_one_line(code, err, "jury_config.yaml")
    _nothing_written(work)


def test_secret_never_printed(work, capsys):
    (work / "work" / "prod_env" / "credentials.conf").write_text('mockaiApiKey: "sk-VERY-SECRET-42"\n')
    code, err = _run(_conf(work, GOOD.replace("model_deployment=mockai/mock-gpt-a", "model_deployment=mockai/nope")),
                     capsys)
    assert code != 0 and "VERY-SECRET" not in err


def test_summarize_of_a_suite_that_does_not_exist(work, capsys):
    from medhelm_cli import summarize_main

    for extra in ([], ["--auto-generate-schema"]):  # nothing run yet: no file at all
        code = summarize_main(["--suite", "nope", "--output-path", "out", *extra])
        _assert_one_line(code, capsys.readouterr().err, "medhelm-summarize: error:", "no runs in out")
        assert code == 2
        _nothing_written(work)
    # a file holding another suite: name the one asked for and the ones there
    from medhelm_core.store import Store

    with Store(work / "out" / "medhelm.duckdb").transaction() as conn:
        conn.execute("INSERT INTO runs (suite, run_name, run_spec) VALUES ('real', 'r1', '{}'), ('other', 'r2', '{}')")
    before = sorted(p.relative_to(work) for p in (work / "out").rglob("*"))
    for extra in ([], ["--auto-generate-schema"]):
        code = summarize_main(["--suite", "nope", "--output-path", "out", *extra])
        _assert_one_line(code, capsys.readouterr().err, "suite 'nope' has no runs", "suites there: other, real")
        assert code == 2
    code = summarize_main(["--release", "r", "--suites", "real", "nope", "--output-path", "out"])
    _assert_one_line(code, capsys.readouterr().err, "suite 'nope' has no runs")
    assert sorted(p.relative_to(work) for p in (work / "out").rglob("*")) == before  # nothing written
