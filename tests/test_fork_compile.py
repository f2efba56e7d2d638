"""kerntune.evaluate.triton_backend.fork_compile: real forks, Triton's real AsyncCompileMode.

A "launch" here does what ``JITFunction.run(warmup=True)`` does under an active
AsyncCompileMode: it submits its compile to the mode and gets a FutureKernel back.  The compile
job stands in for ``triton.compile`` (whose first run fills Triton's disk cache and whose second is
a cache hit): it writes a marker file in the child, and in the parent returns what the child left.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "win32", reason="POSIX fork")


@pytest.fixture(autouse=True)
def _triton() -> None:
    """Imported per test, not at collection: other test modules set TRITON_INTERPRET before Triton's
    first import, and Triton reads it once."""
    pytest.importorskip("triton")


def _launch(key: str, job, finalized: dict):
    from triton.runtime import _async_compile

    mode = _async_compile.active_mode.get()
    assert mode is not None, "compile_batch must run launches inside an AsyncCompileMode"
    return mode.submit(key, job, lambda kernel: finalized.__setitem__(key, kernel))


def test_compiles_run_in_parallel_children_then_here_as_cache_hits(tmp_path: Path) -> None:
    from kerntune.evaluate.triton_backend.fork_compile import compile_batch

    finalized: dict = {}

    def job(i: int):
        def compile_once() -> str:
            marker = tmp_path / f"{i}.done"
            if marker.exists():  # the parent: a "cache hit" on what the child compiled
                return f"kernel {i} from pid {marker.read_text()}"
            time.sleep(0.6)  # the child: the slow compile
            marker.write_text(str(os.getpid()))
            return "unused"
        return compile_once

    t0 = time.perf_counter()
    errors = compile_batch([lambda i=i: _launch(f"k{i}", job(i), finalized) for i in range(4)], workers=4)
    wall = time.perf_counter() - t0
    assert errors == [None] * 4
    assert wall < 4 * 0.6 * 0.75, f"four 0.6 s compiles on 4 children took {wall:.2f} s: not parallel"
    assert sorted(finalized) == ["k0", "k1", "k2", "k3"]  # Triton's finalize saw every kernel
    pids = {v.rsplit(" ", 1)[1] for v in finalized.values()}
    assert str(os.getpid()) not in pids and len(pids) == 4  # each compiled in its own child


def test_a_failing_compile_reports_its_own_error_and_spares_the_others(tmp_path: Path) -> None:
    from kerntune.evaluate.triton_backend.fork_compile import compile_batch

    def bad() -> str:
        raise ValueError("shared memory 300000 > 232448")

    finalized: dict = {}
    launches = [lambda: _launch("ok", lambda: "kernel", finalized), lambda: _launch("bad", bad, finalized),
                lambda: (_ for _ in ()).throw(TypeError("bad argument before any compile"))]
    errors = compile_batch(launches, workers=2)
    assert errors[0] is None and finalized == {"ok": "kernel"}
    assert isinstance(errors[1], ValueError) and "shared memory" in str(errors[1])
    assert isinstance(errors[2], TypeError)


def test_a_child_over_its_time_is_killed_and_its_compile_is_a_timeout_not_run_here(tmp_path: Path) -> None:
    """The compile of a child killed for overrunning ``timeout_s`` is not run again here, where no
    limit holds (a 15-s compile under a 2-s limit used to come back after 17 s as a success): its
    launch fails with CompileTimeout, which the callers' ``classify`` calls ``compile_timeout``; a
    child that failed (rather than overran) still has its compile done here."""
    from kerntune.evaluate.triton_backend import fork_compile
    from kerntune.evaluate.triton_backend.worker import classify

    here = os.getpid()
    finalized: dict = {}

    def hang() -> str:
        time.sleep(5)  # in the child and, were it run again, here
        return "compiled here"

    def fails_in_the_child() -> str:
        if os.getpid() != here:
            raise RuntimeError("the child's compile failed")
        return "compiled here"

    for on_ready in (None, lambda i: None):
        finalized.clear()
        t0 = time.perf_counter()
        errors = fork_compile.compile_batch([lambda: _launch("h", hang, finalized),
                                             lambda: _launch("f", fails_in_the_child, finalized)],
                                            workers=2, timeout_s=0.5, on_ready=on_ready)
        assert time.perf_counter() - t0 < 3, "the overrun compile was run again here"
        assert isinstance(errors[0], fork_compile.CompileTimeout) and classify(errors[0])[0] == "compile_timeout"
        assert errors[1] is None and finalized == {"f": "compiled here"}


def test_threads_mode_compiles_here_and_reports_errors_the_same_way() -> None:
    from kerntune.evaluate.triton_backend.fork_compile import compile_batch

    def bad() -> str:
        raise ValueError("out of registers")

    finalized: dict = {}
    errors = compile_batch([lambda: _launch("ok", lambda: f"kernel from pid {os.getpid()}", finalized),
                            lambda: _launch("bad", bad, finalized)], workers=2, threads=True)
    assert errors[0] is None and isinstance(errors[1], ValueError)
    assert finalized == {"ok": f"kernel from pid {os.getpid()}"}  # a thread of this process compiled it


def _fake_launcher(monkeypatch, on_build) -> None:
    """Triton's active driver, as the prebuild reads it, with a launcher class named like the CUDA
    one that calls ``on_build(src, metadata)`` instead of running the C compiler."""
    import types

    from triton.runtime import driver

    class CudaLauncher:  # the name the prebuild checks
        def __init__(self, src, metadata):
            on_build(src, metadata)

    monkeypatch.setattr(driver, "_active", types.SimpleNamespace(launcher_cls=CudaLauncher), raising=False)
    monkeypatch.setattr(type(driver), "active", property(lambda self: self._active), raising=False)


def _source(**signature: str):
    """An ASTSource's fields that the launcher reads: signature, constants, the argument names."""
    import types

    return types.SimpleNamespace(signature=signature, constants={}, fn=types.SimpleNamespace(arg_names=list(signature)))


def _triton_like_compile_fn(src):
    """A closure shaped like the one Triton's JIT hands to AsyncCompileMode (it holds ``src``)."""
    target = options = env_vars = None

    def async_compile():
        return (src, target, options, env_vars)
    return async_compile


def test_the_launcher_prebuild_takes_the_kernels_source_from_tritons_compile_closure(monkeypatch) -> None:
    from kerntune.evaluate.triton_backend import fork_compile

    built = []
    _fake_launcher(monkeypatch, lambda src, metadata: built.append((src, metadata.num_ctas, metadata.tensordesc_meta)))
    src = _source(x="*fp16", n="i32", BLOCK="constexpr")
    src.constants = {(2,): 64}
    job = fork_compile._launcher_prebuild(_triton_like_compile_fn(src))
    assert job is not None
    job()
    assert built == [(src, 1, None)]
    # tensor-descriptor kernels (launcher depends on the compile) and closures without a source: no prebuild
    tdesc = _source(d="tensordesc<fp16[64, 64]>")
    assert fork_compile._launcher_prebuild(_triton_like_compile_fn(tdesc)) is None
    assert fork_compile._launcher_prebuild(lambda: "kernel") is None


def test_the_launcher_is_built_in_its_own_child_beside_the_compiles(tmp_path: Path, monkeypatch) -> None:
    """One more child builds the launcher (here: writes a marker) while the compiles run, and it
    takes no compile worker's place: with one worker the two compiles still run one at a time."""
    from kerntune.evaluate.triton_backend.fork_compile import compile_batch

    _fake_launcher(monkeypatch, lambda src, metadata: (tmp_path / "launcher").write_text(str(os.getpid())))
    src = _source(x="*fp16")

    def job(i: int):
        target = options = env_vars = None

        def async_compile():  # shaped like Triton's: a closure over the kernel's source
            _ = (src, target, options, env_vars)
            marker = tmp_path / f"{i}.span"
            if marker.exists():
                return "kernel"
            t0 = time.time()
            time.sleep(0.4)
            marker.write_text(f"{t0} {time.time()}")
            return "unused"
        return async_compile

    finalized: dict = {}
    errors = compile_batch([lambda i=i: _launch(f"k{i}", job(i), finalized) for i in range(2)], workers=1)
    assert errors == [None, None]
    assert (tmp_path / "launcher").read_text() not in ("", str(os.getpid()))  # built, in a child
    (a0, a1), (b0, b1) = ([float(x) for x in (tmp_path / f"{i}.span").read_text().split()] for i in range(2))
    assert a1 <= b0 + 0.05 or b1 <= a0 + 0.05, "two compiles ran at once on one worker"


def test_on_ready_runs_each_launch_as_its_compile_lands_while_others_still_compile(tmp_path: Path) -> None:
    """The in-place search times a config as soon as its kernel is compiled: ``on_ready(i)`` runs here,
    after launch i's kernel was finalized, with Triton's async mode off, while later compiles go on."""
    from triton.runtime import _async_compile

    from kerntune.evaluate.triton_backend.fork_compile import compile_batch

    finalized: dict = {}
    calls: list[tuple[int, float, bool, bool]] = []

    def job(i: int):
        def compile_once() -> str:
            marker = tmp_path / f"{i}.done"
            if marker.exists():
                return f"kernel {i}"
            time.sleep(0.4)
            marker.write_text("x")
            return "unused"
        return compile_once

    def ready(i: int) -> None:
        calls.append((i, time.perf_counter(), f"k{i}" in finalized, _async_compile.active_mode.get() is None))

    idle_modes: list[bool] = []
    t0 = time.perf_counter()
    errors = compile_batch([lambda i=i: _launch(f"k{i}", job(i), finalized) for i in range(6)], workers=2,
                           on_ready=ready, idle=lambda: idle_modes.append(_async_compile.active_mode.get() is None))
    assert idle_modes and all(idle_modes), "idle ran with the batch's async mode on"
    wall = time.perf_counter() - t0
    assert errors == [None] * 6
    assert sorted(c[0] for c in calls) == list(range(6))
    assert all(c[2] for c in calls), "on_ready ran before its kernel was finalized"
    assert all(c[3] for c in calls), "on_ready ran with the batch's async mode on"
    first = min(c[1] for c in calls) - t0
    assert first < wall - 0.6, f"first on_ready at {first:.2f} s of {wall:.2f} s: no overlap with the later compiles"


def test_on_ready_skips_failed_compiles_and_the_caller_gets_their_errors(tmp_path: Path) -> None:
    from kerntune.evaluate.triton_backend.fork_compile import compile_batch

    def bad() -> str:
        raise ValueError("out of shared memory")

    finalized: dict = {}
    seen: list[int] = []
    errors = compile_batch([lambda: _launch("ok", lambda: "kernel", finalized), lambda: _launch("bad", bad, finalized)],
                           workers=2, on_ready=seen.append)
    assert seen == [0] and errors[0] is None and isinstance(errors[1], ValueError)
