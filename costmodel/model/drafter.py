"""The draft model's forward pass at decode: its GEMMs, attention, element-wise kernels and all-reduces, and its memory.

A `DraftArch` is one draft architecture (data/presets/models.csv, or the CLI's --draft-* flags). One forward of R
rows at draft TP q (every time in microseconds, bf16 weights and activations, e = 2 bytes):

per layer l = 1..L (vLLM's LlamaDecoderLayer: QKVParallelLinear, RowParallelLinear o_proj,
MergedColumnParallelLinear gate_up_proj, RowParallelLinear down_proj)
    GEMM(R, in, out) = the profile's lm_head GEMM model (`gpu_kernels.lm_head_gemm_us`, the same line that prices
        the lm_head: floor + max(in * out * e / weight_gbps, 2 R in out / tflops)) for
        qkv      in = hidden x (qkv_in_mult at l = 1, else 1)   out = (heads / q + 2 kv_q) x head_dim
        o        in = heads x head_dim / q                      out = hidden
        gate_up  in = hidden                                    out = 2 x intermediate / q
        down     in = intermediate / q                          out = hidden
      with kv_q = ceil(kv_heads / q) (vLLM replicates a KV head when kv_heads < q)
    attention at decode, memory bound on the KV read:
        T_attn = floor_us + R x kv_len x 2 x kv_q x head_dim x e / weight_gbps x 1e-3
    element-wise: ELEMENTWISE_PER_LAYER kernels (input RMSNorm, rotary, fused add + RMSNorm, SiLU-and-mul) of
        `profile.graph_kernel_us` each
    all-reduce: 2 per layer at q > 1 (after o_proj and after down_proj, RowParallelLinear reduce_results), each of
        R x hidden x e bytes per rank, from the collective model with the scenario's implementation
        (`collective_impls.collective_us`: NCCL, one-shot or multimem where available)
plus the final RMSNorm (1 element-wise kernel) and, where the draft has one per step (EAGLE-1, DeepSeek MTP's
eh_proj), the replicated fc GEMM(R, fc_in_mult x hidden, hidden). EAGLE-3's fc (3 x hidden -> hidden,
`combine_hidden_states`) runs once per decode step on the target's hidden states: `fc_once_us`.

Memory per GPU at draft TP q (bytes, e = 2): per layer (qkv_in x (heads/q + 2 kv_q) x head_dim + heads/q x
head_dim x hidden + 3 x hidden x intermediate / q x mlp_weight_mult) x e; the fc (replicated) fc_in_mult x
hidden^2 x e; the lm_head V_pad / q x hidden x e and the token embedding V_target_pad / q x hidden x e. KV per
sequence and rank: L x 2 x kv_q x head_dim x kv_len x e. At the target's TP an EAGLE draft shares the target's
embedding (and an EAGLE-1 / MTP draft its lm_head): those bytes are already resident (`extra_bytes` excludes them).

Not modelled (stated): the draft's MoE routing (DeepSeek MTP is priced by its active expert width), MLA's
compressed attention (priced as one 576-element KV head per token), quantized draft weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..io.errors import InputError
from ..profiles.types import Profile
from . import collective_impls
from .gpu_kernels import lm_head_gemm_us
from .scenario import padded_vocab

ELEMENTWISE_PER_LAYER = 4  # input RMSNorm, rotary embedding, fused residual add + RMSNorm, SiLU-and-mul
ELEM_BYTES = 2  # bf16 weights, activations and KV cache
ALL_REDUCES_PER_LAYER = 2  # after attention (o_proj) and after the MLP (down_proj), at q > 1
EAGER_OPS_PER_LAYER = 4 + 1 + ELEMENTWISE_PER_LAYER  # GEMMs + attention + element-wise: torch ops launched eagerly


@dataclass(frozen=True)
class DraftArch:
    """One draft model (module doc): shapes from its config, and how its fc / lm_head are wired."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int  # the draft lm_head's vocabulary (EAGLE-3: draft_vocab_size)
    qkv_in_mult: int = 1  # the first layer's qkv input, in hidden sizes (EAGLE-3: 2)
    fc_in_mult: int = 2  # the fc's input in hidden sizes (EAGLE-1 / MTP 2, EAGLE-3 3; 0 = no fc)
    fc_per_step: bool = True  # the fc runs in every draft call (else once per decode step)
    lm_head_shared: bool = True  # shares the target's lm_head (EAGLE-1, MTP)
    mlp_weight_mult: float = 1.0  # resident MLP weights / active MLP weights (MoE drafts)
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab", "qkv_in_mult"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 1 <= int(v) <= 10**7:
                raise InputError(f"draft {name}: expected an integer in 1..1e7, got {v!r}")
        if not 0 <= int(self.fc_in_mult) <= 16 or not 1.0 <= float(self.mlp_weight_mult) <= 1e4:
            raise InputError(f"draft fc_in_mult / mlp_weight_mult out of range: {self.fc_in_mult}, "
                             f"{self.mlp_weight_mult}")

    @classmethod
    def from_fields(cls, fields: dict[str, Any]) -> DraftArch:
        """From `costmodel.profiles.presets.preset_draft`'s dict (extra keys ignored)."""
        keys = cls.__dataclass_fields__
        return cls(**{k: v for k, v in fields.items() if k in keys})

    def check_tp(self, q: int) -> None:
        """vLLM's sharding needs q to divide the heads and the intermediate size (one line otherwise)."""
        if self.heads % q or self.intermediate % q:
            raise InputError(f"draft TP {q}: must divide the draft's {self.heads} heads and its intermediate size "
                             f"{self.intermediate}")


def kv_heads_per_rank(arch: DraftArch, q) -> np.ndarray:
    """kv_q = ceil(kv_heads / q)."""
    q = np.asarray(q, dtype=np.int64)
    return -(-arch.kv_heads // q)


def layer_gemm_shapes(arch: DraftArch, q, first: bool) -> dict[str, tuple[Any, Any]]:
    """{gemm: (in, out)} of one layer at draft TP q (module doc)."""
    q = np.asarray(q, dtype=np.int64)
    hd = arch.head_dim
    qkv_in = arch.hidden * (arch.qkv_in_mult if first else 1)
    return {"qkv": (qkv_in, (arch.heads // q + 2 * kv_heads_per_rank(arch, q)) * hd),
            "o": (arch.heads * hd // q, arch.hidden),
            "gate_up": (arch.hidden, 2 * arch.intermediate // q),
            "down": (arch.intermediate // q, arch.hidden)}


@dataclass(frozen=True)
class DraftForward:
    """One draft forward's GPU time by part (us, arrays over scenarios) and what it launches."""

    gemm_us: np.ndarray
    attention_us: np.ndarray
    elementwise_us: np.ndarray
    all_reduce_us: np.ndarray  # all the layers' all-reduces together
    fc_us: np.ndarray  # the per-step fc (0 without one)
    all_reduces: np.ndarray  # count per forward (2 L at q > 1)
    eager_ops: np.ndarray  # torch ops an eager forward launches (all-reduces not included)
    fc_once_us: np.ndarray  # EAGLE-3's once-per-decode-step fc (0 otherwise)

    @property
    def gpu_us(self) -> np.ndarray:
        return self.gemm_us + self.attention_us + self.elementwise_us + self.all_reduce_us + self.fc_us


def _lm_model(profile: Profile):
    if profile.lm_head is None:
        raise InputError("the profile has no kernels.lm_head (the GEMM model): the drafter forward cannot be priced "
                         "there; give the measured forward with --forward-us")
    return profile.lm_head


def gemm_us(profile: Profile, rows, k_in, n_out) -> np.ndarray:
    """GEMM [rows, k_in] x [k_in, n_out] with the profile's lm_head GEMM model (module doc)."""
    return lm_head_gemm_us(_lm_model(profile), rows, k_in, n_out)


def attention_us(profile: Profile, arch: DraftArch, rows, q, kv_len) -> np.ndarray:
    """T_attn = floor_us + rows x kv_len x 2 x kv_q x head_dim x e / weight_gbps x 1e-3 (one layer)."""
    model = _lm_model(profile)
    kv_bytes = np.asarray(rows, dtype=float) * np.asarray(kv_len, dtype=float) * 2 * kv_heads_per_rank(arch, q) \
        * arch.head_dim * ELEM_BYTES
    return model.floor_us + kv_bytes / model.weight_gbps * 1e-3


def forward(profile: Profile, arch: DraftArch, rows, q, kv_len, *, collective: Any = "nccl",
            nodes: Any = 1) -> DraftForward:
    """One draft forward of `rows` rows at draft TP q (module doc), vectorized over rows / q / kv_len."""
    rows = np.asarray(rows, dtype=float)
    q = np.asarray(q, dtype=np.int64)
    gemm = np.zeros(np.broadcast_shapes(rows.shape, q.shape))
    for layer in range(arch.layers):
        for k_in, n_out in layer_gemm_shapes(arch, q, first=layer == 0).values():
            gemm = gemm + gemm_us(profile, rows, k_in, n_out)
    attn = arch.layers * attention_us(profile, arch, rows, q, kv_len)
    per_layer = (ELEMENTWISE_PER_LAYER * arch.layers + 1) * profile.graph_kernel_us  # (M, 1) for stacked members
    elementwise = np.full(np.broadcast_shapes(gemm.shape, np.shape(per_layer)), per_layer)
    multi = q > 1
    count = np.where(multi, ALL_REDUCES_PER_LAYER * arch.layers, 0)
    ar_bytes = rows * arch.hidden * ELEM_BYTES
    one, _ = collective_impls.collective_us(profile, collective, "all_reduce", ar_bytes, np.maximum(q, 2), nodes)
    all_reduce = np.where(multi, count * one, 0.0)
    fc_full = gemm_us(profile, rows, arch.fc_in_mult * arch.hidden, arch.hidden) if arch.fc_in_mult else 0.0
    fc = np.broadcast_to(fc_full if arch.fc_per_step else 0.0, gemm.shape)
    fc_once = np.broadcast_to(0.0 if arch.fc_per_step else fc_full, gemm.shape)
    fc_ops = 1 if arch.fc_per_step and arch.fc_in_mult else 0
    ops = np.full(gemm.shape, EAGER_OPS_PER_LAYER * arch.layers + 1 + fc_ops)
    return DraftForward(gemm, np.broadcast_to(attn, gemm.shape), elementwise, all_reduce, np.asarray(fc),
                        np.broadcast_to(count, gemm.shape), ops, np.asarray(fc_once))


@dataclass(frozen=True)
class DraftMemory:
    """The draft's bytes per GPU at one placement: weights (all, and beyond what the target already holds), KV."""

    weight_bytes: int
    extra_weight_bytes: int
    kv_bytes_per_sequence: int  # per rank, at the scenario's KV length
    sequences_per_rank: int

    @property
    def resident_bytes(self) -> int:
        """extra weights + the KV of the sequences this rank drafts."""
        return self.extra_weight_bytes + self.kv_bytes_per_sequence * self.sequences_per_rank


def weight_bytes(arch: DraftArch, q: int, target_vocab: int) -> dict[str, int]:
    """{"layers", "fc", "lm_head", "embed"}: bytes per GPU at draft TP q (module doc)."""
    e = ELEM_BYTES
    kv_q = int(kv_heads_per_rank(arch, q))
    layers = 0
    for layer in range(arch.layers):
        qkv_in = arch.hidden * (arch.qkv_in_mult if layer == 0 else 1)
        attn = qkv_in * (arch.heads // q + 2 * kv_q) * arch.head_dim + arch.heads // q * arch.head_dim * arch.hidden
        mlp = 3 * arch.hidden * (arch.intermediate // q) * arch.mlp_weight_mult
        layers += int(round((attn + mlp) * e))
    return {"layers": layers, "fc": arch.fc_in_mult * arch.hidden * arch.hidden * e,
            "lm_head": int(padded_vocab(arch.vocab)) // q * arch.hidden * e,
            "embed": int(padded_vocab(target_vocab)) // q * arch.hidden * e}


def kv_bytes_per_sequence(arch: DraftArch, q: int, kv_len: int) -> int:
    """L x 2 x kv_q x head_dim x kv_len x e (one sequence's draft KV cache on one rank)."""
    return int(arch.layers * 2 * int(kv_heads_per_rank(arch, q)) * arch.head_dim * int(kv_len) * ELEM_BYTES)


def memory(arch: DraftArch, q: int, *, target_tp: int, target_vocab: int, kv_len: int,
           sequences_per_rank: int) -> DraftMemory:
    """DraftMemory at draft TP q: at q = target_tp the embedding (and a shared lm_head) is the target's own."""
    parts = weight_bytes(arch, q, target_vocab)
    total = sum(parts.values())
    shared = 0
    if q == target_tp:
        shared = parts["embed"] + (parts["lm_head"] if arch.lm_head_shared else 0)
    return DraftMemory(total, total - shared, kv_bytes_per_sequence(arch, q, kv_len), int(sequences_per_rank))
