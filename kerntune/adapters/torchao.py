"""torchao: two GEMMs with ``triton.autotune`` lists.

- The INT8 matmul with row and column scales of its quantized training
  (``torch.ops.torchao.scaled_int8_mm``), a 27-config list.  Shapes (M tokens, N, K): the MLP of
  Llama-3 8B at 8192 tokens, up-projection (K 4096 -> N 14336) and down-projection (K 14336 -> N 4096).
- The blockwise FP8 GEMM (``torchao.kernel.blockwise_fp8_gemm``: e4m3 operands, 1x128 activation and
  128x128 weight scales, the DeepSeek-V3 inference kernel), which torchao's ``Float8Tensor`` runs for
  128x128-scaled weights and ``blockwise_fp8_inference`` for its linear layer; a 48-config list
  (BLOCK_SIZE_M 16-128, BLOCK_SIZE_N 32-128, 3-6 stages, always 8 warps; K tiles fixed at the scale
  block, 128).  Shapes: DeepSeek-V3's dense MLP (hidden 7168, intermediate 18432) at 4096 tokens, up
  (K 7168 -> N 18432) and down (K 18432 -> N 7168).  torchao builds this kernel inside a function
  (``_build_triton_impls``), so the adapter finds it in the closure of the op it registers.
"""

from __future__ import annotations

from typing import Any

from kerntune.adapters._shapes import KeptFor, device
from kerntune.adapters.target import Adapter
from kerntune.errors import KerntuneError

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


# -- blockwise FP8 GEMM ----------------------------------------------------------------------------
FP8_BLOCK = 128
FP8_MAX = 448.0  # the largest finite float8_e4m3fn, what torchao's blockwise quantizers scale to


def fp8_gemm_kernel() -> Any:
    """The autotuned ``blockwise_fp8_gemm_kernel``, from the closure of the op torchao registers.

    torchao builds it only where ``torch.utils._triton.has_triton()`` holds, which needs a GPU.  Without
    one (CI, Triton's interpreter) the build is run as it would run on a GPU, so that the kernel's
    list and Space can be read; nothing is launched."""
    import torch.utils._triton as torch_triton
    from torchao.kernel import blockwise_quantization as bq

    impls = bq._get_triton_impls()
    if not impls.available:
        saved = torch_triton.has_triton
        torch_triton.has_triton = lambda: True
        try:
            bq._triton_impls = None  # torchao kept the unavailable result
            impls = bq._get_triton_impls()
        finally:
            torch_triton.has_triton = saved
    fn = getattr(impls.gemm, "_init_fn", impls.gemm)  # a torch.library CustomOpDef wraps the function
    cells = dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__ or ())))
    if "blockwise_fp8_gemm_kernel" not in cells:
        raise KerntuneError("torchao's blockwise FP8 op no longer holds blockwise_fp8_gemm_kernel in its closure")
    return cells["blockwise_fp8_gemm_kernel"]


def quantize_blocks(x: Any, rows: int) -> tuple[Any, Any]:
    """``x`` (R, C) -> e4m3 values and float32 scales per ``rows`` x 128 block (rows 1: activations,
    128: weights), each block scaled so its largest magnitude maps to 448, as torchao's
    ``fp8_blockwise_act_quant`` / ``fp8_blockwise_weight_quant`` do."""
    import torch

    r, c = x.shape
    blocks = x.float().reshape(r // rows, rows, c // FP8_BLOCK, FP8_BLOCK)
    scale = blocks.abs().amax(dim=(1, 3)).clamp(min=1e-12) / FP8_MAX  # (r / rows, c / 128)
    q = (blocks / scale[:, None, :, None]).reshape(r, c).to(torch.float8_e4m3fn)
    return q, scale.contiguous()


def dequantize_blocks(q: Any, scale: Any, rows: int) -> Any:
    """The inverse of ``quantize_blocks`` (to float32)."""
    r, c = q.shape
    return (q.float().reshape(r // rows, rows, c // FP8_BLOCK, FP8_BLOCK) * scale[:, None, :, None]).reshape(r, c)


def _fp8_inputs(shape: tuple[int, ...]) -> tuple[Any, ...]:
    """a (M, K) e4m3 with (M, K/128) scales, b (N, K) e4m3 with (N/128, K/128) scales, from bf16
    activations and fan-in-scaled weights drawn on the device by a seeded generator."""
    import torch

    m, n, k = shape
    g = torch.Generator(device=device()).manual_seed(m + n + k)
    x = torch.empty(m, k, device=device(), dtype=torch.bfloat16).normal_(0.0, 1.0, generator=g)
    w = torch.empty(n, k, device=device(), dtype=torch.bfloat16).normal_(0.0, k ** -0.5, generator=g)
    a, a_s = quantize_blocks(x, 1)
    del x
    b, b_s = quantize_blocks(w, FP8_BLOCK)
    return a, a_s, b, b_s


def _fp8_call(inputs: tuple[Any, ...]) -> Any:
    from torchao.kernel.blockwise_quantization import blockwise_fp8_gemm

    a, a_s, b, b_s = inputs
    return blockwise_fp8_gemm(a, a_s, b, b_s, FP8_BLOCK)


def _dequantize(inputs: tuple[Any, ...]) -> tuple[Any, Any]:
    """The bf16 operands of an FP8 GEMM's inputs: the PyTorch reference is the same GEMM in bf16
    through cuBLAS, its operands dequantized once per inputs (``KeptFor``), not on every call."""
    import torch

    a, a_s, b, b_s = inputs
    return (dequantize_blocks(a, a_s, 1).to(torch.bfloat16), dequantize_blocks(b, b_s, FP8_BLOCK).to(torch.bfloat16))


_DEQUANTIZED = KeptFor(_dequantize)


def _fp8_torch(inputs: tuple[Any, ...]) -> Any:
    x, w = _DEQUANTIZED.of(inputs)
    return x @ w.T


def _fp8_bytes(shape: tuple[int, ...]) -> float:
    m, n, k = shape
    return m * k + n * k + 2.0 * m * n + 4.0 * (m * k + n * k / FP8_BLOCK) / FP8_BLOCK


ADAPTERS = [
    Adapter(name="torchao.int8_mm", kernel="torchao.prototype.quantized_training.int8_mm:_scaled_int8_mm_kernel",
            package=PACKAGE, shape_doc="M x N x K (int8 in, bf16 out)", shapes=[(8192, 14336, 4096),
                                                                               (8192, 4096, 14336)],
            make_inputs=_inputs, call=_call, torch_op=_torch, flops=lambda s: 2.0 * s[0] * s[1] * s[2]),
    Adapter(name="torchao.fp8_blockwise_mm", kernel="torchao.kernel.blockwise_quantization:blockwise_fp8_gemm_kernel",
            package=PACKAGE, shape_doc="M x N x K (e4m3 in, 1x128 and 128x128 block scales, bf16 out)",
            shapes=[(4096, 18432, 7168), (4096, 7168, 18432)], make_inputs=_fp8_inputs, call=_fp8_call,
            torch_op=_fp8_torch, flops=lambda s: 2.0 * s[0] * s[1] * s[2], bytes_moved=_fp8_bytes,
            resolve=fp8_gemm_kernel),
]
