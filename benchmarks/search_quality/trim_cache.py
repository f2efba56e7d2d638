"""Trim a Kernel Tuner cache file for the repository: keep per configuration the
parameters, ``time``, ``compile_time``, ``benchmark_time``, ``verification_time`` and the
throughput field (``GFLOP/s`` or ``GB/s``), rounded to 6 decimals; drop the individual
``times``, timestamps and framework overheads (they make the files 5-20x larger and no
kerntune reader uses them).  Failed configurations keep their failure string.

    python benchmarks/search_quality/trim_cache.py SRC.json.gz DST.json.gz
"""

from __future__ import annotations

import gzip
import json
import sys

KEEP = ("time", "compile_time", "GFLOP/s", "GB/s", "verification_time", "benchmark_time")


def trim(src: str, dst: str) -> None:
    data = json.load(gzip.open(src, "rt"))
    keys = data["tune_params_keys"]
    cache = {}
    for k, entry in data["cache"].items():
        out = {p: entry[p] for p in keys}
        for f in KEEP:
            if f in entry:
                v = entry[f]
                out[f] = round(v, 6) if isinstance(v, float) else v
        cache[k] = out
    data["cache"] = cache
    with gzip.open(dst, "wt", compresslevel=9) as fh:
        json.dump(data, fh, separators=(",", ":"))


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):  # usage, not an IndexError
        print(__doc__)
        sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
    trim(sys.argv[1], sys.argv[2])
