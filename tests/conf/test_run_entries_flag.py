"""helm-run's `--run-entries` (`-r`): descriptions given on the command line, with or instead of confs."""
from medhelm_cli import run_main
from tests.oracle import SYNTHETIC

PROD_ENV = str(SYNTHETIC / "inputs" / "prod_env")
ENTRY = "pubmed_qa:model=mockai/mock-gpt-a,model_deployment=mockai/mock-gpt-a"


def test_run_entries_instead_of_confs(capsys, tmp_path):
    assert run_main(["--run-entries", ENTRY, "--suite", "s", "--max-eval-instances", "2", "--dry-run",
                     "--local-path", PROD_ENV, "--output-path", str(tmp_path)]) == 0
    assert capsys.readouterr().out.split() == ["pubmed_qa:model=mockai_mock-gpt-a,model_deployment=mockai_mock-gpt-a"]


def test_run_entries_beside_a_conf_and_the_short_flags(capsys, tmp_path):
    conf = tmp_path / "c.conf"
    conf.write_text('entries: [{description: "medhallu:model=mockai/mock-gpt-b,model_deployment=mockai/mock-gpt-b", '
                    'priority: 2}]\n')
    assert run_main(["-c", str(conf), "-r", ENTRY, "--suite", "s", "--max-eval-instances", "2", "--dry-run",
                     "--local-path", PROD_ENV, "--output-path", str(tmp_path)]) == 0
    assert capsys.readouterr().out.split() == ["medhallu:model=mockai_mock-gpt-b,model_deployment=mockai_mock-gpt-b",
                                               "pubmed_qa:model=mockai_mock-gpt-a,model_deployment=mockai_mock-gpt-a"]
    # run entries have priority 1 (HELM): --priority 1 keeps them and drops the conf's priority-2 line
    assert run_main(["-c", str(conf), "-r", ENTRY, "--suite", "s", "--max-eval-instances", "2", "--dry-run",
                     "--priority", "1", "--local-path", PROD_ENV, "--output-path", str(tmp_path)]) == 0
    assert capsys.readouterr().out.split() == ["pubmed_qa:model=mockai_mock-gpt-a,model_deployment=mockai_mock-gpt-a"]


def test_nothing_to_run_is_one_line(capsys, tmp_path):
    assert run_main(["--suite", "s", "--max-eval-instances", "2", "--output-path", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["medhelm-run: error: nothing to run: give --conf-paths FILE ... and/or --run-entries DESCRIPTION ..."]
