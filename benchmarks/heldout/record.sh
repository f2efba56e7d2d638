#!/usr/bin/env bash
# Record real packages' Triton kernels' whole spaces on the GPU as replayable kerntune tables, for the
# held-out check of the search strategies (benchmarks/heldout/README.md).  Configs are measured in a
# random order (strategy `random` over the whole space), so a run cut by --seconds leaves an unbiased
# sample of the space, not its first corner in enumeration order.
# Usage (GPU machine, after `source benchmarks/real_kernels/gpu_setup.sh`):
#   OUT=DIR SECONDS_EACH=S benchmarks/heldout/record.sh ADAPTER:SHAPE [ADAPTER:SHAPE ...]
# writes DIR/<adapter>_<shape>.table.json and DIR/record.log.
set -uo pipefail
out=${OUT:?set OUT}; seconds=${SECONDS_EACH:-480}
py=${PYTHON:-python3}
mkdir -p "$out"
for item in "$@"; do
  adapter=${item%%:*}; shape=${item#*:}
  name="${adapter}_${shape}"; db="/tmp/heldout_${name}.db"
  rm -f "$db"
  echo "== $adapter $shape (seconds $seconds) $(date -u +%FT%TZ)" | tee -a "$out/record.log"
  PYTHONUNBUFFERED=1 $py -m kerntune tune "$adapter" --shape "$shape" --strategy random --budget 100000 \
      --seconds "$seconds" --retime 0 --no-report --store "$db" --seed 0 2>&1 | grep -v "^progress" | tail -15 | tee -a "$out/record.log"
  $py -m kerntune store export last --store "$db" --table "$out/$name.table.json" 2>&1 | tee -a "$out/record.log"
done
$py -c "import torch, triton; p = torch.cuda.get_device_properties(0); print('device', p.name, 'torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$out/record.log"
