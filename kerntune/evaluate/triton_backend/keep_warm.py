"""What a benchmark worker does between tasks: keep the GPU loaded (``KeepWarm``) while it waits
for the next line on its pipe (``read_tasks``).  Moved out of ``worker``, which re-exports both."""

from __future__ import annotations

import os
import select
import time
from typing import Any, Callable, Iterator


class KeepWarm:
    """Keeps the GPU loaded with the last kernel measured while the worker waits for its next task.

    Without it a config that waited for its compile would be timed from a rested GPU, at the
    boost clock, and the next one under load at the sustained clock: 13-20% apart for a
    compute-bound kernel on an H100 (kerntune.evaluate.protocol).  After ``limit_s`` of idling
    it stops (an idle tuner should not burn the GPU) and the next measurement is told to warm
    up for ``rested_warmup_ms`` instead.
    """

    def __init__(self, enabled: bool, limit_s: float = 30.0, rested_warmup_ms: int = 300) -> None:
        self.enabled, self.limit_s, self.rested_warmup_ms = enabled, limit_s, rested_warmup_ms
        self.rested = True  # nothing measured yet: the GPU may have been idle for long
        self.fn: Callable[[], Any] | None = None
        self.n = 1
        self.idle_since = time.monotonic()
        self.dirty = False  # inputs touched by warming launches: restore before the next task

    def set(self, fn: Callable[[], Any], median_ms: float) -> None:
        if self.enabled:
            self.fn, self.n = fn, max(1, min(1000, int(10.0 / max(median_ms, 1e-3))))
        self.idle_since = time.monotonic()
        self.rested = False

    def step(self, sync: Callable[[], None]) -> bool:
        """Run about 10 ms of the last kernel; False once there is nothing (more) to run."""
        if self.fn is None or time.monotonic() - self.idle_since > self.limit_s:
            return False
        try:
            for _ in range(self.n):
                self.fn()
            sync()
        except Exception:  # noqa: BLE001 - a kernel that failed here is simply not used again
            self.fn = None
            return False
        self.dirty = True
        return True

    def warmup_ms(self, asked: int) -> int:
        """The warm-up the next measurement needs: longer when the GPU has rested."""
        if self.enabled and (self.rested or time.monotonic() - self.idle_since > self.limit_s):
            return max(asked, self.rested_warmup_ms)
        return asked


def read_tasks(fd: int, idle: Callable[[], bool]) -> Iterator[bytes]:
    """Lines from ``fd``; while none is waiting, ``idle()`` is called until it returns False."""
    buf = b""
    while True:
        while b"\n" not in buf:
            if select.select([fd], [], [], 0)[0] or not idle():
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return
                buf += chunk
        line, _, buf = buf.partition(b"\n")
        yield line
