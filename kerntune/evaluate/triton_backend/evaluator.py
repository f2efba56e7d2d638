"""The Triton evaluator: compile in parallel worker processes, benchmark in
one isolated worker, check every output against a reference.

Compile workers call each config's launcher with Triton's launches turned
into ``warmup=True`` (compile and fill the disk cache, run nothing, so they
never disturb the benchmark worker's timings); a config that exceeds
``compile_timeout`` has its worker killed (``compile_timeout``).  Each config
is benchmarked as soon as it has compiled.  The benchmark worker finds the
compiled kernels in Triton's cache, checks the output (NaN never passes),
and times the median of ``triton.testing.do_bench`` (which flushes L2 between
runs).  A crash in any worker costs that config (``runtime_error``) and a
fresh worker is started.
"""

from __future__ import annotations

import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator, Sequence

from kerntune.evaluate.base import Evaluator
from kerntune.evaluate.trial import Status, Trial
from kerntune.evaluate.triton_backend.kernel_file import describe, load_kernel_module, module_space, source_hash
from kerntune.space import Config, jsonable


class _Worker:
    """One worker process and its pipe; restarted after a crash or timeout."""

    def __init__(self, path: str, shape: tuple[int, ...], env: dict[str, str], compile_only: bool = False) -> None:
        self.args = [sys.executable, "-m", "kerntune.evaluate.triton_backend.worker", path,
                     "x".join(map(str, shape))] + (["--compile-only"] if compile_only else [])
        self.env = env
        self.proc: subprocess.Popen[str] | None = None

    def _start(self) -> subprocess.Popen[str]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True, env=self.env, start_new_session=True)
        return self.proc

    def run(self, task: dict[str, Any], timeout: float) -> dict[str, Any]:
        proc = self._start()
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(task) + "\n")
            proc.stdin.flush()
        except BrokenPipeError:
            return self._crashed()
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        if not ready:
            self.kill()
            return {"status": "timeout", "error": f"no result within {timeout:g} s; worker killed"}
        line = proc.stdout.readline()
        if not line:
            return self._crashed()
        result: dict[str, Any] = json.loads(line)
        if result.pop("fatal", False):
            # The worker is exiting (its CUDA context is gone): wait for it, so that the next
            # config gets a fresh worker instead of the dying one's broken pipe.
            self.kill()
        return result

    def _crashed(self) -> dict[str, Any]:
        code = self.proc.wait() if self.proc else None
        self.proc = None
        sig = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        return {"status": "runtime_error", "error": f"worker process died ({sig})"}

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        self.proc = None


class TritonEvaluator(Evaluator):
    name = "triton"

    def __init__(self, kernel_file: str | Path, shape: tuple[int, ...], compile_workers: int | None = None,
                 compile_timeout: float = 60.0, bench_timeout: float = 60.0, rep_ms: int = 20) -> None:
        self.path = str(Path(kernel_file).resolve())
        self.module = load_kernel_module(self.path)
        super().__init__(module_space(self.module))
        self.shape = tuple(shape)
        self.compile_timeout = compile_timeout
        self.bench_timeout = bench_timeout
        self.rep_ms = rep_ms
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        n = compile_workers or max(1, min(16, (os.cpu_count() or 2) - 1))
        self.compilers = [_Worker(self.path, self.shape, env, compile_only=True) for _ in range(n)]
        self.bencher = _Worker(self.path, self.shape, env)
        self.parallelism = n
        self._device: dict[str, Any] | None = None

    def evaluate(self, configs: Sequence[Config]) -> list[Trial]:
        return [t for _, t in sorted(self.stream(configs), key=lambda it: it[0])]

    def stream(self, configs: Sequence[Config]) -> Iterator[tuple[int, Trial]]:
        """Compile in the worker pool and benchmark each config as soon as it has compiled,
        so the GPU times one config while the CPUs compile the next ones."""
        pending = list(enumerate(configs))
        done: queue.Queue[tuple[int, dict[str, Any]]] = queue.Queue()
        lock = threading.Lock()

        def compile_all(worker: _Worker) -> None:
            while True:
                with lock:
                    if not pending:
                        return
                    i, cfg = pending.pop(0)
                task = {"mode": "compile", "config": {k: jsonable(v) for k, v in cfg.items()}}
                t0 = time.perf_counter()
                try:
                    res = worker.run(task, self.compile_timeout)
                except Exception as exc:  # noqa: BLE001 - a broken pipe or bad reply costs this config only
                    worker.kill()
                    res = {"status": "runtime_error", "error": f"compile worker failed: {exc}"}
                if res["status"] == "timeout":
                    res["status"] = "compile_timeout"
                res.setdefault("compile_s", time.perf_counter() - t0)
                done.put((i, res))

        pool = ThreadPoolExecutor(len(self.compilers))
        try:
            for w in self.compilers:
                pool.submit(compile_all, w)
            for _ in range(len(configs)):
                i, c = done.get()
                cfg = configs[i]
                if c["status"] != "ok":
                    yield i, Trial(dict(cfg), Status(c["status"]), compile_s=c["compile_s"], error=c.get("error"))
                    continue
                yield i, self._bench(cfg, c["compile_s"])
        finally:
            with lock:
                pending.clear()  # a consumer that stops early (budget) leaves nothing queued
            pool.shutdown(wait=True)

    def _bench(self, cfg: Config, compile_s: float) -> Trial:
        task = {"mode": "bench", "config": {k: jsonable(v) for k, v in cfg.items()}, "rep_ms": self.rep_ms}
        t0 = time.perf_counter()
        b = self.bencher.run(task, self.bench_timeout)
        bench_s = b.get("bench_s", time.perf_counter() - t0)
        status = Status(b["status"])  # a hung benchmark comes back as "timeout", its worker killed
        return Trial(dict(cfg), status, b.get("time_ms") if status is Status.OK else None,
                     b.get("times_ms", []), compile_s, bench_s, b.get("error"),
                     self._rates(b.get("time_ms")) if status is Status.OK else {})

    def _rates(self, time_ms: float | None) -> dict[str, float]:
        w = describe(self.module, self.shape)
        out = {}
        if time_ms and w.get("flops"):
            out["TFLOP/s"] = w["flops"] / (time_ms * 1e-3) / 1e12
        if time_ms and w.get("bytes"):
            out["GB/s"] = w["bytes"] / (time_ms * 1e-3) / 1e9
        return out

    def retime(self, configs: Sequence[Config], rep_ms: int = 100, rounds: int = 3) -> list[Trial]:
        """Measure the leaders again before declaring a winner: ``rounds`` interleaved rounds,
        each config's time the median of its rounds.  Interleaving (rather than one long run
        per config) keeps clock and thermal drift of the GPU from favouring whichever config
        ran first: a 500 ms run of a 640 TFLOP/s matmul already measures ~10% slower."""
        saved, self.rep_ms = self.rep_ms, rep_ms
        try:
            runs = [self.evaluate(configs) for _ in range(max(rounds, 1))]
        finally:
            self.rep_ms = saved
        out = []
        for i, cfg in enumerate(configs):
            trials = [r[i] for r in runs]
            ok = sorted((t for t in trials if t.ok), key=lambda t: t.time_ms)  # type: ignore[arg-type,return-value]
            if len(ok) < len(trials):
                out.append(next(t for t in trials if not t.ok))
                continue
            mid = ok[len(ok) // 2]
            out.append(Trial(dict(cfg), Status.OK, mid.time_ms, sorted(x for t in ok for x in t.times_ms),
                             sum(t.compile_s for t in ok), sum(t.bench_s for t in ok), None, mid.extra))
        return out

    def device(self) -> dict[str, Any]:
        if self._device is None:
            code = ("import json, torch; p = torch.cuda.get_device_properties(0); print(json.dumps({'name': p.name,"
                    " 'sms': p.multi_processor_count, 'memory_gb': round(p.total_memory / 2**30, 1),"
                    " 'max_smem_per_block_kb': getattr(p, 'shared_memory_per_block_optin', 0) // 1024,"
                    " 'registers_per_sm': getattr(p, 'regs_per_multiprocessor', None),"
                    " 'l2_mb': getattr(p, 'L2_cache_size', 0) // 2**20, 'torch': torch.__version__,"
                    " 'triton': __import__('triton').__version__}))")
            try:
                out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
                self._device = json.loads(out.stdout.strip().splitlines()[-1])
            except (subprocess.SubprocessError, ValueError, IndexError):
                self._device = {"name": "unknown GPU"}
        return self._device

    def workload(self) -> dict[str, Any]:
        w = describe(self.module, self.shape)
        try:
            w["source"] = Path(self.path).read_text()
        except OSError:
            pass
        return w

    def describe(self) -> dict[str, Any]:
        return {"evaluator": self.name, "kernel_file": self.path, "shape": list(self.shape),
                "kernel_name": getattr(self.module, "name", Path(self.path).stem),
                "source_hash": source_hash(self.path)}

    def close(self) -> None:
        for w in self.compilers + [self.bencher]:
            w.kill()
