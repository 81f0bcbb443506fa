"""Probing: label makers on hand-made trees, controls, MDL, probes, the activation cache, experiments."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY_MODEL
from sklearn.base import BaseEstimator, ClassifierMixin

from probing_lab.elmo import ElmoBiLM, save_checkpoint
from probing_lab.elmo.weights import load_checkpoint
from probing_lab.features.cache import ElmoEncoder, extract_features
from probing_lab.probing import tasks as T
from probing_lab.probing.experiment import Experiment, ExperimentError, run_experiment
from probing_lab.probing.mdl import online_codelength, online_codelengths
from probing_lab.probing.probes import ProbeConfig, fit_probe, fit_probes
from probing_lab.probing.runs import ProbeRun, report
from probing_lab.probing.structural import StructuralProbeConfig

# "The cat sat on the mat ." with UD heads: The->cat, cat->sat, sat=root, on->mat, the->mat, mat->sat, .->sat
HEADS = [2, 3, 0, 6, 6, 3, 3]
PUNCT = np.array([True, True, True, True, True, True, False])


def test_tree_distances_and_depths_by_hand():
    d = T.tree_distances(HEADS)
    assert d[0, 5] == 3  # The -> cat -> sat -> mat
    assert d[3, 4] == 2  # on -> mat -> the
    assert d[1, 2] == 1 and np.all(np.diag(d) == 0) and np.array_equal(d, d.T)
    assert T.tree_depths(HEADS).tolist() == [2, 1, 0, 2, 2, 1, 1]
    with pytest.raises(ValueError, match="one root"):
        T.tree_depths([0, 0])
    for not_a_tree in ([0, 0], [2, 1], [2, 3, 1], [0, 5], [0, -1], [2, 0, 3]):  # two roots, cycles, bad heads
        with pytest.raises(ValueError, match="do not form one tree"):
            T.tree_distances(not_a_tree)


def _bfs_distances(heads) -> np.ndarray:
    """Path lengths by breadth-first search from every token over the undirected tree edges."""
    n = len(heads)
    neighbours = [[] for _ in range(n)]
    for i, h in enumerate(heads):
        if h:
            neighbours[i].append(h - 1)
            neighbours[h - 1].append(i)
    out = np.full((n, n), -1)
    for start in range(n):
        out[start, start], frontier = 0, [start]
        while frontier:
            nxt = []
            for u in frontier:
                for v in neighbours[u]:
                    if out[start, v] < 0:
                        out[start, v] = out[start, u] + 1
                        nxt.append(v)
            frontier = nxt
    return out


def test_tree_distances_and_row_spearman_on_random_trees():
    """Distances agree with depths and parents on random trees; the per-row Spearman of a whole matrix
    is scipy's ``spearmanr`` row by row (ties averaged, constant rows NaN)."""
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(1, 30))
        order = rng.permutation(n)  # token order apart from tree order
        parent = {int(order[i]): int(order[rng.integers(0, i)]) for i in range(1, n)}
        heads = [0 if i == order[0] else parent[i] + 1 for i in range(n)]
        d = T.tree_distances(heads)
        assert np.array_equal(d, _bfs_distances(heads))
        assert np.array_equal(d, d.T) and np.array_equal(d[order[0]], T.tree_depths(heads))
        assert all(d[i, h - 1] == 1 for i, h in enumerate(heads) if h)
        a, b = rng.normal(size=(n, n)), rng.integers(0, 3, size=(n, n)).astype(float)
        a[0] = 1.0  # a constant row
        expected = [T._spearman(a[i], b[i]) for i in range(n)]
        assert np.allclose(T._row_spearman(a, b), expected, equal_nan=True, atol=1e-12)


def test_spearman_by_length_is_the_mean_over_lengths_of_per_sentence_row_means():
    """Hewitt & Manning's distance Spearman by its definition, with scipy's ``spearmanr`` row by row,
    on random trees of mixed lengths (several sentences per length, a constant prediction among them)."""
    rng = np.random.default_rng(3)
    predicted, gold = [], []
    for n in rng.integers(3, 14, size=60):
        order = rng.permutation(n)
        parent = {int(order[i]): int(order[rng.integers(0, i)]) for i in range(1, n)}
        gold.append(T.tree_distances([0 if i == order[0] else parent[i] + 1 for i in range(n)]).astype(float))
        predicted.append(np.ones((n, n)) if len(predicted) == 7 else rng.random((n, n)))
    per_length = {}
    for p, g in zip(predicted, gold):
        if 5 <= len(g) <= 50:
            rows = [T._spearman(p[i], g[i]) for i in range(len(g))]
            if not np.all(np.isnan(rows)):
                per_length.setdefault(len(g), []).append(np.nanmean(rows))
    expected = np.mean([np.mean(v) for v in per_length.values()])
    assert T.spearman_by_length(predicted, gold) == pytest.approx(expected, abs=1e-12)


def test_uuas_spearman_and_root_accuracy_on_exact_predictions():
    d = T.tree_distances(HEADS).astype(float)
    assert T.uuas([d], [HEADS], [PUNCT]) == 1.0
    edges = T.gold_edges(HEADS, PUNCT)
    assert len(edges) == 5  # the punctuation edge is excluded
    wrong = d.copy()
    wrong[0, 1] = wrong[1, 0] = 9.0  # "The" now attaches elsewhere in the MST
    assert T.uuas([wrong], [HEADS], [PUNCT]) == pytest.approx(4 / 5)
    depths = T.tree_depths(HEADS).astype(float)
    assert T.root_accuracy([depths], [HEADS], [PUNCT]) == 1.0
    assert T.spearman_by_length([d[np.ix_(PUNCT, PUNCT)]], [d[np.ix_(PUNCT, PUNCT)]]) == pytest.approx(1.0)
    assert np.isnan(T.spearman_by_length([d[:3, :3]], [d[:3, :3]]))  # length 3 is outside 5-50


def test_control_labels_are_fixed_per_type_and_follow_the_label_distribution():
    train_labels = ["NOUN"] * 600 + ["VERB"] * 300 + ["DET"] * 100
    words = [f"w{i}" for i in range(3000)] * 2
    a = T.control_labels(words, train_labels, seed=0)
    b = T.control_labels(words, train_labels, seed=0)
    c = T.control_labels(words, train_labels, seed=1)
    assert a == b and a != c
    assert a[:3000] == a[3000:]  # a type always gets the same label
    share = Counter(a[:3000])
    assert abs(share["NOUN"] / 3000 - 0.6) < 0.04 and abs(share["DET"] / 3000 - 0.1) < 0.03


def test_majority_per_type_backs_off_to_the_global_majority():
    pred = T.majority_per_type(["run", "run", "run", "the"], ["VERB", "NOUN", "VERB", "DET"], ["run", "the", "unseen"])
    assert pred == ["VERB", "DET", "VERB"]


def _blobs(n=2000, dim=16, k=4, seed=0, noise=1.0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 3, (k, dim))
    y = rng.integers(0, k, n)
    return (centres[y] + rng.normal(0, noise, (n, dim))).astype(np.float32), y


class TorchLinearClassifier(ClassifierMixin, BaseEstimator):
    """The lab's probe (``ProbeConfig``'s settings, ``epochs`` aside) behind scikit-learn's estimator
    API, to compare it with LogisticRegression and run it in cross-validation; early stopping on a
    held-out tenth."""

    def __init__(self, epochs: int = ProbeConfig.epochs, seed: int = 0):
        self.epochs, self.seed = epochs, seed

    def fit(self, X, y) -> "TorchLinearClassifier":
        X = np.asarray(X, dtype=np.float32)
        self.classes_, codes = np.unique(np.asarray(y), return_inverse=True)
        order = np.random.default_rng(self.seed).permutation(len(X))
        val, tr = order[: max(1, len(X) // 10)], order[max(1, len(X) // 10) :]
        config = ProbeConfig(epochs=self.epochs, seed=self.seed)
        self.probe_ = fit_probe(X[tr], codes[tr], X[val], codes[val], len(self.classes_), config)
        return self

    def predict_proba(self, X) -> np.ndarray:
        return self.probe_.predict_proba(np.asarray(X, dtype=np.float32))

    def predict(self, X) -> np.ndarray:
        return self.classes_[self.predict_proba(X).argmax(-1)]


def test_torch_probe_agrees_with_scikit_learn_logistic_regression():
    from sklearn.linear_model import LogisticRegression

    X, y = _blobs(noise=2.5)
    Xt = _blobs(seed=0, noise=2.5)[0][:500]
    torch_clf = TorchLinearClassifier(epochs=40).fit(X[:1500], y[:1500])
    sk = LogisticRegression(max_iter=2000).fit(X[:1500], y[:1500])
    a, b = torch_clf.score(X[1500:], y[1500:]), sk.score(X[1500:], y[1500:])
    assert abs(a - b) < 0.02
    assert (torch_clf.predict(X[1500:]) == sk.predict(X[1500:])).mean() > 0.95
    assert torch_clf.predict_proba(Xt).shape == (500, 4)


def test_lbfgs_probe_reaches_the_logistic_regression_optimum():
    """Full-batch L-BFGS with weight_decay = 1 / (C N) minimises LogisticRegression's own objective:
    the same predictions, and the same training loss."""
    from sklearn.linear_model import LogisticRegression

    X, y = _blobs(noise=3.0)
    X = (X - X[:1500].mean(0)) / X[:1500].std(0)  # the probe standardises; give sklearn the same inputs
    probe = fit_probe(
        X[:1500],
        y[:1500],
        X[:1500],
        y[:1500],
        4,
        ProbeConfig(optimizer="lbfgs", weight_decay=1 / 1500, epochs=30, patience=30),
    )
    sk = LogisticRegression(C=1.0, max_iter=5000, tol=1e-8).fit(X[:1500], y[:1500])
    assert (probe.predict(X[1500:]) == sk.predict(X[1500:])).mean() > 0.99
    p_torch = probe.predict_proba(X[:1500])[np.arange(1500), y[:1500]]
    p_sk = sk.predict_proba(X[:1500])[np.arange(1500), y[:1500]]
    assert abs(np.log(p_torch).mean() - np.log(p_sk).mean()) < 1e-3
    with pytest.raises(ValueError, match="adamw or lbfgs"):
        ProbeConfig.from_dict({"optimizer": "sgd"})


def test_torch_classifier_works_inside_scikit_learn_tools():
    from sklearn.model_selection import cross_val_score

    X, y = _blobs(n=600)
    scores = cross_val_score(TorchLinearClassifier(epochs=10), X, np.array(["abcd"[i] for i in y]), cv=3)
    assert scores.mean() > 0.9


def test_mix_probe_learns_to_weight_the_informative_layer():
    X, y = _blobs(n=3000)
    noise = np.random.default_rng(1).normal(0, 1, X.shape).astype(np.float32)
    stacked = np.stack([noise, X, noise], axis=1)  # (N, 3, dim): only layer 1 is informative
    probe = fit_probe(stacked[:2500], y[:2500], stacked[2500:], y[2500:], 4, ProbeConfig(mix=True, epochs=30, lr=1e-2))
    w = probe.mix_weights()
    assert w[1] == max(w) and probe.accuracy(stacked[2500:], y[2500:]) > 0.9


def test_online_codelength_separates_a_real_task_from_random_labels():
    X, y = _blobs(n=4000)
    cfg = ProbeConfig(epochs=10)
    real = online_codelength(X[:3500], y[:3500], X[3500:], y[3500:], 4, cfg)
    shuffled = np.random.default_rng(0).permutation(y)
    control = online_codelength(X[:3500], shuffled[:3500], X[3500:], shuffled[3500:], 4, cfg)
    assert real["uniform_bits"] == pytest.approx(3500 * 2.0)
    assert real["compression"] > 3 and control["compression"] < 1.1
    assert real["mdl_bits"] < control["mdl_bits"]
    # selectivity on the toy case: task accuracy minus control accuracy
    task_acc = fit_probe(X[:3500], y[:3500], X[3500:], y[3500:], 4, cfg).accuracy(X[3500:], y[3500:])
    control_acc = fit_probe(X[:3500], shuffled[:3500], X[3500:], shuffled[3500:], 4, cfg).accuracy(
        X[3500:], shuffled[3500:]
    )
    assert task_acc - control_acc > 0.6


@pytest.mark.parametrize("mix", [False, True])
def test_probes_trained_together_are_the_probes_trained_alone(mix):
    # the task and its control share minibatches: each must still be exactly the probe fit alone
    # (same init, same batches, its own early stopping and learning-rate decay)
    X, y = _blobs(n=3000, noise=4.0)  # a task that takes a few epochs
    if mix:
        X = np.stack([X, np.random.default_rng(2).normal(0, 1, X.shape).astype(np.float32)], axis=1)
    shuffled = np.random.default_rng(0).permutation(y)
    cfg = ProbeConfig(epochs=12, patience=2, mix=mix, precision="float32")  # bfloat16: the same up to rounding
    together = fit_probes(X[:2500], [y[:2500], shuffled[:2500]], X[2500:], [y[2500:], shuffled[2500:]], 4, cfg)
    for probe, labels in zip(together, (y, shuffled)):
        alone = fit_probe(X[:2500], labels[:2500], X[2500:], labels[2500:], 4, cfg)
        assert probe.epochs_run == alone.epochs_run and probe.history == alone.history
        assert np.allclose(probe.predict_proba(X[2500:]), alone.predict_proba(X[2500:]), atol=1e-5)
    assert together[0].epochs_run != together[1].epochs_run  # they did stop apart
    codes = online_codelengths(X[:2500], [y[:2500], shuffled[:2500]], X[2500:], [y[2500:], shuffled[2500:]], 4, cfg)
    alone = online_codelength(X[:2500], shuffled[:2500], X[2500:], shuffled[2500:], 4, cfg)
    assert codes[1]["mdl_bits"] == pytest.approx(alone["mdl_bits"], rel=1e-5)


@pytest.mark.parametrize("mix", [False, True])
def test_stacked_linear_heads_step_as_torch_adamw_with_autograd(mix):
    # the fast path writes the gradient and AdamW out by hand: the same numbers as the modules
    from probing_lab.probing.heads import StackedLinear
    from probing_lab.probing.probes import _Probe

    X, y = _blobs(n=512, dim=8, k=3)
    if mix:  # three layers: the blobs, their negation scaled, noise
        X = np.stack([X, -0.5 * X, np.random.default_rng(1).normal(size=X.shape).astype(X.dtype)], 1)
    labels = np.stack([y, (y + 1) % 3], 1)
    cfg = ProbeConfig(lr=0.05, weight_decay=0.01, mix=mix)
    stacked = StackedLinear(8, 3, 2, cfg, 3 if mix else None)
    modules = []
    for _ in range(2):
        torch.manual_seed(cfg.seed)
        probe = _Probe(8, 3, cfg, 3 if mix else 1)
        modules.append((probe, torch.optim.AdamW(probe.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)))
    xs, ys = torch.as_tensor(X), torch.as_tensor(labels)
    for step in range(6):
        rows = slice(64 * step, 64 * (step + 1))
        active = [0, 1] if step < 4 else [1]  # head 0 stops after four steps
        stacked.step(xs[rows], ys[rows], active)
        for h in active:
            probe, optimizer = modules[h]
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(probe(xs[rows]), ys[rows, h]).backward()
            optimizer.step()
    for h, (probe, _) in enumerate(modules):
        mine = stacked.copy_head_into(h, _Probe(8, 3, cfg, 3 if mix else 1)).state_dict()
        for name, value in probe.state_dict().items():
            assert torch.allclose(mine[name], value, atol=1e-6), name
        assert torch.allclose(stacked.logits(xs)[:, h], probe(xs), atol=1e-5)
    if mix:
        assert not torch.equal(stacked.mix[1], torch.zeros(3))  # the mix did train


def test_parameter_average_is_the_warmed_up_moving_average_and_swaps_in_for_evaluation():
    from probing_lab.probing.heads import ParameterAverage

    p = torch.zeros(3)
    averaged = ParameterAverage([p], decay=0.5)
    expected = torch.zeros(3)
    for t, value in enumerate([4.0, 8.0, -2.0, 6.0], start=1):
        p.fill_(value)
        averaged.update()
        beta = min(0.5, (1 + t) / (10 + t))  # step 1: 2/11, then 0.5
        expected = beta * expected + (1 - beta) * value
    assert torch.allclose(averaged.average[0], expected)
    averaged.use(True)  # evaluation: the average in the parameter itself
    assert torch.allclose(p, expected)
    averaged.use(True)  # twice is once
    averaged.use(False)
    assert torch.equal(p, torch.full((3,), 6.0))  # the live value back, training goes on from it
    off = ParameterAverage([p], decay=0.0)
    off.update()
    off.use(True)
    assert off.average is None and torch.equal(p, torch.full((3,), 6.0))


def test_the_average_spans_at_most_half_an_epoch_and_none_on_a_small_set():
    # (AVERAGE_FROM_STEPS = 64 minibatches an epoch)
    from probing_lab.probing.heads import average_decay, minibatch_size

    config = ProbeConfig()  # average 0.99, minibatches of 1,024
    assert average_decay(config, 204_577) == pytest.approx(0.99)  # pos_ewt: 200 steps an epoch, horizon 100
    assert average_decay(config, 102_400) == pytest.approx(1 - 2 / 100)  # 100 steps: horizon 50, not 100
    assert average_decay(config, 60_000) == 0.0  # 59 steps an epoch: too few to average
    assert minibatch_size(config, 10_507) == 656 and average_decay(config, 10_507) == 0.0  # a sixteenth: none
    assert average_decay(ProbeConfig(average=0.0), 204_577) == 0.0
    assert average_decay(config, None) == 0.99  # no set size given: the configured decay


@pytest.mark.parametrize("mix", [False, True])
def test_stacked_heads_evaluate_and_keep_the_average_of_their_steps(mix):
    from probing_lab.probing.heads import StackedLinear

    X, y = _blobs(n=512, dim=8, k=3)
    if mix:
        X = np.stack([X, -0.5 * X], 1)
    xs, ys = torch.as_tensor(X), torch.as_tensor(np.stack([y, (y + 1) % 3], 1))
    cfg = ProbeConfig(lr=0.1, average=0.8, mix=mix)
    heads = StackedLinear(8, 3, 2, cfg, 2 if mix else None)
    expected = [t.clone() for t in heads.params]
    for step in range(8):
        heads.step(xs[64 * step : 64 * (step + 1)], ys[64 * step : 64 * (step + 1)], [0, 1])
        beta = min(0.8, (2 + step) / (11 + step))
        expected = [beta * e + (1 - beta) * t for e, t in zip(expected, heads.params)]
    live = [t.clone() for t in heads.params]
    heads.train(False)  # evaluation mode: logits and snapshots read the average
    for t, e in zip(heads.params, expected):
        assert torch.allclose(t, e, atol=1e-6)
    assert not torch.allclose(heads.params[0], live[0])  # the steps did bounce
    kept = heads.snapshot(1)
    assert torch.allclose(kept[0], expected[0][:-1, 3:6], atol=1e-6)
    heads.train(True)
    assert all(torch.equal(t, v) for t, v in zip(heads.params, live))


@pytest.mark.parametrize("mix", [False, True])
def test_a_bfloat16_step_is_the_float32_step_up_to_its_rounding(mix):
    # bfloat16 rows make the two products bfloat16 (8 bits of mantissa, float32 accumulation); the
    # weights, softmax and AdamW stay float32: one step moves the parameters as float32 does, to
    # within the products' rounding, and never touches the float32 path
    from probing_lab.probing.heads import StackedLinear

    X, y = _blobs(n=256, dim=32, k=5)
    if mix:
        X = np.stack([X, -0.5 * X, np.random.default_rng(1).normal(size=X.shape).astype(X.dtype)], 1)
    xs, ys = torch.as_tensor(X), torch.as_tensor(np.stack([y, (y + 2) % 5], 1))
    cfg = ProbeConfig(lr=0.05, mix=mix)
    exact, low = (StackedLinear(32, 5, 2, cfg, 3 if mix else None) for _ in range(2))
    exact.step(xs, ys, [0, 1])
    low.step(xs.bfloat16(), ys, [0, 1])
    assert exact.Wb.dtype == low.Wb.dtype == torch.float32
    assert low.grad.dtype == torch.float32 and low.moments[0][0].dtype == torch.float32
    relative = (low.grad - exact.grad).norm() / exact.grad.norm()
    assert 0 < relative < 0.02  # rounded, not another computation
    assert torch.allclose(low.logits(xs.bfloat16()), exact.logits(xs), atol=0.05)
    if mix:
        assert torch.allclose(low.mix, exact.mix, atol=1e-3) and torch.allclose(low.gamma, exact.gamma, atol=1e-3)


@pytest.mark.parametrize("mix", [False, True])
def test_bfloat16_probes_score_as_float32_probes(mix):
    X, y = _blobs(n=3000, noise=4.0)
    if mix:
        X = np.stack([X, np.random.default_rng(2).normal(0, 1, X.shape).astype(np.float32)], axis=1)
    fits = {
        precision: fit_probe(
            X[:2500], y[:2500], X[2500:], y[2500:], 4, ProbeConfig(epochs=12, patience=2, mix=mix, precision=precision)
        )
        for precision in ("float32", "bfloat16")
    }
    exact, low = fits["float32"], fits["bfloat16"]
    assert abs(exact.accuracy(X[2500:], y[2500:]) - low.accuracy(X[2500:], y[2500:])) <= 0.01
    assert (exact.predict(X[2500:]) == low.predict(X[2500:])).mean() > 0.97
    assert low.module.net.weight.dtype == torch.float32  # the trained probe predicts in float32


def test_probe_precision_is_checked_and_auto_picks_by_cpu():
    from probing_lab.probing.heads import products_dtype

    assert products_dtype("float32") == torch.float32 and products_dtype("bfloat16") == torch.bfloat16
    assert products_dtype("auto") in (torch.float32, torch.bfloat16)
    assert products_dtype("auto", n_rows=2_000) == torch.float32  # a small set: float32 whatever the CPU
    assert products_dtype("bfloat16", n_rows=2_000) == torch.bfloat16  # asked for: given
    assert ProbeConfig.from_dict({"precision": "bfloat16"}).precision == "bfloat16"
    with pytest.raises(ValueError, match="precision must be auto, float32 or bfloat16, got 'half'"):
        ProbeConfig.from_dict({"precision": "half"})


def test_a_run_records_the_products_its_precision_gave():
    """metrics["machine"]["bfloat16_products"] follows the experiment's precision: an experiment that pins
    float32 says False on any CPU (it said what "auto" would pick here)."""
    from probing_lab.probing.experiment import machine_facts
    from probing_lab.probing.heads import products_dtype

    assert machine_facts("float32")["bfloat16_products"] is False
    assert machine_facts("bfloat16")["bfloat16_products"] is True
    assert machine_facts()["bfloat16_products"] is (products_dtype("auto") == torch.bfloat16)
    assert machine_facts(None)["bfloat16_products"] is False  # a structural probe or the WSD centroids


def test_stages_chain_on_one_token_axis():
    from probing_lab.probing.curves import chain_stages

    stage0 = [{"step": 0, "tokens_seen": 0}, {"step": 10, "tokens_seen": 100}]
    stage1 = [{"step": 0, "tokens_seen": 0}, {"step": 5, "tokens_seen": 40}]
    chained = chain_stages([stage0, stage1])
    assert [(r["stage"], r["step"], r["tokens_seen"]) for r in chained] == [
        (0, 0, 0),
        (0, 10, 100),
        (1, 10, 100),  # stage 1's first evaluation: the same model, on the new stage's heldout
        (1, 15, 140),
    ]


# --- the activation cache ----------------------------------------------------------------------


def _tiny_model(seed=0) -> ElmoBiLM:
    from probing_lab.elmo import ElmoOptions

    m = ElmoBiLM(ElmoOptions.from_dict(TINY_MODEL))
    m.reset_parameters(torch.Generator().manual_seed(seed))
    return m


SENTS = [["The", "cat", "sat", "."], ["A", "bank", "of", "the", "river"], ["Money", "in", "the", "bank"]] * 5


def test_cache_hit_and_invalidation_on_a_changed_weight_file(tmp_path):
    ckpt = save_checkpoint(_tiny_model(), tmp_path / "model")
    first = extract_features(ElmoEncoder(load_checkpoint(ckpt)), SENTS, cache_dir=tmp_path / "cache", progress=False)
    again = extract_features(ElmoEncoder(load_checkpoint(ckpt)), SENTS, cache_dir=tmp_path / "cache", progress=False)
    assert again.path == first.path and first.layers.shape == (3, sum(map(len, SENTS)), 16)
    assert first.layers.dtype == np.float16
    changed = load_checkpoint(ckpt)
    with torch.no_grad():
        changed.lstm.layers[1].bias[0, 0] += 0.5
    save_checkpoint(changed, tmp_path / "model")  # the same path, new weights
    third = extract_features(ElmoEncoder(load_checkpoint(ckpt)), SENTS, cache_dir=tmp_path / "cache", progress=False)
    assert third.key != first.key
    assert not np.array_equal(np.asarray(third.layers[2]), np.asarray(first.layers[2]))
    other_data = extract_features(
        ElmoEncoder(load_checkpoint(ckpt)), SENTS[:-1], cache_dir=tmp_path / "cache", progress=False
    )
    assert other_data.key != third.key
    # the vectors are the embedder's, sentence by sentence
    from probing_lab.elmo import Embedder

    direct = Embedder(load_checkpoint(ckpt)).embed([SENTS[1]])[0]
    assert np.allclose(third.sentence(1), direct, atol=2e-3)


def test_interrupted_extraction_resumes_to_the_same_result(tmp_path):
    clean = extract_features(
        ElmoEncoder(_tiny_model()), SENTS, cache_dir=tmp_path / "a", chunk_sentences=4, progress=False
    )

    class Failing(ElmoEncoder):
        calls = 0

        def embed(self, sentences):
            Failing.calls += 1
            if Failing.calls == 3:
                raise KeyboardInterrupt
            return super().embed(sentences)

    with pytest.raises(KeyboardInterrupt):
        extract_features(Failing(_tiny_model()), SENTS, cache_dir=tmp_path / "b", chunk_sentences=4, progress=False)
    partial = list((tmp_path / "b").glob("*.partial"))
    assert partial and json.loads((partial[0] / "progress.json").read_text())["sentences_done"] == 8
    resumed = extract_features(
        ElmoEncoder(_tiny_model()), SENTS, cache_dir=tmp_path / "b", chunk_sentences=4, progress=False
    )
    assert np.array_equal(np.asarray(resumed.layers), np.asarray(clean.layers))
    with pytest.raises(ValueError, match="no tokens"):
        extract_features(ElmoEncoder(_tiny_model()), [["a"], []], cache_dir=tmp_path / "c", progress=False)


# --- experiments --------------------------------------------------------------------------------


def test_probe_settings_are_typed_per_family_and_old_names_still_work():
    base = {"name": "x", "task": "upos", "dataset": "ewt"}
    with pytest.warns(UserWarning, match='"adam" is now called "adamw"'):
        config = Experiment.from_dict({**base, "probe": {"optimizer": "adam"}}).probe_config()
    assert config.optimizer == "adamw" and ProbeConfig().optimizer == "adamw"
    structural = Experiment.from_dict({**base, "task": "structural_depth", "probe": {"rank": 16}}).probe_config()
    assert isinstance(structural, StructuralProbeConfig) and structural.rank == 16 and structural.lr == 1e-3
    with pytest.warns(UserWarning, match="negatives is now a top-level key"):
        arc = Experiment.from_dict({**base, "task": "dep_arc", "layers": [1], "probe": {"negatives": 5, "epochs": 2}})
    assert arc.negatives == 5 and arc.probe_config().epochs == 2
    assert Experiment.from_dict({**base, "task": "wsd_centroid"}).probe_config() is None


def test_experiment_file_errors_name_the_problem(tmp_path):
    base = {"name": "x", "task": "upos", "dataset": "ewt"}
    with pytest.raises(ExperimentError, match="unknown key"):
        Experiment.from_dict({**base, "layer": [1]})
    with pytest.raises(ExperimentError, match="unknown task"):
        Experiment.from_dict({**base, "task": "sentiment"})
    with pytest.raises(ExperimentError, match="unknown layer"):
        Experiment.from_dict({**base, "layers": [0, "top"]})
    with pytest.raises(ExperimentError, match="unknown layer '0f'.*direction halves"):
        Experiment.from_dict({**base, "layers": ["0f"]})  # L0 has no halves
    with pytest.raises(ExperimentError, match=r"layer\(s\) \['3b'\] do not exist"):
        run_experiment({**base, "layers": [1, "3b"]}, model="random:cpu-tiny")
    with pytest.raises(ExperimentError, match=r"layer\(s\) \[3\] do not exist; the model has layers 0-2"):
        run_experiment({**base, "layers": [0, 3]}, model="random:cpu-tiny")  # layers come from the model
    with pytest.raises(ExperimentError, match="unknown option"):
        Experiment.from_dict({**base, "probe": {"learning_rate": 1}})
    with pytest.raises(ExperimentError, match="epochs must be int, got 'ten'"):
        Experiment.from_dict({**base, "probe": {"epochs": "ten"}})
    with pytest.raises(ExperimentError, match="known: .*'patience', 'rank'"):  # the structural family's own options
        Experiment.from_dict({**base, "task": "structural_distance", "probe": {"hidden": 3}})
    with pytest.raises(ExperimentError, match="wsd_centroid trains no probe"):
        Experiment.from_dict({**base, "task": "wsd_centroid", "probe": {"epochs": 3}})
    with pytest.raises(ExperimentError, match="dep_arc runs on single layers"):
        Experiment.from_dict({**base, "task": "dep_arc", "layers": [1, "mix"]})
    with pytest.raises(ExperimentError, match="negatives must be an integer >= 1"):
        Experiment.from_dict({**base, "task": "dep_arc", "layers": [1], "negatives": 0})
    with pytest.raises(ExperimentError, match="model"):
        run_experiment(base, model=str(tmp_path / "no-such-model"))
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [unclosed")
    with pytest.raises(ExperimentError, match="TOML"):
        Experiment.load(bad)


CONLLU = """# sent_id = s{n}
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\t{noun}\t{noun}\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\t{verb}\t{verb}\tVERB\tVBD\t_\t0\troot\t_\t_
4\ton\ton\tADP\tIN\t_\t6\tcase\t_\t_
5\tthe\tthe\tDET\tDT\t_\t6\tdet\t_\t_
6\t{noun2}\t{noun2}\tNOUN\tNN\t_\t3\tobl\t_\t_
7\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

"""


def _tiny_treebank(root: Path) -> Path:
    nouns, verbs = ["cat", "dog", "bird", "child", "man"], ["sat", "slept", "stood", "jumped"]
    d = root / "ud-english-ewt"
    d.mkdir(parents=True)
    for split, n in (("train", 40), ("dev", 10), ("test", 10)):
        text = "".join(
            CONLLU.format(n=i, noun=nouns[i % 5], verb=verbs[i % 4], noun2=nouns[(i + 2) % 5]) for i in range(n)
        )
        (d / f"en_ewt-ud-{split}.conllu").write_text(text, encoding="utf-8")
    return root


@pytest.mark.parametrize("task", ["upos", "structural_distance", "dep_arc"])
def test_run_experiment_writes_metrics_tables_and_plots(tmp_path, task, monkeypatch):
    import probing_lab.datasets as datasets

    read, load = [], datasets.load_dataset
    monkeypatch.setattr(datasets, "load_dataset", lambda name, split, *a: read.append(split) or load(name, split, *a))
    data = _tiny_treebank(tmp_path / "data")
    ckpt = save_checkpoint(_tiny_model(), tmp_path / "model")
    exp = {"name": f"tiny_{task}", "task": task, "dataset": "ewt", "probe": {"epochs": 3}}
    if task == "dep_arc":
        exp["layers"] = [0, 1, 2]
    reports = []
    run = run_experiment(
        exp,
        model=str(ckpt),
        out=tmp_path / "run",
        data_dir=data,
        cache_dir=tmp_path / "cache",
        progress=False,
        log=lambda m: None,
        on_progress=lambda fraction, message: reports.append((fraction, message)),
    )
    assert run == ProbeRun.load(run.path)  # the returned result is what the run directory holds
    assert run.task == task
    metrics = json.loads((run.path / "metrics.json").read_text())
    stages = 2 * len(metrics["layers"])  # every layer of the model, then of the random-init baseline
    assert [f for f, _ in reports] == [pytest.approx((i + 1) / stages) for i in range(stages)]
    assert all(m.startswith(("layer ", "random init layer ")) for _, m in reports)
    # the random-init baseline's entries are labelled where they share the pool with the model's (arc
    # probes its layers itself, one after the other, after a header line in the log)
    random_lines = [m for _, m in reports if m.startswith("random init layer ")]
    assert len(random_lines) == (0 if task == "dep_arc" else len(metrics["layers"]))
    assert set(metrics["layers"]) == ({"0", "1", "2"} if task == "dep_arc" else {"0", "1", "2", "mix"})
    for entry in metrics["layers"].values():
        assert 0.0 <= entry["score"] <= 1.0
        assert {"score", "control_score", "selectivity", "mdl_bits"} <= set(entry)
    assert set(metrics["baselines"]["random_init"]) == set(metrics["layers"])
    assert metrics["machine"]["threads"] >= 1 and isinstance(metrics["machine"]["bfloat16_products"], bool)
    assert sorted(read) == ["dev", "test", "train"]  # each split read once, for the model and random init
    assert metrics["timing"]["data"] >= 0
    if task == "upos":
        assert 0.0 <= metrics["baselines"]["majority"] <= 1.0
        e = metrics["layers"]["1"]
        assert e["selectivity"] == pytest.approx(e["score"] - e["control_score"])
        assert e["mdl_bits"] > 0
        C = np.array(e["confusion"])  # test tokens by gold x predicted label; its diagonal is the score
        assert C.shape == (metrics["n_labels"],) * 2 and C.sum() <= metrics["tokens"]["test"]
        assert np.trace(C) / metrics["tokens"]["test"] == pytest.approx(e["score"])
    for name in ("table.md", "table.csv", "plot.png", "plot.html", "seed.txt"):
        assert (run.path / name).is_file(), name
    assert f"| tiny_{task} ({task}) | " in report([run.path])


def test_a_random_model_runs_with_the_seed_it_was_given(tmp_path):
    data = _tiny_treebank(tmp_path / "data")
    exp = {
        "name": "tiny",
        "task": "upos",
        "dataset": "ewt",
        "layers": [1],
        "probe": {"epochs": 2},
        "control": False,
        "mdl": False,
        "random_init": False,
    }
    cached = []
    for seed in (0, 5):
        run = run_experiment(
            exp,
            model="random:cpu-tiny",
            model_seed=seed,
            out=tmp_path / f"run{seed}",
            data_dir=data,
            cache_dir=tmp_path / "cache",
            progress=False,
            log=lambda m: None,
        )
        assert f"seed {seed}" in run.model, run.model
        cached.append(len(list((tmp_path / "cache").iterdir())))
    assert cached[1] == 2 * cached[0]  # another model, other weights: its own features, none reused


def test_shipped_experiment_files_parse():
    root = Path(__file__).resolve().parents[1]
    files = sorted((root / "probes").glob("*.toml"))
    assert {f.stem for f in files} >= {"pos_ewt", "deprel_ewt", "structural_ewt", "wsd_coarse", "wsd_raganato"}
    for f in files:
        exp = Experiment.load(f)
        assert exp.name == f.stem


def test_word_sense_set_whose_lemmas_have_one_sense_is_an_error(tmp_path):
    word = tmp_path / "data" / "wsd" / "CoarseWSD-20" / "bank"
    word.mkdir(parents=True)
    (word / "classes_map.txt").write_text(json.dumps({"0": "bank_bank", "1": "bank_bank_(geography)"}))
    for split in ("train", "test"):
        (word / f"{split}.data.txt").write_text("1\tthe bank closed .\n1\ta bank loan .\n", encoding="utf-8")
        (word / f"{split}.gold.txt").write_text("0\n0\n")
    ckpt = save_checkpoint(_tiny_model(), tmp_path / "model")
    exp = {
        "name": "one_sense",
        "task": "wsd_centroid",
        "dataset": "coarsewsd",
        "train": "bank/train",
        "dev": "bank/train",
        "test": "bank/test",
        "random_init": False,
    }
    with pytest.raises(ExperimentError, match="one sense"):
        run_experiment(
            exp,
            model=str(ckpt),
            out=tmp_path / "run",
            data_dir=tmp_path / "data",
            cache_dir=tmp_path / "cache",
            progress=False,
            log=lambda m: None,
        )


def test_word_sense_run_counts_single_sense_lemmas_and_backs_off_to_their_sense(tmp_path):
    from probing_lab.datasets.wsd import COARSEWSD_WORDS

    root = tmp_path / "data" / "wsd" / "CoarseWSD-20"
    for word in COARSEWSD_WORDS:  # "all" reads the 20 words; only bank has two senses here
        two = word == "bank"
        (root / word).mkdir(parents=True)
        (root / word / "classes_map.txt").write_text(json.dumps({"0": f"{word}_a", "1": f"{word}_b"}))
        for split in ("train", "test"):
            (root / word / f"{split}.data.txt").write_text(f"1\tthe {word} lent money .\n1\ta {word} by the river .\n")
            (root / word / f"{split}.gold.txt").write_text("0\n1\n" if two else "0\n0\n")
    ckpt = save_checkpoint(_tiny_model(), tmp_path / "model")
    exp = {
        "name": "twenty_words",
        "task": "wsd_centroid",
        "dataset": "coarsewsd",
        "train": "all/train",
        "dev": "all/train",
        "test": "all/test",
        "layers": [0, 1],
        "random_init": False,
    }
    run = run_experiment(
        exp,
        model=str(ckpt),
        out=tmp_path / "run",
        data_dir=tmp_path / "data",
        cache_dir=tmp_path / "cache",
        progress=False,
        log=lambda m: None,
    )
    metrics = run.metrics
    assert metrics["single_sense_lemmas"] == 19  # a count, not the list (WordNet's would be 22k long)
    assert metrics["single_sense_examples"] == sorted(w for w in COARSEWSD_WORDS if w != "bank")
    assert metrics["baselines"]["majority"] == 39 / 40  # one sense for both "bank"s: one of 40 contexts wrong
    # L0 gives both "bank"s one vector, so it cannot do better than one sense for both
    assert metrics["layers"]["0"]["score"] == 39 / 40
    # the bag of context (the other words' L0 vectors) tells "lent money" from "by the river"
    assert metrics["layers"]["0"]["context_score"] == 1.0 and run.layers["0"].context_score == 1.0
    assert [row["context_score"] for row in run.rows()] == [1.0, metrics["layers"]["1"]["context_score"]]


def test_sense_centroids_by_hand():
    train = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    pred = T.sense_centroid_predict(
        train,
        ["bank"] * 4,
        ["money", "money", "river", "river"],
        np.array([[0.8, 0.2], [0.2, 0.8], [1.0, 1.0]]),
        ["bank", "bank", "crane"],
        mfs={"crane": "bird"},
    )
    assert pred == ["money", "river", "bird"]
    # a context-free layer: every "bank" one vector, so both senses' centroids are that vector (their
    # means differ by rounding alone); the tie goes to the sense seen most in training, not the rounding
    v = np.array([0.1, 0.7, 0.3], dtype=np.float32)
    for n_river in (2, 5, 7):
        senses = ["money"] * 3 + ["river"] * n_river
        pred = T.sense_centroid_predict(np.tile(v, (len(senses), 1)), ["bank"] * len(senses), senses, v[None], ["bank"])
        assert pred == ["money" if n_river < 3 else "river"]


def test_head_selection_accuracy_by_hand():
    from probing_lab.probing.runners.arc import _group_right

    scores = np.array([0.9, 0.1, 0.2, 0.3, 0.8, 0.1])  # two dependents, three candidates each
    labels = np.array([1, 0, 0, 1, 0, 0])  # the gold head comes first in each group
    groups = np.array([0, 0, 0, 1, 1, 1])
    assert _group_right(scores, labels, groups).tolist() == [True, False]  # per dependent: the unit of its sentence


def test_confusion_matrix_and_per_label_rows_by_hand():
    gold = np.array([0, 0, 0, 1, 1, 2, 3])  # 3 = a test label unseen in training (index n): left out
    pred = np.array([0, 1, 0, 1, 1, 1, 0])
    C = T.confusion_matrix(gold, pred, 3)
    assert C == [[2, 1, 0], [0, 2, 0], [0, 1, 0]]

    def run(labels, layer_entry):
        metrics = {"experiment": "e", "task": "upos", "dataset": "ewt", "model": "m", "labels": labels}
        return ProbeRun.from_metrics({**metrics, "layers": {"1": layer_entry}})

    ordered = run(["NOUN", "VERB", "ADJ"], {"score": 4 / 7, "confusion": C}).per_label("1")
    rows = {r["label"]: r for r in ordered}
    assert rows["NOUN"]["accuracy"] == pytest.approx(2 / 3) and rows["NOUN"]["most confused with"] == "VERB"
    assert rows["VERB"]["precision"] == pytest.approx(2 / 4) and rows["ADJ"]["accuracy"] == 0.0
    assert rows["ADJ"]["precision"] is None  # never predicted
    assert [r["label"] for r in ordered] == ["NOUN", "VERB", "ADJ"]  # by support
    assert run([], {"score": 0.5}).per_label("1") == []


@pytest.mark.parametrize(
    "metrics",
    [{}, {"layers": []}, {"experiment": "e", "task": "t", "dataset": "d", "model": "m", "layers": {"1": {}}}, [1, 2]],
)
def test_a_metrics_file_of_the_wrong_shape_is_named(tmp_path, metrics):
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(ValueError, match="metrics"):
        report([tmp_path])


def test_direction_halves_are_the_two_halves_of_a_layer():
    from probing_lab.features.activations import Activations, layer_keys, layer_label

    layers = np.arange(3 * 2 * 4, dtype=np.float32).reshape(3, 2, 4)
    acts = Activations(layers, np.array([0, 2]))
    assert np.array_equal(acts.layer("1f"), layers[1][:, :2]) and np.array_equal(acts.layer("2b"), layers[2][:, 2:])
    assert np.array_equal(np.concatenate([acts.layer("2f"), acts.layer("2b")], axis=1), acts.layer("2"))
    with pytest.raises(ValueError, match="L0 has no direction halves"):
        acts.layer("0f")
    assert layer_label("1f") == "L1 forward" and layer_label("2b") == "L2 backward" and layer_label("mix") == "mix"
    assert layer_keys(3, halves=True) == ["0", "1", "1f", "1b", "2", "2f", "2b", "mean"]
    from probing_lab.probing.runs import layer_order

    assert layer_order(["mix", "2b", "1", "2", "1b", "0", "1f", "2f"]) == ["0", "1", "1f", "1b", "2", "2f", "2b", "mix"]
    assert Experiment.from_dict(
        {"name": "x", "task": "upos", "dataset": "ewt", "layers": [1, "1f", "2b"]}
    ).layer_keys == [
        "1",
        "1f",
        "2b",
    ]


def test_agreement_dataset_labels_one_verb_per_sentence_and_splits_by_subject():
    from probing_lab.datasets import load_dataset
    from probing_lab.lm.agreement import NOUNS

    splits = {name: load_dataset("agreement", name) for name in ("train", "dev", "test")}
    singular = {form: pair[0] for pair in NOUNS for form in pair}
    subjects = {name: {singular[s.tokens[1].form] for s in sentences} for name, sentences in splits.items()}
    assert not (subjects["train"] & subjects["test"]) and not (subjects["dev"] & subjects["test"])
    assert len(subjects["test"]) == 4 and len(subjects["train"]) == 12
    for sentences in splits.values():
        labels = T.token_labels(sentences, "subject_number")
        assert sum(label is not None for label in labels) == len(sentences)  # one labelled token (the verb) each
        # both members of each pair: the verb's form says nothing about the label
        verbs = Counter((t.form, t.extra["subject_number"]) for s in sentences for t in s.tokens if t.extra)
        assert (
            verbs[("is", "singular")] == verbs[("are", "singular")]
            and verbs[("is", "plural")] == verbs[("are", "plural")]
        )


def test_number_probe_runs_on_the_labelled_verbs_only_with_halves(tmp_path):
    from probing_lab.datasets import load_dataset

    exp = {
        "name": "number",
        "task": "subject_number",
        "dataset": "agreement",
        "layers": [0, "1f", "1b"],
        "probe": {"epochs": 3},
        "mdl": False,
        "random_init": False,
        "max_train_sentences": 200,
    }
    run = run_experiment(exp, model="random:cpu-tiny", out=tmp_path / "run", cache_dir=tmp_path / "c", progress=False,
                         log=lambda m: None)  # fmt: skip
    assert run.layer_keys == ["0", "1f", "1b"]
    assert run.metrics["tokens"]["train"] == 200  # one labelled verb per sentence, the other tokens skipped
    assert run.metrics["tokens"]["test"] == len(load_dataset("agreement", "test"))
    assert set(run.labels) == {"singular", "plural"}
    assert all(0 <= e.score <= 1 and e.control_score is not None for e in run.layers.values())
    assert run.majority == pytest.approx(0.5, abs=0.05)  # the verb forms of both numbers are balanced


def test_probe_on_the_snapshots_of_a_training_run(tmp_path, capsys):
    from probing_lab.cli import main
    from probing_lab.corpus.build import build_corpus
    from probing_lab.training.config import TrainConfig
    from probing_lab.training.trainer import train

    (tmp_path / "src.txt").write_text("".join(f"The author near the guards laughs number {i} .\n" for i in range(300)))
    build_corpus(tmp_path / "corpus", [tmp_path / "src.txt"], heldout_fraction=0.05, n_shards=1, progress=None)
    config = TrainConfig(model=TINY_MODEL, batch_size=4, unroll_steps=5, n_negative_samples=0, lr=0.2, max_steps=4,
                         checkpoint_every_steps=100, snapshot_fractions=(0.5,), threads=1)  # fmt: skip
    train(config, tmp_path / "corpus", tmp_path / "run", progress=False)
    exp = tmp_path / "number.toml"
    exp.write_text(
        'name = "number"\ntask = "subject_number"\ndataset = "agreement"\nlayers = [0, "1f"]\n'
        "max_train_sentences = 100\nmdl = false\n[probe]\nepochs = 2\n"
    )
    out = tmp_path / "emergence"
    assert main(["probe", str(exp), "--snapshots", str(tmp_path / "run"), "--out", str(out), "--quiet"]) == 0
    table = (out / "emergence.md").read_text()
    assert "| step-00000002 | 40 |" in table and "| step-00000004 | 80 |" in table, table
    first, last = ProbeRun.load(out / "step-00000002"), ProbeRun.load(out / "step-00000004")
    assert first.model == f"snapshot:{tmp_path / 'run' / 'snapshots' / 'step-00000002'}"
    assert first.random_init and not last.random_init  # the random-init baseline once
    assert main(["probe", str(exp), "--snapshots", str(tmp_path / "corpus"), "--out", str(out)]) == 2
    assert "no snapshots" in capsys.readouterr().err


def test_layer_curves_of_two_runs_name_every_line_by_its_run():
    """Two models on one plot: no two legend entries alike, the majority baseline a named line (not a
    label written over the curves)."""
    from probing_lab.paths import REPO_ROOT
    from probing_lab.probing.plots import layer_curve_figure
    from probing_lab.probing.runs import ProbeRun

    runs = [ProbeRun.load(REPO_ROOT / "probes" / "results" / name) for name in ("pos_ewt", "pos_ewt-early")]
    fig = layer_curve_figure(runs)
    names = [trace.name for trace in fig.data]
    assert len(names) == len(set(names)), names
    assert any(n.endswith("majority per type") for n in names) and not fig.layout.annotations
    assert all(any(n.startswith(run.model_label) for n in names) for run in runs)
    # the baseline named as the task names it: a span task's is the most frequent label, not a per-type one
    spans = layer_curve_figure([ProbeRun.load(REPO_ROOT / "probes" / "results" / "constituents_ptb")])
    assert [t.name for t in spans.data][-1].endswith(": most frequent label")


@pytest.mark.parametrize("shape", [(20000, 7), (9000, 3, 5), (1, 4)])
def test_standardising_statistics_are_the_rows_mean_and_deviation(shape):
    """The two-pass deviation over blocks of rows (a token layer, a mix's layers, one row) is
    ``X.std(0)`` to float32 rounding; the mean is ``X.mean(0)`` itself."""
    from probing_lab.probing.rows import ArrayRows, _standardise

    X = np.random.default_rng(0).normal(3.0, 2.0, size=shape).astype(np.float32)
    mean, std = _standardise(ArrayRows(X))
    assert torch.equal(mean, torch.as_tensor(X).mean(0))
    expected = torch.as_tensor(X).std(0).clamp_min(1e-4) if len(X) > 1 else torch.full(shape[1:], 1e-4)
    assert torch.allclose(std, expected, rtol=1e-6, atol=0)
