"""Dashboard: is local argmax reduction faster than a full-vocab all-gather for my TP draft model?

Run with `streamlit run app.py`. Layout and widgets only: computations live in `costmodel` (through the
cached wrappers in dashboard/data.py), the tabs in dashboard/views.py. The whole state is mirrored in the
URL's query parameters, so a copied link restores the view.
"""

import streamlit as st

from costmodel import DEFAULT_PROFILE, DESCRIPTIONS, InputError, bundled_profiles
from costmodel.answers.compare import profiles_by_family
from costmodel.io.measurements import DTYPES
from costmodel.io.plain import markdown_text as plain
from costmodel.model.engines import ENGINES
from costmodel.profiles.presets import preset, presets
from dashboard import state, views
from dashboard.compare_panel import compare_panel, profile_label
from dashboard.data import (
    bundled_profile_text,
    example_benches,
    example_workloads,
    freeze_long_lived,
    profile_from_text,
)
from dashboard.layout import apply_layout
from dashboard.multi_upload import base_parameters, parse_uploads
from dashboard.placement import placement_panel
from dashboard.serving_tab import serving_tab
from dashboard.state import BATCH_LIMIT, BATCH_STEPS, CUSTOM, DRAFTING, IMPLS, MODES, TABS, TP_CHOICES, Inputs
from dashboard.tables import PROFILE_LABEL_CHARS, preset_labels
from dashboard.topk_panel import topk_panel
from dashboard.uploads import UPLOAD_TYPES
from dashboard.verdict import evaluate

# no page_icon: a ":material/..." favicon is fetched from a font CDN, a console error on a closed network
st.set_page_config(page_title="Local argmax vs full all-gather", layout="wide")
apply_layout()  # narrow windows: tiles and tabs wrap (dashboard/layout.py)
ss = st.session_state
PROFILES = [name for _, name in profiles_by_family(bundled_profiles())]  # grouped by GPU family in the picker
PRESETS = presets()
BASE_NOTE_ITEMS = 4  # the sidebar names this many parts taken from the base; the Calibration tab lists them all
ENGINE_LABELS = {"none": "none (set Mode)", "vllm": "vLLM (V1 runner)", "vllm-v2": "vLLM (Model Runner V2)",
                 "sglang": "SGLang", "trtllm": "TensorRT-LLM", "tokenspeed": "tokenspeed"}

if "_init" not in ss:  # first run of this session: restore the state from the URL
    restored, warnings = state.parse_query_params(st.query_params.to_dict(), profiles=PROFILES,
                                                  presets=list(PRESETS.index), workloads=list(example_workloads()),
                                                  benches=list(example_benches()))
    widgets = state.session_values(restored)
    # a range slider is a range only when created with a (min, max) value, so it is seeded through `value`
    ss["_batch_range0"] = widgets.pop("batch_range")
    ss.update(widgets)
    ss.update(_init=True, _warnings=warnings, _uploads={}, _measurements={}, _base_notes={}, _upload_error=None,
              _last_good=Inputs(), upload_base=restored.profile if restored.profile in PROFILES else DEFAULT_PROFILE)


def on_preset() -> None:
    if ss["preset"] != CUSTOM:
        ss.update(preset(ss["preset"]))


def on_model_field() -> None:
    ss["preset"] = CUSTOM


def on_upload() -> None:
    files = ss.get("upload") or []
    if not files:
        return
    base = profile_from_text(bundled_profile_text(ss["upload_base"]))
    try:
        with st.spinner(f"reading {len(files)} file(s) (measurements are fitted on the spot, into one profile)"):
            ups = parse_uploads([(f.name, f.getvalue()) for f in files], base)
    except InputError as exc:
        ss["_upload_error"] = str(exc)
        return
    for up in ups:
        ss["_uploads"][up.label] = up.profile_text
        ss["_measurements"][up.label] = up.measurements_csv
        if up.measurements_csv is not None:
            ss["_base_notes"][up.label] = (base.name, base_parameters(up.profile))
    ss.update(profile=ups[-1].label, _upload_error=None)


PRESET_LABELS = preset_labels(PRESETS)  # short enough for the closed box; the full name goes on the line below


def preset_label(name: str) -> str:
    return "custom (set the numbers below)" if name == CUSTOM else PRESET_LABELS[name]


with st.sidebar:
    st.header("Scenario")
    st.selectbox("Cluster profile", [*PROFILES, *ss["_uploads"]], key="profile", format_func=profile_label)
    if len(profile_label(ss["profile"])) > PROFILE_LABEL_CHARS:  # cut in the closed box: whole, wrapped, below
        st.caption(plain(profile_label(ss["profile"])))
    st.file_uploader("...or upload profile JSONs, measurement CSVs (collectives, kernels) and nccl-tests logs",
                     type=list(UPLOAD_TYPES), key="upload", on_change=on_upload, accept_multiple_files=True,
                     help="Parsed as JSON / CSV / text only. Every JSON is a profile of its own; all CSVs and logs "
                          "are fitted together into ONE profile (calibration.fit), the rest taken from the base "
                          "profile below.")
    st.selectbox("Base profile for what the measurements do not cover", PROFILES, key="upload_base",
                 help="the fit takes every parameter it cannot measure from this profile (and says which)")
    if ss["_upload_error"]:
        st.error(plain(state.in_dashboard_words(ss["_upload_error"])))
    if ss["profile"] in ss["_base_notes"]:
        base_name, taken = ss["_base_notes"][ss["profile"]]
        shown = ", ".join(taken[:BASE_NOTE_ITEMS]) + (f" and {len(taken) - BASE_NOTE_ITEMS} more (Calibration tab)"
                                                      if len(taken) > BASE_NOTE_ITEMS else "")
        st.caption(plain(f"From the base profile {base_name} ({len(taken)} parts): {shown}." if taken else
                         f"Every parameter was measured; nothing taken from {base_name}."))
    st.selectbox("Model preset", [CUSTOM, *PRESETS.index], key="preset", format_func=preset_label,
                 on_change=on_preset)
    if ss["preset"] in PRESETS.index:  # the full name on its own line(s), never cut off
        row = PRESETS.loc[ss["preset"]]
        st.caption(f"{row['model']} - {row['draft']}")
    with st.expander("Model numbers", expanded=ss["preset"] == CUSTOM):
        st.number_input("Target vocab", min_value=1, step=1, key="vocab", on_change=on_model_field)
        st.number_input("Draft vocab", min_value=1, step=1, key="draft_vocab", on_change=on_model_field)
        st.toggle("EAGLE-3 d2t map", key="d2t", on_change=on_model_field,
                  help="needed when the draft vocab is smaller than the target vocab")
        st.number_input("Draft hidden size", min_value=1, step=1, key="hidden", on_change=on_model_field,
                        help="informational: the lm_head GEMM is common to every strategy")
    left, right = st.columns(2)
    left.selectbox("TP size", TP_CHOICES, key="tp", accept_new_options=True, help="type another size if needed")
    right.number_input("Nodes", min_value=1, max_value=1024, step=1, key="nodes")
    st.selectbox("Fabric between nodes", state.FABRICS, key="fabric", disabled=int(ss.get("nodes") or 1) <= 1,
                 help="what joins the nodes (data/presets/fabrics.csv, docs/fabrics.md); the profile's own: "
                      "priced as built (HGX: ib, NVL72: mnnvl). Re-prices the multi-node collectives, as --fabric")
    left.selectbox("Logits dtype", tuple(DTYPES), key="dtype")
    right.number_input("K (draft tokens)", min_value=1, max_value=64, step=1, key="k")
    st.radio("Drafting", DRAFTING, key="drafting", horizontal=True,
             help="serial: K draft calls of B rows; parallel: one call of B*K rows")
    st.selectbox("Engine", ENGINES, key="engine", format_func=ENGINE_LABELS.get,
                 help="what the engine captures in a CUDA graph and where it syncs, per component "
                      "(costmodel/model/engines.py); 'none': every component as Mode says")
    st.radio("Mode", MODES, key="mode", horizontal=True, format_func={"graph": "CUDA graph", "eager": "eager"}.get,
             disabled=ss["engine"] != "none", help="used only with Engine 'none'")
    st.radio("Kernels", IMPLS, key="impl", horizontal=True, help="fused prices the profile's fused-kernel parameters")
    st.number_input("Batch (sequences per decode step)", min_value=1, max_value=BATCH_LIMIT, step=1, key="batch")
    st.select_slider("Batch range for the charts", options=BATCH_STEPS, key="batch_range", value=ss["_batch_range0"])
    st.subheader("Impact (optional)")
    st.number_input("Baseline ITL (ms)", min_value=0.001, step=1.0, format="%.3f", key="itl_ms",
                    placeholder="e.g. 12.5")
    st.number_input("Mean acceptance length (tokens / decode step)", min_value=1.0, step=0.1, format="%.2f",
                    key="acceptance_length", placeholder="e.g. 3.2")

st.title("Local argmax vs full all-gather for TP drafting")
st.caption("Greedy draft token under tensor parallelism: all-gather the full logits (vLLM's default), or take a "
           "local argmax and exchange (value, id) pairs? Numbers from the analytical cost model `costmodel`.")
with st.expander("What the strategies do"):
    st.markdown("\n".join(f"- **{k}**: {v}" for k, v in DESCRIPTIONS.items()))
for warning in ss["_warnings"]:
    st.warning(plain(warning))

try:
    inputs = state.inputs_from_session(ss)
    params = state.to_query_params(inputs)
    if st.query_params.to_dict() != params:
        st.query_params.from_dict(params)
    ev = evaluate(inputs, ss["_uploads"])
    ss["_last_good"] = inputs
except InputError as exc:
    st.error(plain(state.in_dashboard_words(str(exc))))
    try:
        ev = evaluate(ss["_last_good"], ss["_uploads"])
    except InputError:
        st.stop()
    st.caption("Showing the last valid inputs.")

views.verdict(ev)
topk_panel(ev)
placement_panel(ev)
compare_panel(ev)
export_slot = st.container()  # filled after the open tab has drawn its charts
ss["_drawn"] = {}
tabs = st.tabs(TABS, key="tab", on_change="rerun")
renderers = {
    "Batch sweep": lambda: views.sweep_tab(ev),
    "Breakdown": lambda: views.breakdown_tab(ev),
    "Sensitivity": lambda: views.sensitivity_tab(ev),
    "Heatmaps": lambda: views.heatmaps_tab(ev),
    "Calibration": lambda: views.calibration_tab(ev, ss["_measurements"].get(ev.inputs.profile)),
    "Impact": lambda: views.impact_tab(ev),
    "Recommendation": lambda: views.recommendation_tab(ev),
    "Serving A/B": lambda: serving_tab(ev),
}
for name, tab in zip(TABS, tabs):
    if tab.open:  # only the open tab is computed
        with tab:
            renderers[name]()
with export_slot:
    views.export_menu(ev, ss["_drawn"])
freeze_long_lived()  # once per process: full GC passes stop rescanning the profiles and their ensembles
