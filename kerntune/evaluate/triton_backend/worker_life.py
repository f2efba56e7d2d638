"""A worker's life bound to its tuner's: workers run in sessions of their own (so a hung kernel's
process group can be killed whole), which a SIGTERM or SIGKILL of the tuner does not reach, so each
watches the tuner's pid and ends itself, with its group, once the tuner is gone: benchmark workers
by a thread, compile workers by a watchdog process (``watchdog_process``) and between tasks.  And
their turns on one GPU (``gpu_turn``): no compile worker's start-up runs while a config is timed."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Iterator


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


def _ppid_of(pid: int) -> int | None:
    """The parent pid of process ``pid`` from /proc (None: gone, or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


#: The watchdog's program (``watchdog_process``): argv = worker pid, tuner pid, interval in seconds.
_WATCHDOG = """
import os, signal, sys, time
worker, parent, interval = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C to the group is the worker's to handle
def ppid(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None
while os.getppid() == worker:
    if ppid(worker) != parent:
        os.killpg(worker, signal.SIGKILL)
    time.sleep(interval)
"""


def watchdog_process(interval_s: float = 0.5) -> subprocess.Popen[bytes] | None:
    """Start a watchdog that kills this worker's process group once the tuner is gone; None where
    that cannot be done (no /proc, no group of its own): the idle check alone then serves.

    Why a process: a compile worker checks its tuner between tasks only (it runs no thread, see
    ``exit_with_parent``), so one stuck in a long compile (ptxas on a huge tile: minutes) outlived a
    tuner killed with SIGKILL by as long.  The watchdog is a fresh interpreter (``-S``, no site
    packages: milliseconds), not a fork (a worker holds BLAS threads by then), holds none of the
    worker's pipes (its crash still reaches the tuner as end-of-file at once), sits in the worker's
    process group (the kill takes it, and the compiler's own children, along) and ends by itself
    when the worker does."""
    worker, parent = os.getpid(), _watched_parent()
    if _ppid_of(worker) != os.getppid() or os.getpgrp() != worker:
        return None
    try:
        return subprocess.Popen([sys.executable, "-S", "-c", _WATCHDOG, str(worker), str(parent), str(interval_s)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:  # no process to spare: the idle check alone
        return None


def _idle_watching(fd: int, check: Callable[[], None], interval_s: float = 0.5) -> Callable[[], bool]:
    """``read_tasks``' idle callback for a worker without a watcher thread: checks the parent, then waits
    up to ``interval_s`` for the next task (``read_tasks`` then reads it)."""
    def idle() -> bool:
        check()
        select.select([fd], [], [], interval_s)
        return True
    return idle


#: The longest a worker waits for its turn on the GPU (``gpu_turn``) before it goes on without it: as
#: long as a compile worker's start-up may take before the tuner kills it (``worker_proc.STARTUP_S``).
TURN_WAIT_S = 180.0


class _TurnTimeout(Exception):
    """Raised by SIGALRM in ``_lock_within``: the wait for the GPU lock is over."""


def _lock_within(fd: int, op: int, wait_s: float) -> bool:
    """``flock(fd, op)``, blocking at most ``wait_s`` seconds; False where it timed out.

    Blocking, not polling: a poll could miss every short gap between the benchmark worker's timed
    windows, while a blocked waiter is woken as soon as one opens.  SIGALRM bounds it (main thread)."""
    def expire(signum: int, frame: Any) -> None:
        raise _TurnTimeout()

    old = signal.signal(signal.SIGALRM, expire)
    try:
        try:
            signal.setitimer(signal.ITIMER_REAL, wait_s)
            fcntl.flock(fd, op)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        return True
    except _TurnTimeout:  # (landing just after flock returned, the lock is held anyway: the close frees it)
        return False
    finally:
        signal.signal(signal.SIGALRM, old)


_lock_failed = False  # a lock that cannot be taken was said once (``_locked``)


def _locked(fd: int, op: int, path: str, wait_s: float | None = None) -> bool | None:
    """``flock(fd, op)`` (blocking at most ``wait_s`` seconds where given): True where held, False where
    busy or timed out, None where the lock cannot be taken at all (said once on stderr; the worker goes
    on without it).  Why: only BlockingIOError was caught, and any other error of flock (NFS, which
    emulates it with fcntl locks: EBADF, ENOLCK; ENOSYS) killed every benchmark worker at start-up."""
    global _lock_failed
    try:
        if wait_s is None:
            fcntl.flock(fd, op)
            return True
        return _lock_within(fd, op, wait_s)
    except BlockingIOError:
        return False
    except OSError as exc:
        if not _lock_failed:
            _lock_failed = True
            print(f"kerntune: GPU lock {path} cannot be taken ({exc}); going on without it", file=sys.stderr)
        return None


@contextlib.contextmanager
def gpu_turn(path: str | None, exclusive: bool, say: Callable[[dict[str, Any]], None],
             wait_s: float = TURN_WAIT_S) -> Iterator[None]:
    """Hold this worker's GPU lock (``path``, one per GPU per evaluator) for the block.

    Compile workers run GPU work at start-up (``make_inputs``: a package kernel's call launches its
    other kernels for real), and once nothing synchronised it with the benchmark worker, a compile
    worker restarted after a timeout ran it inside a config's timed window, and the package's own
    autotune (the baseline) ran against fifteen such start-ups.  So compile workers hold the lock
    shared around that start-up (they still start in parallel), and benchmark workers exclusive around
    their own start-up and each timed window.  A worker that has to wait says ``{"gpu": "waiting"}``,
    then ``{"gpu": "held"}``, so that its parent does not charge the wait to the task
    (``_Worker.receive``); after ``wait_s`` it goes on without the lock (a hung start-up is killed
    by its own time limit meanwhile).  A worker that dies holding it releases it (flock).  None: no
    lock (a worker started by other code)."""
    fd = -1
    if path:
        # open for writing: NFS emulates flock with fcntl locks, whose exclusive lock needs it (EBADF)
        for mode in (os.O_RDWR, os.O_RDONLY):
            try:
                fd = os.open(path, mode)
                break
            except OSError:  # the evaluator was closed: no one to share the GPU with
                fd = -1
    try:
        op = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        if fd >= 0 and _locked(fd, op | fcntl.LOCK_NB, path) is False:
            say({"gpu": "waiting"})
            if _locked(fd, op, path, wait_s) is False:
                print(f"kerntune: GPU lock not free after {wait_s:g} s; going on without it", file=sys.stderr)
            say({"gpu": "held"})
        yield
    finally:
        if fd >= 0:
            os.close(fd)  # releases the lock
