"""Flash-attention forward (non-causal, fp16, online softmax in fp32), as a
kerntune kernel file; shape = ZxHxNxD (batch, heads, sequence, head dim).

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
        Choice("BLOCK_M", options=(128, 256), description="query rows per tile"),
        Choice("BLOCK_N", options=(64, 128), description="keys per inner step"),
        Choice("num_warps", options=(4, 8), description="warps per program (8 = two wgmma warp groups)"),
        IntRange("num_stages", low=2, high=4, description="TMA pipeline depth of the K/V loop"),
        Choice("EXP_F16", options=(0, 1), description="exp2 of the scores in packed fp16x2 (2 exps per MUFU op)"),
        Choice("PERSIST", options=(0, 1, 2), description="0: one program per tile; k: persistent grid of k programs per SM"),
    ],
    constraints=[
        "num_warps == 8 or (BLOCK_M == 128 and BLOCK_N == 64)",
        "BLOCK_M == 128 or BLOCK_N == 64",
        "PERSIST < 2 or (BLOCK_M == 128 and BLOCK_N == 64 and num_warps == 8)",
    ],
    default={"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3, "EXP_F16": 1, "PERSIST": 0},
    name="flash_attention_fwd_fp16",
)


@triton.jit
def _exp2_f16x2(x):
    # 2^x on packed halves: one MUFU op for two elements.
    return tl.inline_asm_elementwise("ex2.approx.f16x2 $0, $1;", "=r,r", [x], dtype=tl.float16, is_pure=True, pack=2)


@triton.jit
def _attn_tile(desc_q, desc_k, desc_v, desc_o, q_row, kv_row, qk_scale, N_CTX,
               HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               KV_STAGES: tl.constexpr, EXP_F16: tl.constexpr):
    q = desc_q.load([q_row, 0])
    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start_n in tl.range(0, N_CTX, BLOCK_N, num_stages=KV_STAGES):
        k = desc_k.load([kv_row + start_n, 0])
        qk = tl.dot(q, k.T)
        # scale folded into the max and one FMA per score (log2 domain)
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        s = qk * qk_scale - m_new[:, None]
        if EXP_F16:
            p = _exp2_f16x2(s.to(tl.float16))
            l_ij = tl.sum(p.to(tl.float32), 1)
        else:
            p32 = tl.math.exp2(s)
            l_ij = tl.sum(p32, 1)
            p = p32.to(tl.float16)
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + l_ij
        acc = acc * alpha[:, None]
        v = desc_v.load([kv_row + start_n, 0])
        acc = tl.dot(p, v, acc)
        m_i = m_new
    acc = acc / l_i[:, None]
    desc_o.store([q_row, 0], acc.to(tl.float16))


@triton.jit
def _attn_fwd_tma(desc_q, desc_k, desc_v, desc_o, qk_scale, N_CTX, num_tiles,
                  HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  KV_STAGES: tl.constexpr, EXP_F16: tl.constexpr,
                  PERSIST: tl.constexpr):
    # rows of all heads are stacked in a 2-D [Z*H*N, D] view; N_CTX % BLOCK_M == N_CTX % BLOCK_N == 0 here
    tiles_per_head = N_CTX // BLOCK_M
    if PERSIST:
        # consecutive tiles share a head, so the programs running together reuse K/V from L2
        for tile in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
            off_hz = tile // tiles_per_head
            start_m = tile - off_hz * tiles_per_head
            kv_row = off_hz * N_CTX
            _attn_tile(desc_q, desc_k, desc_v, desc_o, kv_row + start_m * BLOCK_M, kv_row, qk_scale, N_CTX,
                       HEAD_DIM, BLOCK_M, BLOCK_N, KV_STAGES, EXP_F16)
    else:
        start_m = tl.program_id(0)
        kv_row = tl.program_id(1) * N_CTX
        _attn_tile(desc_q, desc_k, desc_v, desc_o, kv_row + start_m * BLOCK_M, kv_row, qk_scale, N_CTX,
                   HEAD_DIM, BLOCK_M, BLOCK_N, KV_STAGES, EXP_F16)


@triton.jit
def _attn_fwd_masked(Q, K, V, Out, qk_scale, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr):
    # generic fallback for sequence lengths that are not multiples of the tiles
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


_NUM_SMS = {}


def _num_sms(device):
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _NUM_SMS:
        _NUM_SMS[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _NUM_SMS[idx]


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
    if n % bm or n % bn or not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous() and o.is_contiguous()):
        grid = (triton.cdiv(n, 64), z * h)
        _attn_fwd_masked[grid](q, k, v, o, qk_scale, n, HEAD_DIM=d, BLOCK_M=64, BLOCK_N=64, num_warps=4,
                               num_stages=2)
        return o
    rows = z * h * n
    desc_q = TensorDescriptor(q, [rows, d], [d, 1], [bm, d])
    desc_k = TensorDescriptor(k, [rows, d], [d, 1], [bn, d])
    desc_v = TensorDescriptor(v, [rows, d], [d, 1], [bn, d])
    desc_o = TensorDescriptor(o, [rows, d], [d, 1], [bm, d])
    num_tiles = (n // bm) * z * h
    persist = config["PERSIST"]
    if persist:
        grid = (min(num_tiles, persist * _num_sms(q.device)),)
    else:
        grid = (n // bm, z * h)
    _attn_fwd_tma[grid](desc_q, desc_k, desc_v, desc_o, qk_scale, n, num_tiles, HEAD_DIM=d, BLOCK_M=bm,
                        BLOCK_N=bn, KV_STAGES=config["num_stages"],
                        EXP_F16=bool(config["EXP_F16"]), PERSIST=bool(persist), num_warps=config["num_warps"],
                        num_stages=config["num_stages"])
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
