"""The ways a TP draft model can pick its greedy draft token, as sums of components.

Per draft call with R rows (R = B serial, B*K parallel), shard s = V_pad/p,
e bytes per logit, p ranks, every time in microseconds:

full_all_gather (vLLM today)
    all_gather(R*s*e per rank) + relayout_copy(R, s, p)
    [+ d2t_scatter(R, V_target, V_draft)] + argmax(R, V or V_target)
full_all_gather_no_relayout
    all_gather(R*s*e per rank) + chunked_argmax(R, s, p) [+ d2t_lookup(R)]
    (argmax per rank chunk on the concat-layout buffer, then a reduce over p;
    with d2t the winning draft id is mapped, exact for an increasing d2t)
gather_to_rank0
    gather(R*s*e per rank) + relayout_copy(R, s, p) [+ d2t_scatter]
    + argmax + broadcast(R*8 bytes of int64 ids)
local_argmax_pairs (vLLM use_local_argmax_reduction)
    local_argmax(R, s) + all_gather(R*8 per rank) + pair_reduce(R, p) [+ d2t_lookup]
    (fp32 ids: exact only while V_pad <= 2^24 - otherwise marked invalid)
packed_allreduce_max
    key_pack(R, s) + all_reduce(R*8 bytes, MAX over int64) + key_unpack(R) [+ d2t_lookup]

At p = 1 every collective, relayout and cross-rank reduce costs 0 (an engine
skips them) and the chunked argmax is a plain argmax.

packed_allreduce_max - exact correctness conditions. Each rank builds, per
row, key = (ord32(v) << 32) | (2^32 - 1 - global_id) as a signed int64, where
v is the rank's local max widened to fp32 (exact for bf16/fp16) and
ord32(bits) = bits if bits >= 0 else bits ^ 0x7FFFFFFF (signed int32 view), so
signed key order equals (value ascending, id descending) and MAX picks the
largest value with the lowest id - torch.argmax's first-index tie rule, across
ranks too. Conditions: (1) -0.0 is canonicalized to +0.0 before keying (else
+0.0 would beat an equal -0.0 at a lower id); (2) every NaN is canonicalized
to the positive quiet NaN 0x7FC00000, whose key exceeds +inf, so a NaN wins at
its lowest id, exactly like torch.argmax (which treats NaN as the maximum);
(3) ids must be < 2^32; (4) padding is masked to -inf before the local max, and
a row of all -inf returns id 0 like torch.argmax; (5) any soft-cap / positive
scale is applied before keying (a non-positive scale is rejected).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .collectives import collective_time_us
from .kernels import ID_BYTES, PAIR_BYTES, kernel_time_us
from .profile import Profile
from .scenario import Scenario

BASELINE = "full_all_gather"
STRATEGIES: tuple[str, ...] = (
    "full_all_gather",
    "full_all_gather_no_relayout",
    "gather_to_rank0",
    "local_argmax_pairs",
    "packed_allreduce_max",
)
LOCAL_STRATEGIES = ("local_argmax_pairs", "packed_allreduce_max")
DESCRIPTIONS: dict[str, str] = {
    "full_all_gather": "all-gather full logits, relayout copy, argmax (vLLM default)",
    "full_all_gather_no_relayout": "all-gather full logits, argmax per rank chunk, no relayout copy",
    "gather_to_rank0": "gather logits to rank 0, argmax there, broadcast ids",
    "local_argmax_pairs": "local argmax, all-gather (value, id) pairs, reduce (vLLM use_local_argmax_reduction)",
    "packed_allreduce_max": "local argmax packed into one 64-bit key, all_reduce(MAX)",
}


@dataclass(frozen=True)
class Call:
    """What a component priced: a collective or kernel op and its arguments (for explanations)."""

    kind: str  # "collective" | "kernel"
    op: str
    args: dict
    when: np.ndarray | bool = True


@dataclass(frozen=True)
class Component:
    """One named step of a strategy: its time and, for collectives, bytes sent per rank."""

    time_us: np.ndarray
    wire_bytes_per_rank: np.ndarray | float = 0.0
    extrapolated: np.ndarray | bool = False
    calls: tuple[Call, ...] = ()


class _Ctx:
    """Per-evaluation cache of the scenario's derived arrays."""

    def __init__(self, scenario: Scenario, profile: Profile):
        self.sc, self.profile = scenario, profile
        self.rows = scenario.rows
        self.shard = scenario.shard
        self.p = scenario.tp
        self.e = scenario.elem_bytes
        self.multi = self.p > 1
        self.fused = scenario.impl == "fused"
        self.eager = scenario.mode == "eager"

    def collective(self, op: str, bytes_per_rank) -> Component:
        sc = self.sc
        t = collective_time_us(self.profile, op, bytes_per_rank, sc.tp, sc.nodes, self.eager)
        return Component(t, np.where(self.multi, bytes_per_rank, 0.0),
                         calls=(Call("collective", op, {"bytes_per_rank": bytes_per_rank}, self.multi),))

    def kernel(self, op: str, cols, *, world_size=1, when=True, draft_cols=0, fusable=False) -> Component:
        """A kernel component; with fusable=True, `<op>_fused` prices the scenarios whose impl is "fused"."""
        args = {"cols": cols, "world_size": world_size, "draft_cols": draft_cols}

        def estimate(name: str):
            return kernel_time_us(self.profile, name, rows=self.rows, cols=cols, world_size=world_size,
                                  dtype=self.sc.dtype, elem_bytes=self.e, mode=self.eager, draft_cols=draft_cols)

        est = estimate(op)
        t, x = est.time_us, est.extrapolated
        calls = (Call("kernel", op, args, when & ~self.fused if fusable else when),)
        if fusable and np.any(self.fused):
            fused = estimate(f"{op}_fused")
            t = np.where(self.fused, fused.time_us, t)
            x = np.where(self.fused, fused.extrapolated, x)
            calls += (Call("kernel", f"{op}_fused", args, when & self.fused),)
        return Component(np.where(when, t, 0.0), 0.0, np.where(when, x, False), calls)

    def argmax_full(self) -> Component:
        return self.kernel("argmax", self.sc.argmax_vocab)

    def d2t_scatter(self) -> Component:
        sc = self.sc
        return self.kernel("d2t_scatter", sc.vocab, draft_cols=sc.draft_vocab, when=sc.d2t)

    def d2t_lookup(self) -> Component:
        return self.kernel("d2t_lookup", 0, when=self.sc.d2t)


def full_all_gather(c: _Ctx) -> dict[str, Component]:
    return {
        "all_gather": c.collective("all_gather", c.rows * c.shard * c.e),
        "relayout_copy": c.kernel("relayout_copy", c.shard, world_size=c.p, when=c.multi),
        "d2t_scatter": c.d2t_scatter(),
        "argmax": c.argmax_full(),
    }


def full_all_gather_no_relayout(c: _Ctx) -> dict[str, Component]:
    chunked = c.kernel("chunked_argmax", c.shard, world_size=c.p, when=c.multi)
    plain = c.kernel("argmax", c.sc.draft_vocab, when=~c.multi)
    return {
        "all_gather": c.collective("all_gather", c.rows * c.shard * c.e),
        "chunked_argmax": Component(chunked.time_us + plain.time_us, 0.0, chunked.extrapolated | plain.extrapolated,
                                    chunked.calls + plain.calls),
        "d2t_lookup": c.d2t_lookup(),
    }


def gather_to_rank0(c: _Ctx) -> dict[str, Component]:
    return {
        "gather": c.collective("gather", c.rows * c.shard * c.e),
        "relayout_copy": c.kernel("relayout_copy", c.shard, world_size=c.p, when=c.multi),
        "d2t_scatter": c.d2t_scatter(),
        "argmax": c.argmax_full(),
        "broadcast": c.collective("broadcast", c.rows * ID_BYTES),
    }


def local_argmax_pairs(c: _Ctx) -> dict[str, Component]:
    return {
        "local_argmax": c.kernel("local_argmax", c.shard, fusable=True),
        "all_gather": c.collective("all_gather", c.rows * PAIR_BYTES),
        "pair_reduce": c.kernel("pair_reduce", 0, world_size=c.p, when=c.multi, fusable=True),
        "d2t_lookup": c.d2t_lookup(),
    }


def packed_allreduce_max(c: _Ctx) -> dict[str, Component]:
    return {
        "key_pack": c.kernel("key_pack", c.shard, fusable=True),
        "all_reduce": c.collective("all_reduce", c.rows * ID_BYTES),
        "key_unpack": c.kernel("key_unpack", 0, when=c.multi, fusable=True),
        "d2t_lookup": c.d2t_lookup(),
    }


BUILDERS: dict[str, Callable[[_Ctx], dict[str, Component]]] = {
    "full_all_gather": full_all_gather,
    "full_all_gather_no_relayout": full_all_gather_no_relayout,
    "gather_to_rank0": gather_to_rank0,
    "local_argmax_pairs": local_argmax_pairs,
    "packed_allreduce_max": packed_allreduce_max,
}


def validity(name: str, scenario: Scenario) -> np.ndarray:
    """Where a strategy returns exactly torch.argmax's ids (see the module doc)."""
    ok = np.ones(scenario.shape, dtype=bool)
    if name == "local_argmax_pairs":
        ok &= np.broadcast_to(scenario.ids_exact_in_fp32, scenario.shape)
    return ok


def build_components(scenario: Scenario, profile: Profile,
                     strategies: tuple[str, ...] = STRATEGIES) -> dict[str, dict[str, Component]]:
    """{strategy: {component: Component}} for a (vectorized) scenario."""
    ctx = _Ctx(scenario, profile)
    return {name: BUILDERS[name](ctx) for name in strategies}
