"""fp16 matmul C = A @ B in Triton: persistent, TMA (host tensor descriptors), grouped tile order,
software-pipelined K loop, optional epilogue subtiling, as a kerntune kernel file."""

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from kerntune.space import Boolean, Choice, IntRange, PowerOfTwo, Space

name = "matmul_fp16"
description = "fp16 GEMM C[M,N] = A[M,K] @ B[K,N] with fp32 accumulation; shape = MxNxK. Compute-bound at large sizes."

space = Space(
    [
        PowerOfTwo("BLOCK_M", low=128, high=256, description="rows of C per tile"),
        PowerOfTwo("BLOCK_N", low=128, high=256, description="columns of C per tile"),
        Choice("BLOCK_K", options=(64, 128), description="K depth of each step"),
        Choice("GROUP_M", options=(8, 16), description="tiles grouped along M for L2 reuse"),
        Choice("num_warps", options=(4, 8), description="warps per program"),
        IntRange("num_stages", low=3, high=5, description="TMA pipelining stages"),
        Boolean("EPILOGUE_SUBTILE", description="store C in two half-width TMA stores (less smem)"),
        Boolean("FLATTEN", description="flatten tile+K loops so the next tile's loads overlap the epilogue"),
    ],
    constraints=[
        # fp32 accumulator registers per thread (<= 128 keeps the wgmma accumulator without spills)
        "BLOCK_M * BLOCK_N // (32 * num_warps) <= 128",
        # shared memory: pipelined A/B tiles + C staging tile must fit in 227 KB (with margin)
        "num_stages * (BLOCK_M + BLOCK_N) * BLOCK_K * 2 + BLOCK_M * BLOCK_N * 2 // (1 + EPILOGUE_SUBTILE) <= 229376",
    ],
    default={"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3,
             "EPILOGUE_SUBTILE": True, "FLATTEN": True},
    name="matmul_fp16",
)


@triton.jit
def _tile_pid(tile_id, num_pid_in_group, num_pid_m, GROUP_M: tl.constexpr):
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def _matmul_persistent_tma(a_desc, b_desc, c_desc, M, N, K, NUM_PROGS,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                           GROUP_M: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr, FLATTEN: tl.constexpr):
    start_pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_M * num_pid_n
    tile_id_c = start_pid - NUM_PROGS
    for tile_id in tl.range(start_pid, num_tiles, NUM_PROGS, flatten=FLATTEN):
        pid_m, pid_n = _tile_pid(tile_id, num_pid_in_group, num_pid_m, GROUP_M)
        offs_am = pid_m * BLOCK_M
        offs_bn = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_K
            a = a_desc.load([offs_am, offs_k])
            b = b_desc.load([offs_k, offs_bn])
            acc = tl.dot(a, b, acc)
        # recompute the tile coordinates for the epilogue (keeps them out of the pipelined loop state)
        tile_id_c += NUM_PROGS
        pid_m, pid_n = _tile_pid(tile_id_c, num_pid_in_group, num_pid_m, GROUP_M)
        offs_cm = pid_m * BLOCK_M
        offs_cn = pid_n * BLOCK_N
        if EPILOGUE_SUBTILE:
            acc = tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2))
            acc = tl.permute(acc, (0, 2, 1))
            acc0, acc1 = tl.split(acc)
            c_desc.store([offs_cm, offs_cn], acc0.to(tl.float16))
            c_desc.store([offs_cm, offs_cn + BLOCK_N // 2], acc1.to(tl.float16))
        else:
            c_desc.store([offs_cm, offs_cn], acc.to(tl.float16))


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
    if a.stride(1) != 1:
        a = a.contiguous()
    if b.stride(1) != 1:
        b = b.contiguous()
    bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    subtile = bool(config["EPILOGUE_SUBTILE"])
    a_desc = TensorDescriptor(a, [m, k], [a.stride(0), 1], [bm, bk])
    b_desc = TensorDescriptor(b, [k, n], [b.stride(0), 1], [bk, bn])
    c_desc = TensorDescriptor(c, [m, n], [c.stride(0), 1], [bm, bn // 2 if subtile else bn])
    num_tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    num_progs = min(_num_sms(a.device), num_tiles)
    _matmul_persistent_tma[(num_progs,)](
        a_desc, b_desc, c_desc, m, n, k, num_progs,
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=config["GROUP_M"],
        EPILOGUE_SUBTILE=subtile, FLATTEN=bool(config["FLATTEN"]),
        num_warps=config["num_warps"], num_stages=config["num_stages"])
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
