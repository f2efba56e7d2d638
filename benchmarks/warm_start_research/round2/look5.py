import sys, math
sys.path.insert(0, "/work/main")
from harness import *
sp = EVS[SHAPES[0]].space
for n in SHAPES[:1] + SHAPES[2:]:
    for b in (100, 200):
        for s in range(5):
            h = run_search(EVS[n], "bayes", Budget(max_evals=b), s).history
            ks = [sp.key(sp.canonical(t.config)) for t in h]
            reg = [(i, k) for i, k in enumerate(ks) if eval(k)[:2] == [128, 256] and eval(k)[4] == 8]
            print(n, b, s, "first [128,256,*,*,8,*] at", reg[:3])
