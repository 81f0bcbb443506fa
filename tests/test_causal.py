"""Causal analysis: INLP removes a planted linear property, and only what it has to."""

from __future__ import annotations

import numpy as np
import pytest

from probing_lab.causal.inlp import inlp, project, random_basis


def planted(n=3000, dim=32, seed=0, labels=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, dim)).astype(np.float32)
    directions = rng.normal(size=(labels - 1, dim))
    scores = X @ directions.T
    y = (scores[:, 0] > 0).astype(np.int64) if labels == 2 else np.digitize(scores[:, 0], [-0.5, 0.5])
    return X, y, directions


@pytest.mark.parametrize("labels", [2, 3])
def test_inlp_removes_a_planted_linear_property_down_to_the_majority(labels):
    X, y, directions = planted(labels=labels)
    result = inlp(X[:2500], y[:2500], X[2500:], y[2500:], n_labels=labels, iterations=10)
    assert result.accuracy[0] > 0.9  # decodable before
    assert result.accuracy[-1] <= result.majority + 0.05  # gone after
    assert 1 <= result.rank <= 6  # a few directions, not the whole space
    np.testing.assert_allclose(result.basis @ result.basis.T, np.eye(result.rank), atol=1e-4)
    w = directions[0] / np.linalg.norm(directions[0])
    assert np.linalg.norm(result.basis @ w) > 0.9  # the planted direction is in the removed subspace
    kept = project(X, result.basis)
    np.testing.assert_allclose(kept @ result.basis.T, 0, atol=1e-4)


def test_removing_the_whole_space_leaves_nothing_to_decode():
    """A property spread over every direction (17 labels in 16 dimensions): INLP removes the whole space, and
    what is left must not let a probe find the labels again in the rounding residue (the probe standardises
    its inputs, so a float32 residue of the removed directions, correlated with X, would be read)."""
    rng = np.random.default_rng(0)
    X = (30 * rng.normal(size=(3000, 16))).astype(np.float32)
    y = np.argmax(X @ rng.normal(size=(16, 17)), axis=1)
    result = inlp(X[:2500], y[:2500], X[2500:], y[2500:], n_labels=17, iterations=10)
    assert result.accuracy[0] > 0.8 and result.rank == 16
    assert result.accuracy[-1] <= result.majority + 0.02
    assert np.abs(project(X, result.basis)).max() < 1e-3


def test_a_random_subspace_of_the_same_rank_leaves_the_property():
    X, y, _ = planted()
    basis = random_basis(32, 2, seed=3)
    np.testing.assert_allclose(basis @ basis.T, np.eye(2), atol=1e-5)
    after = inlp(project(X[:2500], basis), y[:2500], project(X[2500:], basis), y[2500:], 2, iterations=0)
    assert after.accuracy[0] > 0.85


def test_bad_inlp_input_is_refused():
    X, y, _ = planted()
    with pytest.raises(ValueError, match="at least two labels"):
        inlp(X, np.zeros(len(X), dtype=np.int64), X, np.zeros(len(X), dtype=np.int64), 1)
    with pytest.raises(ValueError, match="larger than the layer's width"):
        inlp(X, y, X, y, 2, max_rank=33)
    with pytest.raises(ValueError, match="larger than the layer's width"):
        random_basis(32, 40, 0)


def _have_ewt() -> bool:
    from probing_lab.datasets import resolve_data_dir

    root, _ = resolve_data_dir()
    return root is not None and (root / "ud-english-ewt" / "en_ewt-ud-train.conllu").exists()


@pytest.mark.skipif(not _have_ewt(), reason="UD English-EWT not in the data directory")
def test_the_amnesic_command_writes_a_run_per_site_and_refuses_bad_input(tmp_path, capsys):
    import json

    from test_lm import _lm_dir

    from probing_lab.cli import main

    model = _lm_dir(tmp_path)
    out = tmp_path / "amnesic"
    args = ["causal", "amnesic", "--property", "number", "--layers", "1,2", "--directions", "forward",
            "--train-sentences", "150", "--dev-sentences", "40", "--eval-sentences", "10", "--iterations", "3",
            "--random-draws", "2", "--agreement-pairs", "3", "--model", str(model), "--quiet"]  # fmt: skip
    assert main([*args, "--out", str(out)]) == 0
    for layer in (1, 2):
        m = json.loads((out / f"number-L{layer}-forward" / "metrics.json").read_text())
        assert m["kind"] == "amnesic" and m["layer"] == layer and m["direction"] == "forward"
        assert m["labels"] == ["Plur", "Sing"] and len(m["ppl_after_random"]) == 2
        assert m["probe_after"] <= m["probe_before"] and len(m["inlp_accuracy"]) >= 1
        assert set(m["agreement"]) == {"before", "after", "after_random"}
        assert m["rank"] > 0 or m["ppl_after"] == m["ppl_before"]  # nothing removed: nothing changes
    assert "| number | L1 forward |" in (out / "summary.md").read_text()
    assert main([*args, "--out", str(out)]) == 2  # an existing run is not replaced without --force
    assert "--force" in capsys.readouterr().err
    assert main([*args[:5], "5", *args[6:], "--out", str(tmp_path / "x")]) == 2
    assert "layers 0-2" in capsys.readouterr().err
    assert main([*args[:7], "sideways", *args[8:], "--out", str(tmp_path / "y")]) == 2
    assert "--directions" in capsys.readouterr().err


PATCH_WORDS = ["<S>", "</S>", "<UNK>", "The", "author", "authors", "near", "the", "guards", "laughs", "laugh", "."]


def patch_lm():
    import torch
    from conftest import TINY_MODEL

    from probing_lab.elmo import ElmoBiLM, ElmoOptions
    from probing_lab.lm.language_model import LanguageModel
    from probing_lab.training.vocab import Vocabulary

    g = torch.Generator().manual_seed(0)
    bilm = ElmoBiLM(ElmoOptions.from_dict(TINY_MODEL))
    bilm.reset_parameters(g)
    n = len(PATCH_WORDS)
    return LanguageModel(
        bilm.eval(), torch.randn(n, 8, generator=g), torch.randn(n, generator=g), Vocabulary(PATCH_WORDS), "t"
    )


def test_patching_a_sentence_with_itself_changes_nothing():
    from probing_lab.causal.patching import _layer_outputs, _logit_difference
    from probing_lab.elmo.interventions import copy_from

    lm = patch_lm()
    tokens = ("The", "author", "near", "the", "guards", "laughs", ".")
    plain = _logit_difference(lm, tokens, 5, "laughs", "laugh", "forward")
    for layer, output in enumerate(_layer_outputs(lm, tokens)):
        for p in range(len(tokens) + 2):
            iv = [copy_from(layer, "forward", output[..., :8], positions=[p])]
            assert _logit_difference(lm, tokens, 5, "laughs", "laugh", "forward", iv) == plain


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_patching_the_only_word_that_differs_restores_the_clean_decision(direction):
    from probing_lab.causal.patching import patch_pair
    from probing_lab.lm.agreement import MinimalPair

    pair = MinimalPair(
        "prepositional_phrase", "singular", 5, ("The", "author", "near", "the", "guards", "laughs", "."),
        ("The", "author", "near", "the", "guards", "laugh", "."),
    )  # fmt: skip
    r = patch_pair(patch_lm(), pair, direction)
    assert r.effect.shape == (3, 9) and r.tokens[0] == "<S>" and r.tokens[-1] == "</S>"
    if direction == "forward":  # the subject (position 2) differs; the verb (token 5) is predicted at position 5
        assert r.effect[0, 2] == pytest.approx(1.0, abs=1e-5)  # its type vector carries the whole difference
        assert r.effect[2, 5] == pytest.approx(1.0, abs=1e-5)  # the state that predicts the verb
        np.testing.assert_allclose(r.effect[:, :2], 0, atol=1e-6)  # <S> and "The": the same in both
        assert np.isnan(r.effect[:, 6:]).all()  # read after the verb's prediction: cannot matter
        assert r.changed == (2,) and r.strongest_other()[:2] == (2, 5)  # not the trivial changed word
    else:  # the verb (position 6) differs; the subject (token 1) is predicted at position 3
        assert r.effect[0, 6] == pytest.approx(1.0, abs=1e-5)
        assert r.effect[2, 3] == pytest.approx(1.0, abs=1e-5)
        np.testing.assert_allclose(r.effect[:, 7:], 0, atol=1e-6)  # "." and </S>
        assert np.isnan(r.effect[:, :3]).all()
        assert r.changed == (6,) and r.strongest_other()[:2] == (2, 3)


def test_patching_refuses_sentences_of_different_lengths_naming_them():
    from probing_lab.causal.patching import patch_pair
    from probing_lab.lm.agreement import MinimalPair

    pair = MinimalPair(
        "simple", "singular", 2, ("The", "author", "laughs", "."), ("The", "author", "laugh", "now", ".")
    )
    with pytest.raises(ValueError, match="same length: 'The author laughs .' has 4 tokens"):
        patch_pair(patch_lm(), pair, "backward")
    from probing_lab.causal.patching import patch_tokens

    clean, corrupt = ("The", "author", "laughs", "."), ("The", "authors", "laughs", ".")
    with pytest.raises(ValueError, match="target 4 is not a token of 'The author laughs .' \\(0-3\\)"):
        patch_tokens(patch_lm(), clean, corrupt, 4, "laughs", "laugh", "forward")
    with pytest.raises(ValueError, match="one word to the LM"):
        patch_tokens(patch_lm(), clean, corrupt, 2, "sings", "sing", "forward")


# --- number units -----------------------------------------------------------------------------


def test_decision_states_of_a_padded_batch_are_those_of_each_sentence_alone():
    import torch

    from probing_lab.causal.units import _decision_rows, _final_cells, decision_states, trajectories
    from probing_lab.elmo import batch_to_ids
    from probing_lab.lm.agreement import read_pairs

    lm = patch_lm()
    pairs = read_pairs()[:2] + [p for p in read_pairs() if p.construction == "object_relative"][:2]
    for direction, side in (("forward", 0), ("backward", 1)):
        batched = decision_states(lm.bilm, pairs, direction)
        assert batched.shape == (4, 2 * 16)
        for i, p in enumerate(pairs):
            alone = _final_cells(lm.bilm, [_decision_rows(p, direction)])[:, side, 0].reshape(-1).numpy()
            np.testing.assert_allclose(batched[i], alone, atol=1e-6)
    # a trajectory's last forward step and first backward step are the whole sentence's final states
    tokens = pairs[0].grammatical
    whole = _final_cells(lm.bilm, [batch_to_ids([list(tokens)])[0]])
    units = [(1, 3), (2, 7)]
    forward = trajectories(lm.bilm, [tokens], "forward", units)[0]
    backward = trajectories(lm.bilm, [tokens], "backward", units)[0]
    assert forward.shape == (len(tokens) + 2, 2)
    np.testing.assert_allclose(forward[-1], [whole[0, 0, 0, 3], whole[1, 0, 0, 7]], atol=1e-6)
    np.testing.assert_allclose(backward[0], [whole[0, 1, 0, 3], whole[1, 1, 0, 7]], atol=1e-6)
    assert not torch.equal(torch.as_tensor(forward[0]), torch.as_tensor(forward[-1]))


def test_the_diagnostic_classifier_ranks_a_planted_number_unit_first():
    from probing_lab.causal.units import rank_units

    rng = np.random.default_rng(0)
    numbers = ["plural" if i % 2 else "singular" for i in range(200)]
    states = rng.normal(size=(200, 2 * 16))
    states[:, 16 + 5] += np.where(np.array(numbers) == "plural", 2.0, -2.0)  # layer 2, unit 5
    ranking, accuracy = rank_units(states, numbers, 16)
    assert ranking[0][:2] == (2, 5) and accuracy > 0.9
    with pytest.raises(ValueError, match="one number only"):
        rank_units(states, ["plural"] * 200, 16)


def test_number_units_ablates_the_top_and_random_units_and_refuses_bad_settings():
    from probing_lab.causal.units import UnitsConfig, agreement, number_units, sample_pairs
    from probing_lab.lm.agreement import read_pairs

    lm = patch_lm()
    pairs = read_pairs()
    config = UnitsConfig(pairs_per_construction=3, rank_pairs_per_construction=12, top=4, random_units=3, joint=2,
                         trajectory_units=2)  # fmt: skip
    m = number_units(lm, pairs, config)
    assert m["kind"] == "units" and m["pairs"] == 15 and m["rank_pairs"] == 60
    assert len(m["units"]) == 8 and len(m["random_units"]) == 6  # per direction
    assert {u["direction"] for u in m["units"]} == {"forward", "backward"}
    top = {(u["direction"], u["layer"], u["unit"]) for u in m["units"]}
    assert not top & {(u["direction"], u["layer"], u["unit"]) for u in m["random_units"]}
    assert all(1 <= u["layer"] <= 2 and 0 <= u["unit"] < 16 for u in m["units"])
    for direction in ("forward", "backward"):
        assert set(m["joint"][direction]) == {"units", "top", "random"}
        t = m["trajectories"][direction]
        assert t["construction"] == "prepositional_phrase" and len(t["singular"]["mean"]) == 2
        assert len(t["singular"]["mean"][0]) == len(t["tokens"])
    # the effect is the drop against the unablated scores, which agreement() reproduces exactly
    assert agreement(lm, sample_pairs(pairs, 3, 0)) == m["before"]
    for bad, match in (
        (UnitsConfig(top=30, random_units=3), "a direction has 32 units"),
        (UnitsConfig(top=4, random_units=3, joint=5), "joint \\(5\\) must not exceed top"),
        (UnitsConfig(pairs_per_construction=0), "pairs_per_construction must be at least 1"),
    ):
        with pytest.raises(ValueError, match=match):
            number_units(lm, pairs, bad)


def test_the_units_and_patch_commands_write_runs_and_refuse_bad_input(tmp_path, capsys):
    import json

    import torch

    from probing_lab.cli import main
    from probing_lab.elmo import save_checkpoint
    from probing_lab.lm.agreement import MinimalPair, write_pairs
    from probing_lab.training.checkpoint import save_softmax

    lm = patch_lm()
    save_checkpoint(lm.bilm, tmp_path / "model")
    save_softmax(tmp_path / "model", lm.weight, lm.bias, lm.vocab, dtype=torch.float32)
    pairs = []
    for construction, middle in (("simple", []), ("prepositional_phrase", ["near", "the", "guards"])):
        for number, subject, right, wrong in (("singular", "author", "laughs", "laugh"),
                                              ("plural", "authors", "laugh", "laughs")):  # fmt: skip
            good = ("The", subject, *middle, right, ".")
            pairs += [MinimalPair(construction, number, 2 + len(middle), good, (*good[:-2], wrong, "."))] * 4
    write_pairs(pairs, tmp_path / "pairs.jsonl")
    common = ["--model", str(tmp_path / "model"), "--pairs-file", str(tmp_path / "pairs.jsonl"), "--quiet"]
    units = ["causal", "units", "--pairs", "2", "--top", "3", "--random-units", "3", "--joint", "2", *common]
    assert main([*units, "--out", str(tmp_path / "units")]) == 0
    m = json.loads((tmp_path / "units" / "metrics.json").read_text())
    assert m["kind"] == "units" and len(m["units"]) == 6 and set(m["random_unit_effect"]) == {"forward", "backward"}
    assert (tmp_path / "units" / "units.png").stat().st_size > 1000
    assert "| mean of 3 random units |" in (tmp_path / "units" / "summary.md").read_text()
    assert main(["causal", "patch", "--pairs", "2", *common, "--out", str(tmp_path / "patch")]) == 0
    m = json.loads((tmp_path / "patch" / "metrics.json").read_text())
    effect = m["constructions"]["prepositional_phrase"]["forward"]["effect"]
    assert len(effect) == 3 and len(effect[0]) == 9 and effect[2][5] == pytest.approx(1.0, abs=1e-3)
    assert (tmp_path / "patch" / "simple.png").is_file() and (tmp_path / "patch" / "prepositional_phrase.png").is_file()
    capsys.readouterr()
    # bad input: unknown construction, more units than a direction has, an existing run, a missing pairs file
    assert main(["causal", "patch", "--constructions", "passive", *common, "--out", str(tmp_path / "x")]) == 2
    assert "unknown ['passive']" in capsys.readouterr().err
    assert main([*units[:5], "30", *units[6:], "--out", str(tmp_path / "y")]) == 2
    assert "a direction has 32 units" in capsys.readouterr().err
    assert main([*units, "--out", str(tmp_path / "units")]) == 2 and "--force" in capsys.readouterr().err
    assert main([*units[:-2], str(tmp_path / "none.jsonl"), "--quiet", "--out", str(tmp_path / "z")]) == 2
    assert "no minimal pairs" in capsys.readouterr().err
    assert not any((tmp_path / d).exists() for d in "xyz")


def test_report_lists_causal_runs_next_to_probe_runs(tmp_path, capsys):
    import json

    from probing_lab.causal.report import is_causal_run, load_causal_run
    from probing_lab.cli import main

    site = {"kind": "amnesic", "property": "number", "layer": 2, "direction": "forward", "rank": 6, "majority": 0.75,
            "probe_before": 0.94, "probe_after": 0.75, "ppl_before": 222.0, "ppl_after": 255.0,
            "ppl_after_random": [229.0, 234.0], "model": "m"}  # fmt: skip
    (tmp_path / "amnesic" / "number-L2-forward").mkdir(parents=True)
    (tmp_path / "amnesic" / "number-L2-forward" / "metrics.json").write_text(json.dumps(site))
    patch = {"kind": "patch", "model": "m", "constructions": {"simple": {"forward": {
        "pairs": 2, "tokens": ["<S>", "The", "cat", "sleeps", ".", "</S>"], "clean": 2.0, "corrupt": -1.0,
        "changed": [2],
        "effect": [[0.0, 0.0, 0.9, None, None, None], [0.0, 0.1, 0.5, None, None, None]]}}}}  # fmt: skip
    (tmp_path / "patch").mkdir()
    (tmp_path / "patch" / "metrics.json").write_text(json.dumps(patch))
    assert is_causal_run(tmp_path / "amnesic") and len(load_causal_run(tmp_path / "patch")) == 1
    assert not is_causal_run(tmp_path) and not is_causal_run(tmp_path / "nowhere")
    assert main(["report", str(tmp_path / "amnesic"), str(tmp_path / "patch")]) == 0
    out = capsys.readouterr().out
    assert "### causal amnesic" in out
    assert "| number | L2 forward | 6 | 0.940 | 0.750 | 0.750 | 222.0 | 255.0 | 231.5 |" in out
    assert "| simple | forward | 2 | 2.00 / -1.00 | L1 at 'The' (0.10) |" in out  # 'cat' is the changed word
