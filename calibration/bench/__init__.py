"""Measurement (needs torch): the collective benchmark (torchrun, NCCL or gloo), the kernel
benchmark, and their payload planning and stopping rule."""
