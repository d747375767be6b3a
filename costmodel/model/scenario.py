"""What the user asks about: one draft call of a tensor-parallel draft model.

`Scenario` is a frozen dataclass whose numeric fields may be scalars or numpy
arrays (they broadcast together), so one object can describe a million
scenarios. Categorical fields (dtype, mode, drafting) may be arrays of strings.

Vocab padding follows vLLM: V_pad = ceil(V / 64) * 64, split evenly over the p
TP ranks (shard s = V_pad / p); vLLM refuses a p that does not divide V_pad,
and so do we.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from ..io.errors import InputError
from ..io.schema_names import DTYPES
from .engines import ENGINES, PLANS

COLLECTIVE_IMPLS = ("nccl", "oneshot", "multimem", "nccl-symm")  # costmodel.model.collective_impls.IMPLS
PAD_MULTIPLE = 64
MAX_EXACT_FP32_ID = 2**24  # fp32 represents every integer id below this exactly


def padded_vocab(vocab: Any) -> np.ndarray:
    """V_pad = ceil(V / 64) * 64 (vLLM's pad_vocab_size with the default 64)."""
    vocab = np.asarray(vocab, dtype=np.int64)
    return -(-vocab // PAD_MULTIPLE) * PAD_MULTIPLE


def _as_array(value: Any, dtype: Any) -> np.ndarray:
    return np.asarray(value, dtype=dtype)


def _engine_mode(engine: np.ndarray, mode: np.ndarray) -> np.ndarray:
    """`mode` where engine is "none", else the engine plan's own: eager (host-launched) or graph (captured)."""
    out = np.array(np.broadcast_to(mode, np.broadcast_shapes(np.shape(engine), np.shape(mode))), dtype=mode.dtype)
    for name, plan in PLANS.items():
        out = np.where(engine == name, "graph" if plan.is_captured("*") else "eager", out)
    return out.astype(mode.dtype) if out.shape else out


def _categorical(name: str, value: Any, allowed: tuple[str, ...]) -> np.ndarray:
    arr = np.asarray(value).astype(str)
    if arr.ndim == 0 and arr.item() in allowed:  # one allowed name: no np.unique / setdiff1d
        return arr
    bad = np.setdiff1d(np.unique(arr), allowed)
    if bad.size:
        raise InputError(f"{name} must be one of {', '.join(allowed)}, got {bad[0]!r}")
    return arr


@dataclass(frozen=True)
class Scenario:
    """One (or a broadcast array of) draft-call configuration(s).

    vocab: target vocabulary V_target (unpadded).
    draft_vocab: the draft model's lm_head vocabulary (defaults to `vocab`,
        i.e. an EAGLE draft sharing the target head).
    d2t: EAGLE-3 draft-to-target id map on (draft_vocab < vocab then).
    hidden: draft hidden size (optional; informational only - the lm_head GEMM
        is common to every strategy and cancels out of savings).
    dtype: logits dtype, bf16 | fp16 | fp32.
    tp: TP size p (1 = no communication). nodes: nodes the TP group spans.
    batch: B, rows (requests) drafted per step (a float, so crossover root
        finding can treat it as continuous; CLI inputs are integers).
    num_spec_tokens: K draft tokens per decode step.
    drafting: "serial" (K calls of B rows) or "parallel" (one call of B*K rows).
    mode: "graph" (CUDA-graph replay) or "eager".
    impl: "torch" (the torch ops engines ship) or "fused" (fused kernels; the
        profile must carry fused kernel parameters).
    engine: "none" (every component as `mode` says) or "vllm" | "vllm-v2" |
        "sglang" | "trtllm" | "tokenspeed": what that engine captures in a CUDA
        graph and where it syncs (costmodel/model/engines.py; `mode` is then not
        used) and which kernels / collectives it runs (costmodel/model/recipes.py).
    softcap: the model applies a final logit soft-cap cap * tanh(x / cap)
        (3 element-wise kernels over the logits the strategy reads).
    logit_scale: the model multiplies the logits by a scale (1 kernel).
    top_k: candidates per row (1 = greedy argmax, today's numbers; k > 1 = tree / multi-candidate drafting,
        the k largest per row, see calibration/reference/strategies.py `stable_topk`).
    collective: "nccl" | "oneshot" | "multimem" - the implementation of the strategies' all-gather /
        all-reduce (costmodel/model/collective_impls.py; unavailable ones fall back to NCCL).
    serving_term: add the fixed cost per collective call of a serving step (arrival skew, launch placement;
        costmodel/model/serving.py) where an engine runs the step; False prices synchronized microbenchmarks.
    host_op_us / host_collective_us: host time per eager torch op / per eager c10d call (None: the
        profile's kernels.host, else engines.DEFAULT_HOST) - host speed is the user's CPU.
    """

    vocab: Any = 202048
    draft_vocab: Any = None
    d2t: Any = False
    hidden: Any = None
    dtype: Any = "bf16"
    tp: Any = 8
    nodes: Any = 1
    batch: Any = 1
    num_spec_tokens: Any = 1
    drafting: Any = "serial"
    mode: Any = "graph"
    impl: Any = "torch"
    engine: Any = "none"
    softcap: Any = False
    logit_scale: Any = False
    top_k: Any = 1
    collective: Any = "nccl"
    serving_term: Any = True
    host_op_us: Any = None
    host_collective_us: Any = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "vocab", _as_array(self.vocab, np.int64))
        draft = self.vocab if self.draft_vocab is None else self.draft_vocab
        set_(self, "draft_vocab", _as_array(draft, np.int64))
        set_(self, "d2t", _as_array(self.d2t, bool))
        if self.hidden is not None:
            set_(self, "hidden", _as_array(self.hidden, np.int64))
        set_(self, "dtype", _categorical("dtype", self.dtype, tuple(DTYPES)))
        for name in ("tp", "nodes", "num_spec_tokens", "top_k"):
            set_(self, name, _as_array(getattr(self, name), np.int64))
        # batch may be fractional: root finding treats rows as continuous
        set_(self, "batch", _as_array(self.batch, np.float64))
        set_(self, "drafting", _categorical("drafting", self.drafting, ("serial", "parallel")))
        set_(self, "mode", _categorical("mode", self.mode, ("graph", "eager")))
        set_(self, "impl", _categorical("impl", self.impl, ("torch", "fused")))
        set_(self, "engine", _categorical("engine", self.engine, ENGINES))
        if np.any(self.engine != "none"):  # an engine's plan decides the mode: show what it runs
            set_(self, "mode", _engine_mode(self.engine, self.mode))
        set_(self, "softcap", _as_array(self.softcap, bool))
        set_(self, "logit_scale", _as_array(self.logit_scale, bool))
        set_(self, "collective", _categorical("collective", self.collective, COLLECTIVE_IMPLS))
        set_(self, "serving_term", _as_array(self.serving_term, bool))
        for name in ("host_op_us", "host_collective_us"):
            if getattr(self, name) is not None:
                set_(self, name, _as_array(getattr(self, name), np.float64))
        set_(self, "_shape", np.broadcast_shapes(*(np.shape(getattr(self, f.name)) for f in fields(self)
                                                   if getattr(self, f.name) is not None)))
        self._validate()

    # -- validation ---------------------------------------------------------
    def _validate(self) -> None:
        def first_bad(mask: np.ndarray, name: str, message: str) -> None:
            if mask.any() if isinstance(mask, np.ndarray) else bool(mask):  # scalars: no np.any dispatch
                raise InputError(f"{name}: {message}")

        first_bad(self.vocab < 1, "vocab", "must be >= 1")
        first_bad(self.draft_vocab < 1, "draft_vocab", "must be >= 1")
        first_bad(self.tp < 1, "tp", "must be >= 1")
        first_bad(self.nodes < 1, "nodes", "must be >= 1")
        first_bad(self.batch < 1, "batch", "must be >= 1")
        first_bad(self.num_spec_tokens < 1, "num_spec_tokens", "must be >= 1")
        first_bad(self.top_k < 1, "top_k", "must be >= 1")
        first_bad(self.top_k > self.draft_vocab, "top_k", "cannot exceed the draft vocab")
        first_bad(self.draft_vocab > self.vocab, "draft_vocab", "cannot exceed the target vocab")
        first_bad(~self.d2t & (self.draft_vocab != self.vocab), "draft_vocab",
                  "differs from the target vocab, which needs the EAGLE-3 d2t map (d2t on)")
        first_bad(self.tp % self.nodes != 0, "nodes", "must divide the TP size")
        if self.hidden is not None:
            first_bad(self.hidden < 1, "hidden", "must be >= 1")
        for name in ("host_op_us", "host_collective_us"):
            value = getattr(self, name)
            if value is not None:
                first_bad(~np.isfinite(value) | (value < 0) | (value > 1e6), name, "must be a number in 0..1e6 us")
        v_pad = padded_vocab(self.draft_vocab)
        bad = (v_pad % self.tp) != 0
        if np.any(bad):
            v, p = np.broadcast_arrays(v_pad, self.tp)
            i = np.flatnonzero(np.broadcast_to(bad, v.shape))[0]
            raise InputError(
                f"tp: TP size {int(p.flat[i])} does not divide the padded draft vocab "
                f"{int(v.flat[i])} (vLLM rejects this)"
            )

    # -- derived quantities -------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """Broadcast shape of all fields (computed once, at construction)."""
        return self._shape

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def padded_draft_vocab(self) -> np.ndarray:
        """V_pad of the draft lm_head."""
        return padded_vocab(self.draft_vocab)

    @property
    def shard(self) -> np.ndarray:
        """s = V_pad / p, logits per rank."""
        return self.padded_draft_vocab // self.tp

    @property
    def elem_bytes(self) -> np.ndarray:
        """e, bytes per logit element."""
        names = np.array(sorted(DTYPES))
        sizes = np.array([DTYPES[k] for k in names], dtype=np.int64)
        return sizes[np.searchsorted(names, self.dtype)]

    @property
    def parallel(self) -> np.ndarray:
        return self.drafting == "parallel"

    @property
    def rows(self) -> np.ndarray:
        """Rows per draft call: B (serial) or B*K (parallel)."""
        return np.where(self.parallel, self.batch * self.num_spec_tokens, self.batch)

    @property
    def padding(self) -> np.ndarray:
        """V_pad - V_draft: padded lm_head rows the last shard must mask (0: no mask kernel)."""
        return self.padded_draft_vocab - self.draft_vocab

    @property
    def calls_per_decode_step(self) -> np.ndarray:
        """K draft calls per decode step (serial) or 1 (parallel)."""
        return np.where(self.parallel, 1, self.num_spec_tokens)

    @property
    def argmax_vocab(self) -> np.ndarray:
        """Width the baseline argmax runs over: V_target after a d2t scatter, else V."""
        return np.where(self.d2t, self.vocab, self.draft_vocab)

    @property
    def ids_exact_in_fp32(self) -> np.ndarray:
        """Packing a global id into fp32 is exact only below 2^24."""
        return self.padded_draft_vocab <= MAX_EXACT_FP32_ID

    def with_(self, **changes: Any) -> Scenario:
        """A copy with some fields replaced (re-validated)."""
        return replace(self, **changes)

    def item(self, index: int = 0) -> Scenario:
        """The scalar scenario at flat `index` of the broadcast shape."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = None if value is None else np.broadcast_to(value, self.shape).flat[index].item()
        return Scenario(**out)

    def describe(self) -> dict[str, Any]:
        """Plain-Python dict of a scalar scenario (for JSON); `mode` reads "engine" where an engine's plan runs it."""
        if self.size != 1:
            raise InputError("describe() needs a single scenario")
        s = self.item(0)
        out = {f.name: (None if getattr(s, f.name) is None else getattr(s, f.name).item())
               for f in fields(s)}
        if float(out["batch"]).is_integer():
            out["batch"] = int(out["batch"])
        if out["engine"] != "none":  # the engine's plan sets each component's execution: no one mode (issue 35)
            out["mode"] = "engine"
        out.update(padded_draft_vocab=int(s.padded_draft_vocab), shard=int(s.shard),
                   rows_per_call=float(s.rows), calls_per_decode_step=int(s.calls_per_decode_step))
        return out


SCENARIO_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Scenario))
