"""torchao: the INT8 matmul with row and column scales of its quantized training
(``torch.ops.torchao.scaled_int8_mm``), whose kernel carries a 27-config ``triton.autotune`` list.

Shapes (M tokens, N, K): the MLP of Llama-3 8B at 8192 tokens, up-projection (K 4096 -> N 14336)
and down-projection (K 14336 -> N 4096).
"""

from __future__ import annotations

from typing import Any

from kerntune.adapters._shapes import device
from kerntune.adapters.target import Adapter

PACKAGE = "torchao"


def _inputs(shape: tuple[int, ...]) -> tuple[Any, ...]:
    import torch

    m, n, k = shape
    g = torch.Generator(device="cpu").manual_seed(m + n + k)
    a = torch.randint(-128, 128, (m, k), generator=g, dtype=torch.int8).to(device())
    b = torch.randint(-128, 128, (n, k), generator=g, dtype=torch.int8).to(device()).T  # column-major, as a weight
    row = (torch.rand(m, generator=g) / 128).to(device(), torch.bfloat16)
    col = (torch.rand(n, generator=g) / 128).to(device(), torch.bfloat16)
    return a, b, row, col


def _call(inputs: tuple[Any, ...]) -> Any:
    from torchao.prototype.quantized_training.int8_mm import scaled_int8_mm

    return scaled_int8_mm(*inputs)


def _torch(inputs: tuple[Any, ...]) -> Any:
    import torch

    a, b, row, col = inputs
    return (torch._int_mm(a, b).float() * row.float()[:, None] * col.float()[None, :]).to(row.dtype)


ADAPTERS = [
    Adapter(name="torchao.int8_mm", kernel="torchao.prototype.quantized_training.int8_mm:_scaled_int8_mm_kernel",
            package=PACKAGE, shape_doc="M x N x K (int8 in, bf16 out)", shapes=[(8192, 14336, 4096),
                                                                               (8192, 4096, 14336)],
            make_inputs=_inputs, call=_call, torch_op=_torch, flops=lambda s: 2.0 * s[0] * s[1] * s[2]),
]
