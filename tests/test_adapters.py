"""The package adapters against the real installed packages (liger-kernel, fla-core, torchao): each
imports its package, finds its kernel and builds its Space at every suite shape, without a GPU and
without launching anything.  `make test` installs the pinned `packages` extra and sets
KERNTUNE_REQUIRE_PACKAGES=1, so there a missing package fails instead of skipping."""

from __future__ import annotations

import pytest

from kerntune.adapters import ADAPTER_MODULES, GPU_ONLY_MODULES, find, load
from kerntune.evaluate.triton_backend.capture import autotuner, jit_function
from kerntune.evaluate.triton_backend.derive_space import config_dict
from packages import import_package


def _import(module: str):
    return import_package(module, ADAPTER_MODULES[module])


@pytest.mark.parametrize("module", sorted(set(ADAPTER_MODULES) - GPU_ONLY_MODULES))
def test_each_adapter_builds_its_space_at_every_shape(module: str) -> None:
    mod = _import(module)
    assert len(mod.ADAPTERS) >= 1
    for adapter in mod.ADAPTERS:
        target = load(adapter.name)
        assert jit_function(target.kernel).__name__ == adapter.kernel.rsplit(":", 1)[1]
        assert len(adapter.shapes) >= 2, "the suite times every kernel at two or more shapes"
        for shape in adapter.shapes:
            space = target.space_for(tuple(shape))
            assert space.count() >= 2, f"{adapter.name} {shape}: nothing to search"
            assert space.is_valid(space.default), f"{adapter.name} {shape}: default {space.default} invalid"
            tuner = autotuner(target.kernel)
            if adapter.knobs is None:
                # an autotune list, widened: every config the package ships stays reachable
                assert tuner is not None
                fixed = getattr(space, "fixed", {})
                launcher = {k: space.default[k] for k in adapter.launch_knobs or {}}  # with the launcher's values
                for cfg in tuner.configs:
                    listed = {k: v for k, v in config_dict(cfg).items() if k in space.names or k not in fixed}
                    flat = {**launcher, **listed}
                    assert space.is_valid(space.canonical(flat)), f"{adapter.name}: listed {flat} left out"
                assert space.count() > len({tuple(sorted(config_dict(c).items())) for c in tuner.configs})
                for k, vals in (adapter.launch_knobs or {}).items():  # constexprs the launcher fixes
                    own = adapter.default(tuple(shape))[k]
                    assert space.default[k] == own and set(space.by_name[k].values()) == {*vals, own}
            elif adapter.default is not None:
                # a heuristic launcher: the package's own rule is the default, and more is offered
                rule = adapter.default(tuple(shape))
                assert {k: space.default[k] for k in rule} == rule
            # (knobs without a static rule: the package's choice is only known from its launch, e.g.
            # liger's MLP dGU takes the forward's autotune pick; test_liger_mlp checks it is offered)


def test_liger_whole_row_kernels_never_offer_a_block_shorter_than_the_row() -> None:
    _import("kerntune.adapters.liger")
    for name in ("liger.rms_norm", "liger.layer_norm", "liger.swiglu"):
        target = load(name)
        for shape in find(name).shapes:
            blocks = {c["BLOCK_SIZE"] for c in target.space_for(tuple(shape)).enumerate()}
            assert min(blocks) >= shape[-1], (name, shape, blocks)


def test_an_adapter_is_found_by_its_kernel_path_and_unknown_names_say_what_is_known() -> None:
    _import("kerntune.adapters.torchao")
    a = find("torchao.prototype.quantized_training.int8_mm:_scaled_int8_mm_kernel")
    assert a.name == "torchao.int8_mm"
    from kerntune.errors import KerntuneError

    with pytest.raises(KerntuneError, match="known are .*liger.rms_norm"):
        find("liger.no_such_kernel")


def test_a_kept_list_that_varies_one_knob_is_searched_as_listed() -> None:
    """FLA's l2norm and causal-conv lists vary num_warps alone: the list constraint must still be a
    tuple test (seen on the GPU: `(num_warps) in ((1,), ...)` rejected every listed config)."""
    from kerntune.evaluate.triton_backend.derive_space import space_from_configs

    one = space_from_configs([{"num_warps": w} for w in (1, 2, 4, 8)], widen=False)
    assert one.count() == 4 and one.default == {"num_warps": 1}
    two = space_from_configs([{"BK": 32, "num_warps": 1}, {"BK": 64, "num_warps": 2}], widen=False)
    assert two.count() == 2 and not two.is_valid({"BK": 32, "num_warps": 2})


def test_a_list_that_caps_registers_on_some_configs_only_is_searched_with_the_cap_unset_as_a_value() -> None:
    """A triton.autotune list where some configs set maxnreg and others leave it unset (Triton: no
    cap) used to be refused as "configs disagree on their knobs"; the unset cap is a value of its
    own (None), kept inside the list, never widened to caps nobody listed."""
    import pytest
    import triton

    from kerntune.errors import KerntuneError
    from kerntune.evaluate.triton_backend.derive_space import space_from_configs

    listed = [triton.Config({"BLOCK": 64}, num_warps=4), triton.Config({"BLOCK": 128}, num_warps=8, maxnreg=128),
              triton.Config({"BLOCK": 128}, num_warps=8)]
    kept = space_from_configs(listed, widen=False)
    assert kept.count() == 3 and kept.default == {"BLOCK": 64, "num_warps": 4, "maxnreg": None}
    assert kept.is_valid({"BLOCK": 128, "num_warps": 8, "maxnreg": 128})
    assert not kept.is_valid({"BLOCK": 64, "num_warps": 4, "maxnreg": 128})  # not listed
    wide = space_from_configs(listed, widen=True)
    values = {p.name: list(p.values()) for p in wide.params}
    assert values["maxnreg"] == [None, 128] and values["BLOCK"] == [32, 64, 128, 256], values  # listed caps only
    # a kwarg some configs leave out is still a disagreement: its unset value is the kernel's, unknown here
    with pytest.raises(KerntuneError, match="disagree"):
        space_from_configs([triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 64, "UNROLL": 2})], widen=False)


def test_a_config_left_without_a_register_cap_launches_without_one_and_exports_without_one() -> None:
    """The launch and the export drop an unset launch option: the caught call's own maxnreg is not
    kept when the searched config says None, and ``cache export --triton`` writes no maxnreg=None."""
    from kerntune.cli.cache_cmd import _triton_config
    from kerntune.evaluate.triton_backend.capture import Launch

    seen = {}

    class Fn:
        __name__ = "k"

        def run(self, grid, warmup, **kw):
            seen.update(kw)

    launch = Launch(fn=Fn(), grid=(1,), args={"BLOCK": 64}, options={"num_warps": 8, "maxnreg": 128})
    launch.run({"BLOCK": 128, "num_warps": 4, "maxnreg": None})
    assert seen["BLOCK"] == 128 and seen["num_warps"] == 4 and "maxnreg" not in seen, seen
    assert _triton_config({"BLOCK": 128, "num_warps": 4, "maxnreg": None}) == "triton.Config({'BLOCK': 128}, num_warps=4)"


def test_an_ir_override_of_a_listed_config_is_a_launch_option_of_the_replayed_call() -> None:
    """A list whose configs carry ``ir_override`` (the IR file Triton compiles instead of the source)
    gives the space an ``ir_override`` knob; replaying the caught call with it must pass it as a launch
    option (it was refused as "neither an argument ... nor a launch option"), and None leaves it unset."""
    from kerntune.evaluate.triton_backend.capture import Launch

    seen: dict = {}

    class Fn:
        __name__ = "k"

        def run(self, grid, warmup, **kw):
            seen.clear()
            seen.update(kw)

    launch = Launch(fn=Fn(), grid=(1,), args={"BLOCK": 64}, options={"num_warps": 4})
    launch.run({"BLOCK": 64, "ir_override": "/opt/hand/k.ttgir"})
    assert seen["ir_override"] == "/opt/hand/k.ttgir" and seen["BLOCK"] == 64, seen
    launch.run({"BLOCK": 64, "ir_override": None})
    assert "ir_override" not in seen, seen


def test_liger_cross_entropy_counts_one_read_of_the_logits() -> None:
    """The adapter's logits do not require grad, so liger's kernel (HAS_GRADIENTS false) reads them
    once and writes no gradient: counting a write too showed an H200 run at 178% of its memory
    bandwidth.  The other vocabulary kernels keep their counts (KL: two inputs; TVD: two and a gradient)."""
    from kerntune.adapters import find

    rows, vocab = 8192, 128256
    assert find("liger.cross_entropy").bytes_moved((rows, vocab)) == rows * vocab * 2
    assert find("liger.kl_div").bytes_moved((rows, vocab)) == 2 * rows * vocab * 2
    assert find("liger.tvd").bytes_moved((rows, vocab)) == 3 * rows * vocab * 2


def test_the_training_cross_entropy_is_a_variant_with_its_own_cache_key() -> None:
    """Two adapters of one kernel run two ways (with and without gradients) want different winners:
    their cache keys differ, and the kernel's path still finds the plain one."""
    pytest.importorskip("liger_kernel")
    plain, train = load("liger.cross_entropy"), load("liger.cross_entropy_train")
    assert plain.source_hash() != train.source_hash()
    assert find("liger_kernel.ops.cross_entropy:liger_cross_entropy_kernel").name == "liger.cross_entropy"


def test_flag_gems_adapters_are_found_without_a_gpu_and_say_in_one_line_why_they_cannot_load() -> None:
    """flag-gems refuses to import without a GPU (and is not in the extras: its exact numpy pin would hold
    every install to numpy 1.26), so its adapters are listed and found by name and kernel path without importing
    it, and loading one where it cannot import is a one-line error, not a traceback."""
    from kerntune.adapters import flaggems
    from kerntune.errors import KerntuneError

    assert "kerntune.adapters.flaggems" in GPU_ONLY_MODULES
    assert find("flag_gems.ops.attention:_attn_fwd").name == "flaggems.attention"
    assert find("flaggems.mm").package == "flag-gems"
    for a in flaggems.ADAPTERS:
        assert len(a.shapes) >= 2 and a.torch_op is not None and a.resolve is not None
    # causal attention: half of the two tokens x tokens GEMMs per head
    assert flaggems.attention_flops((1, 1, 4, 2)) == 4 * 4 * 4 * 2 / 2
    # a shape where flag_gems.mm runs another kernel than the tuned one is refused before any launch
    with pytest.raises(KerntuneError, match="multiples of 8"):
        flaggems.ADAPTERS[0].make_inputs((64, 1, 64))
    try:
        import flag_gems  # noqa: F401
    except Exception:  # noqa: BLE001 - not installed, or its device probe refuses
        with pytest.raises(KerntuneError, match="flag_gems|flag-gems"):
            load("flaggems.attention")
    else:  # pragma: no cover - a machine with a GPU and flag-gems
        pytest.skip("flag-gems imports here: the GPU suite covers it")


def test_a_flag_gems_that_raises_at_import_is_a_one_line_error(tmp_path, monkeypatch) -> None:
    """Without a GPU flag-gems raises a RuntimeError (with line breaks) from its device probe at
    import: a package that does so stands in for it here, and loading an adapter says so in one line."""
    import sys

    from kerntune.errors import KerntuneError

    pkg = tmp_path / "flag_gems"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('raise RuntimeError("No device were detected on your machine ! \\n Check the driver.")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "flag_gems", raising=False)
    for name in ("flaggems.mm", "flaggems.attention"):
        with pytest.raises(KerntuneError, match="refuses to import here: No device") as err:
            load(name)
        assert "\n" not in str(err.value)
