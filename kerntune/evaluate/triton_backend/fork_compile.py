"""Compile a batch of Triton configs in parallel inside a running program (``kerntune.retune``).

Why forked children.  ``kerntune.retune`` tunes a kernel at its first launch, inside the user's
process, where CUDA is already initialised and no worker pool exists (starting one costs 15-30 s
of imports on an H100 host).  Triton >= 3.4 can hand its compiles to an executor
(``triton.AsyncCompileMode``), but on threads they overlap only in part (Triton's Python front end
holds the GIL): on an H100 host (Triton 3.6, 8 at a time) the FLA lists of 6, 9, 12 and 25 configs
compiled in 2.4-3.3, 1.3-1.7, 3.1-3.9 and 3.4-4.3 s on threads against 1.9-2.0, 0.8-1.0,
2.0-2.4 and 2.5-2.8 s in forked children, and FLA's whole first forward took 17.5-21.2 s against
14.8-15.9 s (benchmarks/results/real_kernels/h100/inplace_vs_autotune_modes.json).

So each compile runs twice: first in a child forked from this process (which inherits the kernel,
its arguments' specialisation and Triton's state, needs no pickling, and touches no CUDA: with the
target given, ``triton.compile`` is pure CPU work ending in ptxas), all children at once, filling
Triton's on-disk cache; then here, in the main thread, where the same compile is a cache hit and
yields the kernel object: as each child ends when the caller times configs meanwhile (``on_ready``),
else once all have ended.  A child that fails changes nothing: the compile here then does the work
itself and raises the real error.  A child that overruns ``timeout_s`` is killed and its compile is
not run again here (it would run with no limit at all): its launches fail with ``CompileTimeout``,
which ``worker.classify`` reports as ``compile_timeout``.  Forks happen from the main thread
while no compile runs in this process, so no child inherits a lock held mid-compile.

One more child builds the kernel's launcher while the compiles run.  Triton builds a small C
launcher per kernel signature (with the system C compiler) at a kernel's first launch, not at its
compile, and caches it on disk; in a fresh cache that build was 0.25-0.37 s of a 3-config FLA
list's 1.1-1.4 s in-place search on an H100 (the ``first_launch_s`` phase of kerntune.retune),
all of it after the compiles.  The launcher depends on the signature only, which every config of
a list shares, so one child builds it from the first compile's source (``_launcher_prebuild``),
and the first launch here finds it cached.  Anything unexpected (another Triton, another backend)
skips the prebuild: the launch builds the launcher itself, as before.

POSIX only (``os.fork``); elsewhere, or with ``TRITON_INTERPRET=1``, callers compile serially.
``threads=True`` hands the same compiles to a thread pool instead (``KERNTUNE_AUTOTUNE_COMPILE=threads``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import signal
import time
from typing import Any, Callable, Sequence


class CompileTimeout(TimeoutError):
    """A compile that overran its time in a forked child (classified ``compile_timeout``)."""


class _Recorder(concurrent.futures.Executor):
    """An executor that only records what Triton asks it to run; ``run_batch`` runs it."""

    def __init__(self) -> None:
        self.jobs: list[tuple[Callable[[], Any], concurrent.futures.Future[Any]]] = []
        self.compile_fns: list[Callable[..., Any]] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.jobs.append((lambda: fn(*args, **kwargs), future))
        self.compile_fns.append(fn)
        return future


def _launcher_prebuild(compile_fn: Callable[..., Any]) -> Callable[[], Any] | None:
    """A job that builds (and caches on disk) the launcher of the kernel ``compile_fn`` compiles,
    or None where that cannot be done safely.  ``compile_fn`` is the closure Triton's JIT hands to
    ``AsyncCompileMode`` (Triton 3.4-3.6: it holds the kernel's ``src``, an ``ASTSource``); the
    launcher class reads the source's signature and constants, and of the compiled metadata only
    the fields below (tensor-descriptor kernels are skipped: their launcher depends on the compile).
    Pure CPU work: it runs in a forked child, which must not touch CUDA."""
    try:
        names = compile_fn.__code__.co_freevars
        src = compile_fn.__closure__[names.index("src")].cell_contents  # type: ignore[index]
        signature = dict(src.signature)
        _ = (src.constants, src.fn.arg_names)
        from triton.runtime import driver

        launcher_cls = driver.active.launcher_cls
    except Exception:  # noqa: BLE001 - not the Triton this was written for: no prebuild
        return None
    if launcher_cls.__name__ != "CudaLauncher" or any(str(t).startswith("tensordesc") for t in signature.values()):
        return None
    import types

    meta = types.SimpleNamespace(num_ctas=1, global_scratch_size=0, global_scratch_align=1, profile_scratch_size=0,
                                 profile_scratch_align=1, launch_cooperative_grid=False, launch_pdl=False,
                                 tensordesc_meta=None)
    return lambda: launcher_cls(src, meta)


def _fork(job: Callable[[], Any]) -> int:
    pid = os.fork()
    if pid == 0:  # the child: compile, leave the result in Triton's cache, exit without cleanup
        code = 1
        try:
            job()
            code = 0
        finally:
            os._exit(code)
    return pid


def _reap(running: dict[int, float], timeout_s: float) -> list[tuple[int, bool]]:
    """The children that have ended since the last look, each with True where it was killed for
    overrunning ``timeout_s``, without waiting."""
    ended = []
    for pid, started in list(running.items()):
        done, _ = os.waitpid(pid, os.WNOHANG)
        killed = False
        if not done and time.monotonic() - started > timeout_s:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            done, killed = pid, True
        if done:
            running.pop(pid)
            ended.append((pid, killed))
    return ended


def compile_batch(launches: Sequence[Callable[[], Any]], workers: int, timeout_s: float = 300.0,
                  idle: Callable[[], None] | None = None, threads: bool = False,
                  phases: dict[str, float] | None = None,
                  on_ready: Callable[[int], None] | None = None) -> list[BaseException | None]:
    """Run every ``launch`` (a ``fn.run(..., warmup=True)`` call) with its compile done in
    parallel in forked children (``threads``: on a thread pool instead); returns the error of
    each, or None.  ``idle`` runs while the children work and nothing else is to be done
    (``kerntune.retune`` times a compiled config with it, or keeps the GPU loaded); it and
    ``on_ready`` run with Triton's async compile mode off.  ``on_ready(i)``, where given (fork mode),
    runs here as soon as launch i's kernel is compiled and finalized (a launch can be timed then),
    while the other children go on compiling; replacements are forked before it runs, so the
    children stay busy.  Launches it was not called for (failed, compiled here after a failed
    fork, or sharing no compile job) are left to the caller.  ``phases``, where given, receives
    the seconds of each phase: ``queue_s`` (the launches handing their compiles over),
    ``children_s`` (forking and waiting for the children), ``ready_s`` (inside ``on_ready``) and
    ``collect_s`` (the compiles here, cache hits after the children)."""
    import triton

    clock = [time.perf_counter()]

    def mark(name: str) -> None:
        now = time.perf_counter()
        if phases is not None:
            phases[name] = phases.get(name, 0.0) + now - clock[0]
        clock[0] = now

    recorder = _Recorder()
    handles: list[Any] = []
    errors: list[BaseException | None] = [None] * len(launches)
    with contextlib.ExitStack() as stack:
        pool = stack.enter_context(concurrent.futures.ThreadPoolExecutor(
            max(1, workers), thread_name_prefix="kerntune-compile")) if threads else recorder
        # entered last, left first: Triton waits for the pool's compiles before the pool shuts down
        stack.enter_context(triton.AsyncCompileMode(pool, ignore_errors=True))
        for i, launch in enumerate(launches):
            try:
                handles.append(launch())
            except Exception as exc:  # noqa: BLE001 - failed before its compile was queued
                handles.append(None)
                errors[i] = exc
        mark("queue_s")
        # which launches wait on which compile job (a launch whose kernel was compiled already has none)
        job_of = {id(future): j for j, (_, future) in enumerate(recorder.jobs)}
        waiting: dict[int, list[int]] = {}
        for i, h in enumerate(handles):
            j = job_of.get(id(getattr(h, "future", None)))
            if j is not None and errors[i] is None:
                waiting.setdefault(j, []).append(i)
        running: dict[int, float] = {}
        child_job: dict[int, int] = {}
        launcher: int | None = None
        try:
            prebuild = _launcher_prebuild(recorder.compile_fns[0]) if recorder.jobs and not threads else None
            if prebuild is not None:
                with contextlib.suppress(OSError):  # no fork to spare: the first launch builds it
                    launcher = _fork(prebuild)
                    running[launcher] = time.monotonic()
            todo = list(range(len(recorder.jobs))) if not threads else []
            ready: list[int] = []
            forking = True
            while todo or running or ready:
                for pid, killed in _reap(running, timeout_s):
                    if pid not in child_job:
                        continue
                    j = child_job.pop(pid)
                    if killed:  # not compiled again here, where nothing would limit its time
                        recorder.jobs[j][1].set_exception(CompileTimeout(
                            f"compile did not finish within {timeout_s:g} s; its child was killed"))
                    else:
                        ready.append(j)
                while forking and todo and len(running) - (launcher in running) < max(1, workers):
                    try:  # the launcher is no worker
                        pid = _fork(recorder.jobs[todo[0]][0])
                    except OSError:  # no more processes: the rest compile here, below
                        forking = False
                        break
                    running[pid] = time.monotonic()
                    child_job[pid] = todo.pop(0)
                if not forking and not running and not ready:
                    break
                if ready and on_ready is not None:
                    j = ready.pop(0)
                    _finish(recorder.jobs[j])
                    mark("children_s")
                    for i in waiting.pop(j, []):
                        try:
                            handles[i].result()  # finalize: the kernel enters the JIT's cache
                        except Exception as exc:  # noqa: BLE001
                            errors[i] = exc
                            continue
                        _outside_async_mode(lambda i=i: on_ready(i))
                    mark("ready_s")
                    continue
                ready.clear()  # without on_ready the compiles are collected below
                if running:
                    if idle is not None:
                        _outside_async_mode(idle)
                    time.sleep(0.002)
            mark("children_s")
            for job in recorder.jobs:  # here: cache hits, or the real work and its real error
                if not job[1].done():
                    _finish(job)
        finally:  # interrupted: no child outlives the batch, and Triton's exit waits on no pending future
            for pid in running:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
            for _, future in recorder.jobs:
                if not future.done():
                    future.set_exception(RuntimeError("kerntune: the batch's compile was interrupted"))
    for i, h in enumerate(handles):
        if h is not None and errors[i] is None and hasattr(h, "result"):
            try:
                h.result()  # re-raises the compile's own error
            except Exception as exc:  # noqa: BLE001
                errors[i] = exc
    mark("collect_s")
    return errors


def _outside_async_mode(fn: Callable[[], None]) -> None:
    """``fn()`` with Triton's AsyncCompileMode switched off: a launch in it that has to compile
    (a kernel that was not in the batch) compiles here and now, instead of queueing on the batch's
    recorder, whose futures nobody would set while ``fn`` waits on them."""
    try:
        from triton.runtime import _async_compile

        token = _async_compile.active_mode.set(None)
    except (ImportError, AttributeError):  # not the Triton this was written for: the mode stays on
        fn()
        return
    try:
        fn()
    finally:
        _async_compile.active_mode.reset(token)


def _finish(job: tuple[Callable[[], Any], concurrent.futures.Future[Any]]) -> None:
    """The compile here, after its child: a cache hit, or the real work and its real error."""
    fn, future = job
    try:
        future.set_result(fn())
    except Exception as exc:  # noqa: BLE001
        future.set_exception(exc)
