"""Command-line flags: the scenario flags every pricing command shares, bounded numbers and choice lists.

What the parser needs to exist, and nothing more: no numpy, pandas or model import, so `--help`, `profiles` and
`presets` start fast (`costmodel.cli.scenario_args` turns the flags into a Scenario when a command runs). Every
parser here raises `InputError` (or argparse's error) with one line naming the flag; list values are capped
(MAX_LIST_VALUES) and so is a sweep's cartesian product (MAX_SWEEP_SCENARIOS), so a typo cannot allocate gigabytes.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Sequence
from typing import Any

from ..io.errors import InputError
from ..profiles.paths import DEFAULT_PRESET, DEFAULT_PROFILE

HEADLINE = "local_argmax_pairs"
# the dashboard's default scenario (dashboard/state.py Inputs), so both answer the same question by default
DEFAULT_BATCH = "64"
DEFAULT_K = "3"


class Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """--help shows every real default ("(default: 64)"); flags (store_true / store_false: no value, so their
    default is only the flag's absence - "(default: True)" on --no-serving-term read as "on by default") and unset
    options show none."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False or action.nargs == 0:
            return action.help
        return super()._get_help_string(action)


# -- value parsing ---------------------------------------------------------------
# Largest value each integer flag takes (the smallest is 1): beyond these the model's int64 arithmetic
# would overflow (--vocab 2^63 gave negative times); MAX_LIST_VALUES bounds one flag's list or range.
INT_FLAG_MAX: dict[str, int] = {"vocab": 2**31 - 1, "draft-vocab": 2**31 - 1, "hidden": 2**20, "tp": 2**16,
                                "nodes": 2**16, "batch": 2**24, "num-spec-tokens": 1024, "top-k": 4096}
MAX_LIST_VALUES = 100_000
# sweep refuses a larger grid: the whole table is held before it is written, peak RSS <= 256 MiB + 2.5 KiB per
# scenario (docs/limits.md; 4.4 GiB at the cap)
MAX_SWEEP_SCENARIOS = 2_000_000


def parse_choice_list(text: str, name: str, allowed: Sequence[str]) -> list[str]:
    """A comma list of `allowed` values, duplicates dropped (first occurrence kept)."""
    values = [v.strip() for v in str(text).split(",") if v.strip()]
    bad = [v for v in values if v not in allowed]
    if bad or not values:
        raise InputError(f"--{name}: {bad[0] if bad else text!r} is not one of {', '.join(allowed)}")
    return list(dict.fromkeys(values))


def nonempty_text(text: str) -> str:
    """argparse `type=` for a text flag: an empty or blank value is refused (`--vocab ''` was read as "not given"
    and silently priced the default)."""
    if not str(text).strip():
        raise argparse.ArgumentTypeError("empty value (leave the flag out for its default)")
    return text


PLACEMENT_SPEC = re.compile(r"(target|tp1|dp|q=[1-9][0-9]*)")
PLACEMENT_FORMS = "target, tp1, dp or q=N (N a positive integer dividing the TP)"


def placement_spec(text: str) -> str:
    """argparse `type=` for --placement: exactly target | tp1 | dp | q=N, lower case (whether N divides the TP is
    checked with the scenario, costmodel.model.draft_step.parse_placement); '' and 'Q=2' are refused."""
    if not PLACEMENT_SPEC.fullmatch(str(text)):
        raise argparse.ArgumentTypeError(f"expected {PLACEMENT_FORMS}, got {text!r}")
    return text


def parse_one_choice(text: str, name: str, allowed: Sequence[str], who: str) -> str:
    """One of `allowed` (`parse_choice_list`'s checks); a comma list is refused, naming the command `who`."""
    values = parse_choice_list(text, name, allowed)
    if len(values) != 1 or "," in str(text):
        raise InputError(f"--{name}: {who} takes one value, got {text!r}")
    return values[0]


def bounded_float(lo: float, hi: float, *, low_open: bool = False) -> Any:
    """argparse `type=` for a finite float in [lo, hi] ((lo, hi] with low_open): nan / inf are refused."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value > hi or value < lo or (low_open and value == lo):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number in {'(' if low_open else '['}"
                                             f"{lo:g}, {hi:g}]")
        return value

    return parse


def bounded_int(lo: int, hi: int = 2**63 - 1) -> Any:
    """argparse `type=` for an integer in [lo, hi] (one value: '1,2' is refused)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not one integer") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is outside {lo}..{hi}")
        return value

    return parse


# -- shared arguments --------------------------------------------------------------
TEXT = nonempty_text  # every scenario text flag: `if args.vocab:` must never read '' as "not given"


def add_fabric_args(p: argparse.ArgumentParser) -> None:
    """--fabric / --nics-per-node / --nic-gbps (data/presets/fabrics.csv; costmodel.model.fabrics)."""
    p.add_argument("--fabric", type=TEXT, default=None,
                   help="what joins the nodes: ib | roce | efa | tcpx | tcpxo | gib | socket | mnnvl "
                        "(data/presets/fabrics.csv; default: the profile's own - mnnvl on NVL72 racks, else ib); "
                        "re-prices the multi-node collectives, a fitted profile's measured ones excepted")
    p.add_argument("--nics-per-node", type=TEXT, default=None,
                   help="scale-out NICs per node (default: the fabric's, else the profile's)")
    p.add_argument("--nic-gbps", type=TEXT, default=None,
                   help="line rate of one NIC, Gb/s, 1 (1 GbE) to 3200 (default: the fabric's, else the profile's)")


def _add_scenario_args(p: argparse.ArgumentParser, *, lists: bool, batch: bool = True) -> None:
    many = " (comma list or range)" if lists else ""
    p.add_argument("--profile", type=TEXT, default=DEFAULT_PROFILE, help="bundled profile name or profile JSON path")
    p.add_argument("--preset", type=TEXT, default=None,
                   help=f"model preset id(s) from `presets` (default {DEFAULT_PRESET} unless --vocab is given)" + many)
    p.add_argument("--vocab", type=TEXT, default=None, help="target vocabulary, tokens (overrides the preset's)" + many)
    p.add_argument("--draft-vocab", type=TEXT, default=None,
                   help="draft lm_head vocabulary, tokens (default: the target's)" + many)
    p.add_argument("--d2t", type=TEXT, default=None,
                   help="EAGLE-3 draft-to-target map: on|off (default: the preset's)" + many)
    p.add_argument("--hidden", type=TEXT, default=None,
                   help="draft hidden size: sets the lm_head GEMM's (vLLM's head start) and the draft "
                        "architecture's hidden size (unless --draft-hidden), so it moves the whole draft step's saving")
    p.add_argument("--tp", type=TEXT, default="8", help="TP size p (ranks sharing the vocab)" + many)
    p.add_argument("--nodes", type=TEXT, default="1", help="nodes the TP group spans" + many)
    add_fabric_args(p)
    if batch:
        p.add_argument("--batch", type=TEXT, default=DEFAULT_BATCH,
                       help="decode batch B: rows (running requests) per draft call" + many)
    p.add_argument("--num-spec-tokens", type=TEXT, default=DEFAULT_K, help="K, draft tokens per decode step" + many)
    p.add_argument("--drafting", type=TEXT, default="serial",
                   help="serial (K calls of B rows) | parallel (1 call of B*K rows)" + many)
    p.add_argument("--dtype", type=TEXT, default="bf16", help="logits dtype: bf16 | fp16 | fp32" + many)
    p.add_argument("--engine", type=TEXT, default=None,
                   help="vllm | vllm-v2 | sglang | trtllm | tokenspeed | none: price each strategy as that engine "
                        "runs it (its recipe: collective, relayout, selection kernel, local path; CUDA graph or host "
                        "launches; costmodel/model/recipes.py, engines.py) and answer with its whole draft step; "
                        "default vllm (the switch is vLLM's) unless --mode is given; none = the logits path alone, "
                        "as a microbenchmark in one --mode" + many)
    p.add_argument("--mode", type=TEXT, default=None,
                   help="graph (CUDA-graph replay) | eager (host launches every op), for every component: prices "
                        "the logits path as a microbenchmark (implies --engine none; default graph there)" + many)
    p.add_argument("--impl", type=TEXT, default="torch", help="torch | fused (local strategies' kernels)" + many)
    p.add_argument("--top-k", type=TEXT, default="1",
                   help="candidates per row: 1 = greedy argmax; k > 1 = tree / multi-candidate drafting" + many)
    p.add_argument("--collective", type=TEXT, default="nccl",
                   help="nccl | oneshot | multimem | nccl-symm: the all-gather / all-reduce implementation (derived; "
                        "unavailable ones fall back to NCCL)" + many)
    p.add_argument("--host-op-us", type=HOST_US, default=None,
                   help="host time per eager torch op, us (default: the profile's kernels.host, else 8.0)")
    p.add_argument("--host-collective-us", type=HOST_US, default=None,
                   help="host time per eager c10d collective call, us (default: the profile's kernels.host, else "
                        "23.4, a back-to-back eager all_reduce loop on 4x H100)")
    p.add_argument("--no-serving-term", dest="serving_term", action="store_false",
                   help="drop the fixed cost per collective call of a serving step (7 us, derived from engine "
                        "figures; costmodel/model/serving.py) - for pricing synchronized microbenchmarks; without "
                        "the flag the term is priced")


HOST_US = bounded_float(0.0, 1e6)  # host time per call, us
ITL_MS = bounded_float(0.0, 1e6, low_open=True)  # ms per decode step: (0, 1000 s]
ACCEPTANCE = bounded_float(1.0, 1025.0)  # tokens per decode step: 1..K+1 (checked against K later)


def add_placement_args(p: argparse.ArgumentParser) -> None:
    """Where the draft runs (costmodel/model/draft_step.py), a custom draft (`add_draft_args`) and the memory."""
    p.add_argument("--placement", type=placement_spec, default=None,
                   help="target | tp1 | dp | q=N: price the whole draft step at this placement (refused when the draft "
                        "does not fit the GPU); predict shows every placement in its table")
    p.add_argument("--no-placements", action="store_true", help="skip the placement table (predict)")
    add_draft_args(p)
    p.add_argument("--gpu-free-gb", type=bounded_float(0.0, 1e5, low_open=True), default=None,
                   help="GPU memory left for the draft after the target, GB (default: the GPU's whole memory)")


def add_draft_args(p: argparse.ArgumentParser) -> None:
    """The drafter the whole draft step prices (costmodel.model.drafter): --draft-* overrides of the preset's draft
    architecture, a measured --forward-us and the --kv-len its attention reads (predict, recommend, sweep,
    compare)."""
    for name, what in (("layers", "decoder layers"), ("hidden", "hidden size (default: --hidden / the preset's)"),
                       ("heads", "attention heads"), ("kv-heads", "KV heads"), ("head-dim", "head dimension"),
                       ("intermediate", "MLP intermediate size")):
        p.add_argument(f"--draft-{name}", type=bounded_int(1, 10**7), default=None,
                       help=f"custom draft: {what} (overrides the preset's draft architecture)")
    p.add_argument("--forward-us", type=bounded_float(0.0, 1e7, low_open=True), default=None,
                   help="measured drafter forward, us per draft call (replaces the derived forward's GPU time)")
    p.add_argument("--kv-len", type=bounded_int(1, 10**7), default=2048,
                   help="KV length (context tokens per sequence) the draft's attention reads at decode")
