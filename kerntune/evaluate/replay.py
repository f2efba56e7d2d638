"""Replay evaluator: answers from a recording instead of a GPU.

The clock is simulated — each trial costs the compile and benchmark time the
recording holds — so time budgets and 'best after t seconds' mean the same as
on the machine that made the recording.  ``delay_s`` adds a real sleep per config: it
stands in for a GPU in tests of distributed evaluation (a kill must land mid-batch).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator, Sequence

from kerntune.evaluate.base import Evaluator
from kerntune.evaluate.known_kernels import describe_kernel
from kerntune.evaluate.recorded import Recording, load_recording
from kerntune.evaluate.trial import Status, Trial
from kerntune.space import Config


class ReplayEvaluator(Evaluator):
    name = "replay"
    simulated_clock = True

    def __init__(self, recording: Recording, source: str | None = None, delay_s: float = 0.0,
                 realtime: bool = False) -> None:
        super().__init__(recording.space)
        self.recording = recording
        self.source = source
        self.delay_s = delay_s
        #: Each config takes its recorded compile + benchmark time in wall time and the clock is
        #: the wall: a replay that behaves like the GPU run it records, so that overlapping work
        #: (a model thinking while configs are measured) is measured for real, not simulated.
        self.realtime = realtime
        if realtime:
            self.simulated_clock = False

    @classmethod
    def from_file(cls, path: str | Path, delay_s: float = 0.0, realtime: bool = False) -> "ReplayEvaluator":
        return cls(load_recording(path), source=str(path), delay_s=delay_s, realtime=realtime)

    def evaluate(self, configs: Sequence[Config]) -> list[Trial]:
        out = []
        for cfg in configs:
            if self.delay_s > 0:
                time.sleep(self.delay_s)  # wall time only: the simulated clock still charges the recorded cost
            cfg = self.space.canonical(cfg)
            try:
                recorded = self.recording.trials.get(self.space.key(cfg))
            except KeyError:
                recorded = None
            if recorded is None:
                # Never pretend an unrecorded config is fast: it is simply unknown.
                out.append(Trial(cfg, Status.UNMEASURED, error="not in the recording"))
                continue
            trial = Trial(cfg, recorded.status, recorded.time_ms, list(recorded.times_ms),
                          recorded.compile_s, recorded.bench_s, recorded.error, dict(recorded.extra))
            if self.realtime:
                time.sleep(trial.cost_s)
            out.append(trial)
        return out

    def stream(self, configs: Sequence[Config]) -> Iterator[tuple[int, Trial]]:
        for i, cfg in enumerate(configs):
            yield i, self.evaluate([cfg])[0]

    def device(self) -> dict[str, Any]:
        return {"name": self.recording.meta.get("device_name") or "unknown"}

    def workload(self) -> dict[str, Any]:
        meta = self.recording.meta
        known = describe_kernel(meta.get("kernel_name"))
        out = {"kernel_name": meta.get("kernel_name"), "problem_size": meta.get("problem_size"),
               "description": meta.get("description") or known.get("description")}
        if meta.get("source"):
            out["source"] = meta["source"]
        return out

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"evaluator": self.name, "source": self.source}
        if self.recording.digest:
            out["recording_hash"] = self.recording.digest
        if self.delay_s > 0:
            out["delay_s"] = self.delay_s
        return out
