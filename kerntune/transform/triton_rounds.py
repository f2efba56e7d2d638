"""What a Triton transform run needs besides its context: kernels timed in turns, its own workdir, safe writes.

``interleaved_rounds`` times several kernel files' configs in turns in one benchmark worker of a combined
harness (the evaluator's ``retime``, one round per call, the order rotating every round), for the paired
verdict of every correct rewrite and for the final re-time of the winner against the original.  A rewrite
was once accepted on its screening time alone: a byte-identical copy of the original passed at 1.25x and
1.95x on noise, and one whose ``launch`` returned a cached output passed at 10341x.

``claim_workdir`` gives each run a folder of its own: two runs started in the same second once shared one
(a timestamp to the second, ``mkdir(exist_ok=True)``) and mixed their variants and results.

``write_atomically`` writes a result through a temporary file and a rename, so that a run killed while
writing leaves the previous file whole.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from kerntune.errors import KerntuneError
from kerntune.space import Space, space_from_dict
from kerntune.transform.judging import RoundFailure


def combined_config(spaces: Sequence[Space], combined: Space, i: int, config: Mapping[str, Any]) -> dict[str, Any]:
    """Variant ``i``'s config as a config of the combined space (its missing parameters pinned)."""
    out = dict(combined.default)
    for p in combined.params:
        if p.name != "variant" and p.name not in spaces[i].names:
            out[p.name] = p.values()[0]
    out.update(config)
    out["variant"] = i
    return combined.canonical(out)


def interleaved_rounds(session: Any, harness: Path, spaces: Sequence[dict[str, Any]], labels: Sequence[str],
                       entrants: Sequence[tuple[str, int, Mapping[str, Any]]],
                       rounds: int | None) -> tuple[dict[str, list[float]] | RoundFailure, list[dict[str, Any]]]:
    """Each entrant (name, index of its variant in ``harness``, config) timed in turns in one benchmark
    worker for ``rounds`` rounds (None: the evaluator's protocol), the order rotating every round: every
    entrant's time in every round (ms), or the first turn that failed (its round and trial: the verdict
    needs its status); and the configs as the combined space has them.

    Every turn is a full window of the evaluator, its output compared with the original's reference, so a
    kernel right only on its first call (a cached output) or only sometimes (a race) fails here."""
    from kerntune.transform.triton_backend import TritonVariant
    from kerntune.transform.triton_harness import combined_space

    own = [space_from_dict(s) for s in spaces]
    space = combined_space(own, list(labels))
    configs = [combined_config(own, space, i, cfg) for _, i, cfg in entrants]
    combo = TritonVariant("combined", harness.read_text(), harness, harness, space.to_dict())
    try:
        evaluator = session.evaluator(combo, space, retime_only=True)
    except KerntuneError as exc:
        return RoundFailure(entrants[0][0], 0, None, str(exc)), configs
    times: dict[str, list[float]] = {name: [] for name, _, _ in entrants}
    try:
        n_rounds = max(int(rounds if rounds is not None else evaluator.protocol.rounds), 1)
        for r in range(n_rounds):
            order = [(k + r) % len(entrants) for k in range(len(entrants))]
            try:
                trials = evaluator.retime([configs[k] for k in order], rounds=1)
            except KerntuneError as exc:
                return RoundFailure(entrants[order[0]][0], r, None, str(exc)), configs
            for k, trial in zip(order, trials):
                if not trial.ok or trial.time_ms is None:
                    return RoundFailure(entrants[k][0], r, trial), configs
                times[entrants[k][0]].append(float(trial.time_ms))
    finally:
        evaluator.close()
    return times, configs


def claim_workdir(given: str | Path | None, stem: str) -> tuple[Path, str]:
    """A folder no other run writes to, and a note when it is not the one given.

    None: a fresh ``.kerntune/transform/STEM-TIME-XXXXXXXX`` (``mkdtemp``).  A given folder that is missing
    or empty is this run's when it creates ``variants/`` in it first (``mkdir`` is atomic: of two runs
    started together, one does); one that holds anything else (another run's files) gets a fresh subfolder,
    as the default does: the Kernel Tuner path reuses its workdir only because nothing it keeps there
    outlives the session's own start (its reference is deleted first)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    if given is None:
        base = Path(".kerntune") / "transform"
        base.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f"{stem}-{stamp}-", dir=base)), ""
    path = Path(given)
    if path.exists() and not path.is_dir():
        raise KerntuneError(f"--workdir {path}: is a file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        if not any(path.iterdir()):
            (path / "variants").mkdir()
            return path, ""
    except FileExistsError:  # another run claimed it between the look and the mkdir
        pass
    except OSError as exc:
        raise KerntuneError(f"--workdir {path}: {exc.strerror or exc}") from None
    fresh = Path(tempfile.mkdtemp(prefix=f"{stem}-{stamp}-", dir=path))
    return fresh, f"workdir {path} holds another run's files: this run's go to {fresh}"


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename: a run killed
    while writing leaves the previous file whole, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # the mode write_text gives (mkstemp's is 0600)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
