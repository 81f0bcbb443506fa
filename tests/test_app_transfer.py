"""The Transfer page (app/pages/9_Transfer.py) and the library it reads with
(probing_lab.transfer.report): summaries checked by hand on a written cells list; the page with
AppTest on a tiny real transfer run (a tiny random-init model), with no runs, and with a corrupt run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY_MODEL, ok, texts
from test_own_data import tokens_file

from probing_lab.elmo import ElmoBiLM, ElmoOptions, save_checkpoint
from probing_lab.transfer import experiment as E
from probing_lab.transfer import report as R

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "app" / "pages" / "9_Transfer.py"
TIMEOUT = 180
FAST = {"hidden": 16, "static_dim": 8, "max_epochs": 4, "min_updates": 20, "eval_every_updates": 10, "lr": 0.01}


# --- the library, by hand -----------------------------------------------------------------------------

CELLS = [
    {"input": "static", "fraction": 0.1, "seed": 0, "test": 0.50, "mix_weights": None},
    {"input": "static", "fraction": 0.1, "seed": 1, "test": 0.60, "mix_weights": None},
    {"input": "static", "fraction": 1.0, "seed": 0, "test": 0.80, "mix_weights": None},
    {"input": "static", "fraction": 1.0, "seed": 1, "test": 0.90, "mix_weights": None},
    {"input": "elmo", "fraction": 0.1, "seed": 0, "test": 0.70, "mix_weights": [0.2, 0.3, 0.5]},
    {"input": "elmo", "fraction": 0.1, "seed": 1, "test": 0.80, "mix_weights": [0.3, 0.3, 0.4]},
    {"input": "elmo", "fraction": 1.0, "seed": 0, "test": 0.90, "mix_weights": [0.1, 0.6, 0.3]},
    {"input": "elmo", "fraction": 1.0, "seed": 1, "test": 0.94, "mix_weights": [0.3, 0.4, 0.3]},
    {"input": "elmo_top", "fraction": 1.0, "seed": 0, "test": 0.85, "mix_weights": [1.0]},
]


def hand_run(cells=CELLS, task="chunking", metric="f1") -> R.TransferRun:
    return R.TransferRun(
        path=Path("/nowhere/run"),
        experiment="hand",
        task=task,
        metric=metric,
        model="m",
        cells=cells,
        train_sentences={"0.1": 12, "1.0": 120},
    )


def test_summaries_equal_the_hand_computed_means_and_spread():
    rows = {(r["input"], r["fraction"]): r for r in R.summarize(CELLS)}
    assert list(rows)[:2] == [("static", 0.1), ("static", 1.0)]  # static first, then elmo, in fraction order
    assert rows[("static", 0.1)]["mean"] == pytest.approx(0.55)
    assert rows[("static", 0.1)]["std"] == pytest.approx(np.sqrt(((0.5 - 0.55) ** 2 + (0.6 - 0.55) ** 2) / 1))
    assert rows[("elmo", 1.0)]["mean"] == pytest.approx(0.92) and rows[("elmo", 1.0)]["n"] == 2
    assert rows[("elmo", 1.0)]["std"] == pytest.approx(np.std([0.90, 0.94], ddof=1))
    assert rows[("elmo", 1.0)]["min"] == 0.90 and rows[("elmo", 1.0)]["max"] == 0.94
    assert rows[("elmo_top", 1.0)]["std"] == 0.0 and rows[("elmo_top", 1.0)]["n"] == 1  # one seed: no spread
    curve = R.curves(hand_run())["elmo"]
    assert curve["fraction"] == [0.1, 1.0] and curve["mean"] == pytest.approx([0.75, 0.92])

    table = R.error_reduction_rows(hand_run())
    assert [r["training data"] for r in table] == ["10% (12 sentences)", "100% (120 sentences)"]
    # 10%: static 0.55 (error 0.45), elmo 0.75 (error 0.25): (0.45 - 0.25) / 0.45 = 44.4%
    assert table[0]["relative error reduction"] == "44.4%"
    assert table[0]["static embedding"] == 0.55 and table[0]["ELMo scalar mix"] == 0.75
    assert table[0]["metric"] == "test F1" and R.error_reduction_rows(hand_run(metric="accuracy"))[0]["metric"] == (
        "test accuracy"
    )
    # 100%: static 0.85 (0.15), elmo 0.92 (0.08): 0.07 / 0.15 = 46.7%
    assert table[1]["relative error reduction"] == "46.7%" and table[1]["gain (points)"] == pytest.approx(7.0)
    assert R.error_reduction(1.0, 1.0) is None and R.error_reduction(0.5, 0.75) == pytest.approx(0.5)
    # the same numbers as the experiment's own summary in metrics.json
    exp = E.TransferExperiment(name="hand", task="chunking", inputs=["static", "elmo"], fractions=[0.1, 1.0])
    ours = R.summarize([c for c in CELLS if c["input"] != "elmo_top"])
    theirs = E._summary(CELLS, exp)
    for row in ours:
        assert theirs[row["input"]][str(row["fraction"])]["mean"] == pytest.approx(row["mean"])
        assert theirs[row["input"]][str(row["fraction"])]["std"] == pytest.approx(row["std"])


def test_layer_weights_and_probes_of_the_same_layers():
    w = R.layer_weights(hand_run())
    assert w["layers"] == ["L0", "L1", "L2"] and w["fraction"] == 1.0 and w["n"] == 2
    assert w["mean"] == pytest.approx([0.2, 0.5, 0.3])  # the largest fraction only
    assert w["std"] == pytest.approx([np.std([0.1, 0.3], ddof=1), np.std([0.6, 0.4], ddof=1), 0.0])
    assert R.layer_weights(hand_run(), "static") is None
    probe = R.probe_scores("chunking")
    if probe is None:
        pytest.skip("probes/results/chunks_conll2000 is not in this checkout")
    from probing_lab.probing.runs import ProbeRun

    run = ProbeRun.load(ROOT / "probes" / "results" / "chunks_conll2000")
    assert probe["layers"] == {f"L{i}": run.layers[str(i)].score for i in range(3)}
    assert R.probe_scores("token_label") is None
    rows = R.decodable_vs_useful([hand_run()], {"chunking": probe})
    assert [r["layer"] for r in rows] == ["L0", "L1", "L2"]
    assert rows[1]["learned weight softmax(s)"] == 0.5 and rows[1]["probe score"] == round(run.layers["1"].score, 4)
    assert rows[0]["probe"] == "chunks_conll2000"


def test_finding_runs_skips_probe_runs_and_names_broken_ones(tmp_path, monkeypatch):
    good = tmp_path / "runs" / "good"
    good.mkdir(parents=True)
    (good / "metrics.json").write_text(json.dumps({"task": "upos", "metric": "accuracy", "cells": CELLS}))
    probe = tmp_path / "runs" / "a_probe"
    probe.mkdir()
    (probe / "metrics.json").write_text(json.dumps({"layers": {"0": {"score": 0.5}}, "task": "upos"}))
    bad = tmp_path / "runs" / "bad"
    bad.mkdir()
    (bad / "metrics.json").write_text("{not json")
    odd = tmp_path / "runs" / "odd"
    odd.mkdir()
    (odd / "metrics.json").write_text(json.dumps({"task": "upos", "metric": "f1", "cells": [{"input": "x"}]}))
    runs, broken = R.find_runs({"mine": tmp_path / "runs", "missing": tmp_path / "nothing"})
    assert [r.path.name for r in runs] == ["good"] and runs[0].source == "mine" and runs[0].experiment == "good"
    assert len(broken) == 2 and str(bad / "metrics.json") in broken[0] and "not readable JSON" in broken[0]
    assert str(odd / "metrics.json") in broken[1] and "not the metrics of a transfer run" in broken[1]
    with pytest.raises(ValueError, match="bad"):
        R.load_run(bad)
    sig = R.signature({"mine": tmp_path / "runs"})
    assert [Path(s[1]).parent.name for s in sig] == ["a_probe", "bad", "good", "odd"]
    # the user's folders: runs/transfer by default, else $PROBING_LAB_TRANSFER_RUNS
    monkeypatch.delenv(R.RUNS_ENV, raising=False)
    assert R.run_roots() == {"shipped": R.SHIPPED_RESULTS, "your runs": R.USER_RUNS}
    roots = R.run_roots(f"{tmp_path / 'a'}{__import__('os').pathsep}{tmp_path / 'b'}")
    assert list(roots.values())[1:] == [tmp_path / "a", tmp_path / "b"]


# --- the page -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """A real transfer run (every input, two fractions, two seeds) with a tiny random-init model."""
    root = tmp_path_factory.mktemp("transfer")
    model = ElmoBiLM(ElmoOptions.from_dict(TINY_MODEL))
    model.reset_parameters(torch.Generator().manual_seed(0))
    tiny = str(save_checkpoint(model, root / "model" / "tiny"))
    files = {
        role: str(tokens_file(root / f"{role}.tokens", n, seed))
        for role, n, seed in (("train", 60, 0), ("dev", 15, 1), ("test", 15, 2))
    }
    exp = {
        "name": "pos_transfer",
        "task": "token_label",
        "dataset": {"format": "tokens", **files},
        "inputs": list(E.INPUTS),
        "fractions": [0.2, 1.0],
        "seeds": [0, 1],
        "tagger": FAST,
    }
    return E.run_transfer(
        exp, model=tiny, out=root / "runs" / "pos_transfer", cache_dir=root / "cache", progress=False, log=lambda m: 0
    )


@pytest.fixture
def page_env(tmp_path, monkeypatch):
    """The page reads only tmp folders: no committed results, the user's runs in tmp_path/runs."""
    import sys

    sys.path.insert(0, str(ROOT / "app"))
    monkeypatch.setenv("PROBING_LAB_MODEL", "random:cpu-tiny")
    monkeypatch.setattr(R, "SHIPPED_RESULTS", tmp_path / "no_committed_results")
    runs = tmp_path / "runs"
    runs.mkdir()
    monkeypatch.setenv(R.RUNS_ENV, str(runs))
    return runs


def run_page():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(PAGE), default_timeout=TIMEOUT)
    at.run()
    return ok(at)


def as_chunking(run_dir: Path, dest: Path) -> Path:
    """A copy of the tiny run that says it is chunking: the page then puts the chunking probe next to it."""
    shutil.copytree(run_dir, dest)
    metrics = json.loads((dest / "metrics.json").read_text())
    metrics.update(task="chunking", metric="f1", experiment="chunking_tiny")
    (dest / "metrics.json").write_text(json.dumps(metrics))
    return dest


def test_the_page_shows_the_curve_the_weights_and_the_table(tiny_run, page_env):
    pytest.importorskip("streamlit")
    shutil.copytree(tiny_run, page_env / "pos_transfer")
    as_chunking(tiny_run, page_env / "chunking_tiny")
    at = run_page()
    assert not at.warning, texts(at.warning)
    assert len(at.multiselect[0].value) == 2  # the newest run of each experiment
    charts = at.get("plotly_chart")
    specs = [json.loads(c.proto.spec) for c in charts]
    titles = [s["layout"]["title"]["text"] for s in specs]
    assert any("Sample efficiency" in t for t in titles) and any("Learned layer weights" in t for t in titles)
    curve = specs[0]
    assert curve["layout"]["xaxis"]["type"] == "log"
    names = {t["name"] for t in curve["data"]}
    assert names == {R.INPUT_NAMES[i] for i in E.INPUTS}  # every legend entry names its input
    assert all(t["error_y"]["array"] for t in curve["data"])  # the seeds' spread
    weights = next(s for s in specs if "Learned layer weights" in s["layout"]["title"]["text"])
    assert [t["name"] for t in weights["data"]] == ["L0", "L1", "L2"]
    by_layer = [t["y"] for t in weights["data"]]
    assert np.sum(by_layer, axis=0) == pytest.approx(np.ones(2), abs=1e-6)  # two groups, each sums to 1
    if R.probe_scores("chunking") is not None:
        assert any("Linear probe" in t for t in titles)
        assert "used another model" in texts(at.caption)  # the tiny model's layers are not the probed ones
    tables = [d.value for d in at.dataframe]
    reduction = tables[0]
    assert list(reduction.columns)[:5] == [
        "experiment",
        "metric",
        "training data",
        "static embedding",
        "ELMo scalar mix",
    ]
    assert set(reduction["metric"]) == {"test F1", "test accuracy"}  # one table for both kinds of task
    assert "relative error reduction" in reduction.columns and len(reduction) == 4  # 2 runs x 2 fractions
    useful = tables[1]
    assert "learned weight softmax(s)" in useful.columns and set(useful["layer"]) == {"L0", "L1", "L2"}
    captions = texts(at.caption)
    assert "{" not in captions and "±1 standard deviation" in captions


def test_the_page_without_runs_says_how_to_make_one(page_env):
    pytest.importorskip("streamlit")
    at = run_page()
    assert "probing-lab transfer transfer/chunking_conll2000.toml" in texts(at.info)
    assert not at.get("plotly_chart")


def test_a_corrupt_run_is_skipped_with_a_warning_naming_it(tiny_run, page_env):
    pytest.importorskip("streamlit")
    shutil.copytree(tiny_run, page_env / "pos_transfer")
    broken = page_env / "broken_run"
    broken.mkdir()
    (broken / "metrics.json").write_text('{"task": "upos", "cells": [')
    at = run_page()
    warning = texts(at.warning)
    assert str(broken / "metrics.json") in warning and "Skipped unreadable transfer runs" in warning
    assert at.get("plotly_chart")  # the good run is still shown
    # only the corrupt one: the message, and no traceback
    shutil.rmtree(page_env / "pos_transfer")
    at = run_page()
    assert str(broken / "metrics.json") in texts(at.warning) and "probing-lab transfer" in texts(at.info)
