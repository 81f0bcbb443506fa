"""Probes: the layer curves of finished probe experiments (``probing-lab probe probes/X.toml``), with their
control-task and random-init baselines, several models of the same experiment on one plot."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import streamlit as st

import lab_ui
from probing_lab.probing.experiment import load_metrics, metrics_rows
from probing_lab.probing.plots import layer_curve_figure

DEFAULT_DIR = lab_ui.ROOT / "runs" / "probes"

lab_ui.page("Probes: what each layer encodes")
st.markdown(
    "A linear probe is trained on each layer's vectors to predict a label (part of speech, dependency relation, "
    "word sense). Read a score against its baselines: the **control task** (every word type gets a fixed random "
    "label, Hewitt & Liang 2019; selectivity = score - control), the **random-init** ELMo of the same shape, and "
    "the **majority label per word type**."
)

folder = st.text_input("Run folder", str(DEFAULT_DIR), key="run_dir",
                       help="Where `probing-lab probe` wrote its run directories (each has a metrics.json).")
root = Path(folder).expanduser()
if not root.is_dir():
    st.warning(f"No folder {root}. Run an experiment first, e.g. `probing-lab probe probes/pos_ewt.toml`.")
    st.stop()

runs, broken = {}, []
for path in sorted(root.glob("*/metrics.json")) + sorted(root.glob("*/*/metrics.json")):
    try:
        runs[str(path.parent.relative_to(root))] = load_metrics(path.parent)
    except Exception as e:  # noqa: BLE001 - a half-written or foreign file must not hide the others
        broken.append(f"{path}: {e}")
if broken:
    st.warning("Skipped unreadable runs:\n\n" + "\n\n".join(broken[:10]))
if not runs:
    st.info(f"No runs under {root} yet. Run e.g. `probing-lab probe probes/pos_ewt.toml --model random:cpu-small`.")
    st.stop()

by_experiment = {}
for name, m in runs.items():
    by_experiment.setdefault(m.get("experiment", "?"), []).append(name)

experiment = st.selectbox("Experiment", sorted(by_experiment), key="experiment",
                          format_func=lambda e: f"{e} ({len(by_experiment[e])} run(s))")
names = by_experiment[experiment]
chosen = st.multiselect("Runs to compare (one line per model)", names, default=names[:4], key="runs",
                        format_func=lambda n: f"{n} · {runs[n].get('model', '?')}")
if not chosen:
    st.warning("Pick at least one run.")
    st.stop()

with lab_ui.friendly_errors("The probe view"):
    selected = [runs[n] for n in chosen]
    st.plotly_chart(layer_curve_figure(selected), key="probe_curve")
    rows = [row for m in selected for row in metrics_rows(m)]
    st.dataframe(rows, hide_index=True)
    first = selected[0]
    st.caption(f"task {first.get('task')} on {first.get('dataset')} · splits {first.get('splits')}")
    st.markdown(
        "**What to expect** (DESIGN §4): POS and syntax peak in L1 (Peters et al.: POS 97.3 with L1, 96.8 with L2; "
        "Liu et al.: EWT POS 95.6 at the best layer); word sense peaks in L2 (WSD F1 69.0 vs 67.4); L0 and the "
        "random-init model are the floor a trained layer must clear, and L2 is usually the more selective layer."
    )
