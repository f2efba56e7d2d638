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
