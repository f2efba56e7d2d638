"""GPU check of the output check on a package-form kernel's bool and integer outputs, under the real
CUDA caching allocator. The package's launcher allocates its outputs with torch.empty on the GPU and
marks a padded batch's real tokens (bool) and gives each its index (-1 for padding, int64); CHUNK=128
leaves the second half of both outputs, the padding, unwritten. While a config is checked, the caught
call's blocks can be the ones the previous identical call left, right values and all, so the half-writing
config passed; now such outputs are poisoned with their right values each changed, and the package
call's first result is held while the caught call runs. Expected: CHUNK=128 wrong_result, 256 and 512 ok.
(tests/test_package_int_outputs.py runs the same kernel under Triton's interpreter on the CPU.)"""
import torch
import triton
import triton.language as tl

name = "gpu_check.mark_tokens"


@triton.jit
def mark_kernel(x_ptr, keep_ptr, pos_ptr, n, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    start = tl.program_id(0) * CHUNK
    for off in tl.static_range(0, CHUNK, BLOCK):
        offs = start + off + tl.arange(0, BLOCK)
        m = offs < n
        real = tl.load(x_ptr + offs, mask=m, other=0.0) > 0
        tl.store(keep_ptr + offs, real, mask=m)
        tl.store(pos_ptr + offs, tl.where(real, offs, -1).to(tl.int64), mask=m)


def mark(x):
    """The package's launcher: its own uninitialised buffers, CHUNK 256 a program."""
    n = x.numel()
    keep = torch.empty(n, dtype=torch.bool, device=x.device)
    pos = torch.empty(n, dtype=torch.int64, device=x.device)
    mark_kernel[(triton.cdiv(n, 256),)](x, keep, pos, n, CHUNK=256, BLOCK=64)
    return keep, pos


kernel = mark_kernel
knobs = {"CHUNK": [128, 256, 512], "BLOCK": [64]}


def default(shape):
    return {"CHUNK": 256, "BLOCK": 64}


def make_inputs(shape):
    (n,) = shape
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.rand(n, generator=g, device="cuda") + 0.1  # real tokens first
    x[n // 2:] = 0.0  # padding
    return (x,)


def call(inputs):
    return mark(*inputs)
