"""liger-kernel's fused SwiGLU MLP (``kerntune.adapters.liger_mlp``) on the CPU, with the real package:
its two kernels take host TensorDescriptors whose block shapes the autotune list's pre_hook sets, so
the adapters carry that hook into every replay; the inputs choose liger's training or inference kernel.
The kernels themselves are not run here (a GPU run is the judge; the capture of descriptor kernels is
tested under the interpreter in tests/test_package_kernels.py)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kerntune.adapters import find, load  # noqa: E402
from packages import import_package  # noqa: E402

NAMES = {"liger.mlp_swiglu_train": "_swiglu_kernel_forward", "liger.mlp_swiglu": "_swiglu_kernel_forward_inference"}


@pytest.fixture(scope="module")
def mlp():
    import_package("liger_kernel.ops.mlp", "liger-kernel")
    from kerntune.adapters import liger_mlp

    return liger_mlp


def test_both_kernels_carry_their_lists_descriptor_hook_and_wider_tiles(mlp) -> None:
    from kerntune.evaluate.triton_backend.capture import autotuner, list_pre_hook
    from kerntune.evaluate.triton_backend.derive_space import config_dict

    for name, kernel in NAMES.items():
        a = find(f"liger_kernel.ops.mlp:{kernel}")
        assert a.name == name and a.shape_doc == "tokens x hidden x intermediate (bf16)"
        target = load(name)
        hook = list_pre_hook(target.kernel)
        assert hook is not None and hook.__name__.startswith("_host_descriptor_pre_hook_fwd")
        tuner = autotuner(target.kernel)
        assert len(tuner.configs) == 32 and list(tuner.keys) == ["dim", "hidden_dim", "bucket_M"]
        for shape in a.shapes:
            space = target.space_for(tuple(shape))
            for cfg in tuner.configs:
                assert space.is_valid(space.canonical(config_dict(cfg)))
            assert max(space.by_name["BLOCK_N"].values()) == 256 and max(space.by_name["BLOCK_M"].values()) >= 128


def test_inputs_pick_the_training_or_the_inference_kernel(mlp) -> None:
    for train in (True, False):
        x, wg, wu, wd = mlp._inputs((64, 32, 48), train)
        assert x.shape == (1, 64, 32) and wg.shape == wu.shape == (48, 32) and wd.shape == (32, 48)
        assert all(t.dtype == torch.bfloat16 for t in (x, wg, wu, wd)) and not x.requires_grad
        assert all(w.requires_grad == train for w in (wg, wu, wd))  # what LigerMLPFunction reads as store_preact
        again = mlp._inputs((64, 32, 48), train)  # seeded: every worker builds the same inputs
        assert all(torch.equal(p, q) for p, q in zip((x, wg, wu, wd), again))
    assert abs(float(wg.float().std()) - 32 ** -0.5) < 0.03


def test_reference_is_the_gated_activation_of_the_two_projections(mlp) -> None:
    x, wg, wu, wd = mlp._inputs((16, 32, 48), True)
    got = mlp._torch((x, wg, wu, wd))
    assert got.shape == (1, 16, 48) and not got.requires_grad
    g, u = x.float() @ wg.float().T, x.float() @ wu.float().T
    torch.testing.assert_close(got.float(), g * torch.sigmoid(g) * u, atol=0.03, rtol=0.03)
    assert find("liger.mlp_swiglu").flops((16, 32, 48)) == 2 * 16 * 32 * 2 * 48
    assert find("liger.mlp_swiglu_train").bytes_moved((16, 32, 48)) == 2.0 * (16 * 32 + 2 * 48 * 32 + 3 * 16 * 48)


def test_backward_input_gradient_kernel_its_list_and_its_training_step(mlp) -> None:
    """The dI kernel of the backward: its own 32-config list and descriptor hook, widened like the
    forward's; the inputs add dO, the package call is a training step, the reference one GEMM."""
    from kerntune.evaluate.triton_backend.capture import autotuner, list_pre_hook
    from kerntune.evaluate.triton_backend.derive_space import config_dict

    a = find("liger_kernel.ops.mlp:_swiglu_kernel_backward_dI")
    assert a.name == "liger.mlp_swiglu_bwd_dI"
    target = load(a.name)
    assert list_pre_hook(target.kernel).__name__ == "_host_descriptor_pre_hook_bwd_dI"
    tuner = autotuner(target.kernel)
    assert len(tuner.configs) == 32
    for shape in a.shapes:
        space = target.space_for(tuple(shape))
        assert all(space.is_valid(space.canonical(config_dict(c))) for c in tuner.configs)
        assert max(space.by_name["BLOCK_N"].values()) == 256
    inputs = mlp._bwd_inputs((16, 32, 48))
    x, wg, wu, wd, d_out = inputs
    assert d_out.shape == x.shape == (1, 16, 32) and all(w.requires_grad for w in (wg, wu, wd))
    assert all(torch.equal(p, q) for p, q in zip(inputs, mlp._bwd_inputs((16, 32, 48))))
    d_gu, w = mlp._BWD_OPERANDS.of(inputs)
    assert d_gu.shape == (16, 96) and torch.equal(w, torch.cat([wg, wu]).detach())
    assert mlp._BWD_OPERANDS.of(inputs)[0] is d_gu  # made once per inputs
    got = mlp._bwd_torch(inputs)
    assert got.shape == (16, 32) and not got.requires_grad
    assert a.flops((16, 32, 48)) == 2 * 16 * 96 * 32


def test_backward_dgu_kernel_knobs_descriptor_hook_and_reference(mlp) -> None:
    """The dGU kernel has no list (liger launches it with the forward's pick): its knobs hold the
    forward lists' values, the hook gives every descriptor the config's tiles, the reference the
    two gradients."""
    from types import SimpleNamespace

    a = find("liger_kernel.ops.mlp:_swiglu_kernel_backward_dGU")
    assert a.name == "liger.mlp_swiglu_bwd_dGU" and a.pre_hook is mlp._dgu_descriptors
    space = load(a.name).space_for((8192, 4096, 14336))
    fwd = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8, "num_warps": 8, "num_stages": 3}
    assert space.is_valid(space.canonical(fwd))
    assert not space.is_valid(space.canonical({**fwd, "BLOCK_M": 256, "BLOCK_N": 256, "num_warps": 4}))
    from kerntune.evaluate.triton_backend.capture import autotuner
    from kerntune.evaluate.triton_backend.derive_space import config_dict

    # liger launches dGU with the training forward's pick: every config of that list is offered
    for cfg in autotuner(load("liger.mlp_swiglu_train").kernel).configs:
        pick = {k: v for k, v in config_dict(cfg).items() if k in space.names}
        assert space.is_valid(space.canonical(pick)), pick
    nargs = {k: SimpleNamespace(block_shape=[1, 1, 1]) for k in ("desc_dO", "desc_G", "desc_U", "desc_dG", "desc_dU")}
    nargs.update(desc_Wd=SimpleNamespace(block_shape=[1, 1]), BLOCK_M=64, BLOCK_N=256, BLOCK_K=32)
    mlp._dgu_descriptors(nargs)
    assert nargs["desc_dO"].block_shape == [1, 64, 32] and nargs["desc_Wd"].block_shape == [32, 256]
    assert all(nargs[k].block_shape == [1, 64, 256] for k in ("desc_G", "desc_U", "desc_dG", "desc_dU"))
    inputs = mlp._bwd_inputs((16, 32, 48))
    d_u, d_g = mlp._dgu_torch(inputs)
    assert d_u.shape == d_g.shape == (16, 48) and d_u.dtype == torch.bfloat16
    gate, up = mlp._DGU_OPERANDS.of(inputs)
    d_a = inputs[4][0].float() @ inputs[3].float()
    torch.testing.assert_close(d_u.float(), d_a * torch.nn.functional.silu(gate.float()), atol=0.05, rtol=0.05)
