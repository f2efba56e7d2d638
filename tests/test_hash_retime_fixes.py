"""A package kernel's source hash and the re-timed winner.

1. A package-form kernel file (``kernel``, ``make_inputs``, ``call``) and kerntune's own adapters were
   hashed by the package's kernel alone: two files with other inputs or calls were one kernel, so
   ``tune --resume`` took an edited file (float32 and float64 trials in one run) and the cache kept one
   winner for both; an edit to an adapter's inputs (TVD's, commit 34c9386) left its old runs and
   winners the same kernel's.
2. ``confirm`` kept the runoff's pick as the winner whatever its rounds read beside the baseline: a
   pick re-timed slower than the package's own choice beyond noise was printed as best and cached.

Real parts: tests/data/fake_package's Triton kernel, the CLI in subprocesses on Triton's interpreter
(CPU), a real worker process timing a kernel file's launches on the wall clock; one scripted evaluator.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# Triton's interpreter before triton is first imported in this process: a test file run after this one in
# the same pytest process (test_package_kernels.py) needs it, and a triton imported without it stays so.
os.environ.setdefault("TRITON_INTERPRET", "1")

from cli_runs import PACKAGE_ROOT, no_llm_env, one_line  # noqa: E402
from kerntune.evaluate.retime import confirm  # noqa: E402
from kerntune.evaluate.trial import Status, Trial  # noqa: E402
from kerntune.evaluate.triton_backend.kernel_file import load_kernel_module, source_hash  # noqa: E402

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")

DATA = Path(__file__).parent / "data"

PACKAGE_FORM = '''
import torch
from fake_package.ops import scale_kernel as kernel, scale

def make_inputs(shape):
    return (torch.randn(shape[0], dtype=torch.float32),)

def call(inputs):
    return scale(inputs[0], 2.0)
'''

PLAIN = (DATA / "cpu_kernels.py").read_text()


def _in_path() -> None:
    """fake_package importable in this process (as the CLI children get it on PYTHONPATH)."""
    if str(DATA) not in sys.path:
        sys.path.insert(0, str(DATA))


def _cli(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    """``kerntune ARGS`` in ``tmp`` (store ``tmp/store.db``) on Triton's interpreter, with fake_package
    importable."""
    env = dict(no_llm_env(), TRITON_INTERPRET="1", KERNTUNE_STORE=str(tmp / "store.db"),
               PYTHONPATH=os.pathsep.join([str(DATA), str(PACKAGE_ROOT)]))
    return subprocess.run([sys.executable, "-m", "kerntune", *args], cwd=tmp, capture_output=True, text=True,
                          timeout=300, env=env)


def _run_ids(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT id FROM runs")]


# -- 1. the source hash ---------------------------------------------------------------------------------
def test_package_form_files_with_other_inputs_or_call_hash_differently(tmp_path: Path) -> None:
    """user_v1/user_v2 of the review (float32 x 2.0 against float64 x 3.0) both hashed 1d21d23479bcab42."""
    _in_path()
    one, two = tmp_path / "one.py", tmp_path / "two.py"
    one.write_text(PACKAGE_FORM)
    two.write_text(PACKAGE_FORM.replace("float32", "float64").replace("2.0", "3.0"))
    h1, h2 = (source_hash(p, load_kernel_module(p)) for p in (one, two))
    assert h1 != h2
    again = tmp_path / "elsewhere" / "one.py"  # the same file elsewhere: the same kernel
    again.parent.mkdir()
    again.write_text(PACKAGE_FORM)
    assert source_hash(again, load_kernel_module(again)) == h1


def test_an_edit_to_a_builtin_adapters_inputs_is_a_new_kernel(tmp_path: Path) -> None:
    """liger.tvd's inputs as they were before 34c9386 (p and q drawn alike) against today's: the same
    package kernel, so the same hash, and runs and cached winners of the old inputs were taken as the
    new one's.  The adapter module's source is part of the hash; an unedited copy keeps it."""
    _in_path()
    from fake_package import ops

    from kerntune.adapters.target import PackageTarget

    liger = importlib.import_module("kerntune.adapters.liger")
    text = Path(liger.__file__).read_text()
    today = "randn(rows, vocab, scale=2.0, index=1)"
    assert today in text

    def tvd_of(source: str, name: str) -> Any:
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        full = f"kerntune.adapters.{name}"  # (a name inside kerntune.adapters, as the shipped modules have)
        spec = importlib.util.spec_from_file_location(full, path)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[full] = module
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        return next(a for a in module.ADAPTERS if a.name == "liger.tvd")

    try:
        old = tvd_of(text.replace(today, "randn(rows, vocab, scale=2.0)"), "liger_hashfix_old")
        copy = tvd_of(text, "liger_hashfix_copy")
    finally:
        for name in ("liger_hashfix_old", "liger_hashfix_copy"):
            sys.modules.pop(f"kerntune.adapters.{name}", None)
    shipped = next(a for a in liger.ADAPTERS if a.name == "liger.tvd")

    def hashed(adapter: Any) -> str:  # the fake package's kernel stands in for liger's (not installed here)
        return PackageTarget(adapter, kernel=ops.scale_kernel).source_hash()

    assert hashed(old) != hashed(shipped)
    assert hashed(copy) == hashed(shipped)


@pytest.mark.parametrize("form", ["plain", "package"])
def test_an_edited_kernel_file_is_refused_on_resume(tmp_path: Path, form: str) -> None:
    """A plain kernel file edited between a run and its resume is refused (its bytes are its hash); a
    package-form file was not: the resume went on and mixed float32 and float64 trials in one run."""
    path = tmp_path / "kern.py"
    path.write_text(PLAIN if form == "plain" else PACKAGE_FORM)
    args = ["tune", str(path), "--shape", "64", "--budget", "2", "--retime", "0", "--no-report", "--gpus", "1"]
    first = _cli(tmp_path, *args)
    assert first.returncode == 0, first.stderr[-2000:]
    [rid] = _run_ids(tmp_path / "store.db")
    if form == "plain":
        path.write_text(PLAIN.replace("return ([float(i % 7)", "return ([float(i % 5)"))
    else:
        path.write_text(PACKAGE_FORM.replace("float32", "float64"))
    refused = _cli(tmp_path, *args, "--resume", rid)
    one_line(refused, f"cannot resume {rid}", "source_hash")


# -- 2. the re-timed winner -----------------------------------------------------------------------------
COSTS = '''
import time
from kerntune.space import Choice, Space

name = "cpu_costs"
space = Space([Choice("n", options=(0, 1, 2))], default={"n": 0})
# the default (the baseline) is far the cheapest launch; the search's leaders are 1 and 2
COST_MS = {0: 0.5, 1: 4.0, 2: 6.0}

def make_inputs(shape):
    return ([1.0] * shape[0],)

def reference(inputs):
    return [sum(inputs[0])]

def launch(config, inputs):
    time.sleep(COST_MS[config["n"]] / 1000)
    return [sum(inputs[0])]
'''


def test_a_runoff_pick_re_timed_slower_than_the_baseline_leaves_the_baseline_the_winner(tmp_path: Path) -> None:
    """A real worker: the runoff picks the cheaper of the two leaders (4 ms), the baseline (0.5 ms, never
    among the leaders) re-times far faster; before, the 4 ms pick was the winner (printed and cached)."""
    from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator

    path = tmp_path / "costs_kernel.py"
    path.write_text(COSTS)
    ev = TritonEvaluator(path, (10,), compile_workers=1, compile_timeout=20.0, bench_timeout=20.0, rep_ms=5)
    try:
        history = [Trial({"n": 1}, Status.OK, 1.0, [1.0]), Trial({"n": 2}, Status.OK, 1.1, [1.1])]
        found = confirm(ev, history, n_leaders=5, baseline={"n": 0}, rounds=6)
    finally:
        ev.close()
    assert found.verdict == "slower", found.to_dict()
    assert found.winner is found.baseline and found.winner.config == {"n": 0}
    assert found.runoff is not None and found.pick is not None and found.pick.config == {"n": 1}
    assert any("slower beyond noise: the baseline stays the winner" in n for n in found.notes), found.notes
    assert found.to_dict()["winner"]["config"] == {"n": 0} and found.to_dict()["pick"]["config"] == {"n": 1}


class _ScriptedEvaluator:
    """A scripted evaluator: a runoff that picks config 1, and re-timing rounds that read it
    ``ratio`` of the baseline's speed (the baseline at 1 ms every round)."""

    def __init__(self, space: Any, ratio: float) -> None:
        self.space, self.ratio = space, ratio

    def runoff(self, configs: list[dict], times: list[float]) -> dict[str, Any]:
        return {"winner": next(i for i, c in enumerate(configs) if c["n"] == 1), "screen": {}, "rounds": {}}

    def retime(self, configs: list[dict], rounds: int | None = None) -> list[Trial]:
        out = []
        for c in configs:
            ms = 1.0 if c["n"] == 0 else 1.0 / self.ratio
            rows = [ms * (1 + 0.001 * i) for i in range(rounds or 10)]
            out.append(Trial(dict(c), Status.OK, ms, rows, extra={"rounds_ms": rows}))
        return out


@pytest.mark.parametrize("ratio, winner", [(0.89, 0), (1.3, 1)])
def test_scripted_re_timing_keeps_the_pick_only_where_it_is_not_slower_than_the_baseline(
        ratio: float, winner: int) -> None:
    """The review's 0.890x pick (BLOCK 4096 against the package's 256) was the winner; a faster one
    still is, and its speedup stands."""
    from kerntune.space import Choice, Space

    space = Space([Choice("n", options=(0, 1, 2))], default={"n": 0})
    history = [Trial({"n": 1}, Status.OK, 1.0, [1.0]), Trial({"n": 2}, Status.OK, 1.05, [1.05])]
    found = confirm(_ScriptedEvaluator(space, ratio), history, baseline={"n": 0}, rounds=10)
    assert found.winner is not None and found.winner.config == {"n": winner}
    assert found.speedup is not None and found.speedup.median == pytest.approx(ratio, rel=0.01)
    assert (found.pick is not None) == (winner == 0)
    assert json.loads(json.dumps(found.to_dict()))["winner"]["config"] == {"n": winner}


@pytest.mark.parametrize("ratio, shown", [(0.89, False), (1.3, True)])
def test_scripted_tune_prints_no_speedup_line_where_the_baseline_stayed_the_winner(
        ratio: float, shown: bool, capsys: pytest.CaptureFixture[str]) -> None:
    """``tune`` printed "speedup over the default config: 0.890x (slower)" beside a best that was the
    baseline's own config: the pick's figure, where the note already says the baseline stays.  A faster
    pick's speedup is still printed."""
    from kerntune.cli.tune_cmd import _confirm
    from kerntune.space import Choice, Space

    space = Space([Choice("n", options=(0, 1, 2))], default={"n": 0})
    history = [Trial({"n": 1}, Status.OK, 1.0, [1.0]), Trial({"n": 2}, Status.OK, 1.05, [1.05])]
    winner = _confirm(_ScriptedEvaluator(space, ratio), history, 5)
    out = capsys.readouterr()
    assert winner is not None and winner.config == {"n": 0 if not shown else 1}
    assert ("speedup over the default config" in out.out + out.err) == shown, out
