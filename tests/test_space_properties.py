"""Property tests of Space over small random spaces (hypothesis).

The strategy draws 2-4 parameters of every kind with small value sets and up to
two constraints from a few templates.  The test evaluates each template in
plain Python (``Template.holds``) so the brute-force count does not go through
kerntune's expression interpreter.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kerntune.space import Boolean, Choice, IntRange, ListParam, Param, Permutation, PowerOfTwo, Space

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------------------- parameters
@st.composite
def pow2_params(draw, name):
    lo = draw(st.integers(0, 3))
    hi = draw(st.integers(lo, min(lo + 3, 5)))
    default = draw(st.none() | st.sampled_from([2**k for k in range(lo, hi + 1)]))
    return PowerOfTwo(name, low=2**lo, high=2**hi, default=default)


@st.composite
def int_params(draw, name):
    low = draw(st.integers(-3, 3))
    step = draw(st.integers(1, 3))
    n = draw(st.integers(1, 4))
    return IntRange(name, low=low, high=low + step * (n - 1) + draw(st.integers(0, step - 1)), step=step)


@st.composite
def numeric_choice_params(draw, name):
    options = draw(st.lists(st.sampled_from([0, 1, 2, 3, 5, 8, 12, 16, 1.5]), min_size=1, max_size=4,
                            unique=True))
    return Choice(name, options=tuple(options))


@st.composite
def other_choice_params(draw, name):
    options = draw(st.lists(st.sampled_from(["row", "col", "auto", None, 7]), min_size=1, max_size=3,
                            unique=True))
    return Choice(name, options=tuple(options))


@st.composite
def bool_params(draw, name):
    return Boolean(name, default=draw(st.sampled_from([None, False, True])))


@st.composite
def perm_params(draw, name):
    n = draw(st.integers(1, 3))
    return Permutation(name, items=tuple(draw(st.permutations(["x", "y", "z"]))[:n]))


@st.composite
def list_params(draw, name):
    element = draw(st.sampled_from([
        PowerOfTwo(f"{name}_item", low=1, high=4),
        Boolean(f"{name}_item"),
        IntRange(f"{name}_item", low=0, high=2),
        Choice(f"{name}_item", options=("a", "b")),
    ]))
    return ListParam(name, element=element, length=draw(st.integers(1, 2)))


NUMERIC_KINDS = (pow2_params, int_params, numeric_choice_params)
ALL_KINDS = NUMERIC_KINDS + (other_choice_params, bool_params, perm_params, list_params)


def is_numeric(p: Param) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in p.values())


# ---------------------------------------------------------------------------------------- constraints
@dataclass(frozen=True)
class Template:
    """A constraint as kerntune text plus the test's own Python evaluation of it."""

    text: str
    fn: Callable[[dict[str, Any]], bool]

    def holds(self, cfg: dict[str, Any]) -> bool:
        return bool(self.fn(cfg))


@st.composite
def templates(draw, params: list[Param]):
    numeric = [p.name for p in params if is_numeric(p)]
    names = [p.name for p in params]
    kinds = ["ne"]
    if len(numeric) >= 2:
        kinds += ["le", "prod", "sum_ge"]
    if numeric:
        kinds += ["mod", "bound"]
    kind = draw(st.sampled_from(kinds))
    k = draw(st.integers(0, 24))
    if kind == "ne":
        a, b = draw(st.permutations(names))[:2]
        return Template(f"{a} != {b}", lambda c: c[a] != c[b])
    if kind == "mod":
        a = draw(st.sampled_from(numeric))
        return Template(f"{a} % 2 == 0", lambda c: c[a] % 2 == 0)
    if kind == "bound":
        a = draw(st.sampled_from(numeric))
        return Template(f"{a} <= {k}", lambda c: c[a] <= k)
    a, b = draw(st.permutations(numeric))[:2]
    if kind == "le":
        return Template(f"{a} <= {b}", lambda c: c[a] <= c[b])
    if kind == "prod":
        return Template(f"{a} * {b} <= {k}", lambda c: c[a] * c[b] <= k)
    return Template(f"{a} + {b} >= {k // 3}", lambda c: c[a] + c[b] >= k // 3)


@dataclass
class Case:
    params: list[Param]
    rules: list[Template]

    def brute_force(self) -> list[dict[str, Any]]:
        names = [p.name for p in self.params]
        out = []
        for combo in itertools.product(*(p.values() for p in self.params)):
            cfg = dict(zip(names, combo))
            if all(r.holds(cfg) for r in self.rules):
                out.append(cfg)
        return out

    def space(self) -> Space:
        return Space(self.params, [r.text for r in self.rules])


@st.composite
def cases(draw) -> Case:
    n = draw(st.integers(2, 4))
    params = [draw(draw(st.sampled_from(ALL_KINDS))(f"p{i}")) for i in range(n)]
    # at least one numeric parameter half the time, so numeric templates get exercised
    if draw(st.booleans()) and not any(is_numeric(p) for p in params):
        params[0] = draw(draw(st.sampled_from(NUMERIC_KINDS))("p0"))
    rules = draw(st.lists(templates(params), min_size=0, max_size=2))
    return Case(params, rules)


def build(case: Case) -> tuple[Space, list[dict[str, Any]]]:
    """The Space and its brute-force valid set; skips (assume) empty spaces."""
    valid = case.brute_force()
    assume(valid)
    return case.space(), valid


# ---------------------------------------------------------------------------------------- properties
@SETTINGS
@given(cases(), st.integers(0, 2**32 - 1))
def test_sampled_and_random_configs_validate(case, seed):
    space, valid = build(case)
    rng = random.Random(seed)
    for _ in range(5):
        cfg = space.random_config(rng)
        assert space.validate(cfg) == [], (cfg, space.validate(cfg))
    sample = space.sample(rng, 8)
    assert len(sample) == min(8, len(valid))
    assert len({space.key(c) for c in sample}) == len(sample)
    for cfg in sample:
        assert space.validate(cfg) == [], (cfg, space.validate(cfg))
    assert space.validate(space.default) == []


def hamming_distance(space: Space, a: dict[str, Any], b: dict[str, Any]) -> int:
    dist = 0
    for p in space.params:
        x, y = space.canonical(a)[p.name], space.canonical(b)[p.name]
        if isinstance(p, ListParam):
            dist += sum(repr(u) != repr(v) for u, v in zip(x, y))
        else:
            dist += repr(x) != repr(y)
    return dist


@SETTINGS
@given(cases(), st.integers(0, 2**32 - 1), st.sampled_from(["adjacent", "hamming"]))
def test_neighbours_differ_in_exactly_one_field_and_are_valid(case, seed, mode):
    space, valid = build(case)
    cfg = space.random_config(random.Random(seed))
    neighbours = space.neighbours(cfg, mode)
    for nb in neighbours:
        changed = [n for n in space.names if space.key({**cfg, n: nb[n]}) != space.key(cfg)]
        assert len(changed) == 1, (cfg, nb)
        assert space.validate(nb) == [], (nb, space.validate(nb))
    keys = [space.key(nb) for nb in neighbours]
    assert space.key(cfg) not in keys
    if mode == "hamming":
        # hamming reaches every valid config at Hamming distance one, and only those
        # (a list parameter counts per element: one element changes at a time)
        expected = {space.key(c) for c in valid if hamming_distance(space, cfg, c) == 1}
        assert set(keys) == expected


@SETTINGS
@given(cases())
def test_count_and_enumerate_match_brute_force(case):
    space, valid = build(case)
    enumerated = list(space.enumerate())
    assert space.count() == len(valid)
    assert len(enumerated) == len(valid)
    assert [space.key(c) for c in enumerated] == [space.key(c) for c in valid]
    if space.cartesian_size <= 5000:
        assert len(space.valid_configs()) == len(valid)


@SETTINGS
@given(cases(), st.integers(0, 2**32 - 1))
def test_key_roundtrip_and_encoding_bounds(case, seed):
    space, valid = build(case)
    rng = random.Random(seed)
    for cfg in [space.default] + [rng.choice(valid) for _ in range(5)]:
        key = space.key(cfg)
        back = space.from_key(key)
        assert back == space.canonical(cfg)
        assert space.key(back) == key
        assert space.validate(back) == []
        vec = space.encode(cfg)
        assert len(vec) == space.encoded_width
        assert ((vec >= 0.0) & (vec <= 1.0)).all(), vec


@SETTINGS
@given(cases())
def test_distinct_configs_have_distinct_keys(case):
    space, valid = build(case)
    assert len({space.key(c) for c in valid}) == len(valid)


# ---------------------------------------------------------------------------------------- uniformity
def _uniformity(space: Space, draws: int, seed: int, tolerance: float) -> Counter:
    rng = random.Random(seed)
    valid = [space.key(c) for c in space.enumerate()]
    counts = Counter(space.key(space.random_config(rng)) for _ in range(draws))
    assert set(counts) == set(valid), "every valid config is drawn, and nothing else"
    expected = draws / len(valid)
    for key, n in counts.items():
        assert abs(n - expected) <= tolerance * expected, (key, n, expected)
    chi2 = sum((counts[k] - expected) ** 2 / expected for k in valid)
    # df = len(valid) - 1; 4 x df is far in the tail for any df here
    assert chi2 < 4 * (len(valid) - 1) + 10, chi2
    return counts


def test_random_config_is_uniform_over_constrained_space():
    space = Space([PowerOfTwo("a", low=1, high=8), IntRange("b", low=1, high=4)], ["a * b <= 8"])
    assert space.count() == 11
    _uniformity(space, draws=4000, seed=1234, tolerance=0.35)


def test_random_config_is_uniform_when_rejection_falls_back_to_materialising():
    # 4 valid configs in 40,000: rejection mostly fails and the valid set is used instead.
    space = Space([IntRange("x", low=0, high=199), IntRange("y", low=0, high=199)], ["x == y and x < 4"])
    _uniformity(space, draws=1000, seed=99, tolerance=0.35)


def test_sample_first_draw_is_uniform():
    space = Space([PowerOfTwo("a", low=1, high=8), IntRange("b", low=1, high=4)], ["a * b <= 8"])
    rng = random.Random(7)
    counts = Counter(space.key(space.sample(rng, 1)[0]) for _ in range(2200))
    assert len(counts) == 11
    assert all(abs(n - 200) <= 70 for n in counts.values()), counts


@pytest.mark.parametrize("n", [3, 11])
def test_sample_without_replacement_covers_space(n):
    space = Space([PowerOfTwo("a", low=1, high=8), IntRange("b", low=1, high=4)], ["a * b <= 8"])
    got = space.sample(random.Random(n), n)
    assert len({space.key(c) for c in got}) == n
