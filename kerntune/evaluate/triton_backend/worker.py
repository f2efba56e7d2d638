"""A measuring process: compiles or benchmarks one config at a time.

The parent talks to it over stdin/stdout, one JSON line per task, so a config
that segfaults, hangs or corrupts the CUDA context costs this process, not
the tuning run: the parent sees EOF or a timeout, classifies the config, and
starts a fresh worker.
"""

from __future__ import annotations

import json
import math
import sys
import time
import traceback
from typing import Any


def _classify(exc: BaseException) -> tuple[str, str]:
    text = f"{type(exc).__name__}: {exc}"
    low = text.lower()
    if "outofresources" in low.replace(" ", "") or "out of resource" in low or "shared memory" in low:
        return "runtime_error", text
    if "illegal memory" in low or "cuda error" in low or "misaligned" in low:
        return "runtime_error", text
    if "compil" in low or "triton" in type(exc).__module__ or "mlir" in low:
        return "compile_error", text
    return "runtime_error", text


def _compare(out: Any, ref: Any, torch: Any) -> str | None:
    outs = out if isinstance(out, (tuple, list)) else (out,)
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    for o, r in zip(outs, refs):
        if torch.isnan(o.float()).any():
            return "output holds NaN"
        tol = {torch.float16: (1e-2, 1e-2), torch.bfloat16: (2e-2, 2e-2), torch.float32: (1e-4, 1e-4)}
        rtol, atol = tol.get(r.dtype, (1e-3, 1e-3))
        if o.shape != r.shape or not torch.allclose(o.float(), r.float(), rtol=rtol, atol=atol * max(1.0, float(r.float().abs().max()))):
            err = (o.float() - r.float()).abs().max().item() if o.shape == r.shape else float("nan")
            return f"differs from the reference (max abs error {err:.3g})"
    return None


def main() -> None:
    path, shape = sys.argv[1], tuple(int(x) for x in sys.argv[2].split("x"))
    import torch
    import triton.testing

    from kerntune.evaluate.triton_backend.kernel_file import load_kernel_module, module_space

    module = load_kernel_module(path)
    space = module_space(module)
    inputs = module.make_inputs(shape)
    originals = [t.clone() if hasattr(t, "clone") else t for t in inputs]
    reference = None

    def restore() -> None:
        for t, o in zip(inputs, originals):
            if hasattr(t, "copy_"):
                t.copy_(o)

    def get_reference() -> Any:
        nonlocal reference
        if reference is None:
            if callable(getattr(module, "reference", None)):
                reference = module.reference(inputs)
            else:
                reference = module.launch(space.default, inputs)
            torch.cuda.synchronize()
            reference = tuple(r.clone() for r in reference) if isinstance(reference, (tuple, list)) else reference.clone()
            restore()
        return reference

    for line in sys.stdin:
        task = json.loads(line)
        config = space.canonical(task["config"])
        t0 = time.perf_counter()
        try:
            if task["mode"] == "compile":
                module.launch(config, inputs)
                torch.cuda.synchronize()
                restore()
                result: dict[str, Any] = {"status": "ok", "compile_s": time.perf_counter() - t0}
            else:
                ref = get_reference()
                out = module.launch(config, inputs)
                torch.cuda.synchronize()
                wrong = _compare(out, ref, torch)
                restore()
                if wrong:
                    result = {"status": "wrong_result", "error": wrong}
                else:
                    reps = int(task.get("rep_ms", 100))
                    times = triton.testing.do_bench(lambda: module.launch(config, inputs), warmup=25, rep=reps,
                                                    return_mode="all")
                    restore()
                    times = sorted(float(t) for t in times)
                    med = times[len(times) // 2]
                    result = {"status": "ok" if math.isfinite(med) else "runtime_error", "time_ms": med,
                              "times_ms": times[:: max(1, len(times) // 32)]}
                result["bench_s"] = time.perf_counter() - t0
        except Exception as exc:  # noqa: BLE001 - every failure of user code becomes a status
            status, text = _classify(exc)
            result = {"status": status, "error": text[-2000:], "trace": traceback.format_exc()[-2000:]}
            if "illegal" in text.lower() or "cuda error" in text.lower():
                # The CUDA context is unusable now: report, then let the parent start a fresh worker.
                sys.stdout.write(json.dumps(result) + "\n")
                sys.stdout.flush()
                sys.exit(3)
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
