"""``@kerntune.autotune``'s arguments: bad settings refused at decoration in one line (they were taken
and failed at the first launch, deep inside the search, or raised a raw TypeError), and
``triton.autotune``'s ``pre_hook`` / ``post_hook``, called as Triton calls them.  A real kernel under
Triton's interpreter (TRITON_INTERPRET=1, CPU torch) and a CPU stand-in that raises for one config;
real SQLite stores."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")
torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")

import kerntune  # noqa: E402
from kerntune.errors import KerntuneError  # noqa: E402
from tests.kernel_modules import kernel_module  # noqa: E402

if os.environ.get("TRITON_INTERPRET") != "1":  # imported under a real GPU session: not what these tests are for
    pytest.skip("needs TRITON_INTERPRET=1 before triton is imported", allow_module_level=True)

BLOCKS = {"params": [{"name": "BLOCK", "kind": "choice", "options": [16, 32, 64]}], "default": {"BLOCK": 16}}


class RaisingKernel:
    """A CPU stand-in for a ``triton.jit`` function: BLOCK=16 raises, as a tile that does not fit would."""

    arg_names = ["x", "out", "n", "BLOCK"]
    src = "def raising_kernel(x, out, n, BLOCK): ..."

    def __getitem__(self, grid):
        def launch(x, out, n, BLOCK):
            if BLOCK == 16:
                raise RuntimeError("out of resources: shared memory")
            out[:] = x * 2.0
        return launch


@pytest.mark.parametrize("options, says", [
    ({"budget": "10"}, "budget must be an integer from 1"),
    ({"budget": 2.5}, "budget must be an integer from 1"),
    ({"budget": True}, "budget must be an integer from 1"),
    ({"budget": 0}, "budget must be an integer from 1"),
    ({"strategy": "nope"}, "unknown strategy 'nope'"),
    ({"strategy": "llm"}, "strategy llm needs a model"),
    ({"options": [1]}, "options must be a dict"),
    ({"strategy": "random", "options": {"nonsense": 1}}, "unknown option 'nonsense'"),
    ({"seconds": -1}, "seconds must be a number above 0"),
    ({"rep_ms": 0}, "rep_ms must be a number above 0"),
    ({"seed": -1}, "seed must be an integer"),
    ({"pre_hook": 5}, "pre_hook must be a function"),
    ({"prune_configs_by": {"early_config_prune": lambda configs, nargs, **kw: configs}},
     "prune_configs_by is triton.autotune's and not supported"),
    ({"configs": []}, "configs is triton.autotune's and not supported"),
    ({"do_bench": lambda fn, quantiles: [1.0]}, "do_bench is triton.autotune's and not supported"),
    ({"retsore_value": ["out"]}, "unknown option 'retsore_value'"),
])
def test_bad_settings_are_refused_at_decoration_in_one_line(tmp_path: Path, options: dict, says: str) -> None:
    with pytest.raises(KerntuneError, match="autotune: ") as err:
        kerntune.autotune(space=BLOCKS, key=["n"], store=str(tmp_path / "k.db"), **options)(RaisingKernel())
    assert says in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "k.db").exists()


def test_good_settings_are_still_taken(tmp_path: Path) -> None:
    k = kerntune.autotune(space=BLOCKS, key=["n"], store=str(tmp_path / "k.db"), strategy="random", budget=None,
                          seconds=5, rep_ms=2.5, seed=3, options={"batch_size": 2})(RaisingKernel())
    assert k.budget is None and k.options == {"batch_size": 2}
    assert kerntune.autotune(space=BLOCKS, key=["n"], strategy="brute_force")(RaisingKernel()).strategy == "brute_force"


ACCUMULATE = '''
import triton
import triton.language as tl


@triton.jit
def accumulate(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.atomic_add(out_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)
'''


def test_pre_and_post_hooks_run_around_each_measured_launch_as_in_triton(tmp_path: Path) -> None:
    """``pre_hook`` / ``post_hook`` raised a TypeError.  Now, as ``triton.autotune`` calls them: the pre hook
    with the launch's arguments and config by name before each launch the search measures, once more
    with ``reset_only=True`` after the search (so an accumulating kernel's output is zeroed before the
    winner's launch), the post hook after each measured launch with ``exception=None``; none of them
    around a launch of a winner already known."""
    mod = kernel_module(tmp_path / "kt_fix_acc.py", "kt_fix_acc", ACCUMULATE)
    pre: list[dict] = []
    post: list[tuple[dict, object]] = []

    def pre_hook(kwargs: dict, reset_only: bool = False) -> None:
        pre.append({"BLOCK": kwargs["BLOCK"], "n": kwargs["n"], "reset_only": reset_only})
        kwargs["out_ptr"].zero_()

    def post_hook(kwargs: dict, exception: BaseException | None) -> None:
        post.append(({"BLOCK": kwargs["BLOCK"]}, exception))

    k = kerntune.autotune(space={"params": [{"name": "BLOCK", "kind": "choice", "options": [32, 64]}],
                                 "default": {"BLOCK": 32}},
                          key=["n"], strategy="exhaustive", store=str(tmp_path / "k.db"), rep_ms=2,
                          pre_hook=pre_hook, post_hook=post_hook)(mod.accumulate)
    x, out = torch.randn(100), torch.zeros(100)
    k[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, out, 100)
    torch.testing.assert_close(out, x)   # zeroed by the reset call after the measured launches, then one launch
    measured = [p for p in pre if not p["reset_only"]]
    assert len(measured) == len(post) >= 2 and {p["BLOCK"] for p in measured} == {32, 64}
    assert all(p["n"] == 100 for p in pre) and all(exc is None for _, exc in post)
    winner = k.best[k.tuned_keys[0]][0]["BLOCK"]
    assert pre[-1] == {"BLOCK": winner, "n": 100, "reset_only": True}
    calls = len(pre), len(post)
    k[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, out, 100)  # the known winner: no hook
    assert (len(pre), len(post)) == calls
    torch.testing.assert_close(out, 2 * x)


def test_the_post_hook_gets_a_failed_launchs_exception_and_a_one_argument_pre_hook_works(tmp_path: Path) -> None:
    seen_pre: list[int] = []
    failed: list[tuple[int, str]] = []

    def post_hook(kwargs: dict, exception: BaseException | None) -> None:
        if exception is not None:
            failed.append((kwargs["BLOCK"], str(exception)))

    k = kerntune.autotune(space=BLOCKS, key=["n"], strategy="exhaustive", store=str(tmp_path / "k.db"), rep_ms=2,
                          pre_hook=lambda kwargs: seen_pre.append(kwargs["BLOCK"]),
                          post_hook=post_hook)(RaisingKernel())
    x, out = np.arange(8.0), np.zeros(8)
    k[(1,)](x, out, 8)
    np.testing.assert_allclose(out, x * 2.0)
    assert failed and all(b == 16 and "out of resources" in e for b, e in failed)
    assert 16 in seen_pre and seen_pre[-1] == k.best[k.tuned_keys[0]][0]["BLOCK"] != 16
