"""Kernel Tuner in a worker process: making inputs, the reference, and measuring configs.

``KernelTunerSession`` owns one worker (``kerntune.transform.worker``) for a problem —
its arguments, its reference outputs — and replaces it when a config crashes it or runs
past the time limit; the config in flight gets ``runtime_error`` or ``timeout`` and the
rest of the batch goes to the fresh worker.  ``KernelTunerEvaluator`` is the kerntune
Evaluator of one kernel variant on top of it, so any kerntune strategy can search the
variant's space and every trial reaches the store.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from kerntune.errors import KerntuneError
from kerntune.evaluate.base import Evaluator
from kerntune.evaluate.trial import Status, Trial
from kerntune.space import Config, Space, jsonable
from kerntune.transform.kernel import KernelSpec, lang_of
from kerntune.procs import end_group, end_watch, exited, watch_group
from kerntune.transform.worker import LIMITS_ENV

MEMORY_ENV = "KERNTUNE_TRANSFORM_MEMORY_MB"


def default_memory_mb() -> int:
    """Half the machine's memory (``$KERNTUNE_TRANSFORM_MEMORY_MB`` overrides; 0 turns it off)."""
    env = os.environ.get(MEMORY_ENV)
    if env is not None and env.strip():
        return int(env)
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**21)
    except (ValueError, OSError, AttributeError):
        return 4096


class WorkerFailed(KerntuneError):
    """A request the worker could not answer (its error, a crash or a timeout)."""


class _Worker:
    def __init__(self, env: dict[str, str], cwd: Path, log: Path) -> None:
        self.log_path = log
        self.log = open(log, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "kerntune.transform.worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, cwd=cwd, env=env,
                                     start_new_session=True)
        # its own session: no signal sent to the tuner reaches it, so a tuner killed with SIGKILL left it
        # running a hung kernel for ever; the watchdog ends its group once the tuner is gone
        self.watch = watch_group(self.proc)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
        self.buf = b""
        self.set_up = False  # True once it answered a bench: the device's one-time set-up is done

    def send(self, obj: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def read(self, timeout: float) -> dict[str, Any] | None:
        """The next line, None on timeout; raises EOFError when the worker is gone."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not self.sel.select(left):
                return None
            chunk = os.read(self.proc.stdout.fileno(), 65536)  # type: ignore[union-attr]
            if not chunk:
                raise EOFError
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    def _end(self, timeout: float) -> None:
        """Let the worker exit within ``timeout`` s (not reaped: its group's id stays reserved, and the
        watchdog still guards it), then end the watchdog and the worker's whole group.  The watchdog goes
        first: left running, it could act on the group's id once the system hands it out again."""
        exited(self.proc, timeout)
        end_watch(self.watch)
        self.watch = None
        end_group(self.proc, timeout=0)

    def death(self) -> str:
        self._end(timeout=5)  # what the worker started dies with it
        code = self.proc.returncode
        if code is not None and code < 0:
            return f"worker process died (signal {-code}, {signal.Signals(-code).name})"
        return f"worker process exited (code {code}): {self.stderr_tail()}"

    def stderr_tail(self, n: int = 600) -> str:
        try:
            return self.log_path.read_bytes()[-n:].decode(errors="replace").strip().replace("\n", " | ")
        except OSError:
            return ""

    def kill(self) -> None:
        self._end(timeout=0)

    def close(self) -> None:
        """End the worker: EOF on its stdin, then its whole process group is killed, also when it
        exits by itself, so processes the model's code started do not outlive it (``kerntune.procs``)."""
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        self._end(timeout=5)
        self.sel.close()
        self.log.close()


class KernelTunerSession:
    """One problem (backend, problem size, arguments) measured through Kernel Tuner in a worker.

    ``timeout_s`` bounds each config (compile, check and timing) and each generator run
    (``startup_s`` the worker's start, imports included);
    ``memory_mb`` is the worker's address-space limit (RLIMIT_AS) for OpenCL and C, or its data
    limit (RLIMIT_DATA) for CUDA, which reserves far more address space than it uses; None: half
    the machine (``$KERNTUNE_TRANSFORM_MEMORY_MB``), 0: no limit.
    """

    def __init__(self, backend: str, problem_size: Sequence[int], *, workdir: str | Path | None = None,
                 iterations: int = 7, timeout_s: float = 60.0, startup_s: float = 60.0, first_result_s: float = 15.0,
                 memory_mb: int | None = None, cpu_s: int = 0, platform: int = 0, device: int = 0,
                 compiler_options: Sequence[str] = (), tolerances: Mapping[str, Sequence[float]] | None = None) -> None:
        self.backend, self.lang = backend, lang_of(backend)
        self.problem_size = tuple(int(p) for p in problem_size)
        self._tmp = None if workdir else tempfile.TemporaryDirectory(prefix="kerntune-transform-")
        self.dir = Path(workdir or self._tmp.name).resolve()  # type: ignore[union-attr]
        self.dir.mkdir(parents=True, exist_ok=True)
        self.iterations, self.timeout_s, self.startup_s = iterations, timeout_s, startup_s
        self.first_result_s = first_result_s  # a new worker's first bench result also sets the device up
        mem = default_memory_mb() if memory_mb is None else memory_mb
        self.limits = {"memory_mb": mem, "memory_kind": "data" if self.lang not in ("OpenCL", "C") else "as",
                       "cpu_s": cpu_s, "preload": True}
        self.platform, self.device_index = platform, device
        self.compiler_options = list(compiler_options)
        self.tolerances = dict(tolerances or {})
        self.args_path: Path | None = None
        self.reference_path: Path | None = None
        self.device_name = "unknown"
        self.max_threads: int | None = None
        self._worker: _Worker | None = None
        self._next_id = 0
        self.restarts = 0
        self.worker_seconds = 0.0

    # -- worker lifecycle -------------------------------------------------------------------------
    def _ensure(self) -> _Worker:
        if self._worker is not None:
            if not exited(self._worker.proc, 0):  # not reaped here: its group's id stays reserved
                return self._worker
            self._worker.close()  # it died between requests: its watchdog and its group go with it
            self._worker = None
        env = dict(os.environ, **{LIMITS_ENV: json.dumps(self.limits)})
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        w = _Worker(env, self.dir, self.dir / "worker.log")
        try:
            hello = w.read(self.startup_s)
        except EOFError:
            hello = None
        if not hello or not hello.get("ready"):
            reason = "no answer" if not exited(w.proc, 0) else w.death()
            w.kill()
            raise WorkerFailed(f"the kernel worker did not start ({reason}): {w.stderr_tail()}")
        self._worker = w
        return w

    def _drop_worker(self, kill: bool = True) -> None:
        if self._worker is not None:
            if kill:
                self._worker.kill()
            self._worker.close()
            self._worker = None
            self.restarts += 1

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> "KernelTunerSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- inputs and reference -------------------------------------------------------------------
    def set_args(self, args: Sequence[Any]) -> list[dict[str, Any]]:
        """Arguments a Python caller made (arrays and numpy scalars): data, saved as they are."""
        from kerntune.transform.correctness import save_args

        path = self.dir / "args.npz"
        manifest = save_args(args, path)
        self.args_path = path
        return manifest

    def make_args(self, file: str | Path | None = None, code: str | None = None) -> list[dict[str, Any]]:
        """Run a generator (a user's file or a model's code) in the worker and keep its arguments."""
        path = self.dir / "args.npz"
        req = {"op": "inputs", "problem_size": list(self.problem_size), "out": str(path),
               "file": str(Path(file).resolve()) if file else None, "code": code}
        try:
            lines = list(self._request(req, self.timeout_s))
        except WorkerFailed as exc:  # it hung or crashed the worker: the generator's failure all the same
            raise WorkerFailed(f"the argument generator failed: {exc}") from None
        last = lines[-1] if lines else {}
        if not last.get("ok"):
            raise WorkerFailed(f"the argument generator failed: {last.get('error') or 'no answer'}")
        self.args_path = path
        return last["args"]

    # -- measuring ---------------------------------------------------------------------------------
    def _request(self, req: dict[str, Any], timeout: float) -> Iterator[dict[str, Any]]:
        """Send one request; yield its lines until 'done'.  A crash or a timeout raises WorkerFailed.

        Each line must come within ``timeout`` s, except the first result of the first ``bench`` a
        worker answers: that one also sets the device up in a freshly started process (driver load,
        first context), so it may take ``first_result_s`` longer.  Only a worker's start is charged
        (a request to a warm worker, or a generator run, gets ``timeout`` alone), and a timeout's
        message names the limit that was applied."""
        w = self._ensure()
        self._next_id += 1
        req = dict(req, id=self._next_id)
        allowance = self.first_result_s if req.get("op") == "bench" and not w.set_up else 0.0
        t0 = time.perf_counter()
        try:
            w.send(req)
            while True:
                limit = timeout + allowance
                try:
                    line = w.read(limit)
                except EOFError:
                    why = w.death()
                    self._drop_worker(kill=False)
                    raise WorkerFailed(why) from None
                if line is None:
                    self._drop_worker()
                    extra = (f" ({timeout:g} s plus {allowance:g} s for the new worker to set the device up)"
                             if allowance else "")
                    raise WorkerFailed(f"no result within {limit:g} s{extra}; worker killed")
                if allowance and line.get("id") == req["id"]:
                    w.set_up, allowance = True, 0.0
                if line.get("id") != req["id"]:
                    continue
                yield line
                if line.get("done"):
                    return
        except BrokenPipeError:
            why = w.death()
            self._drop_worker(kill=False)
            raise WorkerFailed(why) from None
        finally:
            self.worker_seconds += time.perf_counter() - t0

    def bench(self, spec: KernelSpec, configs: Sequence[Config], save_reference: bool = False) -> Iterator[tuple[int, Trial]]:
        """Compile, check against the reference and time each config; yield (index, Trial) as each ends.

        With ``save_reference`` the first correct run's outputs become the reference (the original
        kernel: its first config in the order given that runs), and the original's further configs are
        compared with it; otherwise outputs are compared with it.  A mismatch is ``wrong_result``.
        """
        if self.args_path is None:
            raise KerntuneError("no kernel arguments: give args, an args generator, or let the model write one")
        if not save_reference and self.reference_path is None:
            raise KerntuneError("no reference outputs: measure the original kernel first")
        todo = list(range(len(configs)))
        ref_path = self.dir / "reference.npz"
        if save_reference and self.reference_path is None:
            # this session's first run of the original: a reference.npz in a reused workdir is an earlier
            # run's (other inputs, or another kernel), which the worker would keep and every rewrite be
            # compared with
            ref_path.unlink(missing_ok=True)
        while todo:
            batch = [dict(configs[i]) for i in todo]
            req = {"op": "bench", "kernel": spec.to_dict(), "configs": [{k: jsonable(v) for k, v in c.items()}
                                                                      for c in batch],
                   "lang": self.lang, "problem_size": list(self.problem_size), "args": str(self.args_path),
                   "reference": None if save_reference else str(self.reference_path),
                   "save_outputs": str(ref_path) if save_reference else None, "iterations": self.iterations,
                   "tolerances": self.tolerances, "compiler_options": self.compiler_options,
                   "platform": self.platform, "device": self.device_index}
            finished: set[int] = set()
            t_last = time.perf_counter()
            try:
                for line in self._request(req, self.timeout_s):
                    if line.get("done"):
                        if line.get("ok") is False:
                            for j in range(len(batch)):
                                if j not in finished:
                                    finished.add(j)
                                    yield todo[j], Trial(batch[j], Status.RUNTIME_ERROR, error=line.get("error"))
                        self.device_name = line.get("device_name") or self.device_name
                        self.max_threads = line.get("max_threads") or self.max_threads
                        continue
                    j = int(line["i"])
                    finished.add(j)
                    now = time.perf_counter()
                    yield todo[j], _trial(batch[j], line, now - t_last)
                    t_last = now
                todo = []
            except WorkerFailed as exc:
                # the config in flight is the first unfinished one: it gets the blame, the rest a new worker
                rest = [j for j in range(len(batch)) if j not in finished]
                if not rest:
                    todo = []
                    continue
                culprit = rest[0]
                status = Status.TIMEOUT if "no result within" in str(exc) else Status.RUNTIME_ERROR
                yield todo[culprit], Trial(batch[culprit], status, error=str(exc)[:2000])
                todo = [todo[j] for j in rest[1:]]
        if save_reference and ref_path.exists():
            self.reference_path = ref_path


def _trial(config: Config, line: Mapping[str, Any], wall: float) -> Trial:
    status = Status(line["status"])
    extra = {"max_abs_err": line["max_abs_err"]} if line.get("max_abs_err") is not None else {}
    return Trial(dict(config), status, time_ms=line.get("time_ms") if status is Status.OK else None,
                 times_ms=list(line.get("times_ms") or []), compile_s=float(line.get("compile_s") or wall),
                 bench_s=float(line.get("bench_s") or 0.0), error=line.get("error"), extra=extra)


class KernelTunerEvaluator(Evaluator):
    """A kerntune Evaluator for one kernel variant, measured by a KernelTunerSession."""

    name = "kernel_tuner"

    def __init__(self, space: Space, spec: KernelSpec, session: KernelTunerSession,
                 save_reference: bool = False) -> None:
        super().__init__(space)
        self.spec, self.session, self.save_reference = spec, session, save_reference

    def evaluate(self, configs: Sequence[Config]) -> list[Trial]:
        out: list[Trial | None] = [None] * len(configs)
        for i, t in self.stream(configs):
            out[i] = t
        return [t if t is not None else Trial(dict(configs[i]), Status.RUNTIME_ERROR, error="no result")
                for i, t in enumerate(out)]

    def stream(self, configs: Sequence[Config]) -> Iterator[tuple[int, Trial]]:
        for i, trial in self.session.bench(self.spec, configs, save_reference=self.save_reference):
            trial.extra["kernel"] = self.spec.hash
            yield i, trial

    def device(self) -> dict[str, Any]:
        return {"name": self.session.device_name}

    def workload(self) -> dict[str, Any]:
        return {"kernel_name": self.spec.name, "problem_size": "x".join(map(str, self.session.problem_size)),
                "description": self.spec.description}

    def describe(self) -> dict[str, Any]:
        return {"evaluator": self.name, "backend": self.session.backend, "source_hash": self.spec.hash,
                "kernel": self.spec.name, "shape": list(self.session.problem_size)}
