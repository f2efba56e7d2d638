"""A measuring process: compiles or benchmarks one config at a time.

The parent talks to it over stdin/stdout, one JSON line per task, so a config
that segfaults, hangs or corrupts the CUDA context costs this process, not
the tuning run: the parent sees EOF or a timeout, classifies the config, and
starts a fresh worker.

``--memory-mb=N`` caps the worker's heap (RLIMIT_DATA: malloc, brk and private
writable mmaps, but not the address space CUDA reserves, which RLIMIT_AS would
count and break), so a config that allocates without bound fails with
MemoryError (``runtime_error``) instead of taking the machine's memory.  The
results pipe is kept apart from the kernel's own output: fd 1 and
``sys.stdout`` are pointed at stderr, so a launcher that prints (or a kernel's
printf) cannot corrupt the protocol.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import sys
import time
import traceback
from typing import Any, Callable, Iterator, TextIO

#: The heap limit this worker runs under (MiB, 0: none), for the message of a MemoryError.
_memory_limit_mb = 0


def classify(exc: BaseException) -> tuple[str, str]:
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, MemoryError):
        limit = f"the worker's limit of {_memory_limit_mb} MiB" if _memory_limit_mb else "no limit set"
        return "runtime_error", f"out of host memory ({limit}; KERNTUNE_WORKER_MEMORY_MB changes it): {text}"
    low = text.lower()
    if "outofresources" in low.replace(" ", "") or "out of resource" in low or "shared memory" in low:
        return "runtime_error", text
    if "illegal memory" in low or "cuda error" in low or "misaligned" in low:
        return "runtime_error", text
    if "compil" in low or "triton" in type(exc).__module__ or "mlir" in low:
        return "compile_error", text
    return "runtime_error", text


def compare_outputs(out: Any, ref: Any, torch: Any) -> str | None:
    """None if ``out`` matches ``ref``; else why not.  Tensors use dtype tolerances;
    anything else (a CPU launcher's lists or numbers) is compared as float arrays.  NaN is wrong only
    where the reference holds a number (a masked row's NaN in the reference is the right answer there,
    and a poisoned output a config leaves unwritten still shows as NaN where the reference wrote)."""
    outs = out if isinstance(out, (tuple, list)) and not _is_plain_numbers(out) else (out,)
    refs = ref if isinstance(ref, (tuple, list)) and not _is_plain_numbers(ref) else (ref,)
    if len(outs) != len(refs):
        return f"returned {len(outs)} outputs, the reference {len(refs)}"
    for o, r in zip(outs, refs):
        if torch is not None and isinstance(r, torch.Tensor):
            if not isinstance(o, torch.Tensor):
                return f"returned {type(o).__name__}, the reference a tensor"
            if o.shape != r.shape:
                return f"output shape {tuple(o.shape)}, the reference's {tuple(r.shape)}"
            of, rf = o.float(), r.float()
            if (torch.isnan(of) & ~torch.isnan(rf)).any():
                return "output holds NaN"
            tol = {torch.float16: (1e-2, 1e-2), torch.bfloat16: (2e-2, 2e-2), torch.float32: (1e-4, 1e-4)}
            rtol, atol = tol.get(r.dtype, (1e-3, 1e-3))
            finite = rf[torch.isfinite(rf)]
            scale = max(1.0, float(finite.abs().max())) if finite.numel() else 1.0
            if not torch.allclose(of, rf, rtol=rtol, atol=atol * scale, equal_nan=True):
                err = torch.nan_to_num((of - rf).abs(), nan=0.0).max().item()
                return f"differs from the reference (max abs error {err:.3g})"
        else:
            import numpy as np

            a, b = np.asarray(o, dtype=float), np.asarray(r, dtype=float)
            if a.shape != b.shape:
                return f"output shape {a.shape}, the reference's {b.shape}"
            if (np.isnan(a) & ~np.isnan(b)).any():
                return "output holds NaN"
            if not np.allclose(a, b, rtol=1e-3, atol=1e-3, equal_nan=True):
                err = float(np.nanmax(np.abs(a - b)))
                return f"differs from the reference (max abs error {err:.3g})"
    return None


def _is_plain_numbers(x: Any) -> bool:
    return all(isinstance(v, (int, float)) for v in x)


def clone(x: Any) -> Any:
    if hasattr(x, "clone"):
        return x.clone()
    if hasattr(x, "copy") and hasattr(x, "shape"):  # numpy arrays
        return x.copy()
    if isinstance(x, (tuple, list)):
        return type(x)(clone(v) for v in x)
    return x


def timer(torch: Any, max_samples: int = 1000) -> Callable[..., list[float]]:
    """Triton's do_bench (CUDA events, L2 flushed between runs) on a GPU; a wall-clock
    loop of at most ``max_samples`` runs otherwise, so launchers without a GPU (tests,
    CPU kernels) still measure.  ``warmup_ms`` of the kernel itself precede the window
    (kerntune.evaluate.protocol says why).  The worker and the in-process decorator share it."""
    if torch is not None and torch.cuda.is_available():
        import triton.testing

        def gpu(fn: Callable[[], Any], rep_ms: int, warmup_ms: int | None = None) -> list[float]:
            warm = max(rep_ms // 4, 5) if warmup_ms is None else warmup_ms
            return [float(t) for t in triton.testing.do_bench(fn, warmup=warm, rep=rep_ms, return_mode="all")]
        return gpu

    def cpu(fn: Callable[[], Any], rep_ms: int, warmup_ms: int | None = None) -> list[float]:
        times: list[float] = []
        end = time.perf_counter() + rep_ms / 1000
        while not times or (time.perf_counter() < end and len(times) < max_samples):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1000)
        return times
    return cpu


class KeepWarm:
    """Keeps the GPU loaded with the last kernel measured while the worker waits for its next task.

    Without it a config that waited for its compile would be timed from a rested GPU, at the
    boost clock, and the next one under load at the sustained clock: 13-20% apart for a
    compute-bound kernel on an H100 (kerntune.evaluate.protocol).  After ``limit_s`` of idling
    it stops (an idle tuner should not burn the GPU) and the next measurement is told to warm
    up for ``rested_warmup_ms`` instead.
    """

    def __init__(self, enabled: bool, limit_s: float = 30.0, rested_warmup_ms: int = 300) -> None:
        self.enabled, self.limit_s, self.rested_warmup_ms = enabled, limit_s, rested_warmup_ms
        self.rested = True  # nothing measured yet: the GPU may have been idle for long
        self.fn: Callable[[], Any] | None = None
        self.n = 1
        self.idle_since = time.monotonic()
        self.dirty = False  # inputs touched by warming launches: restore before the next task

    def set(self, fn: Callable[[], Any], median_ms: float) -> None:
        if self.enabled:
            self.fn, self.n = fn, max(1, min(1000, int(10.0 / max(median_ms, 1e-3))))
        self.idle_since = time.monotonic()
        self.rested = False

    def step(self, sync: Callable[[], None]) -> bool:
        """Run about 10 ms of the last kernel; False once there is nothing (more) to run."""
        if self.fn is None or time.monotonic() - self.idle_since > self.limit_s:
            return False
        try:
            for _ in range(self.n):
                self.fn()
            sync()
        except Exception:  # noqa: BLE001 - a kernel that failed here is simply not used again
            self.fn = None
            return False
        self.dirty = True
        return True

    def warmup_ms(self, asked: int) -> int:
        """The warm-up the next measurement needs: longer when the GPU has rested."""
        if self.enabled and (self.rested or time.monotonic() - self.idle_since > self.limit_s):
            return max(asked, self.rested_warmup_ms)
        return asked


def read_tasks(fd: int, idle: Callable[[], bool]) -> Iterator[bytes]:
    """Lines from ``fd``; while none is waiting, ``idle()`` is called until it returns False."""
    buf = b""
    while True:
        while b"\n" not in buf:
            if select.select([fd], [], [], 0)[0] or not idle():
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return
                buf += chunk
        line, _, buf = buf.partition(b"\n")
        yield line


def _compile_only() -> None:
    """Make ``kernel[grid](...)`` compile without launching, in compile workers.

    Fifteen compile workers launching kernels would disturb the timings the benchmark
    worker takes at the same moment; with ``warmup=True`` Triton compiles (and fills its
    disk cache) but runs nothing.  Launch-time failures (shared memory, illegal
    addresses) then surface in the benchmark worker, which classifies them the same way.
    """
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:  # a launcher without Triton: its first launch is its compile
        return

    def getitem(self: Any, grid: Any) -> Callable[..., Any]:
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=True, **kwargs)

    global _launching_getitem
    if _launching_getitem is None:
        _launching_getitem = JITFunction.__getitem__
    JITFunction.__getitem__ = getitem  # type: ignore[method-assign]
    from kerntune.evaluate.triton_backend import capture

    capture.COMPILE_ONLY = True  # kernels of installed packages: record their launches, compile only


#: ``JITFunction.__getitem__`` as Triton has it, kept by ``_compile_only`` for ``package_kernels_launch``.
_launching_getitem: Callable[..., Any] | None = None


@contextlib.contextmanager
def package_kernels_launch() -> Iterator[None]:
    """In a compile worker, while a package's own call builds the inputs: its other kernels launch.

    A package's call may read on the host what its kernels computed on the GPU: liger's fused MoE
    counts the tiles of its routing with three kernels and sizes the tuned GEMM's grid with ``.item()``.
    Compiled only, those kernels leave that count at whatever the empty buffer held: zero, and the
    tuned kernel is never launched (the worker fails to start), or a grid over garbage.  So they run,
    once at start-up, as the call's autotuned kernels already do (``triton.autotune`` launches through
    its own ``run``); the tuned kernel itself is only recorded (``capture._record``), and every config
    still only compiles."""
    if _launching_getitem is None:  # not a compile worker: every launch runs already
        yield
        return
    from triton.runtime.jit import JITFunction

    patched = JITFunction.__getitem__
    JITFunction.__getitem__ = _launching_getitem  # type: ignore[method-assign]
    try:
        yield
    finally:
        JITFunction.__getitem__ = patched  # type: ignore[method-assign]


def limit_memory(mb: int) -> None:
    """Cap this process's heap at ``mb`` MiB (soft and hard, so the kernel's code cannot lift it)."""
    global _memory_limit_mb
    import resource

    limit = mb << 20
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    _memory_limit_mb = limit >> 20


def results_pipe() -> TextIO:
    """The pipe to the parent, for results alone; everything else written to stdout (Python
    prints and C-level writes to fd 1) goes to stderr from now on."""
    pipe = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return pipe


def _runoff(module: Any, space: Any, inputs: Any, task: dict[str, Any]) -> dict[str, Any]:
    """The runoff over ``task["configs"]`` (screening times ``task["first_ms"]``): the winner's index and
    what settled it.  The configs passed the output check when they were screened."""
    from kerntune.evaluate.runoff import settle

    configs = [space.canonical(c) for c in task["configs"]]
    calls = {str(i): (lambda c=c: module.launch(c, inputs)) for i, c in enumerate(configs)}
    got = settle(calls, {str(i): float(ms) for i, ms in enumerate(task["first_ms"])})
    return {"status": "ok", "winner": int(got.winner), "time_ms": got.ms, "rounds": got.rounds,
            "cycles": got.cycles, "screen": got.screen, "tie_windows": got.tie_windows, "timed": got.timed}


def main() -> None:
    path, shape = sys.argv[1], tuple(int(x) for x in sys.argv[2].split("x"))
    flags = sys.argv[3:]
    compile_only = "--compile-only" in flags
    keep_warm_flag = "--keep-warm" in flags
    memory_mb = next((int(f.partition("=")[2]) for f in flags if f.startswith("--memory-mb=")), 0)
    if memory_mb > 0:
        limit_memory(memory_mb)
    pipe = results_pipe()
    if compile_only:
        _compile_only()
    try:
        import torch
    except ImportError:  # a launcher that needs no torch (the CPU test kernels)
        torch = None

    from kerntune.evaluate.triton_backend.kernel_file import load_kernel_module, module_space
    from kerntune.space import jsonable

    module = load_kernel_module(path)
    space = module_space(module, shape)
    bench = timer(torch)
    if hasattr(module, "launch_state"):  # a package's kernel: the call's other kernels need not autotune here
        from kerntune.evaluate.triton_backend.capture import other_autotuners_fixed

        with other_autotuners_fixed(module.kernel), package_kernels_launch():
            inputs = module.make_inputs(shape)
    else:
        inputs = module.make_inputs(shape)
    if torch is not None and torch.cuda.is_available():
        # what building the inputs left in the caching allocator (temporaries of a package's op)
        # goes back to the GPU: sixteen workers each holding theirs ran an H100 out of memory
        torch.cuda.empty_cache()
    # Kernels may write their inputs in place (accumulators, in-place softmax): every launch
    # starts from these copies, so each config sees the same inputs and the reference holds.
    originals = [] if compile_only else [clone(t) for t in inputs]  # compile workers never launch
    reference = None

    def sync() -> None:
        if torch is not None and torch.cuda.is_available():
            torch.cuda.synchronize()

    from kerntune.evaluate.triton_backend.capture import no_grad

    def restore() -> None:
        with no_grad():
            for t, o in zip(inputs, originals):
                if hasattr(t, "copy_"):
                    t.copy_(o)  # under no_grad: inputs may be weights that require gradients
                elif isinstance(t, list):
                    t[:] = clone(o)

    def get_reference() -> Any:
        nonlocal reference
        if reference is None:
            if callable(getattr(module, "reference", None)):
                reference = module.reference(inputs)
            else:
                reference = module.launch(space.default, inputs)
            sync()
            reference = clone(reference)
            restore()
        return reference

    pipe.write(json.dumps({"ready": True}) + "\n")  # start-up over: the parent's task timeouts start now
    pipe.flush()
    on_gpu = torch is not None and torch.cuda.is_available()
    keep = KeepWarm(keep_warm_flag and on_gpu and not compile_only)
    for line in read_tasks(sys.stdin.fileno(), lambda: keep.step(sync)):
        task = json.loads(line)
        if task.get("mode") == "ping":  # start-up is over (TritonEvaluator.wait_ready)
            pipe.write(json.dumps({"status": "ok"}) + "\n")
            pipe.flush()
            continue
        if keep.dirty:
            restore()
            keep.dirty = False
        config = space.canonical(task.get("config") or {})
        t0 = time.perf_counter()
        try:
            if task["mode"] == "baseline":  # what a package kernel's own code chose (kerntune.adapters)
                pick = module.baseline() if hasattr(module, "baseline") else None
                result = {"status": "ok", "config": {k: jsonable(v) for k, v in pick.items()} if pick else None,
                          "autotune_s": getattr(module, "autotune_s", None)}
            elif task["mode"] == "runoff":  # the leaders of a search, launched in turn (kerntune.evaluate.runoff)
                result = _runoff(module, space, inputs, task)
                restore()
            elif task["mode"] == "compile":
                module.launch(config, inputs)
                sync()
                if not compile_only:
                    restore()
                result: dict[str, Any] = {"status": "ok", "compile_s": time.perf_counter() - t0}
            else:
                ref = get_reference()
                if callable(getattr(module, "before_check", None)):
                    module.before_check(inputs)  # a package kernel: outputs poisoned, a partial write fails
                out = module.launch(config, inputs)
                sync()
                wrong = compare_outputs(out, ref, torch)
                restore()
                if wrong:
                    result = {"status": "wrong_result", "error": wrong}
                else:
                    reps = int(task.get("rep_ms", 20))
                    warm = keep.warmup_ms(int(task.get("warmup_ms", max(reps // 4, 5))))
                    fn = lambda: module.launch(config, inputs)  # noqa: E731
                    times = sorted(bench(fn, reps, warm))
                    restore()
                    med = times[len(times) // 2]
                    if math.isfinite(med):
                        keep.set(fn, med)
                    result = {"status": "ok" if math.isfinite(med) else "runtime_error", "time_ms": med,
                              "times_ms": times[:: max(1, len(times) // 32)]}
                result["bench_s"] = time.perf_counter() - t0
        except Exception as exc:  # noqa: BLE001 - every failure of user code becomes a status
            status, text = classify(exc)
            result = {"status": status, "error": text[-2000:], "trace": traceback.format_exc()[-2000:]}
            if "illegal" in text.lower() or "cuda error" in text.lower():
                # The CUDA context is unusable now: report, then let the parent start a fresh worker
                # ("fatal" tells it not to send this process the next config).
                result["fatal"] = True
                pipe.write(json.dumps(result) + "\n")
                pipe.flush()
                sys.exit(3)
        pipe.write(json.dumps(result) + "\n")
        pipe.flush()


if __name__ == "__main__":
    main()
