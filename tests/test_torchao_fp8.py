"""torchao's blockwise FP8 GEMM adapter (``kerntune.adapters.torchao``) on the CPU, with the real package.

The kernel is built inside a torchao function, so the adapter finds it in the closure of the op it
registers (and builds it where torch sees no GPU); its inputs are quantized the way torchao's
blockwise quantizers scale (largest magnitude of each 1x128 or 128x128 block to 448), and the PyTorch
reference is the same GEMM on the dequantized operands.  Nothing is launched on a GPU here.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kerntune.adapters import find, load  # noqa: E402
from packages import import_package  # noqa: E402

@pytest.fixture(scope="module")
def fp8():
    import_package("torchao.kernel.blockwise_quantization", "torchao")
    from kerntune.adapters import torchao

    return torchao


def test_the_kernel_is_found_in_torchaos_op_and_its_list_is_the_space(fp8) -> None:
    from kerntune.evaluate.triton_backend.capture import autotuner, jit_function
    from kerntune.evaluate.triton_backend.derive_space import config_dict

    a = find("torchao.kernel.blockwise_quantization:blockwise_fp8_gemm_kernel")
    assert a.name == "torchao.fp8_blockwise_mm" and a.resolve is not None
    target = load(a.name)
    tuner = autotuner(target.kernel)
    assert jit_function(target.kernel).__name__ == "blockwise_fp8_gemm_kernel"
    assert list(tuner.keys) == ["N", "K", "M_BUCKET", "BLOCK_SIZE_K"] and len(tuner.configs) == 48
    assert fp8.fp8_gemm_kernel() is target.kernel  # built once: torchao's cache holds it
    for shape in a.shapes:
        space = target.space_for(tuple(shape))
        assert "BLOCK_SIZE_K" not in space.names  # the scale block, passed by the launcher
        for cfg in tuner.configs:
            assert space.is_valid(space.canonical(config_dict(cfg)))
        assert 256 in space.by_name["BLOCK_SIZE_N"].values() and 4 in space.by_name["num_warps"].values()


def test_block_quantization_round_trips_within_e4m3_precision(fp8) -> None:
    g = torch.Generator().manual_seed(0)
    for rows in (1, 128):
        x = torch.randn(256, 384, generator=g) * torch.logspace(-2, 2, 384)[None, :]  # blocks of other scales
        q, s = fp8.quantize_blocks(x, rows)
        assert q.dtype == torch.float8_e4m3fn and s.dtype == torch.float32
        assert s.shape == (256 // rows, 3)
        blocks = q.float().abs().reshape(256 // rows, rows, 3, 128).amax(dim=(1, 3))
        torch.testing.assert_close(blocks, torch.full_like(blocks, 448.0))  # each block's largest maps to 448
        back = fp8.dequantize_blocks(q, s, rows)
        rel = ((back - x).abs() / x.abs().clamp(min=1e-30))[x.abs() > s.max() * 2 ** -6]
        assert float(rel.max()) <= 2 ** -4  # e4m3: 3 mantissa bits, half an ulp off at most


def test_reference_is_the_gemm_of_the_dequantized_operands(fp8) -> None:
    g = torch.Generator().manual_seed(1)
    x, w = torch.randn(64, 256, generator=g), torch.randn(256, 256, generator=g) / 16
    a, a_s = fp8.quantize_blocks(x, 1)
    b, b_s = fp8.quantize_blocks(w, 128)
    want = fp8.dequantize_blocks(a, a_s, 1) @ fp8.dequantize_blocks(b, b_s, 128).T
    got = fp8._fp8_torch((a, a_s, b, b_s))
    assert got.shape == (64, 256) and got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), want, atol=0.05, rtol=0.02)
    # the per-element definition: a block-scaled dot product, as the kernel accumulates it
    i, j = 5, 200
    by_block = sum(float((a[i, kb * 128:(kb + 1) * 128].float() @ b[j, kb * 128:(kb + 1) * 128].float())
                         * a_s[i, kb] * b_s[j // 128, kb]) for kb in range(2))
    assert abs(by_block - float(want[i, j])) <= 1e-3 * max(1.0, abs(by_block))


def test_inputs_at_a_tiny_shape(fp8) -> None:
    a, a_s, b, b_s = fp8._fp8_inputs((32, 256, 384))
    assert a.shape == (32, 384) and b.shape == (256, 384) and a.dtype == b.dtype == torch.float8_e4m3fn
    assert a_s.shape == (32, 3) and b_s.shape == (2, 3) and a_s.is_contiguous() and b_s.is_contiguous()
    again = fp8._fp8_inputs((32, 256, 384))  # seeded: every worker builds the same inputs
    assert all(torch.equal(x.float(), y.float()) for x, y in zip((a, a_s, b, b_s), again))
    assert find("torchao.fp8_blockwise_mm").flops((32, 256, 384)) == 2 * 32 * 256 * 384
