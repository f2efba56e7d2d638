"""Errors that a user can fix, kept apart from bugs.

Anything raised as :class:`KerntuneError` is shown by the CLI as one line and
exit code 2; anything else is a bug in kerntune and keeps its traceback.
"""

from __future__ import annotations


class KerntuneError(Exception):
    """A problem with the user's input or environment (bad file, bad option)."""


class SpaceError(KerntuneError):
    """A search space that is malformed or a config that does not fit it."""


class FormatError(KerntuneError):
    """A recorded-measurement file that kerntune cannot read."""


class StoreError(KerntuneError):
    """The SQLite store cannot be opened, written or resumed."""
