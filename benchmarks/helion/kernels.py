"""The four Helion kernels of the head-to-head, written in Helion's documented style
(pytorch/helion's examples/matmul.py, softmax.py, layer_norm.py, attention.py).

Each entry of ``KERNELS`` gives the kernel, a maker of its inputs at the benchmark shape,
a PyTorch reference, and the FLOP / byte counts used for TFLOP/s and GB/s.  Kernels are
built by ``make(name, **settings)`` so that every contender of the head-to-head gets its
own ``helion.kernel`` object with its own settings (autotuner, effort, log), and no
contender can reuse another's tuned config.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import helion
import helion.language as hl
import torch


def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    k2, n = y.size()
    assert k == k2, f"size mismatch {k} != {k2}"
    out = torch.empty([m, n], dtype=torch.promote_types(x.dtype, y.dtype), device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = acc.to(out.dtype)
    return out


def softmax(x: torch.Tensor) -> torch.Tensor:
    n, _m = x.size()
    out = torch.empty_like(x)
    for tile_n in hl.tile(n):
        out[tile_n, :] = torch.nn.functional.softmax(x[tile_n, :], dim=1)
    return out


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    eps = 1e-5
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        acc = x[tile_m, :].to(torch.float32)
        var, mean = torch.var_mean(acc, dim=-1, keepdim=True, correction=0)
        normalized = (acc - mean) * torch.rsqrt(var + eps)
        acc = normalized * weight[:].to(torch.float32) + bias[:].to(torch.float32)
        out[tile_m, :] = acc.to(x.dtype)
    return out


def attention(q_in: torch.Tensor, k_in: torch.Tensor, v_in: torch.Tensor) -> torch.Tensor:
    m_dim = q_in.size(-2)
    n_dim = k_in.size(-2)
    assert n_dim == v_in.size(-2)
    head_dim = hl.specialize(q_in.size(-1))
    assert head_dim == k_in.size(-1) == v_in.size(-1)
    q_view = q_in.reshape([-1, m_dim, head_dim])
    v_view = v_in.reshape([-1, n_dim, head_dim])
    k_view = k_in.reshape([-1, n_dim, head_dim])
    out = torch.empty_like(q_view)
    sm_scale = 1.0 / math.sqrt(head_dim)
    qk_scale = sm_scale * 1.44269504  # 1/log(2)
    for tile_b, tile_m in hl.tile([q_view.size(0), m_dim]):
        m_i = hl.full([tile_b, tile_m], float("-inf"), dtype=torch.float32)
        l_i = torch.full_like(m_i, 1.0)
        acc = hl.zeros([tile_b, tile_m, head_dim], dtype=torch.float32)
        q = q_view[tile_b, tile_m, :]
        for tile_n in hl.tile(v_view.size(1)):
            q_scaled = q * qk_scale
            k = k_view[tile_b, tile_n, :]
            qk = torch.bmm(q_scaled, k.transpose(1, 2), torch.float32)
            m_ij = torch.maximum(m_i, torch.amax(qk, -1))
            qk = qk - m_ij[:, :, None]
            p = torch.exp2(qk)
            l_ij = torch.sum(p, -1)
            alpha = torch.exp2(m_i - m_ij)
            l_i = l_i * alpha + l_ij
            acc = acc * alpha[:, :, None]
            v = v_view[tile_b, tile_n, :]
            p = p.to(v.dtype)
            acc = torch.baddbmm(acc, p, v)
            m_i = m_ij
        acc = acc / l_i[:, :, None]
        out[tile_b, tile_m, :] = acc.to(out.dtype)
    return out.view(q_in.size())


def _matmul_inputs(device: str, m: int = 4096, n: int = 4096, k: int = 4096) -> tuple[torch.Tensor, ...]:
    return (torch.randn([m, k], device=device, dtype=torch.float16),
            torch.randn([k, n], device=device, dtype=torch.float16))


def _rows_inputs(device: str, m: int = 8192, n: int = 8192) -> tuple[torch.Tensor, ...]:
    return (torch.randn([m, n], device=device, dtype=torch.float16),)


def _ln_inputs(device: str, m: int = 8192, n: int = 8192) -> tuple[torch.Tensor, ...]:
    return (torch.randn([m, n], device=device, dtype=torch.float16),
            torch.randn([n], device=device, dtype=torch.float16),
            torch.randn([n], device=device, dtype=torch.float16))


def _attn_inputs(device: str, b: int = 4, h: int = 32, s: int = 4096, d: int = 64) -> tuple[torch.Tensor, ...]:
    return tuple(torch.randn([b, h, s, d], device=device, dtype=torch.float16) for _ in range(3))


KERNELS: dict[str, dict[str, Any]] = {
    "matmul": {"fn": matmul, "inputs": _matmul_inputs, "shape": "4096x4096x4096", "dtype": "float16",
               "reference": lambda x, y: x @ y, "flops": 2 * 4096**3, "bytes": 3 * 4096 * 4096 * 2,
               "settings": {"static_shapes": True}},
    "softmax": {"fn": softmax, "inputs": _rows_inputs, "shape": "8192x8192", "dtype": "float16",
                "reference": lambda x: torch.nn.functional.softmax(x, dim=1), "flops": None,
                "bytes": 2 * 8192 * 8192 * 2, "settings": {"static_shapes": True}},
    "layer_norm": {"fn": layer_norm, "inputs": _ln_inputs, "shape": "8192x8192", "dtype": "float16",
                   "reference": lambda x, w, b: torch.nn.functional.layer_norm(x.float(), [x.size(1)], w.float(),
                                                                               b.float(), 1e-5).to(x.dtype),
                   "flops": None, "bytes": 2 * 8192 * 8192 * 2, "settings": {"static_shapes": True}},
    "attention": {"fn": attention, "inputs": _attn_inputs, "shape": "4x32x4096x64", "dtype": "float16",
                  "reference": lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v),
                  "flops": 4 * 4 * 32 * 4096 * 4096 * 64, "bytes": 4 * 4 * 32 * 4096 * 64 * 2,
                  "settings": {"static_shapes": True}},
}


def make(name: str, **settings: Any) -> Callable[..., Any]:
    """A fresh ``helion.kernel`` for ``name`` with the kernel's own settings plus ``settings``."""
    spec = KERNELS[name]
    return helion.kernel(spec["fn"], **{**spec["settings"], **settings})


def source(name: str) -> str:
    import inspect

    return inspect.getsource(KERNELS[name]["fn"])
