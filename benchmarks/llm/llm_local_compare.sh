#!/usr/bin/env bash
# Issue 4, acceptances 2 and 4: the embedded local model (Gemma 3 270M via llama.cpp) in the round
# search, on both shared recorded spaces, against random and Bayesian search. Results in
# benchmarks/results/llm_local_*.
#
# Batches are smaller than the strategy's defaults (first round 10, later rounds 6, instead of 25/15):
# on a 2-core CPU the 270M model writes ~10 tokens/s, so a 25-config answer takes 5-8 minutes and the
# 24 LLM calls of this benchmark would take hours. The prompts and rules are otherwise the defaults.
set -euo pipefail
cd "$(dirname "$0")/../.."
for space in convolution dedispersion; do
  rm -f "/tmp/kerntune-llm-local-$space.db"*
  .venv/bin/kerntune compare --space "examples/spaces/${space}_A100.json.gz" \
    --strategies random,bayes,llm,llm-seeded --budget 60 --repeats 3 --seed 0 --llm local: --llm-timeout 900 \
    -o llm.initial=10 -o llm.refine=6 -o llm-seeded.initial=10 \
    --store "/tmp/kerntune-llm-local-$space.db" \
    --json "benchmarks/results/llm_local_${space}_A100.json" --plot "benchmarks/results/llm_local_${space}_A100.png" \
    2>&1 | grep -v '^llama_\|^init\|^load\|^print_info\|^graph\|^sched\|^\.' > "/tmp/llm_local_${space}_A100.txt"
  cp "/tmp/llm_local_${space}_A100.txt" "benchmarks/results/llm_local_${space}_A100.txt"
  echo "command: bash benchmarks/llm/llm_local_compare.sh ($(nproc) cores)" >> "benchmarks/results/llm_local_${space}_A100.txt"
done
