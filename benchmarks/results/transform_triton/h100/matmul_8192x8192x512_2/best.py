"""fp16 matmul C = A @ B in Triton for Hopper: persistent, TMA (host tensor descriptors) for A, B and C,
flattened tile/K loop so the software pipeliner prefetches the next tile's operands while the current
tile's epilogue runs, sub-tiled asynchronous TMA stores of C, as a kerntune kernel file.
"""

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from kerntune.space import Boolean, Choice, IntRange, PowerOfTwo, Space

name = "matmul_fp16"
description = "fp16 GEMM C[M,N] = A[M,K] @ B[K,N] with fp32 accumulation; shape = MxNxK. Compute-bound at large sizes."

space = Space(
    [
        PowerOfTwo("BLOCK_M", low=64, high=256, description="rows of C per tile"),
        PowerOfTwo("BLOCK_N", low=64, high=256, description="columns of C per tile"),
        Choice("BLOCK_K", options=(32, 64, 128), description="K depth of each TMA load / wgmma step"),
        Choice("GROUP_M", options=(1, 4, 8, 16), description="tiles grouped along M in the persistent order (L2 reuse)"),
        Choice("EPI_SUBTILE", options=(1, 2, 4), description="C tile stored as this many TMA stores along N"),
        Boolean("FLATTEN", description="flatten tile and K loops into one pipelined loop (overlaps epilogue with next loads)"),
        Choice("CTAS_PER_SM", options=(1, 2), description="persistent programs per SM (2: one's epilogue overlaps the other's MMAs)"),
        Boolean("TMA_STORE", description="store C with TMA from shared memory (else masked stores from registers)"),
        Choice("num_warps", options=(4, 8), description="warps per program"),
        IntRange("num_stages", low=2, high=5, description="software pipelining stages"),
    ],
    constraints=[
        # fp32 accumulator registers per thread (wgmma keeps the whole tile in registers)
        "BLOCK_M * BLOCK_N // (32 * num_warps) <= 128",
        # shared memory per SM: operand ring buffer + C staging sub-tile (+ barriers), per resident program
        "CTAS_PER_SM * (2 * num_stages * (BLOCK_M + BLOCK_N) * BLOCK_K + 2 * BLOCK_M * BLOCK_N // EPI_SUBTILE + 2048) <= 233472",
        # register file per SM (accumulator + ~40 other registers per thread) for the resident programs
        "CTAS_PER_SM * (BLOCK_M * BLOCK_N + 40 * 32 * num_warps) <= 65536",
        # sub-tiling only applies to the TMA store path; the register-store path spills with large per-thread tiles
        "TMA_STORE or EPI_SUBTILE == 1",
        "TMA_STORE or BLOCK_M * BLOCK_N // (32 * num_warps) <= 64",
    ],
    default={"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "EPI_SUBTILE": 2, "FLATTEN": True,
             "CTAS_PER_SM": 1, "TMA_STORE": True, "num_warps": 8, "num_stages": 3},
    name="matmul_fp16",
)


@triton.jit
def _tile_coords(tile_id, num_pid_in_group, num_pid_m, GROUP_M: tl.constexpr):
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def _matmul_kernel(a_desc, b_desc, c_desc, c_ptr, stride_cm, M, N, K,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                   EPI_SUBTILE: tl.constexpr, FLATTEN: tl.constexpr, TMA_STORE: tl.constexpr,
                   NUM_PROGS: tl.constexpr):
    start_pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_M * num_pid_n
    # separate counter for the epilogue (keeps the pipeliner from sharing values between prologue and epilogue)
    tile_id_c = start_pid - NUM_PROGS

    for tile_id in tl.range(start_pid, num_tiles, NUM_PROGS, flatten=FLATTEN):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_in_group, num_pid_m, GROUP_M)
        offs_m = pid_m * BLOCK_M
        offs_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_K
            a = a_desc.load([offs_m, offs_k])
            b = b_desc.load([offs_k, offs_n])
            acc = tl.dot(a, b, acc)

        tile_id_c += NUM_PROGS
        pid_m, pid_n = _tile_coords(tile_id_c, num_pid_in_group, num_pid_m, GROUP_M)
        offs_cm = pid_m * BLOCK_M
        offs_cn = pid_n * BLOCK_N
        if not TMA_STORE:
            rows = offs_cm + tl.arange(0, BLOCK_M)
            cols = offs_cn + tl.arange(0, BLOCK_N)
            c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :]
            tl.store(c_ptrs, acc.to(tl.float16), mask=(rows[:, None] < M) & (cols[None, :] < N))
        elif EPI_SUBTILE == 1:
            c_desc.store([offs_cm, offs_cn], acc.to(tl.float16))
        elif EPI_SUBTILE == 2:
            acc2 = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            acc0, acc1 = tl.split(acc2)
            c_desc.store([offs_cm, offs_cn], acc0.to(tl.float16))
            c_desc.store([offs_cm, offs_cn + BLOCK_N // 2], acc1.to(tl.float16))
        else:
            acc2 = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            h0, h1 = tl.split(acc2)
            h0 = tl.permute(tl.reshape(h0, (BLOCK_M, 2, BLOCK_N // 4)), (0, 2, 1))
            q0, q1 = tl.split(h0)
            c_desc.store([offs_cm, offs_cn], q0.to(tl.float16))
            c_desc.store([offs_cm, offs_cn + BLOCK_N // 4], q1.to(tl.float16))
            h1 = tl.permute(tl.reshape(h1, (BLOCK_M, 2, BLOCK_N // 4)), (0, 2, 1))
            q2, q3 = tl.split(h1)
            c_desc.store([offs_cm, offs_cn + BLOCK_N // 2], q2.to(tl.float16))
            c_desc.store([offs_cm, offs_cn + 3 * (BLOCK_N // 4)], q3.to(tl.float16))


_NUM_SMS = {}


def _num_sms(device):
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _NUM_SMS:
        _NUM_SMS[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _NUM_SMS[idx]


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
    bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    epi = config["EPI_SUBTILE"]
    assert c.stride(1) == 1
    # TMA needs 16-byte aligned bases / row strides and unit inner strides (true for contiguous fp16 with
    # K and N multiples of 8); out-of-range rows/columns of partial tiles are zero-filled / clipped by TMA.
    a_desc = TensorDescriptor(a, [m, k], [a.stride(0), a.stride(1)], [bm, bk])
    b_desc = TensorDescriptor(b, [k, n], [b.stride(0), b.stride(1)], [bk, bn])
    c_desc = TensorDescriptor(c, [m, n], [c.stride(0), c.stride(1)], [bm, bn // epi])
    num_tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    num_progs = max(1, min(num_tiles, config["CTAS_PER_SM"] * _num_sms(a.device)))
    _matmul_kernel[(num_progs,)](a_desc, b_desc, c_desc, c, c.stride(0), m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                                 GROUP_M=config["GROUP_M"], EPI_SUBTILE=epi, FLATTEN=bool(config["FLATTEN"]),
                                 TMA_STORE=bool(config["TMA_STORE"]),
                                 NUM_PROGS=num_progs, num_warps=config["num_warps"],
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
