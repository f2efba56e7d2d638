"""What ``launch_noise.py`` recorded, in the figures the README quotes: per config the median
within-window spread of launches, the windows' B/A ratio, and across windows the SM clock range, the
power range, the throttle reasons seen and the correlation of a window's median time with its mean
clock (nvidia-smi samples falling inside the window).  No GPU needed.

    python benchmarks/real_kernels/diagnosis/launch_noise_summary.py benchmarks/results/real_kernels/h100/diagnosis/launch_noise_train.json

The nvidia-smi samples are read from the file beside it with ``.smi.csv`` in place of ``.json``."""
import datetime
import json
import statistics as st
import sys
from pathlib import Path


def main(path: str) -> None:
    d = json.loads(Path(path).read_text())
    smi = []
    for line in Path(path[: -len(".json")] + ".smi.csv").read_text().splitlines():
        p = [x.strip() for x in line.split(",")]
        try:
            t = datetime.datetime.strptime(p[0], "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc)
            smi.append((t.timestamp(), float(p[1]), float(p[2]), p[4]))
        except (ValueError, IndexError):
            continue
    clock, power, ms = [], [], []
    for e in d["events"]:
        a, b = d["t_base"] + e["t0"], d["t_base"] + e["t1"]
        inside = [s for s in smi if a <= s[0] <= b]
        if inside:
            clock.append(st.mean(s[1] for s in inside))
            power.append(st.mean(s[2] for s in inside))
            ms.append(st.median(e["ms"]))
    n, mc, mm = len(ms), st.mean(clock), st.mean(ms)
    corr = sum((c - mc) * (m - mm) for c, m in zip(clock, ms)) / (st.pstdev(clock) * st.pstdev(ms) * n)
    for long in (False, True):
        rows = [e for e in d["events"] if (e["round"] >= 1000) == long]
        med = {"A": [], "B": []}
        for e in rows:
            med[e["cfg"]].append(st.median(e["ms"]))
        ratios = sorted(b / a for a, b in zip(med["A"], med["B"]))
        spread = {k: st.median(st.pstdev(e["ms"]) / st.mean(e["ms"]) for e in rows if e["cfg"] == k) for k in "AB"}
        print(f"{'200 ms' if long else '50 ms'} windows: B/A median {st.median(ratios):.3f} "
              f"(quartiles {ratios[len(ratios) // 4]:.3f}-{ratios[3 * len(ratios) // 4]:.3f}); "
              f"launch spread within a window (cv) A {spread['A']:.3f}, B {spread['B']:.3f}")
    print(f"{n} windows with clock samples: SM clock {min(clock):.0f}-{max(clock):.0f} MHz, power "
          f"{min(power):.0f}-{max(power):.0f} W, corr(clock, window ms) {corr:.2f}, "
          f"throttle reasons {sorted({s[3] for s in smi})}")


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):  # usage, not an IndexError
        print(__doc__)
        sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
    main(sys.argv[1])
