"""``@kerntune.autotune`` launched from several threads (autograd runs backward kernels on a thread of its
own): a ``Store`` object the caller gave, and two threads first calling the same key.  A CPU stand-in for
a ``triton.jit`` function (``kernel[grid](**args)``), real SQLite stores, real wall-clock timing."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

import kerntune
from kerntune.store import Store

SPACE = {"params": [{"name": "BLOCK", "kind": "choice", "options": [16, 32, 64]}], "default": {"BLOCK": 16}}


class SleepKernel:
    """Behaves like a JITFunction at the call site, each launch a sleep of 1-6 ms."""

    arg_names = ["x", "out", "n", "BLOCK"]
    src = "def sleep_kernel(x, out, n, BLOCK): ..."

    def __init__(self) -> None:
        self.launches: list[tuple[int, int]] = []  # (thread id, BLOCK)

    def __getitem__(self, grid):
        def launch(x, out, n, BLOCK):
            self.launches.append((threading.get_ident(), BLOCK))
            time.sleep({16: 6.0, 32: 1.0, 64: 3.0}[BLOCK] / 1000)
            out[:] = x * 2.0
        return launch


def _tuned(store, **kw):
    return kerntune.autotune(space=SPACE, key=["n"], strategy="exhaustive", store=store, rep_ms=10, **kw)(
        SleepKernel())


def _args(n: int = 8):
    return np.arange(n, dtype=float), np.zeros(n)


def _in_thread(fn) -> list[BaseException]:
    errors: list[BaseException] = []

    def body() -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread's assert
            errors.append(exc)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    return errors


def test_a_store_object_given_serves_other_threads_through_connections_of_their_own(tmp_path: Path) -> None:
    """A ``Store`` given by the caller was used as given from every thread, and SQLite refuses a
    connection from a thread other than its own: the backward thread's first lookup failed as 'corrupt
    or unreadable'.  Now another thread opens its own connection on the same file; the thread that
    opened the Store keeps using it."""
    given = Store(tmp_path / "k.db")
    k = _tuned(given)
    x, out = _args()
    k[(1,)](x, out, 8)                              # this thread: tuned and stored through the given Store
    assert k.store is given

    def other() -> None:
        x16, out16 = _args(16)
        k[(1,)](x16, out16, 16)                     # a new key: tuned and stored from this thread
        np.testing.assert_allclose(out16, x16 * 2.0)
        assert k.store is not given and k.store.path == given.path
        fresh = _tuned(given)                       # the same Store object, first used on this thread
        fresh[(1,)](*_args(), 8)                    # read from the store, not tuned
        assert fresh.tuned_keys == []

    assert _in_thread(other) == []
    assert len(k.tuned_keys) == 2
    stored = {e["problem_key"] for e in Store(tmp_path / "k.db").iter_best(k.kernel_hash)}
    assert stored == set(k.tuned_keys)
    assert given.get_best(k.kernel_hash, k.tuned_keys[1], *_device()) is not None  # the given one still works here


def _device() -> tuple[str, str]:
    from kerntune.run.decorator_search import device_and_versions

    return device_and_versions()


def test_two_threads_first_calling_one_key_tune_it_once(tmp_path: Path) -> None:
    """Two threads first calling the same key both tuned it: two searches, their launches interleaved
    (each timing the other's kernels too) and two runs stored.  Now the second waits for the first's
    search and launches its winner."""
    k = _tuned(str(tmp_path / "k.db"))
    start = threading.Barrier(2)
    outs: list[tuple[np.ndarray, np.ndarray]] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            x, out = _args()
            start.wait()
            k[(1,)](x, out, 8)
            outs.append((x, out))
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread's assert
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(k.tuned_keys) == 1, k.tuned_keys
    st = Store(tmp_path / "k.db")
    assert len(st.list_runs()) == 1
    # one search's launches, all from one thread, then each thread's own launch of the winner
    searching = {tid for tid, _ in k.fn.launches[:-2]}
    assert len(searching) == 1
    winner = k.best[k.tuned_keys[0]][0]["BLOCK"]
    assert [b for _, b in k.fn.launches[-2:]] == [winner, winner]
    for x, out in outs:
        np.testing.assert_allclose(out, x * 2.0)
