"""`validate`'s engine-figures set: the in-engine figures of data/reference/engine-figures/ priced by the recipes.

Each row is one published figure (SOURCES.md there: the torch eager / graph all_reduce loop on 4x H100 and
the engine pull requests of section 2) against what the tool prices for it, with a 90% interval from
INTERVAL_DRAWS log-normal draws of the parts it sums (the profile's per-op discrepancy sigma for each
collective, HOST_SIGMA_LOG for host time, serving.SERVING_SIGMA_LOG for the serving term; fixed seed).
`check` says how the figure relates to the model: "in-sample" where it set a parameter (the eager loop set
engines' c10d_call_us, the pull-request figures set the serving term), "held-out" where nothing was fitted on
it (the graph replay times). `target` is the precision the figure is reproduced to (the issue's "done when"):
a relative error bound, or "sign" for a figure that only says which path is slower.

Rows (predicted per call / per step, us):
  torch-eager-loop   back-to-back eager `dist.all_reduce` loop, as `--engine vllm` prices one call: the
                     steady state of N_LOOP launches through engines.step_time_us (host c10d_call_us,
                     GPU the h100 profile's all_reduce at p = 4), per call -> max(host, GPU)
  torch-graph-loop   the same calls replayed from a CUDA graph: the profile's all_reduce device time
  sglang-37106-*     H20 TP8, DeepSeek-V3 MTP at one row (sglang recipe): the packed path's cost (the
                     "45-48 us fixed cost") and the sign of its saving (local slower at one row)
  vllm-55961-rows-R  B300 TP8, top-k 16, CUDA graphs, device-synchronized (so no serving term): saving of
                     one packed fp32 (value, id) all-gather over separate bf16-value and int64-id all-gathers
                     = all_gather(R k 2 B) - the pack and unpack kernels (engine_kernels.small_us each)
  vllm-55021         B300 TP8, ~40 KB/rank NCCL logits all-gather in the engine: device time + serving term
  sglang-32551       GB300 MNNVL (gb200-nvl72 profile), ~38.7 KB/rank logits all-gather: device + serving
  sglang-32461       GB300 MNNVL, all-reduce of 1-6 tokens x 6144 bf16 (3.5 tokens): device + serving
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..model.collectives import collective_time_us
from ..model.engine_kernels import small_us
from ..model.engines import Stage, host_costs, step_time_us
from ..model.predict import predict
from ..model.scenario import Scenario
from ..model.serving import SERVING_CALL_US, SERVING_SIGMA_LOG
from ..profiles.paths import REFERENCE_DIR
from ..profiles.presets import preset
from ..profiles.store import load_profile
from .discrepancy import HOST_SIGMA_LOG, discrepancy

FIGURES_DIR = Path(REFERENCE_DIR) / "engine-figures"
LOOP_FILE = FIGURES_DIR / "torch_all_reduce_eager_vs_graph_4xh100.json"
N_LOOP = 200  # iterations per point in the loop file
INTERVAL_DRAWS = 400
SEED = 17


@dataclass(frozen=True)
class Part:
    """A priced term: its value, and the log-sigma of its discrepancy (0: exact)."""

    us: float
    sigma: float = 0.0


def _draws(parts: list[Part], combine, rng: np.random.Generator) -> tuple[float, float]:
    """(p5, p95) of combine(values) over INTERVAL_DRAWS independent log-normal draws of each part."""
    z = rng.standard_normal((INTERVAL_DRAWS, len(parts)))
    vals = np.array([p.us for p in parts]) * np.exp(z * np.array([p.sigma for p in parts]))
    out = np.asarray(combine(*vals.T), dtype=float)  # every combine is element-wise: all draws at once
    return float(np.quantile(out, 0.05)), float(np.quantile(out, 0.95))


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
    rng = np.random.default_rng(SEED)
    rows = []
    h100 = load_profile("h100-sxm-nvlink")
    d100 = discrepancy(h100)
    hc = host_costs(h100)
    src = "waynehacking8/nccl-collectives-bench results/quiet/tp_latency.json (engine-figures)"
    for pt in json.loads(LOOP_FILE.read_text())["size_sweep"]:
        g = float(collective_time_us(h100, "all_reduce", pt["bytes"], 4, 1, "graph"))
        gp, hp = Part(g, d100.sigma("all_reduce")), Part(hc.c10d_call_us, HOST_SIGMA_LOG)
        lo, hi = _draws([hp, gp], _loop_per_call, rng)
        rows.append(_row(f"torch-eager-loop-{pt['bytes']}B", src, h100.name, pt["eager_us"],
                         float(_loop_per_call(hc.c10d_call_us, g)), lo, hi, "in-sample", 0.25))
        lo, hi = _draws([gp], lambda x: x, rng)
        rows.append(_row(f"torch-graph-loop-{pt['bytes']}B", src, h100.name, pt["graph_us"], g, lo, hi,
                         "held-out", 0.25))
    rows += _sglang_37106(rng)
    rows += _vllm_55961(rng)
    rows += _in_engine_collectives(rng)
    return pd.DataFrame(rows)


def _sglang_37106(rng: np.random.Generator) -> list[dict]:
    h20 = load_profile("h20-hgx-nvlink")
    sc = Scenario(**preset("deepseek-v3"), tp=8, batch=1, engine="sglang")
    pred = predict(sc, h20, ("full_all_gather", "packed_allreduce_max"))
    packed = pred.strategies["packed_allreduce_max"].components_us
    sigma = discrepancy(h20).sigma("all_reduce")
    coll = float(packed["all_reduce"])
    rest = float(sum(v for k, v in packed.items() if k not in ("all_reduce", "serving")))
    parts = [Part(coll, sigma), Part(SERVING_CALL_US, SERVING_SIGMA_LOG), Part(rest, 0.2)]
    total = coll + SERVING_CALL_US + rest
    lo, hi = _draws(parts, lambda a, b, c: a + b + c, rng)
    saving = float(pred.saving_us("packed_allreduce_max"))
    src = "sgl-project/sglang PR #37106 (engine-figures SOURCES.md section 2)"
    base = float(pred.total_us("full_all_gather")) - SERVING_CALL_US  # both paths pay one serving term
    slo, shi = _draws([Part(base, 0.2), Part(coll, sigma), Part(rest, 0.2)], lambda b, a, c: b - (a + c), rng)
    return [_row("sglang-37106-packed-path-h20", src, h20.name, 46.5, total, lo, hi, "in-sample", 0.30),
            _row("sglang-37106-saving-sign-1-row", src, h20.name, -1.0, saving, slo, shi, "in-sample", "sign")]


def _vllm_55961(rng: np.random.Generator) -> list[dict]:
    b300 = load_profile("b300-hgx-nvlink")
    sigma = discrepancy(b300).sigma("all_gather")
    k, src = 16, "vllm-project/vllm PR #55961 (engine-figures SOURCES.md section 2)"
    out = []
    for rows, before, after in ((8, 48.22, 38.21), (32, 50.21, 44.37), (128, 52.53, 46.30)):
        ag = float(collective_time_us(b300, "all_gather", rows * k * 2, 8, 1, "graph"))
        pack = float(small_us(b300, rows, k * 8)) + float(small_us(b300, rows, k * 8))
        lo, hi = _draws([Part(ag, sigma), Part(pack, 0.2)], lambda a, b: a - b, rng)
        out.append(_row(f"vllm-55961-saving-rows-{rows}", src, b300.name, before - after, ag - pack, lo, hi,
                        "held-out", 0.30))
    return out


def _in_engine_collectives(rng: np.random.Generator) -> list[dict]:
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
        parts = [Part(dev, discrepancy(p).sigma(op)), Part(SERVING_CALL_US, SERVING_SIGMA_LOG)]
        lo, hi = _draws(parts, lambda a, b: a + b, rng)
        out.append(_row(name, src, p.name, measured, dev + SERVING_CALL_US, lo, hi, "in-sample", 0.30))
    return out


def format_engine_figures(table: pd.DataFrame) -> str:
    """The set as printed by `validate`: a header line, one row per figure, and the totals."""
    n, cov, ok = len(table), int(table["covered"].sum()), int(table["within_target"].sum())
    cols = ["figure", "profile", "check", "measured_us", "predicted_us", "low_us", "high_us", "rel_error", "covered",
            "target", "within_target"]
    body = table[cols].to_string(index=False, float_format=lambda x: f"{x:.3f}")
    return (f"engine figures (data/reference/engine-figures; engine recipes, host and serving terms; 90% interval "
            f"from {INTERVAL_DRAWS} draws):\n{body}\n{cov}/{n} inside their 90% interval, {ok}/{n} within target")
