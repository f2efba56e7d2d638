"""``@kerntune.autotune``'s search on a miss (``kerntune.run.decorator_search``): ``check`` outputs a config
leaves partly unwritten, a first-call search killed or interrupted midway, and ``restore_value`` /
``reset_to_zero`` naming an argument that is no tensor.  Real kernels under Triton's interpreter
(TRITON_INTERPRET=1, CPU torch), real SQLite stores and, for the kill, real child processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")
torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")

import kerntune  # noqa: E402
from kerntune.errors import KerntuneError  # noqa: E402
from kerntune.store import Store  # noqa: E402
from tests.kernel_modules import kernel_module  # noqa: E402

if os.environ.get("TRITON_INTERPRET") != "1":  # imported under a real GPU session: not what these tests are for
    pytest.skip("needs TRITON_INTERPRET=1 before triton is imported", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent

KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def scale(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * alpha, mask=m)


@triton.jit
def positive(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, (tl.load(x_ptr + offs, mask=m) > 0).to(out_ptr.dtype.element_ty), mask=m)


@triton.jit
def running_max(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(out_ptr + offs, mask=m), tl.load(x_ptr + offs, mask=m)), mask=m)
'''

BLOCKS = {"params": [{"name": "BLOCK", "kind": "choice", "options": [16, 32, 64]}], "default": {"BLOCK": 32}}


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory):
    return kernel_module(tmp_path_factory.mktemp("k") / "kt_fix_search.py", "kt_fix_search", KERNELS)


def _statuses(db: Path) -> dict[int, str]:
    st = Store(db)
    return {t.config["BLOCK"]: t.status.value for _, t, _ in st.trials(st.list_runs()[0].id)}


def test_a_config_leaving_half_a_checked_output_unwritten_fails_and_a_full_grid_config_wins(
        kernels, tmp_path: Path) -> None:
    """The reviewer's case: a grid written for BLOCK=32, so BLOCK=16 writes half the output.  Each checked
    launch wrote into the user's ``out``, which the reference had filled, so the unwritten half held the
    right values and BLOCK=16 passed (and could win, cached for good).  Now ``out`` is NaN before each
    checked launch: BLOCK=16 is a wrong result, and the user's buffer holds the winner's full output."""
    db = tmp_path / "k.db"
    k = kerntune.autotune(space=BLOCKS, key=["n"], strategy="exhaustive", store=str(db), rep_ms=1,
                          check=["out_ptr"])(kernels.scale)
    n = 256
    x, out = torch.randn(n), torch.zeros(n)
    k[(triton.cdiv(n, 32),)](x, out, n, 2.0)
    assert _statuses(db) == {16: "wrong_result", 32: "ok", 64: "ok"}
    assert k.best[k.tuned_keys[0]][0]["BLOCK"] in (32, 64)
    torch.testing.assert_close(out, x * 2.0)


@pytest.mark.parametrize("dtype", [torch.bool, torch.int32])
def test_a_bool_or_int_output_left_half_unwritten_fails_too(kernels, tmp_path: Path, dtype: torch.dtype) -> None:
    """No NaN fits a bool or integer buffer: it is filled with what differs from the reference everywhere
    (``~ref``, ``ref + 1``) before each checked launch, so the half BLOCK=16 leaves unwritten differs."""
    db = tmp_path / "k.db"
    k = kerntune.autotune(space=BLOCKS, key=["n"], strategy="exhaustive", store=str(db), rep_ms=1,
                          check=["out_ptr"])(kernels.positive)
    n = 256
    x, out = torch.randn(n), torch.zeros(n, dtype=dtype)
    k[(triton.cdiv(n, 32),)](x, out, n)
    statuses = _statuses(db)
    assert statuses[16] == "wrong_result" and statuses[32] == statuses[64] == "ok"
    assert torch.equal(out, (x > 0).to(dtype))


def test_a_checked_output_the_kernel_reads_is_left_unpoisoned_and_its_configs_still_pass(
        kernels, tmp_path: Path) -> None:
    """An output the kernel also reads (a running maximum over the user's values) is data: launched over
    NaN the default itself differs from the reference, so that output is not poisoned and every config is
    checked as before, instead of all of them failing; the user's values are back after the search."""
    db = tmp_path / "k.db"
    k = kerntune.autotune(space=BLOCKS, key=["n"], strategy="exhaustive", store=str(db), rep_ms=1,
                          check=["out_ptr"])(kernels.running_max)
    n = 100
    x, out = torch.randn(n), torch.zeros(n)
    k[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
    assert set(_statuses(db).values()) == {"ok"}
    torch.testing.assert_close(out, torch.clamp(x, min=0.0))


@pytest.mark.parametrize("option, arg, says", [
    ("restore_value", "n", "autotune: restore_value names n, of type int: it must name a tensor argument"),
    ("reset_to_zero", "alpha", "autotune: reset_to_zero names alpha, of type float: it must name a tensor argument"),
])
def test_restore_value_or_reset_to_zero_naming_a_non_tensor_is_refused_in_one_line(
        kernels, tmp_path: Path, option: str, arg: str, says: str) -> None:
    """An int or float argument named there failed at the first launch with a raw AttributeError
    (``'int' object has no attribute '__setitem__'``); now one line names the option, the argument and
    its type, before any run is stored."""
    db = tmp_path / "k.db"
    k = kerntune.autotune(space=BLOCKS, key=["n"], strategy="exhaustive", store=str(db), rep_ms=1,
                          **{option: [arg]})(kernels.scale)
    x, out = torch.randn(64), torch.zeros(64)
    with pytest.raises(KerntuneError) as info:
        k[lambda meta: (triton.cdiv(64, meta["BLOCK"]),)](x, out, 64, 2.0)
    assert str(info.value) == says
    assert Store(db).list_runs() == []


CHILD = '''
import os, sys, time
os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, sys.argv[1])
import torch, triton, kerntune
import kt_kill_search as kmod

SPACE = {"params": [{"name": "BLOCK", "kind": "choice", "options": [16, 32, 64, 128]},
                    {"name": "num_warps", "kind": "choice", "options": [1, 2, 4, 8]}],
         "default": {"BLOCK": 32, "num_warps": 4}}
db, log, kill_after, strategy = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
timed = [0]


def timer(fn):
    timed[0] += 1
    if kill_after and timed[0] > kill_after:
        os._exit(9)  # killed mid-search (the OOM killer, a job limit, a config that takes the process down)
    t = time.perf_counter(); fn(); return [(time.perf_counter() - t) * 1e3]


def pre_hook(kwargs, reset_only=False):
    if reset_only:  # the call after the search, before the winner's launch: nothing measured
        return
    with open(log, "a") as f:
        f.write(f"{kwargs['BLOCK']},{kwargs['num_warps']}\\n")


k = kerntune.autotune(space=SPACE, key=["n"], strategy=strategy, store=db, timer=timer, budget=16,
                      pre_hook=pre_hook)(kmod.scale)
x, out = torch.ones(100), torch.zeros(100)
k[lambda m: (triton.cdiv(100, m["BLOCK"]),)](x, out, 100, 2.0)
assert torch.equal(out, x * 2.0)
'''


def _launched(log: Path) -> list[tuple[int, int]]:
    return [tuple(map(int, line.split(","))) for line in log.read_text().split()] if log.exists() else []


@pytest.mark.parametrize("strategy", ["exhaustive", "random"])
def test_a_killed_first_call_search_is_resumed_by_the_next_process_measuring_nothing_twice(
        tmp_path: Path, strategy: str) -> None:
    """A process killed mid-search left its run ``running`` with no trial stored (the batch was committed
    only when it ended) and the next process started a new run, measuring everything again.  Now each
    trial is committed as it is measured, and the next process resumes the killed run: what it stored is
    not launched again, and the one run ends ``done`` with the whole budget."""
    (tmp_path / "kt_kill_search.py").write_text(KERNELS)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    db = tmp_path / "k.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def child(log: Path, kill_after: int) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(script), str(tmp_path), str(db), str(log), str(kill_after),
                               strategy], env=env, capture_output=True, text=True, timeout=300)

    first = child(tmp_path / "first.log", 10)
    assert first.returncode == 9, first.stderr[-2000:]
    st = Store(db)
    [killed] = st.list_runs()
    stored = {(t.config["BLOCK"], t.config["num_warps"]) for _, t, _ in st.trials(killed.id)}
    assert killed.status == "running" and len(stored) == 10
    st.close()

    second = child(tmp_path / "second.log", 0)
    assert second.returncode == 0, second.stderr[-2000:]
    again = _launched(tmp_path / "second.log")
    assert again and not stored & set(again), "configs the killed process stored were launched again"
    st = Store(db)
    [run] = st.list_runs()
    assert run.id == killed.id and run.status == "done" and len(st.trials(run.id)) == 16


def test_an_interrupted_search_is_resumed_by_the_next_call_and_other_settings_start_their_own_run(
        kernels, tmp_path: Path) -> None:
    """Ctrl-C mid-search leaves the run ``interrupted``: the next call with the same settings takes it up
    where it stopped.  A decorator with another budget is another search: it starts a run of its own
    and leaves the interrupted one alone."""
    db = tmp_path / "k.db"
    space = {"params": [{"name": "BLOCK", "kind": "choice", "options": [16, 32, 64, 128]}], "default": {"BLOCK": 32}}
    timed: list[int] = []
    stop_at = [3]

    def timer(fn):
        timed.append(1)
        if stop_at[0] and len(timed) > stop_at[0]:
            raise KeyboardInterrupt
        t = time.perf_counter()
        fn()
        return [(time.perf_counter() - t) * 1e3]

    def tuned(budget: int):
        return kerntune.autotune(space=space, key=["n"], strategy="exhaustive", store=str(db), timer=timer,
                                 budget=budget)(kernels.scale)

    x, out = torch.randn(100), torch.zeros(100)
    grid = lambda meta: (triton.cdiv(100, meta["BLOCK"]),)  # noqa: E731
    with pytest.raises(KeyboardInterrupt):
        tuned(4)[grid](x, out, 100, 2.0)
    st = Store(db)
    [interrupted] = st.list_runs()
    assert interrupted.status == "interrupted" and len(st.trials(interrupted.id)) == 3

    stop_at[0] = 0
    timed.clear()
    tuned(3)[grid](x, out, 100, 2.0)                  # another budget: a run of its own
    assert len(timed) == 3 and len(st.list_runs()) == 2
    assert st.get_run(interrupted.id).status == "interrupted"

    timed.clear()
    k = tuned(4)                                      # the interrupted run's settings: it is resumed
    k[grid](x, out, 100, 2.0)
    assert len(timed) == 1 and len(st.list_runs()) == 2
    assert st.get_run(interrupted.id).status == "done" and len(st.trials(interrupted.id)) == 4
    assert [r["run_id"] for r in st.conn.execute("SELECT run_id FROM best_configs")] == [interrupted.id]
    torch.testing.assert_close(out, x * 2.0)


READ_AND_WRITE = '''
import triton
import triton.language as tl


@triton.jit
def max_and_scale(x_ptr, m_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    msk = offs < n
    x = tl.load(x_ptr + offs, mask=msk)
    tl.store(m_ptr + offs, tl.maximum(tl.load(m_ptr + offs, mask=msk), x), mask=msk)
    tl.store(out_ptr + offs, x * 2.0, mask=msk)
'''


@pytest.mark.parametrize("check", [["out_ptr", "m_ptr"], ["m_ptr", "out_ptr"]])
def test_a_written_only_output_is_poisoned_whatever_the_order_of_check(tmp_path: Path, check: list[str]) -> None:
    """``m`` is read and written (a running maximum), ``out`` only written.  Each poison probe ran over what
    the previous probe left: with ``check=['m_ptr', 'out_ptr']`` ``m`` still held NaN from its own probe when
    ``out`` was probed, so ``out`` was never poisoned and BLOCK=16, on a grid written for BLOCK=32, left half
    of ``out`` unwritten and passed.  Each probe now starts from the user's values, in either order."""
    mod = kernel_module(tmp_path / "kt_fix_order.py", "kt_fix_order", READ_AND_WRITE)
    db = tmp_path / "k.db"
    k = kerntune.autotune(space=BLOCKS, key=["n"], strategy="exhaustive", store=str(db), rep_ms=1,
                          check=check)(mod.max_and_scale)
    n = 256
    x, m, out = torch.randn(n), torch.zeros(n), torch.zeros(n)
    k[(triton.cdiv(n, 32),)](x, m, out, n)
    assert _statuses(db) == {16: "wrong_result", 32: "ok", 64: "ok"}
    assert k.best[k.tuned_keys[0]][0]["BLOCK"] in (32, 64)
    torch.testing.assert_close(out, x * 2.0)
