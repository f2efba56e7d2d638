"""fp16 matmul C = A @ B in Triton for Hopper: persistent, TMA (host tensor descriptors) for A, B and C,
flattened tile/K loop so the software pipeliner prefetches the next tile's operands while the current
tile's epilogue runs, sub-tiled asynchronous TMA stores of C, as a kerntune kernel file.

DEFER_EPI: the epilogue of tile t is deferred into the K loop of tile t+1. At the end of a tile the fp32
accumulator is only converted to fp16 (kept in registers, half the accumulator's size); its EPI_SUBTILE pieces
are then written to shared memory and TMA-stored one per K step of the next tile, after that step's wgmma was
issued, so the stores overlap the tensor cores instead of stalling them (and consecutive sub-tile stores no
longer wait for each other). BALANCE: launch just enough persistent programs that all get the same number of
tiles (2048 tiles -> 128 programs of 16 on 132 SMs: same makespan, less contention).
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
        Boolean("DEFER_EPI", description="store tile t's C (fp16, sub-tiled) during tile t+1's first K steps, overlapping its wgmmas"),
        Boolean("BALANCE", description="launch ceil(tiles / ceil(tiles / (CTAS_PER_SM * SMs))) programs so every program gets the same tile count"),
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
        # 64-row tiles on 8 warps: the C sub-tile split needs a layout-conversion scratch buffer (~2 more sub-tiles)
        "16 * num_warps <= BLOCK_M or CTAS_PER_SM * (2 * num_stages * (BLOCK_M + BLOCK_N) * BLOCK_K + 6 * BLOCK_M * BLOCK_N // EPI_SUBTILE + 2048) <= 233472",
        # deferred epilogue: TMA-store path only; the previous tile's fp16 copy (half the accumulator) stays live
        "TMA_STORE or not DEFER_EPI",
        # the deferred-epilogue kernel is always one flat (tile, K) loop: FLATTEN is implied
        "FLATTEN or not DEFER_EPI",
        # >= 64 rows per warpgroup: otherwise the fp16 pieces need a layout-conversion scratch buffer in smem
        "not DEFER_EPI or 16 * num_warps <= BLOCK_M",
        "not DEFER_EPI or BLOCK_M * BLOCK_N * 3 // (2 * 32 * num_warps) <= 192",
        "not DEFER_EPI or CTAS_PER_SM * (3 * BLOCK_M * BLOCK_N // 2 + 40 * 32 * num_warps) <= 65536",
    ],
    default={"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 4, "EPI_SUBTILE": 2, "FLATTEN": True,
             "CTAS_PER_SM": 1, "TMA_STORE": True, "num_warps": 8, "num_stages": 4, "DEFER_EPI": True,
             "BALANCE": False},
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


@triton.jit
def _matmul_kernel_defer(a_desc, b_desc, c_desc, M, N, K,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                         EPI_SUBTILE: tl.constexpr, NUM_PROGS: tl.constexpr):
    # Same tile schedule as _matmul_kernel, written as one flat loop over (tile, K step) so that the software
    # pipeliner prefetches across tiles. The C store of each tile is deferred into the next tile's K steps:
    # piece j of the previous tile is stored at K step min(j, k_tiles - 1), after that step's wgmma was issued,
    # so the shared-memory writes and TMA stores overlap the tensor cores. The last tile is stored at once.
    SUB_N: tl.constexpr = BLOCK_N // EPI_SUBTILE
    start_pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K) + (K <= 0)  # K == 0: one all-zero step so C is still written
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_M * num_pid_n
    last_k = k_tiles - 1
    my_tiles = (num_tiles - start_pid + NUM_PROGS - 1) // NUM_PROGS  # launch keeps start_pid < num_tiles
    total = my_tiles * k_tiles

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # the previous tile's C as fp16 pieces along N, and its origin
    c0 = tl.zeros((BLOCK_M, SUB_N), dtype=tl.float16)
    c1 = tl.zeros((BLOCK_M, SUB_N), dtype=tl.float16)
    c2 = tl.zeros((BLOCK_M, SUB_N), dtype=tl.float16)
    c3 = tl.zeros((BLOCK_M, SUB_N), dtype=tl.float16)
    prev_m = start_pid * 0
    prev_n = start_pid * 0
    ki = start_pid * 0 - 1
    tile_id = start_pid
    pid_m, pid_n = _tile_coords(tile_id, num_pid_in_group, num_pid_m, GROUP_M)
    offs_m = pid_m * BLOCK_M
    offs_n = pid_n * BLOCK_N

    for it in tl.range(0, total):
        ki += 1
        if ki == k_tiles:
            ki = 0
            tile_id += NUM_PROGS
            pid_m, pid_n = _tile_coords(tile_id, num_pid_in_group, num_pid_m, GROUP_M)
            offs_m = pid_m * BLOCK_M
            offs_n = pid_n * BLOCK_N
        offs_k = ki * BLOCK_K
        a = a_desc.load([offs_m, offs_k])
        b = b_desc.load([offs_k, offs_n])
        acc = tl.dot(a, b, acc)
        if ki == last_k:
            # (only when k_tiles <= EPI_SUBTILE) pieces of the previous tile still due at this K step
            if it >= k_tiles:
                if last_k == 0:
                    c_desc.store([prev_m, prev_n], c0)
                if EPI_SUBTILE >= 2:
                    if last_k <= 1:
                        c_desc.store([prev_m, prev_n + SUB_N], c1)
                if EPI_SUBTILE == 4:
                    if last_k <= 2:
                        c_desc.store([prev_m, prev_n + 2 * SUB_N], c2)
                    if last_k <= 3:
                        c_desc.store([prev_m, prev_n + 3 * SUB_N], c3)
            # this tile's epilogue: only the fp16 conversion, the stores go into the next tile's K steps
            prev_m = offs_m
            prev_n = offs_n
            if EPI_SUBTILE == 1:
                c0 = acc.to(tl.float16)
            elif EPI_SUBTILE == 2:
                h = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
                h0, h1 = tl.split(h)
                c0 = h0.to(tl.float16)
                c1 = h1.to(tl.float16)
            else:
                h = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
                h0, h1 = tl.split(h)
                h0 = tl.permute(tl.reshape(h0, (BLOCK_M, 2, BLOCK_N // 4)), (0, 2, 1))
                q0, q1 = tl.split(h0)
                h1 = tl.permute(tl.reshape(h1, (BLOCK_M, 2, BLOCK_N // 4)), (0, 2, 1))
                q2, q3 = tl.split(h1)
                c0 = q0.to(tl.float16)
                c1 = q1.to(tl.float16)
                c2 = q2.to(tl.float16)
                c3 = q3.to(tl.float16)
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            # the program's last tile: nothing follows to hide its stores behind, store now
            if it == total - 1:
                c_desc.store([prev_m, prev_n], c0)
                if EPI_SUBTILE >= 2:
                    c_desc.store([prev_m, prev_n + SUB_N], c1)
                if EPI_SUBTILE == 4:
                    c_desc.store([prev_m, prev_n + 2 * SUB_N], c2)
                    c_desc.store([prev_m, prev_n + 3 * SUB_N], c3)
        else:
            # deferred stores of the previous tile: piece j at K step j (ki < last_k here)
            if it >= k_tiles:
                if ki == 0:
                    c_desc.store([prev_m, prev_n], c0)
                if EPI_SUBTILE >= 2:
                    if ki == 1:
                        c_desc.store([prev_m, prev_n + SUB_N], c1)
                if EPI_SUBTILE == 4:
                    if ki == 2:
                        c_desc.store([prev_m, prev_n + 2 * SUB_N], c2)
                    if ki == 3:
                        c_desc.store([prev_m, prev_n + 3 * SUB_N], c3)


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
    if config.get("BALANCE", False):
        # same number of tiles per program (the makespan in tiles is unchanged, fewer programs contend)
        num_progs = triton.cdiv(num_tiles, triton.cdiv(num_tiles, num_progs))
    if config.get("DEFER_EPI", False) and config["TMA_STORE"]:
        _matmul_kernel_defer[(num_progs,)](a_desc, b_desc, c_desc, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                                           GROUP_M=config["GROUP_M"], EPI_SUBTILE=epi, NUM_PROGS=num_progs,
                                           num_warps=config["num_warps"], num_stages=config["num_stages"])
        return c
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
