import pytest

from tests.editions.new_benchmarks import ALL, new_benchmarks_run


@pytest.fixture(scope="session")
def out(tmp_path_factory):
    """medhelm 0.8.0's new benchmarks, all 26 runs of the golden conf at once, summarized."""
    return new_benchmarks_run(tmp_path_factory.mktemp("new-benchmarks"), ALL, summarize=True)
