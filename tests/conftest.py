"""Shared fixtures (the recorded convolution space shipped in the repo) and the test files' order."""

from __future__ import annotations

import json
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


_FILE_SECONDS = Path(__file__).resolve().parent / "file_seconds.json"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order the test files heaviest first, so pytest-xdist's file-at-a-time scheduling ends on light ones.

    Makefile runs ``--dist loadfile --no-loadscope-reorder``: files go to workers in this order. The
    weights are seconds from a recorded run (.ci/file_seconds.py says how to refresh them); a file not
    in the table counts as the table's median. The order within a file is kept, and the sort is a pure
    function of the collection, so every xdist worker collects the same order.
    """
    if not _FILE_SECONDS.is_file():
        return
    seconds: dict[str, float] = json.loads(_FILE_SECONDS.read_text())
    known = sorted(seconds.values())
    median = known[len(known) // 2] if known else 0.0
    first_seen: dict[str, int] = {}
    for item in items:
        first_seen.setdefault(item.nodeid.split("::", 1)[0], len(first_seen))

    def key(item: pytest.Item) -> tuple[float, int]:
        path = item.nodeid.split("::", 1)[0]
        return (-seconds.get(path, median), first_seen[path])

    items.sort(key=key)
