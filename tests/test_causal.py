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
