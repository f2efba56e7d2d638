"""Replay evaluator: answers from a recording instead of a GPU.

The clock is simulated — each trial costs the compile and benchmark time the
recording holds — so time budgets and 'best after t seconds' mean the same as
on the machine that made the recording.  ``delay_s`` adds a real sleep per config: it
stands in for a GPU in tests of distributed evaluation (a kill must land mid-batch).
"""

from __future__ import annotations

import hashlib

import json
import os
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
                 realtime: bool = False, kernel_source: str | None = None,
                 device_info: dict[str, Any] | None = None) -> None:
        super().__init__(recording.space)
        self.recording = recording
        self.source = source
        self.delay_s = delay_s
        #: What a real run would show the model and the recording lacks (``--source``, ``--device``).
        self.kernel_source = kernel_source
        self.device_info = dict(device_info or {})
        #: Each config takes its recorded compile + benchmark time in wall time and the clock is
        #: the wall: a replay that behaves like the GPU run it records, so that overlapping work
        #: (a model thinking while configs are measured) is measured for real, not simulated.
        self.realtime = realtime
        if realtime:
            self.simulated_clock = False

    @classmethod
    def from_file(cls, path: str | Path, delay_s: float = 0.0, realtime: bool = False,
                  kernel_source: str | None = None, device_info: dict[str, Any] | None = None) -> "ReplayEvaluator":
        # absolute, so that `tune --resume ID` alone finds the recording from any directory
        return cls(load_recording(path), source=str(Path(path).resolve()), delay_s=delay_s, realtime=realtime,
                   kernel_source=kernel_source, device_info=device_info)

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
        out = {"name": self.recording.meta.get("device_name") or "unknown"}
        out.update({k: v for k, v in self.device_info.items() if v not in (None, "")})
        return out

    def workload(self) -> dict[str, Any]:
        meta = self.recording.meta
        known = describe_kernel(meta.get("kernel_name"), {p.name: list(p.values()) for p in self.space.params})
        out = {"kernel_name": meta.get("kernel_name"), "problem_size": meta.get("problem_size"),
               "description": meta.get("description") or known.get("description")}
        if self.kernel_source or meta.get("source"):
            out["source"] = self.kernel_source or meta["source"]
        return out

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"evaluator": self.name, "source": self.source}
        if self.recording.digest:
            out["recording_hash"] = self.recording.digest
        if self.delay_s > 0:
            out["delay_s"] = self.delay_s
        if self.device_info:
            out["device_info"] = self.device_info
        if self.kernel_source:  # a resume checks both: another --source of the same length is refused too
            out["kernel_source_chars"] = len(self.kernel_source)
            out["kernel_source_hash"] = hashlib.sha256(self.kernel_source.encode()).hexdigest()[:16]
        return out


def replay_extras(source: str | Path | None, device: str | None) -> tuple[str | None, dict[str, Any]]:
    """``--source FILE`` and ``--device TEXT|FILE`` for a replayed space: the kernel source text, and
    the device as a real run would report it.  ``device`` is a GPU name (its known facts are then
    looked up like a live GPU's), a JSON file of facts (``{"name": ..., "sms": ...}``), or any
    other file, whose text becomes the device's description.  A value that names a file which is not
    there (:func:`_names_a_file`) is refused: taken as the GPU's name, it dropped the recording's own
    GPU facts from the prompt and the "% of peak" figures without a word."""
    from kerntune.errors import KerntuneError

    text = None
    if source is not None:
        p = Path(source)
        if not p.is_file():
            raise KerntuneError(f"--source {source}: file not found")
        text = p.read_text(errors="replace")
    info: dict[str, Any] = {}
    if device:
        p = Path(device).expanduser()  # "~/gpu.json" is a file, as a shell would have expanded it
        if not p.is_file() and _names_a_file(device):  # a mistyped path was taken as the GPU's name
            raise KerntuneError(f"--device {device}: file not found")
        if p.is_file():
            raw = p.read_text(errors="replace")
            if p.suffix == ".json":
                try:
                    data = json.loads(raw)
                except json.JSONDecodeError as exc:
                    raise KerntuneError(f"--device {device}: not valid JSON ({exc})") from None
                if not isinstance(data, dict):
                    raise KerntuneError(f"--device {device}: expected a JSON object of device facts")
                info = data
            else:
                info = {"description": raw.strip()}
        else:
            info = {"name": device.strip()}
    return text, info


#: Suffixes of a file of device facts or of a device's description.
_DEVICE_FILE_SUFFIXES = (".json", ".txt", ".yaml", ".yml")


def _names_a_file(device: str) -> bool:
    """Whether a ``--device`` value is a file's path rather than a GPU's name: it ends in a file suffix,
    starts as a path does (``/``, ``./``, ``../``, ``~``), or holds a path separator and no space.  A
    name with a spaced slash, as ROCm reports ``AMD Instinct MI250X / MI250``, stays a name."""
    text = device.strip()
    seps = tuple(s for s in ("/", os.sep, os.altsep) if s)
    if text.lower().endswith(_DEVICE_FILE_SUFFIXES) or text.startswith(("./", "../", "~")) or text.startswith(seps):
        return True
    return any(s in text for s in seps) and not any(c.isspace() for c in text)
