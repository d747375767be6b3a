"""Dashboard inputs and their round trip through the URL (st.query_params) and widget state.

One frozen `Inputs` holds every choice the sidebar offers. It maps to

* widget state: `session_values(inputs)` gives {widget key: value}; `inputs_from_session` reads them back;
* query parameters: `to_query_params(inputs)` gives {param: str}; `parse_query_params` reads them back,
  ignoring (with a warning) every unknown or invalid parameter.

A copied link therefore restores the same view - the sidebar, the open tab and the panels under the verdict:
the top-k / collective / verification matrix (shown or not, top-k, collective, greedy verification and its
fraction), the compare selection (the second profile, shown or not), the Recommendation tab's workload and the
Serving A/B tab's bench run.
Panel parameters appear in the URL only when they differ from the panel's default. Uploaded profiles and
workloads live only in the session, so a link that names one falls back to the default with a warning.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from costmodel import DEFAULT_PROFILE, InputError, Scenario
from costmodel.answers.question import DEFAULT_ENGINE
from costmodel.io.measurements import DTYPES
from costmodel.model.collective_impls import IMPLS as COLLECTIVE_IMPLS
from costmodel.model.engines import ENGINES
from costmodel.profiles.fabrics import fabric_names
from costmodel.profiles.paths import DEFAULT_PRESET
from costmodel.profiles.presets import preset

CUSTOM = "custom"
UPLOAD_PREFIX = "upload: "
TP_CHOICES: tuple[int, ...] = (1, 2, 4, 8, 16)
BATCH_STEPS: tuple[int, ...] = tuple(2**i for i in range(17))  # 1 .. 65536 for the chart range
BATCH_LIMIT = BATCH_STEPS[-1]
TABS: tuple[str, ...] = ("Batch sweep", "Breakdown", "Sensitivity", "Heatmaps", "Calibration", "Impact",
                         "Recommendation", "Serving A/B")
DRAFTING = ("serial", "parallel")
MODES = ("graph", "eager")
IMPLS = ("torch", "fused")
BEST_COLLECTIVE = "best available"
TOPK_COLLECTIVES = (BEST_COLLECTIVE, *COLLECTIVE_IMPLS)  # the matrix panel's collective choice
TOPK_LIMIT = 4096
# The sidebar / panel label of each CLI flag a costmodel InputError may name (the one validation is the CLI's):
# `in_dashboard_words` shows "Mean acceptance length (tokens / decode step): must be in 1..K+1 ..." where the
# message says "--acceptance-length: ...", a flag no dashboard reader types (issue 43).
FLAG_LABELS = {
    "--acceptance-length": "Mean acceptance length (tokens / decode step)", "--itl-ms": "Baseline ITL (ms)",
    "--batch": "Batch (sequences per decode step)", "--num-spec-tokens": "K (draft tokens)", "--tp": "TP size",
    "--nodes": "Nodes", "--vocab": "Target vocab", "--draft-vocab": "Draft vocab", "--hidden": "Draft hidden size",
    "--d2t": "EAGLE-3 d2t map", "--dtype": "Logits dtype", "--drafting": "Drafting", "--mode": "Mode",
    "--engine": "Engine", "--impl": "Kernels", "--profile": "Cluster profile", "--preset": "Model preset",
    "--fabric": "Fabric between nodes", "--kv-len": "KV length (tokens)",
    "--forward-us": "Measured forward (µs per draft call, optional)", "--top-k": "Top-k",
    "--verify": "Greedy verification", "--greedy-fraction": "Greedy fraction",
}
_FLAG = re.compile(r"--[a-z][a-z0-9-]*")
_PASS_FLAG = re.compile(r"\bpass (--[a-z][a-z0-9-]*) ([^\s,;]+)")


def in_dashboard_words(message: str) -> str:
    """An error line with each CLI flag it names replaced by the dashboard input that sets it (FLAG_LABELS, in
    quotes; "pass --nodes 2" reads "set “Nodes” to 2"); a flag the dashboard has no input for stays as written."""
    message = _PASS_FLAG.sub(lambda m: f"set {m.group(1)} to {m.group(2)}" if m.group(1) in FLAG_LABELS
                             else m.group(), message)
    return _FLAG.sub(lambda m: f"“{FLAG_LABELS[m.group()]}”" if m.group() in FLAG_LABELS else m.group(), message)


OWN_FABRIC = "profile's own"  # the fabric choice that prices the profile as built (no --fabric)
FABRICS = (OWN_FABRIC, *fabric_names())


@dataclass(frozen=True)
class ScenarioSpec:
    """Every scenario field except the batch, as plain (hashable) values - the cache key of the sweeps."""

    vocab: int
    draft_vocab: int
    d2t: bool
    hidden: int | None
    dtype: str
    tp: int
    nodes: int
    num_spec_tokens: int
    drafting: str
    mode: str
    impl: str
    engine: str = "none"

    def scenario(self, batch: Any) -> Scenario:
        """The costmodel Scenario at `batch` (scalar or array); raises InputError when impossible."""
        return Scenario(**asdict(self), batch=batch)

    def with_(self, **changes: Any) -> ScenarioSpec:
        return replace(self, **changes)


@dataclass(frozen=True)
class Inputs:
    """Everything the sidebar sets (and the open tab)."""

    profile: str = DEFAULT_PROFILE
    preset: str = DEFAULT_PRESET
    vocab: int = 202048
    draft_vocab: int = 202048
    d2t: bool = False
    hidden: int = 5120
    tp: int = 8
    nodes: int = 1
    dtype: str = "bf16"
    k: int = 3
    drafting: str = "serial"
    mode: str = "graph"
    impl: str = "torch"
    engine: str = DEFAULT_ENGINE  # vLLM's whole draft step, as the CLI answers by default (issue 35)
    batch: int = 64
    batch_min: int = 1
    batch_max: int = 4096
    itl_ms: float | None = None
    acceptance_length: float | None = None
    tab: str = TABS[0]
    # the panels under the verdict (dashboard/topk_panel.py, compare_panel.py) and the Recommendation tab
    topk_show: bool = False
    topk_k: int = 1
    topk_collective: str = BEST_COLLECTIVE
    topk_verify: bool = False
    topk_fraction: float = 1.0
    compare_with: str | None = None  # None: the panel's default second profile
    compare_show: bool = False
    workload: str | None = None  # None: the tab's first workload
    bench: str | None = None  # the Serving A/B tab's bench run; None: the tab's first
    fabric: str = OWN_FABRIC  # --fabric (data/presets/fabrics.csv); OWN_FABRIC: the profile's own, priced as built

    @property
    def spec(self) -> ScenarioSpec:
        return ScenarioSpec(vocab=self.vocab, draft_vocab=self.draft_vocab, d2t=self.d2t, hidden=self.hidden,
                            dtype=self.dtype, tp=self.tp, nodes=self.nodes, num_spec_tokens=self.k,
                            drafting=self.drafting, mode=self.mode, impl=self.impl, engine=self.engine)

    def with_preset(self, name: str) -> Inputs:
        """Select a model preset (fills vocab, draft vocab, d2t, hidden) or `custom` (keeps them)."""
        if name == CUSTOM:
            return replace(self, preset=CUSTOM)
        return replace(self, preset=name, **preset(name))


# -- query parameters ------------------------------------------------------------------------------
Parser = Callable[[str], Any]


def _int(lo: int, hi: int) -> Parser:
    def parse(text: str) -> int:
        value = int(text)
        if not lo <= value <= hi:
            raise ValueError(f"expected an integer in {lo}..{hi}")
        return value
    return parse


def _float(lo: float) -> Parser:
    def parse(text: str) -> float:
        value = float(text)
        if not value >= lo or value == float("inf"):
            raise ValueError(f"expected a finite number >= {lo}")
        return value
    return parse


def _choice(options: Sequence[str]) -> Parser:
    def parse(text: str) -> str:
        if text not in options:
            raise ValueError(f"expected one of {', '.join(options)}")
        return text
    return parse


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError("expected a number in 0..1")
    return value


def _bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected 0 or 1")


# query parameter -> (Inputs field, parser); custom-model fields are read only with preset=custom
_CUSTOM_PARAMS = ("vocab", "draft_vocab", "d2t", "hidden")
_PARAMS: dict[str, tuple[str, Parser]] = {
    "vocab": ("vocab", _int(1, 2**31 - 1)),
    "draft_vocab": ("draft_vocab", _int(1, 2**31 - 1)),
    "d2t": ("d2t", _bool),
    "hidden": ("hidden", _int(1, 2**20)),
    "tp": ("tp", _int(1, 1024)),
    "nodes": ("nodes", _int(1, 1024)),
    "dtype": ("dtype", _choice(tuple(DTYPES))),
    "k": ("k", _int(1, 64)),
    "drafting": ("drafting", _choice(DRAFTING)),
    "mode": ("mode", _choice(MODES)),
    "impl": ("impl", _choice(IMPLS)),
    "engine": ("engine", _choice(ENGINES)),
    "batch": ("batch", _int(1, BATCH_LIMIT)),
    "bmin": ("batch_min", _int(1, BATCH_LIMIT)),
    "bmax": ("batch_max", _int(1, BATCH_LIMIT)),
    "itl": ("itl_ms", _float(1e-6)),
    "accept": ("acceptance_length", _float(1.0)),
    "tab": ("tab", _choice(TABS)),
    "topk": ("topk_show", _bool),
    "topk_k": ("topk_k", _int(1, TOPK_LIMIT)),
    "coll": ("topk_collective", _choice(TOPK_COLLECTIVES)),
    "verify": ("topk_verify", _bool),
    "greedy": ("topk_fraction", _fraction),
    "cmp_show": ("compare_show", _bool),
    "fabric": ("fabric", _choice(FABRICS)),
}
# only when not default
_PANEL_PARAMS = ("topk", "topk_k", "coll", "verify", "greedy", "cmp_show", "cmp", "workload", "bench", "fabric")


def _last(value: str | Sequence[str]) -> str:
    if isinstance(value, str):
        return value
    return str(value[-1]) if len(value) else ""


def parse_query_params(params: Mapping[str, str | Sequence[str]], *, profiles: Sequence[str],
                       presets: Sequence[str], workloads: Sequence[str] = (),
                       benches: Sequence[str] = ()) -> tuple[Inputs, list[str]]:
    """Inputs from URL parameters; every unknown or invalid parameter is skipped with a one-line warning.
    `profiles`: the bundled profile names (also the compare panel's choices); `workloads`: the example workloads;
    `benches`: the example bench runs (the Serving A/B tab)."""
    raw = {key: _last(value).strip() for key, value in params.items()}
    warnings: list[str] = []
    inputs = Inputs()

    name = raw.pop("preset", None)
    if name is not None and name != CUSTOM and name not in presets:
        warnings.append(f"ignored query parameter preset={name!r}: unknown model preset")
        name = None
    inputs = inputs.with_preset(name or DEFAULT_PRESET)

    profile = raw.pop("profile", None)
    if profile is not None:
        if profile in profiles:
            inputs = replace(inputs, profile=profile)
        elif profile.startswith(UPLOAD_PREFIX):
            warnings.append(f"ignored query parameter profile={profile!r}: uploaded profiles live only in the "
                            "session that uploaded them; upload it again")
        else:
            warnings.append(f"ignored query parameter profile={profile!r}: not a bundled profile")

    changes: dict[str, Any] = {}
    other = raw.pop("cmp", None)
    if other is not None:
        if other in profiles:
            changes["compare_with"] = other
        else:
            warnings.append(f"ignored query parameter cmp={other!r}: not a bundled profile")
    for key, known, what in (("workload", workloads, "example workload"), ("bench", benches, "example bench run")):
        value = raw.pop(key, None)
        if value is None:
            continue
        if value in known:
            changes[key] = value
        else:
            warnings.append(f"ignored query parameter {key}={value!r}: not an {what} (uploaded files live only in "
                            "the session that uploaded them; upload it again)")
    for key, text in raw.items():
        if key not in _PARAMS:
            warnings.append(f"ignored unknown query parameter {key!r}")
            continue
        if key in _CUSTOM_PARAMS and inputs.preset != CUSTOM:
            warnings.append(f"ignored query parameter {key}: it needs preset=custom")
            continue
        field_name, parse = _PARAMS[key]
        try:
            changes[field_name] = parse(text)
        except ValueError as exc:
            reason = str(exc) if "expected" in str(exc) else "not a number"
            warnings.append(f"ignored query parameter {key}={text!r}: {reason}")
    inputs = replace(inputs, **changes)
    if inputs.batch_min not in BATCH_STEPS or inputs.batch_max not in BATCH_STEPS \
            or inputs.batch_min > inputs.batch_max:
        warnings.append(f"ignored query parameters bmin={inputs.batch_min}, bmax={inputs.batch_max}: "
                        "need powers of two with bmin <= bmax")
        inputs = replace(inputs, batch_min=Inputs.batch_min, batch_max=Inputs.batch_max)
    return inputs, warnings


def to_query_params(inputs: Inputs) -> dict[str, str]:
    """URL parameters that restore `inputs` (custom-model fields only for preset=custom)."""
    out = {"profile": inputs.profile, "preset": inputs.preset}
    default = Inputs()
    for key, (field_name, _) in {**_PARAMS, "cmp": ("compare_with", None), "workload": ("workload", None),
                                   "bench": ("bench", None)}.items():
        if key in _CUSTOM_PARAMS and inputs.preset != CUSTOM:
            continue
        value = getattr(inputs, field_name)
        if value is None or (key in _PANEL_PARAMS and value == getattr(default, field_name)):
            continue
        if isinstance(value, bool):
            out[key] = str(int(value))
        elif isinstance(value, float):
            out[key] = format(value, ".12g")
        else:
            out[key] = str(value)
    return out


# -- widget state ------------------------------------------------------------------------------------
# widget key -> Inputs field (batch_range is the (min, max) pair of the range slider)
WIDGET_KEYS: tuple[str, ...] = tuple(f.name for f in fields(Inputs) if f.name not in ("batch_min", "batch_max")) \
    + ("batch_range",)


def session_values(inputs: Inputs) -> dict[str, Any]:
    """{widget key: value} that makes the sidebar and the panels show `inputs` (a None panel choice is left to
    the widget's own default)."""
    out = {f.name: getattr(inputs, f.name) for f in fields(Inputs) if f.name not in ("batch_min", "batch_max")
           and not (f.name in ("compare_with", "workload", "bench") and getattr(inputs, f.name) is None)}
    out["batch_range"] = (inputs.batch_min, inputs.batch_max)
    return out


def _positive_int(name: str, value: Any) -> int:
    try:
        number = float(str(value).strip())
    except ValueError:
        raise InputError(f"{name}: expected a positive integer, got {value!r}") from None
    if not number.is_integer() or number < 1:
        raise InputError(f"{name}: expected a positive integer, got {value!r}")
    limit = _SESSION_MAX.get(name)
    if limit is not None and number > limit:  # a TP typed as 99999999999999999999: one error line
        raise InputError(f"{name}: {value} is larger than {limit}")
    return int(number)


# largest value of each integer widget (as in the query-parameter table above)
_SESSION_MAX = {"vocab": 2**31 - 1, "draft_vocab": 2**31 - 1, "hidden": 2**20, "tp": 1024, "nodes": 1024, "k": 64,
                "batch": BATCH_LIMIT, "topk_k": TOPK_LIMIT}


def inputs_from_session(values: Mapping[str, Any]) -> Inputs:
    """Inputs from widget values; raises InputError for a value no widget should produce (e.g. TP 'abc')."""
    data = {key: values[key] for key in WIDGET_KEYS if key in values and key != "batch_range"}
    for key in ("vocab", "draft_vocab", "hidden", "tp", "nodes", "k", "batch", "topk_k"):
        if key in data:
            data[key] = _positive_int(key, data[key])
    if "batch_range" in values:
        data["batch_min"], data["batch_max"] = (int(v) for v in values["batch_range"])
    for key in ("itl_ms", "acceptance_length", "topk_fraction"):
        if data.get(key) is not None:
            data[key] = float(data[key])
    for key in ("d2t", "topk_show", "topk_verify", "compare_show"):
        if key in data:
            data[key] = bool(data[key])
    return Inputs(**data)
