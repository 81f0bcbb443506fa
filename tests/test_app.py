"""The Streamlit app, page by page, with streamlit.testing's AppTest (no browser): set the widgets,
check what comes out, and that bad input gives a message, never an exception.

A tiny random-init model (``random:cpu-tiny`` via $PROBING_LAB_MODEL) keeps every page fast."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from conftest import markdown_table, ok, texts, widget  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app"
PAGES = {
    "home": APP / "Tour.py",
    "polysemy": APP / "pages" / "1_Polysemy.py",
    "clustering": APP / "pages" / "2_Layer_clustering.py",
    "probes": APP / "pages" / "3_Probes.py",
    "explorer": APP / "pages" / "4_Sentence_explorer.py",
    "model": APP / "pages" / "8_Model.py",
    "compare": APP / "pages" / "6_Compare.py",
    "training": APP / "pages" / "7_Training.py",
    "lm": APP / "pages" / "5_Language_model.py",
    "transfer": APP / "pages" / "9_Transfer.py",
    "causal": APP / "pages" / "10_Causal.py",
}
TIMEOUT = 180
sys.path.insert(0, str(APP))


@pytest.fixture(autouse=True)
def tiny_model(monkeypatch):
    monkeypatch.setenv("PROBING_LAB_MODEL", "random:cpu-tiny")


def run(page: str) -> AppTest:
    at = AppTest.from_file(str(PAGES[page]), default_timeout=TIMEOUT)
    at.run()
    return at


def charts(at: AppTest) -> list:
    return at.get("plotly_chart")


def frame(at: AppTest, i: int = 0):
    return at.dataframe[i].value


def have(*parts: str) -> bool:
    from probing_lab.datasets import resolve_data_dir

    root, _ = resolve_data_dir()
    return root is not None and root.joinpath(*parts).exists()


needs_ewt = pytest.mark.skipif(
    not have("ud-english-ewt", "en_ewt-ud-dev.conllu"), reason="UD English-EWT not in the data directory"
)
needs_coarsewsd = pytest.mark.skipif(
    not have("wsd", "CoarseWSD-20", "bass"), reason="CoarseWSD-20 not in the data directory"
)


# --- helpers without a page -------------------------------------------------------------------


def test_limit_text_and_default_model(monkeypatch):
    import lab_ui
    import model_choice

    assert lab_ui.limit_text("short") == ("short", None)
    cut, note = lab_ui.limit_text("word " * 3000, 100)
    assert len(cut) <= 100 and not cut.endswith(" wo") and "15,000 characters" in note
    assert model_choice.default_spec() == (model_choice.ModelSpec(model="random:cpu-tiny"), None)
    monkeypatch.delenv("PROBING_LAB_MODEL")
    spec, note = model_choice.default_spec()
    from probing_lab.model_loading import shipped_model_dir

    if shipped_model_dir() is None:
        assert spec.model == model_choice.FALLBACK_MODEL and "randomly initialised" in note
    else:
        assert spec == model_choice.ModelSpec() and note is None


# --- Tour -------------------------------------------------------------------------------------


def test_home_tour_bank_example():
    at = ok(run("home"))
    table = markdown_table(at)
    table[table.columns[1:]] = table[table.columns[1:]].astype(float)
    assert list(table["layer"]) == ["L0", "L1", "L2", "mean"]
    assert table["A·B same sense"][0] == pytest.approx(1.0) and table["A·C / B·C different senses"][0] == pytest.approx(
        1.0
    )
    assert table["A·C / B·C different senses"][2] < 0.9999  # L2 depends on the context
    assert len(charts(at)) == 1 and not at.error and not at.warning
    assert "random:cpu-tiny" in texts(at.markdown)
    # the chart's numbers as text too: the word's vector, the bag of context, random init, chance
    shown = markdown_table(at, 1).set_index("")
    bars = {trace["name"]: trace["y"] for trace in json.loads(charts(at)[0].proto.spec)["data"]}
    for name, values in bars.items():
        assert [float(v) for v in shown.loc[name, ["L0", "L1", "L2"]]] == pytest.approx(values, abs=0.0005)
    assert 0.4 < float(shown.loc["chance", "L0"]) < 0.6  # 16 sentences, half of each sense, one left out


def test_home_without_a_model_choice_says_what_it_shows(monkeypatch):
    from probing_lab.model_loading import shipped_model_dir

    monkeypatch.delenv("PROBING_LAB_MODEL")
    at = ok(run("home"))
    if shipped_model_dir() is None:
        assert "randomly initialised" in texts(at.warning)
    assert len(charts(at)) == 1
    if shipped_model_dir() is not None:  # the lab's own model: a verdict measured on 16 sentences, and its card
        table = markdown_table(at)
        table[table.columns[1:]] = table[table.columns[1:]].astype(float)
        assert list(table["gap (same − different)"]) == pytest.approx(
            list(table["A·B same sense"] - table["A·C / B·C different senses"]), abs=2e-4
        )
        verdict = next(t for t in texts(at.markdown).split("\n") if "**Verdict.**" in t)
        assert (
            "(the higher of the upper layers)" in verdict and "chance by" in verdict and "random-init model" in verdict
        )
        card = dict(zip(markdown_table(at, 2)[""], markdown_table(at, 2)["value"]))
        assert card["name"] == "elmo-lab" and "/" in card["heldout perplexity (forward / backward)"]


# --- Polysemy ---------------------------------------------------------------------------------


def test_polysemy_builtin_bank():
    at = ok(run("polysemy"))
    table = markdown_table(at)
    assert list(table["layer"]) == ["L0", "L1", "L2", "mean"]
    l0 = table.iloc[0]
    assert l0["self-similarity"] == "1.000" and l0["silhouette (cosine)"] in ("0.000", "-0.000")
    assert l0["1-NN sense accuracy (LOO)"] == l0["chance"]
    assert table.iloc[2]["self-similarity"] != "1.000"
    assert len(charts(at)) == 2 and "16 occurrences, 2 senses" in texts(at.subheader)  # maps, heatmaps
    assert "Why L0 collapses" in texts(at.markdown)
    # the sense baselines: the word's own vector against the bag of context and a random-init model
    baselines = markdown_table(at, 1).set_index("layer")
    assert list(baselines.columns[:6]) == [
        "1-NN: token",
        "1-NN: bag of context",
        "1-NN: random-init token",
        "linear (CV): token",
        "linear (CV): bag of context",
        "linear (CV): random-init token",
    ]
    assert "(the higher of the upper layers)" in texts(at.markdown)
    assert baselines.loc["L0", "1-NN: token"] == l0["chance"]  # one vector per spelling: chance
    assert baselines.loc["L0", "1-NN: bag of context"] != l0["chance"]  # the other words differ
    assert baselines.loc["L0", "chance (1-NN) / majority"] == f"{l0['chance']} / 0.500"
    # word2vec: one vector per word form, so its token row is at chance like L0's; its bag of context is not
    w2v = baselines.loc["word2vec (static)"]
    chance = w2v["chance (1-NN) / majority"].split(" / ")[0]
    assert w2v["1-NN: token"] == chance and w2v["1-NN: bag of context"] != chance
    assert w2v["1-NN: random-init token"] == "n/a"
    at.toggle(key="poly_supervised_on").set_value(True).run()  # the supervised view, drawn when asked
    assert len(charts(ok(at))) == 3
    assert "out-of-fold per layer" in str(charts(at)[1].proto.spec) and "CV accuracy" in str(charts(at)[1].proto.spec)
    at.radio(key="poly_method").set_value("t-SNE").run()
    assert len(charts(ok(at))) == 3 and "TSNE per layer" in str(charts(at)[0].proto.spec)
    at.checkbox(key="poly_halves").check().run()
    halves = markdown_table(ok(at))
    assert list(halves["layer"]) == ["L0", "L1", "L1 forward", "L1 backward", "L2", "L2 forward", "L2 backward", "mean"]


def test_polysemy_fits_its_classifiers_once_per_example(monkeypatch):
    """A class on one example shares its cross-validated classifiers (most of the page's CPU), and the
    main table, which shows none, fits none."""
    import streamlit as st

    from probing_lab.analysis import geometry
    from probing_lab.paths import WORD2VEC_DIR

    st.cache_data.clear()  # earlier tests drew these examples already
    calls = []
    fit = geometry.linear_cv_accuracy
    monkeypatch.setattr(geometry, "linear_cv_accuracy", lambda *a, **k: calls.append(1) or fit(*a, **k))
    lines = [f"I paid {k} coins into the bank . | money" for k in range(3)]
    typed = "\n".join(lines + [f"We sat on the river bank at {k} . | river" for k in range(2)])
    # per example: 4 layer rows x (token, bag of context, random-init token), and word2vec's 2 rows
    # (its layer and mean) x (token, bag of context); the main table would add 4 (one per row)
    per_example = 3 * 4 + (2 * 2 if WORD2VEC_DIR.is_dir() else 0)
    counts = []
    for student in range(2):
        at = run("polysemy")  # the built-in bank set
        counts.append(len(calls))
        at.radio(key="source").set_value("Type your own").run()  # the typed default
        counts.append(len(calls))
        at.text_area(key="typed").set_value(typed).run()  # the student's own five sentences
        counts.append(len(calls))
        ok(at)
        if student == 0:
            first = markdown_table(at, 1)
    assert counts == [per_example, 2 * per_example] + [3 * per_example] * 4  # the second student fits nothing
    assert markdown_table(at, 1).equals(first)


def test_polysemy_builds_each_figure_once_per_example(monkeypatch):
    """The maps and heatmaps of one example are built once and shared (a second student rebuilds
    none); another example, or another projection, gets its own figure."""
    import figures
    import streamlit as st

    st.cache_resource.clear()
    built = []
    for name in ("projection_grid", "cosine_heatmaps"):
        make = getattr(figures, name)
        monkeypatch.setattr(figures, name, lambda *a, _f=make, _n=name, **k: built.append(_n) or _f(*a, **k))
    lines = [f"I paid {k} coins into the bank . | money" for k in range(3)] + ["The river bank . | river"] * 2
    typed = "\n".join(lines)
    counts, specs = [], []
    for _ in range(2):  # two students
        at = run("polysemy")
        at.radio(key="source").set_value("Type your own").run()
        at.text_area(key="typed").set_value(typed).run()
        ok(at)
        counts.append(len(built))
        specs.append([chart.proto.spec for chart in charts(at)])
    per_example = 2  # the map and the heatmaps (the supervised view is drawn when asked)
    assert counts == [3 * per_example, 3 * per_example]  # bank set, typed default, own text; then none
    assert specs[0] == specs[1]
    assert "coins" in specs[1][0]  # the own text's map, not the default's
    at.radio(key="poly_method").set_value("t-SNE").run()
    ok(at)
    assert built[3 * per_example :] == ["projection_grid"]  # only the map changes with the projection
    at.toggle(key="poly_supervised_on").set_value(True).run()
    assert len(charts(ok(at))) == 3 and built[3 * per_example + 1 :] == ["projection_grid"]


def test_polysemy_shipped_model_separates_the_bank_senses_above_l0(monkeypatch):
    from probing_lab.model_loading import shipped_model_dir

    if shipped_model_dir() is None:
        pytest.skip("the shipped model is not in this checkout")
    monkeypatch.delenv("PROBING_LAB_MODEL")
    table = markdown_table(ok(run("polysemy"))).set_index("layer")
    chance = float(table.loc["L0", "chance"])
    assert float(table.loc["L0", "1-NN sense accuracy (LOO)"]) == pytest.approx(chance)  # one vector per spelling
    for layer in ("L1", "L2"):  # the trained layers pull the 8 money and the 8 river contexts apart
        assert float(table.loc[layer, "silhouette (cosine)"]) > 0.1
    # and the best of them tells them apart (shipped model: L1 0.81, L2 0.75, chance 0.47; 1 context = 0.06)
    assert max(float(table.loc[layer, "1-NN sense accuracy (LOO)"]) for layer in ("L1", "L2")) > chance + 0.15


def test_polysemy_typed_sentences_with_a_missing_target():
    at = run("polysemy")
    at.radio(key="source").set_value("Type your own").run()
    at.text_area(key="typed").input(
        "The bank closed. | money\nNo target here. | money\nThe river [bank] flooded. | river\n"
        "Banks lend money. | money\nWe sat on the bank. | river"
    ).run()
    ok(at)
    assert "1 sentence(s) do not contain “bank”" in texts(at.warning) and "line 2" in texts(at.warning)
    assert "4 occurrences, 2 senses" in texts(at.subheader)
    assert len(charts(at)) == 2


def test_polysemy_bad_input_gives_messages():
    at = run("polysemy")
    at.radio(key="source").set_value("Type your own").run()
    at.text_area(key="typed").input("   \n  ").run()
    assert "Type at least two sentences" in texts(ok(at).warning) and not charts(at)
    at.text_area(key="typed").input("The cat sat.\nThe dog ran.").run()
    assert "none of the 2 sentences contains the word 'bank'" in texts(ok(at).error)
    at.text_area(key="typed").input("The bank closed.\nThe cat sat.").run()
    assert "only one sentence" in texts(ok(at).warning)
    at.text_input(key="target").input("").run()
    assert "Give a target word" in texts(ok(at).warning)


def test_polysemy_unlabelled_and_long_text():
    at = run("polysemy")
    at.radio(key="source").set_value("Type your own").run()
    long = "\n".join(f"Sentence {i} mentions the bank near the water." for i in range(400))  # > 5000 characters
    at.text_area(key="typed").input(long).run()
    ok(at)
    assert "only the first" in texts(at.info)
    assert "Without at least two sense labels" in texts(at.info)
    assert "self-similarity" in markdown_table(at).columns and "silhouette (cosine)" not in markdown_table(at).columns


@needs_coarsewsd
def test_polysemy_coarsewsd_preset():
    at = run("polysemy")
    at.selectbox(key="preset").select("bass (CoarseWSD-20)").run()
    at.slider(key="per_sense").set_value(4).run()
    ok(at)
    assert "CoarseWSD-20 `bass` train split" in texts(at.caption)
    assert "senses" in texts(at.subheader) and len(charts(at)) == 2


# --- Layer clustering -------------------------------------------------------------------------


@needs_ewt
def test_clustering_colourings_and_csv():
    at = run("clustering")
    at.number_input(key="n_sentences").set_value(15).run()
    ok(at)
    assert len(charts(at)) == 4 and "15 sentences" in texts(at.caption)
    spec = json.loads(charts(at)[0].proto.spec)
    colours = [t["marker"]["color"] for t in spec["data"]]
    assert len(colours) > 10 and len(set(colours)) == len(colours)  # no two labels share a colour
    silhouettes = markdown_table(at).set_index("layer")["silhouette (cosine, full dimension)"].astype(float)
    best = silhouettes.idxmax()
    said = (
        f"Here **{best}** groups the UPOS labels best ({silhouettes[best]:.3f})"
        if silhouettes[best] > 0
        else "No layer groups the UPOS labels here"
    )
    assert said in texts(at.markdown)  # the hint is written from the page's own numbers
    assert "UMAP about" in texts(at.caption) and "t-SNE about" in texts(at.caption)  # said before it is picked
    for colour in ("dependency relation", "frequency (EWT train)", "OOV (not in EWT train)"):
        at.selectbox(key="colour").select(colour).run()
        ok(at)
        assert len(charts(at)) == 4
    assert at.get("download_button")
    assert list(markdown_table(at)["layer"]) == ["L0", "L1", "L2", "mean"]
    at.multiselect(key="layers").set_value(["1"])
    at.checkbox(key="drop_punct").check().run()
    assert len(charts(ok(at))) == 1
    at.multiselect(key="layers").set_value(["1f", "1b"]).run()  # the direction halves of L1
    assert len(charts(ok(at))) == 2 and list(markdown_table(at)["layer"]) == ["L1 forward", "L1 backward"]


@needs_ewt
def test_clustering_umap_compiles_on_first_use():
    from probing_lab.analysis import umap_is_warm

    at = run("clustering")
    at.number_input(key="n_sentences").set_value(10)
    at.multiselect(key="layers").set_value(["0", "1"])
    at.radio(key="cluster_method").set_value("UMAP").run()
    assert len(charts(ok(at))) == 2 and umap_is_warm()


@needs_ewt
def test_clustering_validates_the_sample():
    at = run("clustering")
    at.number_input(key="n_sentences").set_value(100_000).run()
    assert "The sample is too large" in texts(ok(at).error) and not charts(at)
    at.number_input(key="n_sentences").set_value(1500)
    at.radio(key="cluster_method").set_value("t-SNE").run()  # one rerun: checked before anything is embedded
    assert "too large for TSNE" in texts(ok(at).error)
    at.radio(key="cluster_method").set_value("PCA")
    at.number_input(key="n_sentences").set_value(10)
    at.multiselect(key="layers").set_value([]).run()
    assert "Pick at least one layer" in texts(ok(at).warning)


# --- Probes -----------------------------------------------------------------------------------


def _metrics(model: str, scores: list[float]) -> dict:
    layers = {
        k: {
            "score": s,
            "control_score": s / 2,
            "selectivity": s / 2,
            "mdl_bits": 100.0,
            "confusion": [[8, 2, 0], [1, 9, 0], [0, 5, 5]],
        }
        for k, s in zip(("0", "1", "2", "mix"), scores)
    }
    return {
        "task": "upos",
        "experiment": "pos_ewt",
        "dataset": "ewt",
        "model": model,
        "splits": {"train": "train", "dev": "dev", "test": "test"},
        "seed": 0,
        "layers": layers,
        "labels": ["NOUN", "VERB", "ADJ"],
        "baselines": {"majority": 0.8, "random_init": {k: 0.5 for k in layers}},
        "seconds": 1.0,
    }


def open_folder(at: AppTest, folder) -> AppTest:
    at.radio(key="results_source").set_value("Another folder").run()
    at.text_input(key="run_dir").input(str(folder)).run()
    return ok(at)


def test_probes_compare_models(tmp_path):
    for name, model, scores in (
        ("pos-a", "shipped:elmo-lab", [0.8, 0.95, 0.93, 0.94]),
        ("pos-b", "random:cpu-small (seed 0)", [0.8, 0.85, 0.84, 0.85]),
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.json").write_text(json.dumps(_metrics(model, scores)))
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "metrics.json").write_text("{not json")
    at = open_folder(run("probes"), tmp_path)
    assert "Skipped unreadable runs" in texts(at.warning)
    assert len(charts(at)) == 2  # the layer curves and the confusion matrix
    rows = frame(at)
    assert set(rows["model"]) == {"shipped model (elmo-lab)", "random init (cpu-small, seed 0)"} and len(rows) == 8
    per_label = frame(at, 1).set_index("label")
    assert (
        per_label.loc["ADJ", "accuracy"] == pytest.approx(0.5) and per_label.loc["ADJ", "most confused with"] == "VERB"
    )
    assert per_label.loc["VERB", "precision"] == pytest.approx(9 / 16) and per_label.loc["NOUN", "support"] == 10
    widget(at, "multiselect", "Runs to compare").set_value([]).run()
    assert "Pick at least one run" in texts(ok(at).warning)


def test_probes_warn_of_a_layer_below_its_control_task_and_print_no_dicts(tmp_path):
    metrics = _metrics("random:cpu-small (seed 0)", [0.8, 0.85, 0.84, 0.85])
    metrics["layers"]["2"]["control_score"] = 0.9  # L2 below its control task
    (tmp_path / "pos-low").mkdir()
    (tmp_path / "pos-low" / "metrics.json").write_text(json.dumps(metrics))
    at = open_folder(run("probes"), tmp_path)
    said = "Scoring below the control task: random init (cpu-small, seed 0) L2 (0.840 < control 0.900)"
    assert said in texts(at.warning)
    assert "Task upos on ewt." in texts(at.caption) and "{" not in texts(at.caption)


def test_probes_without_runs(tmp_path):
    at = open_folder(run("probes"), tmp_path / "nowhere")
    assert "No folder" in texts(ok(at).warning)
    at.text_input(key="run_dir").input(str(tmp_path)).run()
    assert "No runs under" in texts(ok(at).info)


def test_probes_shipped_results_are_shown():
    at = ok(run("probes"))
    assert at.radio(key="results_source").value == "Results shipped with the lab"
    experiments = at.selectbox(key="experiment").options
    assert any(e.startswith("pos_ewt") for e in experiments), experiments
    assert at.selectbox(key="experiment").value == "pos_ewt"  # opens on the clearest result
    assert len(charts(at)) >= 1 and "shipped" in " ".join(frame(at)["model"])
    models = set(frame(ok(at))["model"])  # the shipped model and its early snapshot, side by side
    assert {"shipped model (elmo-lab)", "early snapshot (elmo-lab-early)"} <= models, models


def test_runs_started_in_the_app_go_to_the_user_data_folder(tmp_path, monkeypatch):
    from probing_lab import paths

    monkeypatch.delenv("PROBING_LAB_RUNS", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # where platformdirs puts user data on Linux
    assert paths.app_runs_dir() == tmp_path / "data" / "probing-lab" / "runs" / "probes"
    monkeypatch.setenv("PROBING_LAB_RUNS", "~/elsewhere")
    assert paths.app_runs_dir() == Path("~/elsewhere").expanduser()


@needs_ewt
def test_probes_new_run_with_progress(tmp_path, monkeypatch):
    monkeypatch.setenv("PROBING_LAB_RUNS", str(tmp_path))
    at = ok(run("probes"))
    # the form says where runs go and how long the committed run took (its metrics.json, not a guess)
    assert str(tmp_path) in texts(at.caption) and "The committed run of pos_ewt" in texts(at.caption)
    at.selectbox(key="new_experiment").set_value("pos_ewt")
    at.number_input(key="new_limit").set_value(300)
    at.checkbox(key="new_baselines").uncheck()
    at.button(key="start_run").click().run()
    ok(at)
    assert "Wrote" in texts(at.success), texts(at.error)
    (run_dir,) = tmp_path.glob("pos_ewt-*")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["model"].startswith("random") and "random_init" not in metrics["baselines"]
    assert json.loads((run_dir / "experiment.json").read_text())["max_train_sentences"] == 300
    assert 0 < metrics["layers"]["1"]["score"] <= 1 and len(metrics["layers"]["1"]["confusion"]) == metrics["n_labels"]
    at.radio(key="results_source").set_value("Your runs (started here)").run()
    assert len(charts(ok(at))) == 2


# --- Sentence explorer ------------------------------------------------------------------------


def test_sentence_explorer():
    at = ok(run("explorer"))
    assert len(charts(at)) == 2 and len(at.dataframe) == 4  # profile + heatmap; nearest tokens per layer
    l0 = frame(at, 0)  # nearest tokens to the first "bank" in L0: the other "bank", cosine 1
    assert "bank" in l0["token"][0] and l0["cosine"][0] == pytest.approx(1.0)
    at.radio(key="heat_layer").set_value("2").run()
    at.selectbox[0].set_value(0).run()
    assert len(charts(ok(at))) == 2
    at.checkbox(key="explorer_halves").check().run()
    assert len(ok(at).dataframe) == 8  # nearest tokens per layer and per half
    at.radio(key="heat_layer").set_value("1b").run()
    assert len(charts(ok(at))) == 2
    # new text: the token is picked again ("bank" where there is one), not kept by its old position
    at.text_area(key="text").input("We walked along the river bank .").run()
    assert at.selectbox[0].value == 5 and "“bank”" in texts(ok(at).subheader)


def test_sentence_explorer_bad_input():
    at = run("explorer")
    at.text_area(key="text").input("").run()
    assert "Type some text" in texts(ok(at).warning)
    at.text_area(key="text").input("This is a sentence with words. " * 30).run()
    assert "tokens; the first" in texts(ok(at).info) and len(charts(at)) == 2


# --- Language model -----------------------------------------------------------------------------


def _tiny_lm_dir(path: Path) -> Path:
    import torch
    from conftest import TINY_MODEL

    from probing_lab.elmo import ElmoBiLM, ElmoOptions, save_checkpoint
    from probing_lab.lm.language_model import save_softmax
    from probing_lab.training.vocab import Vocabulary

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # the same tiny model in every run
        bilm = ElmoBiLM(ElmoOptions.from_dict(TINY_MODEL))
    save_checkpoint(bilm, path)
    words = ["<S>", "</S>", "<UNK>", "The", "the", "keys", "to", "cabinet", "are", "is", "on", "table", "."]
    generator = torch.Generator().manual_seed(0)
    bias = torch.zeros(len(words))
    bias[words.index("<UNK>")] = 4.0  # <UNK> is the first guess everywhere: the page's toggle must hide it
    save_softmax(path, torch.randn(len(words), 8, generator=generator), bias, Vocabulary(words))
    return path


def test_lm_page_scores_each_direction_and_runs_the_agreement_test(tmp_path, monkeypatch):
    from probing_lab import paths

    monkeypatch.setenv("PROBING_LAB_MODEL", str(_tiny_lm_dir(tmp_path / "lm")))
    monkeypatch.setattr(paths, "LM_RESULTS_DIR", tmp_path / "no-runs")  # the committed BLiMP run: its own test
    at = ok(run("lm"))
    assert len(charts(at)) == 1  # the surprisal strip
    rows = frame(at)
    assert list(rows["token"][:3]) == ["The", "keys", "to"] and len(rows) == 10
    assert (rows["forward bits"] > 0).all() and (rows["backward bits"] > 0).all()
    assert {m.label for m in at.metric} >= {"Perplexity, forward", "Perplexity, backward"}
    assert [m.value for m in at.metric if m.label.startswith("Unknown")] == ["0"]
    # attribution of "are" against "is" by default: coloured words, the unread words after it at 0
    shown = [h.proto.body for h in at.get("html")]
    assert len(shown) == 2 and all(h.count("<span") == 10 for h in shown)  # integrated gradients, occlusion
    assert 'title="+0.000">on<' in shown[0] and "log-probability difference" in texts(at.markdown)
    assert widget(at, "selectbox", "Word the LM chooses").value == 5
    at.radio(key="attr_direction").set_value("backward").run()
    assert 'title="+0.000">keys<' in ok(at).get("html")[0].proto.body  # the backward LM does not read "keys"
    at.text_input(key="lm_text").input("The zebras are here .").run()
    assert [m.value for m in ok(at).metric if m.label.startswith("Unknown")] == ["2"]  # zebras, here
    assert "(<UNK>)" in " ".join(frame(at)["token"])
    expected = " ".join(frame(at)["forward expected"]) + " " + " ".join(frame(at)["backward expected"])
    assert "<UNK>" not in expected and all(len(e.split(", ")) == 5 for e in frame(at)["forward expected"])
    at.toggle(key="lm_hide_unk").set_value(False).run()  # shown again: the first guess of every row
    shown = frame(ok(at))
    assert all(e.startswith("<UNK>, ") for e in [*shown["forward expected"], *shown["backward expected"]])
    at.button(key="run_agreement").click().run()
    ok(at)
    assert len(charts(at)) == 2
    agreement = frame(at, 2)  # after the token table and the construction list
    assert list(agreement["construction"])[-1] == "overall" and agreement["pairs"].iloc[-1] == 1200
    assert agreement["forward"].between(0, 1).all()
    at.text_input(key="lm_text").input("   ").run()
    assert "Type a sentence" in texts(ok(at).warning)


def test_pages_say_when_they_cut_typed_text(tmp_path, monkeypatch):
    monkeypatch.setenv("PROBING_LAB_MODEL", str(_tiny_lm_dir(tmp_path / "lm")))
    at = ok(run("lm"))
    at.text_input(key="lm_text").input("the keys are on the table . " * 60).run()  # 1,680 characters
    assert "only the first" in texts(ok(at).info)
    at = ok(run("causal"))
    at.text_input(key="clean").input("the author laughs " * 40).run()
    assert "only the first" in texts(ok(at).info)


def test_lm_page_says_when_a_model_has_no_softmax(tmp_path, monkeypatch):
    from conftest import TINY_MODEL

    from probing_lab.elmo import ElmoBiLM, ElmoOptions, save_checkpoint

    save_checkpoint(ElmoBiLM(ElmoOptions.from_dict(TINY_MODEL)), tmp_path / "encoder")
    monkeypatch.setenv("PROBING_LAB_MODEL", str(tmp_path / "encoder"))
    at = ok(run("lm"))
    assert "no language-model softmax" in texts(at.info) and not charts(at)


# --- Compare and Training --------------------------------------------------------------------------


def test_compare_page_cka_of_a_model_with_itself_and_with_a_random_init():
    at = ok(run("compare"))
    at.radio(key="cmp_source").set_value("Your text").run()
    ok(at)
    assert len(charts(at)) == 1
    geometry = frame(at)
    assert set(geometry["layer"]) == {"L0", "L1", "L2"}
    at.multiselect(key="cmp_layers").set_value(["0", "1f", "1b"]).run()
    at.selectbox(key="cmp_other").set_value("random init of the same shape").run()
    ok(at)
    assert "random:cpu-tiny (seed 1)" in " ".join(frame(at)["model"])  # another seed than the current model's
    at.multiselect(key="cmp_layers").set_value([]).run()
    assert "Pick at least one layer" in texts(ok(at).warning)
    at.multiselect(key="cmp_layers").set_value(["0"]).run()
    at.text_area(key="cmp_text").input("bank").run()
    assert "at least 4 tokens" in texts(ok(at).warning)


@needs_ewt
def test_compare_page_on_an_ewt_sample():
    at = ok(run("compare"))
    at.number_input(key="cmp_n").set_value(20).run()
    assert len(charts(ok(at))) == 1 and "20 sentences" in texts(at.caption)


def test_training_page_shows_the_learning_curves(tmp_path):
    at = ok(run("training"))
    assert len(charts(at)) == 1
    rows = frame(at)
    assert {"WSD L1", "UPOS L1", "perplexity", "tokens (M)", "stage"} <= set(rows.columns) and len(rows) >= 8
    # by default the shipped model's stages end to end: the axis ends at the model card's total tokens
    runs = at.multiselect(key="curves_runs")
    assert runs.value == ["shipped model (data/models/elmo-lab): all stages"]
    card = json.loads((ROOT / "data" / "models" / "elmo-lab" / "model_card.json").read_text())
    total = sum(stage["tokens"] for stage in card["stages"]) / 1e6
    assert rows["tokens (M)"].max() == pytest.approx(total, abs=0.05) and set(rows["stage"]) == {0, 1}
    spec = json.loads(charts(at)[0].proto.spec)
    assert any("stage 1" in a.get("text", "") for a in spec["layout"]["annotations"])  # the boundary, marked
    names = [o for o in runs.options if "campaign-stage1" in o or "last stage" in o]
    assert len(names) == 1, names  # the shipped model's curves and stage 1's are one file: listed once
    at.text_input(key="curves_run").input(str(tmp_path / "nowhere")).run()
    ok(at)
    at.multiselect(key="curves_runs").set_value([f"run: {tmp_path / 'nowhere'}"]).run()
    assert "no learning curves" in texts(ok(at).warning)


# --- Model ------------------------------------------------------------------------------------


def test_model_page_random_and_checkpoint(tmp_path):
    import torch

    from probing_lab.elmo import ElmoBiLM, get_preset, save_checkpoint

    at = ok(run("model"))
    assert "random init cpu-tiny" in texts(at.markdown)
    at.selectbox(key="preset").select("cpu-tiny")
    at.number_input(key="seed").set_value(3)
    at.button(key="use").click().run()
    ok(at)
    assert "Now using random:cpu-tiny (seed 3)" in texts(at.success)
    assert at.session_state["model_spec"].seed == 3
    # the header and the sidebar name the new model in the same click
    assert "In use now: **random init cpu-tiny (seed 3)**" in texts(at.markdown)
    assert "random init cpu-tiny (seed 3)" in texts(at.sidebar.markdown)

    model = ElmoBiLM(get_preset("cpu-tiny"))
    model.reset_parameters(torch.Generator().manual_seed(1))
    save_checkpoint(model, tmp_path / "ckpt", card={"name": "test-card"})
    at.radio(key="kind").set_value("Another checkpoint directory").run()
    at.text_input(key="checkpoint").input(str(tmp_path / "ckpt")).run()
    at.button(key="use").click().run()
    ok(at)
    assert "Now using checkpoint:" in texts(at.success)
    assert any("test-card" in str(j.value) for j in at.json)  # the whole card, collapsed
    assert "| name | test\\-card |" in texts(at.markdown)  # and its facts as a table first (escaped Markdown)


def test_model_page_offers_the_warm_start_only_while_it_is_ahead_of_the_shipped_model(tmp_path, monkeypatch):
    from probing_lab import paths

    shipped, warm = tmp_path / "shipped", tmp_path / "warm"
    shipped.mkdir(), warm.mkdir()
    (shipped / "model_card.json").write_text('{"training": {"step": 100}}')
    (warm / "info.json").write_text('{"step": 100}')  # the shipped model is the warm-start state
    monkeypatch.setattr(paths, "SHIPPED_MODEL_DIR", shipped)
    monkeypatch.setattr(paths, "CANDIDATE_MODEL_DIR", warm)
    options = ok(run("model")).radio(key="kind").options
    assert not any(o.startswith("Next model") for o in options) and "Random init" in options
    (warm / "info.json").write_text('{"step": 250}')  # training went on after the model shipped
    assert any(o.startswith("Next model") for o in ok(run("model")).radio(key="kind").options)


def test_model_page_errors(tmp_path):
    at = run("model")
    at.radio(key="kind").set_value("Released ELMo (options.json + weights.hdf5)").run()
    assert "Give both paths" in texts(ok(at).warning)
    at.text_input(key="options").input(str(tmp_path / "options.json"))
    at.text_input(key="weights").input(str(tmp_path / "weights.hdf5")).run()
    assert "No such file" in texts(ok(at).warning)
    (tmp_path / "options.json").write_text('{"lstm": {}}')
    (tmp_path / "weights.hdf5").write_bytes(b"not hdf5")
    at.run()  # the files exist now: the button is enabled
    at.button(key="use").click().run()
    assert "Could not load released ELMo" in texts(ok(at).error)
    at.radio(key="kind").set_value("Another checkpoint directory").run()
    (tmp_path / "empty").mkdir()  # (tmp_path itself now holds a released pair, which loads as one)
    at.text_input(key="checkpoint").input(str(tmp_path / "empty")).run()
    at.button(key="use").click().run()
    assert "no options.json" in texts(ok(at).error) or "no model.safetensors" in texts(at.error)
    at.radio(key="kind").set_value("Early snapshot (data/models/elmo-lab-early)").run()
    ok(at)


def test_causal_page_patches_a_typed_pair_and_a_construction():
    def patches(at):  # the patching heatmaps (the committed amnesic runs draw INLP curves below them)
        return [c for c in charts(at) if "restored" in str(c.proto.spec)]

    at = ok(run("causal"))  # a random-init model with the lab's vocabulary: the chance baseline
    assert len(patches(at)) == 1
    assert "clean" in texts(at.caption) and "corrupt" in texts(at.caption)
    spec = json.loads(patches(at)[0].proto.spec)
    # the default target is "is" (word 5): the forward LM read <S> and words 0-4, the columns shown
    assert spec["data"][0]["x"] == ["&lt;S&gt;", "0:The", "1:officer", "2:near", "3:the", "4:pilots"]  # <S> escaped
    assert "word 5 'is'" in spec["layout"]["title"]["text"]
    assert any(a["text"] == "changed word (trivial)" and a["x"] == "1:officer" for a in spec["layout"]["annotations"])
    assert "Besides the changed word" in texts(at.markdown)
    (shown,) = [h.proto.body for h in at.get("html")]  # the clean choice's attribution, coloured
    assert shown.count("<span") == 8 and 'title="+0.000">tired<' in shown  # read after "is": 0
    at.radio(key="direction").set_value("backward").run()
    assert len(patches(ok(at))) == 1
    at.text_input(key="corrupt").input("The authors laughs .").run()
    assert "same number of tokens" in texts(ok(at).warning) and not patches(at)
    at.text_input(key="clean").input("").run()
    assert "Type both sentences" in texts(ok(at).warning)
    at.radio(key="source").set_value("A construction of the agreement set").run()
    at.slider(key="n").set_value(2).run()
    assert len(patches(ok(at))) == 1 and "mean over 2 pairs" in str(patches(at)[0].proto.spec)
    # the committed runs of the shipped model
    if (ROOT / "causal" / "results" / "patch" / "metrics.json").is_file():
        assert any(e.label.startswith("patch: patch") for e in at.expander)
        assert "strongest patch besides the changed word" in texts(at.markdown)
    if (ROOT / "causal" / "results" / "units" / "metrics.json").is_file():  # units as a Plotly figure
        units = [c for c in charts(at) if "Number units" in str(c.proto.spec)]
        assert len(units) == 1 and "random unit" in str(units[0].proto.spec)


def test_the_page_lists_come_from_the_pages_that_exist():
    import lab_ui

    index = lab_ui.page_index()
    assert [p["file"] for p in index] == sorted(
        (f.name for f in (APP / "pages").glob("*.py")), key=lambda n: int(n.split("_")[0])
    )
    assert {str(PAGES[k]) for k in PAGES if k != "home"} == {str(APP / "pages" / p["file"]) for p in index}
    readme = (APP / "README.md").read_text(encoding="utf-8")
    pages_line = (ROOT / "README.md").read_text(encoding="utf-8").split("Pages: Tour, ", 1)[1].split(";")[0]
    assert pages_line.replace("\n", " ").split(", ") == [p["name"] for p in index]  # the README's list
    tour = texts(ok(run("home")).markdown)
    for p in index:  # each page opens with what it shows and what to try; the Tour and the README list it
        assert p["shows"].endswith((".", "?")) and p["tries"], p["file"]
        assert f"**{p['name']}**: {p['shows']}" in tour and f"**{p['name']}**" in readme, p["name"]


def test_every_page_survives_a_broken_model(monkeypatch):
    monkeypatch.setenv("PROBING_LAB_MODEL", "/nonexistent/model")
    for page in PAGES:
        if page in ("probes", "training", "transfer"):
            continue  # read run folders and learning curves only
        at = ok(run(page))
        if page == "lm":  # the language model is loaded on its own, with its own message
            assert "/nonexistent/model" in texts(at.error), page
        elif page not in ("clustering", "compare") or have("ud-english-ewt", "en_ewt-ud-dev.conllu"):
            assert "Could not load checkpoint /nonexistent/model" in texts(at.error), page


# --- launcher ---------------------------------------------------------------------------------


def test_launch_checks_and_command(tmp_path):
    import launch

    assert launch.check_model(None) is None and launch.check_model("random:cpu-tiny") is None
    assert "unknown preset" in launch.check_model("random:nope")
    assert "no such directory" in launch.check_model(str(tmp_path / "missing"))
    assert "no model.safetensors" in launch.check_model(str(tmp_path))
    assert launch.run_app(0, "random:nope") == 2
    cmd = launch.streamlit_command(8599)
    assert cmd[1].endswith("serve.py") and cmd[2] == "run" and cmd[3].endswith("Tour.py")
    for flag, value in (
        ("--server.headless", "true"),
        ("--server.fileWatcherType", "none"),
        ("--server.port", "8599"),
        ("--server.address", "127.0.0.1"),
        ("--client.toolbarMode", "minimal"),  # no "Deploy" button
    ):
        assert cmd[cmd.index(flag) + 1] == value
    assert 1024 < launch.free_port() < 65536


def test_card_summary_of_a_model_trained_in_stages_gives_the_totals():
    import model_choice

    card = {
        "name": "elmo-lab",
        "training": {"step": 3300, "tokens_seen": 8448000, "wall_time_s": 156.8},  # the last stage's run
        "stages": [
            {"stage": 0, "tokens": 16903680, "steps": 6603, "wall_time_s": 18860, "where": "a CPU"},
            {"stage": 1, "tokens": 8448000, "steps": 3300, "wall_time_s": 156.8, "where": "a GPU"},
        ],
    }
    rows = {r[""]: r["value"] for r in model_choice.card_summary(card)}
    assert rows["training steps"] == "9,903" and rows["token positions seen"] == "25,351,680"
    assert rows["training time"] == "5.28 h"
    assert rows["training stages"] == "16,903,680 tokens on a CPU; 8,448,000 tokens on a GPU"
    single = {r[""]: r["value"] for r in model_choice.card_summary({"training": {"step": 5, "tokens_seen": 100}})}
    assert single["training steps"] == "5" and "training stages" not in single


def test_lm_page_shows_a_blimp_run_with_the_published_models(tmp_path, monkeypatch):
    from test_blimp import write_pairs
    from test_lm import tiny_lm

    from probing_lab import paths
    from probing_lab.lm.blimp import evaluate_blimp, read_pairs_file

    monkeypatch.setenv("PROBING_LAB_MODEL", str(_tiny_lm_dir(tmp_path / "lm")))
    rows = [{"sentence_good": "the cat sat", "sentence_bad": "the dogs sat", "UID": "p", "linguistics_term": "agr"}]
    metrics = evaluate_blimp(tiny_lm(), read_pairs_file(write_pairs(tmp_path / "p.jsonl", rows * 3)))
    metrics["overall"]["published"] = {"ngram": 0.612, "lstm": 0.698, "txl": 0.696, "gpt2": 0.830}
    (tmp_path / "runs" / "blimp-tiny").mkdir(parents=True)
    (tmp_path / "runs" / "blimp-tiny" / "metrics.json").write_text(json.dumps(metrics))
    monkeypatch.setattr(paths, "LM_RESULTS_DIR", tmp_path / "runs")
    at = ok(run("lm"))
    bars = [c for c in charts(at) if "BLiMP" in str(c.proto.spec)]
    assert len(bars) == 1
    names = {trace.get("name") for trace in json.loads(bars[0].proto.spec)["data"]}
    assert {"GPT-2", "LSTM (83M tokens)", "humans", "this model (both)"} <= names
    assert "GPT-2 0.830" in texts(at.markdown) and "| **overall** |" in texts(at.markdown)
    at.radio(key="blimp_direction").set_value("forward").run()
    assert "this model (forward)" in str([c for c in charts(ok(at)) if "BLiMP" in str(c.proto.spec)][0].proto.spec)


def test_lm_page_draws_the_committed_blimp_run(tmp_path, monkeypatch):
    metrics = ROOT / "lm" / "results" / "blimp-elmo-lab" / "metrics.json"
    if not metrics.is_file():
        pytest.skip("no committed BLiMP run")
    monkeypatch.setenv("PROBING_LAB_MODEL", str(_tiny_lm_dir(tmp_path / "lm")))
    at = ok(run("lm"))
    overall = json.loads(metrics.read_text())["overall"]
    assert [c for c in charts(at) if "BLiMP" in str(c.proto.spec)]
    assert f"both {overall['both']:.3f}" in texts(at.markdown)
