#!/usr/bin/env bash
# Classical strategies on every recorded space we ship or share, by the methodology
# score (see the README, "Metrics"): budget 200, 20 seeded repeats. Writes
# benchmarks/results/compare_<space>.json (the table in compare_classical.md is written from these by hand).
# Run from the repository root after `make install`:  bash benchmarks/search_quality_cli/classical_compare.sh
set -euo pipefail
KT=${KT:-.venv/bin/kerntune}
OUT=benchmarks/results
STORE=$(mktemp -d)/compare.db
STRATS=${STRATS:-random,pattern,genetic,tpe,bayes}
SPACES=(
  examples/spaces/convolution_A100.json.gz
  examples/spaces/dedispersion_A100.json.gz
  examples/spaces/matmul_4096_h100.json.gz
  examples/spaces/matmul_8192x8192x512_h100.json.gz
  examples/spaces/matmul_256x8192x8192_h100.json.gz
)
for sp in "${SPACES[@]}"; do
  [ -f "$sp" ] || { echo "skip $sp (not found)"; continue; }
  name=$(basename "$sp" .json.gz)
  cmd="$KT compare --space $sp --strategies $STRATS --budget 200 --repeats 20 --json $OUT/compare_$name.json"
  echo "+ $cmd"
  start=$(date +%s)
  $cmd --store "$STORE" | tee "$OUT/compare_$name.txt"
  echo "command: $cmd" >> "$OUT/compare_$name.txt"
  echo "wall: $(( $(date +%s) - start )) s on $(nproc) cores, $(python3 -c 'import platform;print(platform.processor() or platform.machine())')" >> "$OUT/compare_$name.txt"
done
