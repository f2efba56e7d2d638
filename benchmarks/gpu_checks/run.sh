# GPU checks of the evaluator's fault handling, the decorator and the in-place switch, on the GPU machine
# from the repository root (one device call, about 5 minutes on an H200):  bash benchmarks/gpu_checks/run.sh
# Everything goes to $OUT/checks.log, plus faulty.csv and partial.csv (every trial of the faulty and the
# partial-write kernel), partial_mask.csv, package_int.csv, inplace_e2e.json and orphan.json.
source benchmarks/real_kernels/gpu_setup.sh > $OUT/checks.log 2>&1
export PYTHONUNBUFFERED=1
G=benchmarks/gpu_checks
S=/tmp/gpu_checks.db
rm -f $S /tmp/gpu_checks_dec.db /tmp/gpu_checks_reg.db
t() { local name=$1; shift; local t0=$SECONDS; echo "=== $name: $*" >> $OUT/checks.log
      timeout ${T:-240} "$@" >> $OUT/checks.log 2>&1; echo "=== $name rc $? wall $((SECONDS - t0)) s" | tee -a $OUT/checks.log; }
t matmul python -m kerntune tune examples/triton/matmul.py --shape 4096x4096x4096 --budget 60 --no-report --store $S
t faulty python -m kerntune tune $G/faulty_copy.py --shape 16777216 --strategy exhaustive --budget 18 --no-report --store $S
python -m kerntune store export last --csv $OUT/faulty.csv --store $S >> $OUT/checks.log 2>&1
t partial python -m kerntune tune $G/partial_write.py --shape 16777216 --strategy exhaustive --budget 8 --no-report --store $S
python -m kerntune store export last --csv $OUT/partial.csv --store $S >> $OUT/checks.log 2>&1
t partial_mask python -m kerntune tune $G/partial_mask.py --shape 16777216 --strategy exhaustive --budget 8 --no-report --store $S
python -m kerntune store export last --csv $OUT/partial_mask.csv --store $S >> $OUT/checks.log 2>&1
t partial_mask_launch python -m kerntune tune $G/partial_mask_launch.py --shape 16777216 --strategy exhaustive --budget 8 --no-report --store $S
python -m kerntune store export last --csv $OUT/partial_mask_launch.csv --store $S >> $OUT/checks.log 2>&1
t package_int python -m kerntune tune $G/package_int_outputs.py --shape 16777216 --strategy exhaustive --budget 10 --no-report --store $S
python -m kerntune store export last --csv $OUT/package_int.csv --store $S >> $OUT/checks.log 2>&1
t rms_norm python -m kerntune tune liger.rms_norm --shape 8192x4096 --budget 40 --no-report --store $S
t decorator_tunes python $G/decorator_gpu.py /tmp/gpu_checks_dec.db
t decorator_loads python $G/decorator_gpu.py /tmp/gpu_checks_dec.db
rm -f /tmp/gpu_checks_chk.db; t decorator_check python $G/decorator_check.py /tmp/gpu_checks_chk.db
t decorator_check_loads python $G/decorator_check.py /tmp/gpu_checks_chk.db
T=300 t inplace_e2e python benchmarks/real_kernels/inplace_e2e.py --out $OUT/inplace_e2e.json
t maxnreg_tunes python $G/maxnreg_list.py /tmp/gpu_checks_reg.db
t maxnreg_loads python $G/maxnreg_list.py /tmp/gpu_checks_reg.db
t orphan python $G/orphan_check.py --out $OUT/orphan.json
t lazy_torch python $G/lazy_torch.py $OUT/lazy_torch
