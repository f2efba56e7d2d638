"""A stand-in for an installed package that ships Triton kernels (tests only): one kernel with its own
``triton.autotune`` list, one whose launcher picks BLOCK_SIZE and num_warps by a size rule, as
liger-kernel's do.  The tests run them under the Triton interpreter (TRITON_INTERPRET=1) on the CPU."""
