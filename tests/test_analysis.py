"""probing_lab.analysis: hand-computed small cases for the geometry, projections and target finding."""

from __future__ import annotations

import math
import zlib
from types import SimpleNamespace

import numpy as np
import pytest

from probing_lab.analysis import geometry as G
from probing_lab.analysis import polysemy as P
from probing_lab.analysis import projections as J
from probing_lab.analysis import samples as S
from probing_lab.features.activations import embed_activations, layer_keys, layer_label

R = 1 / math.sqrt(2)


# --- cosine -----------------------------------------------------------------------------------


def test_cosine_matrix_by_hand():
    X = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0], [0.0, 0.0]])
    C = G.cosine_matrix(X)
    expected = np.array([[1, 0, R, 0], [0, 1, R, 0], [R, R, 1, 0], [0, 0, 0, 0]])
    np.testing.assert_allclose(C, expected, atol=1e-12)
    np.testing.assert_allclose(G.cosine_matrix(X[:1], X[1:3]), [[0, R]], atol=1e-12)


# --- silhouette -------------------------------------------------------------------------------


def test_silhouette_two_well_separated_clusters_is_one():
    X = np.array([[1, 0], [2, 0], [0, 1], [0, 5]], dtype=float)  # cosine distance 0 inside, 1 across
    assert G.silhouette_cosine(X, ["a", "a", "b", "b"]) == pytest.approx(1.0)


def test_silhouette_by_hand_with_a_singleton():
    # d(p1,p2) = d(p2,p3) = 1 - 1/sqrt2, d(p1,p3) = 1.
    # s1 = (1 - d)/1 = 1/sqrt2; s2: a = b = d -> 0; s3 alone in its sense -> 0.
    X = np.array([[1, 0], [1, 1], [0, 1]], dtype=float)
    assert G.silhouette_cosine(X, ["a", "a", "b"]) == pytest.approx(R / 3)


def test_silhouette_matches_sklearn():
    from sklearn.metrics import silhouette_score

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 5))
    labels = rng.integers(0, 3, size=30).astype(str)
    assert G.silhouette_cosine(X, labels) == pytest.approx(silhouette_score(X, labels, metric="cosine"), abs=1e-9)


def test_silhouette_undefined_cases():
    X = np.eye(3)
    assert G.silhouette_cosine(X, ["a", "a", "a"]) is None  # one sense
    assert G.silhouette_cosine(X, ["a", "b", "c"]) is None  # every point its own sense
    with pytest.raises(ValueError, match="one label per row"):
        G.silhouette_cosine(X, ["a", "b"])


# --- leave-one-out nearest neighbour ----------------------------------------------------------


def test_loo_nn_separated_and_crossed():
    X = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9]])
    acc, chance = G.loo_nn_accuracy(X, ["a", "a", "b", "b"])
    assert acc == 1.0 and chance == pytest.approx(1 / 3)  # 1 same-sense point among 3 others
    acc, _ = G.loo_nn_accuracy(X, ["a", "b", "a", "b"])  # every nearest neighbour has the other sense
    assert acc == 0.0


def test_loo_nn_identical_vectors_score_chance():
    X = np.ones((4, 3))
    acc, chance = G.loo_nn_accuracy(X, ["a", "a", "a", "b"])
    # a: 2 of 3 tied neighbours share the sense (x3), b: 0 of 3 -> (2/3*3 + 0)/4
    assert acc == pytest.approx(0.5) and chance == pytest.approx(0.5)
    assert G.loo_nn_accuracy(X, ["a"] * 4) == (None, None)


# --- self-similarity and the anisotropy baseline ----------------------------------------------


def test_self_similarity_by_hand():
    X = np.array([[1, 0], [0, 1], [1, 1]], dtype=float)  # pair cosines 0, 1/sqrt2, 1/sqrt2
    assert G.self_similarity(X) == pytest.approx(2 * R / 3)
    assert G.self_similarity(X[:1]) is None


def test_random_pair_cosine_exact_and_sampled():
    X = np.array([[1, 0], [0, 1], [1, 1]], dtype=float)
    assert G.random_pair_cosine(X) == pytest.approx(2 * R / 3)  # few tokens: all pairs
    same = np.tile([[1.0, 2.0, 3.0]], (500, 1))
    assert G.random_pair_cosine(same, n_pairs=100) == pytest.approx(1.0)
    rng = np.random.default_rng(1)
    Y = rng.normal(size=(300, 4)) + 3.0  # shifted cloud: strongly anisotropic
    a, b = G.random_pair_cosine(Y, n_pairs=400, seed=5), G.random_pair_cosine(Y, n_pairs=400, seed=5)
    assert a == b and a > 0.7
    assert abs(G.random_pair_cosine(rng.normal(size=(300, 50)), n_pairs=3000)) < 0.05  # isotropic: ~0


def test_separation_record():
    X = np.array([[1, 0], [2, 0], [0, 1], [0, 3]], dtype=float)
    sep = G.separation(X, ["a", "a", "b", "b"], baseline=0.25)
    assert sep["silhouette"] == pytest.approx(1) and sep["nn_accuracy"] == 1
    assert sep["within_sense"] == pytest.approx(1) and sep["between_senses"] == pytest.approx(0)
    assert sep["self_similarity"] == pytest.approx(2 / 6)  # 2 of the 6 pairs have cosine 1
    assert sep["self_similarity_adjusted"] == pytest.approx(2 / 6 - 0.25)


def test_nearest_contexts():
    corpus = np.array([[0, 1], [1, 0.1], [1, 0], [-1, 0]], dtype=float)
    hits = G.nearest_contexts(np.array([1.0, 0.0]), corpus, k=2)
    assert [i for i, _ in hits] == [2, 1]
    assert hits[0][1] == pytest.approx(1.0) and hits[1][1] == pytest.approx(1 / math.sqrt(1.01))
    assert [i for i, _ in G.nearest_contexts(np.array([1.0, 0.0]), corpus, k=10, exclude=[2])] == [1, 0, 3]


# --- projections ------------------------------------------------------------------------------


def test_pca_matches_sklearn_up_to_sign():
    from sklearn.decomposition import PCA

    X = np.random.default_rng(0).normal(size=(40, 6)) * np.arange(1, 7)
    ours = J.project(X, "pca", unit=False)
    theirs = PCA(n_components=2).fit_transform(X)
    np.testing.assert_allclose(np.abs(ours), np.abs(theirs), atol=1e-8)
    np.testing.assert_array_equal(ours, J.project(X, "pca", unit=False))


def test_pca_degenerate_inputs():
    line = np.array([[0, 0], [1, 1], [2, 2], [3, 3]], dtype=float)
    out = J.project(line, "pca", unit=False)
    assert out.shape == (4, 2) and np.allclose(out[:, 1], 0)
    np.testing.assert_allclose(
        np.abs(out[:, 0]), np.array([1.5, 0.5, 0.5, 1.5]) * math.sqrt(2)
    )  # distance from the mean
    assert np.all(J.project(np.ones((5, 3)), "pca") == 0)  # identical points: one dot at the origin
    assert J.project(np.ones((1, 3)), "pca").shape == (1, 2)


def test_projection_errors():
    with pytest.raises(ValueError, match="unknown projection"):
        J.project(np.zeros((5, 2)), "lda")
    with pytest.raises(ValueError, match="at least 5 points"):
        J.project(np.eye(3), "tsne")
    with pytest.raises(ValueError, match="NaN"):
        J.project(np.array([[np.nan, 1.0]] * 6), "pca")


@pytest.mark.parametrize("method", ["tsne", "umap"])
def test_identical_points_give_one_dot_not_a_crash(method):
    # t-SNE's PCA init divides by the spread: identical rows (L0 of one word) used to segfault it
    X = np.tile(np.random.default_rng(0).normal(size=(1, 6)), (16, 1)) + 1e-9
    assert np.all(J.project(X, method) == 0)


def test_tsne_seeded():
    X = np.random.default_rng(0).normal(size=(12, 5))
    a, b = J.project(X, "tsne", seed=3), J.project(X, "tsne", seed=3)
    assert a.shape == (12, 2) and np.allclose(a, b)


def test_umap_seeded_and_warm_up():
    J.warm_up_umap()
    assert J.umap_is_warm() and J.warm_up_umap() < 0.01  # second call is free
    X = np.random.default_rng(0).normal(size=(30, 5))
    a, b = J.project(X, "umap", seed=1), J.project(X, "umap", seed=1)
    assert a.shape == (30, 2) and np.allclose(a, b)


# --- finding the target -----------------------------------------------------------------------


def test_parse_marked():
    assert P.parse_marked(["the", "[bank]", "closed"]) == (["the", "bank", "closed"], 1)
    assert P.parse_marked(["the", "[", "bank", "]", "closed"]) == (["the", "bank", "closed"], 1)
    assert P.parse_marked(["no", "mark"]) == (["no", "mark"], None)


def test_inflections_and_find_target():
    assert {"bank", "banks", "banked", "banking"} <= P.inflections("bank")
    assert {"parties", "partied"} <= P.inflections("party") and "running" in P.inflections("run")
    assert P.find_target(["Two", "Banks", "merged"], "bank") == 1
    assert P.find_target(["banks", "and", "a", "bank"], "bank") == 3  # exact form first
    assert P.find_target(["an", "embankment"], "bank") is None
    assert P.find_target(["a", "bank"], "  ") is None


def test_parse_lines():
    text = "I paid it into the bank. | money\n\n  The river bank flooded. |river \nNo label here.\n"
    assert P.parse_lines(text) == [
        ("I paid it into the bank.", "money"),
        ("The river bank flooded.", "river"),
        ("No label here.", None),
    ]


class TypeAndContext:
    """Fake 3-layer encoder: L0 depends on the word only (like the char CNN), L1/L2 also on the
    neighbours, so contexts differ; deterministic, no model needed."""

    n_layers, dim = 3, 8

    @staticmethod
    def _word(w):
        return np.random.default_rng(zlib.crc32(w.lower().encode())).normal(size=8)

    def embed(self, sentences):
        out = []
        for s in sentences:
            L0 = np.stack([self._word(w) for w in s]) if s else np.zeros((0, 8))
            L1 = (
                np.stack([L0[i] + 0.8 * sum(L0[j] for j in range(len(s)) if j != i) for i in range(len(s))])
                if s
                else L0
            )
            out.append(np.stack([L0, L1, L1 * 2 + 1]).astype(np.float32))
        return out


def test_embed_tokens_layout():
    tv = embed_activations(TypeAndContext(), [["a", "b"], ["c"]])
    assert tv.keys == layer_keys(3) == ["0", "1", "2", "mean"]
    assert tv.layer("0").shape == (3, 8) and list(tv.offsets) == [0, 2, 3] and tv.row(1, 0) == 2
    np.testing.assert_allclose(tv.layer("mean"), (tv.layer("0") + tv.layer("1") + tv.layer("2")) / 3, rtol=1e-6)
    assert tv.sentence(1).shape == (3, 1, 8)
    assert layer_label("1") == "L1" and layer_label("mean") == "mean" and layer_label("mix") == "mix"
    with pytest.raises(ValueError, match="no tokens"):
        embed_activations(TypeAndContext(), [])


def test_collect_reports_missing_and_l0_collapses():
    sentences = [
        "I paid the cheque into the bank .",
        "No target in this one .",
        "We sat on the river bank .",
        "The [bank] raised its rates .",
        "Fish swim near the bank of the stream .",
    ]
    occ = P.collect(TypeAndContext(), sentences, target="bank", labels=["money", None, "river", "money", "river"])
    assert occ.missing == [1] and occ.source == [0, 2, 3, 4] and occ.n == 4
    assert occ.positions == [6, 5, 1, 4] and occ.sentences[2][1] == "bank"  # the mark was removed
    assert occ.context(1) == "We sat on the river [bank] ."
    assert occ.context(3, ("<b>", "</b>"), window=2) == "… near the <b>bank</b> of the …"
    sep = occ.separation()
    # L0 is a type vector: the same for every occurrence -> similarity 1, no separation
    assert sep["0"]["self_similarity"] == pytest.approx(1.0)
    assert sep["0"]["silhouette"] == pytest.approx(0.0, abs=1e-6)
    assert sep["0"]["nn_accuracy"] == pytest.approx(sep["0"]["nn_chance"])
    assert sep["1"]["self_similarity"] < 0.999
    assert occ.labelled and occ.baselines["0"] is not None
    with pytest.raises(ValueError, match="none of the 2 sentences contains the word 'bank'"):
        P.collect(TypeAndContext(), ["No .", "Nothing ."], target="bank")


def test_l0_collapse_with_a_real_random_model():
    from probing_lab.elmo import Embedder
    from probing_lab.model_loading import load_model

    embedder = Embedder(load_model("random:cpu-tiny").model)
    occ = P.collect(
        embedder,
        ["The bank closed early .", "They fished from the bank .", "A bank loan ."],
        target="bank",
        labels=["money", "river", "money"],
    )
    sep = occ.separation()
    assert sep["0"]["self_similarity"] == pytest.approx(1.0, abs=1e-5)
    assert sep["0"]["silhouette"] == pytest.approx(0.0, abs=1e-4)
    assert sep["1"]["self_similarity"] < 1 - 1e-4 and sep["2"]["self_similarity"] < 1 - 1e-4
    assert set(occ.vectors) == {"0", "1", "2", "mean"} and occ.vectors["1"].shape == (3, embedder.dim)


def test_labelled_positions_from_records():
    def tok(form, sense=None):
        return SimpleNamespace(form=form, sense=sense)

    records = [
        SimpleNamespace(tokens=[tok("the"), tok("bank", "bank_(geography)")]),
        SimpleNamespace(tokens=[tok("x")]),
    ]
    assert P.labelled_positions(records) == ([["the", "bank"], ["x"]], [1, None], ["bank_(geography)", None])


# --- token tables -----------------------------------------------------------------------------


def _sentence(forms, upos=None, sid=None):
    tokens = [SimpleNamespace(form=f, upos=(upos or ["X"] * len(forms))[i], deprel="dep") for i, f in enumerate(forms)]
    return SimpleNamespace(tokens=tokens, id=sid)


def test_sample_and_token_rows():
    corpus = [_sentence([f"w{i}", "the"], sid=f"s{i}") for i in range(10)] + [_sentence([])]
    a, b = S.sample_sentences(corpus, 4, seed=2), S.sample_sentences(corpus, 4, seed=2)
    assert [s.id for s in a] == [s.id for s in b] and len(a) == 4
    assert [s.id for s in a] == sorted((s.id for s in a), key=lambda x: int(x[1:]))  # corpus order
    assert len(S.sample_sentences(corpus, 100)) == 10  # the empty sentence is dropped
    with pytest.raises(ValueError):
        S.sample_sentences(corpus, 0)
    counts = S.word_counts(corpus[:3])
    rows = S.token_rows([_sentence(["The", "w1", "zzz"], ["DET", "NOUN", "X"])], counts)
    assert [r["count"] for r in rows] == [3, 1, 0] and [r["oov"] for r in rows] == [False, False, True]
    assert rows[0]["frequency"] == "1-9" and rows[2]["frequency"] == "0 (OOV)" and rows[1]["upos"] == "NOUN"
    assert rows[1]["context"] == "The <b>w1</b> zzz"
    assert [S.frequency_band(c) for c in (0, 5, 50, 500, 5000)] == list(S.FREQUENCY_BANDS)


# --- sense baselines: linear accuracy, a supervised view, bag of context ------------------------


def test_linear_cv_accuracy_separated_identical_and_undefined():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(10, 5)) + [6, 0, 0, 0, 0], rng.normal(size=(10, 5)) - [6, 0, 0, 0, 0]
    X, labels = np.vstack([a, b]), ["a"] * 10 + ["b"] * 10
    assert G.linear_cv_accuracy(X, labels) == 1.0
    # identical vectors carry no sense: each fold predicts its training majority
    assert G.linear_cv_accuracy(np.ones((12, 4)), ["a"] * 8 + ["b"] * 4) == pytest.approx(8 / 12)
    # balanced senses: chance, not below it (an unweighted model predicted each fold's training
    # majority, the sense its test part has more of: 0.367 on the Polysemy page's 8 + 8)
    assert G.linear_cv_accuracy(np.ones((16, 4)), ["a"] * 8 + ["b"] * 8) == pytest.approx(0.5)
    assert G.linear_cv_accuracy(X[:3], ["a", "a", "b"]) is None  # a sense with one occurrence
    assert G.separation(X, labels)["linear_accuracy"] == 1.0


@pytest.mark.parametrize("n_senses", [2, 3, 4])
def test_the_sense_classifier_is_scikit_learns_optimum(n_senses):
    # Newton in the rows' span reaches the optimum of LogisticRegression(class_weight="balanced"):
    # binary log loss for two senses, multinomial for more; unbalanced senses; more dimensions than
    # rows and fewer. Its objective (written out here) is at least as low as scikit-learn's at a tight
    # tolerance (whose L-BFGS stops a few 1e-11 above it), and the scores agree
    from sklearn.linear_model import LogisticRegression

    from probing_lab.analysis.logistic import BalancedLogistic

    def objective(X, labels, W, b):
        classes, codes = np.unique(labels, return_inverse=True)
        weights = len(labels) / (len(classes) * np.bincount(codes))[codes]
        S = X @ W + b
        if len(classes) == 2:
            loss = np.logaddexp(0, S[:, 0]) - (codes == 1) * S[:, 0]
        else:
            loss = np.logaddexp.reduce(S, 1) - S[np.arange(len(S)), codes]
        return (weights * loss).sum() + 0.5 * (W * W).sum()

    rng = np.random.default_rng(n_senses)
    for n, dim in ((30, 512), (40, 6)):
        labels = np.array([f"s{i}" for i in rng.integers(0, n_senses, n)])
        labels[:n_senses] = [f"s{i}" for i in range(n_senses)]
        centres = rng.normal(size=(n_senses, dim))
        X = rng.normal(size=(n, dim)) + centres[[int(s[1:]) for s in labels]]
        reference = LogisticRegression(class_weight="balanced", tol=1e-12, max_iter=100_000).fit(X, labels)
        mine = BalancedLogistic().fit(X, labels)
        ours = objective(X, labels, mine.Q @ mine.coef_, mine.intercept_)
        assert ours <= objective(X, labels, reference.coef_.T, reference.intercept_) + 1e-12
        new = rng.normal(size=(25, dim))
        scores, theirs = mine.decision_function(new), reference.decision_function(new)
        if n_senses > 2:  # the multinomial scores are defined up to a shift common to all classes
            scores, theirs = scores - scores.mean(1, keepdims=True), theirs - theirs.mean(1, keepdims=True)
        assert np.allclose(scores, theirs, atol=1e-3)
        assert list(mine.classes_) == list(reference.classes_)
        assert (mine.predict(new) == reference.predict(new)).all()
    with pytest.raises(ValueError, match="two classes"):
        BalancedLogistic().fit(X[:4], ["a"] * 4)


def test_supervised_view_places_points_by_a_classifier_that_never_saw_them():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(20, 50))
    labels = ["a"] * 10 + ["b"] * 10
    X[:10, 0] += 5
    points = G.supervised_2d(X, labels)
    assert points.shape == (20, 2) and points[:10, 0].max() < points[10:, 0].min()  # positive score: sense b
    # random labels on random vectors: a fit to all 20 points would separate them (50 dims > 20
    # points), the out-of-fold scores do not
    noise = G.supervised_2d(rng.normal(size=(20, 50)), labels)
    assert not ((noise[:10, 0] > 0).all() and (noise[10:, 0] < 0).all())
    three = G.supervised_2d(X[:12], ["a", "b", "c"] * 4)
    assert three.shape == (12, 2)
    assert G.supervised_2d(X[:3], ["a", "a", "b"]) is None


def test_bag_of_context_is_the_mean_of_the_other_tokens():
    sentences = ["the bank closed .", "a river bank", "bank"]
    occ = P.collect(TypeAndContext(), sentences, target="bank", labels=["m", "r", "r"])
    layers = TypeAndContext().embed([s.split() for s in sentences])
    np.testing.assert_allclose(occ.context_vectors["1"][0], layers[0][1][[0, 2, 3]].mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(occ.context_vectors["0"][1], layers[1][0][[0, 1]].mean(axis=0), rtol=1e-6)
    assert not occ.context_vectors["2"][2].any()  # a one-word sentence has no context
    context = occ.separation(context=True)
    assert context["0"]["self_similarity"] < 0.999  # unlike the target's own L0 vector


def test_sense_baselines_and_the_verdict_they_give():
    sentences = [s for s, _ in P.BANK_SENTENCES]
    labels = [label for _, label in P.BANK_SENTENCES]
    occ = P.collect(TypeAndContext(), sentences, target="bank", labels=labels)
    table = P.sense_baselines(occ)
    assert table["0"]["token_nn"] == pytest.approx(table["0"]["chance"])  # L0: one vector per spelling
    assert table["1"]["random_nn"] is None and table["1"]["context_nn"] is not None
    both = P.sense_baselines(occ, occ)
    assert both["2"]["random_nn"] == both["2"]["token_nn"]
    # the verdict reads the higher upper layer against each baseline: a gain only where the paired interval excludes 0
    assert both["2"]["vs"]["random"] == {"diff": 0.0, "ci95": [0.0, 0.0], "p": 1.0}  # the same vectors: no difference
    lo, hi = table["2"]["token_nn_ci95"]
    assert lo <= table["2"]["token_nn"] <= hi
    clear = {"diff": 0.3, "ci95": [0.1, 0.5], "p": 0.0}
    tie = {"diff": 0.06, "ci95": [-0.1, 0.2], "p": 0.5}
    row = {"chance": 0.47, "token_nn": 0.81, "token_nn_ci95": [0.62, 0.94], "context_nn": 0.69, "random_nn": 0.62}
    wins = dict(row, vs={"chance": clear, "random": clear, "context": clear})
    said = P.sense_verdict({"1": wins, "2": dict(wins, token_nn=0.75)})
    assert said.startswith("L1 (the higher of the upper layers): nearest-neighbour sense accuracy 0.81 [0.62, 0.94]")
    assert "separates the senses beyond chance, the random-init model, the bag of context" in said
    close = P.sense_verdict({"1": dict(row, vs={"chance": clear, "random": clear, "context": tie})})
    assert "no gain over the bag of context that the data supports" in close
    assert "L1 and the bag of context do not differ (difference +0.06 [-0.10, 0.20])" in close
    assert P.sense_verdict({"0": row}) == "No labelled senses to compare."
