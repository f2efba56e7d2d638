"""A child in a session of its own (a ``cmd:`` model, a transform worker) ends when its tuner's whole
process group is SIGKILLed, not only when the tuner alone is.  Real processes, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from processes import alive

ROOT = Path(__file__).resolve().parent.parent

#: A tuner: starts a child in its own session under ``watch_group``, prints the child's pid, waits.
TUNER = """
import subprocess, sys, time
from kerntune.procs import watch_group
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"], start_new_session=True)
watch = watch_group(child)
print(child.pid, flush=True)
time.sleep(3600)
"""


def test_a_child_in_its_own_session_ends_when_its_tuners_whole_group_is_killed() -> None:
    """The watchdog sat in the tuner's process group, so ``kill -9 -PGID`` (the transform test's kill of
    a tuner, a job runner ending the group) took it too and the child slept on for an hour."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    tuner = subprocess.Popen([sys.executable, "-c", TUNER], stdout=subprocess.PIPE, text=True, env=env,
                             start_new_session=True)
    child = 0
    try:
        child = int(tuner.stdout.readline())
        time.sleep(0.5)
        os.killpg(tuner.pid, signal.SIGKILL)
        tuner.wait(timeout=10)
        deadline = time.monotonic() + 10
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(child)
    finally:
        if tuner.poll() is None:
            tuner.kill()
        if child and alive(child):
            os.kill(child, signal.SIGKILL)
