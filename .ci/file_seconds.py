"""Write tests/file_seconds.json from a pytest log run with ``--durations=0``.

`make test` runs the test files side by side with pytest-xdist, a file to one worker. A worker takes
the next file when it is nearly done with the last, so a heavy file taken last keeps one core busy
while the other idles: on CI's two cores that tail cost up to 100 s. tests/conftest.py orders the
files heaviest first from this table (longest-processing-time first). Refresh it when files are added
or change weight:

    PYTEST_ADDOPTS=--durations=0 make test > log 2>&1; python .ci/file_seconds.py log
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

LINE = re.compile(r"^(\d+(?:\.\d+)?)s (?:call|setup|teardown)\s+(tests/[^:\s]+\.py)")


def main(log: str) -> None:
    seconds: dict[str, float] = defaultdict(float)
    for line in Path(log).read_text(errors="replace").splitlines():
        m = LINE.match(line)
        if m:
            seconds[m.group(2)] += float(m.group(1))
    if not seconds:
        sys.exit(f"{log}: no duration lines (run pytest with --durations=0)")
    table = {f: round(s, 1) for f, s in sorted(seconds.items(), key=lambda kv: -kv[1])}
    out = Path(__file__).resolve().parent.parent / "tests" / "file_seconds.json"
    out.write_text(json.dumps(table, indent=0) + "\n")
    print(f"{len(table)} files, {sum(table.values()):.0f} s in all -> {out}")


if __name__ == "__main__":
    main(sys.argv[1])
