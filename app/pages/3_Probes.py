"""Probes: the layer curves of finished probe experiments (``probing-lab probe probes/X.toml``), with their
control-task and random-init baselines, several models of the same experiment on one plot; the confusion
matrix and per-label accuracy of a token task; and a form that starts a new run with a progress bar, of an
experiment of ``probes/`` or on the user's own file (a path inside the allowed folders or an upload; its
format and label column chosen from what it holds, the label table shown before the run; the run is
``probing-lab probe --data FILE --format FMT``, and is listed with the user's runs when it is done)."""

import dataclasses
import json
import shutil
import time

import allowed_paths
import lab_ui
import model_choice
import own_file
import streamlit as st

from probing_lab import paths
from probing_lab.analysis import layer_label
from probing_lab.probing import intervals
from probing_lab.probing.experiment import Experiment, run_experiment
from probing_lab.probing.own_data import DEFAULT_TASK, FORMAT_TASKS, quick_experiment
from probing_lab.probing.plots import confusion_figure, layer_curve_figure
from probing_lab.probing.runs import ProbeRun, shown_table

SHIPPED_RESULTS = paths.REPO_ROOT / "probes" / "results"  # the README's numbers, made with the shipped model
USER_RUNS = paths.app_runs_dir()  # the user's data folder, or $PROBING_LAB_RUNS
SOURCES = {
    "Results shipped with the lab": SHIPPED_RESULTS,
    "Your runs (started here)": USER_RUNS,
    "Another folder": None,
}

lab_ui.page(
    "Probes: what each layer encodes",
    shows=(
        "How well a linear probe reads part of speech, syntax or word sense from each layer, against its baselines."
    ),
    tries=(
        "`pos_ewt`: which layer peaks, and how far above the control task and the random-init model? Then "
        "`wsd_coarse`: which layer peaks, and by how much over the most frequent sense?"
    ),
)
st.markdown(
    "A linear probe is trained on each layer's vectors to predict a label (part of speech, dependency relation, "
    "word sense). Read a score against its baselines: the **control task** (every word type gets a fixed random "
    "label, Hewitt & Liang 2019; selectivity = score - control), the **random-init** ELMo of the same shape, and "
    "the **majority label per word type**."
)


def new_run_form() -> None:
    """Start a run on the model chosen on the Model page, with a progress bar: an experiment of probes/
    or a probe on the user's own file."""
    spec = model_choice.current_spec()
    with st.expander("Start a new probe run"):
        if spec.options:
            st.info(
                "Probe runs take a checkpoint directory or the shipped model; convert a released ELMo first "
                "(`probing-lab export`), or run `probing-lab probe` from the command line."
            )
            return
        shipped, own = st.tabs(["An experiment of probes/", "Probe your own file"])
        with shipped:
            experiment_form(spec)
        with own:
            own_file_form(spec)


def measured_time(name: str) -> str:
    """How long the committed run of this experiment took (its metrics.json records it), as a guide."""
    try:
        seconds = json.loads((SHIPPED_RESULTS / name / "metrics.json").read_text(encoding="utf-8"))["seconds"]
    except (OSError, ValueError, KeyError, TypeError):
        return "Extraction and probes take minutes."
    return (
        f"The committed run of {name} (every training sentence, all baselines) took {seconds / 60:.0f} min on the "
        "lab's 2-core machine; fewer sentences or no baselines take less, and features already extracted for "
        "this model are reused."
    )


def experiment_form(spec) -> None:
    """An experiment of probes/, optionally on fewer training sentences and without the slow baselines."""
    files = sorted((paths.REPO_ROOT / "probes").glob("*.toml"))
    names = [f.stem for f in files]
    name = st.selectbox(
        "Experiment", names, index=names.index("pos_ewt") if "pos_ewt" in names else 0, key="new_experiment"
    )
    st.caption(
        f"Model: {spec.label} (change it on the Model page). Results go to `{USER_RUNS}`. " + measured_time(name)
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
        exp = Experiment.load(paths.REPO_ROOT / "probes" / f"{name}.toml")
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
    said_in_words(run, f"Wrote {run.path}. Choose “Your runs” below to see it.")


def said_in_words(run, done: str) -> None:
    """A finished run: where it went and what it shows, each claim from the run's intervals
    (``intervals.run_verdicts``: a layer is called best only when it beats its strongest baseline);
    the small-data warnings as warnings."""
    said = intervals.run_verdicts(run.metrics)
    findings = [line for line in said if not line.startswith("warning: ")]
    st.success(done + ("\n\n" + "\n\n".join(f"- {line}" for line in findings) if findings else ""))
    for line in said:
        if line.startswith("warning: "):
            st.warning(line.removeprefix("warning: ").capitalize())


LABELLED_COLUMNS = ("upos", "xpos", "deprel")  # conllu tasks that probe a column: their label table is that column


def own_file_form(spec) -> None:
    """A probe on the user's own file: the file, its format, the task and (conllu) the label column, the
    label table, then the run (``quick_experiment``, as ``probing-lab probe --data FILE``) with a progress bar.
    Bad input stops here with an error naming the problem; the run itself checks again before the model loads."""
    st.caption(
        "A labelled file of yours, split 80/10/10 by sentence (seed 0). Formats: conllu, tokens "
        "(token<TAB>label), wic (sentence<TAB>index<TAB>label[<TAB>group]), sentences (sentence<TAB>label), "
        "spans (JSON Lines). UTF-8; lines starting with # are comments."
    )
    picked = own_file.pick_file("own")
    if picked is None:
        return
    fmt = own_file.format_choice(picked, "own_format")
    if fmt is None:
        return
    tasks = list(FORMAT_TASKS.get(fmt, ()))
    task = None
    if len(tasks) > 1:
        task = st.selectbox(
            "Task",
            tasks,
            index=tasks.index(DEFAULT_TASK[fmt]) if DEFAULT_TASK.get(fmt) in tasks else 0,
            key="own_task",
            help="token_label probes the chosen label column; upos, xpos, deprel probe those columns; dep_arc "
            "and the structural probes read the HEAD column.",
        )
    label = None
    if fmt == "conllu" and task in (None, "token_label"):
        columns = own_file.summary(picked, fmt, "upos")  # which columns and features the file has
        if columns is None:
            return
        options = list(columns.columns) or ["upos"]
        label = st.selectbox(
            "Label column",
            options,
            index=options.index("upos") if "upos" in options else 0,
            key="own_label",
            format_func=lambda c: f"{c} ({columns.columns.get(c, 0):,} tokens)",
            help="A token without the chosen column or feature is unlabelled and skipped.",
        )
    tree_task = task is not None and task not in ("token_label", *LABELLED_COLUMNS) and not task.startswith("wsd_")
    counted = task if task in LABELLED_COLUMNS else label
    found = own_file.summary(picked, fmt, counted if fmt == "conllu" else None)
    if found is None:
        return
    if tree_task:
        st.caption(f"{found.sentences:,} sentence(s), {found.tokens:,} tokens; {task} probes the HEAD column.")
    else:
        own_file.show_labels(found)
        if found.problem:
            st.error(found.problem.replace(found.path, picked.name) if picked.data is not None else found.problem)
            return
    c1, c2 = st.columns(2)
    limit = c1.number_input(
        "Training sentences (0 = all)",
        0,
        1_000_000,
        0,
        step=500,
        key="own_limit",
        help="A smaller training set gives a quick first look; dev and test stay whole.",
    )
    baselines = c2.checkbox("Random-init baseline and MDL (slower)", True, key="own_baselines")
    st.caption(f"Model: {spec.label} (change it on the Model page). Results go to {USER_RUNS}.")
    if not st.button("Run", key="own_run"):
        return
    run_dir = None
    path = picked.path
    try:
        if picked.data is not None:  # the upload goes into the run's own folder, with the run
            run_dir, path = own_file.stage_upload(picked, USER_RUNS)
        data = quick_experiment(str(path), fmt, label, task)
        exp = Experiment.from_dict(data, where=f"your file {picked.name}")
    except (ValueError, OSError) as e:
        st.error(str(e))
        if run_dir is not None:
            shutil.rmtree(run_dir, ignore_errors=True)
        return
    exp = dataclasses.replace(
        exp,
        max_train_sentences=int(limit),
        random_init=exp.random_init and baselines,
        mdl=exp.mdl and baselines,
    )
    run_dir = run_dir or own_file.new_run_dir(USER_RUNS, exp.name)
    bar = st.progress(0.0, text=f"{picked.name}: reading the file…")
    try:
        run = run_experiment(
            exp,
            model=spec.model,
            model_seed=spec.seed,
            out=run_dir,
            force=picked.data is not None,  # the folder the upload was staged in: a run of its own
            progress=False,
            log=lambda message: None,
            on_progress=lambda fraction, message: bar.progress(fraction, text=f"{picked.name}: {message}"),
        )
    except Exception as e:  # noqa: BLE001 - the file, the split or the model: a message, never a traceback
        known = isinstance(e, (ValueError, OSError))  # the library's own errors say what and where
        st.error(str(e) if known else f"The run on {picked.name} failed: {type(e).__name__}: {e}")
        if picked.data is not None and not (run_dir / "metrics.json").exists():
            shutil.rmtree(run_dir, ignore_errors=True)  # the staged upload of a run that did not happen
        return
    bar.progress(1.0, text=f"{picked.name}: done")
    said_in_words(run, f"Wrote {run.path}. It is shown below, with your runs.")
    # show it below: the results widgets come after this form, so their state may still be set
    st.session_state["results_source"] = next(k for k, v in SOURCES.items() if v == USER_RUNS)
    st.session_state["experiment"] = run.experiment
    st.session_state[lab_ui.key_on("runs", USER_RUNS, run.experiment)] = [str(run.path.relative_to(USER_RUNS))]


if allowed_paths.runs_allowed():
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
        root = allowed_paths.allowed_path(folder)  # confined to $PROBING_LAB_ALLOWED_ROOTS when that is set
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
runs_key = lab_ui.key_on("runs", root, experiment)  # another folder or experiment: its own runs
chosen = st.multiselect(
    "Runs to compare (one line per model)",
    names,
    default=None if runs_key in st.session_state else names[:4],  # a finished own-file run sets it (above)
    key=runs_key,
    format_func=lambda n: f"{n} · {runs[n].model_label}",
)
if not chosen:
    st.warning("Pick at least one run.")
    st.stop()

with lab_ui.friendly_errors("The probe view"):
    selected = [runs[n] for n in chosen]
    st.plotly_chart(layer_curve_figure(selected), key="probe_curve")
    st.dataframe(shown_table(selected), hide_index=True)
    for run in selected:
        said = intervals.run_verdicts(run.metrics)
        if said:
            st.markdown(f"**{run.model_label}**, with 95% intervals over the test {run.metrics.get('unit', 'item')}s:")
            st.markdown("\n".join(f"- {line}" for line in said))
        elif not run.metrics.get("comparisons"):
            st.caption(f"{run.model_label}: a run from before intervals were stored (no predictions.npz): no interval.")
    first = selected[0]
    splits = first.splits if isinstance(first.splits, dict) else {}
    where = ", ".join(f"{role}: {value}" for role, value in splits.items() if value and value != role)
    st.caption(f"Task {first.task} on {first.dataset}" + (f" ({where})" if where else "") + ".")
    below = [
        f"{run.model_label} {layer_label(key)} ({e.score:.3f} < control {e.control_score:.3f})"
        for run in selected
        for key, e in run.layers.items()
        if e.control_score is not None and e.score < e.control_score
    ]
    if below:
        st.warning(
            "Scoring below the control task: " + ", ".join(below) + ". The probe does no better on the real "
            "labels than on random labels per word type: read that layer's score as memorisation, not structure."
        )

    with_confusion = [n for n in chosen if any(e.confusion for e in runs[n].layers.values())]
    if with_confusion:
        st.subheader("Confusion matrix and per-label accuracy (test split)")
        c1, c2 = st.columns(2)
        run_name = c1.selectbox(
            "Run",
            with_confusion,
            key=lab_ui.key_on("confusion_run", root, experiment, *with_confusion),
            format_func=lambda n: f"{n} · {runs[n].model_label}",
        )
        run = runs[run_name]
        keys = [k for k, e in run.layers.items() if e.confusion]
        layer = c2.selectbox(
            "Layer",
            keys,
            index=keys.index("1") if "1" in keys else 0,
            key=lab_ui.key_on("confusion_layer", root, run_name),
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
