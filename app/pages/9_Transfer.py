"""Transfer: what ELMo's layers add to a task model (``probing-lab transfer transfer/X.toml``): the
sample-efficiency curve by input, the learned layer weights per task (Peters et al. 2018, figure 2),
elmo's relative error reduction over static, and the linear probes of the same layers next to the
weights (decodable vs useful). The data shaping is ``probing_lab.transfer.report``, the figures
``probing_lab.transfer.plots``; runs are found under ``transfer/results/`` (committed) and
``runs/transfer/`` (or the folders of ``$PROBING_LAB_TRANSFER_RUNS``)."""

from pathlib import Path

import lab_ui
import streamlit as st

from probing_lab.transfer import report
from probing_lab.transfer.plots import layer_weights_figure, probe_scores_figure, sample_efficiency_figure

COMMAND = "probing-lab transfer transfer/chunking_conll2000.toml"

lab_ui.page(
    "Transfer: what ELMo adds to a task model",
    shows=(
        "What ELMo's layers add to a task model (chunking, entity mentions, UPOS), by training-set size, with"
        " the learned layer weights."
    ),
    tries=(
        "compare the gap between ELMo and the static embedding at 1% and at 100% of the data, and the layer "
        "weights with the probes."
    ),
)
st.markdown(
    "A small BiLSTM tagger is trained on a task (chunking, entity mentions, UPOS) with different inputs: a static "
    "word embedding alone, or next to ELMo's learned scalar mix of L0-L2, its top layer, its type layer, or the "
    "same mix over a random-init ELMo; each on 1%, 10% and 100% of the training sentences, with several seeds. "
    "The gap at 1% against the gap at 100% is the paper's sample-efficiency claim."
)


@st.cache_data(show_spinner="Reading the transfer runs…", max_entries=16)
def load_runs(roots: tuple, signature: tuple):
    """Keyed on the folders and each metrics.json's path, mtime and size (``report.signature``)."""
    return report.find_runs({name: Path(path) for name, path in roots})


@st.cache_data(show_spinner="Reading the probe results of the same layers…", max_entries=16)
def load_probes(tasks: tuple, signature: tuple):
    out, problems = {}, []
    for task in tasks:
        try:
            out[task] = report.probe_scores(task)
        except (ValueError, FileNotFoundError) as e:
            out[task] = None
            problems.append(str(e))
    return out, problems


def probe_signature(tasks) -> tuple:
    sig = []
    for task in tasks:
        directory = report.probe_dir(task)
        path = directory / "metrics.json" if directory else None
        if path is not None and path.is_file():
            stat = path.stat()
            sig.append((task, str(path), stat.st_mtime_ns, stat.st_size))
        else:
            sig.append((task, str(path), None, None))
    return tuple(sig)


roots = report.run_roots()
runs, broken = load_runs(tuple((k, str(v)) for k, v in roots.items()), report.signature(roots))
if broken:
    st.warning("Skipped unreadable transfer runs:\n\n" + "\n\n".join(broken[:10]))
where = ", ".join(f"{path} ({name})" for name, path in roots.items())
if not runs:
    st.info(
        f"No transfer runs yet (looked in {where}). Make one with `{COMMAND}` (about 45 minutes on two cores; "
        "interrupted, it resumes with the same `--out`); it writes `runs/transfer/<name>-<time>/`, which this page "
        "then shows."
    )
    st.stop()

by_label = {run.label: run for run in runs}
default = [run.label for run in report.newest_per_experiment(runs)]
chosen = st.multiselect(
    "Transfer runs (one panel each)",
    list(by_label),
    default=default,
    key="transfer_runs",
    help="The newest run of each experiment is chosen first. Runs come from " + where + ".",
)
if not chosen:
    st.warning("Pick at least one run.")
    st.stop()
selected = [by_label[label] for label in chosen]

with lab_ui.friendly_errors("The transfer view"):
    st.subheader("Sample efficiency")
    st.plotly_chart(sample_efficiency_figure(selected), key="transfer_curve")
    seeds = sorted({len({c["seed"] for c in run.cells}) for run in selected})
    st.caption(
        f"Each point is the mean test score over {' or '.join(map(str, seeds))} seed(s); error bars are ±1 standard "
        "deviation across the seeds. Every ELMo input is concatenated with the static embedding; the random-init "
        "ELMo is the same scalar mix over an untrained model of the same shape (the control)."
    )

    st.subheader("Relative error reduction: ELMo scalar mix over static embedding")
    per_run = [(run, report.error_reduction_rows(run)) for run in selected]
    rows = [row for _, mine in per_run for row in mine]
    if rows:
        st.dataframe(rows, hide_index=True)
        for run, mine in per_run:  # the claim checked per task, from these numbers
            if (
                len(mine) < 2
                or mine[0]["relative error reduction"] is None
                or mine[-1]["relative error reduction"] is None
            ):
                continue
            small, full = mine[0], mine[-1]
            efficient = small["gain (points)"] > full["gain (points)"]
            st.markdown(
                f"**{run.experiment}**: ELMo adds {small['gain (points)']:+.1f} points with {small['training data']} "
                f"and {full['gain (points)']:+.1f} with {full['training data']}: "
                + (
                    "more with less data, the sample-efficiency pattern."
                    if efficient
                    else "**not** the sample-efficiency pattern: the gap does not shrink as data grows."
                )
            )
        st.caption(
            "(error of static - error of ELMo) / error of static, with error = 1 - mean test score; "
            "Peters et al. report this per task. A larger reduction at 1% than at 100% is the sample-efficiency claim."
        )
    else:
        st.info("These runs do not train both the static embedding and the ELMo scalar mix.")

    st.subheader("Learned layer weights, and probes of the same layers: useful vs decodable")
    tasks = tuple(sorted({run.task for run in selected}))
    probes, problems = load_probes(tasks, probe_signature(tasks))
    for problem in problems:
        st.warning(f"Probe results skipped: {problem}")
    left, right = st.columns(2)
    if any(report.layer_weights(run) for run in selected):
        left.plotly_chart(layer_weights_figure(selected), key="transfer_weights")
    else:
        left.info("These runs have no ELMo scalar mix, so no learned layer weights.")
    if any(probes.get(run.task) for run in selected):
        right.plotly_chart(probe_scores_figure(selected, probes), key="transfer_probes")
    else:
        right.info(
            "No probe results for these tasks in this checkout (chunking: probes/results/chunks_conll2000, "
            "entities: entities_gum, upos: pos_ewt)."
        )
    st.dataframe(report.decodable_vs_useful(selected, probes), hide_index=True)
    other = sorted(
        {
            f"{run.experiment} ({run.model})"
            for run in selected
            if probes.get(run.task) and probes[run.task]["model"] != run.model
        }
    )
    if other:
        st.caption(
            f"The probes were run with {', '.join(sorted({p['model'] for p in probes.values() if p}))}; "
            f"the transfer runs {', '.join(other)} used another model, so their layers are not the same vectors."
        )
    largest = sorted({report.fraction_label(max(run.fractions)) for run in selected})
    st.caption(
        f"Left: softmax(s) of the ELMo scalar mix the tagger learned with {' / '.join(largest)} of the training data, "
        "mean over the seeds (error bars ±1 std); dotted line: uniform weights. Right: the linear probe's test score "
        "per layer on the same kind of labels. A layer can be decodable (a high probe score) without being the "
        "one the task model leans on, and the other way round."
    )
