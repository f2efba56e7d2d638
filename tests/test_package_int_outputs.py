"""A package kernel's bool and integer outputs are poisoned before a checked launch, as its float ones are.

``PackageTarget.before_check`` filled the outputs the caught launch writes whole with NaN, so that a
config covering only part of them fails the check, but only float outputs: a mask or an index output
kept the values the buffer held (the package's own fill, or the previous call's output in a block the
allocator handed back), which are the right ones wherever they match, and a config leaving part of it
unwritten passed.  Now such an output is poisoned with its right values each changed (negated, lowest
bit flipped), and the package call's first result is held while the caught call runs, so that its
outputs cannot get the previous call's block back with the very values they are about to be given.

None of kerntune's adapters tunes a kernel with a bool or integer output, so a package-form kernel file
written here stands in: a Triton kernel (run by Triton's interpreter on the CPU, TRITON_INTERPRET=1 set
before triton is imported) that marks a padded batch's real tokens (bool) and gives each its index (-1
for padding, int64), launched by its "package" with CHUNK=256 elements a program over a grid it sizes
itself; CHUNK=128 leaves the second half of both outputs unwritten, the padding, whose right values are
exactly what the package's buffers start with.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")
torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")

from kerntune.evaluate.triton_backend.kernel_file import load_kernel_module  # noqa: E402
from kerntune.evaluate.triton_backend.output_check import compare_outputs  # noqa: E402

if os.environ.get("TRITON_INTERPRET") != "1":  # imported under a real GPU session: not what these tests are for
    pytest.skip("needs TRITON_INTERPRET=1 before triton is imported", allow_module_level=True)

KERNEL_FILE = '''
import weakref

import torch
import triton
import triton.language as tl

name = "fake.mark_tokens"
ALLOC = "full"


@triton.jit
def mark_kernel(x_ptr, keep_ptr, pos_ptr, n, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    start = tl.program_id(0) * CHUNK
    for off in tl.static_range(0, CHUNK, BLOCK):
        offs = start + off + tl.arange(0, BLOCK)
        m = offs < n
        real = tl.load(x_ptr + offs, mask=m, other=0.0) > 0
        tl.store(keep_ptr + offs, real, mask=m)
        tl.store(pos_ptr + offs, tl.where(real, offs, -1).to(tl.int64), mask=m)


_BLOCKS = []  # (weak reference to the tensor handed out, the block behind it)


def _empty(n, dtype):
    """torch.empty as a GPU's caching allocator serves it: a block whose tensor is gone is handed back
    with what its last user left in it."""
    for i, (ref, block) in enumerate(_BLOCKS):
        if ref() is None and block.numel() == n and block.dtype == dtype:
            out = block.view(n)
            _BLOCKS[i] = (weakref.ref(out), block)
            return out
    # a new block holds garbage unlike the right output (torch.empty here could reuse the memory of an
    # earlier test's identical output, right values and all, and the test then depended on that)
    block = torch.full((n,), True) if dtype == torch.bool else torch.full((n,), 2**40, dtype=dtype)
    out = block.view(n)
    _BLOCKS.append((weakref.ref(out), block))
    return out


def mark(x):
    """The package's launcher: its own buffers, CHUNK 256 a program."""
    n = x.numel()
    if ALLOC == "full":
        keep, pos = torch.zeros(n, dtype=torch.bool), torch.full((n,), -1, dtype=torch.int64)
    else:
        keep, pos = _empty(n, torch.bool), _empty(n, torch.int64)
    mark_kernel[(triton.cdiv(n, 256),)](x, keep, pos, n, CHUNK=256, BLOCK=64)
    return keep, pos


kernel = mark_kernel
knobs = {"CHUNK": [128, 256, 512], "BLOCK": [64]}


def default(shape):
    return {"CHUNK": 256, "BLOCK": 64}


def make_inputs(shape):
    (n,) = shape
    g = torch.Generator().manual_seed(0)
    x = torch.rand(n, generator=g) + 0.1  # real tokens first
    x[n // 2:] = 0.0  # padding
    return (x,)


def call(inputs):
    return mark(*inputs)
'''


def _kernel_file(tmp_path: Path, alloc: str = "full") -> Path:
    path = tmp_path / f"mark_{alloc}.py"
    path.write_text(KERNEL_FILE.replace('ALLOC = "full"', f'ALLOC = "{alloc}"'))
    return path


def _checked(target, inputs, ref, chunk: int) -> str | None:
    """Why ``chunk``'s output is wrong (None: right), launched over the poisoned outputs as a worker does."""
    target.before_check(inputs)
    return compare_outputs(target.launch({"CHUNK": chunk, "BLOCK": 64}, inputs), ref, torch)


@pytest.mark.parametrize("alloc", ["full", "pooled"])
def test_a_package_kernels_bool_and_int_outputs_left_half_unwritten_fail_the_check(tmp_path: Path, alloc: str) -> None:
    """Buffers the package fills with False and -1 (``full``), or blocks handed back holding the previous
    call's output (``pooled``): CHUNK=128 leaves the padding half as it was, right by the buffers' own
    values, and passed; now it fails, CHUNK=512 (covering all) passes, and the input is never touched."""
    target = load_kernel_module(_kernel_file(tmp_path, alloc))
    inputs = target.make_inputs((1000,))
    x = inputs[0].clone()
    ref = tuple(t.clone() for t in target.reference(inputs))
    assert ref[0][:500].all() and not ref[0][500:].any() and (ref[1][500:] == -1).all()
    wrong = _checked(target, inputs, ref, 128)
    assert wrong is not None and "integers: exact match needed" in wrong
    assert _checked(target, inputs, ref, 512) is None and _checked(target, inputs, ref, 256) is None
    state = target.launch_state
    assert state.outputs == state.write_only == ["keep_ptr", "pos_ptr"]
    assert (state.fills["keep_ptr"] != ref[0]).all() and (state.fills["pos_ptr"] != ref[1]).all()
    assert torch.equal(inputs[0], x)


def test_tune_fails_every_config_that_leaves_part_of_an_int_output_unwritten_end_to_end(tmp_path: Path) -> None:
    """`kerntune tune FILE` through the worker processes: CHUNK=128 comes back wrong_result, the rest ok."""
    env = dict(os.environ, TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "kerntune", "tune", str(_kernel_file(tmp_path)), "--shape", "1000",
           "--strategy", "exhaustive", "--budget", "10", "--store", str(tmp_path / "t.db"), "--no-report",
           "--retime", "2", "--gpus", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with sqlite3.connect(tmp_path / "t.db") as con:
        rows = {json.loads(c)["CHUNK"]: s for c, s in con.execute("SELECT config_json, status FROM trials")}
    assert rows == {128: "wrong_result", 256: "ok", 512: "ok"}
