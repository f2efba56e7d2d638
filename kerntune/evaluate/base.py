"""The evaluator interface: a batch of configs in, one Trial per config out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Iterator, Sequence

from kerntune.evaluate.trial import Trial
from kerntune.space import Config, Space


class Evaluator(ABC):
    """Measures configs of one kernel on one problem.

    Batches let a backend compile in parallel; evaluators must return trials in
    the order of ``configs`` and never raise for a bad config — a failure is a
    Trial with a failure status, so one config cannot end a run.
    """

    name: str = "evaluator"
    #: True when trial costs are taken from a recording rather than the wall clock.
    simulated_clock: bool = False
    #: Configs this evaluator measures at once (compile workers): a hint for batch sizes.
    parallelism: int = 1

    def __init__(self, space: Space) -> None:
        self.space = space

    @abstractmethod
    def evaluate(self, configs: Sequence[Config]) -> list[Trial]:
        ...

    def stream(self, configs: Sequence[Config]) -> Iterator[tuple[int, Trial]]:
        """Yield ``(index in configs, trial)`` as each config finishes.

        The store commits each trial as it arrives, so a backend that measures
        in parallel should override this to yield in completion order; the
        default yields the results of ``evaluate`` once the batch is done.
        """
        yield from enumerate(self.evaluate(configs))

    def device(self) -> dict[str, Any]:
        """Hardware facts for prompts and the store (name at least)."""
        return {"name": "unknown"}

    def workload(self) -> dict[str, Any]:
        """Kernel name, problem size, dtypes: what a prompt says about the job."""
        return {}

    def describe(self) -> dict[str, Any]:
        """Enough to re-create this evaluator on resume (stored with the run)."""
        return {"evaluator": self.name}

    def close(self) -> None:
        """Release workers and devices; safe to call twice."""
