"""The Triton evaluator: compile in parallel worker processes, benchmark in
one isolated worker per GPU, check every output against a reference.

Compile workers call each config's launcher with Triton's launches turned
into ``warmup=True`` (compile and fill the disk cache, run nothing, so they
never disturb the benchmark worker's timings).  Only their start-up runs on the
GPU (building the inputs: a package kernel's call launches its other kernels),
and it takes turns with the benchmark worker of its GPU (``worker_life.gpu_turn``,
a lock file per GPU): compile workers start in parallel, but never while a config
is timed or the benchmark worker builds its inputs (a package's own autotune, the
baseline's pick); a config that exceeds
``compile_timeout`` has its worker killed (``compile_timeout``).  Each config
is benchmarked as soon as it has compiled.  The benchmark worker finds the
compiled kernels in Triton's cache, checks the output (NaN never passes),
and times the median of ``triton.testing.do_bench`` (which flushes L2 between
runs).  A crash in any worker costs that config (``runtime_error``; in a
compile worker, which only compiles, ``compile_error``) and a fresh worker is
started.  A kernel file's own ``reference()`` that hangs or kills its worker is
met once: the config waiting behind it is not blamed, and every config from then
on fails at once with that error.  A stream left early (its consumer stops, Ctrl-C) kills the workers
with a task in flight instead of waiting for it, and every worker ends itself
once the tuner is gone (``worker_life.exit_with_parent``).  Every worker runs the kernel's code under a heap
limit (``memory_limit_mb``: ``$KERNTUNE_WORKER_MEMORY_MB``, else half the
machine's memory; 0 turns it off) as well as its time limit.

Several GPUs: one benchmark worker per device (``CUDA_VISIBLE_DEVICES`` set to
that one device, so kernel files keep using ``device="cuda"``), all fed from
the one stream of compiled configs: whichever GPU is free takes the next
config, and each config is benchmarked on exactly one GPU.  A GPU whose
benchmark worker dies before it is ready hands its configs back to the others;
after ``STARTUP_TRIES`` such start-ups in a row it is left out for good (when
every GPU is, the run fails with the error).  A compile worker whose start-ups
fail ``STARTUP_TRIES`` times in a row takes no more of the batch's configs; when
none is left, the rest fail with its error at once (a kernel file that cannot
start on this machine); each later batch gives each one more try.  Leaders are re-timed on the
first healthy device only, so the times that pick the winner are comparable.
On a machine without GPUs the device ids are only labels, which is how the
dispatch is tested on CPU.
"""

from __future__ import annotations

import logging
import os
import queue
import tempfile
import threading
import time
from collections import deque
from dataclasses import replace
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator, Sequence

from kerntune.errors import KerntuneError
from kerntune.evaluate.base import Evaluator
from kerntune.evaluate.protocol import DEFAULT as DEFAULT_PROTOCOL
from kerntune.evaluate.protocol import Protocol, estimate
from kerntune.evaluate.trial import Status, Trial
from kerntune.evaluate.triton_backend.kernel_file import (describe, is_adapter_spec, load_kernel_module, module_space,
                                                          source_hash)
from kerntune.evaluate.triton_backend.sizing import (bounded_count, default_compile_workers, gpu_memory_mb,
                                                     input_bytes, memory_capped_workers, pick_devices,
                                                     probe_device)
from kerntune.evaluate.triton_backend.worker_proc import STARTUP_S, _Worker  # noqa: F401 - re-exported
from kerntune.space import Config, jsonable

log = logging.getLogger("kerntune.evaluate")

#: Start-ups in a row that may fail on one GPU before it gets no more configs.
STARTUP_TRIES = 3


def default_memory_limit_mb() -> int:
    """Each worker's heap limit in MiB: ``$KERNTUNE_WORKER_MEMORY_MB`` (0: none), else half the memory.

    Generous on purpose: it stops one runaway config from swapping the machine to a halt
    or waking the OOM killer (which may pick the tuner itself); it does not meter kernels.
    It is RLIMIT_DATA, which CUDA's address-space reservations do not count (RLIMIT_AS would).
    """
    env = os.environ.get("KERNTUNE_WORKER_MEMORY_MB", "").strip()
    if env:
        try:
            return max(int(env), 0)
        except ValueError:
            raise KerntuneError(f"KERNTUNE_WORKER_MEMORY_MB={env!r}: expected MiB (0: no limit)") from None
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2 >> 20
    except (ValueError, OSError):
        return 0


class TritonEvaluator(Evaluator):
    name = "triton"

    def __init__(self, kernel_file: str | Path, shape: tuple[int, ...], compile_workers: int | None = None,
                 compile_timeout: float = 60.0, bench_timeout: float = 60.0, rep_ms: int | None = None,
                 gpus: int | None = None, devices: Sequence[str | None] | None = None,
                 memory_limit_mb: int | None = None, protocol: Protocol | None = None, module: Any = None,
                 lazy_compilers: bool = False) -> None:
        """``protocol``: how every config is timed (kerntune.evaluate.protocol); ``rep_ms``
        shortens its window (tests).  ``gpus``: how many of the visible GPUs get a benchmark worker (None: all).
        ``devices``: the exact ``CUDA_VISIBLE_DEVICES`` value of each benchmark worker
        (None: leave the environment as it is); tests pass labels such as ``["0", "1"]``.
        ``memory_limit_mb``: each worker's heap limit (None: ``default_memory_limit_mb()``, 0: none).
        ``module``: an object standing in for the kernel file in this process (its ``space``, ``name``,
        ``flops`` …), for a file that must be imported only in the workers (a model-written variant,
        ``kerntune transform``); None imports the file here.  ``lazy_compilers``: compile workers start
        with the first config sent to them, not here: an evaluator that only re-times (``retime``, a
        transform's side-by-side rounds) never uses them, and each would import torch, take a CUDA
        context and build the inputs while the benchmark worker waits for its GPU turn."""
        self.path = str(kernel_file) if is_adapter_spec(kernel_file) else str(Path(kernel_file).resolve())
        self.module = load_kernel_module(self.path) if module is None else module
        self.shape = tuple(shape)
        super().__init__(module_space(self.module, self.shape))
        self.compile_timeout = compile_timeout
        self.bench_timeout = bench_timeout
        p = protocol or DEFAULT_PROTOCOL
        if rep_ms is not None:
            p = replace(p, rep_ms=rep_ms, warmup_ms=min(p.warmup_ms, rep_ms))
        self.protocol = p
        self.devices: list[str | None] = list(devices) if devices is not None else pick_devices(gpus)
        if not self.devices:
            raise KerntuneError("no device to benchmark on")
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        envs = [env if d is None else {**env, "CUDA_VISIBLE_DEVICES": d} for d in self.devices]
        # A worker per config at most: a package kernel's short autotune list gains nothing from
        # fifteen workers that each import torch and the package (tens of seconds of start-up).
        cap = default_compile_workers(len(self.devices))
        need = input_bytes(self.module, self.shape) if compile_workers is None else None
        if need:
            cap = memory_capped_workers(cap, len(self.devices), need, gpu_memory_mb(self.devices))
        n = compile_workers or bounded_count(self.space, cap)
        mem = self.memory_limit_mb = default_memory_limit_mb() if memory_limit_mb is None else max(memory_limit_mb, 0)
        # A lock file per GPU (worker_life.gpu_turn): a compile worker's start-up never overlaps its GPU's
        # timings.  Removed by close(), or when the evaluator is collected.
        self._locks = tempfile.TemporaryDirectory(prefix="kerntune-gpu-")
        locks = [os.path.join(self._locks.name, f"gpu{g}.lock") for g in range(len(envs))]
        for lock in locks:
            Path(lock).touch()
        # Compile workers are spread over the GPUs too: their CUDA contexts and inputs are shared out.
        self.compilers = [_Worker(self.path, self.shape, envs[i % len(envs)], compile_only=True, memory_mb=mem,
                                  gpu_lock=locks[i % len(envs)]) for i in range(n)]
        self.benchers = [_Worker(self.path, self.shape, e, memory_mb=mem, keep_warm=p.keep_warm, gpu_lock=lock)
                         for e, lock in zip(envs, locks)]
        # Configs in flight at once: one per compile worker plus one on each GPU.
        self.parallelism = n + len(self.benchers)
        for w in self.benchers + ([] if lazy_compilers else self.compilers):  # start-ups overlap with whatever
            w._start()                                                      # the caller does first
        self._device: dict[str, Any] | None = None
        self._dead: dict[int, str] = {}  # benchers whose worker could not start: index -> the error
        # Start-ups that failed in a row, per compile worker and over batches (_stream says what follows)
        self._compile_fails: list[int] = [0] * len(self.compilers)
        self._default_failed: str | None = None  # the default config failed as the reference (reference.Reference)
        self._reference_failed: str | None = None  # the file's reference() hung or killed a worker: every config fails
        self._news = threading.Lock()  # benchmark threads of several GPUs take reference news at once: said once

    def wait_ready(self) -> float:
        """Block until every worker has started (imported torch and the kernel, built its
        inputs); returns the seconds waited.  Sixteen workers starting at once on sixteen cores
        take tens of seconds: a caller that times the search alone waits here first."""
        t0 = time.perf_counter()
        workers = self.benchers + self.compilers
        for w in workers:
            w.send({"mode": "ping"})
        for w in workers:
            res = w.receive(30.0)
            if res.get("status") != "ok":
                raise KerntuneError(f"a worker did not start: {res.get('error', res)}")
        return time.perf_counter() - t0

    def evaluate(self, configs: Sequence[Config]) -> list[Trial]:
        return [t for _, t in sorted(self.stream(configs), key=lambda it: it[0])]

    def stream(self, configs: Sequence[Config]) -> Iterator[tuple[int, Trial]]:
        """Compile in the worker pool and benchmark each config as soon as it has compiled,
        on whichever GPU is free, so the GPUs time configs while the CPUs compile the next ones."""
        self._first_healthy()  # raises where no GPU is left
        return self._stream(configs, [g for g in range(len(self.benchers)) if g not in self._dead])

    def _stream(self, configs: Sequence[Config], gpus: list[int]) -> Iterator[tuple[int, Trial]]:
        """``gpus``: indices into ``self.benchers`` that may benchmark this batch."""
        pending = list(enumerate(configs))
        compiled: queue.Queue[tuple[int, float] | None] = queue.Queue()
        done: queue.Queue[tuple[int, Trial]] = queue.Queue()
        lock = threading.Lock()
        stop = threading.Event()
        # A start-up runs no config: a compile worker whose start-ups failed STARTUP_TRIES times in a row
        # takes no more configs (the others take them), and once none is left the rest fail with the last
        # start-up's error at once. Before, every config started a worker that failed the same way (a CUDA
        # kernel on a machine without CUDA: seconds a config, in every batch of a sequential search);
        # a worker that cannot start beside healthy ones (out of memory as fifteen start) costs 3 configs.
        fails = self._compile_fails
        fails[:] = [min(f, STARTUP_TRIES - 1) for f in fails]  # one more try each in a new batch
        retired: set[int] = set()
        last: dict[str, Any] = {}  # the last failed start-up's status and error

        def compile_all(slot: int, worker: _Worker) -> None:
            while True:
                with lock:
                    retiring = fails[slot] >= STARTUP_TRIES
                    if retiring:
                        retired.add(slot)
                        rest = [] if len(retired) < len(fails) else pending[:]
                        if rest:
                            pending.clear()
                            log.info("every compile worker failed to start %d times in a row: the batch's "
                                     "%d other configs fail with the last error", STARTUP_TRIES, len(rest))
                    elif not pending:
                        return
                    else:
                        i, cfg = pending.pop(0)
                if retiring:
                    for j, _ in rest:
                        done.put((j, Trial(dict(configs[j]), Status(last["status"]), compile_s=0.0,
                                           error=last["error"])))
                    return
                if self._reference_failed is not None:  # nothing could check it: no compile is worth its time
                    done.put((i, self._reference_trial(cfg, 0.0)))
                    continue
                task = {"mode": "compile", "config": {k: jsonable(v) for k, v in cfg.items()}}
                t0 = time.perf_counter()
                try:
                    res = worker.run(task, self.compile_timeout)
                except Exception as exc:  # noqa: BLE001 - a broken pipe or bad reply costs this config only
                    worker.kill()
                    res = {"status": "runtime_error", "error": f"compile worker failed: {exc}"}
                if res["status"] == "timeout":
                    res["status"] = "compile_timeout"
                elif res.pop("crashed", False) and not res.get("startup"):
                    res["status"] = "compile_error"  # compile workers only compile: the compiler died
                res.setdefault("compile_s", time.perf_counter() - t0)
                if stop.is_set():  # the stream was left (its workers halted mid-task): nobody waits, and a
                    return  # start-up cut short is no failure to count against this worker
                with lock:
                    if res.get("startup"):
                        fails[slot] += 1
                        last.update(status=res["status"], error=res.get("error"))
                    else:
                        fails[slot] = 0
                if res["status"] == "ok":
                    compiled.put((i, res["compile_s"]))
                else:
                    done.put((i, Trial(dict(configs[i]), Status(res["status"]), compile_s=res["compile_s"],
                                       error=res.get("error"))))

        def bench_all(g: int) -> None:
            """Benchmark on GPU ``g`` what the queue hands out (each config to exactly one GPU),
            keeping the next config queued in the worker's pipe behind the one it measures, so
            the GPU never waits for this process's round trip between two configs."""
            w = self.benchers[g]
            ahead: deque[tuple[int, float]] = deque()  # sent to the worker, not yet answered
            more = True
            startup_fails = 0  # start-ups in a row that failed on this GPU
            while more or ahead:
                while more and len(ahead) < 2:
                    try:
                        item = compiled.get(block=not ahead)
                    except queue.Empty:
                        break
                    if item is None or stop.is_set():
                        more = False
                        break
                    if self._reference_failed is not None:  # fails at once: no worker meets reference() again
                        done.put((item[0], self._reference_trial(configs[item[0]], item[1])))
                        continue
                    ahead.append(item)
                    if not w.send(self._bench_task(configs[item[0]]), restart=len(ahead) == 1) and w.halted:
                        return  # the stream was left
                if not ahead:
                    return
                i, compile_s = ahead.popleft()
                t0 = time.perf_counter()
                try:
                    b = w.receive(self.bench_timeout)
                except Exception as exc:  # noqa: BLE001 - a bad reply costs this config, never the batch
                    w.kill()
                    b = {"status": "runtime_error", "error": f"benchmark worker failed: {exc}"}
                if stop.is_set():  # the stream was left: nobody waits for this result
                    return
                if b.get("startup"):  # no config ran: this one and those queued go to any GPU
                    w.kill()
                    for item in ((i, compile_s), *ahead):
                        compiled.put(item)
                    ahead.clear()
                    startup_fails += 1
                    if startup_fails >= STARTUP_TRIES:
                        self._gpu_dead(g, str(b.get("error")), gpus, done)
                        return
                    continue
                startup_fails = 0
                retry = self._reference_news(b)  # the reference hung or died: this config never ran
                if self._reference_failed is not None and (retry or w.proc is None):
                    # reference() hung or killed a worker (this one or another GPU's): the configs queued
                    # here never started, and a fresh worker would only call it again
                    w.kill()
                    for j, c_s in ([(i, compile_s)] if retry else []) + list(ahead):
                        done.put((j, self._reference_trial(configs[j], c_s)))
                    ahead.clear()
                    if retry:
                        continue
                if retry:  # the default config, launched as the reference, hung or died: sent again
                    ahead.appendleft((i, compile_s))
                if w.proc is None:  # crashed, hung or fatal: the queued configs never started
                    for k, (j, _) in enumerate(ahead):
                        w.send(self._bench_task(configs[j]), restart=k == 0)
                if retry:
                    continue
                try:
                    trial = self._trial(g, configs[i], compile_s, b, time.perf_counter() - t0)
                except Exception as exc:  # noqa: BLE001 - the consumer waits for one trial per config
                    trial = Trial(dict(configs[i]), Status.RUNTIME_ERROR, compile_s=compile_s,
                                  error=f"benchmark failed: {exc}")
                done.put((i, trial))

        compile_pool = ThreadPoolExecutor(len(self.compilers))
        bench_pool = ThreadPoolExecutor(len(gpus))
        finished = False
        live = self.compilers + [self.benchers[g] for g in gpus]
        try:
            for slot, w in enumerate(self.compilers):
                compile_pool.submit(compile_all, slot, w)
            for g in gpus:
                bench_pool.submit(bench_all, g)
            for _ in range(len(configs)):
                i, trial = done.get()
                if trial is None:  # every GPU's benchmark worker failed to start
                    raise KerntuneError(f"no GPU's benchmark worker could start: {self._dead.get(i, '?')}")
                yield i, trial
            finished = True
        finally:
            stop.set()
            try:
                with lock:
                    pending.clear()  # a consumer that stops early (budget) leaves nothing queued
                if not finished:  # left early (the consumer stopped, Ctrl-C, an error): kill, wait for nothing
                    for w in live:
                        try:
                            w.halt()
                        except Exception:  # noqa: BLE001 - one worker's failure must not skip the others
                            log.debug("halting a worker failed", exc_info=True)
                compile_pool.shutdown(wait=True)
                for _ in gpus:
                    compiled.put(None)
                bench_pool.shutdown(wait=True)
            finally:  # whatever failed above: no worker stays halted for the next batch
                for w in live:
                    w.resume()

    def _gpu_dead(self, g: int, error: str, gpus: list[int], done: queue.Queue[Any]) -> None:
        """Leave GPU ``g`` out for good (its worker failed ``STARTUP_TRIES`` start-ups in a row); with
        none of ``gpus`` left, tell the stream (its consumer then raises)."""
        self._dead[g] = error
        log.warning("%s: its benchmark worker failed to start %d times in a row, no more configs go to it: %s",
                    "the GPU" if self.devices[g] is None else f"GPU {self.devices[g]}", STARTUP_TRIES,
                    error.strip().splitlines()[-1] if error.strip() else error)
        if all(x in self._dead for x in gpus):
            done.put((g, None))

    def _first_healthy(self) -> int:
        """The first benchmark worker's index whose GPU is not left out (re-timing, runoff, baseline)."""
        g = next((g for g in range(len(self.benchers)) if g not in self._dead), None)
        if g is None:
            raise KerntuneError(f"no GPU's benchmark worker could start: {next(iter(self._dead.values()))}")
        return g

    def _reference_news(self, b: dict[str, Any]) -> bool:
        """Take what a result says of the reference: the default config failed as the reference (said once;
        later tasks tell workers to skip it), or the file's own reference() hung or killed its worker (said
        once; every config fails with it from then on, since each fresh worker would call it again and
        charge the config behind it a timeout or a crash); True where the task never ran (sent again, or
        failed with the reference's error where reference() is to blame)."""
        why, own = b.pop("default_failed", None), b.pop("reference_failed", None)
        with self._news:
            if why and self._default_failed is None:
                self._default_failed = why
                if callable(getattr(self.module, "reference", None)):  # only the zeroed check's trust leaned on it
                    log.warning("%s: %s; configs are still checked against reference(), and the zeroed check of a"
                                " bool or integer output trusts the first config that passes", Path(self.path).name, why)
                else:
                    log.warning("%s has no reference(), and %s; from now on each benchmark worker checks configs"
                                " against the output of the first config it runs", Path(self.path).name, why)
            if own and self._reference_failed is None:
                self._reference_failed = own
                log.warning("%s: fix it or remove it; no config is measured from now on, each fails with this", own)
        return bool(b.pop("retry", False))

    def _reference_error(self) -> str:
        return f"{self._reference_failed}: fix it or remove it"

    def _reference_trial(self, cfg: Config, compile_s: float) -> Trial:
        """The trial of a config not run because the file's reference() hung or killed a worker: its
        error, never a ``timeout`` of the config's own."""
        return Trial(dict(cfg), Status.RUNTIME_ERROR, compile_s=compile_s, error=self._reference_error())

    def _bench_task(self, cfg: Config) -> dict[str, Any]:
        return {"mode": "bench", "config": {k: jsonable(v) for k, v in cfg.items()}, "rep_ms": self.protocol.rep_ms,
                "warmup_ms": self.protocol.warmup_ms, "default_reference": self._default_failed is None}

    def _trial(self, g: int, cfg: Config, compile_s: float, b: dict[str, Any], waited_s: float) -> Trial:
        bench_s = b.get("bench_s", waited_s)
        status = Status(b["status"])  # a hung benchmark comes back as "timeout", its worker killed
        extra: dict[str, Any] = self._rates(b.get("time_ms")) if status is Status.OK else {}
        if self.devices[g] is not None:
            extra["gpu"] = self.devices[g]
        return Trial(dict(cfg), status, b.get("time_ms") if status is Status.OK else None,
                     b.get("times_ms", []), compile_s, bench_s, b.get("error"), extra)

    def _rates(self, time_ms: float | None) -> dict[str, float]:
        w = describe(self.module, self.shape)
        out = {}
        if time_ms and w.get("flops"):
            out["TFLOP/s"] = w["flops"] / (time_ms * 1e-3) / 1e12
        if time_ms and w.get("bytes"):
            out["GB/s"] = w["bytes"] / (time_ms * 1e-3) / 1e9
        return out

    def retime(self, configs: Sequence[Config], rep_ms: int | None = None, rounds: int | None = None) -> list[Trial]:
        """Measure the leaders (and any baselines the caller adds) again before declaring a
        winner: ``rounds`` interleaved rounds (the protocol's by default) in the first healthy GPU's
        benchmark worker, each config one window of the same settings as screening, the order
        rotated every round so that no config always follows the same neighbour.  Each trial's
        time is the median of its rounds; ``extra["rounds_ms"]`` keeps them (paired by round
        across configs, for speedups) and ``extra["ci_ms"]`` the median's 95% interval.  All
        rounds run on one GPU: two GPUs of one model still differ by a few percent.  A config that
        fails is not timed again: its first failure is its trial."""
        task_rep = self.protocol.rep_ms if rep_ms is None else rep_ms
        n_rounds = max(self.protocol.rounds if rounds is None else rounds, 1)
        w = self.benchers[self._first_healthy()]
        results: list[list[dict[str, Any]]] = [[] for _ in configs]
        for r in range(n_rounds):
            order = [(i + r) % len(configs) for i in range(len(configs))]
            for i in order:
                if any(b.get("status") != "ok" for b in results[i]):
                    continue
                try:
                    res = self._retime_one(w, configs[i], task_rep)
                    if self._reference_news(res):  # the default, as the reference, hung or died: again without it
                        res = self._retime_one(w, configs[i], task_rep)
                    results[i].append(res)
                except Exception as exc:  # noqa: BLE001 - a bad reply costs this config
                    w.kill()
                    results[i].append({"status": "runtime_error", "error": f"re-timing failed: {exc}"})
        out = []
        for cfg, res in zip(configs, results):
            bad = next((b for b in res if b.get("status") != "ok"), None)
            if bad is not None:
                out.append(Trial(dict(cfg), Status(bad["status"]), error=bad.get("error")))
                continue
            rounds_ms = [float(b["time_ms"]) for b in res]
            est = estimate(rounds_ms)
            extra = {**self._rates(est.median), "rounds_ms": rounds_ms, "ci_ms": [est.lo, est.hi],
                     "protocol": self.protocol.to_dict()}
            out.append(Trial(dict(cfg), Status.OK, est.median, sorted(rounds_ms), 0.0,
                             sum(float(b.get("bench_s", 0.0)) for b in res), None, extra))
        return out

    def _retime_one(self, w: _Worker, cfg: Config, rep_ms: int) -> dict[str, Any]:
        """One window of ``cfg`` in ``w``; the reference's error at once where reference() hung or killed a
        worker (a worker would only call it again)."""
        if self._reference_failed is not None:
            return {"status": "runtime_error", "error": self._reference_error()}
        return w.run({**self._bench_task(cfg), "rep_ms": rep_ms}, self.bench_timeout)

    def runoff(self, configs: Sequence[Config], first_ms: Sequence[float]) -> dict[str, Any] | None:
        """Settle the winner among ``configs`` (a search's leaders, ``first_ms`` their screening times) in
        the first healthy GPU's benchmark worker, their launches interleaved (``kerntune.evaluate.runoff``):
        the worker's reply (``winner``: an index into ``configs``), or None when a launch failed (the
        caller's screening winner then stands)."""
        task = {"mode": "runoff", "configs": [{k: jsonable(v) for k, v in c.items()} for c in configs],
                "first_ms": [float(x) for x in first_ms]}
        w = self.benchers[self._first_healthy()]
        try:  # at most 16 configs: a screen round, six rounds of at least rep_ms each, three rounds of windows
            res = w.run(task, 4 * self.bench_timeout + 60)
        except Exception:  # noqa: BLE001 - a bad reply costs the runoff, not the run
            w.kill()
            return None
        return res if res.get("status") == "ok" else None

    def baseline(self) -> tuple[Config | None, dict[str, Any]]:
        """The config a package kernel's own code launches (its autotune pick, heuristic or fixed
        config), as the first healthy GPU's benchmark worker caught it, with the seconds its first call took (its
        autotuning, when it autotunes); (None, {}) for a kernel file of one's own."""
        if not hasattr(self.module, "baseline"):
            return None, {}
        res = self.benchers[self._first_healthy()].run({"mode": "baseline"}, self.bench_timeout + 600)
        if res.get("status") != "ok" or not res.get("config"):
            return None, {"error": res.get("error")}
        pick = {k: v for k, v in res["config"].items() if k in self.space.names}
        return self.space.canonical(pick), {"autotune_s": res.get("autotune_s"), "launched": res["config"]}

    def device(self) -> dict[str, Any]:
        if self._device is None:
            env = dict(os.environ) if self.devices[0] is None else {**os.environ, "CUDA_VISIBLE_DEVICES": self.devices[0]}
            self._device = {**probe_device(env), "gpus": len(self.devices)}
        return self._device

    def workload(self) -> dict[str, Any]:
        w = describe(self.module, self.shape)
        try:
            if hasattr(self.module, "kernel"):  # a package's kernel: its own source, not a file of ours
                from kerntune.evaluate.triton_backend.capture import kernel_source

                w["source"] = kernel_source(self.module.kernel)
            else:
                w["source"] = Path(self.path).read_text()
        except (OSError, TypeError):
            pass
        return w

    def describe(self) -> dict[str, Any]:
        return {"evaluator": self.name, "kernel_file": self.path, "shape": list(self.shape),
                "kernel_name": getattr(self.module, "name", Path(self.path).stem),
                "source_hash": source_hash(self.path, self.module)}

    def close(self) -> None:
        for w in self.compilers + self.benchers:
            w.kill()
        self._locks.cleanup()
