"""A small fp16 matmul kernel file for the scripted-model transform tests (the format of
examples/triton/matmul.py).  Its tiles are fixed and small on purpose: the rewrite the scripted model
proposes makes them tunable.  Runs on a GPU, or on the CPU under TRITON_INTERPRET=1."""

import torch
import triton
import triton.language as tl

from kerntune.space import Choice, Space

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

name = "matmul_small"
description = "fp16 GEMM C[M,N] = A[M,K] @ B[K,N] with fp32 accumulation; shape = MxNxK."

space = Space([Choice("BLOCK", options=(16,), description="rows and columns of C per program"),
               Choice("num_warps", options=(4,), description="warps per program")],
              name="matmul_small")


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   BLOCK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK + tl.arange(0, BLOCK)
    offs_n = pid_n * BLOCK + tl.arange(0, BLOCK)
    offs_k = tl.arange(0, 8)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, 8)):
        kk = k * 8 + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += tl.sum(a[:, :, None].to(tl.float32) * b[None, :, :].to(tl.float32), axis=1)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(tl.float16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def make_inputs(shape):
    m, n, k = shape
    torch.manual_seed(0)
    a = torch.randn((m, k), device=DEVICE, dtype=torch.float16)
    b = torch.randn((k, n), device=DEVICE, dtype=torch.float16)
    c = torch.empty((m, n), device=DEVICE, dtype=torch.float16)
    return a, b, c


def launch(config, inputs):
    a, b, c = inputs
    m, k = a.shape
    n = b.shape[1]
    grid = (triton.cdiv(m, config["BLOCK"]), triton.cdiv(n, config["BLOCK"]))
    _matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                         c.stride(1), BLOCK=config["BLOCK"], num_warps=config["num_warps"])
    return c


def reference(inputs):
    a, b, _ = inputs
    return (a.float() @ b.float()).to(torch.float16)


def flops(shape):
    m, n, k = shape
    return 2.0 * m * n * k
