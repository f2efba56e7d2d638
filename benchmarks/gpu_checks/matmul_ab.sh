#!/bin/bash
# The open question of benchmarks/gpu_checks/README.md (thirty-first session): does HEAD find the 4096^3
# matmul's 1.07x configs within a 60-s budget as often as 55bfbc3 (the thirty-first session's start)?
# One device call on nvidia-h200-x2, about 8 minutes: the two trees run side by side, one per GPU, the
# GPUs swapped each pair, five or six pairs.  Before the call, here:
#   mkdir -p .head/old && git archive 55bfbc3 | tar -x -C .head/old && rm -rf .head/old/examples/spaces
# (.head/ is in .git/info/exclude), then: run(command="bash benchmarks/gpu_checks/matmul_ab.sh",
# kind="nvidia-h200-x2", carry=[".whl", ".head"]).  Each tree runs from its own directory: `python -m`
# puts the working directory first on sys.path, and the first line of the output shows which tree ran.
source benchmarks/real_kernels/gpu_setup.sh
ROOT=$PWD
for t in old new; do d=$ROOT; [ $t = old ] && d=$ROOT/.head/old; (cd "$d" && python -c "import kerntune; print('$t', kerntune.__file__)"); done
start=$SECONDS
for i in 1 2 3 4 5 6; do
  [ $((SECONDS - start)) -gt 400 ] && break
  if [ $((i % 2)) -eq 1 ]; then go=0; gn=1; else go=1; gn=0; fi
  (cd "$ROOT/.head/old" && CUDA_VISIBLE_DEVICES=$go timeout 150 python -m kerntune tune examples/triton/matmul.py \
      --shape 4096x4096x4096 --budget 60 --no-report --store "$OUT/old_$i.db" > "$OUT/old_$i.log" 2>&1) &
  (cd "$ROOT" && CUDA_VISIBLE_DEVICES=$gn timeout 150 python -m kerntune tune examples/triton/matmul.py \
      --shape 4096x4096x4096 --budget 60 --no-report --store "$OUT/new_$i.db" > "$OUT/new_$i.log" 2>&1) &
  wait
  for t in old new; do
    echo "== $t run $i (GPU $([ $t = old ] && echo $go || echo $gn))"
    python - "$OUT/${t}_$i.db" <<'PY'
import sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute("SELECT status, time_ms, config_json FROM trials").fetchall()
ok = [r for r in rows if r[0] == "ok" and r[1] is not None]
best = min(ok, key=lambda r: r[1]) if ok else None
print(f"trials {len(rows)}, ok {len(ok)}, best screening", *(best[1:] if best else ("none",)))
PY
    grep -E "speedup|best|re-timed|winner" "$OUT/${t}_$i.log" | tail -6
  done
done 2>&1 | tee "$OUT/summary.txt"
# the device brings back only a few files: the stores and logs travel as one archive
(cd "$OUT" && tar czf runs.tgz *.db *.log && rm -f *.db *.db-runs.lock *.log)
