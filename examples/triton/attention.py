"""Flash-attention forward (non-causal, fp16, online softmax in fp32), as a
kerntune kernel file; shape = ZxHxNxD (batch, heads, sequence, head dim).

    kerntune tune examples/triton/attention.py --shape 4x32x4096x64 --strategy bayes --budget 48
"""

import math

import torch
import triton
import triton.language as tl

from kerntune.space import Choice, IntRange, Space

name = "flash_attention_fwd_fp16"
description = ("Flash-attention forward O = softmax(Q K^T / sqrt(D)) V, non-causal, fp16 in/out, fp32 online "
               "softmax; shape = ZxHxNxD. One program per BLOCK_M query rows of one head, looping over keys "
               "in BLOCK_N steps. Compute-bound for long sequences.")

space = Space(
    [
        Choice("BLOCK_M", options=(64, 128), description="query rows per program"),
        Choice("BLOCK_N", options=(32, 64, 128), description="keys per inner step"),
        Choice("num_warps", options=(4, 8), description="warps per program"),
        IntRange("num_stages", low=1, high=4, description="software pipelining stages"),
    ],
    default={"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2},
    name="flash_attention_fwd_fp16",
)


@triton.jit
def _attn_fwd(Q, K, V, Out, qk_scale, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    base = tl.program_id(1).to(tl.int64) * N_CTX * HEAD_DIM
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_m[:, None] < N_CTX, other=0.0)
    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start_n in range(0, N_CTX, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(K + base + cols[None, :] * HEAD_DIM + offs_d[:, None], mask=cols[None, :] < N_CTX, other=0.0)
        qk = tl.dot(q, k) * qk_scale
        qk = tl.where(cols[None, :] < N_CTX, qk, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=cols[:, None] < N_CTX, other=0.0)
        acc = tl.dot(p.to(tl.float16), v, acc * alpha[:, None])
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(Out + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc.to(tl.float16),
             mask=offs_m[:, None] < N_CTX)


def make_inputs(shape):
    z, h, n, d = shape
    torch.manual_seed(0)
    q, k, v = (torch.randn((z, h, n, d), device="cuda", dtype=torch.float16) for _ in range(3))
    return q, k, v, torch.empty_like(q)


def launch(config, inputs):
    q, k, v, o = inputs
    z, h, n, d = q.shape
    grid = (triton.cdiv(n, config["BLOCK_M"]), z * h)
    _attn_fwd[grid](q, k, v, o, 1.4426950408889634 / math.sqrt(d), n, HEAD_DIM=d, BLOCK_M=config["BLOCK_M"],
                    BLOCK_N=config["BLOCK_N"], num_warps=config["num_warps"], num_stages=config["num_stages"])
    return o


def reference(inputs):
    q, k, v, _ = inputs
    return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def flops(shape):
    z, h, n, d = shape
    return 4.0 * z * h * n * n * d


def bytes_moved(shape):
    z, h, n, d = shape
    return 2.0 * 4 * z * h * n * d
