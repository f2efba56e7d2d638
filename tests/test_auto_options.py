"""``auto``'s options as the users see them (``kerntune options auto``, ``-o``): the pydantic model that
checks and documents them (``strategies.options.AutoOptions``) against the engine's and the
cooperation's own defaults, so the listing cannot drift from what a run uses."""

from __future__ import annotations

import dataclasses
import inspect
import math
import typing

import pytest
from typer.testing import CliRunner

from kerntune.cli import app
from kerntune.errors import KerntuneError
from kerntune.strategies.auto_model import run_with_model
from kerntune.strategies.options import AutoOptions, validate_options
from kerntune.strategies.surrogate_aux import WARPS
from kerntune.strategies.surrogate_options import SurrogateOptions


def test_the_listing_has_every_option_with_the_default_a_run_uses() -> None:
    engine = {f.name: f.default for f in dataclasses.fields(SurrogateOptions)}
    coop = {k: p.default for k, p in inspect.signature(run_with_model).parameters.items()
            if k not in ("ctx", "engine_opts")}
    fields = AutoOptions.model_fields
    assert set(fields) == set(engine) | set(coop)
    for name, default in {**engine, **coop}.items():
        assert fields[name].default == default, name
        assert fields[name].description, name
    assert set(typing.get_args(AutoOptions.model_fields["y_warp"].annotation)) == set(WARPS)


@pytest.mark.parametrize("opts, needle", [
    ({"kappa": math.nan}, "kappa"), ({"local_share": 2}, "local_share"), ({"stall": 0}, "stall"),
    ({"y_warp": "cube"}, "y_warp"), ({"global_warp": "cube"}, "global_warp"), ({"model": "svm"}, "model"),
    ({"ts_share": 0.3}, "unknown option 'ts_share'"), ({"climb_elites": 1}, "climb_elites"),
])
def test_bad_options_stop_before_anything_is_measured(opts: dict, needle: str) -> None:
    with pytest.raises(KerntuneError, match=needle):
        validate_options("auto", opts)


def test_good_options_pass_unchanged() -> None:
    opts = {"kappa": 3, "global_warp": None, "climb_max": None, "initial": 10, "model_clock_s": 30.0}
    assert validate_options("auto", opts) == opts


def test_kerntune_options_auto_lists_them() -> None:
    res = CliRunner().invoke(app, ["options", "auto"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    for name in ("global_share", "gp_align", "climb_max", "screen_keep", "model_clock_s"):
        assert name in res.output
    assert "checks its own options" not in res.output
