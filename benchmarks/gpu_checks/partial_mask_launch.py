"""GPU check of the output check on a bool output that ``launch()`` allocates itself (torch.empty on the
GPU, inside the launch): a kernel writing the mask x >= 0 (all True: x is uniform in [0, 1)), whose
'half' configs launch half the grid. While a config is checked, uninitialised bool memory is True, the
right value everywhere, and make_inputs' buffers were the only ones zeroed for the second launch, so
the half-grid configs passed; now the launch's own bool and integer allocations start zeroed in it.
Kept apart from partial_mask.py (its buffer comes from make_inputs) so each reads alone."""
import torch
import triton
import triton.language as tl

from kerntune.space import Choice, Space

name = "partial_mask_launch"
space = Space([Choice("BLOCK", options=(256, 1024)), Choice("COVER", options=("full", "half")),
               Choice("num_warps", options=(2, 4))],
              default={"BLOCK": 256, "COVER": "full", "num_warps": 4}, name="partial_mask_launch")


@triton.jit
def _mask(out_ptr, in_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(in_ptr + offs, mask=m) >= 0, mask=m)


def make_inputs(shape):
    (n,) = shape
    return (torch.rand(n, device="cuda"),)


def launch(config, inputs):
    (x,) = inputs
    n = x.numel()
    y = torch.empty(n, device="cuda", dtype=torch.bool)
    grid = triton.cdiv(n, config["BLOCK"]) // (2 if config["COVER"] == "half" else 1)
    _mask[(grid,)](y, x, n, BLOCK=config["BLOCK"], num_warps=config["num_warps"])
    return y


def bytes_moved(shape):
    return 5.0 * shape[0]
