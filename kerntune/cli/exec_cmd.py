"""``kerntune exec -- CMD``: run a program with its ``triton.autotune`` kernels retuned by kerntune."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer

from kerntune.errors import KerntuneError


def exec_(
    command: list[str] = typer.Argument(..., help="The program and its arguments (after --)"),
    store: Optional[str] = typer.Option(None, "--store", help="Store of the winners (default .kerntune/kerntune.db)"),
    strategy: Optional[str] = typer.Option(None, "--strategy", help="Strategy that searches each autotune list "
                                           "(default bayes)"),
    budget: Optional[str] = typer.Option(None, "--budget", help="Measurements per (kernel, key): a share of the "
                                         "list (default 1: all of it, as triton.autotune measures; 0.5: half, which "
                                         "picked a 20% slower config on one FLA kernel) or a count"),
    cut: Optional[str] = typer.Option(None, "--cut", help="A config whose first two launches take this many times "
                                      "the best time so far gets no timing window (default 1.25; 0: off)"),
    runoff: Optional[str] = typer.Option(None, "--runoff", help="Leaders re-timed, their launches interleaved: auto "
                                         "(the default: those within 25% in one short interleaved round of "
                                         "every config within 50%, at most 6, 2-6 rounds until settled), "
                                         "N (the N fastest, 5 rounds), 0 (off)"),
    overlap: Optional[str] = typer.Option(None, "--overlap", help="1 (the default): time each config as soon as "
                                          "it is compiled, while the list's other compiles run; 0: compile all first"),
) -> None:
    """Run COMMAND with every triton.autotune kernel tuned once by kerntune and its winner kept in the store;
    later runs load the winners without measuring (see kerntune.retune).  An option not given leaves
    its KERNTUNE_AUTOTUNE_* variable as the environment has it; a bad one stops here."""
    if not command:
        raise KerntuneError("kerntune exec needs a command, e.g. kerntune exec -- python train.py")
    from kerntune.retune import check_exec_options

    # the program's own checks, here: a bad option would only turn the switch off in the program
    check_exec_options(strategy=strategy, budget=budget, cut=cut, runoff=runoff, overlap=overlap)
    site = Path(__file__).resolve().parents[1] / "retune_site"
    # KERNTUNE_EXEC_ANNOUNCE: a Python process whose switch turns on says so on stderr, unless its Python
    # parent did (retune_site); no line: no process ran under the switch (its own PYTHONPATH, python -E or -I)
    env = dict(os.environ, KERNTUNE_AUTOTUNE="1", KERNTUNE_EXEC_ANNOUNCE="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p))
    # absolute, whatever gave it: the program (or a process it starts) may change directory first
    env["KERNTUNE_STORE"] = str(Path(store or os.environ.get("KERNTUNE_STORE") or ".kerntune/kerntune.db").resolve())
    if strategy is not None:
        env["KERNTUNE_AUTOTUNE_STRATEGY"] = strategy
    if budget is not None:
        env["KERNTUNE_AUTOTUNE_BUDGET"] = budget
    if cut is not None:
        env["KERNTUNE_AUTOTUNE_CUT"] = cut
    if runoff is not None:
        env["KERNTUNE_AUTOTUNE_RUNOFF"] = runoff
    if overlap is not None:
        env["KERNTUNE_AUTOTUNE_OVERLAP"] = overlap
    # The program takes this process's place (as ``env`` and ``nohup`` do): Ctrl-C and a SIGTERM from
    # ``timeout`` or a scheduler reach it and nothing else, its shutdown handlers run to their end, and
    # its exit status, a death by signal included, is the caller's.  A child under ``subprocess.call``
    # was killed 0.25 s after Ctrl-C, missed a SIGTERM sent to kerntune, and a SIGKILL read as 247.
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        raise KerntuneError(f"cannot run {command[0]!r}: {exc.strerror or exc}") from None
