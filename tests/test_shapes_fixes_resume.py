"""``tune --resume`` of a ``tune --shapes`` run: one process at a time on a parent, the default ``--retime``
kept with a new run, and the messages of a resume given ``--shape`` or a shape's own run (a killed run's
resume with its own ``--retime``: test_shapes_fixes.py).  Real ``kerntune`` processes on CPU kernel files
(plain Python launchers in the measuring workers), real SQLite stores."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cli_runs import one_line, run_cli
from shapes_cli import kernel_file as _kernel
from shapes_cli import rows as _rows
from shapes_cli import shapes_file as _shapes
from shapes_cli import start as _start
from shapes_cli import wait_for as _wait_for

#: Appended to a kernel file: each launch takes 50 ms more while the file SLOW exists (the run is still going
#: when the test has seen its first trial), and waits while the file STOP exists (the run stays where it is
#: while a second process tries it); with both removed, the run goes on at full speed.
HELD = """
import os
_launch = launch
def launch(config, inputs):
    while os.path.exists({stop!r}):
        time.sleep(0.02)
    if os.path.exists({slow!r}):
        time.sleep(0.05)
    return _launch(config, inputs)
"""


def _status(db: Path, run_id: str) -> str:
    return _rows(db, "SELECT status FROM runs WHERE id=?", (run_id,))[0][0]


def test_a_second_process_on_a_live_shapes_run_is_refused_and_the_run_keeps_its_budget(tmp_path: Path) -> None:
    """Two processes on one ``--shapes`` run (a resume of a run still alive, or two resumes) both tuned every
    shape left: each measured twice (20 trials for a budget of 12), duplicate children, the last writer won
    the dispatch entry; a second process refused on a child's lock marked the live parent failed.  Now the
    parent is held for the whole run: a second process, with or without ``--shapes``, gets one line and
    touches nothing, and the first finishes within its budget with one child per shape."""
    slow, stop = tmp_path / "slow", tmp_path / "stop"
    slow.touch()
    kernel = _kernel(tmp_path, "held_sum", extra=HELD.format(slow=str(slow), stop=str(stop)))
    shapes = _shapes(tmp_path, "1000\n2000\n")
    db = tmp_path / "store.db"
    proc, parent = _start(tmp_path, str(kernel), "--shapes", str(shapes), "--budget", "8", "--strategy", "random",
                          "--retime", "0")
    try:
        _wait_for(proc, db, parent, done=0, trials=1)
        stop.touch()
        for extra in ([], [str(kernel), "--shapes", str(shapes)]):
            one_line(run_cli(tmp_path, "tune", "--resume", parent, *extra, timeout=300),
                     f"run {parent} is in use by another kerntune process")
            assert proc.poll() is None, "the first process ended before the second was refused"
            assert _status(db, parent) == "running"
        stop.unlink()
        slow.unlink()
        _, err = proc.communicate(timeout=300)
    finally:
        stop.unlink(missing_ok=True)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    labels = [label for (label,) in _rows(db, "SELECT label FROM runs WHERE parent_id=?", (parent,))]
    assert sorted(labels) == ["shapes 1000", "shapes 2000"]
    [(trials,)] = _rows(db, "SELECT count(*) FROM trials t JOIN runs r ON t.run_id=r.id WHERE r.parent_id=?",
                        (parent,))
    assert trials == 8
    assert _status(db, parent) == "done"


@pytest.fixture(scope="module")
def default_shapes_run(
        tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, subprocess.CompletedProcess, str, str]:
    """A finished ``tune --shapes`` run over one shape with the default ``--retime``: (its folder, the kernel
    file, the process, the parent's id, the shape's run id), shared by the two tests below."""
    tmp = tmp_path_factory.mktemp("default-shapes")
    kernel = _kernel(tmp, "default_sum")
    out = run_cli(tmp, "tune", str(kernel), "--shapes", str(_shapes(tmp, "1000\n")), "--budget", "2",
                  "--strategy", "random", timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    [(parent,)] = _rows(tmp / "store.db", "SELECT id FROM runs WHERE kind='shapes'")
    [(child,)] = _rows(tmp / "store.db", "SELECT id FROM runs WHERE parent_id=?", (parent,))
    return tmp, kernel, out, parent, child


def test_a_new_shapes_run_keeps_the_default_retime_and_a_single_shape_still_retimes(default_shapes_run) -> None:
    """``--retime`` is None where it is not typed (so that a resume can tell): a new ``--shapes`` run stores
    the default 16 and re-times, as a single shape's ``tune`` still does by default."""
    tmp, kernel, out, parent, _ = default_shapes_run
    [(options,)] = _rows(tmp / "store.db", "SELECT options_json FROM runs WHERE id=?", (parent,))
    assert json.loads(options)["retime"] == 16
    assert "(re-timed)" in out.stderr, out.stderr[-2000:]
    single = run_cli(tmp, "tune", str(kernel), "--shape", "1000", "--budget", "2", "--strategy", "random",
                     "--no-report", timeout=300)
    assert single.returncode == 0, single.stderr[-3000:]
    assert "re-timed" in single.stdout + single.stderr, (single.stdout + single.stderr)[-2000:]


def test_a_resume_of_a_shapes_run_given_shape_or_of_its_shape_given_shapes_says_what_to_do(
        default_shapes_run) -> None:
    """``tune --resume PARENT --shape 1000`` said "--shapes needs a kernel file and no --shape or --replay",
    though --shapes was not typed; ``tune --resume CHILD --shapes FILE`` said to continue it without
    --shapes, and that then said to resume the parent.  Now the first says a --shapes run takes no --shape
    and the second names the parent at once."""
    tmp, _, _, parent, child = default_shapes_run
    line = one_line(run_cli(tmp, "tune", "--resume", parent, "--shape", "1000"),
                    f"run {parent} is a --shapes run: it takes no --shape")
    assert "needs a kernel file" not in line
    line = one_line(run_cli(tmp, "tune", "--resume", child, "--shapes", str(tmp / "shapes.txt")),
                    f"run {child} is one shape of the --shapes run {parent}", f"kerntune tune --resume {parent}")
    assert "without --shapes" not in line
