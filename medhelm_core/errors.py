"""The one user-facing error type, at the bottom of the house so every floor can raise it."""


class MedhelmError(Exception):
    """A user-facing error: one line naming the file, entry or field at fault."""
