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

import json
import math
import os
import sys
import time
import traceback
from typing import Any, Callable, TextIO

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
    anything else (a CPU launcher's lists or numbers) is compared as float arrays."""
    outs = out if isinstance(out, (tuple, list)) and not _is_plain_numbers(out) else (out,)
    refs = ref if isinstance(ref, (tuple, list)) and not _is_plain_numbers(ref) else (ref,)
    if len(outs) != len(refs):
        return f"returned {len(outs)} outputs, the reference {len(refs)}"
    for o, r in zip(outs, refs):
        if torch is not None and isinstance(r, torch.Tensor):
            if not isinstance(o, torch.Tensor):
                return f"returned {type(o).__name__}, the reference a tensor"
            if torch.isnan(o.float()).any():
                return "output holds NaN"
            tol = {torch.float16: (1e-2, 1e-2), torch.bfloat16: (2e-2, 2e-2), torch.float32: (1e-4, 1e-4)}
            rtol, atol = tol.get(r.dtype, (1e-3, 1e-3))
            scale = max(1.0, float(r.float().abs().max())) if r.numel() else 1.0
            if o.shape != r.shape or not torch.allclose(o.float(), r.float(), rtol=rtol, atol=atol * scale):
                err = (o.float() - r.float()).abs().max().item() if o.shape == r.shape else float("nan")
                return f"differs from the reference (max abs error {err:.3g})"
        else:
            import numpy as np

            a, b = np.asarray(o, dtype=float), np.asarray(r, dtype=float)
            if np.isnan(a).any():
                return "output holds NaN"
            if a.shape != b.shape or not np.allclose(a, b, rtol=1e-3, atol=1e-3):
                err = float(np.abs(a - b).max()) if a.shape == b.shape else float("nan")
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


def timer(torch: Any, max_samples: int = 1000) -> Callable[[Callable[[], Any], int], list[float]]:
    """Triton's do_bench (CUDA events, L2 flushed between runs) on a GPU; a wall-clock
    loop of at most ``max_samples`` runs otherwise, so launchers without a GPU (tests,
    CPU kernels) still measure.  The worker and the in-process decorator share it."""
    if torch is not None and torch.cuda.is_available():
        import triton.testing

        def gpu(fn: Callable[[], Any], rep_ms: int) -> list[float]:
            return [float(t) for t in triton.testing.do_bench(fn, warmup=max(rep_ms // 4, 5), rep=rep_ms,
                                                              return_mode="all")]
        return gpu

    def cpu(fn: Callable[[], Any], rep_ms: int) -> list[float]:
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
    """
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:  # a launcher without Triton: its first launch is its compile
        return

    def getitem(self: Any, grid: Any) -> Callable[..., Any]:
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=True, **kwargs)

    JITFunction.__getitem__ = getitem  # type: ignore[method-assign]


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


def main() -> None:
    path, shape = sys.argv[1], tuple(int(x) for x in sys.argv[2].split("x"))
    flags = sys.argv[3:]
    compile_only = "--compile-only" in flags
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

    module = load_kernel_module(path)
    space = module_space(module)
    bench = timer(torch)
    inputs = module.make_inputs(shape)
    # Kernels may write their inputs in place (accumulators, in-place softmax): every launch
    # starts from these copies, so each config sees the same inputs and the reference holds.
    originals = [clone(t) for t in inputs]
    reference = None

    def sync() -> None:
        if torch is not None and torch.cuda.is_available():
            torch.cuda.synchronize()

    def restore() -> None:
        for t, o in zip(inputs, originals):
            if hasattr(t, "copy_"):
                t.copy_(o)
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

    for line in sys.stdin:
        task = json.loads(line)
        config = space.canonical(task["config"])
        t0 = time.perf_counter()
        try:
            if task["mode"] == "compile":
                module.launch(config, inputs)
                sync()
                if not compile_only:
                    restore()
                result: dict[str, Any] = {"status": "ok", "compile_s": time.perf_counter() - t0}
            else:
                ref = get_reference()
                out = module.launch(config, inputs)
                sync()
                wrong = compare_outputs(out, ref, torch)
                restore()
                if wrong:
                    result = {"status": "wrong_result", "error": wrong}
                else:
                    reps = int(task.get("rep_ms", 20))
                    times = sorted(bench(lambda: module.launch(config, inputs), reps))
                    restore()
                    med = times[len(times) // 2]
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
