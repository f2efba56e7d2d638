"""Code-level LLM strategies: the model rewrites a kernel, kerntune tunes every rewrite.

``KernelTransformer(kernel_source, strategy=..., llm=..., backend=...)`` runs a strategy
(``one-prompt``, ``explicit``, ``autonomous`` or a ``TuningStrategy`` subclass) and returns a
``TransformResult``: the best kernel source, its tunable parameters and restrictions, the best
configuration and the speedup over the original.  Kernels are compiled, checked against the
original kernel's outputs and timed through Kernel Tuner (OpenCL, CUDA, C) in a worker process
with time and memory limits (``kt_backend``, ``worker``); model replies are JSON validated against
schemas (``replies``); prompts are the ``kerntune/prompts/transform_*.md`` templates.

``TritonTransformer(kernel_file, shape, ...)`` does the same for a Triton kernel file (the format
``kerntune tune`` takes): the model rewrites the whole file, every variant is checked and tuned only in
worker processes (``triton_backend``, ``triton_harness``, ``triton_context``).

``KerntuneStrategy`` offers kerntune's search strategies to Kernel Tuner users:
``kernel_tuner.tune_kernel(..., strategy=KerntuneStrategy("bayes", max_evals=60))``.
"""

from kerntune.transform.context import KernelState, StepRecord, TransformContext
from kerntune.transform.kernel import BACKENDS, KernelSpec
from kerntune.transform.kt_strategy import KerntuneStrategy
from kerntune.transform.steps import TuningStep, default_steps, load_steps, triton_steps
from kerntune.transform.strategies import (AutonomousTuningStrategy, ExplicitTuningStrategy, OnePromptTuningStrategy,
                                           TuningStrategy, make_strategy)
from kerntune.transform.transformer import KernelTransformer, TransformResult
from kerntune.transform.triton_context import TritonTransformer, TritonTransformResult

__all__ = ["AutonomousTuningStrategy", "BACKENDS", "ExplicitTuningStrategy", "KernelSpec", "KernelState",
           "KernelTransformer", "KerntuneStrategy", "OnePromptTuningStrategy", "StepRecord", "TransformContext",
           "TransformResult", "TritonTransformResult", "TritonTransformer", "TuningStep", "TuningStrategy",
           "default_steps", "load_steps", "make_strategy", "triton_steps"]
