import triton

# exported by `kerntune cache export --triton`
configs = [
    triton.Config({'BLOCK_M': 256, 'BLOCK_N': 128, 'BLOCK_K': 64, 'GROUP_M': 8}, num_warps=8, num_stages=4),  # {"K": 4096, "M": 4096, "N": 4096} on NVIDIA H100 80GB HBM3: 0.2017 ms
]
