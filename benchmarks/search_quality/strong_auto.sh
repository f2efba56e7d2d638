#!/usr/bin/env bash
# Acceptance 2 of issue 24: `auto` with a strong model on the eight shipped recordings.
# The model is a separate answerer (an agent or a person) that answers the `files:` prompts in
# $EXCHANGE/<space>/ from the prompt files alone (it never sees the recorded data; HOWTO.md there
# explains the file protocol).  All eight runs start at once in the background; each run's model
# exchanges are kept as a transcript that `replay:` re-runs (tests/test_auto_transcripts.py,
# benchmarks/search_quality/strong_auto_report.py).
#
#   benchmarks/search_quality/strong_auto.sh            # start; logs in $LOGS
#
# A model call is charged and overlapped on the recording's simulated clock as 30 s
# (-o model_clock_s=30: a hosted model's latency), not as the minutes a hand-written answer takes.
set -euo pipefail
cd "$(dirname "$0")/../.."
EXCHANGE=${EXCHANGE:-/work/exchange/auto}
PY=${PY:-/work/main/.venv/bin/python}
BUDGET=${BUDGET:-200}
LOGS=${LOGS:-/tmp/kerntune-strong-auto/logs}  # not in $EXCHANGE: the logs show measured times
mkdir -p "$LOGS" benchmarks/llm/transcripts/auto /tmp/kerntune-strong-auto
for f in examples/spaces/*.json.gz; do
  s=$(basename "$f" .json.gz)
  extra=()
  # The MI250X recording's device name is empty: say what a real run on that GPU would report.
  [[ $s == *MI250X* ]] && extra=(--device "AMD Instinct MI250X")
  rm -f "benchmarks/llm/transcripts/auto/$s.llm.jsonl" "/tmp/kerntune-strong-auto/$s.db"
  mkdir -p "$EXCHANGE/$s"
  PYTHONPATH=$PWD nohup "$PY" -m kerntune tune --replay "$f" "${extra[@]}" --strategy auto \
    --llm "files:$EXCHANGE/$s" --llm-timeout 1800 --llm-transcript "benchmarks/llm/transcripts/auto/$s.llm.jsonl" \
    --budget "$BUDGET" --seed 0 --store "/tmp/kerntune-strong-auto/$s.db" --no-report \
    -o model_clock_s=30 -o max_calls=4 > "$LOGS/$s.log" 2>&1 &
  echo "$s: pid $!"
done
