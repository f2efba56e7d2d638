"""Triton on NVIDIA GPUs: kernel files, worker processes, the evaluator."""
