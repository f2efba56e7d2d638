#!/usr/bin/env bash
# Issue 4, acceptance 2: the embedded local model (Gemma 3 270M via llama.cpp) in the round search,
# on both shared recorded spaces, against random and Bayesian search (issue 4, acceptance 4: llm-seeded vs bayes). Results in benchmarks/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
for space in convolution dedispersion; do
  .venv/bin/kerntune compare --space "../shared/data/kernel_tuner_cache/${space}_A100.json.gz" \
    --strategies random,bayes,llm,llm-seeded --budget 60 --repeats 3 --seed 0 --llm local: --llm-timeout 900 \
    --store "/tmp/kerntune-llm-local-$space.db" \
    --json "benchmarks/results/llm_local_${space}_A100.json" --plot "benchmarks/results/llm_local_${space}_A100.png" \
    2>&1 | grep -v '^llama_\|^init\|^load\|^print_info\|^graph\|^sched\|^\.' | tee "benchmarks/results/llm_local_${space}_A100.txt"
done
