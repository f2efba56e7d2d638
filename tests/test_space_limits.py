"""A Space never walks a huge cartesian product where it need not: counting an unconstrained space,
finding a default for one whose constraints admit nothing, or re-finding it after a prune edit."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import textwrap

import pytest

from kerntune.errors import SpaceError
from kerntune.prune.edits import Edit, apply_edits
from kerntune.space import Choice, PowerOfTwo, Space


@contextlib.contextmanager
def deadline(seconds: float):
    """Fail (instead of hanging the suite) when the block runs longer than ``seconds``."""
    def expire(*_):
        raise TimeoutError(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def huge() -> list:
    return [PowerOfTwo(n, low=1, high=32768) for n in "abcdefghij"]  # 16**10 = 1.1e12 points


def test_count_without_constraints_is_the_cartesian_size():
    with deadline(20):
        assert Space(huge()).count() == 16**10


def test_space_info_on_a_huge_unconstrained_space_answers(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("params:\n" + "".join(f"  {n}: {{kind: pow2, low: 1, high: 32768}}\n" for n in "abcdefghij"))
    proc = subprocess.run([sys.executable, "-m", "kerntune", "space", "info", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "1,099,511,627,776" in proc.stdout


def test_unsatisfiable_constraint_on_a_huge_space_is_one_error_saying_how_far_it_looked():
    with deadline(30), pytest.raises(SpaceError, match="no valid configuration found among the first") as exc:
        Space(huge(), ["a > 65536"])
    assert "a > 65536" in str(exc.value) and "default" in str(exc.value)


def test_unsatisfiable_constraint_on_a_small_space_is_still_exact():
    with pytest.raises(SpaceError, match="^the space has no valid configuration$"):
        Space([Choice("a", options=(1, 2))], ["a > 2"])


def test_a_valid_default_beyond_the_first_points_is_found_at_random():
    # 'a' leads the cartesian order: a = 16384 comes after 16**9 = 6.9e10 points.
    with deadline(30):
        space = Space(huge(), ["a >= 16384"])
    assert space.default["a"] >= 16384 and space.satisfies(space.default)
    assert Space(huge(), ["a >= 16384"]).default == space.default  # the search is seeded


def test_prune_edit_that_removes_the_default_re_finds_one_within_bounds():
    from kerntune.prune.edits import _rebuilt

    space = Space(huge(), ["a >= 2"], default={"a": 2})
    kept = [v for v in space.by_name["a"].values() if v != 2]
    with deadline(30):  # the default moves to a = 1, which violates: the search walked 6.9e10 points
        new = _rebuilt(space, "a", kept, "drop a = 2")
    assert new.default["a"] >= 4 and new.satisfies(new.default)


def test_prune_edit_on_a_huge_constrained_space_is_one_error_not_a_hang():
    space = Space(huge(), ["a >= 2"], default={"a": 2})
    with deadline(30), pytest.raises(SpaceError, match="too many to count"):
        apply_edits(space, [Edit.from_dict({"op": "remove_value", "param": "a", "value": 2})])
    with pytest.raises(SpaceError, match="too many to count"):
        space.count()


def test_a_large_space_with_a_sparse_valid_set_is_walked_once_when_sampling_misses(monkeypatch):
    """Above the materialise limit, rejection sampling that keeps missing used to end every sampling
    strategy with "too many to materialise"; the valid set is now walked once and held when it is
    small (the limit is lowered here so that the walk is a few thousand points)."""
    import random

    import kerntune.space.space as space_mod

    monkeypatch.setattr(space_mod, "_MATERIALISE_LIMIT", 100)
    sp = Space([PowerOfTwo(n, low=1, high=8) for n in "abcdef"], ["a == b == c and d == e == f"])
    assert sp.cartesian_size == 4096
    draws = [sp.random_config(random.Random(i), max_tries=3) for i in range(20)]
    assert all(sp.satisfies(c) for c in draws) and sp.materialised and sp.count() == 16
    assert len(sp.sample(random.Random(0), 16)) == 16
    # a valid set too large to hold is still one clear error
    monkeypatch.setattr(space_mod, "_MATERIALISE_LIMIT", 10)
    wide = Space([PowerOfTwo(n, low=1, high=8) for n in "abcdef"], ["a == b"])
    with pytest.raises(SpaceError, match="too many to hold"):
        wide.valid_configs()
