"""fp16 matmul with Hopper tensor descriptors (TMA loads and stores), in a
persistent and a one-tile-per-program variant, as a kerntune kernel file.
Needs an sm_90+ GPU and Triton >= 3.4 (host-side ``TensorDescriptor``).

    kerntune tune examples/triton/matmul_tma.py --shape 4096x4096x4096 --strategy bayes --seconds 60

PERSISTENT=1 launches one program per SM, each looping over output tiles
(overlapping one tile's epilogue with the next tile's loads); PERSISTENT=0
launches one program per tile.  B is kept transposed (N x K) so that both
operands are loaded K-contiguous by TMA.
"""

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from kerntune.space import Choice, IntRange, PowerOfTwo, Space

name = "matmul_fp16_tma"
description = ("fp16 GEMM C[M,N] = A[M,K] @ B[K,N] with fp32 accumulation on Hopper, operands loaded by TMA "
               "tensor descriptors; shape = MxNxK. PERSISTENT=1: one program per SM looping over tiles.")

space = Space(
    [
        PowerOfTwo("BLOCK_M", low=64, high=256, description="rows of C per tile"),
        PowerOfTwo("BLOCK_N", low=64, high=256, description="columns of C per tile"),
        Choice("BLOCK_K", options=(32, 64, 128), description="K depth of each step"),
        Choice("GROUP_M", options=(1, 8), description="tiles grouped along M for L2 reuse"),
        Choice("num_warps", options=(4, 8), description="warps per program"),
        IntRange("num_stages", low=2, high=5, description="software pipelining stages"),
        Choice("PERSISTENT", options=(0, 1), description="1: one program per SM looping over tiles"),
    ],
    constraints=["BLOCK_M * BLOCK_N // (32 * num_warps) <= 256",
                 # operand tiles of all stages must fit in the 228 KiB of shared memory per SM
                 "(BLOCK_M + BLOCK_N) * BLOCK_K * 2 * num_stages <= 232448"],
    default={"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3,
             "PERSISTENT": 0},
    name="matmul_fp16_tma",
)


@triton.jit
def _matmul_tma_kernel(a_desc, b_desc, c_desc, M, N, K, num_programs,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_M * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile_id in tl.range(tl.program_id(0), num_tiles, num_programs):
        group_id = tile_id // num_pid_in_group
        first_pid_m = group_id * GROUP_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
        pid_m = first_pid_m + ((tile_id % num_pid_in_group) % group_size_m)
        pid_n = (tile_id % num_pid_in_group) // group_size_m
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([pid_m * BLOCK_M, ki * BLOCK_K])
            b = b_desc.load([pid_n * BLOCK_N, ki * BLOCK_K])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.float16))


def make_inputs(shape):
    m, n, k = shape
    torch.manual_seed(0)
    a = torch.randn((m, k), device="cuda", dtype=torch.float16)
    b = torch.randn((k, n), device="cuda", dtype=torch.float16)
    bt = b.T.contiguous()  # N x K
    c = torch.empty((m, n), device="cuda", dtype=torch.float16)
    return a, bt, c


_SMS = None


def launch(config, inputs):
    global _SMS
    a, bt, c = inputs
    m, k = a.shape
    n = bt.shape[0]
    bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    if _SMS is None:
        _SMS = torch.cuda.get_device_properties(0).multi_processor_count
    programs = min(_SMS, tiles) if config["PERSISTENT"] else tiles
    a_desc = TensorDescriptor.from_tensor(a, [bm, bk])
    b_desc = TensorDescriptor.from_tensor(bt, [bn, bk])
    c_desc = TensorDescriptor.from_tensor(c, [bm, bn])
    _matmul_tma_kernel[(programs,)](a_desc, b_desc, c_desc, m, n, k, programs, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                                    GROUP_M=config["GROUP_M"], num_warps=config["num_warps"],
                                    num_stages=config["num_stages"])
    return c


def reference(inputs):
    a, bt, _ = inputs
    return torch.matmul(a, bt.T)


def flops(shape):
    m, n, k = shape
    return 2.0 * m * n * k


def bytes_moved(shape):
    m, n, k = shape
    return 2.0 * (m * k + k * n + m * n)
