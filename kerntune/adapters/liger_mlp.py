"""liger-kernel (LinkedIn): the fused SwiGLU MLP's gate/up kernel, which takes host TensorDescriptors.

``LigerMLPFunction`` (what liger's ``LigerMLP`` and ``LigerFalconH1MLP`` modules call) fuses the MLP's
gate and up projections and the SwiGLU into one Triton kernel that reads and writes through TMA
descriptors (the down projection stays a cuBLAS GEMM).  Two kernels carry a
32-config ``triton.autotune`` list each, whose ``pre_hook`` sets the descriptors' block shapes from each
config's tiles: ``_swiglu_kernel_forward`` when the weights need gradients (training: it also stores
the two pre-activations for the backward; BLOCK_M 64/128, GROUP_SIZE_M 1/8) and
``_swiglu_kernel_forward_inference`` otherwise (BLOCK_M 32/64, GROUP_SIZE_M 1/4); both BLOCK_N 128,
BLOCK_K 64/128, 4/8 warps, 2/3 stages.  Widened, BLOCK_N reaches 256 and the stages 4.  Shapes
(tokens, hidden, intermediate): the MLP of Llama-3 8B at 8192 tokens and of Llama-3 70B at 4096.
"""

from __future__ import annotations

from typing import Any

from kerntune.adapters._shapes import bf16, device
from kerntune.adapters.target import Adapter

PACKAGE = "liger-kernel"
#: (tokens, hidden, intermediate)
SHAPES = [(8192, 4096, 14336), (4096, 8192, 28672)]
SHAPE_DOC = "tokens x hidden x intermediate (bf16)"


def _draw(shape: tuple[int, ...], std: float, g: Any) -> Any:
    import torch

    return torch.empty(shape, device=device(), dtype=bf16()).normal_(0.0, std, generator=g)


def _inputs(shape: tuple[int, ...], train: bool) -> tuple[Any, ...]:
    """x (1, tokens, hidden), gate and up weights (intermediate, hidden), down weight (hidden,
    intermediate), drawn on the device in bf16 at fan-in scale by a seeded generator (every worker
    builds the same); for training, the weights need gradients (liger then runs the training kernel)."""
    import torch

    t, h, i = shape
    g = torch.Generator(device=device()).manual_seed(t + h + i)
    x = _draw((1, t, h), 1.0, g)
    weights = [_draw((i, h), h ** -0.5, g), _draw((i, h), h ** -0.5, g), _draw((h, i), i ** -0.5, g)]
    return (x, *(w.requires_grad_(train) for w in weights))


def _call(inputs: tuple[Any, ...]) -> Any:
    from liger_kernel.ops import LigerMLPFunction

    return LigerMLPFunction.apply(*inputs)


def _torch(inputs: tuple[Any, ...]) -> Any:
    """What the tuned kernel computes, in PyTorch: silu(x Wg^T) * (x Wu^T), two cuBLAS GEMMs."""
    import torch

    x, wg, wu, _ = inputs
    with torch.no_grad():
        return torch.nn.functional.silu(x @ wg.T) * (x @ wu.T)


def _flops(shape: tuple[int, ...]) -> float:
    t, h, i = shape
    return 2.0 * t * h * 2 * i


def _bytes(shape: tuple[int, ...], outputs: int) -> float:
    """Each operand once: x, the gate and up weights, and ``outputs`` (tokens, intermediate) results."""
    t, h, i = shape
    return 2.0 * (t * h + 2 * i * h + outputs * t * i)


def _adapter(short: str, kernel: str, train: bool, what: str) -> Adapter:
    outputs = 3 if train else 1
    return Adapter(name=f"liger.{short}", kernel=f"liger_kernel.ops.mlp:{kernel}", package=PACKAGE,
                   shape_doc=SHAPE_DOC, shapes=SHAPES, make_inputs=lambda s: _inputs(s, train), call=_call,
                   torch_op=_torch, flops=_flops, bytes_moved=lambda s: _bytes(s, outputs),
                   description=f"{what} of liger's fused SwiGLU MLP (LigerMLPFunction; TMA descriptors); "
                   f"shape = {SHAPE_DOC}")


ADAPTERS = [
    _adapter("mlp_swiglu_train", "_swiglu_kernel_forward", True,
             "the fused gate/up GEMMs and SwiGLU of the training forward (pre-activations stored)"),
    _adapter("mlp_swiglu", "_swiglu_kernel_forward_inference", False,
             "the fused gate/up GEMMs and SwiGLU of the inference forward"),
]
