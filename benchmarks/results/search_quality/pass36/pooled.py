"""The thirty-sixth pass's tables (run from the repository root):
    python benchmarks/results/search_quality/pass36/pooled.py
Seed 4000: the default against tabu_until 0.5 on the seven long-cutoff recordings (this pass's JSON).
Pooled: the same per space over seeds 1000-4000 (60 repeats each; seeds 1000-3000 are the
twenty-fifth / twenty-seventh passes' files). A pooled score is the mean of the seeds' scores, its
standard error sqrt(sum se^2) / seeds; a difference's standard error combines the two rows'."""
import json
import math
from pathlib import Path

R = Path("benchmarks/results/search_quality")
FILES = {
    "default": {1000: ["pass24/align_glogfit_gs0.5_s1000.json", "pass24/align_glogfit_gs0.5_rest_s1000.json"],
                2000: ["pass25/align_glogfit_gs0.5_all_s2000.json"],
                3000: ["pass24/align_glogfit_gs0.5_conv_s3000.json", "pass25/align_glogfit_gs0.5_rest_s3000.json"],
                4000: ["pass36/default_dev_s4000.json", "pass36/default_heldout_s4000.json"]},
    "tabu_until 0.5": {1000: ["pass27/tu0.5_conv_s1000.json", "pass27/tu0.5_rest_s1000.json"],
                       2000: ["pass27/tu0.5_conv_s2000.json", "pass27/tu0.5_rest_s2000.json"],
                       3000: ["pass27/tu0.5_conv_s3000.json", "pass27/tu0.5_rest_s3000.json", "pass27/tu0.5_rest2_s3000.json"],
                       4000: ["pass36/tu0.5_dev_s4000.json", "pass36/tu0.5_heldout_s4000.json"]},
}
SPACES = ["convolution_A100", "convolution_A4000", "dedispersion_A100", "dedispersion_A4000", "dedispersion_MI250X"]
HELDOUT = ["convolution_RTX2080Ti", "liger.mlp_swiglu_8192x4096x14336"]


def rows(design: str, seed: int) -> dict[str, tuple[float, float]]:
    out = {}
    for f in FILES[design][seed]:
        p = R / f
        if p.exists():
            for r in json.loads(p.read_text())["rows"]:
                if r["strategy"] == "auto":
                    out[r["space"]] = (r["score"], r["stderr"])
    return out


def diff_table(spaces: list[str], seeds: list[int]) -> None:
    print("| space | default | tabu_until 0.5 | difference (se) |\n|---|---|---|---|")
    diffs = []
    for s in spaces:
        vals = {}
        for d in FILES:
            got = [rows(d, k).get(s) for k in seeds]
            if any(g is None for g in got):
                break
            vals[d] = (sum(g[0] for g in got) / len(got), math.sqrt(sum(g[1] ** 2 for g in got)) / len(got))
        if len(vals) < 2:
            continue
        (a, sa), (b, sb) = vals["default"], vals["tabu_until 0.5"]
        diffs.append(b - a)
        print(f"| {s} | {a:.3f} ± {sa:.3f} | {b:.3f} ± {sb:.3f} | {b - a:+.3f} ({math.hypot(sa, sb):.3f}, {(b - a) / math.hypot(sa, sb):+.1f} se) |")
    if diffs:
        print(f"| mean difference | | | {sum(diffs) / len(diffs):+.4f} over {len(diffs)} spaces |")


print("Seed 4000, 60 repeats:\n")
diff_table(SPACES + HELDOUT, [4000])
print("\nPooled over seeds 1000-4000 (240 repeats), development spaces:\n")
diff_table(SPACES, [1000, 2000, 3000, 4000])
