#!/usr/bin/env bash
# A strong model (a person or an agent answering the files: provider's prompts from the prompt alone)
# runs the llm strategy on the recorded convolution space; its answers are kept as a transcript that
# `replay:` re-runs in CI (tests/test_llm_transcripts.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
space=${1:-examples/spaces/convolution_A100.json.gz}
name=${2:-convolution_A100}
dir=${EXCHANGE_DIR:-/tmp/kerntune-files-$name}
rm -rf "$dir" "benchmarks/llm/transcripts/$name.llm.jsonl"
.venv/bin/kerntune tune --replay "$space" --strategy llm --llm "files:$dir" --llm-timeout 3600 \
  --llm-transcript "benchmarks/llm/transcripts/$name.llm.jsonl" --budget 100 --seed 0 \
  --store "/tmp/kerntune-strong-$name.db" -o initial=25 -o refine=15 -o max_rounds=5
