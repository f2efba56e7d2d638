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
    q, k, v = (randn(b, t, h, d, index=i) for i in range(3))  # three draws: q == k == v is no attention
    g = torch.nn.functional.logsigmoid(randn(b, t, h, dtype=torch.float32, index=3))
    beta = torch.sigmoid(randn(b, t, h, dtype=torch.float32, index=4)).to(q.dtype)
    return q, k, v, g, beta


def _call(inputs: tuple[Any, ...]) -> Any:
    import torch
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule

    q, k, v, g, beta = inputs
    with torch.no_grad():
        return chunk_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm_in_kernel=True)[0]


def _adapter(short: str, kernel: str, what: str, **extra: Any) -> Adapter:
    return Adapter(name=f"fla.{short}", kernel=kernel, package=PACKAGE,
                   shape_doc="batch x tokens x heads x head dim (bf16)", shapes=SHAPES, make_inputs=_inputs,
                   call=_call, description=f"{what} of fla's chunked Gated DeltaNet forward "
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
]
