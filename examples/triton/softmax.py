"""Row-wise softmax of an fp16 matrix (the Triton tutorial's fused softmax, with
several rows per program), as a kerntune kernel file.  Memory-bound: judge it
by GB/s against the device bandwidth.

    kerntune tune examples/triton/softmax.py --shape 8192x8192 --strategy bayes --budget 60
"""

import torch
import triton
import triton.language as tl

from kerntune.space import Choice, IntRange, Space

name = "softmax_fp16"
description = ("Row-wise softmax y = exp(x - max) / sum(exp(x - max)) of an fp16 MxN matrix, fp32 math; "
               "shape = MxN. Each row is held in registers (block = next power of two >= N); "
               "ROWS rows per program. Memory-bound: reads and writes the matrix once.")

space = Space(
    [
        Choice("ROWS", options=(1, 2, 4, 8), description="rows handled by one program"),
        Choice("num_warps", options=(1, 2, 4, 8, 16, 32), description="warps per program"),
        IntRange("num_stages", low=1, high=3, description="software pipelining stages"),
    ],
    default={"ROWS": 1, "num_warps": 8, "num_stages": 1},
    name="softmax_fp16",
)


@triton.jit
def _softmax_kernel(out_ptr, in_ptr, stride_in, stride_out, n_rows, n_cols,
                    BLOCK_N: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    for r in tl.static_range(ROWS):
        row = pid * ROWS + r
        mask = col_mask & (row < n_rows)
        x = tl.load(in_ptr + row * stride_in + cols, mask=mask, other=-float("inf")).to(tl.float32)
        x = x - tl.max(x, axis=0)
        e = tl.exp(x)
        y = e / tl.sum(e, axis=0)
        tl.store(out_ptr + row * stride_out + cols, y.to(tl.float16), mask=mask)


def make_inputs(shape):
    m, n = shape
    torch.manual_seed(0)
    x = torch.randn((m, n), device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    return x, y


def launch(config, inputs):
    x, y = inputs
    m, n = x.shape
    rows = config["ROWS"]
    _softmax_kernel[(triton.cdiv(m, rows),)](y, x, x.stride(0), y.stride(0), m, n,
                                              BLOCK_N=triton.next_power_of_2(n), ROWS=rows,
                                              num_warps=config["num_warps"], num_stages=config["num_stages"])
    return y


def reference(inputs):
    x, _ = inputs
    return torch.softmax(x.float(), dim=1).to(torch.float16)


def bytes_moved(shape):
    m, n = shape
    return 2.0 * m * n * 2  # read x, write y, fp16
