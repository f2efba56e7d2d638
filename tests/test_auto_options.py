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


def test_the_model_only_options_are_the_cooperations() -> None:
    coop = set(inspect.signature(run_with_model).parameters) - {"ctx", "engine_opts", "batch_size"}
    assert AutoOptions.model_only == coop


@pytest.mark.parametrize("opts, needle", [
    ({"initial": 10}, "auto: option 'initial' needs --llm"),
    ({"refine": 5, "overlap_first": 2, "kappa": 3}, "auto: options 'overlap_first', 'refine' need --llm"),
])
def test_a_models_option_without_a_model_is_one_line_before_a_run_is_stored(opts: dict, needle: str) -> None:
    with pytest.raises(KerntuneError, match=needle) as info:
        validate_options("auto", opts, with_model=False)
    assert "\n" not in str(info.value)
    assert validate_options("auto", opts, with_model=True) == opts
    assert validate_options("auto", opts) == opts  # whether a model comes is not known: they pass
    assert validate_options("auto", {"kappa": 3, "batch_size": 2}, with_model=False) == {"kappa": 3, "batch_size": 2}


def test_climb_share_and_credit_rate_say_when_they_act() -> None:
    """Under the defaults (climb_max 0.15 under min_share 0.3) the climber's share is climb_max
    whatever the credit: the listing says that climb_share (but for 0) and credit_rate act only
    with climb_max null or above min_share."""
    from kerntune.strategies.options import describe_options
    from kerntune.strategies.surrogate import SurrogateSearch

    rows = {name: what for name, _, _, what in describe_options("auto")}
    for name in ("climb_share", "credit_rate"):
        assert "only with climb_max null or above min_share" in rows[name], rows[name]
    engine = SurrogateSearch.__new__(SurrogateSearch)
    for credit in ({"gp": 0.0, "climb": 0.0}, {"gp": 1.0, "climb": 0.0}, {"gp": 0.0, "climb": 1.0}):
        for climb_share in (0.1, 0.5, 0.9):
            engine.credit, engine.opts = credit, SurrogateOptions(climb_share=climb_share)
            assert engine.climb_probability() == 0.15
            engine.opts = SurrogateOptions(climb_share=climb_share, climb_max=None)
            assert engine.climb_probability() != 0.15
