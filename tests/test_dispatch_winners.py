"""What reaches the dispatch table (the store's ``best_configs``) and whom a table row is launched for.

1. A later run's winner did not replace the stored entry unless its time was lower, though times taken
   in two processes under other conditions (a loaded machine) are not comparable: ``tune --shapes``
   printed its winner as the dispatch table while ``cache export`` kept the earlier run's pick.  Now a
   run that measured the stored config itself replaces it; otherwise the faster is kept and said.
2. A ``dispatch=`` row was launched for calls of every dtype.  ``cache export --json`` now writes the
   dtypes of the decorator's own winners, and the decorator launches such a row only for calls of those
   dtypes; a row naming none is launched as before, with a warning.

Real SQLite stores; a real ``kerntune tune`` process on a CPU kernel file; scripted
evaluators and CPU stand-ins for ``triton.jit`` functions (with scripted timers) where a test needs set times.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pytest

import kerntune
from cli_runs import run_cli
from kerntune.cli import main
from kerntune.errors import KerntuneError
from kerntune.evaluate import Status, Trial
from kerntune.evaluate.base import Evaluator
from kerntune.evaluate.triton_backend.kernel_file import source_hash
from kerntune.run.shapes import tune_shapes
from kerntune.space import Choice, Space
from kerntune.store import Store

#: A CPU kernel file whose launch takes (9 - work) ms plus $LOAD_S s: work=8 is fastest, work=1 the default.
KERNEL = '''
import os, time
from kerntune.space import Choice, Space
name = "cost"
space = Space([Choice("work", options=(1, 2, 3, 4, 5, 6, 7, 8))], default={"work": 1})
def make_inputs(shape):
    return ([1.0] * shape[0],)
def launch(config, inputs):
    time.sleep((9 - config["work"]) * 1e-3 + float(os.environ.get("LOAD_S", "0")))
    return [sum(inputs[0])]
'''


class LoadedEvaluator(Evaluator):
    """Scripted: config ``work`` takes (9 - work) * 0.1 ms plus ``load_ms`` (a loaded machine); every
    instance is the same kernel on the same device, as two processes on one file are."""

    name = "scripted"

    def __init__(self, load_ms: float = 0.0) -> None:
        super().__init__(Space([Choice("work", options=tuple(range(1, 9)))], default={"work": 1}))
        self.load_ms = load_ms

    def evaluate(self, configs: Sequence[dict[str, Any]]) -> list[Trial]:
        times = [(9 - c["work"]) * 0.1 + self.load_ms for c in configs]
        return [Trial(dict(c), Status.OK, t, [t]) for c, t in zip(configs, times)]

    def device(self) -> dict[str, Any]:
        return {"name": "scripted GPU"}

    def workload(self) -> dict[str, Any]:
        return {"kernel_name": "cost", "problem_size": [64]}

    def describe(self) -> dict[str, Any]:
        return {"evaluator": self.name, "source_hash": "c0ffee0000000000"}


def _shapes(store: Store, budget: int, load_ms: float = 0.0) -> Any:
    """One ``--shapes`` run of the shape 64 (exhaustive, no warm start: only what ``budget`` reaches)."""
    result, = tune_shapes(lambda s: LoadedEvaluator(load_ms), [(64,)], "exhaustive", budget, store, warm=False)
    return result


def _entry(store: Store) -> dict[str, Any]:
    entry, = store.iter_best()
    return entry


# -- 1. which winner the dispatch table keeps --------------------------------------------------------------------

def test_a_later_shapes_run_that_measured_the_stored_config_replaces_it_though_slower_scripted(tmp_path: Path) -> None:
    """The reproduction: a budget-2 run stores work=2; a later run under load measures every config,
    work=2 among them, and picks work=8 at a higher time.  Its winner was printed as the dispatch table
    while the table kept work=2, since the stored time was lower."""
    store = Store(tmp_path / "kt.db")
    first = _shapes(store, budget=2)
    assert _entry(store)["config"] == first.best_config == {"work": 2}
    # its versions as `tune` writes them for an evaluator that reports no Triton (--shapes wrote "")
    assert _entry(store)["versions"] == "torch=None,triton=None"
    later = _shapes(store, budget=8, load_ms=2.0)
    assert later.best_config == {"work": 8} and later.best_ms > first.best_ms
    entry = _entry(store)
    assert entry["config"] == {"work": 8} and entry["run_id"] == later.run_id
    assert later.in_table and not later.notes


def test_a_slower_run_that_never_measured_the_stored_config_keeps_it_and_says_so_scripted(tmp_path: Path) -> None:
    """A narrower later run (budget 1: the default only) must not displace a config it never compared
    with; the table keeps it, and the shape's result says so instead of passing as the table's."""
    store = Store(tmp_path / "kt.db")
    wide = _shapes(store, budget=8)
    narrow = _shapes(store, budget=1, load_ms=2.0)
    assert narrow.best_config == {"work": 1}
    assert _entry(store)["run_id"] == wide.run_id
    assert narrow.notes == [f'the dispatch table keeps {{"work": 8}} (run {wide.run_id}, 0.1 ms), faster than'
                            " this run's winner"]
    assert not narrow.in_table


def test_the_printed_table_marks_a_winner_the_dispatch_table_did_not_take_scripted(tmp_path: Path) -> None:
    """``tune --shapes``' closing table was titled "dispatch table" and listed this run's winner where
    the table had kept another run's entry; now such a row is marked and the title says so."""
    from rich.console import Console

    from kerntune.cli.shapes_cmd import winners_table

    store = Store(tmp_path / "kt.db")
    wide = _shapes(store, budget=8)
    narrow = _shapes(store, budget=1, load_ms=2.0)

    def text(results: list) -> str:
        console = Console(width=200, record=True)
        console.print(winners_table(results))
        return console.export_text()

    assert "dispatch table:" in text([wide]) and " *" not in text([wide])
    shown = text([narrow])
    assert "this run's winners (1 not in the dispatch table: *)" in shown and '{"work": 1} *' in shown


def test_the_same_config_kept_from_another_run_is_this_runs_winner_in_the_table(tmp_path: Path) -> None:
    """Two runs whose winner is the same config (a re-timed baseline neither search measured): the
    second was told the table "keeps" that very config from the first run and was marked not in it."""
    from kerntune.evaluate import Status, Trial
    from kerntune.run.winner import store_winner

    st = Store(tmp_path / "s.db")
    a, b = st.create_run("tune", strategy="random"), st.create_run("tune", strategy="random")
    base = {"BM": 64, "W": 4}
    assert store_winner(st, "h", "64x64", "GPU", "v", base, 1.00, a, [Trial({"BM": 16, "W": 4}, Status.OK, 2.0)]) is None
    assert store_winner(st, "h", "64x64", "GPU", "v", base, 1.02, b, [Trial({"BM": 32, "W": 4}, Status.OK, 2.0)]) is None
    assert st.best_entry("h", "64x64", "GPU", "v")["config"] == base


def test_an_entry_whose_run_the_store_does_not_hold_is_replaced_scripted(tmp_path: Path) -> None:
    """An entry with no comparable origin (its run deleted or never stored) says nothing about this
    run's conditions: it is replaced even by a slower winner, which it was not."""
    store = Store(tmp_path / "kt.db")
    store.put_best("c0ffee0000000000", "64", "scripted GPU", "torch=None,triton=None", {"work": 5}, 0.01, "gone-run")
    result = _shapes(store, budget=1, load_ms=2.0)
    assert _entry(store)["run_id"] == result.run_id and result.in_table and not result.notes


def test_tune_says_when_the_dispatch_table_keeps_a_faster_entry_of_another_run(tmp_path: Path) -> None:
    """An earlier run (stored as ``kerntune tune`` stores one) put work=8 at 0.5 ms in the table;
    ``kerntune tune`` under load with budget 1 measures only the default.  Its winner stays out of the
    table (it never compared with the stored config), and it now says so: it printed its winner with no
    word that the table holds another.  No GPU is made visible, so the device is "unknown GPU" here and
    on a GPU machine alike."""
    kernel = tmp_path / "cost.py"
    kernel.write_text(KERNEL)
    with Store(tmp_path / "store.db") as st:
        earlier = st.create_run("tune", strategy="exhaustive", seed=0,
                                evaluator={"evaluator": "triton", "kernel_file": str(kernel), "kernel_name": "cost"})
        st.finish_run(earlier)
        st.put_best(source_hash(kernel), "64", "unknown GPU", "torch=None,triton=None", {"work": 8}, 0.5, earlier)
    narrow = run_cli(tmp_path, "tune", str(kernel), "--shape", "64", "--strategy", "exhaustive", "--budget", "1",
                     "--retime", "0", "--no-report", env={"LOAD_S": "0.005", "CUDA_VISIBLE_DEVICES": ""})
    assert narrow.returncode == 0, narrow.stderr[-2000:]
    assert 'config: {"work": 1}' in narrow.stdout
    said = f'note: the dispatch table keeps {{"work": 8}} (run {earlier}, 0.5 ms), faster than this run\'s winner'
    assert said in narrow.stderr, narrow.stderr[-2000:]
    with Store(tmp_path / "store.db") as st:
        assert _entry(st)["run_id"] == earlier


# -- 2. a dispatch row and the call's dtypes ---------------------------------------------------------------------

SPACE = {"params": [{"name": "BLOCK", "kind": "choice", "options": [16, 32, 64, 128]}], "default": {"BLOCK": 16}}


class TableKernel:
    """A CPU stand-in for a ``triton.jit`` function keyed by (M, N): records the BLOCK of each launch."""

    arg_names = ["x", "M", "N", "BLOCK"]
    src = "def table_kernel(x, M, N, BLOCK): ..."

    def __init__(self) -> None:
        self.launched: list[int] = []

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        def launch(x: Any, M: int, N: int, BLOCK: int) -> None:
            self.launched.append(BLOCK)
        return launch


def _autotuned(store: Path, fastest: int, **options: Any) -> Any:
    """The decorated stand-in; a scripted timer makes BLOCK ``fastest`` the fastest config."""
    kernel = TableKernel()
    timer = lambda fn: (fn(), [1.0 if kernel.launched[-1] == fastest else 2.0])[1]  # noqa: E731
    return kerntune.autotune(space=SPACE, key=["M", "N"], strategy="exhaustive", timer=timer, store=str(store),
                             **options)(kernel)


def test_an_exported_row_names_its_dtypes_and_launches_only_for_calls_of_them_scripted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An fp16 winner exported as a table was launched for an fp64 call too (the export held no
    dtypes, and the decorator looked rows up by the key values alone); a decorator-only store could not
    be exported at all."""
    dev = tmp_path / "dev.db"
    tuned = _autotuned(dev, fastest=128)
    tuned[(1,)](np.zeros(4, dtype=np.float16), 64, 128)
    assert tuned.fn.launched[-1] == 128
    with pytest.raises(SystemExit) as ended:
        main(["cache", "export", "--json", "--store", str(dev)])
    out = capsys.readouterr()
    assert ended.value.code in (0, None), out.err
    table = json.loads(out.out)
    row, = table["entries"]
    assert (row["shape"], row["key"], row["dtypes"], row["config"]) == ([64, 128], ["M", "N"], {"x": "float16"},
                                                                        {"BLOCK": 128})
    # a reader that predates key and dtypes would read the shape in sorted key order as M, N, K and
    # launch it for every dtype: such a table has its own format, which that reader refuses
    assert table["format"] == "kerntune-dispatch/2"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a row that names its dtypes is served without a word
        shipped = _autotuned(tmp_path / "prod.db", fastest=32, dispatch=table, on_miss="nearest")
        shipped[(1,)](np.zeros(4, dtype=np.float16), 64, 128)
        shipped[(1,)](np.zeros(4, dtype=np.float64), 64, 128)  # no fp64 row: no guess from the fp16 one
    assert shipped.fn.launched[0] == 128 and shipped.fn.launched[-1] == 32
    assert [json.loads(k)["(dtypes)"] for k in shipped.tuned_keys] == [{"x": "float64"}]
    # a row keyed by other arguments is refused at decoration, not matched by position
    other = {**table, "entries": [{**row, "key": ["rows", "cols"]}]}
    with pytest.raises(KerntuneError, match="a row keyed by rows, cols, this kernel's key is M, N"):
        _autotuned(tmp_path / "prod.db", fastest=32, dispatch=other)


def test_a_row_that_names_no_dtypes_is_launched_for_any_dtype_with_one_warning_scripted(tmp_path: Path) -> None:
    """The reproduction: one row without dtypes, calls of float16 then float64: both launched BLOCK 128,
    as before (older tables, ``tune`` rows), but now the decorator says once that the table names no dtype."""
    table = {"format": "kerntune-dispatch/1", "kernel": "table_kernel",
             "entries": [{"shape": [1024, 1024], "config": {"BLOCK": 128}, "time_ms": 1.0}]}
    k = _autotuned(tmp_path / "k.db", fastest=32, dispatch=table)
    with pytest.warns(UserWarning, match="the dispatch table names no dtypes") as said:
        k[(1,)](np.zeros(4, dtype=np.float16), 1024, 1024)
        k[(1,)](np.zeros(4, dtype=np.float64), 1024, 1024)
    assert k.fn.launched == [128, 128] and k.tuned_keys == []
    assert len([w for w in said if "names no dtypes" in str(w.message)]) == 1
