"""A SIGTERM (a batch system's stop, ``kill``) ends a kerntune command as Ctrl-C does: the command's
interrupt path runs, so a model command a ``cmd:`` provider started is ended with it and the run can be
resumed.  Before, Python died at once (no ``finally``, no exit handler): the model process kept running
and nothing said how to resume.  A scripted model (a shell script that never answers) in a real process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cli_runs import PACKAGE_ROOT, no_llm_env
from processes import alive

ROOT = Path(__file__).resolve().parents[1]


def test_scripted_model_sigterm_ends_tune_like_ctrl_c_and_ends_the_model_command(tmp_path: Path) -> None:
    pidfile = tmp_path / "model.pid"
    model = tmp_path / "model.sh"
    model.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 300\n")
    model.chmod(0o755)
    env = dict(no_llm_env(), PYTHONPATH=str(PACKAGE_ROOT), KERNTUNE_STORE=str(tmp_path / "store.db"))
    proc = subprocess.Popen([sys.executable, "-m", "kerntune", "tune", "--replay",
                             str(ROOT / "examples/spaces/matmul_256x8192x8192_h100.json.gz"), "--strategy", "llm",
                             "--llm", f"cmd:{model}", "--llm-timeout", "600", "--budget", "40", "--no-report"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    pid = None
    try:
        deadline = time.monotonic() + 120
        while pid is None and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
            if pidfile.exists() and pidfile.read_text().strip():
                pid = int(pidfile.read_text())
        assert pid is not None and alive(pid), "the model command never started"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        deadline = time.monotonic() + 10
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(pid), f"the model command outlived kerntune: {err[-1500:]}"
        assert proc.returncode != -signal.SIGTERM and "Traceback" not in err, (proc.returncode, err[-1500:])
        assert "--resume" in err + out, (out[-800:], err[-1500:])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        if pid is not None and alive(pid):
            os.kill(pid, signal.SIGKILL)
