"""kerntune: GPU kernel tuning with a language model in the loop.

``kerntune.autotune`` (the decorator) and the Python API (``kerntune.tune``,
``kerntune.compare`` and their result types, see ``kerntune.api``) are
imported on first use, so that ``import kerntune`` stays light for worker
processes and the CLI.
"""

import sys
import types
from typing import Any

__version__ = "0.1.0"

_API = ("tune", "TuneResult", "ComparisonResult", "StrategyScore")
#: The errors a user can fix (``kerntune.errors``): a bad argument to the API is a KerntuneError.
_ERRORS = ("KerntuneError", "SpaceError", "FormatError", "StoreError")
__all__ = ["autotune", "Autotuned", "compare", *_API, *_ERRORS]


def __getattr__(name: str) -> Any:
    if name in ("autotune", "Autotuned"):
        from kerntune import decorator as _module

        return getattr(_module, name)
    if name in _API:
        from kerntune import api as _api

        return getattr(_api, name)
    if name in _ERRORS:
        from kerntune import errors as _errors

        return getattr(_errors, name)
    raise AttributeError(f"module 'kerntune' has no attribute {name!r}")


class _Compare:
    """``kerntune.compare``: both the API call and the ``kerntune.compare`` subpackage.

    Why: the name is taken by the subpackage (the comparison harness), and Python sets
    ``kerntune.compare`` to the subpackage whenever it is first imported, which would
    replace a plain function.  Calling this runs :func:`kerntune.api.compare`; any other
    name is the subpackage's (``kerntune.compare.run_compare``), imported on first use.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from kerntune.api import compare

        return compare(*args, **kwargs)

    @property
    def __wrapped__(self) -> Any:  # inspect.signature(kerntune.compare) shows the API's
        from kerntune.api import compare

        return compare

    @property
    def __doc__(self) -> str | None:  # type: ignore[override]
        return self.__wrapped__.__doc__

    def __getattr__(self, name: str) -> Any:
        import importlib

        return getattr(importlib.import_module("kerntune.compare"), name)

    def __repr__(self) -> str:
        return "<function kerntune.compare (and the kerntune.compare package)>"


class _Kerntune(types.ModuleType):
    @property
    def compare(self) -> _Compare:
        return _COMPARE

    @compare.setter
    def compare(self, value: Any) -> None:
        """The import system sets the subpackage here on its first import; _Compare reaches it
        through sys.modules, so nothing is kept."""


_COMPARE = _Compare()
sys.modules[__name__].__class__ = _Kerntune
