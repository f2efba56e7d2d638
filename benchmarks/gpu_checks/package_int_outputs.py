"""A package-form kernel file whose bool and integer outputs a config can leave half unwritten.

The package's launcher marks a padded batch's real tokens (bool) and gives each its index (-1 for
padding, int64), CHUNK=256 elements a program over a grid it sizes itself; CHUNK=128 leaves the second
half of both outputs, the padding, unwritten. While a config is checked, the caught call's blocks can be
the ones the previous identical call left, right values and all, so the half-writing config passed; now
such outputs are poisoned with their right values each changed, and the package call's first result is
held while the caught call runs. Expected: CHUNK=128 wrong_result, 256 and 512 ok.

``ALLOC`` picks the launcher's buffers: ``empty`` (the package's own ``torch.empty``; run by
`run.sh` on a GPU, under the real CUDA caching allocator), ``full`` (False and -1, the right padding
values) or ``pooled`` (a CPU stand-in for the caching allocator: a block whose tensor is gone is handed
back with what its last user left in it). tests/test_package_int_outputs.py runs this file under
Triton's interpreter on the CPU with ``full`` and ``pooled``.
"""
import weakref

import torch
import triton
import triton.language as tl

name = "gpu_check.mark_tokens"
ALLOC = "empty"
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def mark_kernel(x_ptr, keep_ptr, pos_ptr, n, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    start = tl.program_id(0) * CHUNK
    for off in tl.static_range(0, CHUNK, BLOCK):
        offs = start + off + tl.arange(0, BLOCK)
        m = offs < n
        real = tl.load(x_ptr + offs, mask=m, other=0.0) > 0
        tl.store(keep_ptr + offs, real, mask=m)
        tl.store(pos_ptr + offs, tl.where(real, offs, -1).to(tl.int64), mask=m)


_BLOCKS = []  # ALLOC "pooled": (weak reference to the tensor handed out, the block behind it)


def _pooled(n, dtype):
    for i, (ref, block) in enumerate(_BLOCKS):
        if ref() is None and block.numel() == n and block.dtype == dtype:
            out = block.view(n)
            _BLOCKS[i] = (weakref.ref(out), block)
            return out
    # a new block holds garbage unlike the right output (torch.empty on the CPU could reuse the memory of
    # an earlier test's identical output, right values and all, and a test then depended on that)
    block = torch.full((n,), True) if dtype == torch.bool else torch.full((n,), 2**40, dtype=dtype)
    out = block.view(n)
    _BLOCKS.append((weakref.ref(out), block))
    return out


def _buffers(n, device):
    if ALLOC == "full":
        return (torch.zeros(n, dtype=torch.bool, device=device),
                torch.full((n,), -1, dtype=torch.int64, device=device))
    if ALLOC == "pooled":
        return _pooled(n, torch.bool), _pooled(n, torch.int64)
    return torch.empty(n, dtype=torch.bool, device=device), torch.empty(n, dtype=torch.int64, device=device)


def mark(x):
    """The package's launcher: its own buffers, CHUNK 256 a program."""
    n = x.numel()
    keep, pos = _buffers(n, x.device)
    mark_kernel[(triton.cdiv(n, 256),)](x, keep, pos, n, CHUNK=256, BLOCK=64)
    return keep, pos


kernel = mark_kernel
knobs = {"CHUNK": [128, 256, 512], "BLOCK": [64]}


def default(shape):
    return {"CHUNK": 256, "BLOCK": 64}


def make_inputs(shape):
    (n,) = shape
    g = torch.Generator(device=DEVICE).manual_seed(0)
    x = torch.rand(n, generator=g, device=DEVICE) + 0.1  # real tokens first
    x[n // 2:] = 0.0  # padding
    return (x,)


def call(inputs):
    return mark(*inputs)
