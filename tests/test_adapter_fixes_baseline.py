"""The baseline of liger's MLP backward dGU kernel is liger's own choice, also inside a worker.

liger launches ``_swiglu_kernel_backward_dGU`` with the training forward's autotune pick
(``swiglu_backward_dGU`` reads ``_swiglu_kernel_forward.best_config``).  A worker builds its inputs
under ``other_autotuners_fixed``, which cuts every other autotune list of the call to its first
config: the caught dGU launch (the baseline, the search's warm start) was then the forward list's
first config, not the forward's real pick.  The adapter names the forward in ``picks_from``, and the
target leaves that list to autotune as shipped.

Real liger kernels run under Triton's interpreter on the CPU.  Two stand-ins, both for GPU-only parts:
``LigerMLPFunction`` asserts CUDA tensors, so the training step is liger's own two Triton launchers
(``gemm_swiglu``, then ``swiglu_backward_dGU``) without its cuBLAS GEMMs; and the forward autotuner's
timing (CPU interpreter timings are noise) is a bench that makes one known config the fastest.
"""

from __future__ import annotations

import dataclasses
import os

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")
torch = pytest.importorskip("torch")

from kerntune.adapters import find  # noqa: E402
from kerntune.adapters.target import PackageTarget  # noqa: E402
from kerntune.evaluate.triton_backend.capture import autotuner, other_autotuners_fixed  # noqa: E402
from packages import import_package  # noqa: E402

if os.environ.get("TRITON_INTERPRET") != "1":  # imported under a real GPU session: not what these tests are for
    pytest.skip("needs TRITON_INTERPRET=1 before triton is imported", allow_module_level=True)

SHAPE = (16, 32, 48)  # tokens, hidden, intermediate: one program per launch under the interpreter


def _cpu_training_step(inputs: tuple) -> None:
    """Stand-in for the adapter's GPU-only ``_bwd_call``: the Triton half of liger's training step,
    through liger's own launchers (the training forward, autotuned, then the dGU kernel at its pick)."""
    from liger_kernel.ops import mlp

    x, wg, wu, wd, d_out = inputs
    agu, pick = mlp.gemm_swiglu(x, wg.detach(), wu.detach(), 1.0, True)
    mlp.swiglu_backward_dGU(d_out, wd.detach(), agu, pick, 1.0, 1.0)


def _flat(config) -> dict:
    return {**config.kwargs, "num_warps": config.num_warps, "num_stages": config.num_stages}


@pytest.fixture()
def forward_picks_last(monkeypatch: pytest.MonkeyPatch):
    """The training forward's autotuner, whose stand-in bench makes its list's last config the
    fastest (its first is what a worker's cut list would launch)."""
    import_package("liger_kernel.ops.mlp", "liger-kernel")
    from liger_kernel.ops import mlp

    from kerntune.transform.triton_harness import fix_interpreter

    fix_interpreter()
    fwd = mlp._swiglu_kernel_forward
    winner = fwd.configs[-1]
    assert _flat(winner) != _flat(fwd.configs[0])
    monkeypatch.setattr(fwd, "cache", {})  # no pick of an earlier test
    monkeypatch.setattr(fwd, "_bench", lambda *a, config, **k: [1.0 if config is winner else 2.0] * 3)
    return winner


def test_the_dgu_adapter_names_the_training_forward_whose_pick_it_launches_with() -> None:
    import_package("liger_kernel.ops.mlp", "liger-kernel")
    from liger_kernel.ops import mlp

    from kerntune.adapters.target import import_object

    (spec,) = find("liger.mlp_swiglu_bwd_dGU").picks_from
    assert autotuner(import_object(spec)) is mlp._swiglu_kernel_forward


def test_a_workers_dgu_baseline_is_the_forwards_own_pick(forward_picks_last) -> None:
    """What a worker does (worker.main): make_inputs under other_autotuners_fixed.  The caught dGU
    launch carries the forward's benchmarked pick, not the first config of the forward's list."""
    from kerntune.evaluate.triton_backend.worker import package_kernels_launch

    target = PackageTarget(dataclasses.replace(find("liger.mlp_swiglu_bwd_dGU"), call=_cpu_training_step))
    with other_autotuners_fixed(target.kernel), package_kernels_launch():
        target.make_inputs(SHAPE)
    baseline = target.baseline()
    assert {k: baseline[k] for k in _flat(forward_picks_last)} == _flat(forward_picks_last)
    space = target.space_for(SHAPE)
    assert space.is_valid(space.canonical({k: baseline[k] for k in space.names}))


def test_other_lists_of_the_call_are_still_cut_in_a_worker(forward_picks_last) -> None:
    """Only the named pick source is left to autotune: the same call tuned for its forward kernel
    (the dGU kernel has no list) and an unrelated list (the inference forward) keep their cut."""
    from liger_kernel.ops import mlp

    from kerntune.evaluate.triton_backend.capture import left_to_autotune

    inference = mlp._swiglu_kernel_forward_inference
    with other_autotuners_fixed(mlp._swiglu_kernel_backward_dGU), left_to_autotune([mlp._swiglu_kernel_forward]):
        x, wg, wu, _, _ = find("liger.mlp_swiglu_bwd_dGU").make_inputs(SHAPE)
        mlp.gemm_swiglu(x, wg.detach(), wu.detach(), 1.0, False)  # the inference kernel: cut to its first
        assert _flat(inference.best_config) == _flat(inference.configs[0])
        _, pick = mlp.gemm_swiglu(x, wg.detach(), wu.detach(), 1.0, True)
        assert pick is forward_picks_last
    with other_autotuners_fixed(mlp._swiglu_kernel_backward_dGU):  # no longer left alone once out
        mlp._swiglu_kernel_forward.cache.clear()
        _, pick = mlp.gemm_swiglu(x, wg.detach(), wu.detach(), 1.0, True)
        assert _flat(pick) == _flat(mlp._swiglu_kernel_forward.configs[0])
