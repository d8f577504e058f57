import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DAGSTER_DISABLE_TELEMETRY", "1")


@pytest.fixture(scope="session")
def mock_server():
    from tests.mock_server import MockServer

    server = MockServer()
    yield server
    server.close()
