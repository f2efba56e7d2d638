"""A kernel file for a kernel that lives in a package: it imports the kernel and names the package's
own entry point; kerntune catches and replays the launch (tests/test_package_kernels.py)."""

import torch

from fake_package.ops import row_sum, row_sum_kernel as kernel, settings

name = "fake.row_sum"
knobs = {"BLOCK_SIZE": [64, 128, 256, 512], "num_warps": [2, 4]}


def default(shape):
    block, warps = settings(shape[1])
    return {"BLOCK_SIZE": block, "num_warps": warps}


def make_inputs(shape):
    torch.manual_seed(0)
    return (torch.randn(shape),)


def call(inputs):
    return row_sum(*inputs)


def bytes_moved(shape):
    return 4.0 * shape[0] * (shape[1] + 1)
