"""``KerntuneStrategy.space_of``: a kerntune strategy inside Kernel Tuner takes Kernel Tuner's own
search space, sparse ones included.  Real Kernel Tuner ``Searchspace`` objects, no GPU."""

from __future__ import annotations

import random

from kernel_tuner.searchspace import Searchspace

from kerntune.transform.kt_strategy import KerntuneStrategy

VALUES = [1, 2, 4, 8, 16, 32, 64, 128]


def test_a_sparse_kernel_tuner_space_is_taken_from_its_own_list() -> None:
    """7 parameters of 8 values (2.1 million points) whose restrictions leave 6 configs: the space was
    once searched for by walking the cartesian product and gave up ("no valid configuration")."""
    tp = {n: VALUES for n in "abcdefg"}
    ss = Searchspace(tp, ["a == b", "b == c", "c == d", "d == e", "e == f", "f == g", "a >= 4"], 1024)
    space = KerntuneStrategy("random").space_of(ss)
    want = {tuple(c) for c in ss.list}
    assert len(want) == 6
    assert tuple(space.default[n] for n in tp) in want
    drawn = {tuple(space.random_config(random.Random(s))[n] for n in tp) for s in range(40)}
    assert drawn <= want and len(drawn) > 1
    assert {tuple(c[n] for n in tp) for c in space.enumerate()} == want


def test_a_dense_kernel_tuner_space_keeps_its_valid_set() -> None:
    tp = {"x": [16, 32, 64], "y": [1, 2]}
    ss = Searchspace(tp, ["x * y <= 64"], 1024)
    space = KerntuneStrategy("random").space_of(ss)
    assert {tuple(c[n] for n in tp) for c in space.enumerate()} == {tuple(c) for c in ss.list}
