#!/usr/bin/env bash
# kerntune transform on a Triton kernel file, with a model answering through `files:`, then the winner
# judged against the vendor library (the kernel file's `reference`: cuBLAS via torch.matmul) by one timer.
#
#   benchmarks/transform_triton/run_vs_vendor.sh KERNEL SHAPE ANSWERS_DIR OUT_DIR [transform options...]
#
# ANSWERS_DIR holds NNNN.response.json files written by the answerer for the prompts this run writes
# (an answerer that worked from an earlier run's prompts: the prompt the run writes is recorded in the
# transcript beside the answer it got).  Each answer is moved in only after its prompt appears, as the
# files: provider requires.  The judge (a model-written file, already checked by kerntune's limited worker)
# runs in its own process under a time limit.  OUT_DIR gets the transcript, the log, the result JSON, the winning kernel
# file and judge.json (rerun.py --judge: winner and its default config against the vendor, interleaved).
set -u
KERNEL=$1; SHAPE=$2; ANSWERS=$3; OUT=$4; shift 4
DIR=$(mktemp -d); mkdir -p "$OUT"
( for f in "$ANSWERS"/*.response.json; do
    n=$(basename "$f" .response.json)
    while [ ! -f "$DIR/$n.prompt.md" ]; do sleep 0.5; done
    cp "$f" "$DIR/.$n.tmp" && mv "$DIR/.$n.tmp" "$DIR/$n.response.json"
  done ) &
python -m kerntune transform "$KERNEL" --shape "$SHAPE" --llm "files:$DIR" --llm-transcript "$OUT/transcript.jsonl" \
  --workdir "$OUT/work" -o "$OUT/best.py" --json "$OUT/result.json" "$@" > "$OUT/log.txt" 2>&1
echo "transform rc $?" >> "$OUT/log.txt"
cp "$DIR"/*.prompt.md "$OUT/" 2>/dev/null
CFG=$(python -c "import json,sys; print(json.dumps({'winner': json.load(open(sys.argv[1]))['best_config']}))" "$OUT/result.json")
timeout 300 python benchmarks/vendor_libraries/rerun.py --judge "$OUT/best.py" "$SHAPE" "$CFG" > "$OUT/judge.json" 2>> "$OUT/log.txt"
echo "judge rc $?" >> "$OUT/log.txt"
tail -4 "$OUT/log.txt"
