"""Messages that name what the user can give: ``exec --runoff`` takes ``auto`` as well as numbers, and
``kerntune.compare``'s refusal of options for a strategy not compared names no CLI flag."""

from __future__ import annotations

from pathlib import Path

import pytest

import kerntune
from kerntune.errors import KerntuneError
from kerntune.retune import check_exec_options

SPACE = Path(__file__).resolve().parent.parent / "examples/spaces/matmul_4096_h100.json.gz"


def test_a_bad_runoff_names_every_form_it_takes() -> None:
    """``--runoff x`` said "expected a whole number", though ``auto`` (the default) is one of its values."""
    with pytest.raises(KerntuneError, match=r"'x': expected auto, a whole number of leaders, or 0 \(off\)"):
        check_exec_options(runoff="x")
    check_exec_options(runoff="auto")
    check_exec_options(runoff="3")


def test_compare_from_python_names_no_cli_flag_for_options_of_a_strategy_not_compared(tmp_path: Path) -> None:
    """From Python the refusal read "which is not among --strategies", a flag the caller never typed."""
    with pytest.raises(KerntuneError, match="options given for gp, which is not among the strategies compared"):
        kerntune.compare(SPACE, strategies=["pattern"], options={"gp": {"kappa": 2}}, store=tmp_path / "a.db",
                         report=False)
