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

# WS=1: Hopper warp specialization (tl.range(..., warp_specialize=True)) with on-device TMA descriptors:
#   launched with num_warps=4, the compiler builds 1 producer warp group (TMA loads into num_stages K/V
#   buffers) + 2 consumer warp groups of 64 query rows each (BLOCK_M=128 data-partitioned), 12 warps in all.
#   Shared memory: Q 32K + O staging 32K + K/V ring.  Persistent scheduling is only used without WS.
#   The warp-specialized path produced NaN on the GPU with BLOCK_N=64 and a 3/4-deep K/V ring, so it is
#   restricted to BLOCK_N=128 with a 2-buffer ring (the only ring depth that fits 128-key K/V tiles next
#   to Q and the O staging tile anyway).  The non-WS path keeps the full BLOCK_N / num_stages range.
# WS=0: 8 warps (two wgmma warp groups), host TMA descriptors, software-pipelined K/V ring of num_stages.
space = Space(
    [
        Choice("WS", options=(0, 1), description="1: warp-specialized producer/consumer kernel (Hopper autoWS)"),
        Choice("BLOCK_N", options=(64, 128), description="keys per inner step"),
        IntRange("num_stages", low=2, high=4, description="depth of the K/V TMA ring (buffers)"),
        Choice("EXP_F16", options=(0, 1), description="exp2 of the scores in packed fp16x2 (2 exps per MUFU op)"),
        Choice("PERSIST", options=(0, 1), description="0: one program per tile; 1: persistent grid of one program per SM (WS=0 only)"),
    ],
    constraints=[
        "WS * PERSIST == 0",
        "WS * (128 - BLOCK_N) == 0",
        "WS * (num_stages - 2) == 0",
        "32768 * (1 + PERSIST + WS) + 512 * num_stages * BLOCK_N <= 232000",
    ],
    default={"WS": 1, "BLOCK_N": 128, "num_stages": 2, "EXP_F16": 0, "PERSIST": 0},
    name="flash_attention_fwd_fp16",
)


@triton.jit
def _exp2_f16x2(x):
    # 2^x on packed halves: one MUFU op for two elements.
    return tl.inline_asm_elementwise("ex2.approx.f16x2 $0, $1;", "=r,r", [x], dtype=tl.float16, is_pure=True, pack=2)


@triton.jit
def _softmax_update(qk, m_i, qk_scale, EXP_F16: tl.constexpr):
    # scale folded into the row max and one FMA per score (log2 domain)
    m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    s = qk * qk_scale - m_ij[:, None]
    if EXP_F16:
        p = _exp2_f16x2(s.to(tl.float16))
        l_ij = tl.sum(p.to(tl.float32), 1)
    else:
        p32 = tl.math.exp2(s)
        l_ij = tl.sum(p32, 1)
        p = p32.to(tl.float16)
    alpha = tl.math.exp2(m_i - m_ij)
    return p, l_ij, alpha, m_ij


@triton.jit
def _attn_tile(desc_q, desc_k, desc_v, desc_o, q_row, kv_row, qk_scale, N_CTX,
               HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               KV_STAGES: tl.constexpr, EXP_F16: tl.constexpr, WS: tl.constexpr):
    q = desc_q.load([q_row, 0])
    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    off_kv = kv_row
    if WS:
        # producer warp group issues the TMA loads, two consumer warp groups (64 rows each) do the math
        for start_n in tl.range(0, N_CTX, BLOCK_N, warp_specialize=True):
            k = desc_k.load([off_kv, 0]).T
            qk = tl.dot(q, k)
            p, l_ij, alpha, m_i_new = _softmax_update(qk, m_i, qk_scale, EXP_F16)
            acc = acc * alpha[:, None]
            v = desc_v.load([off_kv, 0])
            acc = tl.dot(p, v, acc)
            l_i = l_i * alpha + l_ij
            m_i = m_i_new
            off_kv += BLOCK_N
    else:
        for start_n in tl.range(0, N_CTX, BLOCK_N, num_stages=KV_STAGES):
            k = desc_k.load([off_kv, 0]).T
            qk = tl.dot(q, k)
            p, l_ij, alpha, m_i_new = _softmax_update(qk, m_i, qk_scale, EXP_F16)
            acc = acc * alpha[:, None]
            v = desc_v.load([off_kv, 0])
            acc = tl.dot(p, v, acc)
            l_i = l_i * alpha + l_ij
            m_i = m_i_new
            off_kv += BLOCK_N
    acc = acc / l_i[:, None]
    desc_o.store([q_row, 0], acc.to(tl.float16))


@triton.jit
def _attn_fwd_tma(desc_q, desc_k, desc_v, desc_o, qk_scale, N_CTX, num_tiles,
                  HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  KV_STAGES: tl.constexpr, EXP_F16: tl.constexpr,
                  PERSIST: tl.constexpr):
    # host TMA descriptors over the 2-D [Z*H*N, D] view; N_CTX % BLOCK_M == N_CTX % BLOCK_N == 0 here
    tiles_per_head = N_CTX // BLOCK_M
    if PERSIST:
        # consecutive tiles share a head, so the programs running together reuse K/V from L2
        for tile in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
            off_hz = tile // tiles_per_head
            start_m = tile - off_hz * tiles_per_head
            kv_row = off_hz * N_CTX
            _attn_tile(desc_q, desc_k, desc_v, desc_o, kv_row + start_m * BLOCK_M, kv_row, qk_scale, N_CTX,
                       HEAD_DIM, BLOCK_M, BLOCK_N, KV_STAGES, EXP_F16, False)
    else:
        start_m = tl.program_id(0)
        kv_row = tl.program_id(1) * N_CTX
        _attn_tile(desc_q, desc_k, desc_v, desc_o, kv_row + start_m * BLOCK_M, kv_row, qk_scale, N_CTX,
                   HEAD_DIM, BLOCK_M, BLOCK_N, KV_STAGES, EXP_F16, False)


@triton.jit
def _attn_fwd_ws(Q, K, V, Out, qk_scale, N_CTX, ROWS,
                 HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 EXP_F16: tl.constexpr):
    # Hopper warp specialization needs on-device descriptors (data partitioning of BLOCK_M over the two
    # consumer warp groups is not supported with host descriptors)
    desc_q = tl.make_tensor_descriptor(Q, shape=[ROWS, HEAD_DIM], strides=[HEAD_DIM, 1],
                                       block_shape=[BLOCK_M, HEAD_DIM])
    desc_k = tl.make_tensor_descriptor(K, shape=[ROWS, HEAD_DIM], strides=[HEAD_DIM, 1],
                                       block_shape=[BLOCK_N, HEAD_DIM])
    desc_v = tl.make_tensor_descriptor(V, shape=[ROWS, HEAD_DIM], strides=[HEAD_DIM, 1],
                                       block_shape=[BLOCK_N, HEAD_DIM])
    desc_o = tl.make_tensor_descriptor(Out, shape=[ROWS, HEAD_DIM], strides=[HEAD_DIM, 1],
                                       block_shape=[BLOCK_M, HEAD_DIM])
    start_m = tl.program_id(0)
    kv_row = tl.program_id(1) * N_CTX
    _attn_tile(desc_q, desc_k, desc_v, desc_o, kv_row + start_m * BLOCK_M, kv_row, qk_scale, N_CTX,
               HEAD_DIM, BLOCK_M, BLOCK_N, 0, EXP_F16, True)


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


def _desc_alloc(size, alignment, stream):
    # global scratch for the on-device TMA descriptors (a few hundred bytes per program)
    return torch.empty(size, dtype=torch.int8, device="cuda")


def make_inputs(shape):
    z, h, n, d = shape
    torch.manual_seed(0)
    q, k, v = (torch.randn((z, h, n, d), device="cuda", dtype=torch.float16) for _ in range(3))
    return q, k, v, torch.empty_like(q)


def launch(config, inputs):
    q, k, v, o = inputs
    z, h, n, d = q.shape
    bm, bn = 128, config["BLOCK_N"]  # BLOCK_M 128: two wgmma warp groups of 64 rows
    qk_scale = 1.4426950408889634 / math.sqrt(d)
    if n % bm or n % bn or not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous() and o.is_contiguous()):
        grid = (triton.cdiv(n, 64), z * h)
        _attn_fwd_masked[grid](q, k, v, o, qk_scale, n, HEAD_DIM=d, BLOCK_M=64, BLOCK_N=64, num_warps=4,
                               num_stages=2)
        return o
    rows = z * h * n
    if config["WS"]:
        triton.set_allocator(_desc_alloc)
        grid = (n // bm, z * h)
        # num_warps=4 per partition: the compiler adds the producer + second consumer warp group (12 warps)
        _attn_fwd_ws[grid](q, k, v, o, qk_scale, n, rows, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn,
                           EXP_F16=bool(config["EXP_F16"]), num_warps=4, num_stages=config["num_stages"])
        return o
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
                        EXP_F16=bool(config["EXP_F16"]), PERSIST=bool(persist), num_warps=8,
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
