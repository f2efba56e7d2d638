"""liger-kernel (LinkedIn): row-wise kernels whose launchers pick BLOCK_SIZE and num_warps by a heuristic.

Each launcher (``rms_norm_forward``, ``layer_norm_forward``, ``swiglu_forward``,
``cross_entropy_forward``, ``kldiv_forward_triton``, ``tv_distance_forward_triton``) is the package's own code path;
``calculate_settings`` (or the vocabulary-wide launchers' own rules) is the package's choice and
the search's default.  Knobs:
the kernels that keep a whole row in one block need ``BLOCK_SIZE >= n_cols``, so only larger
powers of two are offered; cross-entropy loops over the vocabulary in ``BLOCK_SIZE`` chunks, so
smaller ones are offered too.  Shapes: tokens x hidden of Llama-3 8B/70B (4096/8192), their MLP
widths (14336/28672), vocabularies of Llama-3 (128,256) and Qwen2 (151,936).
"""

from __future__ import annotations

from typing import Any

from kerntune.adapters._shapes import device, randn
from kerntune.adapters.target import Adapter

PACKAGE = "liger-kernel"
WARPS = (1, 2, 4, 8, 16, 32)


def _np2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def _row_knobs(shape: tuple[int, ...]) -> dict[str, list[int]]:
    b = _np2(shape[-1])
    return {"BLOCK_SIZE": [b, 2 * b], "num_warps": list(WARPS)}


def _settings(shape: tuple[int, ...]) -> dict[str, Any]:
    from liger_kernel.ops.utils import calculate_settings

    block, warps = calculate_settings(shape[-1])
    return {"BLOCK_SIZE": block, "num_warps": warps}


# -- RMSNorm -------------------------------------------------------------------------------------
def _rms_inputs(shape: tuple[int, ...]) -> tuple[Any, ...]:
    rows, cols = shape
    _rows_kernel_only(shape)
    return randn(rows, cols), randn(cols, scale=0.1, index=1) + 1.0


#: rms_norm_forward's switch: with row_mode=None (LigerRMSNorm's default) it launches
#: _block_rms_norm_forward_kernel, BLOCK_ROW rows a program, when BLOCK_SIZE <= 256 and there are
#: at least this many rows (liger_kernel/ops/rms_norm.py, 0.8).
BLOCK_KERNEL_ROWS = 4096 * 8


def _rows_kernel_only(shape: tuple[int, ...]) -> None:
    """Refuse a shape where liger's RMSNorm runs its block kernel: the adapter tunes the row kernel,
    which liger never launches there, so its "package's choice" would be no choice of the package."""
    from kerntune.errors import KerntuneError

    rows, cols = shape
    block = _settings(shape)["BLOCK_SIZE"]
    if block <= 256 and rows >= BLOCK_KERNEL_ROWS:
        raise KerntuneError(
            f"liger.rms_norm at {rows}x{cols}: at rows >= {BLOCK_KERNEL_ROWS} with BLOCK_SIZE {block} <= 256, "
            "LigerRMSNorm (row_mode=None) launches _block_rms_norm_forward_kernel, not the row kernel "
            "_rms_norm_forward_kernel this adapter tunes; use fewer rows (or a wider row)")


def _rms_knobs(shape: tuple[int, ...]) -> dict[str, list[int]]:
    _rows_kernel_only(shape)  # before the space is built: the parent refuses, not each worker
    return _row_knobs(shape)


def _rms_call(inputs: tuple[Any, ...]) -> Any:
    from liger_kernel.ops.rms_norm import rms_norm_forward

    x, w = inputs
    # row_mode=None, as LigerRMSNorm calls it: the shapes that would switch to the block kernel are refused
    return rms_norm_forward(x, w, 1e-6, 0.0, "llama", None)[0]


def _rms_torch(inputs: tuple[Any, ...]) -> Any:
    import torch

    x, w = inputs
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, 1e-6)


# -- LayerNorm -----------------------------------------------------------------------------------
def _ln_inputs(shape: tuple[int, ...]) -> tuple[Any, ...]:
    rows, cols = shape
    return randn(rows, cols), randn(cols, scale=0.1, index=1) + 1.0, randn(cols, scale=0.1, index=2)


def _ln_call(inputs: tuple[Any, ...]) -> Any:
    from liger_kernel.ops.layer_norm import layer_norm_forward

    x, w, b = inputs
    return layer_norm_forward(x, w, b, 1e-6)[0]


def _ln_torch(inputs: tuple[Any, ...]) -> Any:
    import torch

    x, w, b = inputs
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, 1e-6)


# -- SwiGLU --------------------------------------------------------------------------------------
def _swiglu_inputs(shape: tuple[int, ...]) -> tuple[Any, ...]:
    rows, cols = shape
    return randn(rows, cols), randn(rows, cols, index=1)


def _swiglu_call(inputs: tuple[Any, ...]) -> Any:
    from liger_kernel.ops.swiglu import swiglu_forward

    a, b = inputs
    return swiglu_forward(a, b)[2]


def _swiglu_torch(inputs: tuple[Any, ...]) -> Any:
    import torch

    a, b = inputs
    return torch.nn.functional.silu(a) * b


# -- cross-entropy (forward; the logits do not require grad, so no gradient is written) -----------
# liger's kernel writes the gradient into the logits in place only when they require grad
# (HAS_GRADIENTS=_input.requires_grad in cross_entropy_forward): here they do not, so it makes one
# pass over the logits and reads each once.  Counting a gradient write as well put an H200 run at
# 178% of the memory bandwidth (2026-11-29); one read of rows x vocabulary bf16 puts it at 89%.
def _ce_inputs(shape: tuple[int, ...]) -> tuple[Any, ...]:
    import torch

    rows, vocab = shape
    g = torch.Generator(device="cpu").manual_seed(rows + vocab)
    target = torch.randint(0, vocab, (rows,), generator=g).to(device())
    return randn(rows, vocab, scale=2.0), target


def _ce_train_inputs(shape: tuple[int, ...]) -> tuple[Any, ...]:
    """The training forward: logits that require grad, so liger's kernel also writes the gradient
    into them in place (a second pass over the row).  The capture restores them before each launch."""
    logits, target = _ce_inputs(shape)
    return logits.requires_grad_(), target


def _ce_call(inputs: tuple[Any, ...]) -> Any:
    from liger_kernel.ops.cross_entropy import cross_entropy_forward

    logits, target = inputs
    return cross_entropy_forward(logits, target, None, -100, 0.0, 0.0, "mean", None, False)[0]


def _ce_torch(inputs: tuple[Any, ...]) -> Any:
    import torch

    logits, target = inputs
    return torch.nn.functional.cross_entropy(logits.float(), target)


def _ce_default(shape: tuple[int, ...]) -> dict[str, Any]:
    # The launcher's own rule (cross_entropy_forward): min(32768, next_pow2(V)), 32 warps on NVIDIA
    # before Blackwell.  The captured launch is what counts as the baseline; this is the default.
    return {"BLOCK_SIZE": min(32768, _np2(shape[1])), "num_warps": 32, "num_stages": 3}


def _ce_knobs(shape: tuple[int, ...]) -> dict[str, list[int]]:
    return {"BLOCK_SIZE": [1024, 2048, 4096, 8192, 16384, 32768, 65536], "num_warps": [4, 8, 16, 32],
            "num_stages": [1, 2, 3, 4]}


# -- KL divergence over the vocabulary (distillation loss; forward, batchmean) -------------------
def _kl_inputs(shape: tuple[int, ...]) -> tuple[Any, ...]:
    import torch

    rows, vocab = shape
    # in bf16 throughout: every compile worker builds these (2 GB each at 8192 x 128256), and fp32
    # temporaries of that size in 16 workers at once do not fit on an 80 GB GPU
    student = torch.log_softmax(randn(rows, vocab, scale=2.0), dim=-1)
    teacher = torch.softmax(randn(rows, vocab, scale=2.0, index=1), dim=-1)
    return student, teacher


def _kl_call(inputs: tuple[Any, ...]) -> Any:
    from liger_kernel.ops.kl_div import kldiv_forward_triton

    student, teacher = inputs
    return kldiv_forward_triton(student, teacher, False, "batchmean", 1e-10)


def _kl_torch(inputs: tuple[Any, ...]) -> Any:
    import torch

    student, teacher = inputs
    return torch.nn.functional.kl_div(student.float(), teacher.float(), reduction="batchmean")


def _vocab_rule(module: str) -> Any:
    """The rule of a vocabulary-wide launcher that reads ``MAX_FUSED_SIZE`` and ``get_num_warps``
    from its own module (``kldiv_forward_triton``, ``tv_distance_forward_triton``):
    min(MAX_FUSED_SIZE, next_pow2(V)), warps by block size."""
    def default(shape: tuple[int, ...]) -> dict[str, Any]:
        import importlib

        ops = importlib.import_module(module)
        block = min(ops.MAX_FUSED_SIZE, _np2(shape[1]))
        return {"BLOCK_SIZE": block, "num_warps": ops.get_num_warps(block), "num_stages": 3}
    return default


# -- total variation distance over the vocabulary (distillation loss; forward + gradient) --------
def _tvd_inputs(shape: tuple[int, ...]) -> tuple[Any, ...]:
    import torch

    rows, vocab = shape
    return (torch.softmax(randn(rows, vocab, scale=2.0), dim=-1),
            torch.softmax(randn(rows, vocab, scale=2.0, index=1), dim=-1))


def _tvd_call(inputs: tuple[Any, ...]) -> Any:
    from liger_kernel.ops.tvd import tv_distance_forward_triton

    p, q = inputs
    return tv_distance_forward_triton(p, q, None, "batchmean", -100, False)


def _tvd_torch(inputs: tuple[Any, ...]) -> Any:
    import torch

    p, q = inputs
    d = p.float() - q.float()  # the loss and the gradient, as the kernel computes them
    return 0.5 * d.abs().sum() / p.shape[0], (torch.sign(d) * (0.5 / p.shape[0])).to(p.dtype)


#: Elements each thread holds of a BLOCK_SIZE-wide row: past 128 a config spills registers and
#: compiles for minutes; below 2 it leaves most threads idle (a rule about GPUs, not one kernel).
#: The package's own choice stays in the space even where it breaks the rule (PackageTarget widens
#: the rule for it): calculate_settings gives rows of <= 128 columns BLOCK_SIZE 128 with 4 warps.
PER_THREAD = ("BLOCK_SIZE // (32 * num_warps) <= 128", "BLOCK_SIZE // (32 * num_warps) >= 2")


def _row_bytes(n_tensors: int) -> Any:
    return lambda s: float(n_tensors * s[0] * s[1] * 2)


ADAPTERS = [
    Adapter(name="liger.rms_norm", kernel="liger_kernel.ops.rms_norm:_rms_norm_forward_kernel", package=PACKAGE,
            shape_doc="tokens x hidden (bf16)", shapes=[(8192, 4096), (8192, 8192)], make_inputs=_rms_inputs,
            call=_rms_call, knobs=_rms_knobs, default=_settings,
            torch_op=_rms_torch, bytes_moved=_row_bytes(2), constraints=PER_THREAD),
    Adapter(name="liger.layer_norm", kernel="liger_kernel.ops.layer_norm:_layer_norm_forward_kernel",
            package=PACKAGE, shape_doc="tokens x hidden (bf16)", shapes=[(8192, 4096), (8192, 8192)],
            make_inputs=_ln_inputs, call=_ln_call, knobs=_row_knobs,
            default=_settings, torch_op=_ln_torch, bytes_moved=_row_bytes(2), constraints=PER_THREAD),
    Adapter(name="liger.swiglu", kernel="liger_kernel.ops.swiglu:_swiglu_forward_kernel", package=PACKAGE,
            shape_doc="tokens x MLP width (bf16)", shapes=[(8192, 14336), (4096, 28672)],
            make_inputs=_swiglu_inputs, call=_swiglu_call, knobs=_row_knobs,
            default=_settings, torch_op=_swiglu_torch, bytes_moved=_row_bytes(3), constraints=PER_THREAD),
    Adapter(name="liger.cross_entropy", kernel="liger_kernel.ops.cross_entropy:liger_cross_entropy_kernel",
            package=PACKAGE, shape_doc="tokens x vocabulary (bf16 logits; forward without gradients)",
            shapes=[(8192, 128256), (4096, 151936)],
            make_inputs=_ce_inputs, call=_ce_call, knobs=_ce_knobs, default=_ce_default, torch_op=_ce_torch,
            bytes_moved=_row_bytes(1), constraints=PER_THREAD),
    Adapter(name="liger.cross_entropy_train", kernel="liger_kernel.ops.cross_entropy:liger_cross_entropy_kernel",
            package=PACKAGE, shape_doc="tokens x vocabulary (bf16 logits that require grad: the training forward,"
            " which writes the gradient into the logits)", shapes=[(8192, 128256), (4096, 151936)],
            make_inputs=_ce_train_inputs, call=_ce_call, knobs=_ce_knobs, default=_ce_default, torch_op=_ce_torch,
            # two reads of the logits (max and sum, then the gradient) and one write of the gradient
            bytes_moved=_row_bytes(3), constraints=PER_THREAD, variant="train"),
    Adapter(name="liger.kl_div", kernel="liger_kernel.ops.kl_div:_kldiv_kernel_forward", package=PACKAGE,
            shape_doc="tokens x vocabulary (bf16 log-probabilities and probabilities)",
            shapes=[(8192, 128256), (4096, 151936)], make_inputs=_kl_inputs, call=_kl_call, knobs=_ce_knobs,
            default=_vocab_rule("liger_kernel.ops.kl_div"), torch_op=_kl_torch, bytes_moved=_row_bytes(2), constraints=PER_THREAD),
    Adapter(name="liger.tvd", kernel="liger_kernel.ops.tvd:_tv_distance_kernel", package=PACKAGE,
            shape_doc="tokens x vocabulary (bf16 probabilities; writes the gradient)",
            shapes=[(8192, 128256), (4096, 151936)], make_inputs=_tvd_inputs, call=_tvd_call, knobs=_ce_knobs,
            default=_vocab_rule("liger_kernel.ops.tvd"), torch_op=_tvd_torch, bytes_moved=_row_bytes(3), constraints=PER_THREAD),
]

