"""Persistence of runs, trials, best configs and LLM exchanges."""

from kerntune.store.sqlite import RunRecord, Store

__all__ = ["RunRecord", "Store"]
