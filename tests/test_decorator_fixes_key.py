"""What ``@kerntune.autotune``'s cache is keyed by: the tensor arguments' dtypes (as ``triton.autotune``'s
key holds them) and the kernel's code with its ``@triton.jit`` helpers and constexpr globals (Triton's
``cache_key``).  Real kernels under Triton's interpreter (TRITON_INTERPRET=1, CPU torch) and real SQLite
stores; the ``cache_key`` cases run in a child process without the interpreter, where ``@triton.jit``
makes a real ``JITFunction`` (its ``cache_key`` needs no GPU; nothing is launched there)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")
torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")

import kerntune  # noqa: E402
from kerntune.store import Store  # noqa: E402
from tests.kernel_modules import kernel_module  # noqa: E402

if os.environ.get("TRITON_INTERPRET") != "1":  # imported under a real GPU session: not what these tests are for
    pytest.skip("needs TRITON_INTERPRET=1 before triton is imported", allow_module_level=True)

SPACE = {"params": [{"name": "BLOCK", "kind": "choice", "options": [32, 64]}], "default": {"BLOCK": 32}}

COPY = '''
import triton
import triton.language as tl


@triton.jit
def copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)
'''

# A kernel that calls a helper and reads a constexpr global; the variants differ only there.
WITH_HELPER = '''
import triton
import triton.language as tl

FACTOR: tl.constexpr = tl.constexpr(FACTOR_VALUE)


@triton.jit
def helper(v):
    return v * HELPER_VALUE


@triton.jit
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, helper(tl.load(x_ptr + offs, mask=m)) * FACTOR, mask=m)
'''


def _grid(n: int):
    return lambda meta: (triton.cdiv(n, meta["BLOCK"]),)


def _tuned(kernel, db: Path):
    return kerntune.autotune(space=SPACE, key=["n"], strategy="exhaustive", store=str(db), rep_ms=2)(kernel)


def test_an_fp32_call_is_tuned_apart_from_an_fp16_call_in_memory_and_in_the_store(tmp_path: Path) -> None:
    """The key held the key arguments only, so an fp32 call of the same n launched the fp16 call's winner
    (Triton's own autotune key appends every tensor argument's dtype): now each dtype is a key of its own,
    in this process and in the store a later process reads."""
    mod = kernel_module(tmp_path / "kt_fix_copy.py", "kt_fix_copy", COPY)
    db = tmp_path / "k.db"
    k = _tuned(mod.copy, db)
    for dt in (torch.float16, torch.float32):
        x = torch.randn(100).to(dt)
        out = torch.empty_like(x)
        k[_grid(100)](x, out, 100)
        torch.testing.assert_close(out, x)
    assert len(k.tuned_keys) == 2, k.tuned_keys
    dtypes = [json.loads(p)["(dtypes)"] for p in k.tuned_keys]
    assert dtypes == [{"out_ptr": "torch.float16", "x_ptr": "torch.float16"},
                      {"out_ptr": "torch.float32", "x_ptr": "torch.float32"}]
    assert all(json.loads(p)["n"] == 100 for p in k.tuned_keys)
    # What another process finds: both keys stored; a new decorator instance reads each without tuning,
    # and a third dtype is a miss (tuned), not the nearest or the first stored entry.
    assert sorted(e["problem_key"] for e in Store(db).iter_best(k.kernel_hash)) == sorted(k.tuned_keys)
    again = _tuned(mod.copy, db)
    for dt in (torch.float32, torch.float16):
        x = torch.randn(100).to(dt)
        again[_grid(100)](x, torch.empty_like(x), 100)
    assert again.tuned_keys == []
    x = torch.randn(100, dtype=torch.float64)
    again[_grid(100)](x, torch.empty_like(x), 100)
    assert len(again.tuned_keys) == 1 and "torch.float64" in again.tuned_keys[0]


def test_the_nearest_tuned_key_is_one_of_the_same_dtypes(tmp_path: Path) -> None:
    """``on_miss="nearest"`` serves a tuned key's winner only when the dtypes match: an fp32 call with no
    fp32 key tuned is tuned, not served the fp16 key's winner."""
    mod = kernel_module(tmp_path / "kt_fix_near.py", "kt_fix_near", COPY)
    db = tmp_path / "k.db"
    x16 = torch.randn(100).to(torch.float16)
    _tuned(mod.copy, db)[_grid(100)](x16, torch.empty_like(x16), 100)
    lazy = kerntune.autotune(space=SPACE, key=["n"], strategy="exhaustive", store=str(db), rep_ms=2,
                             on_miss="nearest")(mod.copy)
    x = torch.randn(128).to(torch.float16)
    lazy[_grid(128)](x, torch.empty_like(x), 128)            # fp16, n=128: the n=100 fp16 winner, queued
    assert lazy.tuned_keys == [] and len(lazy.queued) == 1
    x = torch.randn(128)
    out = torch.empty_like(x)
    lazy[_grid(128)](x, out, 128)                            # fp32: no fp32 key to be near: tuned
    assert len(lazy.tuned_keys) == 1 and "torch.float32" in lazy.tuned_keys[0]
    torch.testing.assert_close(out, x)


CHILD = r'''
import importlib.util, json, sys
import triton
import kerntune
from kerntune.retune import _State
from triton.runtime.jit import JITFunction
SPACE = {"params": [{"name": "BLOCK", "kind": "choice", "options": [32, 64]}], "default": {"BLOCK": 32}}
out = {}
for path in sys.argv[1:]:
    name = path.rsplit("/", 1)[1][:-3]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    assert isinstance(mod.scale, JITFunction)  # not the interpreter's InterpretedFunction
    dec = kerntune.autotune(space=SPACE, key=["n"], store=path + ".db")(mod.scale)
    tuner = triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["n"])(mod.scale)
    out[name] = {"decorator": dec.kernel_hash, "retune": _State(tuner).kernel_hash}
print(json.dumps(out))
'''


def test_an_edited_helper_or_constexpr_global_is_a_new_kernel_to_the_cache(tmp_path: Path) -> None:
    """The kernel's identity hashed ``JITFunction.src`` alone, so editing a ``@triton.jit`` helper it calls
    (or a ``tl.constexpr`` global it reads) served the old code's winner, from the decorator's cache and
    from ``kerntune.retune``'s.  Now it is Triton's ``cache_key``, which covers both.  Run where
    ``@triton.jit`` gives a real JITFunction (a child without TRITON_INTERPRET): the interpreter's
    kernels have no ``cache_key``, and there the identity stays the source (the next test)."""
    files = {}
    for name, helper, factor in (("kt_fix_base", "1.0", "1.0"), ("kt_fix_helper", "2.0", "1.0"),
                                 ("kt_fix_global", "1.0", "3.0"), ("kt_fix_same", "1.0", "1.0")):
        files[name] = tmp_path / f"{name}.py"
        files[name].write_text(WITH_HELPER.replace("HELPER_VALUE", helper).replace("FACTOR_VALUE", factor))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", CHILD, *map(str, files.values())], capture_output=True, text=True,
                          timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    for side in ("decorator", "retune"):
        base = got["kt_fix_base"][side]
        assert got["kt_fix_same"][side] == base, side          # the same code in another file: the same kernel
        assert got["kt_fix_helper"][side] != base, side        # only the helper differs
        assert got["kt_fix_global"][side] != base, side        # only the constexpr global differs


def test_under_the_interpreter_the_identity_is_the_kernels_source(tmp_path: Path) -> None:
    """What the fallback covers: an ``InterpretedFunction`` has no ``cache_key``, so the identity is the
    kernel's own source (an edit of its body is a new kernel; a helper's edit is not seen here).  The
    hash is then the one kerntune gave before, so interpreted kernels keep their stored winners."""
    import hashlib

    from kerntune.run.decorator_key import kernel_identity

    mod = kernel_module(tmp_path / "kt_fix_interp.py", "kt_fix_interp", COPY)
    k = _tuned(mod.copy, tmp_path / "k.db")
    assert not hasattr(mod.copy, "cache_key")
    assert kernel_identity(mod.copy, k.source) == k.source
    assert "tl.load(x_ptr + offs" in k.source
    blob = json.dumps([k.source, k.space.to_dict()], sort_keys=True, default=str)
    assert k.kernel_hash == hashlib.sha256(blob.encode()).hexdigest()[:16]


def test_the_identity_is_read_at_the_first_launch_not_at_decoration(tmp_path: Path) -> None:
    """A helper defined below the decorated kernel is not in its module yet while the decorator runs;
    reading ``cache_key`` then would leave it out (and Triton memoizes it, for its compile cache too).
    The kernel hash is computed when first asked for: decorating reads nothing."""
    mod = kernel_module(tmp_path / "kt_fix_lazy.py", "kt_fix_lazy", COPY)
    k = _tuned(mod.copy, tmp_path / "k.db")
    assert k._kernel_hash is None
    x = torch.randn(64)
    k[_grid(64)](x, torch.empty_like(x), 64)
    assert k._kernel_hash is not None



UNHASHABLE = '''
import triton
import triton.language as tl


def plain(v):
    return v


@triton.jit
def scale(x_ptr, n, BLOCK: tl.constexpr):
    plain(1)
'''

CHILD_UNHASHABLE = r'''
import importlib.util, sys
import kerntune
path = sys.argv[1]
spec = importlib.util.spec_from_file_location("kt_fix_unhashable", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
k = kerntune.autotune(space={"params": [{"name": "BLOCK", "kind": "choice", "options": [32, 64]}]}, key=["n"],
                      store=path + ".db")(mod.scale)
for who in ("kerntune", "triton"):
    try:
        k.kernel_hash if who == "kerntune" else mod.scale.cache_key
        print(who, "no error")
    except RuntimeError as exc:
        print(who, "RuntimeError", str(exc).split(":")[0])
'''


def test_a_kernel_triton_cannot_hash_fails_as_triton_fails_it(tmp_path: Path) -> None:
    """A kernel calling a plain Python function: Triton's ``cache_key`` raises ("Unsupported function
    referenced"), and kerntune's first lookup raises it too; Triton's own read after it raises again
    (a failed read once left Triton's placeholder key memoized, and the launch would have gone on)."""
    path = tmp_path / "kt_fix_unhashable.py"
    path.write_text(UNHASHABLE)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", CHILD_UNHASHABLE, str(path)], capture_output=True, text=True,
                          timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split("\n")[:2] == ["kerntune RuntimeError Unsupported function referenced",
                                           "triton RuntimeError Unsupported function referenced"]


def test_a_winner_of_a_smaller_budget_is_searched_again_when_a_larger_one_is_asked(tmp_path: Path) -> None:
    """A winner stored by ``budget=1`` (one config of four measured) was served for good to a decorator
    asking ``budget=4``; now it is searched again and replaced, and a wider search's winner serves a
    smaller budget without a search."""
    mod = kernel_module(tmp_path / "kt_fix_budget.py", "kt_fix_budget", COPY)
    db = tmp_path / "k.db"
    four = {"params": [{"name": "BLOCK", "kind": "choice", "options": [16, 32, 64, 128]}], "default": {"BLOCK": 32}}
    x = torch.randn(100)

    def launch(budget: int):
        k = kerntune.autotune(space=four, key=["n"], strategy="random", budget=budget, store=str(db), rep_ms=2)(mod.copy)
        out = torch.empty_like(x)
        k[_grid(100)](x, out, 100)
        torch.testing.assert_close(out, x)
        return k

    assert len(launch(1).tuned_keys) == 1
    wide = launch(4)
    assert len(wide.tuned_keys) == 1, "the budget=1 winner was served to budget=4"
    (entry,) = Store(db).iter_best(wide.kernel_hash)
    assert entry["run_id"] == Store(db).list_runs(1)[0].id  # the wider search's winner replaced it
    assert launch(4).tuned_keys == [] and launch(1).tuned_keys == []
