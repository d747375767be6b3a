"""GPU memory per GPU name (data/presets/gpus.csv): what a draft placement's weights and KV cache must fit in.

The names are the profiles' `provenance.gpu` strings; each row cites the GPU's datasheet. Read with the csv module
(no pandas).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import lru_cache

from ..io.errors import InputError
from .paths import GPUS_CSV


@dataclass(frozen=True)
class GpuMemory:
    """One GPU's memory: bytes (None: not a GPU / not checked) and the datasheet it comes from."""

    gpu: str
    memory_bytes: int | None
    source: str


@lru_cache(maxsize=1)
def gpu_table() -> dict[str, GpuMemory]:
    """gpu name -> GpuMemory, in file order."""
    out: dict[str, GpuMemory] = {}
    with open(GPUS_CSV, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            text = (row.get("memory_bytes") or "").strip()
            try:
                mem = int(text) if text else None
            except ValueError:
                raise InputError(f"{GPUS_CSV.name}: memory_bytes of {row['gpu']!r} is not an integer: {text!r}") \
                    from None
            out.setdefault(row["gpu"], GpuMemory(row["gpu"], mem, row.get("source", "")))
    return out


def gpu_memory(gpu: str) -> GpuMemory | None:
    """The GPU's memory row, or None when gpus.csv does not name it (the caller then does not check memory)."""
    return gpu_table().get(str(gpu))
