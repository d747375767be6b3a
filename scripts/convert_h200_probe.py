"""Convert the standalone H200 probe's tables into this project's measurement schema.

    python scripts/convert_h200_probe.py [--src ../shared/measurements/h200-2026-11-30] \
        [--out data/calibration/h200-2026-11-30]

Writes, into --out, the raw files unchanged under raw/ and:

* kernels.csv - one schema row (costmodel/profiles/schema.py MEASUREMENT_COLUMNS) per (probe column, shape),
  plus the extra columns `batch`, `vocab` and `probe_column`. Column -> op (rows, cols, world_size):

      local_max_graph_us          local_max        (B, s, 1)
      local_pack_graph_us         local_pack       (B, s, 1)        [+ _eager_us]
      full_copy_argmax_graph_us   relayout_argmax  (B, s, p)        [+ _eager_us]
      argmax_only_graph_us        argmax           (p*B, s, 1)
      reduce_pairs_graph_us       pair_reduce      (B, 0, p)  dtype fp32 (it reads fp32 pairs)  [+ _eager_us]

  The probe's reduce_pairs was timed on the same shapes for the bf16 and the fp32 logits rows; both are kept.
* lm_head.csv - the draft lm_head GEMM ([B, hidden] x [hidden, V/p], bf16, CUDA graph): columns
  hidden, vocab, world_size, rows, cols (= V/p), median_us. Context only (common to every strategy), so it
  is not a schema kernel op.
* c10d_world1.csv - schema rows for all_gather_into_tensor with NCCL at world size 1, eager: the host-side
  cost of one eager c10d call (no communication happens at one rank).

Only median times exist in the probe's tables (no p10/p90 per point): those columns stay empty.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from costmodel.io.errors import InputError  # noqa: E402
from costmodel.io.measurements import MEASUREMENT_COLUMNS, validate_measurements  # noqa: E402

SRC = ROOT.parent / "shared" / "measurements" / "h200-2026-11-30"
OUT = ROOT / "data" / "calibration" / "h200-2026-11-30"
GPU = "NVIDIA H200"
DTYPE = {"bfloat16": "bf16", "float32": "fp32"}
RAW_FILES = ("README.md", "kernels.csv", "lm_head_gemm.csv", "nccl_world1_eager.csv")
# probe column stem -> (schema op, rows rule, cols rule, world size rule, fixed dtype)
COLUMNS = {
    "local_max": ("local_max", "B", "s", "1", None),
    "local_pack": ("local_pack", "B", "s", "1", None),
    "full_copy_argmax": ("relayout_argmax", "B", "s", "p", None),
    "argmax_only": ("argmax", "pB", "s", "1", None),
    "reduce_pairs": ("pair_reduce", "B", "0", "p", "fp32"),
}


def _base(**kw) -> dict:
    row = {c: float("nan") for c in MEASUREMENT_COLUMNS}  # p10/p90/min/max: not in the probe's tables
    row.update(backend="none", device="cuda", gpu=GPU, nodes=1, bytes_per_rank=0, rows=0, cols=0, iters=0)
    row.update(kw)
    return row


def convert_kernels(raw: pd.DataFrame) -> pd.DataFrame:
    out = []
    for rec in raw.to_dict("records"):
        b, p, s = int(rec["batch"]), int(rec["tp"]), int(rec["shard"])
        for stem, (op, rows_rule, cols_rule, ws_rule, fixed_dtype) in COLUMNS.items():
            for mode in ("graph", "eager"):
                column = f"{stem}_{mode}_us"
                if column not in rec or pd.isna(rec[column]):
                    continue
                out.append(_base(op=op, dtype=fixed_dtype or DTYPE[rec["dtype"]], mode=mode,
                                 world_size=p if ws_rule == "p" else 1,
                                 rows=b * p if rows_rule == "pB" else b, cols=s if cols_rule == "s" else 0,
                                 median_us=float(rec[column]), batch=b, vocab=int(rec["vocab"]),
                                 logits_dtype=DTYPE[rec["dtype"]], probe_column=column))
    frame = pd.DataFrame(out)
    validate_measurements(frame, source="converted kernels.csv")
    return frame


def convert_lm_head(raw: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"op": "lm_head", "gpu": GPU, "dtype": "bf16", "mode": "graph",
                         "hidden": raw["hidden"].astype(int), "vocab": raw["vocab"].astype(int),
                         "world_size": raw["tp"].astype(int), "rows": raw["batch"].astype(int),
                         "cols": (raw["vocab"] // raw["tp"]).astype(int), "median_us": raw["lm_head_graph_us"]})


def convert_c10d(raw: pd.DataFrame) -> pd.DataFrame:
    frame = pd.DataFrame([_base(op="all_gather", backend="nccl", dtype="uint8", mode="eager", world_size=1,
                                bytes_per_rank=int(r["bytes"]), median_us=float(r["nccl1_eager_us"]))
                          for r in raw.to_dict("records")])
    validate_measurements(frame, source="converted c10d_world1.csv")
    return frame


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=SRC)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    try:
        missing = [f for f in RAW_FILES if not (args.src / f).is_file()]
        if missing:
            raise InputError(f"{args.src}: missing {', '.join(missing)}")
        (args.out / "raw").mkdir(parents=True, exist_ok=True)
        for name in RAW_FILES:
            shutil.copyfile(args.src / name, args.out / "raw" / name)
        convert_kernels(pd.read_csv(args.src / "kernels.csv")).to_csv(args.out / "kernels.csv", index=False)
        convert_lm_head(pd.read_csv(args.src / "lm_head_gemm.csv")).to_csv(args.out / "lm_head.csv", index=False)
        convert_c10d(pd.read_csv(args.src / "nccl_world1_eager.csv")).to_csv(args.out / "c10d_world1.csv",
                                                                              index=False)
    except (InputError, OSError, KeyError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}/{{kernels,lm_head,c10d_world1}}.csv and raw/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
