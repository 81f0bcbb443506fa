"""Attribution: integrated gradients and occlusion against cases with known answers, the agreement
evaluation, the command and its bad input."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from test_lm import tiny_lm

from probing_lab.attribution import (
    deletion_curve,
    integrated_gradients,
    lm_score,
    lm_target,
    occlusion,
    probe_target,
    type_layer,
    visible,
)
from probing_lab.attribution.agreement import evaluate
from probing_lab.cli import main
from probing_lab.lm.agreement import generate_pairs

TOKENS = ["the", "cat", "sat", "the", "dogs"]


def test_words_a_model_does_not_read_get_zero():
    # the forward LM predicting word 2 has read words 0 and 1 only: words 2-4 must get exactly 0
    lm = tiny_lm(seed=1, weight_scale=3.0)
    target = lm_target(lm, TOKENS, 2, "sat", "dogs", "forward")
    ig = integrated_gradients(target, type_layer(lm.bilm, TOKENS), TOKENS, steps=32)
    assert np.all(ig.scores[2:] == 0.0) and np.any(ig.scores[:2] != 0.0)
    assert ig.completeness_error < 0.05 * max(abs(ig.value), 1.0)  # the attributions sum to f(x) - f(0)
    occ = occlusion(lm_score(lm, "sat", "dogs", "forward"), TOKENS, 2)
    assert np.allclose(occ.scores[3:], 0.0, atol=1e-5)  # removing an unread word changes nothing
    backward = lm_target(lm, TOKENS, 2, "sat", "dogs", "backward")
    ig_back = integrated_gradients(backward, type_layer(lm.bilm, TOKENS), TOKENS, steps=32)
    assert np.all(ig_back.scores[:3] == 0.0)  # the backward LM reads words 3 and 4 only
    assert visible(5, 2, "forward") == [0, 1] and visible(5, 2, "backward") == [3, 4]


def test_integrated_gradients_and_occlusion_agree_in_sign_on_a_linear_toy():
    # f = sum over words of <w, e_word>: integrated gradients from zero give each word exactly
    # <w, e_word>, and removing the word changes a bag-of-words score by the same amount
    rng = np.random.default_rng(0)
    table = {w: torch.as_tensor(rng.normal(size=6), dtype=torch.float32) for w in set(TOKENS)}
    w = torch.as_tensor(rng.normal(size=6), dtype=torch.float32)
    embeddings = torch.stack([torch.zeros(6), *(table[t] for t in TOKENS), torch.zeros(6)])[None]
    ig = integrated_gradients(lambda e: (e * w).sum((1, 2)), embeddings, TOKENS, steps=16)
    exact = np.array([float(table[t] @ w) for t in TOKENS])
    assert ig.scores == pytest.approx(exact, abs=1e-5) and ig.completeness_error < 1e-4
    occ = occlusion(lambda toks, pos: sum(float(table[t] @ w) for t in toks), TOKENS, position=-1)
    assert np.array_equal(np.sign(occ.scores), np.sign(ig.scores))


def test_a_probe_target_and_deletion_curves():
    lm = tiny_lm(seed=2)

    torch.manual_seed(0)
    dim = lm.bilm(torch.zeros(1, 3, 50, dtype=torch.long)).layers[1].shape[-1]
    # a linear probe on layer 1's full vectors, as probing.probes.TrainedProbe offers it
    probe = SimpleNamespace(module=torch.nn.Linear(dim, 3), mean=torch.zeros(dim), std=torch.ones(dim))
    target = probe_target(lm.bilm, TOKENS, probe, layer=1, word=2, label=0)
    ig = integrated_gradients(target, type_layer(lm.bilm, TOKENS), TOKENS, steps=32)
    assert ig.scores.shape == (5,) and ig.completeness_error < 0.05 * max(abs(ig.value), 1.0)
    score = lm_score(lm, "sat", "dogs", "forward")
    curve = deletion_curve(score, TOKENS, 3, ranking=[2, 1, 0], candidates=visible(5, 3, "forward"), k_max=3)
    assert len(curve["top"]) == 3 and len(curve["random"]) == 3
    assert curve["top"][2] == pytest.approx(curve["random"][2])  # all three read words deleted either way


def test_the_agreement_evaluation_and_its_metrics():
    pairs = generate_pairs(per_construction=4, seed=0)
    lm = tiny_lm()
    lm.vocab = type(lm.vocab)(
        ["<S>", "</S>", "<UNK>", *sorted({w for p in pairs for w in p.grammatical + p.ungrammatical})]
    )
    lm.weight = torch.randn(len(lm.vocab.words), lm.weight.shape[1])
    lm.bias = torch.zeros(len(lm.vocab.words))
    m = evaluate(lm, pairs, ("simple", "adverb"), per_construction=4, steps=8)
    assert m["kind"] == "attribution" and set(m["constructions"]) == {"simple", "adverb"}
    simple = m["constructions"]["simple"]
    assert simple["pairs"] == 4 and 0 <= simple["scored_right"] <= 4
    if simple["scored_right"]:
        assert 0.0 <= m["subject_top_rate"] <= 1.0 and m["deletion_top"] is not None
    json.dumps(m, allow_nan=False)  # valid JSON: no NaN
    with pytest.raises(ValueError, match=r"no pairs of construction\(s\) \['nope'\]"):
        evaluate(lm, pairs, ("nope",))


def test_bad_input_is_named(capsys):
    lm = tiny_lm()
    with pytest.raises(ValueError, match="position 9 is not a word"):
        lm_target(lm, TOKENS, 9, "sat", "dogs")
    with pytest.raises(ValueError, match="one word to the LM"):
        lm_target(lm, TOKENS, 2, "zebra", "giraffe")  # both <UNK>
    args = [
        "attribute",
        "text",
        "--text",
        "the cat sat",
        "--position",
        "7",
        "--contrast",
        "x",
        "--model",
        "random:cpu-tiny",
    ]
    assert main(args) == 2 and "--position 7 is outside" in capsys.readouterr().err
    assert main(["attribute", "text", "--text", "  ", "--position", "0", "--contrast", "x"]) == 2
    assert "--text is empty" in capsys.readouterr().err
