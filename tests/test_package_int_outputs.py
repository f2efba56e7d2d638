"""A package kernel's bool and integer outputs are poisoned before a checked launch, as its float ones are.

``PackageTarget.before_check`` filled the outputs the caught launch writes whole with NaN, so that a
config covering only part of them fails the check, but only float outputs: a mask or an index output
kept the values the buffer held (the package's own fill, or the previous call's output in a block the
allocator handed back), which are the right ones wherever they match, and a config leaving part of it
unwritten passed.  Now such an output is poisoned with its right values each changed (negated, lowest
bit flipped), and the package call's first result is held while the caught call runs, so that its
outputs cannot get the previous call's block back with the very values they are about to be given.

None of kerntune's adapters tunes a kernel with a bool or integer output, so a package-form kernel file
stands in, the one the GPU checks run (benchmarks/gpu_checks/package_int_outputs.py): a Triton kernel
(run by Triton's interpreter on the CPU here, TRITON_INTERPRET=1 set before triton is imported) that
marks a padded batch's real tokens (bool) and gives each its index (-1 for padding, int64), launched by
its "package" with CHUNK=256 elements a program over a grid it sizes itself; CHUNK=128 leaves the second
half of both outputs unwritten, the padding, whose right values are exactly what the package's buffers
start with.
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

# The kernel file run.sh checks on a GPU (benchmarks/gpu_checks/package_int_outputs.py), its buffers
# picked by ALLOC.
KERNEL_FILE = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_checks" / "package_int_outputs.py"


def _kernel_file(tmp_path: Path, alloc: str = "full") -> Path:
    path = tmp_path / f"mark_{alloc}.py"
    text = KERNEL_FILE.read_text()
    assert 'ALLOC = "empty"' in text
    path.write_text(text.replace('ALLOC = "empty"', f'ALLOC = "{alloc}"'))
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
