"""``@kerntune.autotune`` on real ``@triton.jit`` kernels under Triton's interpreter (TRITON_INTERPRET=1,
set before triton is imported) on the CPU: the ways packages stack Triton's decorators, and arguments
the caller leaves to their defaults."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")
torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")

import kerntune  # noqa: E402
from tests.kernel_modules import kernel_module  # noqa: E402

if os.environ.get("TRITON_INTERPRET") != "1":  # imported under a real GPU session: not what these tests are for
    pytest.skip("needs TRITON_INTERPRET=1 before triton is imported", allow_module_level=True)

SPACE = {"params": [{"name": "BLOCK", "kind": "choice", "options": [32, 64]}], "default": {"BLOCK": 32}}

KERNEL = '''
import triton
import triton.language as tl


@triton.heuristics({"EVEN": lambda a: a["n"] % 2 == 0})
@triton.jit
def scale(x_ptr, out_ptr, n, alpha=2.0, EVEN: tl.constexpr = False, BLOCK: tl.constexpr = 16):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * alpha * FACTOR, mask=m)
'''


def _module(tmp_path: Path, name: str, factor: float):
    """A kernel file of its own (Triton reads a kernel's source from its file)."""
    return kernel_module(tmp_path / f"{name}.py", name, KERNEL.replace("FACTOR", repr(factor)))


def _tuned(kernel, db: Path, **kw):
    options = dict(space=SPACE, key=["n"], strategy="exhaustive", store=str(db), rep_ms=5)
    options.update(kw)
    return kerntune.autotune(**options)(kernel)


def _pkey(**values) -> str:
    """The problem key of a call with float32 ``x`` and ``out``: the key values and the tensors' dtypes."""
    return json.dumps({"(dtypes)": {"out_ptr": "torch.float32", "x_ptr": "torch.float32"}, **values}, sort_keys=True)


def _grid(n: int):
    return lambda meta: (triton.cdiv(n, meta["BLOCK"]),)


def test_a_kernel_under_triton_heuristics_is_keyed_by_its_source(tmp_path: Path) -> None:
    """Under ``triton.heuristics`` the JITFunction (and its source) is one layer down: two kernels of the
    same name and space with different bodies get different cache entries (they once shared the name's)."""
    one, two = _module(tmp_path, "kt_heur_one", 1.0), _module(tmp_path, "kt_heur_two", 3.0)
    a, b = _tuned(one.scale, tmp_path / "k.db"), _tuned(two.scale, tmp_path / "k.db")
    assert "tl.load(x_ptr + offs" in a.source
    assert a.kernel_hash != b.kernel_hash
    x, out = torch.randn(100), torch.empty(100)
    b[_grid(100)](x, out, 100)
    assert b.tuned_keys == [_pkey(n=100)]
    torch.testing.assert_close(out, x * 6.0)


def test_triton_heuristics_stacked_above_the_decorator_launches(tmp_path: Path) -> None:
    """FLA's order, heuristics over autotune: Triton's ``Heuristics.run`` hands ``warmup`` down, which the
    launch once passed twice ("got multiple values for keyword argument 'warmup'")."""
    mod = _module(tmp_path, "kt_heur_above", 1.0)
    inner = _tuned(mod.scale.fn, tmp_path / "k.db")  # the JITFunction under the module's heuristics
    stacked = triton.heuristics({"EVEN": lambda a: a["n"] % 2 == 0})(inner)
    x, out = torch.randn(100), torch.empty(100)
    stacked[_grid(100)](x, out, 100)
    torch.testing.assert_close(out, x * 2.0)
    assert inner.tuned_keys == [_pkey(n=100)]


def test_a_key_argument_left_to_its_default_counts_as_that_value(tmp_path: Path) -> None:
    """``alpha`` (a key argument with a default) left out of the call: the key holds its default, as the
    kernel sees it (it once raised KeyError), and a call that passes the same value hits that entry."""
    mod = _module(tmp_path, "kt_default_key", 1.0)
    k = _tuned(mod.scale, tmp_path / "k.db", key=["n", "alpha"])
    x, out = torch.randn(64), torch.empty(64)
    k[_grid(64)](x, out, 64)
    k[_grid(64)](x, out, 64, alpha=2.0)
    assert k.tuned_keys == [_pkey(alpha=2.0, n=64)]
    torch.testing.assert_close(out, x * 2.0)
