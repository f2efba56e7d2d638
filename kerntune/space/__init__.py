"""Search spaces: parameters, constraints, defaults and the operations on them."""

from kerntune.space.expr import Expression
from kerntune.space.io import from_kernel_tuner, load_space, save_space, space_from_dict
from kerntune.space.kinds import ListParam, Permutation
from kerntune.space.params import Boolean, Choice, IntRange, Param, PowerOfTwo, canonical, jsonable
from kerntune.space.space import Config, Constraint, FieldError, Space

__all__ = [
    "Boolean", "Choice", "Config", "Constraint", "Expression", "FieldError", "IntRange", "ListParam", "Param",
    "Permutation", "PowerOfTwo", "Space", "canonical", "from_kernel_tuner", "jsonable", "load_space",
    "save_space", "space_from_dict",
]
