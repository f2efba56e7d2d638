"""The zeroed relaunch for bool and integer outputs (``output_check.ZeroedRelaunch``) and the GPU lock
(``worker_life.gpu_turn``), on CPU launchers in real worker processes: the default config's launches that
find what may be zeroed are the default's, never a config's; a bool buffer returned as a view at an offset
or as a converted copy is zeroed too; a custom op's own allocations start zeroed; a lock file that cannot
be locked (NFS) leaves the workers running."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kerntune.evaluate.trial import Status, Trial
from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator

torch = pytest.importorskip("torch")


def _evaluate(path: Path, configs: list[dict[str, object]], timeout: float = 60.0) -> tuple[list, TritonEvaluator]:
    ev = TritonEvaluator(path, (4096,), compile_workers=1, compile_timeout=60.0, bench_timeout=timeout, rep_ms=2,
                         memory_limit_mb=0)
    try:
        return ev.evaluate(configs), ev
    finally:
        ev.close()


# A bool mask written into a buffer make_inputs leaves uninitialised (right everywhere True: x from rand);
# the default config ("bad") kills or hangs the benchmark worker, "half" writes half the mask.  OWN: the
# file has a reference().
CRASHING_DEFAULT = '''
import os, signal, sys, time
import torch
from kerntune.space import Choice, Space
name = "crashing_default"
space = Space([Choice("mode", options=("bad", "good", "good2", "half"))], default={"mode": "bad"})
BENCH = "--compile-only" not in sys.argv
def make_inputs(shape):
    torch.manual_seed(0)
    return (torch.rand(shape[0]), torch.empty(shape[0], dtype=torch.bool))
if OWN:
    def reference(inputs):
        return (inputs[0] >= 0,)
def launch(config, inputs):
    x, mask = inputs
    if config["mode"] == "bad" and BENCH:
        if HOW == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        time.sleep(3600)
    hi = x.numel() // 2 if config["mode"] == "half" else x.numel()
    mask[:hi] = x[:hi] >= 0
    return (mask,)
'''


@pytest.mark.parametrize("own,how", [(True, "segv"), (False, "segv"), (True, "hang"), (False, "hang")],
                         ids=["own_reference_segv", "default_reference_segv", "own_reference_hang",
                              "default_reference_hang"])
def test_right_bool_configs_pass_where_the_default_config_crashes_or_hangs(tmp_path: Path, own: bool,
                                                                            how: str, caplog) -> None:
    """The default's launches that find which bool buffers may be zeroed ran inside each config's own task,
    after the default had failed as the reference (or never ran as one, the file having ``reference()``):
    every right config with a bool output was failed with the default's crash or hang.  Now they run as
    the reference's (the default is blamed, and skipped from then on), and where the default failed the
    first config to pass is trusted instead: a config that leaves half its mask unwritten still fails."""
    path = tmp_path / "crashing_default.py"
    path.write_text(f"OWN = {own!r}\nHOW = {how!r}\n" + CRASHING_DEFAULT)
    modes = ["good", "half", "good2", "half"]
    # the hang costs the bench timeout once; every other task here takes milliseconds on a CPU-only machine.
    # Where CUDA is present, each fresh worker's first task also creates the CUDA context (these inputs are
    # CPU tensors, so start-up did not): more than 3 s on an H200, where 3 s timed out every config
    trials, ev = _evaluate(path, [{"mode": m} for m in modes], timeout=15.0 if torch.cuda.is_available() else 3.0)
    got = [(m, t.status, t.error) for m, t in zip(modes, trials)]
    assert [t.status for t in trials] == [Status.OK, Status.WRONG_RESULT, Status.OK, Status.WRONG_RESULT], got
    assert "left unwritten" in trials[1].error and "2048 of 4096" in trials[1].error, got
    assert ev._default_failed is not None  # the default was blamed, not the configs
    said = " ".join(r.getMessage() for r in caplog.records)
    # a file with reference() is still checked against it: the warning said it had none
    assert ("still checked against reference()" in said) == own and ("has no reference()" in said) == (not own)


# One uninitialised bool workspace of two rows; each "view", "int" or "float" mode writes a row (all of it,
# or half) and returns it as a view at an offset (row 1), or row 0 converted to int32 or to float.  The "op"
# modes return a bool mask allocated inside a torch.library custom op's implementation, all of it or half
# written (the workspace untouched).
BOOL_OUTPUTS = '''
import torch
from kerntune.space import Choice, Space
name = "bool_outputs"
RETURNS = {"view": lambda ws: ws[1], "int": lambda ws: ws[0].to(torch.int32), "float": lambda ws: ws[0].float()}
space = Space([Choice("mode", options=tuple(f"{w}_{r}" for r in (*RETURNS, "op") for w in ("full", "half")))],
              default={"mode": "full_view"})
@torch.library.custom_op("kerntune_test::mask_upto", mutates_args=())
def mask_upto(x: torch.Tensor, hi: int) -> torch.Tensor:
    out = torch.empty(x.numel(), dtype=torch.bool)
    out[:hi] = x[:hi] >= 0
    return out
def make_inputs(shape):
    torch.manual_seed(0)
    n = shape[0]
    return (torch.rand(n), torch.empty(2, n, dtype=torch.bool))
def launch(config, inputs):
    x, ws = inputs
    how, ret = config["mode"].split("_")
    n = x.numel()
    hi = n // 2 if how == "half" else n
    if ret == "op":
        return (mask_upto(x, hi),)
    ws[1 if ret == "view" else 0, :hi] = x[:hi] >= 0
    return (RETURNS[ret](ws),)
'''


@pytest.fixture(scope="module")
def bool_outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Trial]:
    """Every mode of ``BOOL_OUTPUTS`` evaluated in one evaluator (two workers that import torch), by mode:
    the tests of a returned view or converted copy and of a custom op's allocation check their own."""
    path = tmp_path_factory.mktemp("bool_outputs") / "bool_outputs.py"
    path.write_text(BOOL_OUTPUTS)
    modes = ["full_view", "half_view", "full_int", "half_int", "full_float", "half_float", "full_op", "half_op"]
    trials, _ = _evaluate(path, [{"mode": m} for m in modes])
    return dict(zip(modes, trials))


def test_a_bool_buffer_returned_as_a_view_or_a_converted_copy_left_half_unwritten_fails(bool_outputs) -> None:
    """A buffer of make_inputs was zeroed for the second launch only where the launch returned it at the
    same pointer: returned as a view at an offset, or converted (``.to(int32)``, ``.float()``), half of it
    left unwritten passed.  Now every uninitialised bool or integer buffer the default config lets be
    zeroed is zeroed, returned or not, and a view of an input is matched by its storage."""
    modes = ["full_view", "half_view", "full_int", "half_int", "full_float", "half_float"]
    trials = [bool_outputs[m] for m in modes]
    got = [(m, t.status, t.error) for m, t in zip(modes, trials)]
    assert [t.status for t in trials] == [Status.OK, Status.WRONG_RESULT] * 3, got
    assert all("left unwritten" in t.error for t in trials[1::2]), got


def test_a_bool_output_a_custom_op_allocates_left_half_unwritten_fails(bool_outputs) -> None:
    """The dispatch mode that zeroes the launch's own bool allocations saw only the custom op, and its
    implementation ran with the mode off: its ``torch.empty`` kept the True fill, so half a mask passed.
    Now the op's implementation runs with the mode on; what the op writes itself still shows (``full``)."""
    trials = [bool_outputs["full_op"], bool_outputs["half_op"]]
    got = [(t.status, t.error) for t in trials]
    assert [t.status for t in trials] == [Status.OK, Status.WRONG_RESULT], got
    assert "left unwritten" in trials[1].error and "2048 of 4096" in trials[1].error, got


# flock as on an NFS mount ("ebadf": emulated with fcntl locks, an exclusive lock needs a file opened for
# writing) or where locks are refused ("enolck"), installed in every worker by sitecustomize.
FLOCK = '''
import errno, fcntl, os
_real = fcntl.flock
def flock(fd, op):
    if HOW == "enolck":
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))
    if op & fcntl.LOCK_EX and (fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE) == os.O_RDONLY:
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))
    return _real(fd, op)
fcntl.flock = flock
'''

SIMPLE = '''
from kerntune.space import Choice, Space
name = "simple"
space = Space([Choice("n", options=(1, 2, 3))], default={"n": 1})
def make_inputs(shape):
    return ([1.0] * shape[0],)
def reference(inputs):
    return [sum(inputs[0])]
def launch(config, inputs):
    return [sum(inputs[0])]
'''


def _flock_site(tmp_path: Path, how: str) -> str:
    """A PYTHONPATH whose sitecustomize makes flock behave as ``how``."""
    site = tmp_path / f"site_{how}"
    site.mkdir()
    (site / "sitecustomize.py").write_text(f"HOW = {how!r}\n" + FLOCK)
    return os.pathsep.join([str(site)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))


@pytest.mark.parametrize("how", ["ebadf", "enolck"])
def test_workers_measure_where_the_gpu_lock_file_cannot_be_flocked(tmp_path: Path, how: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The lock file was opened read-only and only BlockingIOError was caught: on NFS (EBADF for an
    exclusive lock on a read-only file) or wherever flock fails otherwise (ENOLCK), every benchmark worker
    died at start-up.  Now it is opened for writing, and a lock that cannot be taken is said once on the
    worker's stderr and the worker goes on without it."""
    monkeypatch.setenv("PYTHONPATH", _flock_site(tmp_path, how))
    path = tmp_path / "simple.py"
    path.write_text(SIMPLE)
    ev = TritonEvaluator(path, (100,), compile_workers=1, compile_timeout=60.0, bench_timeout=60.0, rep_ms=2,
                         memory_limit_mb=0)
    try:
        trials = ev.evaluate([{"n": n} for n in (1, 2, 3)])
        said = ev.benchers[0].stderr_tail(10000)
    finally:
        ev.close()
    assert [t.status for t in trials] == [Status.OK] * 3, [(t.status, t.error) for t in trials]
    assert said.count("cannot be taken") == (1 if how == "enolck" else 0), said


HOLD = '''
import sys, time
from kerntune.evaluate.triton_backend.worker_life import gpu_turn
with gpu_turn(sys.argv[1], exclusive=True, say=print):
    print("held", flush=True)
    time.sleep(60)
'''


def test_the_exclusive_gpu_lock_is_really_held_where_flock_needs_a_file_open_for_writing(tmp_path: Path) -> None:
    """Opened read-only, the exclusive lock of a benchmark worker failed with EBADF on NFS (and the worker
    died): now the file is opened for writing and the lock is held, so a compile worker's start-up waits."""
    import fcntl

    lock = tmp_path / "gpu0.lock"
    lock.touch()
    env = {**os.environ, "PYTHONPATH": _flock_site(tmp_path, "ebadf")}
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(lock)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "held", (line, proc.stderr.read() if proc.poll() is not None else "")
        fd = os.open(lock, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    finally:
        proc.kill()
        proc.wait()
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # free once the holder is gone
    finally:
        os.close(fd)
