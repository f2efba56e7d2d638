#!/usr/bin/env bash
# One device call of the Helion head-to-head (benchmarks/results/helion_h100/README.md): installs the carried
# wheels (helion 1.4.0, filecheck), then runs head_to_head.py with the arguments given, keeps
# everything in /tmp/res and packs it into $OUT/res.tgz (the device tool returns at most 8 files).
#   bash benchmarks/helion/device_run.sh TIMEOUT_S 'dump /tmp/res/spaces' 'require FILE' 'run /tmp/res matmul --deadline 400' ...
# ('require FILE' stops the call there when FILE is missing: a failed smoke step costs no more device time.)
set -u
limit=$1; shift
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HELION_AUTOTUNE_PROGRESS_BAR=0
mkdir -p /tmp/res
python3 -c "import sklearn, scipy, psutil, rich, filecheck, torch, triton, helion; from importlib.metadata import version; print('torch', torch.__version__, 'triton', triton.__version__, 'helion', version('helion'), torch.cuda.get_device_name())" 2>&1 | tee /tmp/res/versions.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv >> /tmp/res/versions.txt 2>&1
end=$((SECONDS + limit))
for step in "$@"; do
  case "$step" in require\ *) f=${step#require }; [ -f "$f" ] || { echo "missing $f: stopping"; break; }; continue;; esac
  left=$((end - SECONDS))
  [ "$left" -gt 20 ] || { echo "no time left for: $step"; continue; }
  step=${step//LEFT/$((left - 15))}  # LEFT in a step: the seconds this call has left for it
  echo "=== $step (left ${left}s)"
  timeout "$left" python3 benchmarks/helion/head_to_head.py $step 2>&1 | tee -a /tmp/res/log.txt | grep -v "^\[" | tail -40
done
tar czf "${OUT:-/tmp}/res.tgz" -C /tmp $(cd /tmp && ls -d res*)  # every result folder of this call
