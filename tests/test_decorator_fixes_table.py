"""``@kerntune.autotune`` fixes: a model given as a spec string, a shipped dispatch table that no
longer fits the space or gives a shape twice, a winner of a small budget under ``seconds=`` alone,
an argument passed twice, and the exported ``config_for`` on a size of 0 or a shape of another
length.  CPU stand-ins for ``triton.jit`` functions (scripted: they record what they launch, and a
scripted timer gives each config its time), real SQLite stores, a real replay transcript and the
real ``kerntune cache export`` subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import kerntune
from kerntune.errors import KerntuneError
from kerntune.run.decorator_search import device_and_versions
from kerntune.store import Store
from tests.scripted import answer

TIMES = {16: 3.0, 32: 2.0, 64: 1.0, 128: 4.0}
BLOCKS = {"params": [{"name": "BLOCK", "kind": "choice", "options": [16, 32, 64, 128]}], "default": {"BLOCK": 16}}
TWO = {"params": [{"name": "BLOCK", "kind": "choice", "options": [16, 32, 64, 128]},
                  {"name": "num_warps", "kind": "choice", "options": [2, 4]}],
       "default": {"BLOCK": 16, "num_warps": 2}}


class ScriptedKernel:
    """Behaves like a JITFunction at the call site and records the config of each launch."""

    arg_names = ["x", "out", "n", "BLOCK"]
    src = "def scripted_kernel(x, out, n, BLOCK): ..."

    def __init__(self) -> None:
        self.launched: list[dict[str, Any]] = []

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        def launch(x: Any, out: Any, n: int, BLOCK: int, **launch_options: Any) -> None:
            self.launched.append({"n": n, "BLOCK": BLOCK, **launch_options})
        return launch


def _timer(kernel: ScriptedKernel) -> Callable[[Callable[[], Any]], list[float]]:
    """A scripted timer: the launch runs, and its time is its BLOCK's in ``TIMES`` (BLOCK=64 fastest)."""
    return lambda fn: (fn(), [TIMES[kernel.launched[-1]["BLOCK"]]])[1]


def _tuner(kernel: ScriptedKernel, **options: Any) -> Any:
    return kerntune.autotune(key=["n"], timer=_timer(kernel), **{"space": BLOCKS, **options})(kernel)


def _args(n: int = 8) -> tuple[np.ndarray, np.ndarray, int]:
    return np.zeros(n), np.zeros(n), n


# -- 1. llm="SPEC" ---------------------------------------------------------------------------------

def test_an_llm_spec_string_is_made_into_its_model_and_tunes_the_first_launch_scripted(tmp_path: Path) -> None:
    """``llm="replay:FILE"`` was taken at decoration and the first launch failed with AttributeError
    ('str' object has no attribute 'complete'); every other entry point takes a spec string."""
    transcript = tmp_path / "answers.jsonl"
    transcript.write_text("".join(json.dumps({"response": answer({"BLOCK": 64}, {"BLOCK": 32})}) + "\n"
                                  for _ in range(4)))
    db = tmp_path / "k.db"
    # budget past llm's 3 warm-up configs: with none left after them the model is no longer asked
    k = _tuner(ScriptedKernel(), strategy="llm", llm=f"replay:{transcript}", budget=5, store=str(db))
    k[(1,)](*_args())
    assert k.tuned_keys and next(iter(k.best.values()))[0] == {"BLOCK": 64}
    st = Store(db)
    run = st.list_runs()[0]
    assert run.strategy == "llm" and st.llm_exchanges(run.id)  # the model was asked


@pytest.mark.parametrize("llm, says", [
    ("nope:model", "unknown LLM provider 'nope'"),
    ("replay:/no/such/transcript.jsonl", "transcript not found"),
    (5, "llm must be a model spec"),
    (object(), "llm must be a model spec"),
])
def test_an_llm_that_cannot_work_is_refused_at_decoration_in_one_line(tmp_path: Path, llm: Any, says: str) -> None:
    """A bad spec, or something that is neither a spec nor a client, was accepted here and failed at
    the first launch, deep inside the search."""
    with pytest.raises(KerntuneError, match="^autotune: ") as err:
        _tuner(ScriptedKernel(), strategy="llm", llm=llm, store=str(tmp_path / "k.db"))
    assert says in str(err.value) and "\n" not in str(err.value)


# -- 2. dispatch= -----------------------------------------------------------------------------------

def _table(*rows: dict[str, Any]) -> dict[str, Any]:
    return {"format": "kerntune-dispatch/1", "kernel": "scripted_kernel",
            "entries": [{"time_ms": 1.0, **r} for r in rows]}


def test_a_stale_dispatch_table_is_refused_at_decoration_naming_each_row_and_why(tmp_path: Path) -> None:
    """Rows that no longer fit the space (a parameter renamed or gone, a value dropped) were silently
    left out, so the program tuned in-process in production instead of launching the table's config."""
    path = tmp_path / "dispatch.json"
    path.write_text(json.dumps(_table({"shape": [100], "config": {"BLOCK_SIZE": 64}},
                                      {"shape": [200], "config": {"BLOCK": 256, "num_warps": 4}},
                                      {"shape": [300], "config": {"BLOCK": 64, "num_warps": 4, "num_stages": 3}},
                                      {"shape": [400], "config": {"BLOCK": 32, "num_warps": 4}})))
    with pytest.raises(KerntuneError, match="^autotune: ") as err:
        _tuner(ScriptedKernel(), space=TWO, store=str(tmp_path / "k.db"), dispatch=path)
    said = str(err.value)
    assert str(path) in said and "3 row(s) do not fit the space" in said and "\n" not in said
    assert "100: BLOCK_SIZE: unknown parameter" in said
    assert "200: BLOCK: 256 is not allowed" in said
    assert "300: num_stages: unknown parameter" in said
    assert "400" not in said


def test_a_partial_dispatch_row_is_completed_from_the_default_and_launched_untuned(tmp_path: Path) -> None:
    """A row naming only some parameters is completed as warm starts are; it was left out (and the
    shape tuned in-process)."""
    k = _tuner(ScriptedKernel(), space=TWO, store=str(tmp_path / "k.db"),
               dispatch=_table({"shape": [8], "config": {"BLOCK": 64}}))
    k[(1,)](*_args(8))
    assert k.tuned_keys == [] and k.fn.launched == [{"n": 8, "BLOCK": 64, "num_warps": 2}]


def test_a_shape_given_twice_in_a_dispatch_table_is_refused_naming_it(tmp_path: Path) -> None:
    """Two rows of one shape silently overrode each other (the last won)."""
    table = _table({"shape": [8], "config": {"BLOCK": 64}}, {"shape": [16], "config": {"BLOCK": 32}},
                   {"shape": [8], "config": {"BLOCK": 32}})
    with pytest.raises(KerntuneError, match="^autotune: dispatch table: shape 8 given more than once"):
        _tuner(ScriptedKernel(), store=str(tmp_path / "k.db"), dispatch=table)
    on_others = _table({"shape": [8], "config": {"BLOCK": 64}, "device": "GPU A"},
                       {"shape": [8], "config": {"BLOCK": 32}, "device": "GPU B"})
    with pytest.raises(KerntuneError, match=r"shape 8 \(on 'GPU A', 'GPU B'\) given more than once"):
        _tuner(ScriptedKernel(), store=str(tmp_path / "k.db"), dispatch=on_others)


def test_of_a_shape_given_once_per_device_this_devices_row_is_launched(tmp_path: Path) -> None:
    """An exported table's rows carry their device: where exactly one row of a shape is this
    device's, it is the one launched (the last row won before, here the other device's)."""
    here = device_and_versions()[0]
    table = _table({"shape": [8], "config": {"BLOCK": 64}, "device": here},
                   {"shape": [8], "config": {"BLOCK": 32}, "device": f"not {here}"},
                   {"shape": [16], "config": {"BLOCK": 128}, "device": f"not {here}"})
    k = _tuner(ScriptedKernel(), store=str(tmp_path / "k.db"), dispatch=table)
    k[(1,)](*_args(8))
    k[(1,)](*_args(16))
    assert k.tuned_keys == [] and [launch["BLOCK"] for launch in k.fn.launched] == [64, 128]


# -- 3. seconds= alone, budget=None ---------------------------------------------------------------

def test_a_small_budgets_winner_is_searched_again_under_seconds_alone_then_kept(tmp_path: Path) -> None:
    """``budget=None`` (what ``seconds=`` alone means) counted as no wider than any stored budget,
    so a winner a ``budget=1`` search picked was served for good."""
    db = str(tmp_path / "k.db")
    small = _tuner(ScriptedKernel(), strategy="exhaustive", budget=1, store=db)
    small[(1,)](*_args())
    assert small.tuned_keys and next(iter(small.best.values()))[0] == {"BLOCK": 16}  # the default only
    wide = _tuner(ScriptedKernel(), strategy="exhaustive", seconds=60, store=db)
    wide[(1,)](*_args())
    assert wide.tuned_keys and next(iter(wide.best.values()))[0] == {"BLOCK": 64}
    again = _tuner(ScriptedKernel(), strategy="exhaustive", budget=None, store=db)
    again[(1,)](*_args())
    assert again.tuned_keys == [] and again.fn.launched == [{"n": 8, "BLOCK": 64}]  # no cap found it: kept


# -- 4. an argument passed twice --------------------------------------------------------------------

def test_an_argument_passed_by_position_and_by_keyword_is_a_type_error_naming_it(tmp_path: Path) -> None:
    """``k[g](x, out, 100, n=50)`` ran with n=50; Python and Triton raise "got multiple values"."""
    k = _tuner(ScriptedKernel(), strategy="exhaustive", store=str(tmp_path / "k.db"))
    with pytest.raises(TypeError, match="got multiple values for argument 'n'"):
        k[(1,)](np.zeros(8), np.zeros(8), 8, n=4)
    assert k.fn.launched == [] and k.tuned_keys == []


# -- 5. the exported config_for ---------------------------------------------------------------------

def test_the_exported_config_for_takes_a_size_of_zero_and_refuses_another_length(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """``config_for`` raised "math domain error" on a size of 0 (an MoE expert given no tokens), and
    matched a shape of another number of sizes on a prefix (zip)."""
    db = tmp_path / "k.db"
    st = Store(db)
    for shape, block in (("4096x4096x4096", 64), ("256x8192x8192", 32)):
        st.put_best("abc123", shape, "NVIDIA H100", "torch=2", {"BLOCK": block, "num_warps": 4}, 1.0)
    st.close()
    out = tmp_path / "configs.py"
    done = subprocess.run([sys.executable, "-m", "kerntune", "cache", "export", "--triton", "--store", str(db),
                           "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    fake = type(sys)("triton")
    fake.Config = lambda meta, **launch: {**meta, **launch}  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "triton", fake)
    ns: dict[str, Any] = {}
    exec(compile(out.read_text(), str(out), "exec"), ns)  # our own generated source
    config_for = ns["config_for"]
    assert config_for(4096, 4096, 4096) == {"BLOCK": 64, "num_warps": 4}
    # 0 counts as 1: |log2 1 - log2 256| + 1 + 1 = 10 against 12 from 4096x4096x4096
    assert config_for(0, 8192, 8192) == {"BLOCK": 32, "num_warps": 4}
    assert config_for(0, 4096, 4096) == {"BLOCK": 32, "num_warps": 4}
    with pytest.raises(ValueError, match="2 sizes, no tuned shape has as many"):
        config_for(4096, 4096)
    with pytest.raises(ValueError, match="4 sizes"):
        config_for(4096, 4096, 4096, 1)


def test_a_local_model_spec_is_not_loaded_at_decoration() -> None:
    """``llm="local:"`` loads a model in-process: built at decoration, it cost every import of a decorated
    module seconds and memory, though each key may be served from the store.  It is built at the first
    search (``Autotuned.llm``), and stays the spec until then."""
    k = _tuner(ScriptedKernel(), strategy="llm", llm="local:", store=None)
    assert k._llm == "local:"
