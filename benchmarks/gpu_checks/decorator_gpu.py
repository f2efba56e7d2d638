"""GPU check of @kerntune.autotune: a softmax tuned once, then loaded."""
import sys, time, torch, triton, triton.language as tl
import kerntune

@kerntune.autotune(space={"params": [{"name": "num_warps", "kind": "choice", "options": [1, 2, 4, 8]},
                                     {"name": "ROWS", "kind": "choice", "options": [1, 2, 4]}],
                          "default": {"num_warps": 4, "ROWS": 1}},
                   key=["n_cols"], budget=12, store=sys.argv[1])
@triton.jit
def softmax(out_ptr, in_ptr, n_rows, n_cols, BLOCK_N: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    for r in tl.static_range(ROWS):
        row = pid * ROWS + r
        mask = (cols < n_cols) & (row < n_rows)
        x = tl.load(in_ptr + row * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32)
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(out_ptr + row * n_cols + cols, (e / tl.sum(e, axis=0)).to(tl.float16), mask=mask)

x = torch.randn(8192, 4096, device="cuda", dtype=torch.float16)
y = torch.empty_like(x)
t = time.perf_counter()
softmax[lambda m: (triton.cdiv(8192, m["ROWS"]),)](y, x, 8192, 4096, BLOCK_N=4096)
torch.cuda.synchronize()
print("first launch s", round(time.perf_counter() - t, 2), "max err", float((y.float() - torch.softmax(x.float(), 1)).abs().max()))
