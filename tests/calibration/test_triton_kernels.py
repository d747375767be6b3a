"""Fused Triton kernels of the local-argmax path against torch, bit for bit.

Runs natively on a CUDA machine; elsewhere on CPU tensors under Triton's interpreter (TRITON_INTERPRET=1 is set
below, before the kernels are defined). The expected results are computed inline with torch: torch.argmax over
the full unpadded logits (after the same soft-cap / scale in the logits' dtype), vLLM's per-rank
"mask padding, max, id + rank*s" step, and the 64-bit key of costmodel/model/strategies.py. When
calibration.reference.strategies is importable its building blocks are compared too.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

torch = pytest.importorskip("torch")
if importlib.util.find_spec("triton") is None:
    pytest.skip("Triton is not installed (pip install triton==3.9.0)", allow_module_level=True)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if DEVICE == "cpu":
    # The interpreter flag is read when Triton's own library and our kernels are decorated, i.e. at import.
    if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("triton was imported earlier in this process without TRITON_INTERPRET=1; "
                    "run this file on its own", allow_module_level=True)
    # Left set: Triton reads it again lazily while launching (on a CPU-only machine nothing else can use Triton).
    os.environ["TRITON_INTERPRET"] = "1"
    import calibration.reference.triton_kernels as tk

    if not tk.INTERPRETED:
        pytest.skip("calibration.reference.triton_kernels was imported earlier without the interpreter; "
                    "run this file on its own", allow_module_level=True)
else:
    import calibration.reference.triton_kernels as tk

try:
    from calibration.reference import strategies as ref
except ImportError:  # written by another helper; optional here
    ref = None

INF, NAN = float("inf"), float("nan")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
TWO32 = 2**32


# --- torch references (inline) -----------------------------------------------------------------------------------
def padded(vocab: int) -> int:
    return -(-vocab // 64) * 64


def pipeline(x: torch.Tensor, softcap: float | None, scale: float | None, *, spec: bool = False) -> torch.Tensor:
    """vLLM's pre-step in the logits' dtype: x / cap, tanh, * cap, then * scale.

    spec=True evaluates tanh in fp64 rounded to fp32 (what the interpreted kernel does) instead of torch's
    fp32 tanh; on CUDA the kernel calls libdevice tanhf like torch, so spec is never needed there.
    """
    if softcap is not None:
        y = x / softcap
        if spec and x.device.type == "cpu":
            y = torch.tanh(y.double()).float().to(x.dtype)
        else:
            y = torch.tanh(y)
        x = y * softcap
    if scale is not None:
        x = x * scale
    return x


def canon_bits(v: torch.Tensor) -> torch.Tensor:
    """fp32 bits with -0.0 -> +0.0 and every NaN -> 0x7FC00000."""
    v = v.float()
    bits = v.view(torch.int32).clone()
    bits[v == 0] = 0
    bits[torch.isnan(v)] = 0x7FC00000
    return bits


def make_key(vals: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """(ord32(canon(v)) << 32) | (2^32 - 1 - id), ord32(b) = b if b >= 0 else b ^ 0x7FFFFFFF."""
    bits = canon_bits(vals)
    ordered = torch.where(bits >= 0, bits, bits ^ 0x7FFFFFFF).long()
    return ordered * TWO32 + (TWO32 - 1 - ids)


def rank_expectation(local: torch.Tensor, rank: int, shard: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """vLLM's local step: padding := -inf, argmax (first max, NaN first), value at it, id + rank*s."""
    masked = local.clone()
    masked[:, max(0, min(shard, vocab - rank * shard)):] = -INF
    idx = masked.argmax(dim=-1)
    return masked.gather(-1, idx[:, None])[:, 0].float(), idx + rank * shard


def run_and_check(full: torch.Tensor, vocab: int, p: int, *, softcap=None, scale=None, block=None) -> None:
    """Every kernel on every rank's shard of the padded logits `full` [B, V_pad], compared with torch."""
    rows, v_pad = full.shape
    shard = v_pad // p
    truth = pipeline(full[:, :vocab], softcap, scale).argmax(dim=-1)
    spec = pipeline(full, softcap, scale, spec=True)
    pairs, keys = [], []
    for rank in range(p):
        local = full[:, rank * shard:(rank + 1) * shard]  # a strided view: row stride V_pad
        pair = tk.fused_local_argmax_pairs(local, rank, shard, vocab, softcap=softcap, scale=scale, block=block)
        key = tk.fused_key_pack(local, rank, shard, vocab, softcap=softcap, scale=scale, block=block)
        vals, ids = rank_expectation(spec[:, rank * shard:(rank + 1) * shard], rank, shard, vocab)
        assert pair.shape == (rows, 2) and pair.dtype == torch.float32
        assert torch.equal(pair[:, 1].long(), ids), f"rank {rank} ids"
        assert torch.equal(pair[:, 0].view(torch.int32), canon_bits(vals)), f"rank {rank} values"
        assert key.dtype == torch.int64 and torch.equal(key, make_key(vals, ids)), f"rank {rank} keys"
        if ref is not None:
            x = spec[:, rank * shard:(rank + 1) * shard]
            rpair = ref.local_argmax_pack(x, rank, shard, vocab)
            assert torch.equal(pair[:, 1], rpair[:, 1])
            assert torch.equal(pair[:, 0].view(torch.int32), canon_bits(rpair[:, 0]))
            assert torch.equal(key, ref.key_pack(x, rank, shard, vocab))
        pairs.append(pair)
        keys.append(key)
    gathered = torch.cat(pairs, dim=-1)  # tensor_model_parallel_all_gather(pair, dim=-1): [B, 2p]
    ids = tk.fused_pair_reduce(gathered, p)
    assert ids.dtype == torch.int64 and torch.equal(ids, truth)
    concat = torch.cat(pairs, dim=0)  # dist.all_gather_into_tensor: [p*B, 2], rank r at rows r*B..
    assert torch.equal(tk.fused_pair_reduce(concat, p, concat=True), truth)
    reduced = torch.stack(keys).amax(dim=0)  # all_reduce(MAX)
    assert torch.equal(tk.fused_key_unpack(reduced), truth)
    if ref is not None:
        assert torch.equal(ref.pair_reduce(concat, p)[0], truth)
        assert torch.equal(ref.key_unpack(reduced), truth)


def random_logits(rows: int, vocab: int, dtype: torch.dtype, seed: int, *, spread: float = 1.0,
                  pad_fill: float = INF) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    full = (torch.randn(rows, padded(vocab), generator=gen) * spread).to(dtype)
    full[:, vocab:] = pad_fill  # padding holds garbage that must never win
    return full.to(DEVICE)


# --- random inputs ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("p", [2, 4])
def test_random_batch37_one_chunk(dtype, p):
    # V = 3000 -> V_pad 3008, s = 1504 / 752: BLOCK 2048 / 1024 does not divide the shard
    full = random_logits(37, 3000, DTYPES[dtype], seed=p)
    run_and_check(full, 3000, p)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("p", [2, 4])
def test_random_batch1_default_table(dtype, p):
    # V = 10000 -> s = 5024 (p=2: 5 chunks of 1024, the last one partial) or 2512 (p=4: one chunk)
    full = random_logits(1, 10000, DTYPES[dtype], seed=10 + p, pad_fill=NAN)
    assert tk.choose_block(1, 10048 // p) == (1024 if p == 2 else 4096)
    run_and_check(full, 10000, p)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_random_many_chunks_with_ties(dtype):
    # bf16/fp16 randn rounded to 2 decimals ties a lot; BLOCK 256 splits s = 1504 into 6 chunks (last 224 wide)
    gen = torch.Generator().manual_seed(7)
    full = torch.round(torch.randn(5, 3008, generator=gen) * 2) / 4
    full[:, 3000:] = INF
    run_and_check(full.to(DTYPES[dtype]).to(DEVICE), 3000, 2, block=256)


# --- adversarial rows ---------------------------------------------------------------------------------------------
ADV_VOCAB = 200  # V_pad 256: padding ids 200..255 sit at the end of the last shard


def adversarial() -> tuple[torch.Tensor, list[int]]:
    """Rows of designed ties / padding / NaN / signed zeros, with torch.argmax's answer checked alongside."""
    rows: list[tuple[dict[int, float], float, int]] = [
        ({3: 5.0, 7: 5.0}, -1.0, 3),  # tie inside a chunk
        ({31: 5.0, 32: 5.0, 95: 5.0}, -1.0, 31),  # tie across chunks (32-wide) of one rank
        ({130: 5.0, 70: 5.0, 199: 5.0}, -1.0, 70),  # tie across ranks (p=2: 0/1, p=4: 1/2/3)
        ({150: 2.0}, -1.0, 150),  # padding holds +inf / NaN below
        ({}, -INF, 0),  # every real logit -inf (padding +inf): id 0 like torch.argmax
        ({60: NAN, 100: NAN, 20: -NAN, 5: INF}, -1.0, 20),  # NaN wins, the lowest NaN (any sign) first
        ({140: 0.0, 70: -0.0}, -1.0, 70),  # -0.0 == +0.0: the lower id wins (value canonical +0.0)
        ({30: 0.0, 100: -0.0}, -1.0, 30),
        ({199: -1e4}, -INF, 199),  # the last real column, next to the padding
        ({0: 3.0, 199: 3.0}, -1.0, 0),  # max at both ends: id 0
        ({199: NAN, 0: INF}, -1.0, 199),  # a NaN in the last real column beats +inf
        ({64: 4.0, 63: 4.0, 127: 4.0, 128: 4.0}, -1.0, 63),  # ties on shard boundaries
    ]
    full = torch.empty(len(rows), padded(ADV_VOCAB))
    expect = []
    for i, (points, base, want) in enumerate(rows):
        full[i] = base
        for col, value in points.items():
            full[i, col] = value
        full[i, ADV_VOCAB::2] = INF
        full[i, ADV_VOCAB + 1::2] = NAN
        expect.append(want)
    return full, expect


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("p", [2, 4])
def test_adversarial_rows(dtype, p):
    full, expect = adversarial()
    full = full.to(DTYPES[dtype]).to(DEVICE)
    assert full[:, :ADV_VOCAB].argmax(dim=-1).tolist() == expect  # the designed answers are torch's
    run_and_check(full, ADV_VOCAB, p, block=32)


def test_adversarial_default_block_and_pair_values():
    full, expect = adversarial()
    full = full.to(DEVICE)
    run_and_check(full, ADV_VOCAB, 4)
    pair = tk.fused_local_argmax_pairs(full[:, 64:128], 1, 64, ADV_VOCAB)
    assert pair[6].tolist() == [0.0, 70.0] and pair[6, 0].view(torch.int32).item() == 0  # -0.0 -> +0.0
    assert pair[5, 0].view(torch.int32).item() == 0x7FC00000  # canonical NaN (row 5: NaN at 100)
    assert pair[5, 1].item() == 100.0
    assert pair[4].tolist() == [-INF, 64.0]  # all -inf: the shard's first id


# --- soft-cap and scale -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("softcap,scale", [(30.0, None), (None, 0.7), (15.0, 1.3)])
def test_softcap_and_scale(dtype, softcap, scale):
    # spread 20 saturates tanh, so the rounded soft-cap creates ties that torch resolves to the lowest id
    full = random_logits(8, 3000, DTYPES[dtype], seed=3, spread=20.0)
    run_and_check(full, 3000, 2, softcap=softcap, scale=scale)


@pytest.mark.parametrize("bad", [0.0, -1.0, NAN, INF])
def test_non_positive_scale_or_softcap_rejected(bad):
    x = torch.zeros(2, 64, device=DEVICE)
    with pytest.raises(ValueError, match="scale"):
        tk.fused_local_argmax_pairs(x, 0, 64, 64, scale=bad)
    with pytest.raises(ValueError, match="softcap"):
        tk.fused_key_pack(x, 0, 64, 64, softcap=bad)


# --- pair reduce and key unpack on hand-made inputs ---------------------------------------------------------------
def test_pair_reduce_hand_made():
    s = 1000.0
    rows = [  # (value, id) per rank, p = 4
        ([1.0, 3.0, 3.0, 2.0], 1),  # tie between ranks 1 and 2: rank 1
        ([-INF, -INF, -INF, -INF], 0),  # all -inf: rank 0
        ([1.0, NAN, 5.0, NAN], 1),  # NaN wins, lowest rank
        ([-0.0, 0.0, -1.0, -2.0], 0),  # signed zeros tie: rank 0
        ([-3.0, -2.0, -1.0, INF], 3),
    ]
    gathered = torch.tensor([[x for r, v in enumerate(vals) for x in (v, r * s + 7)] for vals, _ in rows])
    out = tk.fused_pair_reduce(gathered.to(DEVICE), 4)
    assert out.tolist() == [int(r * s + 7) for _, r in rows]
    # p = 3 (a non-power-of-two rank count) and a strided input (every other row of a bigger buffer)
    wide = torch.tensor([[1.0, 5.0, 2.0, 1005.0, 2.0, 2005.0]] * 6, device=DEVICE)[::2]
    assert tk.fused_pair_reduce(wide, 3).tolist() == [1005] * 3
    # the same pairs in all_gather_into_tensor's concat layout [p*B, 2]
    concat = gathered.view(len(rows), 4, 2).transpose(0, 1).reshape(4 * len(rows), 2)
    assert tk.fused_pair_reduce(concat.to(DEVICE), 4, concat=True).tolist() == [int(r * s + 7) for _, r in rows]


def test_key_unpack_hand_made():
    low = [(2.5, 7), (-1.0, 123_456), (float("-inf"), 0), (NAN, 2**32 - 1)]
    keys = make_key(torch.tensor([v for v, _ in low]), torch.tensor([i for _, i in low]))
    assert keys[1] < 0 and keys[0] > 0  # negative values give negative keys
    assert tk.fused_key_unpack(keys.to(DEVICE)).tolist() == [i for _, i in low]
    assert tk.fused_key_unpack(keys.view(2, 2).to(DEVICE)).shape == (2, 2)


# --- edges, validation and the block table ------------------------------------------------------------------------
def test_empty_batch_and_one_column_shards():
    empty = torch.empty(0, 64, device=DEVICE)
    assert tk.fused_local_argmax_pairs(empty, 0, 64, 64).shape == (0, 2)
    assert tk.fused_key_pack(empty, 0, 64, 64).shape == (0,)
    assert tk.fused_pair_reduce(torch.empty(0, 4, device=DEVICE), 2).shape == (0,)
    # V = 100 over p = 8: s = 16, rank 7 holds ids 112..127, all padding: (-inf, 112)
    x = torch.full((1, 16), 9.0, device=DEVICE)
    assert tk.fused_local_argmax_pairs(x, 7, 16, 100).tolist() == [[-INF, 112.0]]
    # padding is masked after the soft-cap (vLLM's order): still -inf, not cap * tanh(-inf) = -cap
    assert tk.fused_local_argmax_pairs(x, 7, 16, 100, softcap=5.0).tolist() == [[-INF, 112.0]]
    neg_inf_key = (-2139095041) * 2**32 + (2**32 - 1 - 112)  # ord32(-inf) = 0xFF800000 ^ 0x7FFFFFFF
    assert tk.fused_key_pack(x, 7, 16, 100, softcap=5.0, scale=2.0).tolist() == [neg_inf_key]


def test_bad_inputs_raise_value_error():
    x = torch.zeros(2, 64, device=DEVICE)
    with pytest.raises(ValueError, match="columns"):
        tk.fused_local_argmax_pairs(x, 0, 32, 64)
    with pytest.raises(ValueError, match="dtype"):
        tk.fused_key_pack(x.long(), 0, 64, 64)
    with pytest.raises(ValueError, match="2\\^24"):
        tk.fused_local_argmax_pairs(x, 2**18, 64, 2**25)  # ids up to 2^24 + 63: not exact in fp32
    with pytest.raises(ValueError, match="block"):
        tk.fused_key_pack(x, 0, 64, 64, block=48)
    with pytest.raises(ValueError, match="2p"):
        tk.fused_pair_reduce(torch.zeros(2, 6, device=DEVICE), 2)
    with pytest.raises(ValueError, match="concat"):
        tk.fused_pair_reduce(torch.zeros(5, 2, device=DEVICE), 2, concat=True)
    with pytest.raises(ValueError, match="int64"):
        tk.fused_key_unpack(torch.zeros(3, device=DEVICE))


@pytest.mark.parametrize("rows,shard,block", [
    (1, 5, 16), (1, 100, 128), (1, 4096, 4096), (2048, 4000, 4096),  # one chunk per row
    (1, 25_256, 1024), (64, 25_256, 2048), (256, 25_256, 4096),
    (1, 101_056, 1024), (8, 101_056, 1024), (16, 101_056, 2048),
])
def test_block_table(rows, shard, block):
    assert tk.choose_block(rows, shard) == block
