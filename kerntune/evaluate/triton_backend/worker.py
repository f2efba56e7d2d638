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
import sys
import time
import traceback
import types
from typing import Any, Callable, Iterator, TextIO

from kerntune.evaluate.triton_backend.fork_compile import CompileTimeout
from kerntune.evaluate.triton_backend.keep_warm import KeepWarm, read_tasks  # noqa: F401 - re-exported
from kerntune.evaluate.triton_backend.output_check import (  # noqa: F401 - compare_outputs re-exported
    clone, compare_outputs, unwritten_poisoned)
from kerntune.evaluate.triton_backend.worker_life import (  # noqa: F401 - re-exported
    _idle_watching, exit_with_parent, gpu_turn, watchdog_process)

#: The heap limit this worker runs under (MiB, 0: none), for the message of a MemoryError.
_memory_limit_mb = 0

#: CUDA's sticky errors, as PyTorch and Triton's launcher (``Triton Error [CUDA]: ...``) word them:
#: after one the process's CUDA context is unusable, and every later launch in it fails or lies.
STICKY_CUDA_ERRORS = ("illegal memory access", "illegal address", "illegal instruction", "misaligned address",
                      "unspecified launch failure", "device-side assert", "hardware stack error",
                      "invalid program counter", "launch timed out", "uncorrectable ecc",
                      "not supported on global/shared address space")


def is_fatal(text: str) -> bool:
    """True where an error leaves the CUDA context unusable, so the worker must not measure again:
    a sticky CUDA error, any ``CUDA error`` PyTorch raises or ``[CUDA]`` error Triton's launcher
    raises, except a launch refused for its resources (registers, threads), which leaves it intact."""
    low = text.lower()
    if any(name in low for name in STICKY_CUDA_ERRORS) or "illegal" in low:
        return True
    if "cuda error" in low or "[cuda]" in low:
        return "too many resources" not in low and "out of resource" not in low
    return False


def classify(exc: BaseException) -> tuple[str, str]:
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, MemoryError):
        mb = _memory_limit_mb or _heap_limit_mb()  # the process's own: a second copy of this module has no global
        limit = f"the worker's limit of {mb} MiB" if mb else "no limit set"
        return "runtime_error", f"out of host memory ({limit}; KERNTUNE_WORKER_MEMORY_MB changes it): {text}"
    if isinstance(exc, CompileTimeout):  # killed in its forked child (fork_compile)
        return "compile_timeout", text
    low = text.lower()
    if "outofresources" in low.replace(" ", "") or "out of resource" in low or "shared memory" in low:
        return "runtime_error", text
    # Triton's compiler raised it (CompilationError and kin): a compile error, whatever its text says
    # ("at 12:4: error: illegal use of tl.constexpr" is no CUDA error, though is_fatal counts "illegal")
    module, kind = type(exc).__module__ or "", type(exc).__name__.lower()
    if module.startswith(("triton.compiler", "triton.language", "triton.backends")) or "compil" in kind:
        return "compile_error", text
    if _cuda_sounding(low):
        return "runtime_error", text
    if "compil" in low or "triton" in module or "mlir" in low:
        return "compile_error", text
    return "runtime_error", text


def _cuda_sounding(low: str) -> bool:
    """Whether a (lowercased) error text is a CUDA runtime error: PyTorch's ``CUDA error``, Triton's
    launcher's ``[CUDA]``, a sticky error's wording; "illegal" only as CUDA words it (an illegal memory
    access, address or instruction, ``CUDA_ERROR_ILLEGAL_ADDRESS``), not a compiler's "illegal use of"."""
    words = low.replace("_", " ")
    if "cuda error" in words or "[cuda]" in low or any(name in words for name in STICKY_CUDA_ERRORS):
        return True
    return any(f"illegal {what}" in words for what in ("memory access", "address", "instruction"))


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


def _compile_only() -> None:
    """Make ``kernel[grid](...)`` compile without launching, in compile workers.

    Fifteen compile workers launching kernels would disturb the timings the benchmark
    worker takes at the same moment; with ``warmup=True`` Triton compiles (and fills its
    disk cache) but runs nothing.  Launch-time failures (shared memory, illegal
    addresses) then surface in the benchmark worker, which classifies them the same way.
    ``JITFunction.run`` is patched too: ``triton.heuristics`` and ``triton.autotune`` wrappers
    have their own ``__getitem__`` (``run(warmup=False)``, passed on to the JITFunction), and
    their kernels were launched for real.  It forces ``warmup`` while ``capture.COMPILE_ONLY``
    is set, and passes the call on unchanged once it is not.
    """
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:  # a launcher without Triton: its first launch is its compile
        return
    from kerntune.evaluate.triton_backend import capture

    def getitem(self: Any, grid: Any) -> Callable[..., Any]:
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=True, **kwargs)

    global _launching_getitem, _launching_run
    if _launching_getitem is None:
        _launching_getitem = JITFunction.__getitem__
    if _launching_run is None:
        _launching_run = JITFunction.run
    launching = _launching_run

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        return launching(self, *args, grid=grid, warmup=warmup or capture.COMPILE_ONLY, **kwargs)

    JITFunction.__getitem__ = getitem  # type: ignore[method-assign]
    JITFunction.run = run  # type: ignore[method-assign]
    capture.COMPILE_ONLY = True  # kernels of installed packages: record their launches, compile only


#: ``JITFunction.__getitem__`` and ``run`` as Triton has them, kept by ``_compile_only`` for
#: ``package_kernels_launch``.
_launching_getitem: Callable[..., Any] | None = None
_launching_run: Callable[..., Any] | None = None


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

    patched = JITFunction.__getitem__, JITFunction.run
    JITFunction.__getitem__ = _launching_getitem  # type: ignore[method-assign]
    if _launching_run is not None:
        JITFunction.run = _launching_run  # type: ignore[method-assign]
    try:
        yield
    finally:
        JITFunction.__getitem__, JITFunction.run = patched  # type: ignore[method-assign]


def _heap_limit_mb() -> int:
    """The heap limit this process runs under (MiB, 0: none), as ``limit_memory`` set it."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_DATA)[0]
    except (ImportError, OSError, ValueError):
        return 0
    return 0 if soft == resource.RLIM_INFINITY else soft >> 20


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


def cuda_broken(torch: Any) -> str | None:
    """After a failed launch, where this process uses CUDA: the error a synchronize raises now (the
    context is unusable, whatever the launch's own error said), else None.  ``torch`` may be None where
    the kernel file had not imported it at start-up and a launch has since: sys.modules has it then."""
    torch = torch if torch is not None else sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    try:
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - any error here means the context is gone
        return f"{type(exc).__name__}: {exc}"
    return None


def _runoff(module: Any, space: Any, inputs: Any, task: dict[str, Any]) -> dict[str, Any]:
    """The runoff over ``task["configs"]`` (screening times ``task["first_ms"]``): the winner's index and
    what settled it.  The configs passed the output check when they were screened."""
    from kerntune.evaluate.runoff import settle

    configs = [space.canonical(c) for c in task["configs"]]
    calls = {str(i): (lambda c=c: module.launch(c, inputs)) for i, c in enumerate(configs)}
    got = settle(calls, {str(i): float(ms) for i, ms in enumerate(task["first_ms"])})
    return {"status": "ok", "winner": int(got.winner), "time_ms": got.ms, "rounds": got.rounds,
            "cycles": got.cycles, "screen": got.screen, "tie_windows": got.tie_windows, "timed": got.timed}


def _build_inputs(module: Any, shape: tuple[int, ...], torch: Any, compile_only: bool) -> tuple[Any, list[Any]]:
    """The worker's inputs, built once at start-up, and the copies every launch starts from (none in a
    compile worker, which never launches): GPU work, run under the worker's ``gpu_turn``."""
    if hasattr(module, "launch_state"):  # a package's kernel: the call's other kernels need not autotune here
        from kerntune.evaluate.triton_backend.capture import other_autotuners_fixed

        with other_autotuners_fixed(module.kernel), package_kernels_launch():
            inputs = module.make_inputs(shape)
    else:
        # an output buffer make_inputs leaves uninitialised (torch.empty) starts as NaN, restored so before
        # every launch: what a config leaves unwritten in it fails the check instead of holding whatever
        # the allocator's block held (package kernels poison their outputs in before_check instead)
        with unwritten_poisoned(torch if not compile_only else None):
            inputs = module.make_inputs(shape)
    if torch is not None and torch.cuda.is_available():
        # what building the inputs left in the caching allocator (temporaries of a package's op)
        # goes back to the GPU: sixteen workers each holding theirs ran an H100 out of memory
        torch.cuda.empty_cache()
    # Kernels may write their inputs in place (accumulators, in-place softmax): every launch
    # starts from these copies, so each config sees the same inputs and the reference holds.
    originals = [] if compile_only else [clone(t) for t in inputs]  # compile workers never launch
    return inputs, originals


def _holds_triton(module: Any) -> bool:
    """Whether the kernel file's own namespace holds Triton: the module, one of its submodules or a
    jitted kernel (``sys.modules`` cannot tell: a compile worker imports Triton itself)."""
    for value in list(getattr(module, "__dict__", {}).values()):
        owner = value.__name__ if isinstance(value, types.ModuleType) else type(value).__module__
        if isinstance(owner, str) and owner.split(".")[0] == "triton":
            return True
    return False


def main() -> None:
    path, shape = sys.argv[1], tuple(int(x) for x in sys.argv[2].split("x"))
    flags = sys.argv[3:]
    compile_only = "--compile-only" in flags
    keep_warm_flag = "--keep-warm" in flags
    memory_mb = next((int(f.partition("=")[2]) for f in flags if f.startswith("--memory-mb=")), 0)
    # this GPU's lock (worker_life.gpu_turn): shared by compile workers' start-ups, exclusive for timings
    lock = next((f.partition("=")[2] for f in flags if f.startswith("--gpu-lock=")), None)
    parent_gone = exit_with_parent(thread=not compile_only)
    if compile_only:  # a compile may run for minutes: a watchdog ends it if the tuner dies meanwhile
        watchdog_process()
    if memory_mb > 0:
        limit_memory(memory_mb)
    pipe = results_pipe()
    if compile_only:
        _compile_only()

    from kerntune.evaluate.triton_backend.kernel_file import load_kernel_module, module_space
    from kerntune.space import jsonable

    module = load_kernel_module(path)
    space = module_space(module, shape)
    # torch where the kernel file uses it: a Triton kernel's tensors are torch's (its launch may be the
    # only place that imports torch), and a package kernel has imported it through its package. A
    # launcher with neither (plain-Python kernels) is timed by the wall clock and skips the 3-4 s import
    # in every worker it starts.
    torch = sys.modules.get("torch")
    if torch is None and _holds_triton(module):
        import torch

    def say(message: dict[str, Any]) -> None:
        pipe.write(json.dumps(message) + "\n")
        pipe.flush()

    # building the inputs runs on the GPU (a package's call, its autotune in a benchmark worker): never
    # during another worker's timing on this GPU, nor a benchmark worker's during a compile worker's
    with gpu_turn(lock, exclusive=not compile_only, say=say):
        inputs, originals = _build_inputs(module, shape, torch, compile_only)
        if torch is None and "torch" in sys.modules:  # make_inputs imported torch itself: built again
            torch = sys.modules["torch"]  # with it, so that fresh outputs are poisoned and CUDA times;
            inputs = originals = None  # the first build's memory goes back first
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            inputs, originals = _build_inputs(module, shape, torch, compile_only)
    bench = timer(torch)

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

    from kerntune.evaluate.triton_backend.reference import Reference

    reference = Reference(module, space, inputs, originals, torch, sync, restore, say)
    say({"ready": True})  # start-up over: the parent's task timeouts start now
    on_gpu = torch is not None and torch.cuda.is_available()
    keep = KeepWarm(keep_warm_flag and on_gpu and not compile_only)
    idle = _idle_watching(sys.stdin.fileno(), parent_gone) if compile_only else lambda: keep.step(sync)
    for line in read_tasks(sys.stdin.fileno(), idle):
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
                with gpu_turn(lock, exclusive=True, say=say):
                    result = _runoff(module, space, inputs, task)
                restore()
            elif task["mode"] == "compile":
                module.launch(config, inputs)
                sync()
                if not compile_only:
                    restore()
                result: dict[str, Any] = {"status": "ok", "compile_s": time.perf_counter() - t0}
            else:
                failed = reference.prepare(bool(task.get("default_reference", True)))
                if failed is not None:  # the CUDA context died with the reference's launch
                    say(failed)
                    sys.exit(3)
                if reference.error:
                    raise RuntimeError(reference.error)
                if callable(getattr(module, "before_check", None)):
                    module.before_check(inputs)  # a package kernel: outputs poisoned, a partial write fails
                with unwritten_poisoned(torch):  # what the launch leaves unwritten is NaN, not stale values
                    out = module.launch(config, inputs)
                sync()
                wrong, news = reference.check(out)
                if not wrong:  # integer or bool buffers whose fill a right output may hold: zeroed, once more
                    wrong = reference.zeroed.check(out, config)
                restore()
                if wrong:
                    result = {"status": "wrong_result", "error": wrong, **news}
                else:
                    reps = int(task.get("rep_ms", 20))
                    warm = keep.warmup_ms(int(task.get("warmup_ms", max(reps // 4, 5))))
                    fn = lambda: module.launch(config, inputs)  # noqa: E731
                    with gpu_turn(lock, exclusive=True, say=say):  # no compile worker's start-up meanwhile
                        times = sorted(bench(fn, reps, warm))
                    restore()
                    med = times[len(times) // 2]
                    if math.isfinite(med):
                        keep.set(fn, med)
                    result = {"status": "ok" if math.isfinite(med) else "runtime_error", "time_ms": med,
                              "times_ms": times[:: max(1, len(times) // 32)], **news}
                result["bench_s"] = time.perf_counter() - t0
        except Exception as exc:  # noqa: BLE001 - every failure of user code becomes a status
            status, text = classify(exc)
            result = {"status": status, "error": text[-2000:], "trace": traceback.format_exc()[-2000:]}
            # a compile error's text may say "illegal" (is_fatal's broad match): only the context itself tells
            broken = text if status == "runtime_error" and is_fatal(text) else cuda_broken(torch)
            if broken is not None:
                # The CUDA context is unusable now: report, then let the parent start a fresh worker
                # ("fatal" tells it not to send this process the next config).
                if broken != text:
                    result["error"] = f"{text[-1500:]} (then the CUDA context failed: {broken[:400]})"
                result["fatal"] = True
                say(result)
                sys.exit(3)
        say(result)


if __name__ == "__main__":
    main()
