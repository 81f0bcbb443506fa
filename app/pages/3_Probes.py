"""Probes: the layer curves of finished probe experiments (``probing-lab probe probes/X.toml``), with their
control-task and random-init baselines, several models of the same experiment on one plot; the confusion
matrix and per-label accuracy of a token task; and a form that starts a new run with a progress bar."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dataclasses
import os
import time

import lab_ui
import streamlit as st

from probing_lab.probing.experiment import Experiment, run_experiment
from probing_lab.probing.plots import confusion_figure, layer_curve_figure
from probing_lab.probing.runs import ProbeRun

SHIPPED_RESULTS = lab_ui.ROOT / "probes" / "results"  # the README's numbers, made with the shipped model
# where `probing-lab probe` writes by default (run from the checkout); $PROBING_LAB_RUNS moves it
USER_RUNS = Path(os.environ.get("PROBING_LAB_RUNS") or lab_ui.WORK_DIR / "runs" / "probes")
SOURCES = {
    "Results shipped with the lab": SHIPPED_RESULTS,
    "Your runs (runs/probes)": USER_RUNS,
    "Another folder": None,
}

lab_ui.page("Probes: what each layer encodes")
st.markdown(
    "A linear probe is trained on each layer's vectors to predict a label (part of speech, dependency relation, "
    "word sense). Read a score against its baselines: the **control task** (every word type gets a fixed random "
    "label, Hewitt & Liang 2019; selectivity = score - control), the **random-init** ELMo of the same shape, and "
    "the **majority label per word type**."
)


def new_run_form() -> None:
    """Start an experiment of probes/ on the model chosen on the Model page, with a progress bar."""
    files = sorted((lab_ui.ROOT / "probes").glob("*.toml"))
    spec = lab_ui.current_spec()
    with st.expander("Start a new probe run"):
        if spec.options:
            st.info(
                "Probe runs take a checkpoint directory or the shipped model; convert a released ELMo first "
                "(`probing-lab export`), or run `probing-lab probe` from the command line."
            )
            return
        name = st.selectbox("Experiment", [f.stem for f in files], key="new_experiment")
        st.caption(
            f"Model: {spec.label} (change it on the Model page). Results go to {USER_RUNS}. "
            "Extraction and probes take minutes (pos_ewt: about 7 on two cores)."
        )
        c1, c2 = st.columns(2)
        limit = c1.number_input(
            "Training sentences (0 = all)",
            0,
            100_000,
            0,
            step=500,
            key="new_limit",
            help="A smaller training set gives a quick first look; dev and test stay whole.",
        )
        baselines = c2.checkbox("Random-init baseline and MDL (slower)", True, key="new_baselines")
        if not st.button("Run", key="start_run"):
            return
        try:
            exp = Experiment.load(lab_ui.ROOT / "probes" / f"{name}.toml")
        except ValueError as e:
            st.error(str(e))
            return
        if limit or not baselines:  # a changed experiment: the run records it as experiment.json
            exp = dataclasses.replace(
                exp,
                max_train_sentences=int(limit) or exp.max_train_sentences,
                random_init=exp.random_init and baselines,
                mdl=exp.mdl and baselines,
                source=None,
            )
        bar = st.progress(0.0, text=f"{name}: extracting features…")
        try:
            run = run_experiment(
                exp,
                model=spec.model,
                model_seed=spec.seed,  # a random:PRESET model is the one the Model page shows
                out=USER_RUNS / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}",
                progress=False,
                log=lambda message: None,
                on_progress=lambda fraction, message: bar.progress(fraction, text=f"{name}: {message}"),
            )
        except (ValueError, FileNotFoundError) as e:  # a missing dataset or a bad model: the message says why
            st.error(str(e))
            return
        bar.progress(1.0, text=f"{name}: done")
        best = max(run.layers, key=lambda k: run.layers[k].score)
        st.success(
            f"Wrote {run.path}: best layer {lab_ui.LAYER_HELP.get(best, best).split(':')[0]} "
            f"({run.layers[best].score:.3f}). Choose “Your runs” above to see it."
        )


if lab_ui.runs_allowed():
    new_run_form()
else:
    st.info(
        "Starting probe runs is turned off on this server ($PROBING_LAB_NO_RUNS / `probing-lab app --no-runs`); "
        "the results of finished runs are shown below."
    )
source = st.radio("Results", list(SOURCES), horizontal=True, key="results_source")
if SOURCES[source] is None:
    folder = st.text_input(
        "Run folder",
        str(USER_RUNS),
        key="run_dir",
        help="Where `probing-lab probe` wrote its run directories (each has a metrics.json).",
    )
    try:
        root = lab_ui.allowed_path(folder)  # confined to $PROBING_LAB_ALLOWED_ROOTS when that is set
    except ValueError as e:
        st.error(str(e))
        st.stop()
else:
    root = SOURCES[source]
if not root.is_dir():
    st.warning(f"No folder {root}. Run an experiment first, e.g. `probing-lab probe probes/pos_ewt.toml`.")
    st.stop()

runs, broken = {}, []
for path in sorted(root.glob("*/metrics.json")) + sorted(root.glob("*/*/metrics.json")):
    try:
        runs[str(path.parent.relative_to(root))] = ProbeRun.load(path.parent)
    except Exception as e:  # noqa: BLE001 - a half-written or foreign file must not hide the others
        broken.append(f"{path}: {e}")
if broken:
    st.warning("Skipped unreadable runs:\n\n" + "\n\n".join(broken[:10]))
if not runs:
    st.info(f"No runs under {root} yet. Run e.g. `probing-lab probe probes/pos_ewt.toml --model random:cpu-small`.")
    st.stop()

by_experiment = {}
for name, run in runs.items():
    by_experiment.setdefault(run.experiment, []).append(name)

experiments = sorted(by_experiment)
experiment = st.selectbox(
    "Experiment",
    experiments,
    index=experiments.index("pos_ewt") if "pos_ewt" in experiments else 0,  # the clearest result first
    key="experiment",
    format_func=lambda e: f"{e} ({len(by_experiment[e])} run(s))",
)
names = by_experiment[experiment]
if st.session_state.get("runs_of") != (str(root), experiment):  # another folder or experiment: its own runs
    st.session_state["runs_of"] = (str(root), experiment)
    st.session_state.pop("runs", None)
    st.session_state.pop("confusion_run", None)
chosen = st.multiselect(
    "Runs to compare (one line per model)",
    names,
    default=names[:4],
    key="runs",
    format_func=lambda n: f"{n} · {runs[n].model}",
)
if not chosen:
    st.warning("Pick at least one run.")
    st.stop()

with lab_ui.friendly_errors("The probe view"):
    selected = [runs[n] for n in chosen]
    st.plotly_chart(layer_curve_figure(selected), key="probe_curve")
    st.dataframe([row for run in selected for row in run.rows()], hide_index=True)
    first = selected[0]
    st.caption(f"task {first.task} on {first.dataset} · splits {first.splits}")

    with_confusion = [n for n in chosen if any(e.confusion for e in runs[n].layers.values())]
    if with_confusion:
        st.subheader("Confusion matrix and per-label accuracy (test split)")
        c1, c2 = st.columns(2)
        run_name = c1.selectbox(
            "Run", with_confusion, key="confusion_run", format_func=lambda n: f"{n} · {runs[n].model}"
        )
        run = runs[run_name]
        keys = [k for k, e in run.layers.items() if e.confusion]
        layer = c2.selectbox(
            "Layer",
            keys,
            index=keys.index("1") if "1" in keys else 0,
            key="confusion_layer",
            format_func=lambda k: lab_ui.LAYER_HELP.get(k, k).split(":")[0],
        )
        st.plotly_chart(confusion_figure(run, layer), key="confusion")
        st.dataframe(run.per_label(layer), hide_index=True)
        st.caption(
            "Accuracy = share of the label's test tokens the probe gets right (recall); precision = share "
            "of the tokens predicted as the label that have it."
        )
    st.markdown(
        "**What to expect** (docs/published-results.md): POS and syntax peak in L1 "
        "(Peters et al.: POS 97.3 with L1, 96.8 with L2; "
        "Liu et al.: EWT POS 95.6 at the best layer); word sense peaks in L2 (WSD F1 69.0 vs 67.4); L0 and the "
        "random-init model are the floor a trained layer must clear, and L2 is usually the more selective layer."
    )
