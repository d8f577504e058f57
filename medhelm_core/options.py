"""What a command's options must be, checked before anything is written: counts of at least one,
names usable as folder names, paths of the right kind (a file, a folder), and data files that are
regular files of a bounded size. Each check raises a one-line `MedhelmError` naming the option,
the value (shortened) and what to give instead."""
from __future__ import annotations

import math
import os
import re
import stat
from pathlib import Path
from typing import Optional

from medhelm_core.errors import MedhelmError, shorten

# A suite or release name becomes a folder (runs/<suite>/, releases/<release>/) and part of
# Dagster's partition keys (`<suite>/<run name>`): letters, digits and . _ - + only, starting with a
# letter or digit.
NAME_CHARS = "letters, digits, '.', '_', '-' and '+', starting with a letter or digit"
NAME_MAX = 100
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*\Z")

# The largest data file a scenario reads (bytes); $MEDHELM_MAX_DATA_FILE_MB overrides it.
MAX_DATA_FILE_ENV = "MEDHELM_MAX_DATA_FILE_MB"
MAX_DATA_FILE_MB_DEFAULT = 2048


def is_name(value) -> bool:
    """Whether `value` is usable as one folder name (see NAME_CHARS)."""
    return isinstance(value, str) and bool(_NAME.match(value)) and len(value) <= NAME_MAX


def check_name(flag: str, value: Optional[str]) -> None:
    """A name usable as one folder name (see NAME_CHARS)."""
    if value is None:
        return
    if not is_name(value):
        raise MedhelmError(f"{flag} {shorten(repr(value))}: a name of {NAME_CHARS} (at most {NAME_MAX} "
                           f"characters) is needed, as it names a folder")


def check_count(flag: str, value, minimum: int = 1) -> None:
    """A whole number of at least `minimum`."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise MedhelmError(f"{flag} {shorten(value)}: must be a whole number of at least {minimum}")


def check_amount(flag: str, value) -> None:
    """A finite number of at least 0 (e.g. dollars)."""
    if value is None:
        return
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise MedhelmError(f"{flag} {shorten(value)}: must be a number of at least 0")


def check_input_file(flag: str, path) -> None:
    """An existing regular file (not a folder, a device or a pipe) that can be read."""
    p = Path(path)
    shown = shorten(str(path))
    if not p.exists():
        raise MedhelmError(f"{flag} {shown}: no such file")
    if p.is_dir():
        raise MedhelmError(f"{flag} {shown}: is a folder; give a file")
    if not p.is_file():
        raise MedhelmError(f"{flag} {shown}: is not a regular file (a device or a pipe?); give a file")
    if not os.access(p, os.R_OK):
        raise MedhelmError(f"{flag} {shown}: cannot be read (permission denied)")


def check_input_folder(flag: str, path, must_exist: bool = False) -> None:
    """A folder, when it exists (`must_exist`: it must)."""
    p = Path(path)
    shown = shorten(str(path))
    if not p.exists():
        if must_exist:
            raise MedhelmError(f"{flag} {shown}: no such folder")
        return
    if not p.is_dir():
        raise MedhelmError(f"{flag} {shown}: is a file, not a folder; give a folder")


def check_output_folder(flag: str, path) -> None:
    """A folder the command may create or write in: an existing folder, or a new path whose nearest
    existing parent is a writable folder."""
    p = Path(path)
    shown = shorten(str(path))
    if p.exists() or p.is_symlink():
        if not p.is_dir():
            raise MedhelmError(f"{flag} {shown}: is a file, not a folder; give a folder (or a new path)")
        if not os.access(p, os.W_OK | os.X_OK):
            raise MedhelmError(f"{flag} {shown}: the folder cannot be written (permission denied)")
        return
    parent = p.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise MedhelmError(f"{flag} {shown}: {shorten(str(parent))} is a file, not a folder; give another path")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise MedhelmError(f"{flag} {shown}: cannot be created in {shorten(str(parent))} (permission denied)")


def max_data_file_bytes() -> int:
    raw = os.environ.get(MAX_DATA_FILE_ENV)
    if raw:
        try:
            mb = float(raw)
        except ValueError:
            raise MedhelmError(f"${MAX_DATA_FILE_ENV} {shorten(raw)!r}: must be a number of megabytes") from None
        if not mb > 0:
            raise MedhelmError(f"${MAX_DATA_FILE_ENV} {shorten(raw)!r}: must be a number of megabytes above 0")
        return int(mb * 1024 * 1024)
    return MAX_DATA_FILE_MB_DEFAULT * 1024 * 1024


def check_data_file(path: str, where: str) -> None:
    """A data file a scenario will read: a regular file (never a device such as /dev/zero, a pipe or
    a socket, which could be read forever) of at most `max_data_file_bytes()`. A folder is checked
    file by file (the files directly in it)."""
    shown = shorten(str(path))
    try:
        st = os.stat(path)
    except OSError as e:
        raise MedhelmError(f"{where}: cannot read data file {shown}: {e.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        for folder, dirs, files in os.walk(path):   # (symlinked folders are not followed)
            dirs.sort()
            for name in sorted(files):
                check_data_file(os.path.join(folder, name), where)
        return
    if not stat.S_ISREG(st.st_mode):
        raise MedhelmError(f"{where}: data file {shown} is not a regular file (a device, pipe or socket); "
                           f"give a file")
    limit = max_data_file_bytes()
    if st.st_size > limit:
        raise MedhelmError(f"{where}: data file {shown} is {_size(st.st_size)}, above the limit of {_size(limit)}; "
                           f"set ${MAX_DATA_FILE_ENV} (megabytes) higher to read it")
    if not os.access(path, os.R_OK):
        raise MedhelmError(f"{where}: data file {shown} cannot be read (permission denied)")


def _size(n: int) -> str:
    return f"{n:,} bytes" if n < 2**20 else f"{n / 2**20:,.1f} MB"


def check_run_selection(selection) -> None:
    """helm-run's selection (`selections.RunSelection`), as the command line and Dagster give it."""
    check_name("--suite", selection.suite)
    check_count("--max-eval-instances", selection.max_eval_instances)
    check_count("--num-train-trials", selection.num_train_trials)
    check_count("--priority", selection.priority, minimum=0)   # 0: only entries without a priority
    for conf in selection.conf_paths or ():
        check_input_file("--conf-paths", conf)
