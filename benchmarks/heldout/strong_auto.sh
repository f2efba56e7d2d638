#!/usr/bin/env bash
# `auto` with a strong model on the held-out recordings (benchmarks/heldout/README.md), as
# benchmarks/search_quality/strong_auto.sh does on the eight development recordings: the model is a
# separate answerer working from the `files:` prompts in $EXCHANGE/<space>/ alone; every run shows
# the model the kernel's source (`--source`, written by sources.py) as a real run would; each run's
# exchanges are kept as a transcript that `replay:` re-runs (tests/test_auto_transcripts.py, and
# benchmarks/search_quality/strong_auto_report.py --transcripts benchmarks/llm/transcripts/heldout
# --space-dir benchmarks/results/heldout/spaces --classical benchmarks/results/heldout/classical_200x20_s0.json).
#   python benchmarks/heldout/sources.py $SRC && benchmarks/heldout/strong_auto.sh
# The H200 recordings: SPACES=benchmarks/results/heldout/spaces_h200 T=benchmarks/llm/transcripts/heldout_h200
# EXCHANGE=/work/exchange/heldout_h200 benchmarks/heldout/strong_auto.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
EXCHANGE=${EXCHANGE:-/work/exchange/heldout}
SRC=${SRC:-/tmp/kerntune-heldout-src}
PY=${PY:-/work/main/.venv/bin/python}
LOGS=${LOGS:-/tmp/kerntune-heldout/logs}  # not in $EXCHANGE: the logs show measured times
SPACES=${SPACES:-benchmarks/results/heldout/spaces}
T=${T:-benchmarks/llm/transcripts/heldout}
mkdir -p "$LOGS" "$T" /tmp/kerntune-heldout
for f in "$SPACES"/*.json.gz; do
  s=$(basename "$f" .json.gz)
  src=$(ls "$SRC/$s".* | head -1)
  rm -f "$T/$s.llm.jsonl" "/tmp/kerntune-heldout/$s.db"
  mkdir -p "$EXCHANGE/$s"
  PYTHONPATH=$PWD nohup "$PY" -m kerntune tune --replay "$f" --source "$src" --strategy auto \
    --llm "files:$EXCHANGE/$s" --llm-timeout 1800 --llm-transcript "$T/$s.llm.jsonl" \
    --budget 200 --seed 0 --store "/tmp/kerntune-heldout/$s.db" --no-report \
    -o model_clock_s=30 -o max_calls=4 > "$LOGS/$s.log" 2>&1 &
  echo "$s: pid $!"
done
