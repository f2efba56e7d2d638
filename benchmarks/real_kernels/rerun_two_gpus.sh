#!/bin/bash
# Re-measure chosen pairs of the suite on a machine with two GPUs, one suite process per GPU, from a
# snapshot of the tree at one commit (so that edits in progress in the working tree are not measured).
# Before the call, here:   rm -rf .head/new && mkdir -p .head/new && git archive HEAD | tar -x -C .head/new
# then: run(command="bash benchmarks/real_kernels/rerun_two_gpus.sh SECONDS 'ADAPTERS FOR GPU 0' 'ADAPTERS FOR GPU 1'",
#           kind="nvidia-h200-x2", carry=[".whl", ".head"])
# EXTRA0 / EXTRA1: more suite.py arguments for GPU 0 / 1 (e.g. '--shape 4096x151936'); LIMIT: seconds per process.
# Each pair's JSON is written as soon as it ends, so pairs finished before the call's limit come back.
# Everything travels back as one archive (the device returns only a few files).
seconds=$1; gpu0=$2; gpu1=$3
source benchmarks/real_kernels/gpu_setup.sh
cd .head/new && export PYTHONPATH=/tmp/site:$PWD
git_rev=$(cat ../new.rev 2>/dev/null); echo "tree ${git_rev:-unknown}: $(python -c 'import kerntune; print(kerntune.__file__)')"
CUDA_VISIBLE_DEVICES=0 timeout ${LIMIT:-530} python benchmarks/real_kernels/suite.py --out "$OUT/pairs" --seconds "$seconds" \
    --no-list-step --only $gpu0 $EXTRA0 > "$OUT/gpu0.log" 2>&1 &
CUDA_VISIBLE_DEVICES=1 timeout ${LIMIT:-530} python benchmarks/real_kernels/suite.py --out "$OUT/pairs" --seconds "$seconds" \
    --no-list-step --only $gpu1 $EXTRA1 > "$OUT/gpu1.log" 2>&1 &
wait
grep -h -E "speedup|FAILED|no working" "$OUT/gpu0.log" "$OUT/gpu1.log" | grep -v "^  \[" 
(cd "$OUT" && tar czf rerun.tgz pairs gpu0.log gpu1.log && rm -rf pairs gpu0.log gpu1.log)
