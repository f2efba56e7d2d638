"""LayerNorm forward over the last dimension of an fp16 matrix (the Triton
tutorial's kernel, plus a whole-row-in-registers variant), as a kerntune
kernel file.  Memory-bound: judge it by GB/s against the device bandwidth.

    kerntune tune examples/triton/layernorm.py --shape 8192x8192 --strategy bayes --budget 60
"""

import torch
import triton
import triton.language as tl

from kerntune.space import Choice, Space

name = "layernorm_fp16"
description = ("LayerNorm forward y = (x - mean) / sqrt(var + eps) * w + b over rows of an fp16 MxN matrix, "
               "fp32 statistics; shape = MxN. One program per row. SINGLE=1 keeps the whole row in registers "
               "(block widened to the row); SINGLE=0 loops over the row in BLOCK chunks three times "
               "(mean, variance, output). Memory-bound.")

space = Space(
    [
        Choice("BLOCK", options=(512, 1024, 2048, 4096, 8192), description="columns per step of the row loop"),
        Choice("SINGLE", options=(0, 1), description="1: whole row in registers, one pass over memory"),
        Choice("num_warps", options=(1, 2, 4, 8, 16), description="warps per program"),
    ],
    # With SINGLE=1 the block is widened to the row, so BLOCK matters only for the loop.
    constraints=["SINGLE == 0 or BLOCK == 8192"],
    default={"BLOCK": 1024, "SINGLE": 0, "num_warps": 8},
    name="layernorm_fp16",
)


@triton.jit
def _layernorm_kernel(x_ptr, y_ptr, w_ptr, b_ptr, stride, N, eps, BLOCK: tl.constexpr, SINGLE: tl.constexpr):
    row = tl.program_id(0)
    x_ptr += row * stride
    y_ptr += row * stride
    if SINGLE:
        cols = tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / N
        d = tl.where(mask, x - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / N + eps)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + cols, (d * rstd * w + b).to(tl.float16), mask=mask)
    else:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for off in range(0, N, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
        mean = tl.sum(acc, axis=0) / N
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for off in range(0, N, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
            d = tl.where(cols < N, x - mean, 0.0)
            acc += d * d
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
        for off in range(0, N, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            mask = cols < N
            x = tl.load(x_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_ptr + cols, ((x - mean) * rstd * w + b).to(tl.float16), mask=mask)


def make_inputs(shape):
    m, n = shape
    torch.manual_seed(0)
    x = torch.randn((m, n), device="cuda", dtype=torch.float16)
    w = torch.rand((n,), device="cuda", dtype=torch.float16)
    b = torch.randn((n,), device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    return x, w, b, y


def launch(config, inputs):
    x, w, b, y = inputs
    m, n = x.shape
    block = max(config["BLOCK"], triton.next_power_of_2(n)) if config["SINGLE"] else config["BLOCK"]
    _layernorm_kernel[(m,)](x, y, w, b, x.stride(0), n, 1e-5, BLOCK=block, SINGLE=config["SINGLE"],
                            num_warps=config["num_warps"])
    return y


def reference(inputs):
    x, w, b, _ = inputs
    return torch.nn.functional.layer_norm(x.float(), (x.shape[1],), w.float(), b.float(), 1e-5).to(torch.float16)


def bytes_moved(shape):
    m, n = shape
    return 2.0 * m * n * 2  # read x, write y, fp16 (w and b stay in cache)
