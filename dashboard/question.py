"""The sidebar's question: `Inputs` (widgets and URL state) -> `costmodel.answers.question.build_question`, the one
place every face's inputs are validated, and its `Answer` (`costmodel.answers.answer.price`), kept per question so a
rerun that asks the same question reads the same object. The views render the Answer; they price nothing."""

from __future__ import annotations

from dataclasses import asdict
from functools import lru_cache

from costmodel.answers.answer import Answer, WorkloadAnswer, price
from costmodel.answers.question import Question, build_question, draft_arch
from costmodel.model.drafter import DraftArch
from costmodel.profiles.presets import preset_draft, preset_names
from costmodel.serving.workload import parse_workload

from .data import profile_from_text, text_fabric
from .state import CUSTOM, Inputs, ScenarioSpec


def arch_overrides(preset: str | None, hidden: int | None) -> dict[str, int]:
    """The sidebar's hidden size as the draft's where it differs from the preset's draft (as `--hidden` on the CLI)."""
    name = preset if preset in preset_names() else None
    if hidden is None or (name is not None and int(preset_draft(name)["hidden"]) == int(hidden)):
        return {}
    return {"hidden": int(hidden)}


def sidebar_arch(preset: str, draft_vocab: int, hidden: int | None) -> DraftArch:
    """The draft architecture the sidebar's question prices (`costmodel.answers.question.draft_arch`: the preset's
    draft, the default preset's for a custom model, with the sidebar's hidden size as `arch_overrides` gives it) -
    the verdict's, and so the batch sweep's, heatmaps', sensitivity's and compare panel's."""
    name = None if preset == CUSTOM else preset
    return draft_arch(name, int(draft_vocab), arch_overrides(name, hidden))[0]


def question_of(text: str, inputs: Inputs, workload: tuple[str, str] | None = None) -> Question:
    """The validated Question of the sidebar inputs (InputError, one line, for an impossible one), with the
    Recommendation tab's workload (name, text) where given."""
    return _question(text, inputs.spec, float(inputs.batch), inputs.preset, inputs.itl_ms, inputs.acceptance_length,
                     workload, text_fabric(text))


@lru_cache(maxsize=64)
def _question(text: str, spec: ScenarioSpec, batch: float, preset: str, itl_ms: float | None,
              acceptance_length: float | None, workload: tuple[str, str] | None, fabric: str | None) -> Question:
    """`fabric` keys the cache only (a fabric-keyed ProfileText equals its plain text as a str): the profile comes
    priced over it from `data.profile_from_text`, the one re-pricing every view shares (as --fabric would)."""
    name = None if preset == CUSTOM else preset
    wl = None if workload is None else parse_workload(workload[1], workload[0])
    return build_question({**asdict(spec), "batch": batch}, profile_from_text(text), preset=name,
                          arch_overrides=arch_overrides(name, spec.hidden), workload=wl, itl_ms=itl_ms,
                          acceptance_length=acceptance_length)


@lru_cache(maxsize=64)
def _answer(question: Question) -> Answer:
    return price(question)


def answer_of(text: str, inputs: Inputs) -> Answer:
    """The Answer of the sidebar's question (priced on first use of each part, kept per question)."""
    return _answer(question_of(text, inputs))


def workload_answer(text: str, inputs: Inputs, name: str, workload_text: str) -> WorkloadAnswer:
    """The Recommendation tab's answer: the sidebar's question over the workload `name` - what `recommend` prints
    for the same flags."""
    return _answer(question_of(text, inputs, (name, workload_text))).workload
