"""A kernel file for a package kernel that takes host TensorDescriptors and sets their block shapes in
its autotune list's pre_hook, as Hopper kernels do (tests/test_package_kernels.py)."""

import torch

from fake_package.ops import desc_scale, desc_scale_kernel as kernel

name = "fake.desc_scale"


def make_inputs(shape):
    torch.manual_seed(0)
    return (torch.randn(shape),)


def call(inputs):
    return desc_scale(*inputs)
