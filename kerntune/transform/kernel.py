"""A tunable kernel as Kernel Tuner launches it: source, tunable parameters,
restrictions and grid divisors, plus the backends kerntune drives through Kernel Tuner.

Everything here is data: restrictions and grid divisors are expression strings
that kerntune's safe expression evaluator (``kerntune.space.expr``) interprets,
so nothing a model wrote ever reaches ``eval`` — not here and not in Kernel Tuner,
which receives callables built from those expressions.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from kerntune.errors import KerntuneError
from kerntune.space import Constraint, Expression, Space, from_kernel_tuner
from kerntune.space.params import jsonable

#: --backend name -> Kernel Tuner ``lang``.  ``cuda`` lets Kernel Tuner pick CuPy, cuda-python or
#: PyCUDA (whichever is installed); ``cupy``/``nvcuda``/``pycuda`` force one.
BACKENDS = {"opencl": "OpenCL", "cuda": "CUDA", "cupy": "CuPy", "nvcuda": "NVCUDA", "pycuda": "PyCUDA", "c": "C"}
#: Kernel Tuner's thread-block parameter names: they set the launch even when the code never names them.
BLOCK_NAMES = ("block_size_x", "block_size_y", "block_size_z")
AXES = ("x", "y", "z")

_KERNEL_RE = {
    "OpenCL": re.compile(r"__kernel\s+(?:__attribute__\s*\(\(.*?\)\)\s*)?void\s+([A-Za-z_]\w*)\s*\(", re.S),
    "CUDA": re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+([A-Za-z_]\w*)\s*\(", re.S),
    "C": re.compile(r"^\s*(?:extern\s+\"C\"\s+)?(?:float|double|void|int)\s+([A-Za-z_]\w*)\s*\(", re.M),
}


def lang_of(backend: str) -> str:
    key = backend.strip().lower()
    if key not in BACKENDS:
        raise KerntuneError(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
    return BACKENDS[key]


def family(lang: str) -> str:
    """OpenCL, CUDA or C: the language of the source, whatever runs it."""
    return "OpenCL" if lang == "OpenCL" else "C" if lang == "C" else "CUDA"


def kernel_names(source: str, lang: str) -> list[str]:
    return _KERNEL_RE[family(lang)].findall(strip_comments(source))


def strip_comments(source: str) -> str:
    source = re.sub(r"/\*.*?\*/", " ", source, flags=re.S)
    return re.sub(r"//[^\n]*", " ", source)


def uses_name(source: str, name: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", strip_comments(source)) is not None


def value_problem(value: Any, kernel_tuner: bool = True) -> str | None:
    """Why ``value`` cannot be a tunable parameter's value (None: it can).

    Any backend: a number, a string, a boolean or None (a Triton constexpr may be one); never a container.
    Kernel Tuner (``kernel_tuner``) defines each parameter in the code as its value's text (``#define ACC_T
    double``): a finite number or a one-line string; a boolean would be ``True`` or ``False``, which C does
    not know."""
    boolean = type(value).__name__ in ("bool", "bool_")  # numpy's too
    if value is not None and not boolean and not isinstance(value, (numbers.Real, str)):
        return f"a {type(value).__name__} (a value is a number or a string)"
    if not kernel_tuner:
        return None
    if value is None:
        return "None (a value is a number or a string)"
    if boolean:
        return "a boolean (Kernel Tuner would define the name as True or False, which C does not know: give 1 and 0)"
    if isinstance(value, numbers.Real):
        return None if math.isfinite(float(value)) else "not a finite number"
    return None if value.strip() and "\n" not in value and "\r" not in value else \
        "an empty or multi-line string (Kernel Tuner defines the name as the text, on one line)"


def tune_params_problem(params: Any, kernel_tuner: bool = True) -> str | None:
    """The first problem with a ``{name: [values]}`` mapping of tunable parameters, as one line naming the
    parameter and the value (None: every value is usable; ``kernel_tuner``: by Kernel Tuner, see
    ``value_problem``)."""
    if not isinstance(params, Mapping):
        return f"tune_params must map names to lists of values, not a {type(params).__name__}"
    for name, values in params.items():
        if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__iter__"):
            return f"parameter {name!r}: a list of values, not a {type(values).__name__} ({values!r})"
        for v in values:
            why = value_problem(v, kernel_tuner)
            if why is not None:
                return f"parameter {name!r}: value {v!r} is {why}"
    return None


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def divisor_function(exprs: Sequence[str], names: Sequence[str]):
    """A grid divisor for Kernel Tuner: the product of safe expressions of the parameters."""
    compiled = [Expression(e, names) for e in exprs]

    def divisor(params: Mapping[str, Any]) -> int:
        out = 1
        for c in compiled:
            out *= int(c._fn(params))  # the value, not its truth: Expression.__call__ returns a bool
        return max(out, 1)

    return divisor


@dataclass
class KernelSpec:
    """One kernel variant: what Kernel Tuner needs besides the arguments and the problem size.

    ``grid_div`` maps an axis (x, y, z) to expression strings whose product divides the problem
    size on that axis (Kernel Tuner's ``grid_div_x`` …); an axis not given keeps Kernel Tuner's
    default, the block size on that axis.
    """

    name: str
    source: str
    tune_params: dict[str, list[Any]] = field(default_factory=dict)
    restrictions: list[str] = field(default_factory=list)
    grid_div: dict[str, list[str]] = field(default_factory=dict)
    description: str = ""

    def __post_init__(self) -> None:
        self.tune_params = {str(k): [jsonable(v) for v in vals] for k, vals in self.tune_params.items()}
        self.restrictions = [str(r) for r in self.restrictions]
        for axis, exprs in self.grid_div.items():
            if axis not in AXES:
                raise KerntuneError(f"grid divisor axis {axis!r} is not one of x, y, z")
            names = list(self.tune_params)
            for e in exprs:
                Expression(e, names)  # fails here, with the text, when it names an unknown parameter

    @property
    def hash(self) -> str:
        blob = self.source + repr(sorted(self.grid_div.items()))
        return source_hash(blob)

    def space(self, extra_restrictions: Sequence[str] = ()) -> Space:
        params = self.tune_params or {"block_size_x": [256]}
        rules: list[str | Constraint] = list(self.restrictions)
        names = set(params)
        for r in extra_restrictions:
            try:
                rules.append(Constraint(r, names))
            except KerntuneError:
                continue  # an automatic restriction naming a parameter this kernel lacks
        space = from_kernel_tuner(params, None, name=self.name)
        return Space(space.params, rules, name=self.name, description=self.description)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "tune_params": self.tune_params,
                "restrictions": self.restrictions, "grid_div": self.grid_div, "description": self.description}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "KernelSpec":
        return cls(data["name"], data["source"], dict(data.get("tune_params") or {}),
                   list(data.get("restrictions") or []), dict(data.get("grid_div") or {}),
                   data.get("description", ""))


def block_restriction(max_threads: int | None, names: Sequence[str]) -> list[str]:
    """The device's limit on threads per block, over the block-size parameters a space has."""
    present = [n for n in BLOCK_NAMES if n in names]
    if not max_threads or not present:
        return []
    return [" * ".join(present) + f" <= {int(max_threads)}"]


def parse_problem_size(text: str | Sequence[int] | int) -> tuple[int, ...]:
    if isinstance(text, int):
        return (text,)
    if not isinstance(text, str):
        return tuple(int(v) for v in text)
    try:
        dims = tuple(int(p) for p in re.split(r"[x,* ]+", text.strip()) if p)
    except ValueError:
        raise KerntuneError(f"bad problem size {text!r}: expected e.g. 256x256") from None
    if not dims or len(dims) > 3 or any(d < 1 for d in dims):
        raise KerntuneError(f"bad problem size {text!r}: one to three positive sizes, e.g. 256x256")
    return dims
