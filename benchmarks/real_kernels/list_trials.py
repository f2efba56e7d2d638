"""Every config the in-place switch timed, in the order it timed them, from the stores that
``inplace_vs_autotune.py --stores DIR`` keeps (one SQLite store per kernel, shape and variant):

    python benchmarks/real_kernels/list_trials.py DIR/*.db > trials.txt

One line per trial: its order, status, time in ms (a cut config's is its two-launch time), seconds it
cost, config and extra (``{"cut": true}`` for a config that got no timing window); then each store's
winner.  This is how the ``inplace_trials_*.txt`` files beside the results were made."""

from __future__ import annotations

import sqlite3
import sys


def main(paths: list[str]) -> None:
    for path in paths:
        db = sqlite3.connect(path)
        print("==", path)
        for seq, status, ms, bench_s, cfg, extra in db.execute(
                "select seq, status, time_ms, bench_s, config_json, extra_json from trials order by run_id, seq"):
            print(seq, status, f"{ms:.4f}" if ms else None, f"{bench_s:.3f}" if bench_s else None, cfg, extra or "{}")
        for cfg, ms in db.execute("select config_json, time_ms from best_configs"):
            print("best", cfg, f"{ms:.4f}")
        db.close()


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):  # usage, not an IndexError
        print(__doc__)
        sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
    main(sys.argv[1:])
