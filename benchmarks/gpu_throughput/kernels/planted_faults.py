"""y = 2 * x over a large fp32 vector with every fault of issue 10 planted on the
otherwise best-looking block size: PLANT="oob" writes far out of bounds (an
illegal address: the CUDA context dies with the worker), "slow_compile"
unrolls a huge loop (killed at --compile-timeout), "wrong" computes 3x, "nan"
writes NaN, "oom" asks for a 4 TiB workspace (CUDA out of memory), "segfault"
dereferences a null pointer on the host (the worker process dies by SIGSEGV).
A tuner that misclassifies any of them picks a bad winner or dies.
"""

import ctypes
import sys

import torch
import triton
import triton.language as tl

from kerntune.space import Choice, Space

name = "planted_faults"
description = "y = 2x, fp32, memory-bound; shape = N"

space = Space(
    [
        Choice("BLOCK", options=(256, 512, 1024, 2048, 4096)),
        Choice("num_warps", options=(2, 4, 8)),
        Choice("PLANT", options=("none", "oob", "slow_compile", "wrong", "nan", "oom", "segfault")),
    ],
    constraints=["PLANT == 'none' or (BLOCK == 1024 and num_warps == 4)"],
    default={"BLOCK": 1024, "num_warps": 4, "PLANT": "none"},
)


@triton.jit
def _scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, MODE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    if MODE == 1:  # out of bounds: ~256 GiB past the buffer, unmasked
        tl.store(y_ptr + offs + 68719476736, x * 2.0)
    elif MODE == 2:  # a loop unrolled 20,000 times: compiles for minutes
        acc = x
        for i in tl.static_range(20000):
            acc = acc * 1.0000001 + 0.0
        tl.store(y_ptr + offs, acc * 0.0 + x * 2.0, mask=mask)
    elif MODE == 3:
        tl.store(y_ptr + offs, x * 3.0, mask=mask)
    elif MODE == 4:
        tl.store(y_ptr + offs, x * float("nan"), mask=mask)
    else:
        tl.store(y_ptr + offs, x * 2.0, mask=mask)


_MODES = {"none": 0, "oob": 1, "slow_compile": 2, "wrong": 3, "nan": 4, "oom": 0, "segfault": 0}
# Compile workers call launch() with launches turned into compiles; the host-side faults are
# planted in real launches only, so they hit the benchmark worker as they would in production.
_LAUNCHING = "--compile-only" not in sys.argv


def make_inputs(shape):
    (n,) = shape
    torch.manual_seed(0)
    x = torch.randn(n, device="cuda", dtype=torch.float32)
    return x, torch.empty_like(x)


def launch(config, inputs):
    x, y = inputs
    n = x.numel()
    if _LAUNCHING and config["PLANT"] == "oom":
        torch.empty(1 << 42, dtype=torch.uint8, device="cuda")  # 4 TiB of workspace
    if _LAUNCHING and config["PLANT"] == "segfault":
        ctypes.string_at(0)  # SIGSEGV in the host process
    _scale_kernel[(triton.cdiv(n, config["BLOCK"]),)](x, y, n, BLOCK=config["BLOCK"], MODE=_MODES[config["PLANT"]],
                                                      num_warps=config["num_warps"])
    return y


def reference(inputs):
    return inputs[0] * 2.0


def bytes_moved(shape):
    return 8.0 * shape[0]
