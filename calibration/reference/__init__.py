"""Engine code (needs torch): the strategies as engines run them (strategies.py), the
verifier against torch.argmax, and the fused Triton kernels."""
