"""`validate`'s engine-figures set: the in-engine figures of data/reference/engine-figures/ priced by the recipes.

Each row is one published figure (SOURCES.md there: the torch eager / graph all_reduce loop on 4x H100 and
the engine pull requests of section 2) against what the tool prices for it, with a 90% interval over the
project's interval ensemble (`costmodel.evidence.ensemble.ensemble`, the members every other interval uses:
bootstrap replicates x per-op discrepancy factors, with the "host" and "serving" spreads): member m prices the
figure with its own profile and factors (`_members`), and the interval is the 5th..95th percentile of the
members' values. `check` says how the figure relates to the model: "in-sample" where it set a parameter (the
eager loop set engines' c10d_call_us, the pull-request figures set the serving term), "held-out" where nothing
was fitted on it (the graph replay times). `target` is the precision the figure is reproduced to (the issue's
"done when"): a relative error bound, or "sign" for a figure that only says which path is slower.

Rows (predicted per call / per step, us; factor names are the ensemble's ops):
  torch-eager-loop   back-to-back eager `dist.all_reduce` loop, as `--engine vllm` prices one call: the
                     steady state of N_LOOP launches through engines.step_time_us (host c10d_call_us x "host",
                     GPU the h100 profile's all_reduce at p = 4 x "all_reduce"), per call -> max(host, GPU)
  torch-graph-loop   the same calls replayed from a CUDA graph: the all_reduce device time x "all_reduce"
  sglang-37106-*     2x H20 (TP 2, the PR author's comment: "validated on 2xH20"), DeepSeek-V3 MTP (sglang recipe,
                     `predict_members`): the path the PR adds ("Pack value and id into one FP32 all-gather", then
                     the max value / smallest id pick) is the (value, id) pair all-gather, `local_argmax_pairs` -
                     its cost at one row (the "45-48 us fixed cost"), the sign of its saving at rows 1 / 8 / 16
                     ("slower") and the speedup baseline / local at rows 32 / 64 / 128 (1.226 / 2.051 / 3.826 x;
                     a ratio, in the us columns)
  vllm-55961-rows-R  B300 TP8, top-k k = 16, CUDA graphs, device-synchronized (no host, no serving term): the
                     saving of the packed path over separate gathers, each path as the PR composes it
                     (`_topk_paths`); local top-k and the final top-k + gather are the same kernels in both and
                     cancel, so only the parts that differ are priced
  vllm-55021         B300 TP8, ~40 KB/rank NCCL logits all-gather in the engine: device time + serving term
  sglang-32551       GB300 MNNVL (gb200-nvl72 profile), ~38.7 KB/rank logits all-gather: device + serving
  sglang-32461       GB300 MNNVL, all-reduce of 1-6 tokens x 6144 bf16 (3.5 tokens): device + serving
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..model.collectives import collective_time_us
from ..model.engine_kernels import small_us
from ..model.engines import Stage, host_costs, step_time_us
from ..model.members import predict_members
from ..model.predict import predict
from ..model.scenario import Scenario
from ..model.serving import SERVING_CALL_US
from ..profiles.paths import REFERENCE_DIR
from ..profiles.presets import preset
from ..profiles.store import load_profile
from ..profiles.types import Profile
from .ensemble import ensemble

FIGURES_DIR = Path(REFERENCE_DIR) / "engine-figures"
LOOP_FILE = FIGURES_DIR / "torch_all_reduce_eager_vs_graph_4xh100.json"
N_LOOP = 200  # iterations per point in the loop file
TOP_K = 16  # vLLM #55961's top-k


def _members(profile: Profile) -> list[tuple[Profile, dict[str, float]]]:
    """The interval ensemble's members (`ensemble`): (member profile, its factors) - one per draw."""
    reps, factors, _ = ensemble(profile)
    return [(r, f or {}) for r, f in zip(reps, factors, strict=True)]


def _band(values) -> tuple[float, float]:
    """(p5, p95) of the members' values: the central 90%."""
    lo, hi = np.percentile(np.asarray(values, dtype=float), [5, 95])
    return float(lo), float(hi)


def _loop_per_call(host_us, gpu_us) -> np.ndarray:
    """Per call of N_LOOP back-to-back launches (no sync): step_time_us of N_LOOP equal stages / N_LOOP
    (one stage of N_LOOP ops: the same pipeline, vectorized over draws)."""
    h, g = np.asarray(host_us, dtype=float), np.asarray(gpu_us, dtype=float)
    return step_time_us([Stage(h * N_LOOP, g * N_LOOP, N_LOOP)]) / N_LOOP


def _row(name, source, profile, measured, predicted, low, high, check, target) -> dict:
    """One figure. target "sign": `measured` is only a sign (-1: slower); covered = the whole interval has it."""
    if target == "sign":
        rel, ok = float("nan"), bool(np.sign(predicted) == np.sign(measured))
        covered = bool(np.sign(low) == np.sign(measured) == np.sign(high))
        measured = float("nan")
    else:
        rel = predicted / measured - 1.0
        ok, covered = bool(abs(rel) <= target), bool(low <= measured <= high)
    return {"figure": name, "source": source, "profile": profile, "measured_us": measured,
            "predicted_us": predicted, "low_us": low, "high_us": high, "rel_error": rel,
            "covered": covered, "check": check,
            "target": target if target == "sign" else f"{target:.0%}", "within_target": bool(ok)}


def engine_figure_rows() -> pd.DataFrame:
    """Every engine figure priced (module doc); one row per figure."""
    rows = []
    h100 = load_profile("h100-sxm-nvlink")
    members = _members(h100)
    hc = host_costs(h100)
    src = "waynehacking8/nccl-collectives-bench results/quiet/tp_latency.json (engine-figures)"
    for pt in json.loads(LOOP_FILE.read_text())["size_sweep"]:
        g = float(collective_time_us(h100, "all_reduce", pt["bytes"], 4, 1, "graph"))
        gm = np.array([float(collective_time_us(m, "all_reduce", pt["bytes"], 4, 1, "graph")) * f.get("all_reduce", 1.0)
                       for m, f in members])
        hm = np.array([host_costs(m).c10d_call_us * f.get("host", 1.0) for m, f in members])
        rows.append(_row(f"torch-eager-loop-{pt['bytes']}B", src, h100.name, pt["eager_us"],
                         float(_loop_per_call(hc.c10d_call_us, g)), *_band(_loop_per_call(hm, gm)), "in-sample",
                         0.25))
        rows.append(_row(f"torch-graph-loop-{pt['bytes']}B", src, h100.name, pt["graph_us"], g, *_band(gm),
                         "held-out", 0.25))
    rows += _sglang_37106()
    rows += _vllm_55961()
    rows += _in_engine_collectives()
    return pd.DataFrame(rows)


LOCAL = "local_argmax_pairs"  # SGLang #37106's packed fp32 (value, id) all-gather + pick (module doc)


SGLANG_37106_TP = 2  # the PR author's review request (2026-08-30): "validated on 2xH20 ... CUDA Graph replay"
SGLANG_37106_SLOWER_ROWS = (1, 8, 16)  # "rows 1/8/16 are slower and therefore fail closed to the existing path"
SGLANG_37106_SPEEDUPS = ((32, 1.226), (64, 2.051), (128, 3.826))  # "The high-row Graph cases are 1.226x/..."


def _sglang_37106() -> list[dict]:
    """SGLang #37106 on 2x H20, DeepSeek-V3 MTP (sglang recipe, `predict_members`): the packed path's fixed cost
    at one row (in-sample: it set the serving term), the sign of its saving at rows 1/8/16 (local slower) and the
    speedup baseline / local at rows 32/64/128 (held-out: nothing was fitted on them)."""
    h20 = load_profile("h20-hgx-nvlink")
    reps, factors, _ = ensemble(h20)
    batches = SGLANG_37106_SLOWER_ROWS + tuple(r for r, _ in SGLANG_37106_SPEEDUPS)
    sc = Scenario(**preset("deepseek-v3"), tp=SGLANG_37106_TP, batch=np.array(batches), engine="sglang")
    point = predict(sc, h20, ("full_all_gather", LOCAL))
    priced = predict_members(sc, reps, ("full_all_gather", LOCAL), factors)
    total, saving = np.asarray(point.total_us(LOCAL), float), np.asarray(point.saving_us(LOCAL), float)
    speedup = np.asarray(point.total_us("full_all_gather"), float) / total
    m_total, m_saving = np.asarray(priced.total_us[LOCAL], float), np.asarray(priced.saving_us(LOCAL), float)
    m_speedup = np.asarray(priced.total_us["full_all_gather"], float) / m_total
    src = "sgl-project/sglang PR #37106 (engine-figures SOURCES.md section 2; the author's comment of 2026-08-30)"
    rows = [_row("sglang-37106-packed-path-h20", src, h20.name, 46.5, float(total[0]), *_band(m_total[:, 0]),
                 "in-sample", 0.30)]
    for i, b in enumerate(batches):
        if b in SGLANG_37106_SLOWER_ROWS:
            rows.append(_row(f"sglang-37106-saving-sign-{b}-rows", src, h20.name, -1.0, float(saving[i]),
                             *_band(m_saving[:, i]), "held-out", "sign"))
        else:
            measured = dict(SGLANG_37106_SPEEDUPS)[b]
            rows.append(_row(f"sglang-37106-speedup-{b}-rows (x)", src, h20.name, measured, float(speedup[i]),
                             *_band(m_speedup[:, i]), "held-out", 0.30))
    return rows


def _topk_paths(profile: Profile, rows: int, factors: dict[str, float] | None = None) -> tuple[float, float]:
    """(separate, packed): the parts of vLLM #55961's two `get_top_k_tokens` paths that differ, at TP 8, top-k k,
    R rows (us, device time; PR description and its sister local-inference-lab/vllm#649, same change):
        separate  all_gather(R k 2 B, the bf16 values) + all_gather(R k 8 B, the int64 ids)
                  + the widening of the gathered values to fp32 for the final scale ([R, 8k], 2 -> 4 B)
        packed    values -> fp32 ([R, k], 2 -> 4 B) + ids int64 -> int32 ([R, k], 8 -> 4 B; the bit-cast to fp32
                  is a view) + cat ([R, 2k] fp32) + all_gather(R 2k 4 B) (the split after it: views)
    small kernels by engine_kernels.small_us (t0 + 2 R b / BW_copy, b = the row's bytes read + written over 2),
    pre-gather ones x "key_pack", the widening x "key_unpack", the all-gathers x "all_gather"."""
    f = factors or {}
    k = TOP_K

    def ag(nbytes: float) -> float:
        return float(collective_time_us(profile, "all_gather", nbytes, 8, 1, "graph")) * f.get("all_gather", 1.0)

    def kern(bytes_per_row: float, op: str) -> float:
        return float(small_us(profile, rows, bytes_per_row)) * f.get(op, 1.0)

    separate = ag(rows * k * 2) + ag(rows * k * 8) + kern(8 * k * (2 + 4) / 2, "key_unpack")
    packed = (kern(k * (2 + 4) / 2, "key_pack") + kern(k * (8 + 4) / 2, "key_pack") + kern(2 * k * 4, "key_pack")
              + ag(rows * 2 * k * 4))
    return separate, packed


def _vllm_55961() -> list[dict]:
    b300 = load_profile("b300-hgx-nvlink")
    members = _members(b300)
    src = "vllm-project/vllm PR #55961 (engine-figures SOURCES.md section 2)"
    out = []
    for rows, before, after in ((8, 48.22, 38.21), (32, 50.21, 44.37), (128, 52.53, 46.30)):
        sep, packed = _topk_paths(b300, rows)
        band = [a - b for a, b in (_topk_paths(m, rows, f) for m, f in members)]
        out.append(_row(f"vllm-55961-saving-rows-{rows}", src, b300.name, before - after, sep - packed, *_band(band),
                        "held-out", 0.30))
    return out


def _in_engine_collectives() -> list[dict]:
    """In-engine small collectives: device time + one serving term (the figures that set the term)."""
    out = []
    for name, prof, op, nbytes, measured, src in (
            ("vllm-55021-logits-all-gather", "b300-hgx-nvlink", "all_gather", 40_000, 21.0,
             "vllm-project/vllm PR #55021"),
            ("sglang-32551-logits-all-gather", "gb200-nvl72", "all_gather", 38_720, 20.0,
             "sgl-project/sglang PR #32551"),
            ("sglang-32461-draft-all-reduce", "gb200-nvl72", "all_reduce", int(3.5 * 6144 * 2), 28.0,
             "sgl-project/sglang PR #32461")):
        p = load_profile(prof)
        dev = float(collective_time_us(p, op, nbytes, 8, 1, "graph"))
        band = [float(collective_time_us(m, op, nbytes, 8, 1, "graph")) * f.get(op, 1.0)
                + SERVING_CALL_US * f.get("serving", 1.0) for m, f in _members(p)]
        out.append(_row(name, src, p.name, measured, dev + SERVING_CALL_US, *_band(band), "in-sample", 0.30))
    return out


def format_engine_figures(table: pd.DataFrame) -> str:
    """The set as printed by `validate`: a header line, one row per figure, and the totals."""
    n, cov, ok = len(table), int(table["covered"].sum()), int(table["within_target"].sum())
    cols = ["figure", "profile", "check", "measured_us", "predicted_us", "low_us", "high_us", "rel_error", "covered",
            "target", "within_target"]
    body = table[cols].to_string(index=False, float_format=lambda x: f"{x:.3f}")
    return (f"engine figures (data/reference/engine-figures; engine recipes, host and serving terms; 90% interval "
            f"over the interval ensemble's members, evidence.ensemble):\n{body}\n"
            f"{cov}/{n} inside their 90% interval, {ok}/{n} within target")
