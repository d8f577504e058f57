"""A command's failure as one line on stderr, never a traceback, ours or Dagster's."""
from __future__ import annotations

import os
import sys

from medhelm_core.errors import DEBUG_ENV, MedhelmError, root_error, unexpected_line


def one_line_errors(prog: str, command) -> int:
    """Run a command: a user's error is one line (exit 2), any other error its type and first line
    (exit 1) ($MEDHELM_DEBUG=1 raises it)."""
    try:
        return command()
    except MedhelmError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001
        if os.environ.get(DEBUG_ENV):
            raise
        err = root_error(e)
        if isinstance(err, MedhelmError):
            print(f"{prog}: error: {err}", file=sys.stderr)
            return 2
        print(unexpected_line(prog, err), file=sys.stderr)
        return 1
