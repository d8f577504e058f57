"""The one user-facing error type, at the bottom of the house so every floor can raise it, and the
one way a message quotes a value the user gave (`shorten`): a 20 MB run-entry description or path
is shown as its first characters and its length, never echoed whole."""
from __future__ import annotations

import re

SHOWN_CHARS = 160      # of one quoted value
MESSAGE_CHARS = 2000   # of a whole message (each long value in it shortened first)
_LONG_RUN = re.compile(r"\S{%d,}" % (SHOWN_CHARS + 40))


def shorten(value, limit: int = SHOWN_CHARS) -> str:
    """`value` as text, at most about `limit` characters: a longer one keeps its head and says how
    long it was ("xxxx… (2,000,000 characters)"). Every message that quotes a user's value uses it."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


def one_line(message: str) -> str:
    """A message as one bounded line: newlines folded, each overlong word shortened, the whole capped."""
    text = " ".join(str(message).split()) if ("\n" in str(message) or "\r" in str(message)) else str(message)
    if len(text) > MESSAGE_CHARS:
        text = _LONG_RUN.sub(lambda m: shorten(m.group(0)), text)
    return shorten(text, MESSAGE_CHARS)


class MedhelmError(Exception):
    """A user-facing error: one line naming the file, entry or field at fault (folded to one bounded
    line, whatever the raiser put in it)."""

    def __init__(self, *args):
        if len(args) == 1 and isinstance(args[0], str):
            args = (one_line(args[0]),)
        super().__init__(*args)


DEBUG_ENV = "MEDHELM_DEBUG"


def unexpected_line(prog: str, error: BaseException) -> str:
    """The one stderr line of an error no check foresaw (a bug, a storage or network failure): its
    type and first line, never a traceback (MEDHELM_DEBUG=1 lets the command raise it instead)."""
    text = (str(error).strip().splitlines() or [""])[0]
    return one_line(f"{prog}: error: {type(error).__name__}: {text} ({DEBUG_ENV}=1 shows the traceback)")


def validation_message(exc) -> str:
    """A pydantic ValidationError in one line, WITHOUT the offending input (which could be a secret)."""
    parts = []
    for err in exc.errors(include_input=False, include_url=False):
        loc = ".".join(str(p) for p in err["loc"])
        parts.append(f"{loc}: {err['msg']}" if loc else err["msg"])
    return "; ".join(parts)


def root_error(exc: BaseException) -> BaseException:
    """The error our code raised, under the wrappers an executor puts around it (Dagster's step
    errors carry it as `user_exception` or as their cause)."""
    seen = exc
    while True:
        inner = getattr(seen, "user_exception", None) or seen.__cause__
        if inner is None or inner is seen:
            return seen
        seen = inner


def first_line(exc: BaseException) -> str:
    """One-line rendering of an exception, for MedhelmError messages."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
