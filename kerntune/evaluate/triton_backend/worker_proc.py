"""One worker process of the Triton evaluator (``kerntune.evaluate.triton_backend.worker``) and its
pipe: tasks out as JSON lines, results back, restarts after a crash or a timeout.  Moved out of
``evaluator``, which re-exports ``_Worker`` and ``STARTUP_S``."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from kerntune.evaluate.triton_backend.worker_life import TURN_WAIT_S
from kerntune.procs import kill_group


#: Extra seconds a fresh worker may take before its first answer (its start-up).
STARTUP_S = 180.0


class _Worker:
    """One worker process and its pipe; restarted after a crash or timeout.

    A result that failed because the worker died or hung says so beside its status: ``startup``
    where the worker never got ready (the config never ran: the caller may give it to another GPU),
    ``default_failed`` and ``retry`` where the default config, launched as the reference of a kernel
    file without ``reference()``, hung or killed it (the config never ran: the caller sends it
    again, telling the worker to skip the default), ``reference_failed`` and ``retry`` where the
    file's own ``reference()`` did (the config never ran, and no worker can skip ``reference()``: the
    caller fails every config with it from then on).  The reference and the config behind it have a
    timeout each, counted from the worker's word that each begins: a slow reference that returns does
    not eat the config's time.  ``halt()`` stops a worker for good until ``resume()``: its task in
    flight is killed and no task is sent (a stream left early)."""

    def __init__(self, path: str, shape: tuple[int, ...], env: dict[str, str], compile_only: bool = False,
                 memory_mb: int = 0, keep_warm: bool = False, gpu_lock: str | None = None) -> None:
        """``gpu_lock``: the lock file of this worker's GPU (``worker_life.gpu_turn``), None for none."""
        self.args = [sys.executable, "-m", "kerntune.evaluate.triton_backend.worker", path,
                     "x".join(map(str, shape))] + (["--compile-only"] if compile_only else []) \
            + ([f"--memory-mb={memory_mb}"] if memory_mb > 0 else []) + (["--keep-warm"] if keep_warm else []) \
            + ([f"--gpu-lock={gpu_lock}"] if gpu_lock else [])
        self.env = env
        self.name = os.path.basename(path)  # the kernel file, for what a reference() that failed says
        self.proc: subprocess.Popen[str] | None = None
        self._buf = b""  # bytes of results read from the pipe but not yet returned
        self.fresh = False  # started and not yet answered: its first answer waits for its start-up too
        # taking the reference (the worker said so): "default" (launching the default config) or "own"
        # (in the kernel file's reference()); None otherwise
        self.in_reference: str | None = None
        self.inflight = 0  # tasks sent and not yet answered
        self.halted = False
        self._lock = threading.Lock()  # send against halt: no task slips in once halted
        # The worker's stderr goes to a file, emptied at each start: a pipe nobody reads would fill
        # and block it, and without it a worker that dies at start-up says only "exit code 1".
        self._stderr = tempfile.TemporaryFile()

    def _start(self, restart: bool = True) -> subprocess.Popen[str]:
        """The running worker, or a fresh one; ``restart=False`` never replaces a worker that
        died unnoticed (tasks queued in its pipe must be answered by it, or fail with it)."""
        if self.proc is None or (restart and self.proc.poll() is not None):
            if self.proc is not None:
                self.proc.wait()
            self._buf = b""
            self.fresh, self.in_reference, self.inflight = True, None, 0
            self._stderr.seek(0)
            self._stderr.truncate()
            # The worker runs in a session of its own (a kill reaches its whole group), so no signal
            # to this process reaches it: it watches this pid and ends itself when this process is gone.
            env = {**self.env, "KERNTUNE_WORKER_PARENT": str(os.getpid())}
            self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self._stderr, text=True, env=env, start_new_session=True)
        return self.proc

    def run(self, task: dict[str, Any], timeout: float) -> dict[str, Any]:
        if not self.send(task):
            return self.stopped() if self.halted else self._crashed()
        return self.receive(timeout)

    def send(self, task: dict[str, Any], restart: bool = True) -> bool:
        """Queue a task in the worker's pipe; False if the worker is dead (its result then
        reads as a crash) or halted.  Several tasks may be queued: results come back in order."""
        with self._lock:
            if self.halted:
                return False
            try:
                proc = self._start(restart)
                assert proc.stdin is not None
                proc.stdin.write(json.dumps(task) + "\n")
                proc.stdin.flush()
            except OSError:  # a broken pipe, or no process could be started
                return False
            self.inflight += 1
        return True

    def halt(self) -> None:
        """No more tasks until ``resume()``, and a task in flight is killed (with the worker) rather
        than waited for: its owner's ``receive`` sees the worker die.  An idle worker stays up."""
        with self._lock:
            self.halted = True
            # read once: kill() and _crashed(), on the thread that owns the worker, set it None without this lock
            proc = self.proc
            if self.inflight and proc is not None and proc.poll() is None:
                kill_group(proc)
                # dead before halt() returns: a SIGKILL lands later on a loaded machine, and the next
                # batch's task, sent to the dying process (not yet seen as dead, so not restarted),
                # failed with "worker process died (signal 9)"
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass

    def resume(self) -> None:
        self.halted = False

    @staticmethod
    def stopped() -> dict[str, Any]:
        return {"status": "runtime_error", "error": "not measured: the batch was stopped"}

    def receive(self, timeout: float) -> dict[str, Any]:
        """The result of the oldest task sent.  The pipe's descriptor is read directly: with
        two tasks queued, two results may arrive in one read, and a line left in a Python
        read buffer would be invisible to ``select`` (a false timeout)."""
        if self.proc is None or self.proc.stdout is None:
            return {"status": "runtime_error", "error": "worker process died (not running)"}
        fd = self.proc.stdout.fileno()
        # A fresh worker imports torch, the kernel's package and builds its inputs, then says
        # "ready": until then it has STARTUP_S (fifteen starting at once take tens of seconds),
        # and the task's own timeout starts at its "ready".
        end = time.monotonic() + (STARTUP_S if self.fresh else timeout)
        kept = 0.0  # the time the task (or start-up) had left when its worker began to wait for the GPU
        while True:
            while b"\n" not in self._buf:
                left = end - time.monotonic()
                if left <= 0 or not select.select([fd], [], [], left)[0]:
                    what = "start-up" if self.fresh else "result"
                    failed = self._failed_how("hung", f"did not return within {timeout:g} s")
                    self.kill()
                    return {"status": "timeout", "error": f"no {what} within "
                            f"{STARTUP_S if what == 'start-up' else timeout:g} s; worker killed", **failed}
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    failed = self._failed_how("killed its worker", "killed its worker")
                    crashed = self._crashed()
                    for key in ("default_failed", "reference_failed"):
                        if key in failed:
                            failed[key] += f" ({crashed['error']})"
                    return {**crashed, **failed}
                self._buf += chunk
            line, _, self._buf = self._buf.partition(b"\n")
            if line.strip() == b'{"gpu": "waiting"}':
                # another worker has the GPU (worker_life.gpu_turn): the wait, bounded by the worker
                # itself, is not the task's; its time left counts again once the worker has its turn
                kept = end - time.monotonic()
                end = time.monotonic() + TURN_WAIT_S + 30 + kept
                continue
            if line.strip() == b'{"gpu": "held"}':
                end = time.monotonic() + kept
                continue
            if line.strip() == b'{"ready": true}':
                self.fresh = False
                end = time.monotonic() + timeout
                continue
            if line.strip() in (b'{"reference": "default"}', b'{"reference": "own"}'):
                # what follows is the default's launch, or reference(): its own timeout starts now
                self.in_reference = json.loads(line)["reference"]
                end = time.monotonic() + timeout
                continue
            if line.startswith(b'{"reference": '):  # the reference is over ("taken" or "failed"): the config's turn
                self.in_reference = None
                end = time.monotonic() + timeout
                continue
            break
        self.in_reference = None
        self.inflight = max(self.inflight - 1, 0)
        result: dict[str, Any] = json.loads(line)
        if result.pop("fatal", False):
            # The worker is exiting (its CUDA context is gone): wait for it, so that the next
            # config gets a fresh worker instead of the dying one's broken pipe.
            self.kill()
        return result

    def _failed_how(self, how: str, own_how: str) -> dict[str, Any]:
        """What a worker that died or hung was doing, beside its failed result: starting up (the task
        never ran), launching the default config as the reference (``how``), or in the kernel file's
        ``reference()`` (``own_how``; the task never ran in either)."""
        if self.fresh:
            return {"startup": True}
        if self.in_reference == "own":
            return {"reference_failed": f"reference() in {self.name} {own_how}", "retry": True}
        if self.in_reference == "default":
            return {"default_failed": f"the default config, launched as the reference, {how}", "retry": True}
        return {}

    def _crashed(self) -> dict[str, Any]:
        code = self.proc.wait() if self.proc else None
        self.proc = None
        self._buf = b""
        self.in_reference, self.inflight = None, 0
        sig = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        tail = self.stderr_tail()
        return {"status": "runtime_error", "error": f"worker process died ({sig})" + (f": {tail}" if tail else ""),
                "crashed": True}

    def stderr_tail(self, chars: int = 1500) -> str:
        """The end of what the worker wrote to stderr since its last start (its traceback, if
        it died of an exception), with warnings' lines dropped."""
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - 16 * chars))
        text = self._stderr.read().decode("utf-8", "replace")
        lines = [ln for ln in text.splitlines() if ln.strip() and "Warning" not in ln]
        return "\n".join(lines)[-chars:]

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            kill_group(self.proc)
            self.proc.wait()
        self.proc = None
        self._buf = b""
        self.in_reference, self.inflight = None, 0
