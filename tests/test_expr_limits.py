"""Constraint expressions that pass the whitelist but would hang, exhaust memory or overflow the
stack are refused with one SpaceError line (constraints come from space files and from models)."""

from __future__ import annotations

import pytest

from kerntune.errors import SpaceError
from kerntune.space import Choice, Expression, Space


@pytest.mark.parametrize("text", [
    "round(BS, -10**5) == 0",             # the reviewer's -10**8 computes 10**(10**8): minutes
    "len('%0999d' % BS) > 0",             # '%0999999999d' % BS builds a gigabyte string
    "len('%*d' % (10**5, BS)) > 0",
    "len(sum(((BS,)*30,)*30, ())) > 0",   # 3000 x 3000 concatenates quadratically: minutes
])
def test_expression_resource_bombs_are_refused(text):
    with pytest.raises(SpaceError):
        Expression(text, ["BS"])({"BS": 64})
    with pytest.raises(SpaceError):  # and through a Space: one clear error, no hang
        Space([Choice("BS", options=(64, 128))], [text]).count()


def test_legitimate_round_sum_and_modulo_still_work():
    assert Expression("round(BS / 3, 2) == 21.33")({"BS": 64})
    assert Expression("round(BS, -2) == 100")({"BS": 64})
    assert Expression("sum((BS, W)) <= 72")({"BS": 64, "W": 8})
    assert Expression("sum((BS, W), 0.5) == 72.5")({"BS": 64, "W": 8})
    assert Expression("BS % 32 == 0")({"BS": 64})
    assert Expression("round(2.5) == 2")({})


@pytest.mark.parametrize("text", ["-" * 3000 + "BS > 0", "BS" + "+BS" * 20000, "-" * 300 + "BS > 0",
                                  "(" * 150 + "BS" + ")" * 150 + "+" + "BS+" * 500 + "1"])
def test_deeply_nested_expression_is_one_space_error(text):
    with pytest.raises(SpaceError, match="nested"):
        Expression(text, ["BS"])


def test_nested_but_reasonable_expression_is_kept():
    text = "BS" + "+BS" * 100 + " > 0"
    assert Expression(text, ["BS"])({"BS": 1})


def test_memory_error_while_parsing_is_a_space_error(monkeypatch):
    import ast
    import types

    import kerntune.space.expr as expr

    def boom(*a, **k):
        raise MemoryError

    fake = types.ModuleType("ast")  # only the evaluator's view of ast: pytest parses sources too
    fake.__dict__.update(ast.__dict__)
    fake.parse = boom
    monkeypatch.setattr(expr, "ast", fake)
    with pytest.raises(SpaceError):
        Expression("BS > 0", ["BS"])
