"""GPU check of the evaluator's fault handling: a copy kernel with a config
that reads far out of bounds (an illegal memory access, a sticky CUDA error) and one that writes the
wrong values; the others are right. No reference(): the default config's output is the reference."""
import torch
import triton
import triton.language as tl

from kerntune.space import Choice, Space

name = "faulty_copy"
space = Space([Choice("BLOCK", options=(256, 512, 1024)), Choice("MODE", options=("ok", "oob", "wrong")),
               Choice("num_warps", options=(2, 4))],
              default={"BLOCK": 256, "MODE": "ok", "num_warps": 4}, name="faulty_copy")


@triton.jit
def _copy(out_ptr, in_ptr, n, OFFSET: tl.constexpr, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(in_ptr + offs + OFFSET, mask=m)
    tl.store(out_ptr + offs, x * SCALE, mask=m)


def make_inputs(shape):
    (n,) = shape
    x = torch.randn(n, device="cuda")
    return x, torch.empty_like(x)


def launch(config, inputs):
    x, y = inputs
    n = x.numel()
    off = (1 << 40) if config["MODE"] == "oob" else 0
    scale = 2.0 if config["MODE"] == "wrong" else 1.0
    _copy[(triton.cdiv(n, config["BLOCK"]),)](y, x, n, OFFSET=off, SCALE=scale, BLOCK=config["BLOCK"],
                                              num_warps=config["num_warps"])
    return y


def bytes_moved(shape):
    return 8.0 * shape[0]
