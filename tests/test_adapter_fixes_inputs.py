"""The adapters' inputs, with the real packages.

(a) ``_shapes.randn`` was seeded by the shape alone, so every two operands of one shape came out
identical: TVD's p == q (a loss and gradient of exactly zero: no wrong config could fail the output
check), SwiGLU's a == b, FLA's q == k == v, LayerNorm's weight noise == its bias, KL's teacher ==
exp(student).  Each tensor now takes its own index in the seed.
(b) liger's training cross-entropy writes the gradient into its logits.  The capture runs the
package call twice and left the tensors as its last replay wrote them, and a worker restores every
launch to what ``make_inputs`` returned: every timed and checked launch started from twice-softmaxed
logits, a state the package never saw.  The caught launch now sees the drawn logits, and the capture
hands back the state it started from.  liger's cross-entropy kernel runs under Triton's interpreter.
"""

from __future__ import annotations

import itertools
import os

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")
torch = pytest.importorskip("torch")

from kerntune.adapters import ADAPTER_MODULES, GPU_ONLY_MODULES, find, load  # noqa: E402
from kerntune.adapters._shapes import randn  # noqa: E402
from packages import import_package  # noqa: E402

#: a small shape of each adapter family, by name prefix (the suites' shapes are GBs of inputs)
SMALL = {"liger.mlp": (16, 32, 48), "liger.moe": (16, 4, 2, 32, 48), "liger.": (4, 1000), "fla.": (1, 64, 2, 16),
         "torchao.int8": (32, 64, 48), "torchao.fp8": (32, 256, 384)}


def _small(name: str) -> tuple[int, ...]:
    return next(s for prefix, s in SMALL.items() if name.startswith(prefix))


def test_randn_draws_each_index_apart_and_each_alike_in_every_worker() -> None:
    a, b = randn(8, 16), randn(8, 16, index=1)
    assert not torch.equal(a, b)
    assert torch.equal(a, randn(8, 16)) and torch.equal(b, randn(8, 16, index=1))  # seeded: every worker alike


@pytest.mark.parametrize("module", sorted(set(ADAPTER_MODULES) - GPU_ONLY_MODULES))
def test_no_adapter_draws_two_operands_alike(module: str) -> None:
    mod = import_package(module, ADAPTER_MODULES[module])
    for adapter in mod.ADAPTERS:
        inputs = adapter.make_inputs(_small(adapter.name))
        floats = [t for t in inputs if hasattr(t, "is_floating_point") and t.is_floating_point()]
        for p, q in itertools.combinations(floats, 2):
            if p.shape == q.shape:
                assert not torch.equal(p, q), f"{adapter.name}: two operands of shape {tuple(p.shape)} alike"


def test_the_distillation_losses_compare_two_distributions() -> None:
    """TVD's p and q, KL's student and teacher: two distributions, so a loss and gradients that are
    not zero (a reference of zeros passes any config that writes zeros)."""
    import_package("liger_kernel.ops.tvd", "liger-kernel")
    from kerntune.adapters import liger

    p, q = liger._tvd_inputs((4, 1000))
    loss, grad = liger._tvd_torch((p, q))
    assert loss.item() > 0.1 and bool((grad != 0).float().mean() > 0.9)
    student, teacher = liger._kl_inputs((4, 1000))
    assert liger._kl_torch((student, teacher)).item() > 0.1
    _, w, b = liger._ln_inputs((4, 1000))
    assert not torch.equal(w - 1.0, b)


def test_fla_attends_with_three_different_projections() -> None:
    import_package("fla.ops.gated_delta_rule", "fla-core")
    from kerntune.adapters import fla

    q, k, v, g, beta = fla._inputs((1, 64, 2, 16))
    assert not (torch.equal(q, k) or torch.equal(k, v) or torch.equal(q, v))
    # the gate and beta from two draws (from one, beta was exactly sigmoid of the gate's logit: exp(g))
    assert not torch.allclose(torch.exp(g), beta.float(), atol=1e-2)


@pytest.fixture()
def cross_entropy_train():
    import_package("liger_kernel.ops.cross_entropy", "liger-kernel")
    from kerntune.transform.triton_harness import fix_interpreter

    fix_interpreter()  # NumPy >= 2.4 and the interpreter's loop bounds
    return load("liger.cross_entropy_train")


def test_an_in_place_kernel_is_caught_and_replayed_on_the_drawn_logits(cross_entropy_train) -> None:
    """The caught launch reads the drawn logits, make_inputs hands them back (what a worker restores
    before every launch), and the package's own config replayed from there computes the loss and
    writes the gradient that PyTorch computes on those logits."""
    shape = (4, 1000)
    target = cross_entropy_train
    drawn, labels = find("liger.cross_entropy_train").make_inputs(shape)  # seeded: what make_inputs draws
    inputs = target.make_inputs(shape)
    logits = target.launch_state.tensor("X_ptr")
    assert torch.equal(logits, drawn.detach())
    assert any(t is logits for t in inputs)
    target.reference(inputs)  # a worker's launch of the package's own config, from the state restored
    expect = drawn.detach().float().requires_grad_()
    loss = torch.nn.functional.cross_entropy(expect, labels)
    (grad,) = torch.autograd.grad(loss, expect)
    rows = target.launch_state.tensor("loss_ptr").float()  # per row, already divided by the row count
    torch.testing.assert_close(rows.sum(), loss.detach(), atol=2e-2, rtol=1e-2)
    torch.testing.assert_close(logits.float(), grad, atol=2e-3, rtol=2e-2)  # the gradient, in place
