"""Helion's ConfigSpec fragments as a kerntune Space (kerntune/helion/space.py), without Helion.

The fragment lists below are what Helion 1.4.0 reports for the head-to-head matmul and
softmax kernels (benchmarks/helion/kernels.py); the H100 dumps in
benchmarks/results/helion_h100/spaces/ are the same lists read on the GPU machine.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

# as the other Triton tests: importing helion (below, where installed) imports triton, whose kernels then
# need the interpreter on a CPU machine; set after that import, test_helion_tuner.py's kernels failed
# ("Cannot call @triton.jit'd outside of the scope of a kernel") when this file ran first
os.environ.setdefault("TRITON_INTERPRET", "1")

from kerntune.errors import SpaceError
from kerntune.helion import Frag, build_space, helion_hints, layout_from_dict
from kerntune.llm.parsing import configs_from_answer
from kerntune.space import ListParam, Permutation, Space

ROOT = Path(__file__).resolve().parents[1]
SPACES = ROOT / "benchmarks" / "results" / "helion_h100" / "spaces"
EXPERT = ROOT / "benchmarks" / "helion" / "expert"


def _enum(choices):
    return Frag(key="x", kind="enum", choices=tuple(choices))


def matmul_frags() -> list[Frag]:
    """Helion 1.4.0's flat_spec of the matmul kernel (3 block sizes, 2 device loops, 3 memory accesses)."""
    frags = [Frag("block_sizes", "pow2", slot=i, sequence=True, default=16, low=16, high=4096, block_size=True,
                  size_hint=4096) for i in range(3)]
    frags.append(Frag("loop_orders", "perm", slot=0, sequence=True, default=[0, 1], length=2))
    frags.append(Frag("l2_groupings", "pow2", slot=0, sequence=True, default=1, low=1, high=64))
    for key, kind, default, extra in (("range_unroll_factors", "int", 0, {"low": 0, "high": 4}),
                                      ("range_num_stages", "int", 0, {"low": 0, "high": 4}),
                                      ("range_multi_buffers", "enum", None, {"choices": (None, False, True)}),
                                      ("range_flattens", "enum", None, {"choices": (None, False, True)})):
        frags += [Frag(key, kind, slot=i, sequence=True, default=default, **extra) for i in range(2)]
    frags.append(Frag("num_warps", "pow2", default=4, low=1, high=32))
    frags.append(Frag("num_stages", "int", default=1, low=1, high=8))
    frags.append(Frag("indexing", "list", default=["pointer"] * 3, length=3,
                      inner=_enum(("pointer", "tensor_descriptor"))))
    frags.append(Frag("atomic_indexing", "list", default=[], length=0, inner=_enum(("pointer",))))
    frags.append(Frag("pid_type", "enum", default="flat", choices=("flat", "persistent_blocked",
                                                                    "persistent_interleaved")))
    frags.append(Frag("num_sm_multiplier", "pow2", default=1, low=1, high=128))
    frags.append(Frag("load_eviction_policies", "list", default=["", ""], length=2, inner=_enum(("", "first", "last"))))
    frags.append(Frag("maxnreg", "enum", default=None, choices=(None, 32, 64, 128, 256)))
    return frags


def matmul_default_flat() -> list:
    return [16, 16, 16, [0, 1], 1, 0, 0, 0, 0, None, None, None, None, 4, 1, ["pointer"] * 3, [], "flat", 1,
            ["", ""], None]


def test_every_slot_and_list_element_is_one_parameter_with_exact_bounds():
    layout = build_space(matmul_frags(), name="matmul")
    space = layout.space
    assert [p.name for p in space.params] == [
        "block_sizes_0", "block_sizes_1", "block_sizes_2", "loop_orders_0", "l2_groupings_0",
        "range_unroll_factors_0", "range_unroll_factors_1", "range_num_stages_0", "range_num_stages_1",
        "range_multi_buffers_0", "range_multi_buffers_1", "range_flattens_0", "range_flattens_1", "num_warps",
        "num_stages", "indexing_0", "indexing_1", "indexing_2", "pid_type", "num_sm_multiplier",
        "load_eviction_policies_0", "load_eviction_policies_1", "maxnreg"]
    assert space.by_name["block_sizes_0"].values() == (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
    assert space.by_name["range_unroll_factors_1"].values() == (0, 1, 2, 3, 4)
    assert space.by_name["range_flattens_0"].values() == (None, False, True)
    assert isinstance(space.by_name["loop_orders_0"], Permutation)
    assert space.by_name["maxnreg"].values() == (None, 32, 64, 128, 256)
    assert not any(isinstance(p, ListParam) for p in space.params)
    # exact list lengths: 3 block sizes, 3 indexing elements, 2 eviction policies, no atomic_indexing
    assert sum(n.startswith("indexing_") for n in space.names) == 3
    assert sum(n.startswith("load_eviction_policies_") for n in space.names) == 2
    assert not any(n.startswith("atomic_indexing") for n in space.names)
    assert [c.text for c in space.constraints] == ["block_sizes_0 * block_sizes_1 * block_sizes_2 <= 4194304"]


def test_default_is_helions_default_and_valid():
    layout = build_space(matmul_frags())
    space = layout.space
    assert space.is_valid(space.default)
    assert layout.to_flat(space.default) == matmul_default_flat()
    assert layout.from_flat(matmul_default_flat()) == space.default


def test_round_trip_of_configs_keeps_exact_lengths_and_types():
    layout = build_space(matmul_frags())
    space = layout.space
    rng = random.Random(0)
    for cfg in space.sample(rng, 200):
        flat = layout.to_flat(cfg)
        assert len(flat) == len(layout.frags)
        assert isinstance(flat[3], list) and sorted(flat[3]) == [0, 1]      # permutation back to a list
        assert isinstance(flat[15], list) and len(flat[15]) == 3           # indexing: 3 accesses
        assert flat[16] == []                                              # atomic_indexing: none
        assert isinstance(flat[19], list) and len(flat[19]) == 2           # eviction policies: 2 loads
        assert layout.from_flat(flat) == space.canonical(cfg)
        assert cfg["block_sizes_0"] * cfg["block_sizes_1"] * cfg["block_sizes_2"] <= 2**22


def test_single_valued_slots_are_constants_and_come_back():
    frags = [Frag("block_sizes", "pow2", slot=0, sequence=True, default=1, low=1, high=1, block_size=True),
             Frag("block_sizes", "pow2", slot=1, sequence=True, default=16, low=16, high=256, block_size=True),
             Frag("indexing", "list", default=["pointer", "pointer"], length=2,
                  inner=_enum(("pointer",))),
             Frag("pid_type", "enum", default="flat", choices=("flat",)),
             Frag("some_future_knob", "const", default={"a": 1}),
             Frag("num_warps", "pow2", default=4, low=1, high=32)]
    layout = build_space(frags, max_block_numel=None)
    assert layout.space.names == ["block_sizes_1", "num_warps"]
    assert any("block_sizes_0" in n for n in layout.notes)
    cfg = layout.space.normalize({"block_sizes_1": 64})
    assert layout.to_flat(cfg) == [1, 64, ["pointer", "pointer"], "flat", {"a": 1}, 4]
    assert layout.space.constraints == []


def test_block_bound_never_excludes_helions_default():
    frags = [Frag("block_sizes", "pow2", slot=i, sequence=True, default=4096, low=16, high=4096, block_size=True)
             for i in range(3)] + [Frag("num_warps", "pow2", default=4, low=1, high=32)]
    space = build_space(frags, max_block_numel=2**20).space
    assert space.is_valid(space.default)
    assert space.constraints[0].text.endswith(f"<= {4096**3}")


def test_helion_default_outside_bounds_falls_back_and_says_so():
    frags = [Frag("num_warps", "pow2", default=64, low=1, high=32), Frag("num_stages", "int", default=1, low=1, high=8)]
    layout = build_space(frags)
    assert layout.space.default["num_warps"] == 1
    assert any("num_warps" in n for n in layout.notes)


def test_reduction_loop_persistent_value_is_in_the_space():
    frags = [Frag("block_sizes", "pow2", slot=0, sequence=True, default=1, low=1, high=8192, block_size=True,
                  size_hint=8192),
             Frag("reduction_loops", "pow2", slot=0, sequence=True, default=8192, low=8, high=8192, block_size=True,
                  size_hint=8192),
             Frag("num_warps", "pow2", default=4, low=1, high=32)]
    layout = build_space(frags)
    p = layout.space.by_name["reduction_loops_0"]
    assert 8192 in p.values() and "persistent" in p.description
    assert "reduction_loops_0 >= 8192" in helion_hints(layout, 60)


def test_layout_dict_round_trip_and_bad_input():
    layout = build_space(matmul_frags(), name="matmul")
    again = layout_from_dict(json.loads(json.dumps(layout.to_dict())), name="matmul")
    assert again.space.to_dict() == layout.space.to_dict()
    assert again.to_flat(again.space.default) == matmul_default_flat()
    with pytest.raises(SpaceError):
        Frag("x", "tensor")
    with pytest.raises(SpaceError):
        layout.from_flat([1, 2, 3])
    with pytest.raises(SpaceError):
        build_space([Frag("pid_type", "enum", default="flat", choices=("flat",))])


def test_hints_name_what_this_gpu_offers():
    text = helion_hints(build_space(matmul_frags()), 60)
    assert "tensor_descriptor" in text and "available" in text
    assert "persistent_interleaved" in text and "60 s" in text
    assert "$" not in text


@pytest.mark.parametrize("kernel", ["matmul", "softmax", "layer_norm", "attention"])
def test_h100_dumps_rebuild_and_the_expert_answers_fit_them(kernel):
    dump = json.loads((SPACES / f"{kernel}.space.json").read_text())
    layout = layout_from_dict(dump["layout"], name=dump["space"]["name"])
    space: Space = layout.space
    assert space.to_dict() == dump["space"]
    assert space.is_valid(space.default)
    for seed in dump["seeds"]:
        assert space.is_valid(space.normalize(seed))
    # The kernel source and the Helion hints are what the prompt shows.
    assert "hl.tile" in dump["workload"]["source"]
    assert "tensor_descriptor" in dump["workload"]["hints"]
    answer = json.loads((EXPERT / f"{kernel}.json").read_text())
    measured = {space.key(space.default)} | {space.key(space.normalize(s)) for s in dump["seeds"]}
    parsed = configs_from_answer(answer, space, exclude=measured)
    assert not parsed.rejected, [r.reason for r in parsed.rejected]
    assert len(parsed.accepted) == len(answer["configs"])


try:  # Helion is optional (the [helion] extra); CI has none
    import helion
    import helion.language as hl
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    helion = None

if helion is not None:
    @helion.kernel(static_shapes=True)
    def _add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(out.size()):
            out[tile] = x[tile] + y[tile]
        return out


@pytest.mark.skipif(helion is None, reason="Helion is not installed")
def test_helion_fragments_read_off_a_live_kernel():
    """Only where Helion is installed (not in CI): the live ConfigGeneration maps and round-trips."""
    from kerntune.helion import describe_fragments

    x = torch.randn(256, 256)
    try:
        bound = _add.bind((x, x))
    except Exception as exc:  # noqa: BLE001 - a Helion that cannot trace on this machine's device
        pytest.skip(f"Helion cannot bind here: {exc}")
    gen = bound.config_spec.create_config_generation()
    layout = build_space(describe_fragments(gen))
    default = gen.default_flat()
    assert layout.to_flat(layout.from_flat(default)) == default
    for cfg in layout.space.sample(random.Random(0), 20):
        gen.unflatten(layout.to_flat(cfg))
