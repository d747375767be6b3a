"""Tidy tables behind every view (units in column names) and their CSV bytes.

Every chart and table in the dashboard is drawn from one of these frames, and its download button
offers exactly that frame as CSV, so what you see is what you download.
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from calibration.fitting.report_table import fit_report_frame
from costmodel import DESCRIPTIONS, STRATEGIES, Profile
from costmodel.answers.compare import whole_step_is_the_answer
from costmodel.io.formatting import MISSING, column_formatter, format_number
from costmodel.io.safe_io import csv_text

SCENARIO_COLUMNS = ("profile", "vocab", "draft_vocab", "d2t", "dtype", "tp", "nodes", "batch", "num_spec_tokens",
                    "drafting", "mode", "impl", "calls_per_decode_step")


# "us" as a word (a unit in costmodel's and the CLI's text: "26.7 us", "(us per draft call)"), not inside a name
# (`saving_us`, `status`) or a path
_US_WORD = re.compile(r"(?<![\w\-/.])us(?![\w-])")


def micro(text: str) -> str:
    """`text` with the unit "us" spelled "µs", the dashboard's one spelling (issue 35): for costmodel's sentences
    shown on the page (the CLI prints them with "us"; column names such as `saving_us` are kept)."""
    return _US_WORD.sub("µs", text)


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """Formula-safe UTF-8 CSV without the index (what every download button serves; costmodel.io.safe_io)."""
    return csv_text(frame).encode("utf-8")


def component_columns(frame: pd.DataFrame) -> list[str]:
    """The `<component>_us` columns of Prediction.to_frame()."""
    start = list(frame.columns).index("strategy") + 1
    end = list(frame.columns).index("total_us")
    return list(frame.columns[start:end])


def display(frame: pd.DataFrame, formats: dict[str, Any] | None = None) -> Any:
    """`frame` styled for people (a pandas Styler; sorting and the CSV keep raw values).

    Each column is formatted by the unit in its name (costmodel.io.formatting.column_formatter), other floats with
    3 significant digits and thousands separators, integers with separators. Streamlit draws a missing cell as
    "None" whatever the Styler says, so a column with missing values is shown as text (MISSING for the gaps);
    `formats` overrides per column.
    """
    rules: dict[str, Any] = {}
    for column in frame.columns:
        rule = column_formatter(str(column))
        if rule is None and pd.api.types.is_bool_dtype(frame[column]):
            continue
        if rule is None and pd.api.types.is_integer_dtype(frame[column]):
            rule = "{:,}".format
        elif rule is None and pd.api.types.is_float_dtype(frame[column]):
            rule = format_number
        elif rule is None and frame[column].dtype == object:
            rule = _text
        if rule is not None:
            rules[column] = rule
    rules.update(formats or {})
    shown = frame.copy()
    for column in frame.columns:
        if frame[column].isna().any():
            rule = rules.pop(column, _text)
            shown[column] = [MISSING if _missing(v) else rule(v) for v in frame[column]]
    return shown.style.format(rules, na_rep=MISSING)


def _missing(value: Any) -> bool:
    try:
        return value is None or bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return MISSING
    if isinstance(value, float):
        return format_number(value)
    return str(value)


def column_labels(frame: pd.DataFrame) -> dict[str, str]:
    """Readable headers: `saving_per_decode_step_us` -> 'saving per decode step (µs)'."""
    units = {"_us_per_1pct": " for +1% (µs)", "_us": " (µs)", "_ms": " (ms)", "_pct": " (%)",
             "_gbps": " (GB/s)"}
    out = {}
    for column in frame.columns:
        text = str(column)
        suffix = ""
        for unit, label in units.items():
            if text.endswith(unit):
                text, suffix = text[: -len(unit)], label
                break
        words = ["ITL" if w == "itl" else "TPOT" if w == "tpot" else w for w in text.split("_")]
        out[str(column)] = " ".join(words) + suffix
    return out


# -- CSV tables -------------------------------------------------------------------------------------------
def verdict_table(point: pd.DataFrame, crossovers: pd.DataFrame) -> pd.DataFrame:
    """One row per strategy at the chosen batch: time, savings vs the baseline, crossover batch."""
    cols = [c for c in SCENARIO_COLUMNS if c in point.columns]
    out = point[cols + ["strategy", "total_us", "saving_per_draft_call_us", "saving_pct", "saving_per_decode_step_us",
                        "wire_bytes_per_rank", "valid", "fastest"]]
    return _described_with_crossovers(out, crossovers)


def _described_with_crossovers(out: pd.DataFrame, crossovers: pd.DataFrame) -> pd.DataFrame:
    """`out` with each strategy's description after its name and its crossover batch, status and direction."""
    out.insert(out.columns.get_loc("strategy") + 1, "description", out["strategy"].map(DESCRIPTIONS))
    cross = crossovers.rename(columns={"status": "crossover_status", "direction": "crossover_direction"})
    return out.merge(cross[["strategy", "crossover_batch", "crossover_status", "crossover_direction"]],
                     on="strategy", how="left")


def step_verdict_table(point: pd.DataFrame, rows: pd.DataFrame, crossovers: pd.DataFrame) -> pd.DataFrame:
    """`verdict_table` of the whole draft step (costmodel.answers.whole_step.verdict_rows: `rows` and `crossovers`),
    us per decode step, with the scenario columns of the per-call `point` frame (the same scenario):
    whole_draft_step_us = T_step, saving_per_decode_step_us = T_step(baseline) - T_step, saving_pct of the
    baseline's T_step, saving_per_draft_call_us = the saving / K (the mean per draft call)."""
    scenario = point.drop_duplicates("strategy").set_index("strategy")
    cols = [c for c in SCENARIO_COLUMNS if c in point.columns]
    out = rows[["strategy", "whole_draft_step_us", "saving_per_decode_step_us", "saving_pct",
               "saving_per_draft_call_us", "valid", "fastest"]]
    return _described_with_crossovers(scenario.loc[out["strategy"], cols].reset_index().merge(out, on="strategy"),
                                      crossovers)


# the compare panel's headers: short enough that strategy + three numbers fit the ~430 px an 800 px window leaves
COMPARE_LABELS = {"strategy": "strategy", "total_us": "time (µs)",
                  "saving_per_draft_call_us": "saving (µs)", "crossover_batch": "crossover batch",
                  "whole_draft_step_us": "time (µs)", "saving_per_decode_step_us": "saving (µs)"}  # the caption
# says which: per draft call (the logits path alone) or per decode step (the whole draft step, under an engine)
# compare_table's columns shown where the whole draft step is every profile's answer (an engine runs the step)
STEP_COLUMNS = {"whole_draft_step_us": "whole_draft_step_us", "saving_per_decode_step_us": "saving_per_decode_step_us",
                "crossover_batch": "crossover_batch"}


def compare_long_table(table: pd.DataFrame) -> pd.DataFrame:
    """costmodel.answers.compare.compare_table as one row per (strategy, profile), five narrow columns, so the
    compare panel fits an 800 px window (the wide form's seven columns headed `saving_per_draft_call_us[<profile>]`
    were cut on the right at 800 and 1440 px); strategies in the STRATEGIES order, profiles as compared. Where an
    engine runs the step (`whole_step_is_the_answer`) the whole draft step's time, saving and crossover per decode
    step, else the per-call ones."""
    order = {s: i for i, s in enumerate(STRATEGIES)}
    profiles = {p: i for i, p in enumerate(dict.fromkeys(table["profile"]))}
    if whole_step_is_the_answer(table):  # the whole draft step, us per decode step (compare_table)
        out = table[["strategy", "profile", *STEP_COLUMNS]].rename(columns=STEP_COLUMNS)
    else:
        out = table[["strategy", "profile", "total_us", "saving_per_draft_call_us", "crossover_batch"]].copy()
    out["_s"], out["_p"] = out["strategy"].map(order), out["profile"].map(profiles)
    return out.sort_values(["_s", "_p"], kind="stable").drop(columns=["_s", "_p"]).reset_index(drop=True)


def breakdown_table(point: pd.DataFrame) -> pd.DataFrame:
    """Long table strategy x component (components a strategy does not run are left out), each strategy's
    components in execution order (`step`: 0, 1, ... from point.attrs["component_order"], per_call.frame_of;
    alphabetical without it)."""
    comps = component_columns(point)
    long = point.melt(id_vars=["strategy", "total_us"], value_vars=comps, var_name="component", value_name="time_us")
    long = long[long["time_us"] > 0].copy()
    long["component"] = long["component"].str.removesuffix("_us")
    long["share_pct"] = 100.0 * long["time_us"] / long["total_us"]
    long = long.rename(columns={"total_us": "strategy_total_us"})
    order = {name: i for i, name in enumerate(point["strategy"])}
    steps = point.attrs.get("component_order") or {}
    alpha = sorted(c.removesuffix("_us") for c in comps)  # without the order: alphabetical, after the known ones
    long["step"] = [steps[s].index(c) if c in steps.get(s, []) else len(steps.get(s, [])) + alpha.index(c)
                    for s, c in zip(long["strategy"], long["component"], strict=True)]
    long = long.sort_values(["strategy", "step", "component"],
                            key=lambda s: s.map(order) if s.name == "strategy" else s)
    return long[["strategy", "component", "time_us", "share_pct", "strategy_total_us", "step"]].reset_index(drop=True)


def records_table(records: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> pd.DataFrame:
    """A profile's fit_report (list of dicts) as a table (`calibration.fitting.report_table`): nested values become
    strings, missing cells stay empty, integers stay integers, `spread_misses` is a count."""
    return fit_report_frame(records)


def provenance_table(profile: Profile) -> pd.DataFrame:
    """Where each parameter group of the profile comes from (derived vs measured)."""
    rows = [{"part": "collective", "name": c.op, "world_size": c.world_size or "any", "mode": c.mode or "graph+eager",
             "provenance": c.provenance} for c in profile.collectives]
    rows += [{"part": "kernel", "name": op, "world_size": "any", "mode": "graph+eager", "provenance": k.provenance}
             for op, k in profile.kernel_ops.items()]
    rows += [{"part": "kernel table", "name": t.op, "world_size": t.world_size, "mode": t.mode,
              "provenance": "measured"} for t in profile.kernel_tables]
    frame = pd.DataFrame(rows)
    frame["world_size"] = frame["world_size"].astype(str)
    return frame


PRESET_LABEL_CHARS = 27  # what the sidebar's closed select box shows uncut at its default width (browser test)
PROFILE_LABEL_CHARS = 28  # the longest cluster-profile label the closed box shows uncut (browser test); a longer one
# ('NVIDIA Hopper · h200-sxm-nvlink', the default) is cut there, so the sidebar repeats it whole on the line under it


def preset_labels(table: pd.DataFrame) -> dict[str, str]:
    """A compact label per preset (costmodel.profiles.presets table) that leads with what tells presets apart.

    "<draft kind> · <model>" (EAGLE / EAGLE-3 / MTP first: it is what differs between presets of one model).
    A label longer than PRESET_LABEL_CHARS names the model by the fewest leading words no other preset's
    model starts with ("Llama 4 Maverick 17B-128E" -> "Llama 4 Maverick"); the sidebar shows the full name
    on the line under the box. Labels are unique: a clash keeps the full model names, and presets that still
    share a label get their id appended.
    """
    models = [str(m) for m in dict.fromkeys(table["model"])]

    def short(model: str) -> str:
        words = model.split()
        for k in range(1, len(words) + 1):
            head = words[:k]
            if not any(other != model and other.split()[:k] == head for other in models):
                return " ".join(head)
        return model

    kind = {name: str(draft).split()[0] for name, draft in table["draft"].items()}
    full = {name: f"{kind[name]} · {model}" for name, model in table["model"].items()}
    out = {name: label if len(label) <= PRESET_LABEL_CHARS else f"{kind[name]} · {short(str(model))}"
           for (name, label), model in zip(full.items(), table["model"], strict=True)}
    out = out if len(set(out.values())) == len(out) else full
    clash = {label for label in out.values() if list(out.values()).count(label) > 1}
    return {name: f"{label} ({name})" if label in clash else label for name, label in out.items()}
