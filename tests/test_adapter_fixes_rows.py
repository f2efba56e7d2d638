"""liger's row adapters at the shapes QK-norm runs at (rows of 64 or 128 columns), with the real package.

(a) For rows of <= 128 columns liger's ``calculate_settings`` gives BLOCK_SIZE 128 with 4 warps: one
element a thread, which the adapters' two-a-thread rule excluded, so the space could not be built
(``kerntune tune liger.rms_norm --shape 8192x128`` failed).  The package's own choice now stays in
the space, and the rule still keeps every other config under two a thread out.
(b) LigerRMSNorm calls liger with ``row_mode=None``: at BLOCK_SIZE <= 256 and 32768 rows or more liger
then launches ``_block_rms_norm_forward_kernel``, not the row kernel the adapter tunes; the adapter
forced ``row_mode=True``, so there its "package's choice" was a launch liger never makes.  It calls
liger as the module does and refuses those shapes.

Stand-in (as in the review's reproduction): liger's norm kernels do not run under Triton's CPU
interpreter (a Python float has no ``.to``), so in (b) both kernels record which one is launched.
"""

from __future__ import annotations

import pytest

from kerntune.adapters import find, load
from kerntune.errors import KerntuneError
from packages import import_package

ROW_ADAPTERS = ("liger.rms_norm", "liger.layer_norm", "liger.swiglu")


@pytest.fixture(scope="module")
def liger():
    return import_package("liger_kernel.ops.utils", "liger-kernel")


@pytest.mark.parametrize("name", ROW_ADAPTERS)
@pytest.mark.parametrize("cols", [64, 128])
def test_a_short_rows_space_builds_around_the_packages_own_choice(liger, name: str, cols: int) -> None:
    shape = (8192, cols)
    block, warps = liger.calculate_settings(cols)
    assert block // (32 * warps) < 2  # the package's choice breaks the two-a-thread rule
    space = load(name).space_for(shape)
    own = {"BLOCK_SIZE": block, "num_warps": warps}
    assert {k: space.default[k] for k in own} == own and space.is_valid(space.default)
    configs = list(space.enumerate())
    assert len(configs) >= 2
    # the rule still holds for every other config: the exception is the package's choice alone
    below = [c for c in configs if c["BLOCK_SIZE"] // (32 * c["num_warps"]) < 2]
    assert below == [space.default]
    assert not space.is_valid(space.canonical({"BLOCK_SIZE": 2 * block, "num_warps": 2 * warps}))


def test_the_wide_rows_spaces_keep_the_rule_as_it_was(liger) -> None:
    for name in ROW_ADAPTERS:
        space = load(name).space_for((8192, 4096))
        assert all(c["BLOCK_SIZE"] // (32 * c["num_warps"]) >= 2 for c in space.enumerate())


class _Recorder:
    """Stand-in for one of liger's RMSNorm kernels: records that it was launched, runs nothing."""

    def __init__(self, name: str, seen: list[str]) -> None:
        self.name, self.seen = name, seen

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.seen.append(self.name)


def _launched(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    ops = import_package("liger_kernel.ops.rms_norm", "liger-kernel")
    seen: list[str] = []
    for name in ("_rms_norm_forward_kernel", "_block_rms_norm_forward_kernel"):
        monkeypatch.setattr(ops, name, _Recorder(name, seen))
    return seen


@pytest.mark.parametrize("shape", [(262144, 128), (32768, 64), (32768, 256)])
def test_rms_norm_refuses_shapes_where_liger_runs_its_block_kernel(liger, monkeypatch, shape) -> None:
    """QK-norm's rows (tokens x heads) of head dim 64 or 128: LigerRMSNorm launches the block kernel
    there; the adapter says so in one line, from both the space (the parent) and the inputs (a worker)."""
    import torch
    from liger_kernel.transformers.rms_norm import LigerRMSNorm

    seen = _launched(monkeypatch)
    LigerRMSNorm(shape[1])(torch.zeros(shape, dtype=torch.bfloat16))
    assert seen == ["_block_rms_norm_forward_kernel"]  # what the package itself runs at this shape
    with pytest.raises(KerntuneError, match="_block_rms_norm_forward_kernel") as err:
        load("liger.rms_norm").space_for(shape)
    assert "\n" not in str(err.value) and "x".join(map(str, shape)) in str(err.value)
    with pytest.raises(KerntuneError, match="_block_rms_norm_forward_kernel"):
        find("liger.rms_norm").make_inputs(shape)


@pytest.mark.parametrize("shape", [(8192, 128), (32767, 128), (32768, 512), (8192, 4096)])
def test_rms_norm_launches_what_liger_rms_norm_launches(liger, monkeypatch, shape) -> None:
    """Where the adapter takes a shape, its call launches the kernel the module launches (the row kernel)."""
    import torch
    from liger_kernel.transformers.rms_norm import LigerRMSNorm

    seen = _launched(monkeypatch)
    LigerRMSNorm(shape[1])(torch.zeros(shape, dtype=torch.bfloat16))
    module = list(seen)
    seen.clear()
    adapter = find("liger.rms_norm")
    adapter.call(adapter.make_inputs(shape))
    assert seen == module == ["_rms_norm_forward_kernel"]
