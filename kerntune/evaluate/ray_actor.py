"""What runs on a Ray node for ``kerntune.evaluate.ray_backend``: the factories that build an
actor's evaluator there (with the files they need shipped as bytes) and the actor class.
Kept apart from the driver's dispatch; ``ray_backend`` re-exports every name."""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from kerntune.errors import KerntuneError
from kerntune.evaluate.base import Evaluator
from kerntune.evaluate.trial import Trial
from kerntune.space import Config

#: Builds an actor's evaluator on its node; the argument is the CPUs Ray reserved for it.
EvaluatorFactory = Callable[[int], Evaluator]


class EvaluatorFailed(RuntimeError):
    """What an actor's ``step`` raises once its evaluator has raised: the traceback as the
    message, and ``summary``, the exception's type and message (what the driver compares to
    tell an evaluator that fails every time from a one-off)."""

    def __init__(self, text: str, summary: str = "") -> None:
        super().__init__(text)
        self.summary = summary

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (str(self), self.summary)


@dataclass
class ShippedFile:
    """A file the driver reads and an actor re-creates on its node when the driver's path
    is not there (another host) or holds other bytes, so clusters need no shared disk."""

    path: str
    data: bytes

    @classmethod
    def read(cls, path: str | Path) -> "ShippedFile":
        p = Path(path).resolve()
        if not p.is_file():
            raise KerntuneError(f"file not found: {path}")
        return cls(str(p), p.read_bytes())

    def local(self) -> str:
        p = Path(self.path)
        try:
            if p.read_bytes() == self.data:
                return str(p)
        except OSError:
            pass
        digest = hashlib.sha256(self.data).hexdigest()[:16]
        target = Path(tempfile.gettempdir()) / "kerntune-shipped" / digest / p.name  # same name: same format
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.{os.getpid()}")
            tmp.write_bytes(self.data)
            os.replace(tmp, target)
        return str(target)


@dataclass
class ReplayFactory:
    """Replay evaluators for actors; ``delay_s`` makes each config take real time (tests)."""

    recording: ShippedFile
    delay_s: float = 0.0
    gpus: float = 0.0

    @classmethod
    def of(cls, path: str | Path, delay_s: float = 0.0) -> "ReplayFactory":
        return cls(ShippedFile.read(path), delay_s)

    def __call__(self, cpus: int) -> Evaluator:
        from kerntune.evaluate.replay import ReplayEvaluator

        return ReplayEvaluator.from_file(self.recording.local(), delay_s=self.delay_s)

    def local_describe(self) -> dict[str, Any]:
        return {"source": self.recording.path}

    def local_recording(self) -> Any:
        """The recording, loaded on the driver: a replay's report says how far the winner is from its optimum."""
        from kerntune.evaluate.recorded import load_recording

        return load_recording(self.recording.local())


@dataclass
class TritonFactory:
    """A Triton evaluator on the actor's one GPU, compiling on the actor's CPUs.  ``kernel`` is
    the shipped kernel file, or an adapter's name (``liger.rms_norm``) that travels as it is:
    its package must then be installed on the nodes."""

    kernel: ShippedFile | str
    shape: tuple[int, ...]
    compile_timeout: float = 60.0
    gpus: float = 1.0

    @classmethod
    def of(cls, path: str | Path, shape: tuple[int, ...], compile_timeout: float = 60.0) -> "TritonFactory":
        from kerntune.evaluate.triton_backend.kernel_file import is_adapter_spec

        kernel = str(path) if is_adapter_spec(path) else ShippedFile.read(path)
        return cls(kernel, tuple(shape), compile_timeout)

    def _path(self) -> str:
        return self.kernel if isinstance(self.kernel, str) else self.kernel.local()

    def __call__(self, cpus: int) -> Evaluator:
        from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator

        # One CPU of the actor's share runs the benchmark worker, the others compile.
        return TritonEvaluator(self._path(), self.shape, compile_workers=max(1, cpus - 1),
                               compile_timeout=self.compile_timeout, gpus=1)

    def local_describe(self) -> dict[str, Any]:
        return {"kernel_file": self.kernel if isinstance(self.kernel, str) else self.kernel.path}


class EvalActor:
    """Runs on a Ray worker: an evaluator fed through an inbox by one background thread.

    ``step`` adds configs and returns whatever finished within ``wait_s`` (one call at a
    time per actor, so Ray Client works too, which cannot stream actor generators).  The
    thread keeps measuring between calls, so the inner pipeline never waits on the driver.

    The measuring happens in that thread, not in a Ray task, so ``ray.cancel`` cannot stop
    it (nor could it a running task of a threaded actor: Ray only sets a flag there, and
    ``force`` is refused for actor tasks).  A batch the driver abandons is dropped by
    ``abandon`` instead: its queued configs and unread results go, and the thread leaves its
    stream at the next result (the inner evaluator's stream is closed: a Triton one halts its
    workers).  A config in the middle of being measured cannot be interrupted; ``abandon``
    says whether the thread is free of abandoned work, and the driver replaces an actor that
    is not, so later configs never queue behind work nobody reads.
    """

    def __init__(self, factory: EvaluatorFactory, cpus: int) -> None:
        self.ev = factory(cpus)
        self.node = _node_id()
        self.cond = threading.Condition()
        self.busy = threading.Lock()  # the inner evaluator serves one batch (or retime) at a time
        self.inbox: list[tuple[int, int, Config]] = []
        self.outbox: list[tuple[int, int, Trial]] = []
        self.error: str | None = None
        self.summary = ""
        self.dropped = -1  # the driver abandoned every batch up to this one
        self.running: list[tuple[int, int, Config]] = []  # what the thread measures now
        threading.Thread(target=self._loop, daemon=True).start()

    def info(self) -> dict[str, Any]:
        return {"space": self.ev.space, "describe": self.ev.describe(), "device": self.ev.device(),
                "workload": self.ev.workload(), "parallelism": self.ev.parallelism, "name": self.ev.name,
                "simulated_clock": self.ev.simulated_clock, "can_retime": hasattr(self.ev, "retime"),
                "pid": os.getpid()}

    def step(self, items: list[tuple[int, int, Config]], wait_s: float) -> list[tuple[int, int, Trial]]:
        with self.cond:
            self.inbox.extend(items)
            self.cond.notify_all()
            self.cond.wait_for(lambda: bool(self.outbox) or self.error is not None, timeout=wait_s)
            if self.error is not None and not self.outbox:  # what finished before the failure comes first
                raise EvaluatorFailed(f"the evaluator on this actor failed:\n{self.error}", self.summary)
            out, self.outbox = self.outbox, []
        return out

    def _loop(self) -> None:
        while True:
            with self.cond:
                self.cond.wait_for(lambda: bool(self.inbox))
                batch, self.inbox = self.inbox, []
                self.running = batch
            try:
                with self.busy:
                    stream = self.ev.stream([cfg for _, _, cfg in batch])
                    for j, trial in stream:
                        with self.cond:
                            if batch[j][0] > self.dropped:  # an abandoned batch's result is never handed out
                                self.outbox.append((batch[j][0], batch[j][1], self._label(trial)))
                                self.cond.notify_all()
                            if self._stale():
                                break
                    close = getattr(stream, "close", None)
                    if close is not None:  # left early: the inner evaluator drops what it still holds
                        close()
            except Exception as exc:  # noqa: BLE001 - an evaluator bug, reported to the driver by the next step
                with self.cond:
                    self.error = traceback.format_exc()[-3000:]
                    self.summary = f"{type(exc).__name__}: {exc}".strip()[:1000]
                    self.running = []
                    self.cond.notify_all()
                return
            with self.cond:
                self.running = []
                self.cond.notify_all()

    def _label(self, trial: Trial) -> Trial:
        """Prefix the trial's GPU with this actor's node: Ray gives each actor the GPUs of its own node,
        so actors on two hosts both see ``CUDA_VISIBLE_DEVICES=0``, and ``retime.leading`` would merge
        the rankings of two GPUs whose screening times do not compare."""
        gpu = trial.extra.get("gpu")
        if gpu is not None and self.node:
            trial.extra = {**trial.extra, "gpu": f"{self.node}:{gpu}"}
        return trial

    def _stale(self) -> bool:
        """The thread is measuring only configs of abandoned batches (call with ``cond`` held)."""
        return bool(self.running) and all(b <= self.dropped for b, _, _ in self.running)

    def abandon(self, batch: int, grace_s: float) -> bool:
        """Drop every config and result of the batches up to ``batch`` and wait up to ``grace_s``
        for the thread to leave their stream.  True where the actor is ready for new work at once:
        its thread is alive and measures nothing abandoned.  False where a config of an abandoned
        batch is still being measured (or the evaluator failed on one): the driver replaces the
        actor, as new configs would wait behind that one, or be charged with its failure."""
        with self.cond:
            self.dropped = max(self.dropped, batch)
            self.inbox = [it for it in self.inbox if it[0] > self.dropped]
            self.outbox = [it for it in self.outbox if it[0] > self.dropped]
            self.cond.notify_all()
            self.cond.wait_for(lambda: not self._stale(), timeout=grace_s)
            return self.error is None and not self._stale()

    def retime(self, configs: list[Config], rep_ms: int | None, rounds: int | None) -> list[Trial]:
        with self.busy:
            trials = self.ev.retime(configs, rep_ms=rep_ms, rounds=rounds)  # type: ignore[attr-defined]
        return [self._label(t) for t in trials]

    def runoff(self, configs: list[Config], first_ms: list[float]) -> dict[str, Any] | None:
        runoff = getattr(self.ev, "runoff", None)
        if runoff is None:
            return None
        with self.busy:
            return runoff(configs, first_ms)

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        self.ev.close()


def _node_id() -> str:
    """The first 8 hex digits of this Ray node's id ("" outside Ray): enough to tell a cluster's hosts apart."""
    try:
        import ray

        return ray.get_runtime_context().get_node_id()[:8] if ray.is_initialized() else ""
    except Exception:  # noqa: BLE001 - no label beats no actor
        return ""
