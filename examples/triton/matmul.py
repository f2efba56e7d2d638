"""fp16 matmul C = A @ B in Triton (the tutorial kernel, grouped ordering),
as a kerntune kernel file.  Tune it with

    kerntune tune examples/triton/matmul.py --shape 4096x4096x4096 --strategy genetic --budget 100
"""

import torch
import triton
import triton.language as tl

from kerntune.space import Choice, IntRange, PowerOfTwo, Space

name = "matmul_fp16"
description = "fp16 GEMM C[M,N] = A[M,K] @ B[K,N] with fp32 accumulation; shape = MxNxK. Compute-bound at large sizes."

space = Space(
    [
        PowerOfTwo("BLOCK_M", low=32, high=256, description="rows of C per program"),
        PowerOfTwo("BLOCK_N", low=32, high=256, description="columns of C per program"),
        Choice("BLOCK_K", options=(32, 64, 128), description="K depth of each step"),
        Choice("GROUP_M", options=(1, 8), description="programs grouped along M for L2 reuse"),
        Choice("num_warps", options=(2, 4, 8), description="warps per program"),
        IntRange("num_stages", low=2, high=5, description="software pipelining stages"),
    ],
    # Register pressure: fp32 accumulator elements per thread must stay <= 256 (else spills / very long compiles).
    constraints=["BLOCK_M * BLOCK_N // (32 * num_warps) <= 256"],
    default={"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3},
    name="matmul_fp16",
)


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(tl.float16)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def make_inputs(shape):
    m, n, k = shape
    torch.manual_seed(0)
    a = torch.randn((m, k), device="cuda", dtype=torch.float16)
    b = torch.randn((k, n), device="cuda", dtype=torch.float16)
    c = torch.empty((m, n), device="cuda", dtype=torch.float16)
    return a, b, c


def launch(config, inputs):
    a, b, c = inputs
    m, k = a.shape
    n = b.shape[1]
    grid = (triton.cdiv(m, config["BLOCK_M"]) * triton.cdiv(n, config["BLOCK_N"]),)
    _matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                         c.stride(1), BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"],
                         BLOCK_K=config["BLOCK_K"], GROUP_M=config["GROUP_M"], num_warps=config["num_warps"],
                         num_stages=config["num_stages"])
    return c


def reference(inputs):
    a, b, _ = inputs
    return torch.matmul(a, b)


def flops(shape):
    m, n, k = shape
    return 2.0 * m * n * k


def bytes_moved(shape):
    m, n, k = shape
    return 2.0 * (m * k + k * n + m * n)
