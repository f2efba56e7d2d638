"""``@kerntune.autotune`` and the persistent cache, on a CPU stand-in for a
``triton.jit`` function (a scripted kernel: ``kernel[grid](*args, **meta)``
with ``arg_names``), a real SQLite store and real wall-clock timing."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import time

import numpy as np
import pytest

import kerntune
from kerntune.errors import KerntuneError
from kerntune.store import Store

SPACE = {"params": [{"name": "BLOCK", "kind": "choice", "options": [16, 32, 64]},
                    {"name": "num_warps", "kind": "choice", "options": [2, 4]}],
         "default": {"BLOCK": 16, "num_warps": 2}}


class ScriptedKernel:
    """Behaves like a JITFunction at the call site.  BLOCK=64 is fastest but, with
    num_warps=2, writes a wrong result; BLOCK=32/num_warps=4 is the fastest correct one."""

    arg_names = ["x", "out", "n", "BLOCK"]

    def __init__(self) -> None:
        self.launches: list[dict] = []
        self.src = "def scripted_kernel(x, out, n, BLOCK): ..."

    def __getitem__(self, grid):
        def launch(x, out, n, BLOCK, num_warps):
            self.launches.append({"grid": grid, "BLOCK": BLOCK, "num_warps": num_warps})
            # Margins of 6 ms and more between real sleeps; the helper's rep_ms=200 gives each config
            # 7-60 samples, so a loaded CI machine's late wake-ups must hit most of them to reorder two
            # medians (at rep_ms=60 the 18 ms config had 4 samples, and CI once ranked it below 30 ms).
            delay = {16: 24.0, 32: 12.0, 64: 3.0}[BLOCK] + (0.0 if num_warps == 4 else 6.0)
            time.sleep(delay / 1000)
            out += x * 2.0  # in place, like a kernel that accumulates into its output
            if BLOCK == 64 and num_warps == 2:
                out += 1.0
        return launch


def _args(n: int = 8):
    return np.arange(n, dtype=float), np.zeros(n)


def _pkey(n: int) -> str:
    """The problem key of a call with ``_args(n)``: n, and the dtypes of its arrays (as Triton's key holds them)."""
    return json.dumps({"(dtypes)": {"out": "float64", "x": "float64"}, "n": n}, sort_keys=True)


def _tuned(store, **kw):
    options = dict(space=SPACE, key=["n"], strategy="exhaustive", budget=10, store=store, rep_ms=200,
                   restore_value=["out"], check=["out"])
    options.update(kw)
    return kerntune.autotune(**options)(ScriptedKernel())


def test_first_call_tunes_later_processes_read_the_cache(tmp_path) -> None:
    db = tmp_path / "k.db"
    k = _tuned(str(db))
    x, out = _args()
    k[(1,)](x, out, 8)
    assert k.tuned_keys == [_pkey(8)]
    best, _ = k.best[_pkey(8)]
    assert best == {"BLOCK": 64, "num_warps": 4}  # BLOCK=64,num_warps=2 is faster but wrong
    # in-place writes were restored between configs: the user's call ran once on fresh output
    np.testing.assert_allclose(out, x * 2.0)
    st = Store(db)
    runs = st.list_runs()
    assert len(runs) == 1
    statuses = {(t.config["BLOCK"], t.config["num_warps"]): t.status.value for _, t, _ in st.trials(runs[0].id)}
    assert statuses[(64, 2)] == "wrong_result" and len(statuses) == 6

    again = _tuned(str(db))  # a new process: same kernel, same store
    x2, out2 = _args()
    again[(1,)](x2, out2, 8)
    assert again.tuned_keys == []
    assert again.fn.launches == [{"grid": (1,), "BLOCK": 64, "num_warps": 4}]
    np.testing.assert_allclose(out2, x2 * 2.0)

    x3, out3 = _args(16)  # a new key value is tuned on its own
    again[(2,)](x3, out3, 16)
    assert again.tuned_keys == [_pkey(16)]


def test_a_changed_space_does_not_reuse_the_cache(tmp_path) -> None:
    db = str(tmp_path / "k.db")
    _tuned(db)[(1,)](*_args(), 8)
    narrower = dict(SPACE, params=[SPACE["params"][0], {"name": "num_warps", "kind": "choice", "options": [2]}])
    k = _tuned(db, space=narrower)
    k[(1,)](*_args(), 8)
    assert k.tuned_keys == [_pkey(8)]
    assert k.best[_pkey(8)][0] == {"BLOCK": 32, "num_warps": 2}


def test_unknown_argument_names_are_refused() -> None:
    with pytest.raises(KerntuneError, match="not among"):
        kerntune.autotune(space=SPACE, key=["M"])(ScriptedKernel())


def test_cache_export_emits_a_triton_config_list(tmp_path) -> None:
    db = str(tmp_path / "k.db")
    _tuned(db)[(1,)](*_args(), 8)
    _tuned(db)[(1,)](*_args(4), 4)
    out = subprocess.run([sys.executable, "-m", "kerntune", "cache", "export", "--triton", "--store", db],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    tree = ast.parse(out.stdout)  # valid Python
    assert "triton.Config({'BLOCK': 64}, num_warps=4)" in out.stdout
    assert sum(isinstance(n, ast.Call) for n in ast.walk(tree)) == 1  # both keys share one winner: deduplicated
    empty = subprocess.run([sys.executable, "-m", "kerntune", "cache", "export", "--triton", "--store",
                            str(tmp_path / "none.db")], capture_output=True, text=True, timeout=120)
    # A store that is not there is said to be missing (and not created), not shown as empty.
    assert empty.returncode == 2 and "no store at" in empty.stderr and not (tmp_path / "none.db").exists()


def test_an_unseen_shape_gets_the_nearest_tuned_config_and_is_queued(tmp_path) -> None:
    db = str(tmp_path / "k.db")
    tuner = _tuned(db)
    tuner[(1,)](*_args(8), 8)      # tuned: n=8
    tuner[(1,)](*_args(1024), 1024)  # tuned: n=1024
    store = Store(db)
    # Plant a different winner for n=1024 so the two tuned keys are told apart.
    store.conn.execute("UPDATE best_configs SET config_json=? WHERE problem_key=?",
                       (json.dumps({"BLOCK": 16, "num_warps": 4}), _pkey(1024)))
    lazy = _tuned(db, on_miss="nearest")
    lazy[(1,)](*_args(16), 16)     # log2 distance 1 from n=8, 6 from n=1024
    lazy[(1,)](*_args(512), 512)   # distance 1 from n=1024
    assert lazy.tuned_keys == [] and lazy.queued == [_pkey(16), _pkey(512)]
    assert [x["BLOCK"] for x in lazy.fn.launches] == [64, 16]
    x, out = _args(16)
    lazy.tune_queued({_pkey(16): ((1,), {"x": x, "out": out, "n": 16})})
    assert lazy.tuned_keys == [_pkey(16)] and lazy.queued == [_pkey(512)]


def test_the_budget_is_60_evaluations_a_key_or_none_under_seconds_alone() -> None:
    def kernel(x_ptr, n, BLOCK):  # noqa: ANN001, ANN202 - never launched here
        return None

    space = {"params": {"BLOCK": {"kind": "pow2", "low": 16, "high": 64}}}
    assert kerntune.autotune(space=space, key=["n"])(kernel).budget == 60
    assert kerntune.autotune(space=space, key=["n"], seconds=30)(kernel).budget is None
    assert kerntune.autotune(space=space, key=["n"], budget=7, seconds=30)(kernel).budget == 7
    assert kerntune.autotune(space=space, key=["n"], budget=None)(kernel).budget is None   # no cap, as given


class RecordingKernel:
    """Records each launch's options; BLOCK=16 (the default) raises, as a tile that does not fit would;
    BLOCK=64 writes a wrong result."""

    arg_names = ["x", "out", "n", "BLOCK"]
    src = "def recording_kernel(x, out, n, BLOCK): ..."

    def __init__(self) -> None:
        self.launches: list[dict] = []

    def __getitem__(self, grid):
        def launch(x, out, n, BLOCK, **options):
            self.launches.append({"BLOCK": BLOCK, **options})
            if BLOCK == 16:
                raise RuntimeError("out of resources: shared memory")
            out[:] = x * 2.0 + (1.0 if BLOCK == 64 else 0.0)
        return launch


BLOCKS = {"params": [{"name": "BLOCK", "kind": "choice", "options": [16, 32, 64]}], "default": {"BLOCK": 16}}


def test_a_default_that_does_not_run_leaves_the_first_config_that_runs_as_the_reference(tmp_path) -> None:
    """With ``check``, a default that raises once made every config fail (its reference was retried for
    each); now the first config that runs gives the reference, and a config that differs is still caught."""
    k = kerntune.autotune(space=BLOCKS, key=["n"], strategy="exhaustive", store=str(tmp_path / "k.db"), rep_ms=5,
                          check=["out"])(RecordingKernel())
    x, out = _args()
    k[(1,)](x, out, 8)
    assert k.best[_pkey(8)][0] == {"BLOCK": 32}
    np.testing.assert_allclose(out, x * 2.0)
    st = Store(tmp_path / "k.db")
    statuses = {t.config["BLOCK"]: t.status.value for _, t, _ in st.trials(st.list_runs()[0].id)}
    assert statuses == {16: "runtime_error", 32: "ok", 64: "wrong_result"}


def test_the_callers_launch_options_are_measured_with_every_config(tmp_path) -> None:
    """``num_warps`` given by the caller (not tuned here) goes to every launch the search measures, not
    only to the winner's (the timed kernel was another than the one launched)."""
    fn = RecordingKernel()
    k = kerntune.autotune(space=BLOCKS, key=["n"], strategy="exhaustive", store=str(tmp_path / "k.db"),
                          rep_ms=5)(fn)
    k[(1,)](*_args(), 8, num_warps=8)
    assert len(fn.launches) > 3 and all(launch.get("num_warps") == 8 for launch in fn.launches)


def test_a_tuned_parameter_passed_to_a_launch_is_refused_in_one_line(tmp_path) -> None:
    k = _tuned(str(tmp_path / "k.db"))
    with pytest.raises(KerntuneError, match="num_warps passed to a launch but tuned"):
        k[(1,)](*_args(), 8, num_warps=4)


def test_a_kernel_launched_from_another_thread_uses_a_connection_of_its_own(tmp_path) -> None:
    """autograd runs backward kernels on its own thread; a SQLite connection serves only the thread that
    opened it, so a second thread's first lookup once failed as 'corrupt or unreadable'."""
    import threading

    k = _tuned(str(tmp_path / "k.db"))
    k[(1,)](*_args(), 8)
    errors: list[BaseException] = []

    def other() -> None:
        try:
            k[(1,)](*_args(16), 16)       # a new key: tuned and stored from this thread
            fresh = _tuned(str(tmp_path / "k.db"))
            fresh[(1,)](*_args(), 8)      # a cached key read from this thread
            assert fresh.tuned_keys == []
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread's assert
            errors.append(exc)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert errors == []
    assert k.tuned_keys == [_pkey(8), _pkey(16)]


def test_nan_is_wrong_only_where_the_reference_holds_a_number() -> None:
    """A masked row's NaN in the reference is the right answer; a NaN where the reference wrote a number
    (or a poisoned output left unwritten) is not (``compare_outputs``, the decorator's and the workers')."""
    from kerntune.evaluate.triton_backend.worker import compare_outputs

    torch = pytest.importorskip("torch")
    ref = np.array([1.0, np.nan, 3.0])
    assert compare_outputs(np.array([1.0, np.nan, 3.0]), ref, None) is None
    assert compare_outputs(np.array([np.nan, np.nan, 3.0]), ref, None) == "output holds NaN"
    assert "differs" in compare_outputs(np.array([1.0, np.nan, 4.0]), ref, None)
    tref = torch.tensor([1.0, float("nan"), 3.0])
    assert compare_outputs(tref.clone(), tref, torch) is None
    assert compare_outputs(torch.tensor([float("nan")] * 3), tref, torch) == "output holds NaN"
    assert "differs" in compare_outputs(torch.tensor([1.0, float("nan"), 4.0]), tref, torch)
