"""The forty-first pass's two groups of recordings (where Optuna's TPE for the first 20 evaluations
gained, and where it cost) and what a run could know at its start (run from the repository root):
size, parameters, and over 200 draws of the default plus four random configs, the median log-spread
of their times and the mean number that failed; the top 1% of the space against its optimum.
    python benchmarks/results/search_quality/pass41/groups.py"""
import random, numpy as np, math
from kerntune.evaluate import ReplayEvaluator
H='benchmarks/results/heldout/spaces/'; H2='benchmarks/results/heldout/spaces_h200/'; D='examples/spaces/'
tpe_better=[H2+'fla.chunk_h_4x4096x32x128',H2+'liger.mlp_swiglu_bwd_dGU_8192x4096x14336',H+'torchao.fp8_blockwise_mm_4096x18432x7168',H+'convolution_RTX2080Ti']
gp_better=[H2+'fla.kkt_solve_4x4096x32x128',H+'fla.chunk_o_4x4096x32x128',H2+'fla.l2norm_4x4096x32x128',D+'convolution_A100']
for grp,lst in (('TPE',tpe_better),('GP',gp_better)):
    for f in lst:
        rec=ReplayEvaluator.from_file(f+'.json.gz').recording
        sp=rec.space; keys=list(rec.trials)
        dk=sp.key(sp.canonical(sp.default))
        spreads=[];fails=[];
        for s in range(200):
            r=random.Random(s); ks=[dk]+r.sample([k for k in keys if k!=dk],4)
            ts=[rec.trials[k].time_ms for k in ks if rec.trials[k].ok]
            fails.append(5-len(ts))
            if len(ts)>1: spreads.append(math.log(max(ts)/min(ts)))
        ok=np.array(rec.ok_times); 
        print(grp, f.split('/')[-1][:28].ljust(28), 'n',len(keys),'params',len(sp.params),'width',sp.encoded_width,'startup log-spread %.2f'%np.median(spreads),'fails %.2f'%np.mean(fails), 'top1%%/opt %.3f'%(np.quantile(ok,0.01)/ok.min()))
