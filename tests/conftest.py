import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DAGSTER_DISABLE_TELEMETRY", "1")

# absl's logging (imported by rouge_score) binds its handler to the sys.stderr of the moment it is
# imported; inside a test that is pytest's capture file, closed after the test, and a later test that
# logs through the root logger then fails on the closed file. Bind it to the real stderr.
try:
    from absl import logging as _absl_logging

    _absl_logging.get_absl_handler().python_handler.stream = sys.__stderr__
except ImportError:  # pragma: no cover - rouge_score (and absl) are dependencies
    pass


@pytest.fixture(scope="session")
def mock_server():
    from tests.mock_server import MockServer

    server = MockServer()
    yield server
    server.close()
