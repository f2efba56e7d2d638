"""A kernel file for CPU tests of the measuring workers: plain Python launchers
(no GPU, no torch) that behave like the bad configs a real tuning run meets.

``mode`` picks the behaviour; ``work`` scales the run time of the good ones,
so the fastest correct config is ``mode=good, work=1``.
"""

import os
import signal
import time

from kerntune.space import Choice, Space

name = "cpu_planted"
description = "sum of a vector, with planted failures (tests only)"

space = Space(
    [
        Choice("mode", options=("good", "inplace", "crash", "hang", "wrong", "nan", "raise_oor", "raise_compile",
                                  "illegal")),
        Choice("work", options=(1, 4, 16)),
    ],
    default={"mode": "good", "work": 4},
)


def make_inputs(shape):
    return ([float(i % 7) for i in range(shape[0])],)


def reference(inputs):
    return [sum(inputs[0])]


def launch(config, inputs):
    data = inputs[0]
    mode = config["mode"]
    if mode == "crash":  # what an out-of-bounds write does to a real worker: the process dies
        os.kill(os.getpid(), signal.SIGSEGV)
    if mode == "hang":  # a compile that never ends
        time.sleep(3600)
    if mode == "illegal":  # what PyTorch raises after a kernel's illegal address: the worker must exit
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    if mode == "raise_oor":
        raise RuntimeError("triton.runtime.errors.OutOfResources: out of resource: shared memory")
    if mode == "raise_compile":
        raise SyntaxError("compilation failed: bad kernel")
    if mode == "inplace":  # writes its input: right only if every launch starts from fresh inputs
        for i in range(len(data)):
            data[i] += 1.0
        return [sum(data) - len(data)]
    total = 0.0
    for _ in range(config["work"]):
        total = sum(data)
    if mode == "wrong":
        total *= 1.5
    if mode == "nan":
        total = float("nan")
    return [total]
