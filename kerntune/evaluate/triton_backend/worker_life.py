"""A worker's life bound to its tuner's: workers run in sessions of their own (so a hung kernel's
process group can be killed whole), which a SIGTERM or SIGKILL of the tuner does not reach, so each
watches the tuner's pid and ends itself, with its group, once the tuner is gone."""

from __future__ import annotations

import os
import select
import signal
import threading
import time
from typing import Callable


def _watched_parent() -> int:
    """The tuner's pid: ``$KERNTUNE_WORKER_PARENT`` (set by the evaluator), the parent at start otherwise."""
    try:
        return int(os.environ.get("KERNTUNE_WORKER_PARENT") or os.getppid())
    except ValueError:
        return os.getppid()


def _exit_if_orphaned(parent: int) -> None:
    """End this worker, and its process group where it leads one, if the tuner ``parent`` is gone."""
    if os.getppid() != parent:
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpid(), signal.SIGKILL)
        os._exit(4)


def exit_with_parent(interval_s: float = 0.5, thread: bool = True) -> Callable[[], None]:
    """End this worker (and its process group: it leads one) once the tuner that started it is gone.

    Workers run in sessions of their own, so a SIGTERM or SIGKILL of the tuner reaches none of them,
    and a worker hung in a kernel would hold its GPU for ever.  PR_SET_PDEATHSIG cannot serve: it fires
    when the parent *thread* ends, and workers are restarted from the tuner's pool threads.  So the
    parent pid is watched (``$KERNTUNE_WORKER_PARENT``, set by the evaluator; the pid at start otherwise):
    by a thread (``thread=True``: benchmark workers, which may hang in a kernel), else by the caller, which
    calls the check this returns while it waits for tasks.  Compile workers take the latter: they fork
    (``fork_compile``), and a fork from a process with a thread may deadlock (Python 3.12 warns on each).
    Their stdin's end-of-file ends them as well where the tuner died."""
    parent = _watched_parent()
    if thread:
        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(interval_s)
            _exit_if_orphaned(parent)

        threading.Thread(target=watch, name="kerntune-parent-watch", daemon=True).start()
    return lambda: _exit_if_orphaned(parent)


def _idle_watching(fd: int, check: Callable[[], None], interval_s: float = 0.5) -> Callable[[], bool]:
    """``read_tasks``' idle callback for a worker without a watcher thread: checks the parent, then waits
    up to ``interval_s`` for the next task (``read_tasks`` then reads it)."""
    def idle() -> bool:
        check()
        select.select([fd], [], [], interval_s)
        return True
    return idle
