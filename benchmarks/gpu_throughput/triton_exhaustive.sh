#!/usr/bin/env bash
# Record a Triton kernel's whole space on the GPU (exhaustive search), so that it can be replayed
# on a CPU machine: writes a kerntune table, a CSV and the run log to $OUT (default benchmarks/results).
# Usage: benchmarks/gpu_throughput/triton_exhaustive.sh KERNEL_FILE SHAPE NAME
set -euo pipefail
kernel=$1; shape=$2; name=$3
out=${OUT:-benchmarks/results}
py=${PYTHON:-python3}
export PYTHONPATH=${PYTHONPATH:-$PWD}
mkdir -p "$out"
db="$out/$name.db"
rm -f "$db"
start=$(date +%s.%N)
$py -m kerntune tune "$kernel" --shape "$shape" --strategy exhaustive --budget 100000 --store "$db" \
    --compile-timeout 60 --retime 5 2>&1 | tee "$out/$name.log"
end=$(date +%s.%N)
run=$($py -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select id from runs order by created desc limit 1').fetchone()[0])" "$db")
$py -m kerntune store export "$run" --store "$db" --table "$out/$name.table.json" --csv "$out/$name.csv"
$py - "$kernel" "$shape" "$out/$name.meta.json" "$start" "$end" <<'PY'
import json, sys, torch, triton, triton.testing
sys.path.insert(0, ".")
from kerntune.evaluate.triton_backend.kernel_file import load_kernel_module, parse_shape
mod = load_kernel_module(sys.argv[1]); shape = parse_shape(sys.argv[2])
inputs = mod.make_inputs(shape)
ref_ms = None
if hasattr(mod, "reference"):
    ref_ms = float(triton.testing.do_bench(lambda: mod.reference(inputs), rep=500))
p = torch.cuda.get_device_properties(0)
json.dump({"kernel": sys.argv[1], "shape": list(shape), "device": p.name, "sms": p.multi_processor_count,
           "torch": torch.__version__, "triton": triton.__version__, "reference_ms": ref_ms,
           "reference": "torch (cuBLAS) via triton.testing.do_bench(rep=500)",
           "wall_seconds": float(sys.argv[5]) - float(sys.argv[4]),
           "command": f"benchmarks/gpu_throughput/triton_exhaustive.sh {sys.argv[1]} {sys.argv[2]} NAME"},
          open(sys.argv[3], "w"), indent=1)
PY
