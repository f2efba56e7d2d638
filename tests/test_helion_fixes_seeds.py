"""Helion's seed configs and layout notes in kerntune's Helion autotuner (kerntune/helion/tuner.py, space.py).

The kernels are bound, not run, except in the notes test, which runs a short search in Triton's
interpreter (TRITON_INTERPRET=1) with Helion's GPU timer replaced by a wall clock: so these tests
skip where a GPU is present, and where Helion is not installed (CI), as tests/test_helion_tuner.py.
Locally: ``PYTHONPATH=/path/to/helion-1.4.0 pytest tests/test_helion_fixes_seeds.py``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any, Callable

import pytest

from kerntune.helion import Frag, build_space, layout_from_dict

torch = pytest.importorskip("torch")
if torch.cuda.is_available():
    pytest.skip("the notes test replaces Helion's GPU timer with a wall clock: CPU only", allow_module_level=True)
#: Kernels run only in Triton's interpreter, which must be on before triton is imported (an earlier
#: test module, e.g. tests/test_helion_space.py, may have imported it without).
INTERPRETED = "triton" not in sys.modules or os.environ.get("TRITON_INTERPRET") == "1"
os.environ.setdefault("TRITON_INTERPRET", "1")
helion = pytest.importorskip("helion")

import helion.autotuner.base_search as base_search  # noqa: E402
import helion.autotuner.benchmark_provider as provider  # noqa: E402
import helion.language as hl  # noqa: E402

import kerntune.helion  # noqa: E402
from kerntune.helion import describe_fragments  # noqa: E402

#: A user's tile of 2**23 elements: above kerntune's default bound of 2**22 on the block sizes' product.
BIG_SEED = {"block_sizes": [1024, 8192], "num_warps": 4}


def _wall(fn: Callable[[], Any], *args: Any, **kwargs: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


@pytest.fixture(autouse=True)
def cpu_helion(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wall-clock stand-ins for Helion's GPU timers (as in tests/test_helion_tuner.py)."""
    for name in ("HELION_AUTOTUNE_FINAL_REBENCHMARK_TOP_K", "HELION_AUTOTUNE_BUDGET_SECONDS",
                 "HELION_AUTOTUNE_LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(provider, "do_bench", _wall)
    monkeypatch.setattr(base_search, "do_bench", _wall)
    monkeypatch.setattr(base_search, "interleaved_bench", lambda fns, **kw: [_wall(f) for f in fns])


def add_kernel(**settings: Any) -> Any:
    """A fresh elementwise-add Helion kernel (a new one per test: Helion keeps a tuned config)."""

    @helion.kernel(static_shapes=True, autotune_precompile=None, autotune_progress_bar=False,
                   autotune_benchmark_subprocess=False, autotune_random_seed=5, autotune_log_level=logging.INFO,
                   **settings)
    def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(out.size()):
            out[tile] = x[tile] + y[tile]
        return out

    return add


class Lines(logging.Handler):
    """The lines a search's Helion autotune log receives."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def search_of(shape: tuple[int, int], **kwargs: Any) -> tuple[Any, Lines]:
    """kerntune's search object for the add kernel bound to ``shape``, with its log lines collected."""
    x = torch.randn(*shape)
    bound = add_kernel(autotune_seed_configs=[helion.Config(**BIG_SEED)]).bind((x, x))
    search = kerntune.helion.autotuner(strategy="random", **kwargs)(bound, (x, x))
    lines = Lines()
    search.log.add_handler(lines)
    return search, lines


def test_a_user_seed_helion_accepts_above_the_block_bound_is_a_warm_start_seed():
    """The seed's 1024x8192 tile broke kerntune's bound block_sizes_0 * block_sizes_1 <= 2**22, so a
    seed Helion transfers was silently missing from the warm start; the bound now covers it."""
    search, lines = search_of((1024, 8192))
    layout = search.kerntune_layout()
    seeds = search._seed_configs(layout)
    assert [(c["block_sizes_0"], c["block_sizes_1"], c["num_warps"]) for c in seeds] == [(1024, 8192, 4)]
    assert [c.text for c in layout.space.constraints] == ["block_sizes_0 * block_sizes_1 <= 8388608"]
    assert layout.space.is_valid(layout.space.default)  # Helion's default is still a member
    assert not [line for line in lines.lines if "left out" in line], lines.lines


def test_without_helion_seeds_the_block_bound_is_not_raised():
    """use_helion_seeds=False measures no seed, so no seed widens the space."""
    search, _ = search_of((1024, 8192), use_helion_seeds=False)
    assert [c.text for c in search.kerntune_layout().space.constraints] == \
        ["block_sizes_0 * block_sizes_1 <= 4194304"]


def test_a_seed_kerntune_still_leaves_out_is_logged_with_the_reason():
    """A seed outside the space was dropped without a word beyond "0 Helion seed config(s)": here one
    whose block sizes are above the 16x16 tensor's fragments (Helion still transfers it)."""
    search, lines = search_of((16, 16))
    assert search._seed_configs(search.kerntune_layout()) == []
    (line,) = [line for line in lines.lines if "left out" in line]
    assert line.startswith("kerntune: Helion seed left out (block_sizes_0: 1024 is not allowed"), line
    assert "block_sizes=[1024, 8192]" in line


def test_a_seed_left_out_by_the_block_bound_is_logged_with_the_constraint():
    """A layout built without the seeds (the bound at its default) leaves the big seed out: the log
    line names the constraint it breaks."""
    search, lines = search_of((1024, 8192))
    layout = build_space(describe_fragments(search.config_gen))
    assert search._seed_configs(layout) == []
    assert any("left out (<constraints>: violates constraint 'block_sizes_0 * block_sizes_1 <= 4194304')"
               in line for line in lines.lines), lines.lines


def test_a_layout_rebuilt_from_a_dump_keeps_the_bound_the_seeds_raised():
    """A dumped layout is rebuilt elsewhere (benchmarks/helion): with the raised bound forgotten, the
    dump's seeds would not be members of the rebuilt space."""
    frags = [Frag("block_sizes", "pow2", slot=i, sequence=True, default=64, low=16, high=8192, block_size=True)
             for i in range(2)] + [Frag("num_warps", "pow2", default=4, low=1, high=32)]
    layout = build_space(frags, seeds=[[1024, 8192, 4]])
    assert layout.space.is_valid({"block_sizes_0": 1024, "block_sizes_1": 8192, "num_warps": 4})
    again = layout_from_dict(json.loads(json.dumps(layout.to_dict())))
    assert [c.text for c in again.space.constraints] == [c.text for c in layout.space.constraints] == \
        ["block_sizes_0 * block_sizes_1 <= 8388608"]


def test_a_seed_outside_the_fragments_does_not_widen_the_block_bound():
    """Only seeds whose block sizes are the space's values raise the bound (the others are left out)."""
    frags = [Frag("block_sizes", "pow2", slot=i, sequence=True, default=64, low=16, high=1024, block_size=True)
             for i in range(3)]
    layout = build_space(frags, max_block_numel=2**20, seeds=[[1024, 1024, 4096], [1024, 512, 16]])
    assert [c.text for c in layout.space.constraints] == ["block_sizes_0 * block_sizes_1 * block_sizes_2 <= 8388608"]


@pytest.mark.skipif(not INTERPRETED, reason="triton was imported without TRITON_INTERPRET=1")
def test_the_layouts_notes_are_logged_once_when_the_search_starts():
    """The layout's notes (a slot kept constant, a default outside its fragment) never reached the log."""
    found: list[Any] = []
    x = torch.randn(1, 16)
    fn = kerntune.helion.autotuner(strategy="random", max_evals=2, seed=0, use_helion_seeds=False,
                                   on_result=found.append)
    kernel = add_kernel(autotuner_fn=fn, autotune_config_overrides={"pid_type": "flat"})  # runs in the interpreter
    bound = kernel.bind((x, x))
    lines = Lines()
    real_init = base_search.BaseSearch.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        self.log.add_handler(lines)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(base_search.BaseSearch, "__init__", init)
        out = bound(x, x)
    assert torch.allclose(out, x + x) and found
    notes = [line for line in lines.lines if line == "kerntune: block_sizes_0: a single value (1), kept constant"]
    assert found[0].layout.notes == ["block_sizes_0: a single value (1), kept constant"]
    assert len(notes) == 1, lines.lines
