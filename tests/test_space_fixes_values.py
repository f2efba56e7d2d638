"""Space fixes: one config, one key and one value (64 and 64.0; 1.0 and 1), NumPy tune_params,
sorted shorthand choices, members that constrain, and a boolean's Kernel Tuner default.

Each test failed before its fix (checked against the untouched ``kerntune/space``)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from kerntune.space import (Boolean, Choice, PowerOfTwo, Space, from_kernel_tuner, load_space, save_space,
                            space_from_dict)
from kerntune.space.params import infer_param


def _float_default_space() -> Space:
    return space_from_dict({
        "params": [{"name": "BLOCK", "kind": "pow2", "low": 16, "high": 128},
                   {"name": "alpha", "kind": "choice", "options": [0.5, 1.0]}],
        "default": {"BLOCK": 64.0, "alpha": 1},
    })


# ---------------------------------------------------------------------------- 1: own values and keys
def test_a_float_default_is_the_parameters_own_value_and_shares_the_enumerated_key():
    sp = _float_default_space()
    assert sp.default == {"BLOCK": 64, "alpha": 1.0}
    assert type(sp.default["BLOCK"]) is int and type(sp.default["alpha"]) is float  # the kernel gets an int
    same = next(c for c in sp.enumerate() if c["BLOCK"] == 64 and c["alpha"] == 1.0)
    assert sp.key(same) == sp.key(sp.default) == sp.key({"BLOCK": 64.0, "alpha": 1})
    assert len({sp.key(c) for c in sp.enumerate()} | {sp.key(sp.default)}) == sp.count()  # measured once
    assert all(type(c["BLOCK"]) is int for c in sp.neighbours(sp.default))


def test_normalize_canonical_and_from_key_give_the_parameters_own_values():
    sp = _float_default_space()
    cfg = sp.normalize({"BLOCK": 32.0})
    assert cfg == {"BLOCK": 32, "alpha": 1.0} and type(cfg["BLOCK"]) is int
    assert sp.key(cfg) == "[32,1.0]"
    assert sp.canonical({"BLOCK": 128.0, "alpha": 1}) == {"BLOCK": 128, "alpha": 1.0}
    back = sp.from_key("[128.0,1]")
    assert back == {"BLOCK": 128, "alpha": 1.0} and type(back["BLOCK"]) is int and type(back["alpha"]) is float


def test_true_and_1_stay_apart_where_the_options_tell_them_apart():
    sp = Space([Choice("x", options=(0, 1, True, "1", 1.5)), Boolean("flag")])
    assert sp.key({"x": True, "flag": True}) != sp.key({"x": 1, "flag": True})
    assert sp.key({"x": 1.0, "flag": False}) == sp.key({"x": 1, "flag": False})
    assert sp.normalize({"x": True})["x"] is True
    assert type(sp.normalize({"x": 1.0})["x"]) is int
    assert sp.normalize({"x": "1"})["x"] == "1"
    # a boolean parameter accepts no 1: the value stays as given, and is refused
    assert sp.normalize({"flag": 1})["flag"] == 1 and not sp.is_valid({"x": 0, "flag": 1})
    assert sp.key({"x": 0, "flag": 1}) != sp.key({"x": 0, "flag": True})


def test_mixed_int_and_float_options_keep_their_own_types():
    sp = Space([Choice("x", options=(1, 1.0, 2))])  # a recording may hold both 1 and 1.0
    assert type(sp.normalize({"x": 1.0})["x"]) is float and type(sp.normalize({"x": 1})["x"]) is int
    assert sp.key({"x": 1.0}) != sp.key({"x": 1})
    assert sp.key({"x": 2.0}) == sp.key({"x": 2})


def test_list_and_permutation_values_become_their_own():
    from kerntune.space import ListParam, Permutation

    sp = Space([ListParam("bs", element=PowerOfTwo("e", low=16, high=64), length=2),
                Permutation("order", items=(0, 1, 2))])
    assert sp.key({"bs": [32.0, 16], "order": [2.0, 1, 0]}) == sp.key({"bs": (32, 16), "order": (2, 1, 0)})
    cfg = sp.normalize({"bs": [32.0, 16]})
    assert cfg["bs"] == (32, 16) and all(type(v) is int for v in cfg["bs"])


# ---------------------------------------------------------------------------- 6: NumPy tune_params
@pytest.mark.parametrize("tune_params", [
    {"block_size_x": np.arange(32, 257, 32)},
    {"block_size_x": [np.int64(32), np.int64(64)]},
    {"x": np.array([0.5, 1.0])},
    {"flag": [np.True_, np.False_]},
], ids=["arange", "int64", "float64", "bool_"])
def test_numpy_tune_params_load_count_as_kernel_tuner_and_save(tmp_path, tune_params):
    from kernel_tuner.searchspace import Searchspace

    sp = from_kernel_tuner(tune_params)
    assert sp.count() == Searchspace(tune_params, [], 1024).size
    for p in sp.params:
        assert all(type(v) in (int, float, bool) for v in p.values())
    assert all(type(v) in (int, float, bool) for v in sp.default.values())
    path = tmp_path / "space.yaml"
    save_space(sp, path)  # a NumPy scalar broke the YAML dump
    assert load_space(path).count() == sp.count()
    sp.key(sp.default)  # JSON-able


def test_infer_param_converts_numpy_values():
    p = infer_param("b", [np.int64(64), np.int64(32)])
    assert p.values() == (32, 64) and type(p.values()[0]) is int and p.default_value == 64


# ---------------------------------------------------------------------------- 7: shorthand choices sorted
def test_shorthand_numeric_choice_is_sorted_so_neighbours_follow_the_numbers():
    sp = space_from_dict({"params": {"BLOCK": [64, 32, 128, 16]}})
    assert sp.by_name["BLOCK"].values() == (16, 32, 64, 128)
    assert sorted(c["BLOCK"] for c in sp.neighbours({"BLOCK": 64})) == [32, 128]
    assert [float(sp.encode({"BLOCK": v})[0]) for v in (16, 32, 64, 128)] == pytest.approx([0, 1 / 3, 2 / 3, 1])
    assert sp.default == {"BLOCK": 64}  # the first listed stays the default, as before
    # same as the Kernel Tuner import of the same list
    assert from_kernel_tuner({"BLOCK": [64, 32, 128, 16]}).by_name["BLOCK"].values() == (16, 32, 64, 128)


def test_shorthand_first_listed_default_is_not_a_declared_one():
    # It violates the constraint: a valid default is found, as for any unstated default (no error).
    sp = space_from_dict({"params": {"BLOCK": [64, 32, 128, 16], "W": [4, 2]}, "constraints": ["BLOCK <= 32"]})
    assert sp.satisfies(sp.default)
    # a space-level default still wins
    assert space_from_dict({"params": {"BLOCK": [64, 32]}, "default": {"BLOCK": 32}}).default == {"BLOCK": 32}


def test_shorthand_keeps_unordered_and_already_sorted_lists_as_they_were():
    sp = space_from_dict({"params": {"kind": ["tma", "plain"], "flag": [True, False], "n": [1, 2, 4]}})
    assert sp.by_name["kind"].values() == ("tma", "plain")
    assert sp.by_name["flag"].values() == (True, False)
    assert sp.by_name["n"] == Choice("n", options=(1, 2, 4))  # unchanged: no default recorded


# ---------------------------------------------------------------------------- lesser: members, bool default
def test_members_constrain_without_a_membership_constraint():
    sp = Space([PowerOfTwo("x", low=1, high=64)], members=[{"x": 2}, {"x": 16}])
    assert sp.count() == 2 and sp.default == {"x": 2}
    rng = random.Random(0)
    assert {sp.random_config(rng)["x"] for _ in range(50)} == {2, 16}
    assert sp.neighbours({"x": 2}) == [] and not sp.is_valid({"x": 4})
    assert [e.field for e in sp.validate({"x": 4})] == ["<members>"]
    with pytest.raises(Exception, match="not one of the space's configs"):
        Space([PowerOfTwo("x", low=1, high=64)], default={"x": 4}, members=[{"x": 2}])


def test_a_boolean_listed_true_first_starts_at_true_as_in_kernel_tuner():
    assert infer_param("flag", [True, False]).default_value is True
    assert infer_param("flag", [False, True]).default_value is False
    assert from_kernel_tuner({"use_smem": [True, False], "x": [64, 32]}).default == {"use_smem": True, "x": 64}
