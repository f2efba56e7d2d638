"""Comparing strategies on recorded spaces by the field's numbers."""

from kerntune.compare.harness import CompareResult, StrategyStats, plot_compare, run_compare
from kerntune.compare.metrics import Reference, best_so_far, methodology_score

__all__ = ["CompareResult", "Reference", "StrategyStats", "best_so_far", "methodology_score", "plot_compare",
           "run_compare"]
