"""The dp draft placement's token all-gather (calibration/reference/strategies.py): bit-exact on threads and gloo."""

from __future__ import annotations

import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from calibration.reference import strategies as ref


def _tokens(batch: int, k: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(batch * 31 + k)
    return torch.randint(0, 2**40, (batch, k), generator=g, dtype=torch.int64)


def test_dp_rows_split_by_hand():
    assert [ref.dp_rows(10, 4, r) for r in range(4)] == [slice(0, 3), slice(3, 6), slice(6, 9), slice(9, 10)]
    assert [ref.dp_rows(2, 4, r) for r in range(4)] == [slice(0, 1), slice(1, 2), slice(2, 2), slice(2, 2)]


@pytest.mark.parametrize("batch,p,k", [(10, 4, 3), (2, 4, 5), (8, 8, 1), (7, 3, 2), (1, 2, 4)])
def test_dp_gather_on_threads_returns_every_token_on_every_rank(batch, p, k):
    full = _tokens(batch, k)
    got = ref.run_threads(p, lambda comm: ref.dp_gather_tokens(full[ref.dp_rows(batch, p, comm.rank)], comm, batch))
    for out in got:
        assert out.dtype == torch.int64 and torch.equal(out, full)


def test_dp_gather_rejects_a_wrong_share():
    # both ranks refuse their share; either may raise first
    with pytest.raises(ValueError, match=r"rank [01]: expected \[2, K\] int64 tokens, got \[3, 2\]"):
        ref.run_threads(2, lambda comm: ref.dp_gather_tokens(_tokens(3, 2), comm, 4))


def _gloo_rank(rank: int, world: int, port: int, batch: int, k: int, queue) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        full = _tokens(batch, k)
        out = ref.dp_gather_tokens(full[ref.dp_rows(batch, world, rank)], ref.TorchComm(), batch)
        queue.put((rank, bool(torch.equal(out, full))))
    finally:
        dist.destroy_process_group()


def test_dp_gather_bit_exact_on_a_gloo_group_of_two():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_gloo_rank, args=(r, 2, port, 5, 3, queue)) for r in range(2)]
    for proc in procs:
        proc.start()
    results = dict(queue.get(timeout=120) for _ in procs)
    for proc in procs:
        proc.join(timeout=60)
    assert results == {0: True, 1: True}
