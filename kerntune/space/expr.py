"""Safe constraint expressions over parameter names.

Constraints arrive from YAML files, Kernel Tuner ``restrictions`` and (later)
from model output, so they are parsed with :mod:`ast` and interpreted by a
small whitelist interpreter.  Nothing is ever passed to ``eval``; a node type
that is not listed here is rejected when the expression is built, not when it
is first evaluated, so a bad constraint fails at load time with its text.
"""

from __future__ import annotations

import ast
import math
import operator
from typing import Any, Callable, Iterable, Mapping

from kerntune.errors import SpaceError

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
}
_CMPOPS: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.Not: operator.not_,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
}
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "len": len,
    "int": int,
    "float": float,
    "bool": bool,
    "divmod": divmod,
    "log2": math.log2,
    "ceil": math.ceil,
    "floor": math.floor,
    "sorted": sorted,
}
# No sensible constraint needs integers this large; bounding results (not only
# operands) stops nested powers like ((9**64)**64)**64 from building huge ints.
_MAX_INT_BITS = 4096
_MAX_REPEAT_LEN = 100_000
# range() in a constraint is a membership test or a short list; sum/sorted/len over a longer one
# (range(10**12)) would run for hours.
_MAX_RANGE_LEN = 1_000_000
# round(x, -10**8) computes 10**(10**8) inside CPython (minutes); a float has at most ~330 digits
# either side of the point and a bounded int (_MAX_INT_BITS) about 1,240, so nothing larger rounds.
_MAX_ROUND_DIGITS = 1_300
# Deeper expressions ('-'*3000 + 'x', 'x+x+...' 20,000 times) overflow the parser's or the
# interpreter's stack; a real constraint is a handful of levels deep.
_MAX_DEPTH = 200


class ConstraintLimitError(SpaceError, ArithmeticError):
    """A guard below refused to compute a value for one config (2**90 is fine; 2**10**9 is not).

    It is an ArithmeticError so that the config is *rejected*, like ``x // 0``, instead of ending a
    count, a validation or a sampling run: ``2 ** a <= 1024 * b`` with ``a`` up to 90 crashed all
    three.  Kernel Tuner would compute the number; kerntune computes every result up to
    ``_MAX_INT_BITS`` bits exactly as Python does and rejects the config beyond that, which can
    differ from Kernel Tuner only for a rule that a number of over 4096 bits satisfies (``2**a > 0``
    with a > 4096).  It stays a SpaceError for whoever calls an Expression directly, and a rule that
    hits a guard for every config is named in the "no valid configuration" error.
    """


def _pow(a: Any, b: Any) -> Any:
    # Only an integer power grows without bound (a float overflows: OverflowError, rejected); a
    # bounded exponent still multiplies the base's size, and powers nest: the result is bounded.
    if isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1:
        bits = b * math.log2(abs(a))
        if bits > _MAX_INT_BITS:
            raise ConstraintLimitError(f"exponent {b} too large in constraint: {a}**{b} would have about"
                                       f" {bits:.0f} bits (limit {_MAX_INT_BITS})")
    return a**b


def _pow_call(base: Any, exp: Any, mod: Any = None) -> Any:
    # pow(a, b) is a ** b; pow(a, b, m) stays below m (modular exponentiation is fast for any b).
    return _pow(base, exp) if mod is None else pow(base, exp, mod)


def _range(*args: Any) -> range:
    r = range(*args)
    if len(r) > _MAX_RANGE_LEN:
        raise ConstraintLimitError(f"range of {len(r):,} items too long in constraint (limit {_MAX_RANGE_LEN:,})")
    return r


def _lshift(a: Any, b: Any) -> Any:
    # 1 << 10**12 would allocate a terabit integer.
    if isinstance(a, int) and isinstance(b, int) and a and b > 0 and abs(a).bit_length() + b > _MAX_INT_BITS:
        raise ConstraintLimitError(f"left shift by {b} too large in constraint: the result would have more"
                                   f" than {_MAX_INT_BITS} bits")
    return a << b


def _mul(a: Any, b: Any) -> Any:
    # "x" * 10**12 or (1,) * 10**9 would exhaust memory; repeating a sequence is bounded.
    for seq, n in ((a, b), (b, a)):
        if isinstance(seq, (str, tuple)) and isinstance(n, int) and n > 0 and len(seq) * n > _MAX_REPEAT_LEN:
            raise ConstraintLimitError(f"repetition by {n} too large in constraint (limit {_MAX_REPEAT_LEN:,} items)")
    return a * b


def _mod(a: Any, b: Any) -> Any:
    # '%0999999999d' % x builds a gigabyte string: a constraint has no use for printf formatting.
    if isinstance(a, (str, bytes)):
        raise ConstraintLimitError("string formatting with % is not allowed in a constraint")
    return a % b


def _round(number: Any, ndigits: Any = None) -> Any:
    if isinstance(ndigits, int) and abs(ndigits) > _MAX_ROUND_DIGITS:
        raise ConstraintLimitError(f"round to {ndigits} digits not allowed in a constraint"
                                   f" (limit {_MAX_ROUND_DIGITS:,})")
    return round(number, ndigits)


def _sum(items: Any, start: Any = 0) -> Any:
    # sum(tuples, ()) concatenates quadratically: 3000 tuples of 3000 items ran for minutes.  A
    # constraint sums numbers; a non-numeric start (the only way to sum sequences) is refused.
    if not isinstance(start, (int, float)):
        raise ConstraintLimitError("sum adds numbers only in a constraint (its start must be a number)")
    return sum(items, start)


# Wrapped builtins: bounded versions of round, sum, pow and range (see above).
FUNCTIONS["round"] = _round
FUNCTIONS["sum"] = _sum
FUNCTIONS["pow"] = _pow_call
FUNCTIONS["range"] = _range
_BINOPS[ast.Mod] = _mod
_BINOPS[ast.Pow] = _pow
_BINOPS[ast.LShift] = _lshift
_BINOPS[ast.Mult] = _mul

Evaluator = Callable[[Mapping[str, Any]], Any]


def _depth(root: ast.AST) -> int:
    """Nesting depth of ``root``, counted without recursion (the tree may be thousands deep)."""
    deepest, stack = 0, [(root, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        if d > _MAX_DEPTH:
            break
        stack.extend((child, d + 1) for child in ast.iter_child_nodes(node))
    return deepest


class Expression:
    """A compiled constraint such as ``block_size_x * block_size_y <= 1024``."""

    def __init__(self, source: str, known_names: Iterable[str] | None = None) -> None:
        if not isinstance(source, str):
            raise SpaceError(f"constraint must be a string, got {type(source).__name__}")
        self.source = source.strip()
        shown = self.source if len(self.source) <= 200 else self.source[:200] + "..."
        try:
            tree = ast.parse(self.source, mode="eval")
        except SyntaxError as exc:
            raise SpaceError(f"constraint {shown!r} is not a valid expression: {exc.msg}") from None
        except (RecursionError, MemoryError):
            # The parser's own stack: '-' * 3000 + 'x' never reaches our depth check.
            raise SpaceError(f"constraint {shown!r} is nested too deeply or too long to parse") from None
        depth = _depth(tree.body)
        if depth > _MAX_DEPTH:
            raise SpaceError(f"constraint {shown!r} is nested {depth} levels deep (limit {_MAX_DEPTH})")
        self.names: set[str] = set()
        self._fn = self._compile(tree.body)
        if known_names is not None:
            known = set(known_names)
            unknown = sorted(self.names - known)
            if unknown:
                raise SpaceError(
                    f"constraint {self.source!r} names unknown parameter {unknown[0]!r}"
                    f" (known: {', '.join(sorted(known))})"
                )

    def __call__(self, config: Mapping[str, Any]) -> bool:
        return bool(self._fn(config))

    def __repr__(self) -> str:
        return f"Expression({self.source!r})"

    def _compile(self, node: ast.AST) -> Evaluator:
        c = self._compile
        if isinstance(node, ast.Constant):
            value = node.value
            if not isinstance(value, (int, float, str, bool, type(None))):
                raise SpaceError(f"constraint {self.source!r}: constant {value!r} not allowed")
            return lambda cfg: value
        if isinstance(node, ast.Name):
            name = node.id
            if name in ("True", "False", "None"):
                const = {"True": True, "False": False, "None": None}[name]
                return lambda cfg: const
            self.names.add(name)
            return lambda cfg: cfg[name]
        if isinstance(node, ast.BoolOp):
            # As Python (and Kernel Tuner's eval) does: the deciding operand, not a bool, so that
            # (a or b) * 2 is 2 * b when a == 0, not True * 2.
            parts = [c(v) for v in node.values]
            is_and = isinstance(node.op, ast.And)

            def boolop(cfg: Mapping[str, Any]) -> Any:
                value = None
                for part in parts:
                    value = part(cfg)
                    if bool(value) != is_and:  # a falsy operand decides 'and', a truthy one 'or'
                        return value
                return value

            return boolop
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            op, left, right = _BINOPS[type(node.op)], c(node.left), c(node.right)
            return lambda cfg: op(left(cfg), right(cfg))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            uop, operand = _UNARY[type(node.op)], c(node.operand)
            return lambda cfg: uop(operand(cfg))
        if isinstance(node, ast.Compare):
            first = c(node.left)
            ops = [_CMPOPS[type(o)] for o in node.ops if type(o) in _CMPOPS]
            if len(ops) != len(node.ops):
                raise SpaceError(f"constraint {self.source!r}: comparison not allowed")
            rest = [c(v) for v in node.comparators]

            def compare(cfg: Mapping[str, Any]) -> bool:
                left = first(cfg)
                for op_fn, right_fn in zip(ops, rest):
                    right = right_fn(cfg)
                    if not op_fn(left, right):
                        return False
                    left = right
                return True

            return compare
        if isinstance(node, ast.IfExp):
            test, body, orelse = c(node.test), c(node.body), c(node.orelse)
            return lambda cfg: body(cfg) if test(cfg) else orelse(cfg)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = [c(e) for e in node.elts]
            return lambda cfg: tuple(i(cfg) for i in items)
        if isinstance(node, ast.Subscript):
            target, index = c(node.value), c(node.slice)
            return lambda cfg: target(cfg)[index(cfg)]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            fname = node.func.id
            if fname not in FUNCTIONS:
                raise SpaceError(
                    f"constraint {self.source!r}: function {fname!r} not allowed"
                    f" (allowed: {', '.join(sorted(FUNCTIONS))})"
                )
            fn, args = FUNCTIONS[fname], [c(a) for a in node.args]
            return lambda cfg: fn(*(a(cfg) for a in args))
        raise SpaceError(f"constraint {self.source!r}: {type(node).__name__} not allowed")
