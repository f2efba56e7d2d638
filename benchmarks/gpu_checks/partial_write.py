"""GPU check of the output check: a kernel whose 'half' configs launch half the grid, so half of the
output is never written (a grid or BLOCK mistake). Right only with COVER 'full'. The output buffer is
allocated uninitialised, as kernels' callers do: before the check filled uninitialised memory, the
caching allocator handed a config the previous config's (or the reference's) right values and the
half-grid configs passed as 'ok', and fastest. No reference(): the default config's output is the
reference."""
import torch
import triton
import triton.language as tl

from kerntune.space import Choice, Space

name = "partial_write"
space = Space([Choice("BLOCK", options=(256, 1024)), Choice("COVER", options=("full", "half")),
               Choice("num_warps", options=(2, 4))],
              default={"BLOCK": 256, "COVER": "full", "num_warps": 4}, name="partial_write")


@triton.jit
def _double(out_ptr, in_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(in_ptr + offs, mask=m) * 2, mask=m)


def make_inputs(shape):
    (n,) = shape
    x = torch.randn(n, device="cuda")
    return x, torch.empty_like(x)


def launch(config, inputs):
    x, y = inputs
    n = x.numel()
    grid = triton.cdiv(n, config["BLOCK"]) // (2 if config["COVER"] == "half" else 1)
    _double[(grid,)](y, x, n, BLOCK=config["BLOCK"], num_warps=config["num_warps"])
    return y


def bytes_moved(shape):
    return 8.0 * shape[0]
