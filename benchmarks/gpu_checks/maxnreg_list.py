"""GPU check: a ``triton.autotune`` list that caps registers (``maxnreg``) on some configs only, as
packages write them, tuned in place by ``kerntune.retune``; run twice on one store (tuned, then loaded).

    python benchmarks/gpu_checks/maxnreg_list.py STORE.db

Prints one JSON line: right results at every key, what kerntune tuned and what fell back to Triton's
own tuning (nothing should), the registers each listed config compiled to (the capped ones at most
their cap), and which config each key launches with."""
import json
import sys

import torch
import triton
import triton.language as tl

import kerntune.retune as kr

kr.enable(store=sys.argv[1])
hooked = []

CONFIGS = [triton.Config({"BLOCK": 1024}, num_warps=4),
           triton.Config({"BLOCK": 1024}, num_warps=4, maxnreg=32),
           triton.Config({"BLOCK": 4096}, num_warps=8, maxnreg=64, pre_hook=lambda nargs: hooked.append(nargs["BLOCK"])),
           triton.Config({"BLOCK": 4096}, num_warps=8)]


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def poly(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    acc = x
    for i in tl.static_range(8):  # a few live values, so that a cap can matter
        acc = acc * x + (i + 1) * 0.125
    tl.store(y_ptr + offs, acc, mask=m)


def ref(x: torch.Tensor) -> torch.Tensor:
    acc = x.clone()
    for i in range(8):
        acc = acc * x + (i + 1) * 0.125
    return acc


right = True
for n in (1 << 20, 1 << 24):
    x = torch.rand(n, device="cuda") * 0.5
    y = torch.empty_like(x)
    poly[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
    torch.cuda.synchronize()
    right = right and bool(torch.allclose(y, ref(x), rtol=1e-4, atol=1e-4))
regs = {}
x = torch.rand(1 << 20, device="cuda")
y = torch.empty_like(x)
for c in CONFIGS:  # each listed config compiled as listed: the cap is honoured where set
    k = poly.fn.warmup(x, y, x.numel(), grid=(1,), **c.all_kwargs())
    k._init_handles()  # n_regs is read from the loaded module
    regs[json.dumps({**c.kwargs, "num_warps": c.num_warps, "maxnreg": c.maxnreg})] = k.n_regs
print(json.dumps({"correct": right, "tuned": [str(t) for t in kr.STATS.tuned], "fell_back": [str(f) for f in kr.STATS.fell_back],
                  "loaded": [str(t) for t in getattr(kr.STATS, "loaded", [])], "hooked": sorted(set(hooked)),
                  "n_regs": regs, "best": str(poly.best_config)}))
