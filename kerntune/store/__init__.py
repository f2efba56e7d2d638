"""Persistence of runs, trials, best configs and LLM exchanges."""

from __future__ import annotations

import threading
from pathlib import Path

from kerntune.store.sqlite import RunRecord, Store

__all__ = ["RunRecord", "Store", "thread_store"]

_by_thread: dict[tuple[str, int], Store] = {}


def thread_store(path: str | Path) -> Store:
    """The store at ``path`` for this thread, opened once per thread: a SQLite connection serves only
    the thread that opened it, and a training step's backward kernels launch from autograd's own
    thread (``kerntune exec`` and the decorator both look winners up from whatever thread launches)."""
    key = (str(path), threading.get_ident())
    if key not in _by_thread:
        _by_thread[key] = Store(path)
    return _by_thread[key]
