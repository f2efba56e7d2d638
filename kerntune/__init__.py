"""kerntune: GPU kernel tuning with a language model in the loop.

``kerntune.autotune`` (the decorator) is imported on first use, so that
``import kerntune`` stays light for worker processes and the CLI.
"""

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in ("autotune", "Autotuned"):
        from kerntune import decorator as _module

        return getattr(_module, name)
    raise AttributeError(f"module 'kerntune' has no attribute {name!r}")
