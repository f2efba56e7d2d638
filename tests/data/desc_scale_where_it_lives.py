"""A kernel file for a package kernel that takes host TensorDescriptors and sets their block shapes in
its autotune list's pre_hook, as Hopper kernels do (tests/test_package_kernels.py).

The list's configs are set to 1 warp and 1 stage here, their tiles and pre_hook as shipped: widened, the
12 tiles each take warps (1, 2) and stages (1, 2), 48 configs where the shipped 4 warps and 3 stages made
108, which Triton's interpreter (it ignores warps and stages) would run alike."""

import torch

from fake_package.ops import desc_scale, desc_scale_kernel as kernel

name = "fake.desc_scale"

for _config in kernel.configs:
    _config.num_warps = _config.num_stages = 1


def make_inputs(shape):
    torch.manual_seed(0)
    return (torch.randn(shape),)


def call(inputs):
    return desc_scale(*inputs)
