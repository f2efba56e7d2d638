"""liger-kernel (LinkedIn): the fused SwiGLU MLP's kernels that take host TensorDescriptors.

``LigerMLPFunction`` (what liger's ``LigerMLP`` and ``LigerFalconH1MLP`` modules call) fuses the MLP's
gate and up projections and the SwiGLU into one Triton kernel that reads and writes through TMA
descriptors (the down projection stays a cuBLAS GEMM).  Two kernels carry a
32-config ``triton.autotune`` list each, whose ``pre_hook`` sets the descriptors' block shapes from each
config's tiles: ``_swiglu_kernel_forward`` when the weights need gradients (training: it also stores
the two pre-activations for the backward; BLOCK_M 64/128, GROUP_SIZE_M 1/8) and
``_swiglu_kernel_forward_inference`` otherwise (BLOCK_M 32/64, GROUP_SIZE_M 1/4); both BLOCK_N 128,
BLOCK_K 64/128, 4/8 warps, 2/3 stages.  Widened, BLOCK_N reaches 256 and the stages 4.  The backward
pass's input gradient, ``_swiglu_kernel_backward_dI`` (dI = dG Wg + dU Wu, one GEMM over both halves),
carries a list of the same form (BLOCK_M 64/128); its training step is the package call that launches
it (forward, then backward).  The backward's other kernel, ``_swiglu_kernel_backward_dGU`` (dA = dO Wd,
then dG and dU written over G and U in place), is not autotuned: liger launches it with the training
forward's autotune pick, made for another GEMM; its knobs are the tiles, warps and stages, and the
adapter's ``pre_hook`` sets its descriptors' block shapes from the tiles as liger's launcher does.  Its
baseline is that pick: the adapter names the forward in ``picks_from``, so the forward's list is
benchmarked as shipped even in a worker (where the call's other lists launch their first config).
Shapes (tokens, hidden, intermediate): the MLP of Llama-3 8B at 8192 tokens and of Llama-3 70B at 4096.
"""

from __future__ import annotations

from typing import Any

from kerntune.adapters._shapes import KeptFor, bf16, device
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


def _bwd_inputs(shape: tuple[int, ...]) -> tuple[Any, ...]:
    """The training inputs and the output gradient dO (1, tokens, hidden) the backward starts from."""
    import torch

    t, h, i = shape
    g = torch.Generator(device=device()).manual_seed(t * 3 + h + i)
    return (*_inputs(shape, True), _draw((1, t, h), 1.0, g))


def _bwd_call(inputs: tuple[Any, ...]) -> Any:
    """One training step of the MLP as liger runs it: forward, then backward from dO (whose last
    Triton launch is the dI kernel).  The weights' gradients are dropped first, so that repeated
    steps do not accumulate into them."""
    from liger_kernel.ops import LigerMLPFunction

    *args, d_out = inputs
    for w in args[1:]:
        w.grad = None
    out = LigerMLPFunction.apply(*args)
    out.backward(d_out)
    return out


def _bwd_operands(inputs: tuple[Any, ...]) -> tuple[Any, Any]:
    """dGU (tokens, 2 intermediate) and the stacked weights (2 intermediate, hidden): the PyTorch
    reference times the same GEMM on operands of the kernel's shapes, made once per inputs."""
    import torch

    x, wg, wu, _, _ = inputs
    t, i = x.shape[1], wg.shape[0]
    g = torch.Generator(device=device()).manual_seed(t + i)
    return _draw((t, 2 * i), 1.0, g), torch.cat([wg.detach(), wu.detach()], 0)


_BWD_OPERANDS = KeptFor(_bwd_operands)


def _bwd_torch(inputs: tuple[Any, ...]) -> Any:
    """What the dI kernel computes, in PyTorch: one cuBLAS GEMM, dI = [dG dU] [Wg; Wu]."""
    import torch

    d_gu, w = _BWD_OPERANDS.of(inputs)
    with torch.no_grad():
        return d_gu @ w


def _dgu_descriptors(nargs: dict[str, Any]) -> None:
    """The block shapes liger's ``swiglu_backward_dGU`` gives the dGU kernel's descriptors, from the
    config's tiles (it builds them at the forward pick's tiles)."""
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["desc_dO"].block_shape = [1, bm, bk]
    nargs["desc_Wd"].block_shape = [bk, bn]
    for name in ("desc_G", "desc_U", "desc_dG", "desc_dU"):
        nargs[name].block_shape = [1, bm, bn]


#: The dGU kernel's knobs: the forward lists' values widened a step each way.
DGU_KNOBS = {"BLOCK_M": [32, 64, 128, 256], "BLOCK_N": [32, 64, 128, 256], "BLOCK_K": [32, 64, 128],
             "GROUP_SIZE_M": [1, 4, 8, 16], "num_warps": [4, 8, 16], "num_stages": [2, 3, 4, 5]}
#: fp32 accumulator elements per thread (the register-pressure rule of the Triton matmul space).
DGU_RULES = ("BLOCK_M * BLOCK_N // (32 * num_warps) <= 256",)

def _dgu_operands(inputs: tuple[Any, ...]) -> tuple[Any, Any]:
    """G and U of the dGU kernel's shapes (tokens, intermediate), made once per inputs."""
    import torch

    x, wg, _, _, _ = inputs
    t, i = x.shape[1], wg.shape[0]
    g = torch.Generator(device=device()).manual_seed(t + 2 * i)
    return _draw((t, i), 1.0, g), _draw((t, i), 1.0, g)


_DGU_OPERANDS = KeptFor(_dgu_operands)


def _dgu_torch(inputs: tuple[Any, ...]) -> Any:
    """What the dGU kernel computes, in PyTorch: dA = dO Wd (cuBLAS), then dU = dA silu(G) and
    dG = dA U silu'(G), on G and U of the kernel's shapes made once per inputs."""
    import torch

    gate, up = _DGU_OPERANDS.of(inputs)
    _, _, _, wd, d_out = inputs
    with torch.no_grad():
        d_a = (d_out[0] @ wd).float()
        sig = torch.sigmoid(gate.float())
        silu = gate.float() * sig
        return (d_a * silu).to(gate.dtype), (d_a * up.float() * (sig + silu - sig * silu)).to(gate.dtype)


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
    Adapter(name="liger.mlp_swiglu_bwd_dI", kernel="liger_kernel.ops.mlp:_swiglu_kernel_backward_dI",
            package=PACKAGE, shape_doc=SHAPE_DOC, shapes=SHAPES, make_inputs=_bwd_inputs, call=_bwd_call,
            torch_op=_bwd_torch, flops=lambda s: 2.0 * s[0] * 2 * s[2] * s[1],
            bytes_moved=lambda s: 2.0 * (2 * s[0] * s[2] + 2 * s[2] * s[1] + s[0] * s[1]),
            description="the input gradient of liger's fused SwiGLU MLP backward (dI = dG Wg + dU Wu; "
            f"TMA descriptors; launched by a training step); shape = {SHAPE_DOC}"),
    Adapter(name="liger.mlp_swiglu_bwd_dGU", kernel="liger_kernel.ops.mlp:_swiglu_kernel_backward_dGU",
            package=PACKAGE, shape_doc=SHAPE_DOC, shapes=SHAPES, make_inputs=_bwd_inputs, call=_bwd_call,
            knobs=DGU_KNOBS, constraints=DGU_RULES, pre_hook=_dgu_descriptors, torch_op=_dgu_torch,
            # its tiles, warps and stages are the training forward's autotune pick (swiglu_backward_dGU
            # reads _swiglu_kernel_forward.best_config): the forward autotunes in the worker too
            picks_from=("liger_kernel.ops.mlp:_swiglu_kernel_forward",),
            flops=lambda s: 2.0 * s[0] * s[1] * s[2],
            bytes_moved=lambda s: 2.0 * (s[0] * s[1] + s[1] * s[2] + 4 * s[0] * s[2]),
            description="the gate/up gradients of liger's fused SwiGLU MLP backward (dO Wd, then dG and dU "
            "over G and U in place; TMA descriptors; no autotune: the training forward's pick); "
            f"shape = {SHAPE_DOC}"),
]
