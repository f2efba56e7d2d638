"""Model edits with values no kernel takes are refused, never end the run."""

from __future__ import annotations

import pytest

from kerntune.errors import SpaceError
from kerntune.prune.edits import Edit, apply_edits
from kerntune.prune.rules import Rule
from kerntune.space import Choice, PowerOfTwo, Space


@pytest.mark.parametrize("accepts", [None, {"warps": {"kind": "int", "low": 1, "high": 32}},
                                     {"warps": {"kind": "number"}}])
@pytest.mark.parametrize("value", [10**400, -(10**400), 2**63], ids=["1e400", "-1e400", "2**63"])
def test_add_value_with_a_huge_integer_is_refused(accepts, value):
    # math.isfinite(10**400) raised OverflowError, which ended the run.
    space = Space([PowerOfTwo("BM", low=16, high=64), Choice("warps", options=(2, 4, 8))])
    out = apply_edits(space, [Edit.from_dict({"op": "add_value", "param": "warps", "value": value})],
                      accepts=accepts)
    assert not out.applied and len(out.refused) == 1
    assert "2**63" in out.refused[0][1]


def test_add_value_with_an_ordinary_integer_still_applies():
    space = Space([PowerOfTwo("BM", low=16, high=64), Choice("warps", options=(2, 4, 8))])
    out = apply_edits(space, [Edit.from_dict({"op": "add_value", "param": "warps", "value": 16})])
    assert out.applied and out.state.space.by_name["warps"].values() == (2, 4, 8, 16)


def test_declared_bound_that_is_a_huge_integer_is_a_space_error():
    with pytest.raises(SpaceError, match="high"):
        Rule.declared(None, {"kind": "int", "high": 10**400}, "warps")
