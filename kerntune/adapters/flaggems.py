"""flag-gems (FlagOpen's Triton operator library, a drop-in for PyTorch's aten operators).

Its kernels sit under two wrappers of its own: ``libtuner``, a ``triton.autotune`` subclass that keeps
each shape's pick in an SQLite cache (``$FLAGGEMS_CACHE_DIR``, default ``~/.flaggems``), and
``libentry``, a launch cache in front of it.  Both end in the kernel's ``JITFunction.run`` on the first
call for a shape, which is where kerntune catches the launch.

- ``flaggems.mm``: the GEMM that ``flag_gems.mm`` (aten::mm under ``flag_gems.enable()``) runs on a
  Hopper GPU, the host-TMA kernel ``mm_kernel_general_host_tma`` of flag-gems' Hopper backend.  Its list
  (BLOCK_M 32-256, BLOCK_N 32-128, BLOCK_K 32-128, 2-4 stages, 4 or 8 warps, those that fit the
  GPU's shared memory) is benchmarked on the first call per shape; its ``pre_hook`` sets the TMA
  descriptors' block shapes from each config's tiles.  flag-gems loads that backend under a top-level
  module name of its own (``hopper.ops.mm``), so the adapter takes the kernel from the globals of the
  ``flag_gems.mm`` it exports rather than importing a second copy of the module.  Shapes (M, N, K),
  bf16: a square 4096 GEMM and Llama-3 8B's MLP down projection at 8192 tokens.
- ``flaggems.attention``: the forward of ``flag_gems.scaled_dot_product_attention`` (``_attn_fwd``, a
  flash-attention forward; list BLOCK_M 32-128, BLOCK_N 16-128, with or without preloading V, 2-4
  stages, 4 or 8 warps).  Shapes (batch, heads, tokens, head dim), bf16, causal: Llama-style heads of 128 and
  of 64.

flag-gems refuses to import without a GPU (its runtime probes the device at import), and it pins
numpy (1.26.4), SQLAlchemy and packaging to exact versions, which in the ``packages`` extra would hold
every install, CI's included, to numpy 1.26 instead of the numpy 2 the replays are recorded under; so it
is not in that extra: ``benchmarks/real_kernels/gpu_setup.sh`` installs the pinned wheel without its
dependencies on the GPU machine (``benchmarks/real_kernels/README.md``).
"""

from __future__ import annotations

import sys
from typing import Any

from kerntune.adapters._shapes import bf16, device
from kerntune.adapters.target import Adapter
from kerntune.errors import KerntuneError

PACKAGE = "flag-gems"
MM_KERNEL = "mm_kernel_general_host_tma"


def _draw(shape: tuple[int, ...], seed: int, std: float = 1.0) -> Any:
    import torch

    g = torch.Generator(device=device()).manual_seed(seed)
    return torch.empty(shape, device=device(), dtype=bf16()).normal_(0.0, std, generator=g)


def _flag_gems() -> Any:
    """The package, or one line saying why not: without a GPU flag-gems raises at import (a
    RuntimeError from its device probe, then an AttributeError on a second try), which would
    otherwise reach the user as a traceback."""
    try:
        import flag_gems
    except ImportError as exc:
        raise KerntuneError(f"cannot import flag_gems ({exc}); is flag-gems installed "
                            "(benchmarks/real_kernels/flaggems-requirements.txt)?") from None
    except Exception as exc:  # noqa: BLE001 - its device probe raises RuntimeError, a second try AttributeError
        raise KerntuneError(f"flag_gems refuses to import here: {' '.join(str(exc).split())}") from None
    return flag_gems


# -- GEMM ------------------------------------------------------------------------------------------
def mm_kernel() -> Any:
    """The Hopper host-TMA GEMM that ``flag_gems.mm`` launches, from that function's own module."""
    flag_gems = _flag_gems()
    kernel = getattr(flag_gems.mm, "__globals__", {}).get(MM_KERNEL)
    if kernel is None:  # another export path: the backend module flag-gems loaded, wherever it sits
        kernel = next((k for k in map(_mm_attr, list(sys.modules.values())) if k is not None), None)
    if kernel is None:
        raise KerntuneError(f"flag_gems.mm does not launch {MM_KERNEL} here: flag-gems runs it on Hopper "
                            "(compute capability 9) and later, with Triton's host TensorDescriptor")
    return kernel


def _mm_attr(module: Any) -> Any:
    try:  # a lazy module's __getattr__ may raise anything
        return getattr(module, MM_KERNEL, None)
    except Exception:  # noqa: BLE001
        return None


def _mm_inputs(shape: tuple[int, ...]) -> tuple[Any, ...]:
    m, n, k = shape
    if n == 1 or n % 8 or k % 8:  # flag_gems.mm's own dispatch (hopper.ops.mm: gemv_mm, is_tma_compatible)
        raise KerntuneError(f"flaggems.mm at {m}x{n}x{k}: flag_gems.mm launches its host-TMA kernel only when N > 1 "
                            "and N and K are multiples of 8 (bf16); at this shape it runs another kernel")
    return _draw((m, k), m + k), _draw((k, n), k + n + 1, k ** -0.5)


def _mm_call(inputs: tuple[Any, ...]) -> Any:
    return _flag_gems().mm(*inputs)


def _mm_torch(inputs: tuple[Any, ...]) -> Any:
    import torch

    return torch.mm(*inputs)


def _mm_bytes(shape: tuple[int, ...]) -> float:
    m, n, k = shape
    return 2.0 * (m * k + k * n + m * n)


# -- attention -------------------------------------------------------------------------------------
def _attn_inputs(shape: tuple[int, ...]) -> tuple[Any, ...]:
    b, h, t, d = shape
    return tuple(_draw((b, h, t, d), b + h + t + d + i) for i in range(3))


def attention_kernel() -> Any:
    """``_attn_fwd`` of the module flag-gems' attention op runs (imported through the package, so
    that a missing GPU is one line)."""
    _flag_gems()
    from flag_gems.ops import attention

    return attention._attn_fwd


def _attn_call(inputs: tuple[Any, ...]) -> Any:
    import torch

    with torch.no_grad():
        return _flag_gems().scaled_dot_product_attention(*inputs, is_causal=True)


def _attn_torch(inputs: tuple[Any, ...]) -> Any:
    import torch

    with torch.no_grad():
        return torch.nn.functional.scaled_dot_product_attention(*inputs, is_causal=True)


def attention_flops(shape: tuple[int, ...]) -> float:
    """Two GEMMs of tokens x tokens x head dim per head, half of them under the causal mask."""
    b, h, t, d = shape
    return 4.0 * b * h * t * t * d / 2


def _attn_bytes(shape: tuple[int, ...]) -> float:
    b, h, t, d = shape
    return 2.0 * 4 * b * h * t * d  # q, k, v read, o written (bf16)


ADAPTERS = [
    Adapter(name="flaggems.mm", kernel=f"flag_gems.runtime.backend._nvidia.hopper.ops.mm:{MM_KERNEL}",
            package=PACKAGE, shape_doc="M x N x K (bf16)", shapes=[(4096, 4096, 4096), (8192, 4096, 14336)],
            make_inputs=_mm_inputs, call=_mm_call, torch_op=_mm_torch, resolve=mm_kernel,
            flops=lambda s: 2.0 * s[0] * s[1] * s[2], bytes_moved=_mm_bytes,
            description="flag-gems' GEMM on Hopper (flag_gems.mm: the host-TMA kernel and its tuned list)"),
    Adapter(name="flaggems.attention", kernel="flag_gems.ops.attention:_attn_fwd", package=PACKAGE,
            shape_doc="batch x heads x tokens x head dim (bf16, causal)",
            shapes=[(4, 32, 4096, 128), (4, 32, 4096, 64)], make_inputs=_attn_inputs, call=_attn_call,
            torch_op=_attn_torch, flops=attention_flops, bytes_moved=_attn_bytes, resolve=attention_kernel,
            description="flag-gems' flash-attention forward (flag_gems.scaled_dot_product_attention, causal)"),
]
