"""Small-message floors of the custom collectives: launch + flag / barrier rounds + per-peer work (derived).

A symmetric-memory collective on one NVLink fabric (one-shot, multimem, NCCL's symmetric kernels) at a tiny
message is not bandwidth-bound: it costs one kernel launch, the flag / barrier rounds the algorithm needs (a rank
writes a flag into every peer's memory over NVLink and spins until the peers' flags arrive), and per-peer SM work
(issuing the p - 1 flag stores and polls, the p - 1 loads; none for a multicast kernel):

    floor_us(p) = launch_us + rounds * sync_us(gen) + per_peer_us * (p - 1)     (multimem: without per_peer)

rounds     per algorithm: 1 for a multicast (NVLS multimem) kernel - one multimem flag reduction, independent of
           p (NCCL's symmetric kernels at 8 bytes); 3 for a one-shot pull (vLLM CustomAllreduce / SGLang one-shot
           all-reduce, the one-shot all-gather): start barrier, the peer loads' round trip, end barrier.
sync_us    one flag round of the NVLink generation `gen` (profile `provenance.nvlink_generation`).
per_peer   SM-side issue cost per peer, taken as the same on every generation (an assumption: it is instruction
           issue and polling on the GPU, not fabric latency).

Derivation (`derive_sync`), small-message figures only (published-nccl-tests/SOURCES.md section 3), nothing
extrapolated from MiB sizes:

* per_peer_us and launch + 3 sync (Hopper): least squares of SGLang PR #2904's custom all-reduce at 512 B and
  4 KiB, TP 2 / 4 / 8, H100 (3.7 / 4.8 / 5.9 and 3.9 / 3.7 / 5.7 us): T = c0 + per_peer (p - 1).
* launch + 1 sync (Hopper): NVIDIA/nccl #1940, best 8-byte all_reduce with NCCL 2.27 symmetric memory on 8x
  H200 / H800, ~2.3 us. Two equations give sync_us(4) = (c0 - 2.3) / 2 and launch_us = 2.3 - sync_us(4).
* sync_us(5) (Blackwell, NVLink 5): the same #1940 figure on 8x B200, ~3 us: sync_us(5) = 3.0 - launch_us (the
  launch taken as Hopper's). The maintainer (NVIDIA/nccl-tests #333) attributes part of B200's higher latency to
  single-process (`-g 8`) runs, so this is an upper estimate of Blackwell's flag round.
* NVLink 3 (A100) and a profile without a generation: Hopper's (no small-message A100 custom-collective figure).

What these floors are not: in-engine figures (vLLM #55021, 10.8 us per decode step for a one-shot all-gather on
8x B300 - an Nsight trace mean of a kernel launched early to overlap the LM-head tail; SGLang #32461, FlashInfer
one-shot ~8 us on GB300) include peer arrival skew and overlap, so they sit above the synchronized floor; they
are checks, not inputs. Megatron-LM #5596's figures are cross-rank minima of kernel device time (a lower bound
of the synchronized time) at >= 2 MiB: they set only the one-shot all-gather's read bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..profiles.types import Profile

# sgl-project/sglang PR #2904 (H100, no CUDA graph), custom all-reduce latency (ms) at TP 2 / 4 / 8, small messages
SGLANG_2904_SMALL_MS: dict[int, tuple[float, float, float]] = {512: (0.0037, 0.0048, 0.0059),
                                                             4096: (0.0039, 0.0037, 0.0057)}
# NVIDIA/nccl issue #1940: best 8-byte all_reduce, NCCL 2.27 symmetric memory, 8 GPUs (us)
NCCL_1940_8B_US = {4: 2.3, 5: 3.0}  # NVLink 4 (H200 / H800), NVLink 5 (B200)
HOPPER = 4
ROUNDS = {"multimem": 1, "oneshot": 3, "nccl-symm": 1}  # nccl-symm: NCCL's symmetric kernels (NCCL #1940's own)
PER_PEER = {"multimem": 0.0, "oneshot": 1.0, "nccl-symm": 0.0}  # a multicast kernel issues one store / poll, not p-1


@dataclass(frozen=True)
class SyncParams:
    """floor_us(p) = launch_us + rounds * sync_us[gen] + per_peer_us * (p - 1) (module doc)."""

    launch_us: float
    per_peer_us: float
    sync_us: dict[int, float]
    source: str = ("SGLang PR #2904 custom all-reduce 512 B / 4 KiB at TP 2/4/8 (H100); NVIDIA/nccl #1940 8-byte "
                   "symmetric-memory all_reduce ~2.3 us (8x H200) / ~3 us (8x B200)")


def derive_sync() -> SyncParams:
    """Least squares of T = c0 + c (p - 1) over SGLang #2904's small points; c0 = launch + 3 sync(4) and
    NCCL #1940's 2.3 us = launch + sync(4) split c0; sync(5) = 3.0 us - launch (module doc)."""
    rows, y = [], []
    for times in SGLANG_2904_SMALL_MS.values():
        for p, t_ms in zip((2, 4, 8), times):
            rows.append([1.0, p - 1.0])
            y.append(t_ms * 1e3)
    (c0, per_peer), *_ = np.linalg.lstsq(np.asarray(rows), np.asarray(y), rcond=None)
    sync4 = (float(c0) - NCCL_1940_8B_US[HOPPER]) / (ROUNDS["oneshot"] - ROUNDS["multimem"])
    launch = NCCL_1940_8B_US[HOPPER] - sync4
    sync = {3: sync4, HOPPER: sync4, 5: NCCL_1940_8B_US[5] - launch}
    return SyncParams(round(launch, 4), round(float(per_peer), 4), {k: round(v, 4) for k, v in sync.items()})


SYNC = derive_sync()


def generation(profile: Profile) -> int:
    """The profile's NVLink generation (provenance.nvlink_generation); Hopper's where it names none or one
    without a figure (module doc)."""
    gen = profile.provenance.nvlink_generation
    return gen if gen in SYNC.sync_us else HOPPER


def floor_us(profile: Profile, algorithm: str, world_size) -> np.ndarray:
    """launch + ROUNDS[algorithm] * sync_us(gen) + per_peer_us (p - 1) (us), vectorized over world_size."""
    p = np.asarray(world_size, dtype=float)
    return (SYNC.launch_us + ROUNDS[algorithm] * SYNC.sync_us[generation(profile)]
            + PER_PEER[algorithm] * SYNC.per_peer_us * (p - 1))


def describe(profile: Profile, algorithm: str) -> str:
    """One line: the floor's formula with this profile's numbers (for explanations)."""
    gen = generation(profile)
    peers = f" + {SYNC.per_peer_us:g} (p-1)" if PER_PEER[algorithm] else ""
    return f"floor {SYNC.launch_us:g} + {ROUNDS[algorithm]} x {SYNC.sync_us[gen]:g} (NVLink {gen} flag round){peers} us"
