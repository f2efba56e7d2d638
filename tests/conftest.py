"""Shared fixtures: the recorded convolution space shipped in the repo."""

from __future__ import annotations

from pathlib import Path

import pytest

from kerntune.evaluate import ReplayEvaluator

ROOT = Path(__file__).resolve().parent.parent
CONV = ROOT / "examples" / "spaces" / "convolution_A100.json.gz"


@pytest.fixture(scope="session")
def conv_path() -> Path:
    return CONV


@pytest.fixture(scope="session")
def conv_evaluator() -> ReplayEvaluator:
    return ReplayEvaluator.from_file(CONV)
