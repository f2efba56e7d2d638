"""Values a user or a model gives that the Space must read as they mean them: a parameter's declared
default (an error if it violates a constraint, as a space-level one is), and a permutation answered
with 2.0 for the item 2 (the answer schema lets it through)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from kerntune.errors import SpaceError
from kerntune.llm.parsing import configs_from_answer
from kerntune.space import Permutation, PowerOfTwo, Space, from_kernel_tuner
from kerntune.space.io import space_from_dict


def test_declared_parameter_defaults_that_violate_a_constraint_are_an_error():
    data = {"params": [{"name": "a", "kind": "choice", "options": [1, 2, 3], "default": 3},
                       {"name": "b", "kind": "choice", "options": [1, 2, 3], "default": 3}],
            "constraints": ["a + b <= 4"]}
    with pytest.raises(SpaceError, match=r'default config \{"a":3,"b":3\} violates constraint .a \+ b <= 4.'):
        space_from_dict(data)
    # as a space-level default does
    with pytest.raises(SpaceError, match="violates"):
        space_from_dict({**data, "params": [dict(p, default=None) for p in data["params"]],
                         "default": {"a": 3, "b": 3}})
    # a space-level default overrides the parameters' ones
    ok = space_from_dict({**data, "default": {"a": 1}})
    assert ok.default == {"a": 1, "b": 3}


def test_an_unstated_default_still_falls_back_to_the_first_valid_config():
    # Kernel Tuner's first values are its default, not the user's statement: they may violate.
    space = from_kernel_tuner({"x": [8, 1, 2, 4], "y": [1, 2]}, ["x * y <= 4"])
    assert space.satisfies(space.default)
    data = {"params": {"a": {"kind": "choice", "options": [3, 1]}, "b": [3, 1]}, "constraints": ["a + b <= 4"]}
    assert space_from_dict(data).default == {"a": 3, "b": 1}


def test_a_permutation_answered_with_integral_floats_is_the_space_own_value():
    space = Space([Permutation("order", items=(0, 1, 2)), PowerOfTwo("B", low=16, high=64)])
    answer = {"configs": [{"config": {"order": [2.0, 1, 0], "B": 32.0}}]}
    jsonschema.validate(answer, space.json_schema())  # the schema's enum lets 2.0 through ...
    parsed = configs_from_answer(answer, space)       # ... so validation must read it as 2
    assert not parsed.rejected, parsed.rejected
    assert parsed.accepted == [{"order": (2, 1, 0), "B": 32}]
    assert space.key(parsed.accepted[0]) == space.key({"order": (2, 1, 0), "B": 32})
    assert json.dumps(parsed.accepted[0]["order"]) == "[2, 1, 0]"


def test_permutation_items_are_still_matched_exactly_where_they_differ():
    p = Permutation("p", items=(1, 1.0, "1"))  # 1 and 1.0 are different items here: no guessing
    assert p.own((1.0, 1, "1")) == (1.0, 1, "1")
    assert p.own((True, 1, "1")) == (True, 1, "1")  # a boolean is not the number 1
    space = Space([Permutation("q", items=("m", "n", "k"))])
    assert space.normalize({"q": ["k", "n", "m"]}) == {"q": ("k", "n", "m")}
    parsed = configs_from_answer({"configs": [{"config": {"q": ["k", "n", "x"]}}]}, space)
    assert not parsed.accepted and parsed.rejected
