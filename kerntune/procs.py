"""Ending a child process together with every process it started.

Used by the code-rewrite workers, which run model-written code, and by the ``cmd:`` model, which
runs any command the user names: both may start processes of their own (a shell-out, a
``multiprocessing`` pool, a wrapper script's grandchildren).  Each worker is started in a session of its own
(``start_new_session=True``), so it leads a process group its children inherit; when the worker
ends, however it ends, the whole group gets SIGKILL.  Waiting is done with ``WNOWAIT`` so the worker
is not reaped before the group is killed: while the leader is an unreaped zombie its pid (the group's
id) cannot be reused, so ``killpg`` can never reach a stranger's group.

What this does not catch: a process that leaves the group (``setsid``/``setpgid``, as a daemon does)
before the worker ends.  Catching those needs the kernel's help (a cgroup, or a child subreaper that
collects orphans); model code that daemonizes on purpose is outside what these limits promise.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group ``proc`` leads (started with ``start_new_session=True``); never raises."""
    if not hasattr(os, "killpg"):  # no process groups here: the process alone
        if proc.poll() is None:
            proc.kill()
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def exited(proc: subprocess.Popen, timeout: float) -> bool:
    """Wait up to ``timeout`` s for ``proc`` to exit WITHOUT reaping it (its pid stays reserved)."""
    if proc.returncode is not None:
        return True
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        try:
            if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:  # reaped elsewhere
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(delay, max(deadline - time.monotonic(), 0.0)))
        delay = min(delay * 2, 0.05)


def end_group(proc: subprocess.Popen, timeout: float = 5.0) -> bool:
    """Let ``proc`` exit within ``timeout`` s (True if it did), then kill its whole group and reap it.

    Whatever the worker's code started and left behind in its group dies with it, also when the
    worker itself ended normally."""
    ok = exited(proc, timeout)
    kill_group(proc)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    return ok


#: The group watchdog's program (``watch_group``): argv = the group's id, the tuner's pid.
_GROUP_WATCH = """
import os, signal, sys, time
group, parent = int(sys.argv[1]), int(sys.argv[2])
signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the tuner's to handle; it ends this watchdog
while os.getppid() == parent:
    time.sleep(0.5)
try:
    os.killpg(group, signal.SIGKILL)
except OSError:
    pass
"""


def watch_group(proc: subprocess.Popen) -> subprocess.Popen | None:
    """Start a watchdog that SIGKILLs the process group ``proc`` leads once this process is gone.

    Why: a child started in a session of its own is reached by no signal sent to the tuner, so a
    tuner killed with SIGKILL left it running (a ``cmd:`` model stuck on a network call, for as
    long as the call took).  The watchdog is a fresh interpreter (``-S``: milliseconds) outside the
    group, watching its own parent; the caller ends it with ``end_watch`` *before* it ends the group,
    so it can never act on a group id the system has handed out again.  None where no process can
    be started: the child then outlives a killed tuner, as before."""
    if not hasattr(os, "killpg"):
        return None
    try:
        # in a session of its own as well: a kill of the tuner's whole process group (``kill -9 -PGID``,
        # a job runner ending the group) took the watchdog with it and left the child running
        return subprocess.Popen([sys.executable, "-S", "-c", _GROUP_WATCH, str(proc.pid), str(os.getpid())],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    except OSError:
        return None


def end_watch(watch: subprocess.Popen | None) -> None:
    """End a ``watch_group`` watchdog and reap it; never raises."""
    if watch is None:
        return
    try:
        watch.kill()
        watch.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        pass
