"""Tensile / TensileLite benchmark configs (read, count, validate and edit: config.py, edits.py), their
results (results.py, evaluate.py), library logic files (logic.py) and the workflow (runner.py, autotune.py)."""

from kerntune.tensile.config import LEGACY_STEP_KEYS, LOCKED, Step, TensileConfig, TensileError
from kerntune.tensile.edits import OPS, TensileEdit, apply, check_value

__all__ = ["LEGACY_STEP_KEYS", "LOCKED", "OPS", "Step", "TensileConfig", "TensileEdit", "TensileError", "apply",
           "check_value"]
