"""liger-kernel's fused MoE forward (``kerntune.adapters.liger_moe``), on the CPU without launching the package.

The adapters are found by name and kernel path; their spaces are liger's own autotune list widened, with
BLOCK_M (fixed by the launcher, which builds the routing metadata and grid for it) left out; the PyTorch
reference matches a per-token computation of the MoE layer, and its two stages match liger's two GEMM
kernels row for row, run by Triton's interpreter (TRITON_INTERPRET=1, set before triton is imported) with
routing metadata built here (liger's routing kernels do not run under the interpreter).
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")
torch = pytest.importorskip("torch")

from kerntune.adapters import find, load  # noqa: E402
from packages import import_package  # noqa: E402

NAMES = {"liger.moe_up_swiglu": "_fused_up_proj_swiglu_kernel", "liger.moe_down": "_fused_down_proj_kernel"}


@pytest.fixture(scope="module")
def moe():
    import_package("liger_kernel.ops.fused_moe_kernels", "liger-kernel")
    from kerntune.adapters import liger_moe

    return liger_moe


def _tiny(t: int = 100, e: int = 4, k: int = 2, h: int = 32, i: int = 48, seed: int = 0) -> tuple:
    """fp32 CPU inputs of the adapters' layout (x, gate_up_proj, down_proj, top-k index int32, top-k weights)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(t, h, generator=g)
    gate_up = torch.randn(e, 2 * i, h, generator=g) * h ** -0.5
    down = torch.randn(e, h, i, generator=g) * i ** -0.5
    w, idx = torch.softmax(torch.randn(t, e, generator=g), dim=-1).topk(k, dim=-1)
    return x, gate_up, down, idx.to(torch.int32), w / w.sum(dim=-1, keepdim=True)


def _per_token(x, gate_up, down, idx, w) -> torch.Tensor:
    """out[t] = sum_k w[t,k] * down[e] @ (silu(gate[e] @ x[t]) * (up[e] @ x[t])), token by token."""
    inter = gate_up.shape[1] // 2
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for k in range(idx.shape[1]):
            e = int(idx[t, k])
            h = gate_up[e] @ x[t]
            out[t] += w[t, k] * (down[e] @ (torch.nn.functional.silu(h[:inter]) * h[inter:]))
    return out


def test_both_kernels_are_found_by_name_and_by_kernel_path(moe) -> None:
    for name, kernel in NAMES.items():
        a = find(name)
        assert a.kernel == f"liger_kernel.ops.fused_moe_kernels:{kernel}" and a.package == "liger-kernel"
        assert find(a.kernel) is a
        assert a.knobs is None and a.launch_knobs is None  # the autotune list is the space
        assert a.shape_doc == "tokens x experts x top-k x hidden x intermediate (bf16)"
        assert list(a.shapes) == [(4096, 8, 2, 4096, 14336), (4096, 128, 8, 2048, 768)]
        assert a.torch_op is not None and a.flops is not None


def test_spaces_are_the_package_list_widened_without_block_m(moe) -> None:
    from kerntune.evaluate.triton_backend.capture import autotuner, constexpr_names, jit_function
    from kerntune.evaluate.triton_backend.derive_space import config_dict

    for name in NAMES:
        target = load(name)
        tuner = autotuner(target.kernel)
        listed = [config_dict(c) for c in tuner.configs]
        assert len(listed) == 32 and list(tuner.keys) == ["H_dim", "I_dim"]
        assert "BLOCK_M" in constexpr_names(jit_function(target.kernel))  # a constexpr, set by the launcher
        for shape in find(name).shapes:
            space = target.space_for(tuple(shape))
            assert "BLOCK_M" not in space.names  # the launcher's, not tuned
            assert {"BLOCK_N", "BLOCK_K", "num_warps", "num_stages"} <= set(space.names)
            for cfg in listed:
                assert space.is_valid(space.canonical(cfg)), f"{name}: listed {cfg} left out"
            assert space.count() > len(listed)
            assert max(space.by_name["BLOCK_N"].values()) == 256 and max(space.by_name["BLOCK_K"].values()) == 128


def test_flops_count_both_gemms(moe) -> None:
    t, e, k, h, i = shape = (4096, 8, 2, 4096, 14336)
    assert find("liger.moe_up_swiglu").flops(shape) == 2 * t * k * h * 2 * i
    assert find("liger.moe_down").flops(shape) == 2 * t * k * i * h


def test_reference_matches_a_per_token_computation(moe) -> None:
    for t, e, k in ((100, 4, 2), (37, 8, 8), (64, 16, 3)):
        inputs = _tiny(t, e, k, seed=t + e)
        got = moe.moe_forward_reference(*inputs)
        assert got.shape == inputs[0].shape
        torch.testing.assert_close(got, _per_token(*inputs), atol=1e-5, rtol=1e-5)


def test_stage_references_compose_into_the_forward(moe) -> None:
    """The two timed stages, in the kernels' expert-sorted row order, weighted and summed per token."""
    def combined(inputs: tuple) -> torch.Tensor:
        x, gate_up, _, idx, w = inputs
        post, y = moe._up_torch(inputs), moe._down_torch(inputs)
        assert post.shape == (idx.numel(), gate_up.shape[1] // 2) and y.shape == (idx.numel(), x.shape[1])
        order = torch.argsort(idx.reshape(-1).long(), stable=True)
        return torch.zeros_like(x).index_add_(0, order // idx.shape[1], y * w.reshape(-1)[order, None])

    for seed in (0, 1, 0):  # new inputs each time: the kept routing and up-projection are not reused
        inputs = _tiny(seed=seed)
        torch.testing.assert_close(combined(inputs), _per_token(*inputs), atol=1e-5, rtol=1e-5)


def test_inputs_at_a_tiny_shape_route_as_the_package_expects(moe) -> None:
    shape = (64, 8, 2, 32, 16)
    x, gate_up, down, idx, w = moe._inputs(shape)
    assert x.shape == (64, 32) and gate_up.shape == (8, 32, 32) and down.shape == (8, 32, 16)
    assert x.dtype == gate_up.dtype == down.dtype == w.dtype == torch.bfloat16
    assert idx.dtype == torch.int32 and idx.shape == w.shape == (64, 2)
    assert int(idx.min()) >= 0 and int(idx.max()) < 8 and bool((idx[:, 0] != idx[:, 1]).all())
    torch.testing.assert_close(w.float().sum(dim=-1), torch.ones(64), atol=1e-2, rtol=0)
    assert abs(float(gate_up.float().std()) - 32 ** -0.5) < 0.03 and abs(float(down.float().std()) - 0.25) < 0.03
    again = moe._inputs(shape)  # seeded: every worker builds the same inputs
    assert all(torch.equal(a, b) for a, b in zip((x, gate_up, down, idx, w), again))


def test_stage_references_match_liger_gemm_kernels_under_the_interpreter(moe) -> None:
    """liger's two GEMM kernels (not their launcher: its routing kernels do not run under the
    interpreter) on routing metadata built here, against the reference's stages row for row: the
    gate and up halves of gate_up_proj, and the row order, are read as the kernels read them."""
    import triton

    from kerntune.evaluate.triton_backend.capture import jit_function
    from liger_kernel.ops.fused_moe_kernels import _fused_down_proj_kernel, _fused_up_proj_swiglu_kernel

    up_k, down_k = jit_function(_fused_up_proj_swiglu_kernel), jit_function(_fused_down_proj_kernel)
    if type(up_k).__name__ != "InterpretedFunction":
        pytest.skip("liger-kernel was imported before TRITON_INTERPRET=1 was set")
    x, gate_up, down, idx, w = inputs = _tiny(t=100, e=4, k=2, h=32, i=48)
    tk, inter, hidden, block_m = idx.numel(), gate_up.shape[1] // 2, x.shape[1], 64
    order = torch.argsort(idx.reshape(-1).long(), stable=True)
    counts = torch.bincount(idx.reshape(-1).long(), minlength=4)
    start = torch.zeros(5, dtype=torch.int32)
    start[1:] = counts.cumsum(0)
    tiles = [(s, e) for e in range(4) for s in range(int(start[e]), int(start[e + 1]), block_m)]
    row_start = torch.tensor([s for s, _ in tiles], dtype=torch.int32)
    tile_expert = torch.tensor([e for _, e in tiles], dtype=torch.int32)
    pre, post = torch.full((tk, 2 * inter), float("nan")), torch.full((tk, inter), float("nan"))
    up_k[(len(tiles), triton.cdiv(inter, 32))](
        x, gate_up, (order // idx.shape[1]).to(torch.int32), start, row_start, tile_expert, pre, post,
        H_dim=hidden, I_dim=inter, stride_x_T=x.stride(0), stride_x_H=x.stride(1), stride_w_E=gate_up.stride(0),
        stride_w_N=gate_up.stride(1), stride_w_K=gate_up.stride(2), stride_pre_TK=pre.stride(0),
        stride_pre_N=pre.stride(1), stride_post_TK=post.stride(0), stride_post_N=post.stride(1),
        BLOCK_M=block_m, BLOCK_N=32, BLOCK_K=16)
    y = torch.full((tk, hidden), float("nan"))
    down_k[(len(tiles), triton.cdiv(hidden, 16))](
        post, down, start, row_start, tile_expert, y, H_dim=hidden, I_dim=inter, stride_post_TK=post.stride(0),
        stride_post_I=post.stride(1), stride_w_E=down.stride(0), stride_w_H=down.stride(1),
        stride_w_I=down.stride(2), stride_Y_TK=y.stride(0), stride_Y_H=y.stride(1),
        BLOCK_M=block_m, BLOCK_N=16, BLOCK_K=16)
    torch.testing.assert_close(post, moe._up_torch(inputs), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(y, moe._down_torch(inputs), atol=1e-5, rtol=1e-5)
