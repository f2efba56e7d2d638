"""A kernel file for an autotuned package kernel whose launcher fixes two constexprs outside its list
(``launch_knobs``): CHUNK sizes the launcher's grid, so CHUNK=128 covers half of the output and must
be caught by the check (tests/test_package_kernels.py)."""

import torch

from fake_package.ops import chunk_scale, chunk_scale_kernel as kernel

name = "fake.chunk_scale"
launch_knobs = {"CHUNK": [128, 512], "BLOCK": [32, 128]}


def default(shape):
    return {"CHUNK": 256, "BLOCK": 64}


def make_inputs(shape):
    torch.manual_seed(0)
    return (torch.randn(shape),)


def call(inputs):
    return chunk_scale(*inputs)
