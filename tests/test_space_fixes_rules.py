"""Space fixes in constraints: Python's and/or, pow/range/bool/divmod, guards that reject a config
instead of crashing, Kernel Tuner restriction callables with named arguments, a constraint that
raises for every config named in the error, and sampling a huge sparse space.

Counts are compared with Kernel Tuner's own ``Searchspace`` where Kernel Tuner accepts the input.
Each test failed before its fix (checked against the untouched ``kerntune/space``)."""

from __future__ import annotations

import random
import time

import pytest

from kerntune.errors import SpaceError
from kerntune.space import Choice, Expression, IntRange, PowerOfTwo, Space, from_kernel_tuner


def _kt_configs(tune_params, restrictions) -> list[tuple]:
    from kernel_tuner.searchspace import Searchspace

    return sorted(Searchspace(tune_params, restrictions, 1024).list)


def _ours(space: Space) -> list[tuple]:
    return sorted(tuple(c.values()) for c in space.valid_configs())


# ---------------------------------------------------------------------------- 4: and/or, whitelisted calls
AB = {"a": [0, 1, 2, 4, 8, 16, 32], "b": [0, 1, 16]}


@pytest.mark.parametrize("rule", [
    "(a or b) * 2 <= 8",
    "max(a, b and 64) <= 32",
    "(a and b) + 1 == b + 1",
    "a in range(0, 64, 16)",
    "a not in range(1, 9)",
    "pow(2, a) <= 64",
    "pow(a, 2, 5) == 1",
    "bool(a) and not bool(b)",
    "divmod(a, 4)[1] == 0 and divmod(b, 3)[0] < 5",
])
def test_expressions_select_what_kernel_tuner_selects(rule):
    assert _ours(from_kernel_tuner(AB, [rule])) == _kt_configs(AB, [rule])


def test_boolop_returns_the_deciding_operand():
    assert Expression("a or b")({"a": 0, "b": 16}) is True  # __call__ is a bool ...
    assert Expression("(a or b) * 2 == 32")({"a": 0, "b": 16})  # ... the operand is the value
    assert Expression("(a and b) == 0")({"a": 0, "b": 16})
    assert Expression("(a and b) == 16")({"a": 4, "b": 16})


def test_range_is_bounded():
    assert not Space([IntRange("a", low=0, high=3)], ["a < 2 or sum(range(10 ** 12)) > 0"]).is_valid({"a": 3})
    with pytest.raises(SpaceError, match="range of"):
        Expression("a in range(10 ** 12)")({"a": 1})


# ---------------------------------------------------------------------------- 8: guards reject the config
def test_a_guarded_power_rejects_configs_instead_of_crashing():
    tp = {"a": list(range(0, 100, 10)), "b": [1, 2]}
    sp = from_kernel_tuner(tp, ["2 ** a <= 1024 * b"])
    assert sp.count() == len(_kt_configs(tp, ["2 ** a <= 1024 * b"])) == 4  # 2**70 is computed, as Python does
    assert [e.field for e in sp.validate({"a": 70, "b": 1})] == ["<constraints>"]
    assert all(sp.satisfies(c) for c in sp.sample(random.Random(0), 10))
    # beyond the limit (a result of over 4096 bits) the config is rejected, not an error
    big = Space([IntRange("a", low=1, high=8)], ["a < 5 or 2 ** (a * 1000) > 0"])
    assert big.count() == 4 and not big.is_valid({"a": 6})
    assert [e.field for e in big.validate({"a": 6})] == ["<constraints>"]


def test_the_guard_error_is_both_a_space_error_and_an_arithmetic_error():
    from kerntune.space.expr import ConstraintLimitError

    for text in ("2 ** 10 ** 9 > a", "1 << 10 ** 9 > a", "len((a,) * 10 ** 9) > 0", "round(a, -10 ** 5) == 0"):
        with pytest.raises(ConstraintLimitError) as exc:
            Expression(text, ["a"])({"a": 1})
        assert isinstance(exc.value, SpaceError) and isinstance(exc.value, ArithmeticError)


def test_a_guard_that_fires_for_every_config_is_named_in_the_error():
    with pytest.raises(SpaceError, match=r"no valid configuration.*round\(BS, -10\*\*5\).*round to -100000 digits"):
        Space([Choice("BS", options=(64, 128))], ["round(BS, -10**5) == 0"])


# ---------------------------------------------------------------------------- 3: restriction callables
TP = {"a": [1, 2, 4, 8], "b": [1, 2, 4, 8]}


def r_named(a, b):
    return a * b <= 16


def r_dict(p):
    return p["a"] * p["b"] <= 16


def r_default(a, b, limit=16):
    return a * b <= limit


def r_unnamed(x, y):  # Kernel Tuner passes the values in tune_params order
    return x * y <= 16


@pytest.mark.parametrize("restrictions", [
    [lambda a, b: a * b <= 16], [r_named], r_named, [r_dict], r_dict, [r_default], [r_unnamed],
    [r_named, "a >= 2"],
], ids=["lambda", "def", "bare-def", "dict", "bare-dict", "default-arg", "unnamed", "with-string"])
def test_restriction_callables_select_what_kernel_tuner_selects(restrictions):
    assert _ours(from_kernel_tuner(TP, restrictions)) == _kt_configs(TP, restrictions)


def test_restriction_arguments_are_bound_by_name_and_kwargs_get_every_parameter():
    def reversed_names(b, a):
        return a == 1 and b == 8

    assert _ours(from_kernel_tuner(TP, [reversed_names])) == [(1, 8)]
    assert from_kernel_tuner(TP, [lambda **p: p["a"] == 2 and p["b"] == 4]).count() == 1
    assert from_kernel_tuner(TP, [lambda a: a == 2]).count() == 4  # names only the parameters it needs
    assert from_kernel_tuner(TP, [(lambda a: a == 2, ["a"])]).count() == 4  # Kernel Tuner's (fn, names)
    with pytest.raises(SpaceError, match="names unknown parameter 'c'"):
        from_kernel_tuner(TP, [(lambda c: c == 2, ["c"])])
    with pytest.raises(SpaceError, match="takes arguments"):
        from_kernel_tuner(TP, [lambda x, y, z: True])


def test_a_constraint_that_raises_type_error_for_every_config_says_so():
    with pytest.raises(SpaceError, match=r"no valid configuration.*raised for every config tried \(TypeError"):
        Space([Choice("a", options=(1, 2))], [lambda cfg: cfg["a"] < "x"])
    with pytest.raises(SpaceError, match=r"default config .* violates .*raised for every config tried \(TypeError"):
        Space([Choice("a", options=(1, 2))], [lambda cfg: cfg["a"] < "x"], default={"a": 1})
    # one that raises for some configs only still just rejects them
    assert Space([Choice("a", options=(1, 2))], [lambda cfg: 1 // (cfg["a"] - 1) >= 0]).count() == 1


# ---------------------------------------------------------------------------- 2: huge sparse spaces
def _huge_sparse() -> Space:
    # 1.1e12 cartesian points, one valid in 4096: too many to walk, enough to sample.
    return Space([PowerOfTwo(f"p{i}", low=1, high=32768) for i in range(10)], ["p0 == p1 == p2 == p3"])


def test_sampling_a_huge_sparse_space_finds_configs():
    sp = _huge_sparse()
    out = sp.sample(random.Random(0), 10)
    assert len(out) == 10 and all(sp.satisfies(c) for c in out)
    rng = random.Random(1)
    assert all(sp.satisfies(sp.random_config(rng)) for _ in range(20))


def test_an_unsatisfiable_huge_space_is_one_clear_error_within_the_time_bound(monkeypatch):
    import kerntune.space.space as space_mod

    monkeypatch.setattr(space_mod, "RANDOM_SEARCH_SECONDS", 0.5)
    names = [f"p{i}" for i in range(10)]
    only = {n: 1 for n in names}
    sp = Space([PowerOfTwo(n, low=1, high=32768) for n in names], [" and ".join(f"{n} == 1" for n in names)],
               default=only)
    start = time.monotonic()
    with pytest.raises(SpaceError, match="no valid configuration found in .* random draws"):
        sp.random_config(random.Random(0))
    assert time.monotonic() - start < 10


def test_sample_returns_what_it_found_when_drawing_gives_up(monkeypatch):
    sp = _huge_sparse()
    real = sp.random_config
    calls = {"n": 0}

    def flaky(rng, max_tries=10_000):
        calls["n"] += 1
        if calls["n"] > 3:
            raise SpaceError("no valid configuration found in 1 random draws")
        return real(rng, max_tries)

    monkeypatch.setattr(sp, "random_config", flaky)
    out = sp.sample(random.Random(0), 10)
    assert 1 <= len(out) <= 3 and all(sp.satisfies(c) for c in out)
    calls["n"] = 10
    with pytest.raises(SpaceError):  # nothing found: the error, not an empty list
        sp.sample(random.Random(0), 10)
