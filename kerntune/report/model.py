"""What a report writer renders: the computed pieces of one run's report.

Its own module so that the builder (which computes it and then calls the
writers) and the writers (which render it) both import it without importing
each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kerntune.report.analysis import (
    Failures,
    LLMRun,
    ParamEffect,
    StrategyRow,
    TopConfig,
)
from kerntune.report.data import ReportData
from kerntune.report.plots import Plot


@dataclass
class Report:
    """Everything a writer renders; plots are PNG bytes."""

    data: ReportData
    strategies: list[StrategyRow]
    top: list[TopConfig]
    failures: Failures
    effects: list[ParamEffect]
    llm: list[LLMRun]
    plots: dict[str, Plot] = field(default_factory=dict)
    seconds: float = 0.0

    def plot(self, key: str) -> Plot | None:
        return self.plots.get(key)
