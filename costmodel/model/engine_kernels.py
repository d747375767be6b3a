"""Kernel kinds the engine recipes need (costmodel/model/recipes.py), priced from the profile's own rates: derived.

None is measured: each is a roofline over the profile's launch floor (`graph_kernel_us`) and its bandwidths -
the read rate of a bandwidth-bound reduce (`kernel_ops["argmax"].bw_gbps`, bytes read / time) and the copy
rate (`kernel_ops["relayout_copy"].bw_gbps`, bytes read + written / time). For R rows of C columns of e bytes:

argmax_bw_us      one launch reading every logit once (a CuTe / torch.compile'd reduce that keeps the memory
                  system busy at every R, unlike ATen's launch heuristic):  t0 + R C e / BW_read
split_argmax_us   SGLang's `draft_topk1_postprocess` (a split-vocab partial argmax over (R, cdiv(C, BLOCK)) CTAs, then a
                  one-warp finalize launch):                               argmax_bw_us(R, C) + t0
softmax_us        torch.softmax over the last dim (ATen cunn_SoftMaxForward): one pass for the max and the
                  sum (a read), one pass that reads and writes:           t0 + R C e / BW_read + 2 R C e / BW_copy
small_us          one launch over a few bytes per row (a fused pick over p pairs): t0 + 2 R b / BW_copy
fused_dist_argmax_us  tokenspeed's `distributed_argmax` (one CuTe kernel: local argmax over the shard, packed
                  (value, id) key multimem store, poll, reduce): argmax_bw_us(R, s) - t0 + exchange_us, the
                  exchange priced as the profile's multimem all-reduce of R x 8 bytes (its own launch and flag
                  round trips; NCCL where the profile has no multimem).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..profiles.types import Profile

DERIVED = "derived (engine_kernels: roofline over the profile's launch floor and bandwidths)"


def _rates(profile: Profile) -> tuple[Any, Any, Any]:
    return (profile.graph_kernel_us, profile.kernel_ops["argmax"].bw_gbps, profile.kernel_ops["relayout_copy"].bw_gbps)


def argmax_bw_us(profile: Profile, rows: Any, cols: Any, elem_bytes: Any) -> np.ndarray:
    """t0 + R C e / BW_read (us; GB/s = 1e3 bytes/us)."""
    t0, read, _ = _rates(profile)
    nbytes = np.asarray(rows, dtype=float) * np.asarray(cols, dtype=float) * np.asarray(elem_bytes, dtype=float)
    return t0 + nbytes / read * 1e-3


def split_argmax_us(profile: Profile, rows: Any, cols: Any, elem_bytes: Any) -> np.ndarray:
    """argmax_bw_us(R, C) + t0 (the finalize launch)."""
    return argmax_bw_us(profile, rows, cols, elem_bytes) + profile.graph_kernel_us


def softmax_us(profile: Profile, rows: Any, cols: Any, elem_bytes: Any) -> np.ndarray:
    """t0 + R C e / BW_read + 2 R C e / BW_copy."""
    t0, read, copy = _rates(profile)
    nbytes = np.asarray(rows, dtype=float) * np.asarray(cols, dtype=float) * np.asarray(elem_bytes, dtype=float)
    return t0 + nbytes / read * 1e-3 + 2.0 * nbytes / copy * 1e-3


def small_us(profile: Profile, rows: Any, bytes_per_row: Any) -> np.ndarray:
    """t0 + 2 R b / BW_copy."""
    t0, _, copy = _rates(profile)
    return t0 + 2.0 * np.asarray(rows, dtype=float) * np.asarray(bytes_per_row, dtype=float) / copy * 1e-3


def fused_dist_argmax_us(profile: Profile, rows: Any, shard: Any, elem_bytes: Any, exchange_us: Any) -> np.ndarray:
    """argmax_bw_us(R, s) - t0 + exchange_us (one launch: the exchange's own floor stands for it)."""
    return argmax_bw_us(profile, rows, shard, elem_bytes) - profile.graph_kernel_us + np.asarray(exchange_us, float)
