"""One user question, built and validated once: `Question` and `build_question`.

A question is "for my model, GPUs, TP, batch (or batch mix), K and engine, should I turn local argmax on, and what
does it buy me?". Every face builds it here - the CLI from its flags (`costmodel.cli.question_args`), the dashboard
from its sidebar and URL state (`dashboard/question.py`) - and prices it with `costmodel.answers.answer.price`, so
one question gets one answer whatever asks it. `build_question` is the only place the inputs are checked together:

* the scenario (`Scenario.__post_init__`: vocab, TP dividing the padded vocab, dtype, K, ...),
* the TP group fitting the profile's nodes (`check_tp_placement`), and dividing the named preset's attention heads
  under vLLM (`check_tp_heads`: vLLM refuses such a TP), and the scale-out fabric (--fabric,
  --nics-per-node, --nic-gbps: `costmodel.model.fabrics.profile_on_fabric` re-prices the profile's multi-node curves),
* the draft architecture the whole draft step prices (`DraftArch.__post_init__`: its vocab, heads, ...), and where
  it came from (`arch_source`: the preset's draft, or the default preset's for a custom vocabulary),
* the impact inputs: ITL and acceptance length go together, the acceptance length lies in 1..K+1,
* the verification inputs (a greedy fraction or target dtype only with verification).

Each check raises `InputError` with one line naming the input; nothing is priced here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..io.errors import InputError
from ..model.drafter import DraftArch
from ..model.fabrics import profile_on_fabric
from ..model.scenario import Scenario
from ..profiles.paths import DEFAULT_PRESET
from ..profiles.presets import preset_attention_heads, preset_draft, preset_draft_kind, preset_names
from ..profiles.store import check_tp_placement
from ..profiles.types import Profile
from .engine_config import VLLM_ENGINES
from .workload import Workload

DEFAULT_ENGINE = "vllm"  # the switch is vLLM's: its whole draft step is the default answer (issue 35)
MAX_BATCH = 65536.0


@dataclass(frozen=True, eq=False)  # holds a Profile and maybe a Workload: compared by identity
class Question:
    """Everything that prices one answer (module doc). `scenario` is one scenario at the point batch; with a
    `workload` the answer is also priced over its batch mix."""

    scenario: Scenario
    profile: Profile
    arch: DraftArch
    arch_source: str
    preset: str | None = None
    kv_len: int = 2048
    forward_us: float | None = None
    free_bytes: float | None = None
    placement: str | None = None
    itl_ms: float | None = None
    acceptance_length: float | None = None
    workload: Workload | None = None
    method: str | None = None
    verify: bool = False
    greedy_fraction: float = 1.0
    target_dtype: str | None = None
    max_batch: float = MAX_BATCH
    fabric: str | None = None  # --fabric as asked (`profile` is already priced over it: costmodel.model.fabrics)

    @property
    def engine(self) -> str:
        return str(self.scenario.engine)

    @property
    def fields(self) -> dict[str, Any]:
        """The scenario's fields without the batch (what `recommend` prices over a workload's batches)."""
        return {f: getattr(self.scenario, f) for f in self.scenario.__dataclass_fields__ if f != "batch"}

    def quantity_line(self, per_call_why: str = "") -> str:
        """The answer's quantity in one line, stated by every face: "whole draft step under vllm, per decode step of
        K = 5 draft tokens (5 draft calls)" where the whole draft step is the answer; where it is not (`per_call_why`:
        `Answer.whole_step`'s reason, e.g. a TP that does not divide the draft's heads) the per-call quantity the
        answer prices ("per draft call under vllm: the logits path alone ... (why)") - the Answer passes its own
        reason, so the line names the quantity priced (issue 43)."""
        sc = self.scenario
        calls = int(sc.calls_per_decode_step)
        per_step = f"x {calls} call{'s' if calls != 1 else ''} per decode step"
        if self.engine == "none":
            return (f"the logits path alone under --mode {sc.mode} (engine none: a microbenchmark), per draft call; "
                    f"{per_step}")
        if per_call_why:
            return (f"per draft call under {self.engine}: the logits path alone, us per draft call; {per_step} "
                    f"({per_call_why})")
        return (f"whole draft step under {self.engine}, per decode step of K = {int(sc.num_spec_tokens)} draft "
                f"token{'s' if int(sc.num_spec_tokens) != 1 else ''} ({calls} draft call{'s' if calls != 1 else ''})")


def _preset_name(preset: str | None) -> str:
    """A known preset's name, else the default preset's (a custom vocabulary borrows its draft)."""
    return preset if preset and preset in preset_names() else DEFAULT_PRESET


def draft_arch(preset: str | None, draft_vocab: int, overrides: dict[str, Any] | None = None
               ) -> tuple[DraftArch, str]:
    """(the draft architecture the whole draft step prices, where it came from): the preset's draft (the default
    preset's for a custom model) with `overrides` (DraftArch field -> value) and lm_head vocabulary `draft_vocab`."""
    name = _preset_name(preset)
    fields = preset_draft(name)
    arch = DraftArch.from_fields({**fields, "vocab": int(draft_vocab)})
    if overrides:
        arch = replace(arch, **overrides)  # re-validated by __post_init__
    borrowed = "" if preset == name else " (a custom model borrows the default preset's draft)"
    source = f"preset {name}'s draft{borrowed}: {fields.get('source', '') or 'models.csv'}"
    if overrides:
        source += f", overridden: {', '.join(f'{k}={v}' for k, v in sorted(overrides.items()))}"
    return arch, source


def speculative_method(preset: str | None, d2t: bool) -> str:
    """vLLM's `speculative_config.method` for the pasted config: "mtp" for a preset whose draft is an MTP module
    (models.csv `draft` column), "eagle3" for a reduced draft vocabulary with d2t, else "eagle"."""
    if preset_draft_kind(preset).upper().startswith("MTP"):
        return "mtp"
    return "eagle3" if d2t else "eagle"


def check_tp_heads(preset: str | None, tp: int, engine: str) -> None:
    """Under vLLM, a TP that does not divide the preset's target's total attention heads cannot be served: vLLM
    refuses it before loading the model (ModelConfig.verify_with_parallel_config, vllm/config/model.py: "Total number
    of attention heads (H) must be divisible by tensor parallel size (P)"). Checked where the preset knows the heads
    (`presets.preset_attention_heads`); a custom model, or an engine other than vLLM, is not checked here."""
    known = preset_attention_heads(preset) if preset else None
    if known is None or engine not in VLLM_ENGINES or tp <= 0:
        return
    heads, model = known
    if heads % tp:
        fits = ", ".join(str(d) for d in range(1, heads + 1) if heads % d == 0)
        raise InputError(f"--tp: {tp} does not divide the {heads} attention heads of {model} (preset {preset}); "
                         f"vLLM refuses it (ModelConfig.verify_with_parallel_config) - TPs that divide {heads}: {fits}")


def check_acceptance(acceptance_length: float | None, k: int) -> None:
    """The acceptance length (mean tokens per decode step) lies in 1..K+1 - the one wording of the check, for
    predict / recommend (`check_impact`), simulate and the dashboard's Serving A/B tab."""
    if acceptance_length is not None and not 1.0 <= acceptance_length <= k + 1:
        raise InputError(f"--acceptance-length: must be in 1..K+1 = 1..{k + 1} tokens per decode step with K = {k}, "
                         f"got {acceptance_length:g}")


def check_impact(itl_ms: float | None, acceptance_length: float | None, k: int) -> None:
    """ITL and acceptance length go together (TPOT needs both); the acceptance length lies in 1..K+1."""
    if acceptance_length is not None and itl_ms is None:
        raise InputError("--acceptance-length: needs --itl-ms too")
    if itl_ms is not None and acceptance_length is None:
        raise InputError("--itl-ms: needs --acceptance-length too (mean tokens per decode step, 1..K+1)")
    check_acceptance(acceptance_length, k)


def build_question(scenario_fields: dict[str, Any], profile: Profile, *, preset: str | None = None,
                   arch_overrides: dict[str, Any] | None = None, batch: float | None = None,
                   workload: Workload | None = None, kv_len: int = 2048, forward_us: float | None = None,
                   free_bytes: float | None = None, placement: str | None = None, itl_ms: float | None = None,
                   acceptance_length: float | None = None, method: str | None = None, verify: bool = False,
                   greedy_fraction: float | None = None, target_dtype: str | None = None,
                   max_batch: float = MAX_BATCH, fabric: str | None = None, nics_per_node=None,
                   nic_gbit=None, preset_named: bool = True) -> Question:
    """The validated `Question` (module doc): `scenario_fields` are Scenario's fields (one value each, `batch`
    among them or given as `batch`; with a workload and no batch, its first batch). `preset_named`: the preset is the
    user's model (--preset, the sidebar's), not the default a bare CLI call borrows: only then is the TP checked
    against its target's attention heads (`check_tp_heads`)."""
    fields = dict(scenario_fields)
    if batch is not None:
        fields["batch"] = batch
    if "batch" not in fields:
        if workload is None:
            raise InputError("--batch: no batch and no workload given")
        fields["batch"] = float(workload.batch[0])
    sc = Scenario(**fields)
    if sc.size != 1:
        raise InputError("a question prices one scenario (use sweep for lists)")
    check_tp_placement(profile, int(sc.tp), int(sc.nodes))
    if preset_named:
        check_tp_heads(preset, int(sc.tp), str(sc.engine))
    profile = profile_on_fabric(profile, fabric, nics_per_node, nic_gbit)
    check_impact(itl_ms, acceptance_length, int(sc.num_spec_tokens))
    if not verify and (greedy_fraction is not None or target_dtype is not None):
        flag = "--greedy-fraction" if greedy_fraction is not None else "--target-dtype"
        raise InputError(f"{flag}: prices the target's verification logits, so it needs --verify")
    if workload is not None and placement:
        raise InputError("--placement: recommend chooses the placement over the workload itself (its placement "
                         "line); --placement prices one placement with predict")
    arch, arch_source = draft_arch(preset, int(sc.draft_vocab), arch_overrides)
    return Question(scenario=sc, profile=profile, arch=arch, arch_source=arch_source, preset=preset, kv_len=kv_len,
                    forward_us=forward_us, free_bytes=free_bytes, placement=placement, itl_ms=itl_ms,
                    acceptance_length=acceptance_length, workload=workload,
                    method=method or speculative_method(preset, bool(sc.d2t)), verify=verify,
                    greedy_fraction=1.0 if greedy_fraction is None else greedy_fraction, target_dtype=target_dtype,
                    max_batch=max_batch, fabric=(profile.raw.get("fabric") or {}).get("name"))
