"""How ``kerntune.retune`` times one ``triton.autotune`` list inside the running program: the list
compiled at once in forked children while the GPU is kept loaded, a pass of two launches per config,
and full protocol windows fastest first with the cut (the runoff of the close leaders that follows:
``kerntune.retune_runoff``).  Why each piece
exists, with the H100 figures behind it, is in ``kerntune.retune``'s docstring; this module holds the
mechanics, ``kerntune.retune`` the switch, its settings and its store."""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import time
from collections import defaultdict
from typing import Any, Iterator, Sequence

from kerntune.errors import KerntuneError
from kerntune.evaluate.base import Evaluator
from kerntune.evaluate.protocol import DEFAULT as PROTOCOL
from kerntune.evaluate.trial import Status, Trial
from kerntune.evaluate.triton_backend.capture import kernel_source
from kerntune.evaluate.triton_backend.derive_space import config_dict
from kerntune.space import Config, jsonable


def flat_key(flat: dict[str, Any]) -> str:
    """A config (launch options included) as one string, to match configs across the list and the store."""
    return json.dumps({k: jsonable(v) for k, v in flat.items()}, sort_keys=True, default=str)


def list_key(configs: Sequence[Any]) -> tuple[str, ...]:
    """A list of configs as the sorted set of their ``flat_key``: its identity whatever its order, since a
    pruner may return its configs in any order (``list(set(cs))`` differs from one process to the next)."""
    return tuple(sorted({flat_key(config_dict(c)) for c in configs}))


def strategy_setting(text: str, name: str = "KERNTUNE_AUTOTUNE_STRATEGY") -> str:
    """``text``, unless it names a strategy that needs a model: the switch cannot be given one
    (``kerntune exec`` has no ``--llm``), so the search would only turn itself off at the first launch."""
    from kerntune.strategies import ALIASES, LLM_STRATEGIES, STRATEGIES

    if ALIASES.get(text, text) in LLM_STRATEGIES:
        usable = ", ".join(s for s in STRATEGIES if s not in LLM_STRATEGIES)
        raise KerntuneError(f"{name}={text!r}: needs a model, which retuning cannot be given; use one of {usable}")
    return text


class ListEvaluator(Evaluator):
    """Times configs of one autotuned launch in this process, through the autotuner's own ``_bench``
    (its hooks: ``reset_to_zero``, ``restore_value``, pre/post hooks) with kerntune's timer.

    A batch is compiled and timed back to back, the first config with the protocol's rested warm-up
    unless the GPU was kept loaded (compiling leaves it idle; kerntune.evaluate.protocol), the others
    with its usual one, so that every config is timed in the same sustained state; with the cut on, a
    pass of two launches per config comes first and orders the windows.  With ``overlap`` the timing
    starts as the first compiles land, while the others still compile (kerntune.retune's docstring
    says why for each)."""

    name = "retune"

    def __init__(self, tuner: Any, st: Any, args: Sequence[Any], kwargs: dict[str, Any], *, compile_threads: int = 1,
                 compile_mode: str = "fork", cut: float = 0.0, overlap: bool = False) -> None:
        super().__init__(st.space)
        self.tuner, self.st, self.args, self.kwargs = tuner, st, tuple(args), dict(kwargs)
        self.parallelism, self.compile_mode, self.cut = compile_threads, compile_mode, cut
        self.overlap = overlap
        self.overlapped = 0  # configs timed while the batch's other compiles ran
        self._heater: Heater | None = None
        self.compile_wall_s = 0.0
        self.heated = False
        self.measured = 0  # configs timed (fully, or cut after two launches)
        self.best_ms: float | None = None  # the best full-window time so far (the cut's yardstick)
        #: seconds per phase of the search (lookup, compile phases, timing, store): where the
        #: wall goes, for the benchmark that compares it with triton.autotune's
        self.phases: defaultdict[str, float] = defaultdict(float)

    def evaluate(self, configs: Sequence[Config]) -> list[Trial]:
        """Compile the batch and time it back to back."""
        from kerntune.evaluate.triton_backend.worker import classify
        from kerntune.evaluate.triton_backend.worker import timer as make_timer

        torch = torch_or_none()
        bench = make_timer(torch)
        warm = [PROTOCOL.warmup_ms]

        phases = self.phases
        quick_only = [False]

        def do_bench(fn: Any, quantiles: Any = None) -> list[float]:
            t0 = time.perf_counter()
            if torch is not None and torch.cuda.is_available():
                fn()  # the first launch loads the module: counted apart from the timing window
                torch.cuda.synchronize()
            t1 = time.perf_counter()
            phases["first_launch_s"] += t1 - t0
            if quick_only[0]:  # the cut's pass: two launches, no window (kerntune.retune's docstring)
                quick = two_launches(fn)
                phases["quick_s"] += time.perf_counter() - t1
                return [quick, quick, quick]
            times = sorted(bench(fn, PROTOCOL.rep_ms, warm[0]))
            phases["windows_s"] += time.perf_counter() - t1
            warm[0] = PROTOCOL.warmup_ms
            return [times[len(times) // 2], times[len(times) // 5], times[4 * len(times) // 5]]

        out: list[Trial | None] = [None] * len(configs)
        t_configs = [self.st.triton_config(c) for c in configs]

        def launch_bench(i: int) -> float | None:
            """The autotuner's own ``_bench`` of config i (its hooks, kerntune's ``do_bench``); None,
            with the Trial set, where it failed."""
            t0 = time.perf_counter()
            try:
                med = self.tuner._bench(*self.args, config=t_configs[i], **self.kwargs)[0]
            except Exception as exc:  # noqa: BLE001
                status, text = classify(exc)
                out[i] = Trial(dict(configs[i]), Status(status), error=text[-2000:], bench_s=time.perf_counter() - t0)
                return None
            if not math.isfinite(med):
                out[i] = Trial(dict(configs[i]), Status.RUNTIME_ERROR, bench_s=time.perf_counter() - t0,
                               error="out of resources (Triton's autotuner reports inf)")
                return None
            return med

        def window(i: int, quick: float | None) -> None:
            """Config i's full window, or, when its two launches (``quick``) are already out of the
            race against the best window so far, the cut (kerntune.retune's docstring)."""
            t0 = time.perf_counter()
            if quick is not None and self.best_ms is not None and quick > self.cut * self.best_ms:
                self.measured += 1
                out[i] = Trial(dict(configs[i]), Status.OK, quick, [quick], extra={"cut": True})
                return
            med = launch_bench(i)
            if med is None:
                return
            self.measured += 1
            out[i] = Trial(dict(configs[i]), Status.OK, med, [med], bench_s=time.perf_counter() - t0)
            if self.best_ms is None or med < self.best_ms:
                self.best_ms = med

        def two(i: int) -> float | None:
            quick_only[0] = True
            try:
                return launch_bench(i)
            finally:
                quick_only[0] = False

        early: dict[int, float] = {}  # compiled while others compile: two launches in, no window yet
        floor = [math.inf]  # the fastest two launches so far

        def on_ready(i: int) -> None:
            """Config i, compiled while others still compile: its two launches now (or, with the cut
            off, its window), so that the windows can go fastest first among the configs compiled so
            far.  The first window's warm-up is the rested one unless the heater kept the GPU loaded."""
            if self.overlapped == 0:
                heater = self._heater
                warm[0] = PROTOCOL.warmup_ms if heater is not None and heater.loaded() else 300
            self.overlapped += 1
            if not self.cut:
                window(i, None)
                return
            q = two(i)
            if q is not None:  # else failed: its Trial says how
                early[i] = q
                floor[0] = min(floor[0], q)

        def on_idle() -> bool:
            """While the other compiles run and nothing new is compiled: the window of the fastest
            config compiled so far, unless its two launches are already out of the race against the
            fastest two launches seen (it waits: the windows after the compiles, fastest first, will
            likely cut it); False when no window is due."""
            if not early:
                return False
            i = min(early, key=early.__getitem__)
            if early[i] > self.cut * floor[0]:
                return False
            window(i, early.pop(i))
            return True

        t_bench = time.perf_counter()
        with self._do_bench(do_bench):
            try:
                overlapped_before = self.overlapped
                results = self._compile(t_configs, *((on_ready, on_idle) if self.overlap else (None, None)))
                for i, (exc, seconds) in enumerate(results):
                    if exc is not None and out[i] is None:  # a config that cannot compile is a status
                        status, text = classify(exc)
                        out[i] = Trial(dict(configs[i]), Status(status), error=text[-2000:], compile_s=seconds)
                # The GPU rested while the batch compiled, unless the heater kept it loaded or configs
                # were timed meanwhile (protocol: no measurement starts from a rested GPU; a rested
                # one warms up longer first).
                if self.overlapped == overlapped_before:
                    warm[0] = PROTOCOL.warmup_ms if self.heated else 300
                t_bench = time.perf_counter()
                pending = [i for i in range(len(configs)) if out[i] is None]
                quick: dict[int, float] = dict(early)
                if self.cut and len(pending) > 1:
                    # Two launches of every config first, then full windows fastest first: the best is
                    # timed early, so that every config already out of the race is cut.
                    for i in pending:
                        q = quick[i] if i in quick else two(i)
                        if q is not None:
                            quick[i] = q
                    pending = sorted((i for i in pending if i in quick), key=quick.__getitem__)
                for i in pending:
                    window(i, quick.get(i))
            finally:
                self.phases["bench_s"] += time.perf_counter() - t_bench
        return [t for t in out if t is not None]

    def launchers(self, configs: Sequence[Config]) -> list[Any]:
        """Each config's launch as the autotuner's ``_bench`` makes it (its ``pre_hook`` and the list's
        hooks, the autotuned arguments), not timed: for the runoff, which times several configs'
        launches interleaved (kerntune.evaluate.runoff)."""
        got: list[Any] = []

        def keep(fn: Any, quantiles: Any = None) -> list[float]:
            got.append(fn)
            return [0.0, 0.0, 0.0]

        with self._do_bench(keep):
            for c in configs:
                self.tuner._bench(*self.args, config=self.st.triton_config(c), **self.kwargs)
        return got

    @contextlib.contextmanager
    def _do_bench(self, fn: Any) -> Iterator[None]:
        """The autotuner's ``do_bench`` is ``fn`` within: it shadows Triton's cached_property, so that
        ``_bench`` (with its hooks) calls kerntune's timer, or hands its launch over."""
        saved = self.tuner.__dict__.get("do_bench")
        self.tuner.__dict__["do_bench"] = fn
        try:
            yield
        finally:
            if saved is None:
                self.tuner.__dict__.pop("do_bench", None)
            else:
                self.tuner.__dict__["do_bench"] = saved

    def _compile(self, t_configs: Sequence[Any], on_ready: Any = None,
                 on_idle: Any = None) -> list[tuple[BaseException | None, float]]:
        """Compile a batch before timing any of it: on ``self.parallelism`` forked children
        (``kerntune.evaluate.triton_backend.fork_compile`` says why), on threads through Triton's
        ``AsyncCompileMode`` (``KERNTUNE_AUTOTUNE_COMPILE=threads``), or one after the other
        (``serial``; also under the CPU interpreter, which compiles nothing, and where Triton
        lacks ``AsyncCompileMode``).  Returns (error or None, seconds) per config; concurrent
        compiles share the batch's wall time equally."""
        import triton

        hook_lock = threading.Lock()

        def launch(tc: Any) -> Any:
            if tc.pre_hook is None:
                return self.tuner.fn.run(*self.args, **{**self.kwargs, "warmup": True}, **tc.all_kwargs())
            # the hook sets what the compiled signature reads (a descriptor's block shape): set and
            # read under one lock, since the threads mode compiles configs concurrently
            with hook_lock:
                tc.pre_hook({**dict(zip(self.tuner.arg_names, self.args)), **self.kwargs, **tc.all_kwargs()})
                return self.tuner.fn.run(*self.args, **{**self.kwargs, "warmup": True}, **tc.all_kwargs())

        t0 = time.perf_counter()
        self.heated = False
        mode = self.compile_mode
        if (min(self.parallelism, len(t_configs)) <= 1 or mode == "serial" or not hasattr(triton, "AsyncCompileMode")
                or os.environ.get("TRITON_INTERPRET") == "1" or (mode == "fork" and not hasattr(os, "fork"))):
            out: list[tuple[BaseException | None, float]] = []
            for tc in t_configs:
                t1 = time.perf_counter()
                try:
                    launch(tc)
                    out.append((None, time.perf_counter() - t1))
                except Exception as exc:  # noqa: BLE001 - reported per config
                    out.append((exc, time.perf_counter() - t1))
            self.compile_wall_s += time.perf_counter() - t0
            return out
        from kerntune.evaluate.triton_backend.fork_compile import compile_batch

        heater = self._heater = Heater(torch_or_none() if mode == "fork" else None)
        self.phases["heater_s"] += time.perf_counter() - t0
        def idle() -> None:  # a window of a compiled config, else keep the GPU loaded
            if on_idle is None or not on_idle():
                heater.step()

        errors = compile_batch([lambda tc=tc: launch(tc) for tc in t_configs], self.parallelism, idle=idle,
                               threads=mode == "threads", phases=self.phases,
                               on_ready=on_ready if mode == "fork" else None)
        t1 = time.perf_counter()
        self.heated = heater.finish()
        self._heater = None
        self.phases["heater_finish_s"] += time.perf_counter() - t1
        share = (time.perf_counter() - t0) / max(len(t_configs), 1)
        self.compile_wall_s += time.perf_counter() - t0
        return [(e, share) for e in errors]

    def device(self) -> dict[str, Any]:
        from kerntune.decorator import device_and_versions

        return {"name": device_and_versions()[0]}

    def workload(self) -> dict[str, Any]:
        return {"kernel_name": self.st.name, "source": kernel_source(self.tuner)}


def two_launches(fn: Any) -> float:
    """The faster of two launches, each timed as the protocol's window times a launch (CUDA events, L2
    flushed before it; on the wall clock without a GPU): enough to tell a config 25% slower than the
    best from one that could beat it."""
    from kerntune.evaluate.runoff import interleaved

    return min(interleaved([fn], cycles=2, warm_cycles=0)[0])


class Heater:
    """Keeps the GPU loaded while a batch compiles in forked children, as the protocol's benchmark
    worker does between measurements (kerntune.evaluate.protocol): an H100 comes out of an idle
    gap at its boost clock, and a compute-bound kernel timed then reads 13-20% faster than under
    sustained load.  A loaded GPU lets the first config of the batch start from the sustained state
    with the usual warm-up instead of the 300 ms a rested GPU gets.  It queues about a millisecond
    of fp16 matmuls at a time (three 2048x2048 buffers, 24 MB) and stops with the compiles; with no
    GPU, or no memory for the buffers, it does nothing and the rested warm-up applies."""

    def __init__(self, torch: Any) -> None:
        self.torch, self.started = torch, None
        self.bufs: Any = None
        self.events: list[Any] = []  # the queued batches' completion events, oldest first
        if torch is not None and torch.cuda.is_available():
            try:  # random data (a matmul of constants draws less power), from a generator of its
                # own: the program's random stream must not move
                gen = torch.Generator(device="cuda").manual_seed(0)
                a = torch.randn(2048, 2048, device="cuda", dtype=torch.float16, generator=gen)
                self.bufs = (a, a.clone(), torch.empty_like(a))
            except Exception:  # noqa: BLE001 - no memory to spare: rest instead
                self.bufs = None

    def step(self) -> None:
        """Queue about a millisecond of matmuls unless two are already queued.  The caller polls
        every 2 ms or so: with one millisecond in flight at a time the GPU idled about two thirds
        of the time, nearer the boost clock than the sustained state the protocol times in; two in
        flight keep it busy across the poll.  (Tried against a pick the judge disagreed with, liger's
        SwiGLU backward at 4096x8192x28672; it did not change that pick: benchmarks/real_kernels
        README, acceptance 3.)"""
        if self.bufs is None:
            return
        while self.events and self.events[0].query():
            self.events.pop(0)
        if len(self.events) >= 2:
            return
        if self.started is None:
            self.started = time.perf_counter()
        a, b, c = self.bufs
        for _ in range(40):  # ~1 ms on an H100
            self.torch.mm(a, b, out=c)
        ev = self.torch.cuda.Event()
        ev.record()
        self.events.append(ev)

    def loaded(self) -> bool:
        """Whether the GPU has been kept loaded for at least 100 ms (past the boost phase)."""
        return self.started is not None and time.perf_counter() - self.started >= 0.1

    def finish(self) -> bool:
        """Stop; True when the GPU was kept loaded for at least 100 ms (the boost phase)."""
        if self.bufs is None:
            return False
        self.torch.cuda.synchronize()
        loaded = self.loaded()
        self.bufs, self.events = None, []
        return loaded


def torch_or_none() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch
