"""``kerntune.tune``'s ``shape`` and ``gpus``: checked as ``kerntune tune --shape`` / ``--gpus`` check
them, in one ``KerntuneError`` before the store is created.  The CPU kernel file of the measuring
workers' tests (tests/data/cpu_kernels.py: plain Python launchers, no GPU), real SQLite stores."""

from __future__ import annotations

from pathlib import Path

import pytest

import kerntune
from kerntune.errors import KerntuneError

KERNEL = Path(__file__).resolve().parent / "data" / "cpu_kernels.py"


@pytest.mark.parametrize("shape", [(2.5,), (-3,), (0, 8), (), (True,), ("8",), "8x-1", b"8"])
def test_a_shape_the_cli_refuses_is_refused_before_the_store_is_created(tmp_path: Path, shape: object) -> None:
    """A tuple went through unchecked: ``(2.5,)``, ``(-3,)`` and ``()`` ran a whole search."""
    db = tmp_path / "k.db"
    with pytest.raises(KerntuneError, match="shape"):
        kerntune.tune(kernel=KERNEL, shape=shape, strategy="random", budget=2, store=db, report=False, retime=0)
    assert not db.exists()


@pytest.mark.parametrize("gpus", ["none", "0", 0, -1, 1.5, True])
def test_a_gpu_count_the_cli_refuses_is_refused_before_the_store_is_created(tmp_path: Path, gpus: object) -> None:
    """``gpus`` went straight to the evaluator: ``"all"`` (which ``--gpus`` takes) failed in a TypeError
    after the store was created, and ``True`` ran as one GPU."""
    db = tmp_path / "k.db"
    with pytest.raises(KerntuneError, match="gpus must be a positive number of GPUs"):
        kerntune.tune(kernel=KERNEL, shape="8", strategy="random", budget=2, gpus=gpus, store=db, report=False,
                      retime=0)
    assert not db.exists()


def test_a_tuple_shape_and_gpus_all_are_taken_as_the_cli_takes_them(tmp_path: Path) -> None:
    res = kerntune.tune(kernel=KERNEL, shape=(8,), strategy="random", budget=2, gpus="all",
                        store=tmp_path / "k.db", report=False, retime=0)
    assert res.trials == 2 and res.winner is not None


def test_the_re_timing_notes_reach_the_tune_result(tmp_path: Path) -> None:
    """``kerntune tune`` prints a re-time's notes (here: the default config fails when re-timed beside the
    winner); ``kerntune.tune`` dropped them, so an API caller never learnt why there was no speedup."""
    kernel = tmp_path / "wrong_default.py"
    kernel.write_text(KERNEL.read_text().replace('default={"mode": "good", "work": 4}',
                                                 'default={"mode": "wrong", "work": 4}'))
    res = kerntune.tune(kernel=kernel, shape=(8,), strategy="random", budget=4, seed=1, store=tmp_path / "k.db",
                        report=False, retime=3)
    assert res.winner is not None and res.speedup is None
    assert any("baseline config failed when re-timed" in n and "wrong_result" in n for n in res.notes), res.notes


def test_resume_with_a_store_that_is_not_there_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    """``kerntune.tune(resume=..., store=typo)`` created the store (and its folder) before saying the run
    was not in it; ``kerntune tune --resume`` refuses it, and so does the API now."""
    from kerntune.errors import StoreError

    with pytest.raises(StoreError, match="no store at"):
        kerntune.tune(kernel=KERNEL, shape=(8,), resume="abc123", store=tmp_path / "typo" / "k.db", report=False)
    with pytest.raises(StoreError, match="no store at"):
        kerntune.compare(tmp_path / "x.json", resume="abc123", store=tmp_path / "typo" / "k.db", report=False)
    assert not (tmp_path / "typo").exists()


def test_an_empty_kerntune_store_means_the_default_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``KERNTUNE_STORE=`` opened "." (a directory) and failed; the CLI and `kerntune exec` take it as unset."""
    monkeypatch.setenv("KERNTUNE_STORE", "")
    monkeypatch.chdir(tmp_path)
    res = kerntune.tune(kernel=KERNEL, shape=(8,), strategy="random", budget=2, report=False, retime=0)
    assert res.trials == 2 and (tmp_path / ".kerntune" / "kerntune.db").exists()
