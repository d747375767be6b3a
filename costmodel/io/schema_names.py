"""The measurement schema's names: columns, ops (collectives, kernels, fused and top-k kernels), dtypes and modes.

Plain constants without numpy or pandas, so the CLI's parser and the profile reader can name them without loading
the frame machinery (`costmodel.io.measurements` reads and checks measurement frames and re-exports these).
"""

from __future__ import annotations

MEASUREMENT_COLUMNS: tuple[str, ...] = (
    "op",
    "backend",
    "device",
    "gpu",
    "dtype",
    "mode",
    "world_size",
    "nodes",
    "bytes_per_rank",
    "rows",
    "cols",
    "iters",
    "median_us",
    "p10_us",
    "p90_us",
    "min_us",
    "max_us",
)

COLLECTIVE_OPS: tuple[str, ...] = ("all_gather", "all_reduce", "gather", "broadcast")

# op -> what `cols` is (rows is always the number of sampled rows B).
KERNEL_OPS: dict[str, str] = {
    "local_argmax": "vocab shard s: mask padding, max over [rows, s], pack (fp32 value, fp32 global id)",
    "relayout_copy": "vocab shard s: copy the gathered [p*rows, s] into [rows, p*s] (world_size = p)",
    "argmax": "argmaxed width (V, or V_target after a d2t scatter): torch.argmax over [rows, cols]",
    "relayout_argmax": "vocab shard s: relayout_copy followed by argmax over [rows, p*s] (world_size = p)",
    "chunked_argmax": "vocab shard s: argmax of each rank chunk of the gathered [p*rows, s] buffer + reduce over p",
    "pair_reduce": "unused (0): reduce p gathered (value, id) pairs per row (world_size = p)",
    "key_pack": "vocab shard s: mask padding, max over [rows, s], build one 64-bit order key per row",
    "key_unpack": "unused (0): decode the reduced 64-bit key into an int64 id",
    "d2t_scatter": "target vocab V_target: fill [rows, V_target] with -inf and scatter [rows, 32000] draft logits",
    "d2t_lookup": "unused (0): target = draft + d2t[draft] for rows ids",
    "local_max": "vocab shard s: torch.max over [rows, s] (values and indices; the TP = 1 local path)",
    "local_pack": "vocab shard s: max over [rows, s], pack (fp32 value, fp32 id) - no rank offset, no padding mask",
    "local_argmax_masked": "vocab shard s: local_argmax on the last of 2 ranks holding 64 padding ids (V = 2s - 64): "
                           "padding excluded, max, rank offset, fp32 pack",
}

# Fused Triton variants of the local path (calibration/reference/triton_kernels.py); `cols` as for the base op.
FUSED_KERNEL_OPS: dict[str, str] = {
    f"{op}_fused": f"fused Triton variant of {op}; cols as for {op}"
    for op in ("local_argmax", "key_pack", "pair_reduce", "key_unpack")
}

# Top-k (tree drafting) kernels, measured per k: their rows carry a `k` column (default 1 for every other op) and
# their tables a `k` field. `cols` as described; calibration/reference/strategies.py local_topk / merge_topk.
TOPK_KERNEL_OPS: dict[str, str] = {
    "local_topk": "vocab shard s: stable top-k (value desc, lowest id) of [rows, s] + rank offset, packed as k "
                  "(fp32 value, fp32 id) pairs",
    "topk_merge": "candidates p*k: stable top-k of [rows, p*k] fp32 (value, id) candidates by (value desc, id asc)",
}
MAX_TOPK = 4096

ALL_OPS: tuple[str, ...] = COLLECTIVE_OPS + tuple(KERNEL_OPS) + tuple(FUSED_KERNEL_OPS) + tuple(TOPK_KERNEL_OPS)
# bytes per element of every dtype a measurement row may carry: logits, ids / keys (int64) and raw bytes
ELEM_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp32": 4, "int64": 8, "uint8": 1, "int8": 1,
                              # the other nccl-tests data types (calibration.import_nccl_tests): collectives only
                              "int32": 4, "uint32": 4, "uint64": 8, "fp64": 8, "fp8_e4m3": 1, "fp8_e5m2": 1}
# collectives nccl-tests measures that no strategy uses: imported for validation only (not priced, not fitted)
VALIDATION_ONLY_OPS: tuple[str, ...] = ("reduce_scatter", "alltoall")
DTYPES: dict[str, int] = {k: ELEM_BYTES[k] for k in ("bf16", "fp16", "fp32")}  # the logits dtypes
D2T_DRAFT_COLS = 32000  # the kernel benchmark's d2t_scatter draft width: [rows, 32000] logits (KERNEL_OPS)
MODES: tuple[str, ...] = ("graph", "eager")
MAX_WORLD_SIZE = 1 << 20  # world_size / nodes above this are refused
