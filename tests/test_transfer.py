"""Transfer: the BiLSTM tagger on each input, the scalar mix it learns, conlleval span F1, resuming
an interrupted grid, and the bad inputs a transfer run must refuse or report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY_MODEL, write_vectors
from test_own_data import tokens_file

from probing_lab.elmo import ElmoBiLM, ElmoOptions, save_checkpoint
from probing_lab.transfer import experiment as E
from probing_lab.transfer.data import TaggingSet, check_labels, subset
from probing_lab.transfer.scoring import accuracy, bio_spans, span_f1
from probing_lab.transfer.tagger import TaggerConfig, train_tagger

FAST = {"hidden": 16, "static_dim": 8, "max_epochs": 8, "min_updates": 40, "eval_every_updates": 10, "lr": 0.01}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    model = ElmoBiLM(ElmoOptions.from_dict(TINY_MODEL))
    model.reset_parameters(torch.Generator().manual_seed(0))
    return str(save_checkpoint(model, tmp_path_factory.mktemp("model") / "tiny"))


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("data")
    return {
        role: str(tokens_file(root / f"{role}.tokens", n, seed))
        for role, n, seed in (("train", 60, 0), ("dev", 15, 1), ("test", 15, 2))
    }


def experiment(files: dict, **kw) -> dict:
    return {
        "name": "pos_transfer",
        "task": "token_label",
        "dataset": {"format": "tokens", **files},
        "inputs": ["static", "elmo"],
        "fractions": [1.0],
        "seeds": [0],
        "tagger": FAST,
        **kw,
    }


def run(files, tiny, tmp_path, name="run", workers=1, **kw) -> dict:
    out = E.run_transfer(
        experiment(files, **kw),
        model=tiny,
        out=tmp_path / name,
        cache_dir=tmp_path / "cache",
        progress=False,
        log=lambda m: None,
        workers=workers,
    )
    return json.loads((out / "metrics.json").read_text())


# --- scoring ------------------------------------------------------------------------------------------


def test_conlleval_span_f1_by_hand():
    gold = [["B-NP", "I-NP", "B-VP", "O", "B-NP"]]
    predicted = [["B-NP", "I-NP", "B-VP", "O", "B-PP"]]  # 2 of 3 chunks right, 3 predicted
    assert bio_spans(gold[0]) == {(0, 2, "NP"), (2, 3, "VP"), (4, 5, "NP")}
    got = span_f1(gold, predicted)
    assert got["precision"] == pytest.approx(2 / 3) and got["recall"] == pytest.approx(2 / 3)
    assert got["f1"] == pytest.approx(2 / 3)
    assert bio_spans(["I-NP", "I-NP", "B-NP"]) == {(0, 2, "NP"), (2, 3, "NP")}  # a stray I- starts a chunk
    assert span_f1([["O"]], [["O"]])["f1"] == 0.0
    assert accuracy([["A", None, "B"]], [["A", "X", "C"]]) == 0.5  # unlabelled tokens are skipped


# --- the tagger -------------------------------------------------------------------------------------


def test_every_input_trains_and_beats_the_majority_tag(files, tiny, tmp_path):
    metrics = run(files, tiny, tmp_path, inputs=list(E.INPUTS))
    majority = 1 / 3  # DET, NOUN, VERB in equal numbers (the full stop is unlabelled)
    by_input = {c["input"]: c for c in metrics["cells"]}
    assert set(by_input) == set(E.INPUTS)
    for name, cell in by_input.items():
        assert cell["test"] > majority + 0.3, (name, cell)
    # the scalar mixes were learned: they moved from uniform
    for name in ("elmo", "elmo_random"):
        weights = metrics["mix_weights"][name]
        assert len(weights) == 3 and max(abs(w - 1 / 3) for w in weights) > 1e-3
    assert metrics["metric"] == "accuracy" and metrics["summary"]["elmo"]["1.0"]["n"] == 1


def test_the_mix_learns_to_prefer_the_layer_that_holds_the_labels():
    """Planted: layer 1 of 3 holds the tag, the others are noise; words are all the same type."""
    rng = np.random.default_rng(0)
    n, length = 80, 6
    tags = rng.integers(0, 2, (n, length))
    layers = rng.normal(size=(n, length, 3, 8)).astype(np.float32)
    layers[:, :, 1, 0] = np.where(tags == 1, 3.0, -3.0)
    data = TaggingSet([["w"] * length for _ in range(n)], [["AB"[t] for t in row] for row in tags])
    batch = lambda idx: torch.from_numpy(layers[np.asarray(idx)])  # noqa: E731
    config = TaggerConfig(**{**FAST, "max_epochs": 20, "min_updates": 100})
    trained = train_tagger(data, data, config, "accuracy", 0, batch, batch, (3, 8))
    assert trained.dev_score > 0.95
    weights = trained.mix_weights()
    assert weights[1] == max(weights) and weights[1] > 0.4


def test_a_nan_loss_stops_with_a_message_and_keeps_the_best_state():
    data = TaggingSet([["a", "b"]] * 20, [["X", "Y"]] * 20)
    calls = {"n": 0}

    def batch(idx):
        calls["n"] += 1
        out = torch.zeros(len(idx), 2, 1, 4)
        return out * float("nan") if calls["n"] > 4 else out  # from the third update on

    config = TaggerConfig(**{**FAST, "max_epochs": 50, "eval_every_updates": 1, "patience": 50})
    trained = train_tagger(data, data, config, "accuracy", 0, batch, batch, (1, 4))
    assert trained.stopped and "stopped, the best state kept" in trained.stopped
    assert all(torch.isfinite(p).all() for p in trained.model.parameters())


def test_static_vectors_initialise_the_word_embedding(files, tiny, tmp_path):
    from probing_lab.static import StaticVectors
    from probing_lab.transfer.tagger import PAD, Tagger

    matrix = write_vectors(tmp_path / "w2v", ["the", "bank", "river"], 8)
    table = StaticVectors.load(tmp_path / "w2v").table(["<pad>", "<unk>", "Bank", "zzz", "the"])
    assert np.isnan(table[[0, 1, 3]]).all() and np.allclose(table[[2, 4]], matrix[[1, 0]])  # "Bank" via lowercase
    model = Tagger(5, 3, TaggerConfig(**FAST), vectors=table)
    weight = model.embedding.weight.detach().numpy()
    assert np.allclose(weight[[2, 4]], matrix[[1, 0]]) and not weight[PAD].any()
    assert 0.1 < weight[[1, 3]].std() < 0.6  # words without a vector start at the vectors' scale, not N(0, 1)
    # through an experiment; vectors of another width, or no folder, are refused before any work
    metrics = run(files, tiny, tmp_path, "w2v-run", inputs=["static"], static_vectors=str(tmp_path / "w2v"))
    assert metrics["cells"][0]["test"] > 0.6
    with pytest.raises(E.TransferError, match="have 8 dimensions but \\[tagger\\] static_dim is 16"):
        run(files, tiny, tmp_path, "wide", static_vectors=str(tmp_path / "w2v"), tagger={**FAST, "static_dim": 16})
    with pytest.raises(E.TransferError, match="no such folder of static vectors"):
        run(files, tiny, tmp_path, "none", static_vectors=str(tmp_path / "nowhere"))
    assert not (tmp_path / "wide").exists() and not (tmp_path / "none").exists()  # refused before any work


# --- the grid: resume, bad input --------------------------------------------------------------------


def test_resume_after_an_interrupt_gives_the_same_cells(files, tiny, tmp_path, monkeypatch):
    grid = {"inputs": ["static", "elmo_l0"], "seeds": [0, 1]}
    whole = run(files, tiny, tmp_path, "whole", **grid)
    real = E.train_tagger
    calls = {"n": 0}

    def interrupted(*args, **kw):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(*args, **kw)

    monkeypatch.setattr(E, "train_tagger", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run(files, tiny, tmp_path, "resumed", **grid)
    assert len((tmp_path / "resumed" / "cells.jsonl").read_text().splitlines()) == 2
    monkeypatch.setattr(E, "train_tagger", real)
    resumed = run(files, tiny, tmp_path, "resumed", **grid)
    key = lambda c: (c["input"], c["seed"])  # noqa: E731
    assert [(key(c), c["test"], c["dev"]) for c in sorted(whole["cells"], key=key)] == [
        (key(c), c["test"], c["dev"]) for c in sorted(resumed["cells"], key=key)
    ]
    # two worker processes give the very same cells, in the grid's order
    parallel = run(files, tiny, tmp_path, "parallel", workers=2, **grid)
    assert [(key(c), c["test"], c["dev"]) for c in whole["cells"]] == [
        (key(c), c["test"], c["dev"]) for c in parallel["cells"]
    ]
    with pytest.raises(E.TransferError, match="already holds a finished transfer run"):
        run(files, tiny, tmp_path, "resumed", **grid)
    with pytest.raises(E.TransferError, match="holds a run of another experiment"):
        (tmp_path / "resumed" / "metrics.json").unlink()
        run(files, tiny, tmp_path, "resumed", inputs=["static"], seeds=[0, 1])


def test_bad_transfer_input(files, tiny, tmp_path):
    one = tokens_file(tmp_path / "one.tokens", 20)
    text = Path(one).read_text().replace("\tNOUN", "\tDET").replace("\tVERB", "\tDET")
    Path(one).write_text(text)
    with pytest.raises(ValueError, match="has 1 label"):
        check_labels(
            {
                "train": E.load_files({"format": "tokens", "train": str(one), "dev": str(one), "test": str(one)})[0][
                    "train"
                ],
                "test": TaggingSet([], []),
            },
            "t",
        )
    with pytest.raises(ValueError, match="leaves 1; a tagger needs at least 10"):
        subset(TaggingSet([["a"]] * 50, [["X"]] * 50), 0.01, 0)
    with pytest.raises(E.TransferError, match="fractions must be a list of numbers in \\(0, 1\\]"):
        E.TransferExperiment.from_dict(experiment(files, fractions=[0]))
    with pytest.raises(E.TransferError, match="inputs must be a non-empty list"):
        E.TransferExperiment.from_dict(experiment(files, inputs=["elmo_l7"]))
    with pytest.raises(E.TransferError, match="unknown key"):
        E.TransferExperiment.from_dict(experiment(files, colour=1))
    with pytest.raises(ValueError, match="unknown option"):
        E.TransferExperiment.from_dict(experiment(files, tagger={"width": 3}))
    with pytest.raises(ValueError, match="fraction 0.02 of 60 training sentences leaves 2; a tagger needs at least 10"):
        run(files, tiny, tmp_path, "small", fractions=[0.02])
    assert not (tmp_path / "small").exists()  # refused before any work
    # a test label never seen in training is counted, and scored as wrong
    unseen_test = tokens_file(tmp_path / "unseen.tokens", 15, 2, extra_label="ADV")
    metrics = run({**files, "test": str(unseen_test)}, tiny, tmp_path, "unseen", inputs=["static"])
    assert metrics["unseen_test_labels"]["count"] == 1 and metrics["unseen_test_labels"]["labels"] == ["ADV"]


def test_the_transfer_command_and_report(files, tiny, tmp_path, capsys):
    from probing_lab.cli import main

    toml = tmp_path / "exp.toml"
    dataset = "".join(f'{role} = "{path}"\n' for role, path in files.items())
    toml.write_text(
        'name = "pos_transfer"\ntask = "token_label"\ninputs = ["static", "elmo"]\n'
        "fractions = [0.5, 1.0]\nseeds = [0, 1]\n"
        "[tagger]\nhidden = 16\nstatic_dim = 8\nmax_epochs = 5\nmin_updates = 20\n"
        f'[dataset]\nformat = "tokens"\n{dataset}',
        encoding="utf-8",
    )
    out = tmp_path / "run"
    assert main(["transfer", str(toml), "--model", tiny, "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    text = capsys.readouterr().out
    assert "pos_transfer (token_label, test accuracy" in text and "| elmo | " in text and "error reduction" in text
    assert len(json.loads((out / "metrics.json").read_text())["cells"]) == 8
    assert main(["transfer", str(tmp_path / "missing.toml")]) == 2
    assert "no such transfer experiment file" in capsys.readouterr().err
