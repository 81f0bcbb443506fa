"""CKA and the per-layer corpus geometry, against hand-made cases and a direct numpy formula; `compare`."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from probing_lab.analysis import cka_matrix, corpus_geometry, linear_cka
from probing_lab.cli import main

RNG = np.random.default_rng(0)
X = RNG.normal(size=(300, 24))


def direct_cka(A, B):
    """CKA from the definition with centring matrices: HSIC(K, L) = tr(K H L H) / (n - 1)^2."""
    n = len(A)
    H = np.eye(n) - np.ones((n, n)) / n
    K, L = A @ A.T, B @ B.T
    hsic = lambda P, Q: np.trace(P @ H @ Q @ H)  # noqa: E731
    return hsic(K, L) / np.sqrt(hsic(K, K) * hsic(L, L))


@pytest.mark.parametrize("debiased", [False, True])
def test_cka_is_one_for_itself_a_rotation_and_a_scaling(debiased):
    Q, _ = np.linalg.qr(RNG.normal(size=(24, 24)))
    assert linear_cka(X, X, debiased) == pytest.approx(1.0)
    assert linear_cka(X, 7.5 * X @ Q, debiased) == pytest.approx(1.0)
    assert linear_cka(X, X + 3.0, debiased) == pytest.approx(1.0)  # a shift is centred away


def test_cka_of_independent_noise_is_near_zero_when_debiased_and_symmetric():
    Y = RNG.normal(size=(300, 40))
    assert abs(linear_cka(X, Y, debiased=True)) < 0.02
    assert linear_cka(X, Y) > 0.05  # plain CKA is biased upwards with few tokens for the width
    for debiased in (False, True):
        assert linear_cka(X, Y, debiased) == pytest.approx(linear_cka(Y, X, debiased))


def test_cka_agrees_with_the_direct_formula():
    A, B = RNG.normal(size=(20, 5)), RNG.normal(size=(20, 3))
    B = B + A[:, :3]  # related
    assert linear_cka(A, B) == pytest.approx(direct_cka(A, B), rel=1e-10)


def gram_debiased_cka(X, Y):
    """Debiased CKA from the (n, n) Gram matrices, as Nguyen et al. (2021) write it: the reference
    for the feature-space computation in the library."""

    def hsic(K, L):
        n = K.shape[0]
        K, L = K.copy(), L.copy()
        np.fill_diagonal(K, 0.0)
        np.fill_diagonal(L, 0.0)
        KL = K @ L
        return (np.trace(KL) + K.sum() * L.sum() / ((n - 1) * (n - 2)) - 2.0 * KL.sum() / (n - 2)) / (n * (n - 3))

    Xc, Yc = X - X.mean(0), Y - Y.mean(0)
    K, L = Xc @ Xc.T, Yc @ Yc.T
    return hsic(K, L) / np.sqrt(hsic(K, K) * hsic(L, L))


@pytest.mark.parametrize("n", [4, 7, 60])
def test_debiased_cka_from_features_equals_the_gram_formula(n):
    A, B = RNG.normal(size=(n, 9)), RNG.normal(size=(n, 4))
    B = B + 0.5 * A[:, :4]
    assert linear_cka(A, B, debiased=True) == pytest.approx(gram_debiased_cka(A, B), rel=1e-9)


def test_cka_bad_input_is_named():
    with pytest.raises(ValueError, match="same n tokens"):
        linear_cka(X, X[:10])
    with pytest.raises(ValueError, match="at least 4 tokens"):
        linear_cka(X[:3], X[:3], debiased=True)
    assert np.isnan(linear_cka(np.ones((5, 3)), X[:5]))  # constant: no similarity structure


def test_cka_matrix_and_corpus_geometry():
    rows, cols, M = cka_matrix({"a": X, "b": X[:, :5]}, {"c": X})
    assert rows == ["a", "b"] and cols == ["c"] and M[0, 0] == pytest.approx(1.0) and M.shape == (2, 1)
    words = ["the", "bank", "the", "river", "bank"]
    sentence_of = [0, 0, 1, 1, 1]
    type_layer = np.array([[1.0, 0], [0, 1], [1, 0], [1, 1], [0, 1]])  # one vector per word type
    context_layer = RNG.normal(size=(5, 8))
    (same, ctx) = corpus_geometry({"0": type_layer, "1": context_layer}, words, sentence_of)
    assert same["self_similarity"] == pytest.approx(1.0) and same["words"] == 2  # "the" and "bank"
    assert ctx["self_similarity"] < 1.0
    assert same["adjusted_self_similarity"] == pytest.approx(1.0 - same["anisotropy"])


def test_compare_command_writes_the_matrix(tmp_path, capsys):
    (tmp_path / "in.txt").write_text("The bank raised its rates .\nWe sat on the river bank .\n" * 3)
    out = tmp_path / "cmp"
    assert main(["compare", "--model", "random:cpu-tiny", "--input", str(tmp_path / "in.txt"), "--out", str(out),
                 "--layers", "0,1,1f,2b", "--debiased"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "debiased linear CKA on 39 tokens of 6 sentences" in printed
    rows = list(csv.reader(open(out / "cka.csv")))
    assert rows[0][1:] == ["0", "1", "1f", "2b"] and [r[0] for r in rows[1:]] == ["0", "1", "1f", "2b"]
    M = np.array([[float(v) for v in r[1:]] for r in rows[1:]])
    assert np.allclose(np.diag(M), 1.0) and np.allclose(M, M.T)
    assert (out / "cka.png").stat().st_size > 1000 and (out / "geometry.csv").is_file()
    # two models: rows are the first, columns the second
    assert main(["compare", "--model", "random:cpu-tiny", "--model", "random:cpu-small", "--input",
                 str(tmp_path / "in.txt"), "--out", str(tmp_path / "two")]) == 0  # fmt: skip
    assert "rows random:cpu-tiny (seed 0), columns random:cpu-small (seed 0)" in capsys.readouterr().out
    # bad input
    assert main(["compare", "--model", "random:cpu-tiny", "--out", str(out)]) == 2
    assert "--input FILE or --dataset" in capsys.readouterr().err
    assert main(["compare", "--model", "random:cpu-tiny", "--input", str(tmp_path / "in.txt"), "--out", str(out),
                 "--layers", "0f", "--force"]) == 2  # fmt: skip
    assert "'0f' is not a layer" in capsys.readouterr().err
    assert main(["compare", "--model", "random:cpu-tiny", "--input", str(tmp_path / "in.txt"), "--out", str(out),
                 "--layers", "3", "--force"]) == 2  # fmt: skip
    assert "'3' is not a layer" in capsys.readouterr().err
