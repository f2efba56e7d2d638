#!/usr/bin/env bash
# Issue 6, acceptance 2: pruning both shared recorded spaces with the rule pruner (deterministic, the
# scripted baseline) and with the embedded model (Gemma 3 270M, local:), judged by TR, PR and WC
# against the full space. Writes benchmarks/results/prune_<space>_<pruner>.json and prune_summary.md.
# Usage: bash benchmarks/search_quality_cli/prune_compare.sh [rule|local|all]
set -euo pipefail
cd "$(dirname "$0")/../.."
which=${1:-all}
for space in convolution dedispersion; do
  f="examples/spaces/${space}_A100.json.gz"
  if [ "$which" != local ]; then
    .venv/bin/kerntune space evaluate --space "$f" --rule --runs 10 --profile-size 40 \
      --json "benchmarks/results/prune_${space}_rule.json"
  fi
  if [ "$which" != rule ]; then
    .venv/bin/kerntune space evaluate --space "$f" --llm local: --runs 3 --profile-size 40 --llm-timeout 900 \
      --json "benchmarks/results/prune_${space}_local.json" 2>&1 | grep -v '^llama_\|^init\|^load\|^print_info\|^graph\|^sched\|^\.'
  fi
done
.venv/bin/python - <<'PY'
import glob, json
rows = ["| space | pruner | runs | TR | PR | PR min | WC | configs kept | LLM s |", "|---|---|---|---|---|---|---|---|---|"]
for f in sorted(glob.glob("benchmarks/results/prune_*_*.json")):
    d = json.load(open(f)); s = d["summary"]
    rows.append(f"| {d['space'].split('/')[-1]} | {d['pruner']} | {s['runs']} | {s['TR']:.3f} | {s['PR']:.3f} | "
                f"{s['PR_min']:.3f} | {s['WC']:.2f} | {s['kept']:.1%} | {s['llm_s']:.1f} |")
open("benchmarks/results/prune_summary.md", "w").write(
    "# Space pruning on the shared recorded spaces (issue 6)\n\nCommand: `bash benchmarks/search_quality_cli/prune_compare.sh` "
    "(profile of 40 random configs per run, seeds 0..runs-1; TR counts the profile and the model time).\n\n"
    + "\n".join(rows) + "\n")
print("\n".join(rows))
PY
