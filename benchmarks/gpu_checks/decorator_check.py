"""GPU check of @kerntune.autotune(check=...): a scale kernel whose launch grid is written for 1024-element
blocks, so the BLOCK 256 and 512 configs write a quarter and a half of the output.  The default (1024)
is the reference; before the fix each checked config wrote into the buffer the reference had filled,
so the partial configs passed (and, doing less work, could win).  Run twice on one store: the second
process loads the winner without measuring.  Prints the statuses and whether the winner's output is whole."""
import sys
import torch
import triton
import triton.language as tl

import kerntune

store = sys.argv[1]


@kerntune.autotune(space={"params": [{"name": "BLOCK", "kind": "choice", "options": [256, 512, 1024, 2048]},
                                     {"name": "num_warps", "kind": "choice", "options": [2, 4]}],
                          "default": {"BLOCK": 1024, "num_warps": 4}},
                   key=["n"], budget=8, strategy="exhaustive", check=["y_ptr"], store=store)
@triton.jit
def scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0, mask=m)


n = 1 << 24
x = torch.rand(n, device="cuda")
y = torch.zeros(n, device="cuda")
scale[(triton.cdiv(n, 1024),)](x, y, n)
torch.cuda.synchronize()
from kerntune.store import Store
st = Store(store)
for run in st.list_runs(5):
    for _, t, _ in st.trials(run.id):
        print("trial", t.config, t.status.value, (t.error or "")[:90])
print("tuned in this process:", scale.tuned_keys, "winner:", scale.best)
y2 = torch.zeros(n, device="cuda")
scale[(triton.cdiv(n, 1024),)](x, y2, n)
torch.cuda.synchronize()
print("winner's output whole:", bool(torch.equal(y2, x * 2.0)))
