"""flash-linear-attention (fla-core): the chunked Gated DeltaNet forward, whose kernels carry
``triton.autotune`` lists (FLA's ``fla_cache_autotune``, Triton's autotuner underneath).

Every adapter runs the package's public op ``chunk_gated_delta_rule`` (forward, as in inference or
the forward of a training step) and tunes one of the kernels it launches; the op's own autotuning
is the package's choice.  Shapes (batch, tokens, heads, head dim): a long-context sequence with 16
heads and a batch of 4K-token sequences with 32 heads, head dim 128 as in Gated DeltaNet and
Qwen3-Next's linear-attention layers.
"""

from __future__ import annotations

from typing import Any

from kerntune.adapters._shapes import randn
from kerntune.adapters.target import Adapter

PACKAGE = "fla-core"
SHAPES = [(1, 16384, 16, 128), (4, 4096, 32, 128)]


def _inputs(shape: tuple[int, ...]) -> tuple[Any, ...]:
    import torch

    b, t, h, d = shape
    q, k, v = randn(b, t, h, d), randn(b, t, h, d), randn(b, t, h, d)
    g = torch.nn.functional.logsigmoid(randn(b, t, h, dtype=torch.float32))
    beta = torch.sigmoid(randn(b, t, h, dtype=torch.float32)).to(q.dtype)
    return q, k, v, g, beta


def _call(inputs: tuple[Any, ...]) -> Any:
    import torch
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule

    q, k, v, g, beta = inputs
    with torch.no_grad():
        return chunk_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm_in_kernel=True)[0]


def _train_inputs(shape: tuple[int, ...]) -> tuple[Any, ...]:
    """The forward's inputs as leaves that want gradients, and the output's gradient."""
    q, k, v, g, beta = (t.detach().requires_grad_(True) for t in _inputs(shape))
    b, t, h, d = shape
    return q, k, v, g, beta, randn(b, t, h, d, scale=0.1)


def _call_train(inputs: tuple[Any, ...]) -> Any:
    """A training step's forward and backward through the public op (the backward's kernels run here)."""
    q, k, v, g, beta, do = inputs
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule

    o = chunk_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm_in_kernel=True)[0]
    o.backward(do)
    return o


def _adapter(short: str, kernel: str, what: str, backward: bool = False, **extra: Any) -> Adapter:
    return Adapter(name=f"fla.{short}", kernel=kernel, package=PACKAGE,
                   shape_doc="batch x tokens x heads x head dim (bf16)", shapes=SHAPES,
                   make_inputs=_train_inputs if backward else _inputs, call=_call_train if backward else _call,
                   description=f"{what} of fla's chunked Gated DeltaNet {'backward' if backward else 'forward'} "
                   "(chunk_gated_delta_rule)", **extra)


ADAPTERS = [
    _adapter("chunk_o", "fla.ops.common.chunk_o:chunk_fwd_kernel_o", "the output kernel (intra-chunk attention "
             "plus the inter-chunk state term)"),
    _adapter("chunk_h", "fla.ops.common.chunk_delta_h:chunk_gated_delta_rule_fwd_kernel_h_blockdim64",
             "the recurrent state pass over chunks"),
    _adapter("kkt_solve", "fla.ops.gated_delta_rule.chunk_fwd:chunk_gated_delta_rule_fwd_kkt_solve_kernel",
             "the fused K K^T and triangular solve of the WY representation"),
    _adapter("recompute_w_u", "fla.ops.gated_delta_rule.wy_fast:recompute_w_u_fwd_kernel",
             "the WY representation's w and u (the triangular solve's result applied to k and v)",
             # its list holds warps and stages; the launcher fixes the K and V tiles at 64 (the
             # kernel loops over K and V in tiles of any size, the grid does not depend on them)
             launch_knobs={"BK": [32, 128], "BV": [32, 128]}, default=lambda shape: {"BK": 64, "BV": 64}),
    _adapter("l2norm", "fla.modules.norm.l2norm:l2norm_fwd_kernel", "the in-kernel L2 normalisation of q and k"),
    # The backward's own autotuned kernels (a training step; the forward's kernels run again in it).
    # Their launchers fix tiles outside the lists by the GPU's shared memory; the values named as
    # the launcher's own are an H100's (Hopper), and every value a launcher picks on other GPUs is
    # among the options.
    _adapter("bwd_dv_local", "fla.ops.common.chunk_o:chunk_bwd_kernel_dv_local",
             "the intra-chunk part of dv", backward=True,
             launch_knobs={"BK": [32, 64, 128], "BV": [32, 64, 128]}, default=lambda shape: {"BK": 128, "BV": 128}),
    _adapter("bwd_dhu", "fla.ops.common.chunk_delta_h:chunk_gated_delta_rule_bwd_kernel_dhu_blockdim64",
             "the reverse recurrent pass over chunks (state gradients dh and dv)", backward=True),
    # its grid is cdiv(K, BK) x chunks: only BV, which the kernel loops over, is a launch knob
    _adapter("bwd_dqkwg", "fla.ops.common.chunk_o:chunk_bwd_kernel_dqkwg",
             "the gradients of q, k, w and the gate", backward=True,
             launch_knobs={"BV": [32, 64, 128]}, default=lambda shape: {"BV": 128}),
    _adapter("bwd_wy", "fla.ops.gated_delta_rule.wy_fast:prepare_wy_repr_bwd_kernel",
             "the WY representation's backward (gradients of k, v, beta and the gate)", backward=True,
             launch_knobs={"BK": [32, 64, 128], "BV": [32, 64, 128]}, default=lambda shape: {"BK": 64, "BV": 64}),
]
