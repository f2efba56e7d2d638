"""Arguments of tests/data/transform/matmul_naive.cl: make_args(problem_size) -> [C, A, B, n].

Run only inside kerntune's worker process (``--args-generator``)."""

import numpy as np


def make_args(problem_size):
    n = problem_size[0]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    c = np.zeros((n, n), dtype=np.float32)
    return [c, a, b, np.int32(n)]
