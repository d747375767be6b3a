"""Fixtures of the calibration tests."""

from __future__ import annotations

import socket

import pytest


@pytest.fixture
def gloo_group_of_one():
    """A real torch.distributed gloo process group of one rank on a free loopback port, destroyed afterwards
    (skipped when this process already has one, or without torch)."""
    dist = pytest.importorskip("torch.distributed")
    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()
