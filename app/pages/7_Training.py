"""Training: how each layer's knowledge emerges while the biLM learns. At every evaluation of a training
run, a quick word-sense metric and a quick part-of-speech probe per layer, next to the heldout
perplexity, against the tokens the model has read (Saphra & Lopez 2019: syntax settles early)."""

import allowed_paths
import lab_ui
import streamlit as st
from plotly.subplots import make_subplots

from probing_lab import paths
from probing_lab.probing.curves import read_curves, read_stages

COLOURS = {"0": "#7f7f7f", "1": "#1f77b4", "2": "#ff7f0e"}
DASHES = ["solid", "dash", "dot", "dashdot"]

lab_ui.page(
    "Training: how the layers learn",
    shows=(
        "How each layer's knowledge emerged while the biLM learned: heldout perplexity and quick sense and "
        "part-of-speech probes against tokens read."
    ),
    tries="find the point where part of speech stops improving, and compare it with word sense.",
)
st.markdown(
    "Every few hundred steps the trainer measured the model on held-out text and on two quick probes, "
    "**word sense** (nearest sense centroid on CoarseWSD-20, its train set split in halves) and **part of "
    "speech** (a linear probe on 3,000 EWT train sentences, scored on EWT dev), for each layer. "
    "The curves show when each kind of knowledge appears. `probing-lab curves RUN --png F` draws the same "
    "from any run; `probing-lab probe EXPERIMENT --snapshots RUN` runs a full experiment on a run's snapshots."
)

STAGES = paths.REPO_ROOT / "docs" / "curves" / "stages.json"  # which runs, one after another, made a model

staged = {}  # a model trained in stages: its runs end to end on one token axis (the model card's totals)
if STAGES.is_file():
    try:
        staged = {f"{name}: all stages": records for name, records in read_stages(STAGES).items()}
    except (OSError, ValueError) as e:
        st.warning(str(e))
files = {}  # one entry per distinct curves file (the shipped model's curves are a copy of its last stage's)
for directory, name in ((paths.SHIPPED_MODEL_DIR, "shipped model"), (paths.EARLY_MODEL_DIR, "early snapshot")):
    if (directory / "curves.jsonl").is_file():
        files[f"{name}'s last stage ({directory.name}/curves.jsonl)"] = directory / "curves.jsonl"
for path in sorted((paths.REPO_ROOT / "docs" / "curves").glob("*.jsonl")):
    if not any(path.read_bytes() == known.read_bytes() for known in files.values()):
        files[f"one run: {path.stem}"] = path
own = st.text_input("Also show a run directory (its curves.jsonl)", "", key="curves_run")
if own.strip():
    try:
        files[f"run: {own.strip()}"] = allowed_paths.allowed_path(own)
    except ValueError as e:
        st.error(str(e))
sources = {**staged, **files}
if not sources:
    st.info("No learning curves in this checkout (docs/curves/ is empty).")
    st.stop()
chosen = st.multiselect("Runs", list(sources), default=list(sources)[:1], key="curves_runs")
if not chosen:
    st.warning("Pick at least one run.")
    st.stop()

runs, problems = {}, []
for name in chosen:
    try:
        runs[name] = sources[name] if name in staged else read_curves(sources[name])
    except (OSError, ValueError, KeyError) as e:
        problems.append(f"{name}: {e}")
for p in problems:
    st.warning(p)
if not runs:
    st.stop()

fig = make_subplots(
    rows=1,
    cols=3,
    subplot_titles=("heldout perplexity (log scale)", "word sense: centroid accuracy", "part of speech: probe"),
)
mfs = None
for (name, records), dash in zip(runs.items(), DASHES):
    x = [r["tokens_seen"] / 1e6 for r in records]
    fig.add_scatter(
        x=x, y=[r["heldout"]["perplexity"] for r in records], name=f"{name}", line={"dash": dash}, row=1, col=1
    )
    for col, metric in ((2, "wsd"), (3, "upos")):
        for layer in sorted({k for r in records for k in r.get(metric, {})}):
            fig.add_scatter(
                x=x,
                y=[r.get(metric, {}).get(layer) for r in records],
                name=f"L{layer} · {name}",
                line={"dash": dash, "color": COLOURS.get(layer)},
                legendgroup=f"L{layer}",
                showlegend=col == 2,
                row=1,
                col=col,
            )
    mfs = mfs or next((r["wsd_mfs"] for r in records if "wsd_mfs" in r), None)
boundaries = {}  # where a stage starts: tokens read -> stage
for records in runs.values():
    for before, r in zip(records, records[1:]):
        if r.get("stage", 0) != before.get("stage", 0):
            boundaries[r["tokens_seen"] / 1e6] = r["stage"]
for x, stage in sorted(boundaries.items()):
    fig.add_vline(x=x, line_dash="dot", line_color="grey")
    fig.add_annotation(
        x=x, y=1, yref="paper", text=f"stage {stage}: new corpus and heldout", showarrow=False, xanchor="left"
    )
if mfs is not None:
    fig.add_hline(y=mfs, line_dash="dashdot", line_color="black", annotation_text="most frequent sense", row=1, col=2)
fig.update_yaxes(type="log", row=1, col=1)
fig.update_xaxes(title_text="tokens read, all stages (millions)")
fig.update_layout(template="plotly_white", height=460, legend={"font": {"size": 10}})
st.plotly_chart(fig, key="curves")

rows = []
for name, records in runs.items():
    for r in records:
        row = {
            "run": name,
            "stage": r.get("stage", 0),
            "step": r["step"],
            "tokens (M)": round(r["tokens_seen"] / 1e6, 2),
        }
        row["perplexity"] = round(r["heldout"]["perplexity"], 1)
        row.update({f"WSD L{k}": round(v, 3) for k, v in sorted(r.get("wsd", {}).items())})
        row.update({f"UPOS L{k}": round(v, 3) for k, v in sorted(r.get("upos", {}).items())})
        rows.append(row)
st.dataframe(rows, hide_index=True)
if staged:
    st.caption(
        "A model trained in stages is drawn end to end: each stage's tokens and steps continue from the "
        "stage before (the model card's totals). Each stage measured perplexity on its own corpus's heldout "
        "text (20,480 tokens per evaluation), so the line jumps where the heldout changes, at the same model; "
        "the model card's perplexity is on the whole heldout file of the last stage."
    )
st.caption(
    "L0 is the word-type layer: it cannot tell senses apart, so its sense score stays near what a type "
    "can do. A layer's sense score above the most-frequent-sense line is knowledge from context."
)
