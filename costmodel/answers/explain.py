"""Explanations: every component of a prediction as its formula with the numbers substituted.

For a single scenario, each priced call (collective or kernel) is restated
step by step - bytes, regime chosen, latency and bandwidth used - and ends in
"= X us". The X of a strategy's calls add up to its total, so a user can check
a prediction by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.collectives import US_PER_BYTE_AT_1_GBPS, bus_factor, chosen_regime, collective_time_us, total_bytes
from ..model.engines import host_costs
from ..model.gpu_kernels import MODEL_OPS, reduce_launch, split_graph_us
from ..model.kernel_ratios import DTYPE_FREE_OPS
from ..model.kernels import ANCHOR_OPS, kernel_bytes, kernel_time_us
from ..model.parts import Call
from ..model.predict import Prediction, predict
from ..model.scenario import Scenario
from ..profiles.types import Profile

# the model ops whose anchor is one ATen last-dim reduction (gpu_kernels.graph_time_us)
REDUCTION_OPS = ("local_max", "local_pack", "local_argmax", "key_pack", "argmax", "relayout_argmax", "chunked_argmax")


@dataclass(frozen=True)
class Explained:
    strategy: str
    component: str
    op: str
    time_us: float
    text: str


def _n(x: float) -> str:
    return f"{x:,.0f}" if float(x).is_integer() and abs(x) >= 1000 else f"{x:.4g}"


def explain_collective(profile: Profile, op: str, bytes_per_rank: float, p: int, nodes: int, mode: str) -> tuple[
        float, str]:
    """(time_us, formula text) for one collective call."""
    value = float(collective_time_us(profile, op, bytes_per_rank, p, nodes, mode))
    if p <= 1:
        return value, f"{op}: p = 1, no communication = 0 us"
    curve = profile.curve(op, p, mode, nodes)
    size = float(total_bytes(op, bytes_per_rank, p))
    factor = float(bus_factor(op, p))
    index = int(chosen_regime(curve, bytes_per_rank, p, nodes))
    r = curve.regimes[index]
    across = r.alpha_per_peer_across_nodes_us if nodes > 1 else 0.0
    alpha = r.alpha_base_us + (r.alpha_per_peer_us + across) * (p - 1) + r.alpha_per_node_us * (nodes - 1)
    busbw = r.busbw_gbps
    if nodes > 1 and curve.inter_node_busbw_gbps is not None:
        fastest = max(x.busbw_gbps for x in curve.regimes)
        busbw = (busbw * min(1.0, curve.inter_node_busbw_gbps / fastest) if curve.select == "min"
                 else min(busbw, curve.inter_node_busbw_gbps))
    wire = (size + r.s_half_bytes) * factor / busbw * US_PER_BYTE_AT_1_GBPS
    eager = curve.eager_overhead_us if (curve.mode is None and mode == "eager") else 0.0
    bound = "<=" if np.isfinite(r.max_bytes) else ">"
    edge = r.max_bytes if np.isfinite(r.max_bytes) else curve.regimes[index - 1].max_bytes if index else 0
    scope = f"world size {curve.world_size}" if curve.world_size else "any world size"
    parts = [
        f"{op} [{curve.provenance} curve, {scope}, {curve.mode or 'graph + eager overhead'}]: "
        f"S = {_n(bytes_per_rank)} B/rank -> {_n(size)} B; regime {r.name} "
        + ("(the fastest at this S and p)" if curve.select == "min" else f"(S {bound} {_n(edge)} B)"),
        f"alpha = {r.alpha_base_us:g} + {r.alpha_per_peer_us:g} x {p - 1} + {r.alpha_per_node_us:g} x {nodes - 1}"
        + (f" + {across:g} x {p - 1} (network overhead per ring step)" if across else "") + f" = {alpha:.3f} us",
        f"launch {curve.launch_us:g} us",
        (f"(S + s_half {_n(r.s_half_bytes)} B) x {factor:.4g} / {busbw:g} GB/s = {wire:.3f} us" if r.s_half_bytes
         else f"S x {factor:.4g} / {busbw:g} GB/s = {wire:.3f} us"),
    ]
    if eager:
        parts.append(f"eager overhead {eager:g} us")
    raw = curve.launch_us + alpha + wire + eager
    if value > raw + 1e-9:
        parts.append(f"raised to {value - eager:.3f} us by the monotone envelope (an earlier regime ends higher)")
    return value, "; ".join(parts) + f" = {value:.3f} us"


def explain_kernel(profile: Profile, op: str, rows: float, cols: float, world_size: int, dtype: str,
                   elem_bytes: int, mode: str, draft_cols: float) -> tuple[float, str]:
    """(time_us, formula text) for one kernel call."""
    est = kernel_time_us(profile, op, rows=rows, cols=cols, world_size=world_size, dtype=dtype,
                         elem_bytes=elem_bytes, mode=mode, draft_cols=draft_cols)
    value = float(est.time_us)
    table = profile.kernel_table(op, None if op.removesuffix("_fused") in DTYPE_FREE_OPS else dtype, mode,
                                 world_size)
    nbytes = float(kernel_bytes(op, rows, cols, world_size, elem_bytes, draft_cols))
    shape = f"rows {_n(rows)}, cols {_n(cols)}, p {world_size}, {dtype}"
    if profile.kernel_model is not None and op in MODEL_OPS:
        return value, _explain_model_kernel(profile, op, shape, value, rows=rows, cols=cols, world_size=world_size,
                                            elem_bytes=elem_bytes, dtype=dtype, mode=mode, draft_cols=draft_cols,
                                            extrapolated=bool(est.extrapolated))
    if table is not None and not bool(est.extrapolated):
        return value, (f"{op} ({shape}): interpolated (log-log) in the measured {mode} table "
                       f"[{table.source or 'profile'}] = {value:.3f} us")
    spec = profile.kernel_ops[op]
    per_kernel = profile.eager_launch_us if mode == "eager" else profile.graph_kernel_us
    note = " (outside the measured table: roofline, extrapolated)" if bool(est.extrapolated) else ""
    return value, (f"{op} ({shape}){note}: {spec.launches:g} launches x {per_kernel:g} us ({mode}) + fixed "
                   f"{spec.fixed_us:g} us + {_n(nbytes)} B / {spec.bw_gbps:g} GB/s "
                   f"({nbytes / spec.bw_gbps * 1e-3:.3f} us) = {value:.3f} us")


def _explain_model_kernel(profile: Profile, op: str, shape: str, value: float, *, rows, cols, world_size,
                          elem_bytes, dtype, mode, draft_cols, extrapolated: bool) -> str:
    """An op priced by the GPU kernel model (costmodel.model.gpu_kernels), as its terms: the anchor part (the
    measured op inside it; its ATen reduce launch when it is a reduction) times the measured/model ratio of the
    anchor's table where one covers the point, plus the rest of the op; eager: max(host launches, GPU + gaps).
    The terms multiply and add up to `value`."""
    model = profile.kernel_model
    kw = {"rows": rows, "cols": cols, "world_size": world_size, "elem_bytes": elem_bytes, "dtype": dtype,
          "padded": False, "draft_cols": draft_cols}
    anchor = ANCHOR_OPS.get(op, op)
    part, rest = (float(np.asarray(x)) for x in split_graph_us(model, op, anchor, **kw))
    where = f"{op} ({shape}): GPU kernel model [{model.gpu}]"
    launch = ""
    if op in REDUCTION_OPS:
        width = world_size * cols if op == "relayout_argmax" else cols
        height = world_size * rows if op == "chunked_argmax" else rows
        lc = reduce_launch(np.asarray(float(height)), np.asarray(float(width)), model.sm_count,
                           model.max_threads_per_sm, model.warp_size)
        launch = (f" (ATen reduce launch: {int(lc.blocks)} blocks x {int(lc.threads)} threads, "
                  f"{int(lc.values_per_thread)} values/thread, {int(lc.ctas_per_output)} CTAs per row, "
                  f"{int(lc.target_grid)} resident on {model.sm_count} SMs)")
    if mode == "eager":
        return (f"{where}: eager = max(host launches, GPU {part + rest:.3f} us{launch} + per-kernel gaps) "
                f"= {value:.3f} us")
    if abs(part + rest - value) <= 1e-9 * max(abs(value), 1.0):
        note = " (outside the anchor's measured table: the model alone)" if extrapolated else ""
        terms = f"{anchor} {part:.3f} us{launch}" + (f" + rest of {op} {rest:.3f} us" if rest else "")
        return f"{where}{note}: {terms} = {value:.3f} us"
    ratio = (value - rest) / part if part else float("nan")
    terms = f"{anchor} {part:.3f} us{launch} x measured/model {ratio:.4f} (the {anchor} table, log-log interpolated)"
    return f"{where}: {terms}" + (f" + rest of {op} {rest:.3f} us" if rest else "") + f" = {value:.3f} us"


def _explain_call(pred: Prediction, call: Call) -> tuple[float, str]:
    """GPU time of a collective / kernel / element-wise call (graph-mode pricing), or the step model's host term."""
    sc = pred.scenario
    if "formula" in call.args:  # priced outside the NCCL / kernel models (top-k kernels, oneshot / multimem)
        value = float(np.asarray(call.args["gpu_us"]))
        return value, f"{call.op}: {call.args['formula']} = {value:.3f} us"
    if call.kind == "collective":
        b, p, nodes = float(np.asarray(call.args["bytes_per_rank"])), int(sc.tp), int(sc.nodes)
        if call.args.get("p2p") and pred.profile.curve(call.op, p, "graph", nodes).provenance != "measured":
            value, text = explain_collective(pred.profile, call.op, (p - 1) * b, 2, min(nodes, 2), "graph")
            return value, (f"{call.op} as {p - 1} point-to-point sends of {_n(b)} B into rank 0 (one group): the "
                           f"2-rank curve carrying {p - 1} x {_n(b)} B; " + text)
        return explain_collective(pred.profile, call.op, b, p, nodes, "graph")
    if call.kind == "elementwise":
        a = call.args
        cols = float(np.asarray(a["cols"]))
        e = float(a.get("elem_bytes", sc.elem_bytes))
        per = pred.profile.graph_kernel_us + 2.0 * float(sc.rows) * cols * e / a["bw_gbps"] * 1e-3
        if call.op == "pad_mask":
            per = pred.profile.graph_kernel_us + float(sc.rows) * cols * e / a["bw_gbps"] * 1e-3
        value = a["kernels"] * per
        return value, (f"{call.op}: {a['kernels']} element-wise kernel(s) x ({pred.profile.graph_kernel_us:g} us + "
                       f"bytes over [{_n(float(sc.rows))}, {_n(cols)}] / {a['bw_gbps']:g} GB/s) = {value:.3f} us")
    if call.kind == "host":
        a = call.args
        host, gpu, head = (float(np.asarray(a[k])) for k in ("host_us", "gpu_us", "head_start_us"))
        engine = str(sc.engine)
        plan = engine if engine != "none" else f"--mode {sc.mode}"
        hc = host_costs(pred.profile)
        value = float(np.asarray(a.get("exposed", 0.0)))
        return value, (f"step model ({plan}): the host launches {host:.3f} us of ops (torch op {hc.torch_op_us:g} us, "
                       f"c10d call {hc.c10d_call_us:g} us; {hc.source}), the GPU runs {gpu:.3f} us, head start "
                       f"{head:.3f} us; step = pipeline completion (engines.step_time_us), the GPU waits "
                       f"{value:.3f} us for launches = {value:.3f} us")
    return explain_kernel(pred.profile, call.op, float(sc.rows), float(np.asarray(call.args["cols"])),
                          int(np.asarray(call.args["world_size"])), str(sc.dtype), int(sc.elem_bytes),
                          call.args.get("mode", "graph"), float(np.asarray(call.args["draft_cols"])))


def explain(pred: Prediction) -> list[Explained]:
    """Every priced call of every strategy, for a single-scenario prediction."""
    if pred.scenario.size != 1:
        raise ValueError("explain needs a single scenario")
    out = []
    for name, result in pred.strategies.items():
        for component, calls in result.calls.items():
            for call in calls:
                if not bool(np.asarray(call.when)):
                    continue
                value, text = _explain_call(pred, call)
                out.append(Explained(name, component, call.op, value, text))
    return out


def format_explanation(pred: Prediction) -> str:
    lines = []
    items = explain(pred)
    for name, result in pred.strategies.items():
        lines.append(f"{name}: total {float(result.total_us):.3f} us per draft call")
        for item in items:
            if item.strategy == name:
                lines.append(f"  {item.component}: {item.text}")
        skipped = [c for c in result.components_us if not any(i.strategy == name and i.component == c for i in items)]
        if skipped:
            lines.append(f"  (0 us: {', '.join(skipped)} - not run for this scenario)")
    return "\n".join(lines)


def explanation(scenario: Scenario, profile: Profile) -> str:
    """`format_explanation` of the scenario priced on the profile (the dashboard's Explain expander; `predict
    --explain` renders its Answer's own prediction the same way)."""
    return format_explanation(predict(scenario, profile))
