"""Flash-attention forward (non-causal, fp16, online softmax in fp32), as a
kerntune kernel file; shape = ZxHxNxD (batch, heads, sequence, head dim).

Hopper rewrite: Q/K/V/O through host TMA tensor descriptors (K/V tiles pipelined by the
compiler with TMA + mbarriers, wgmma reading Q and K/V straight from shared memory, no
per-thread address math), tiles sized so that one-warpgroup CTAs fit twice per SM (their
softmax and wgmma phases overlap, which a single 8-warp CTA cannot do since its warpgroups
run in lockstep), and a masked pointer fallback for sequence lengths not divisible by the tiles.

    kerntune tune examples/triton/attention.py --shape 4x32x4096x64 --strategy bayes --budget 48
"""

import math

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from kerntune.space import Choice, IntRange, Space

name = "flash_attention_fwd_fp16"
description = ("Flash-attention forward O = softmax(Q K^T / sqrt(D)) V, non-causal, fp16 in/out, fp32 online "
               "softmax; shape = ZxHxNxD. One program per BLOCK_M query rows of one head, looping over keys "
               "in BLOCK_N steps. Compute-bound for long sequences.")

space = Space(
    [
        Choice("BLOCK_M", options=(64, 128), description="query rows per program (64 rows per warpgroup wgmma)"),
        Choice("BLOCK_N", options=(32, 64, 128), description="keys per inner step (K/V TMA tile rows)"),
        Choice("num_warps", options=(4, 8), description="warps per program (4 = one warpgroup)"),
        IntRange("num_stages", low=2, high=4, description="TMA pipelining stages of the K/V loads"),
    ],
    constraints=[
        # a warpgroup needs at least 64 query rows
        "BLOCK_M >= 16 * num_warps",
        # fp32 accumulator + S/P tiles must fit in ~240 registers per thread (head dim 128)
        "BLOCK_M * (256 + 3 * BLOCK_N) <= 15360 * num_warps",
        # Q tile + double-buffered K and V tiles in shared memory (227 KB per block)
        "BLOCK_M * 256 + num_stages * BLOCK_N * 512 <= 229376",
    ],
    # one warpgroup x 128 rows, ~98 KB smem and 255 regs -> two independent CTAs per SM whose
    # softmax and wgmma phases overlap
    default={"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2},
    name="flash_attention_fwd_fp16",
)


@triton.jit
def _attn_fwd_tma(desc_q, desc_k, desc_v, desc_o, qk_scale, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr):
    # Requires N_CTX % BLOCK_M == 0 and N_CTX % BLOCK_N == 0 (checked in launch): the descriptors view
    # Q/K/V/O as (Z*H*N_CTX, HEAD_DIM), so a tile never crosses into another head.
    start_m = tl.program_id(0)
    row0 = tl.program_id(1) * N_CTX
    q = desc_q.load([row0 + start_m * BLOCK_M, 0])
    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start_n in range(0, N_CTX, BLOCK_N):
        k = desc_k.load([row0 + start_n, 0])
        qk = tl.dot(q, k.T)
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.math.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = desc_v.load([row0 + start_n, 0])
        acc = tl.dot(p.to(tl.float16), v, acc * alpha[:, None])
        m_i = m_new
    acc = acc / l_i[:, None]
    desc_o.store([row0 + start_m * BLOCK_M, 0], acc.to(tl.float16))


@triton.jit
def _attn_fwd_masked(Q, K, V, Out, qk_scale, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr):
    # Fallback for sequence lengths that are not multiples of the tiles.
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
    bm, bn = config["BLOCK_M"], config["BLOCK_N"]
    qk_scale = 1.4426950408889634 / math.sqrt(d)
    grid = (triton.cdiv(n, bm), z * h)
    tma_ok = (n % bm == 0 and n % bn == 0 and d in (32, 64, 128) and
              all(t.is_contiguous() and t.data_ptr() % 16 == 0 for t in (q, k, v, o)))
    if tma_ok:
        rows = z * h * n
        dq, dk, dv, do_ = (TensorDescriptor(t, [rows, d], [d, 1], [blk, d])
                           for t, blk in ((q, bm), (k, bn), (v, bn), (o, bm)))
        _attn_fwd_tma[grid](dq, dk, dv, do_, qk_scale, n, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn,
                            num_warps=config["num_warps"], num_stages=config["num_stages"])
    else:
        _attn_fwd_masked[grid](q, k, v, o, qk_scale, n, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn,
                               num_warps=config["num_warps"], num_stages=config["num_stages"])
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
