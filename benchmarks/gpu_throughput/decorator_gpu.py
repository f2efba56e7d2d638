"""@kerntune.autotune on the GPU: the matmul kernel of examples/triton/matmul.py,
decorated at run time.  Run twice (two processes) against one store: the first
tunes (in process, like triton.autotune), the second must find the winner in
the persistent cache and tune nothing.  Prints one JSON line per process.

    PYTHONPATH=$PWD python benchmarks/gpu_throughput/decorator_gpu.py STORE.db
"""

from __future__ import annotations

import json
import sys
import time

import torch
import triton
import triton.testing

import kerntune
from kerntune.evaluate.triton_backend.kernel_file import load_kernel_module

mod = load_kernel_module("examples/triton/matmul.py")
kernel = kerntune.autotune(space=mod.space, key=["M", "N", "K"], strategy="bayes", budget=30,
                           store=sys.argv[1], check=["c_ptr"])(mod._matmul_kernel)

m = n = k = 4096
a = torch.randn((m, k), device="cuda", dtype=torch.float16)
b = torch.randn((k, n), device="cuda", dtype=torch.float16)
c = torch.empty((m, n), device="cuda", dtype=torch.float16)


def call() -> None:
    grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)  # noqa: E731
    kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))


t0 = time.perf_counter()
call()
torch.cuda.synchronize()
first_call_s = time.perf_counter() - t0
ok = torch.allclose(c.float(), (a @ b).float(), rtol=1e-2, atol=1e-1)
ms = triton.testing.do_bench(call, rep=100)
config, _ = next(iter(kernel.best.values()))
print(json.dumps({"tuned_keys": kernel.tuned_keys, "first_call_s": round(first_call_s, 2), "config": config,
                  "correct": bool(ok), "ms": ms, "TFLOPs": 2 * m * n * k / (ms * 1e-3) / 1e12,
                  "kernel_hash": kernel.kernel_hash}))
