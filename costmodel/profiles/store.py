"""Where profiles live: the bundled ones in data/profiles/, a user's files, and the default.

`load_profile(name_or_path)` takes a bundled name or a path (bounded read, then `parse_profile`); `save_profile`
writes a checked document. `tp_placement_problem` says why a TP size / node count does not fit a profile's nodes
(more GPUs per node than it has). An installed package carries data/ as costmodel/data; a checkout has it at the
repository root.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..io import safe_io
from ..io.errors import InputError
from ..io.outputs import resolve_path, write_text
from .parse import MAX_PROFILE_BYTES, parse_profile, profile_from_dict
from .paths import DATA_DIR, DEFAULT_PROFILE, PROFILE_DIR, bundled_profiles, profile_file  # noqa: F401 - re-exported
from .types import Profile


@lru_cache(maxsize=32)
def _load_path(path: str) -> Profile:
    p = Path(path)
    text = safe_io.read_bytes(p, limit_bytes=MAX_PROFILE_BYTES, what="profile")
    return parse_profile(text, source=p.name)


def load_profile(name_or_path: str | Path | None = None) -> Profile:
    """Load a bundled profile by name, or a JSON file by path (None: the default)."""
    if name_or_path is None:
        name_or_path = DEFAULT_PROFILE
    text = str(name_or_path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError("--profile: not UTF-8 encodable") from None
    if "\x00" in text:
        raise InputError("--profile: contains a NUL character")
    path = profile_file(text)
    if path is None and not text.endswith(".json") and not os.path.islink(text):  # a broken link: say why below
        raise InputError(f"profile {text!r}: not a bundled profile ({', '.join(bundled_profiles())}) or a file")
    return _load_path(str(path if path is not None else resolve_path(text, what="profile")))


def default_profile() -> Profile:
    return load_profile(DEFAULT_PROFILE)


def save_profile(data: dict[str, Any], path: str | Path, inputs: Iterable[str | Path | None] = ()) -> Profile:
    """Validate `data` and write it as JSON, atomically and never over one of `inputs`
    (`costmodel.io.outputs.write_text`); returns the parsed profile."""
    profile = profile_from_dict(data, source=str(path))
    write_text(path, json.dumps(data, indent=1, sort_keys=False) + "\n", inputs, what="profile")
    return profile


def tp_placement_problem(profile: Profile, tp: int, nodes: int = 1) -> str | None:
    """Why a TP group of `tp` ranks over `nodes` nodes cannot run on `profile`'s machines, or None when it can.

    A node holds `provenance.gpus_per_node` GPUs (one NVLink / PCIe domain; 72 for a GB200 NVL72 rack), so the
    group needs ceil(tp / nodes) <= gpus_per_node; profiles that do not say how many GPUs a node has accept any tp.
    """
    per_node = profile.provenance.gpus_per_node
    if per_node is None or tp <= 1 or nodes < 1:
        return None
    need = -(-int(tp) // int(nodes))
    if need <= per_node:
        return None
    fix = -(-int(tp) // per_node)
    return (f"tp {tp} on {nodes} node(s) needs {need} GPUs per node, but profile {profile.name} has "
            f"{per_node} GPUs per node: pass --nodes {fix} (or more)")


def check_tp_placement(profile: Profile, tp: int, nodes: int = 1) -> None:
    """InputError (one line) when `tp_placement_problem` finds one."""
    problem = tp_placement_problem(profile, tp, nodes)
    if problem is not None:
        raise InputError(problem)
