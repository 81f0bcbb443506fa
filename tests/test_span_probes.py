"""Edge probing (span_label): the span datasets made from the treebanks, the span probe on planted
properties, the control and head words, and spans files end to end from the shell."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import numpy as np
import pytest
import torch
from conftest import TINY_MODEL, shared_dir

from probing_lab.cli import main
from probing_lab.datasets import load_dataset
from probing_lab.datasets.ptb import parse_mrg
from probing_lab.datasets.records import LabelledSpan, Sentence, Token
from probing_lab.datasets.span_tasks import (
    NONE,
    category,
    chunk_spans,
    constituents,
    coreference,
    dependency_spans,
    mentions,
)
from probing_lab.elmo import ElmoBiLM, ElmoOptions, save_checkpoint
from probing_lab.probing import tasks as T
from probing_lab.probing.mdl import online_codelength
from probing_lab.probing.probes import ProbeConfig
from probing_lab.probing.runs import report
from probing_lab.probing.span_probe import SpanInputs, fit_span_probe, fit_span_probes


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    model = ElmoBiLM(ElmoOptions.from_dict(TINY_MODEL))
    model.reset_parameters(torch.Generator().manual_seed(0))
    return str(save_checkpoint(model, tmp_path_factory.mktemp("model") / "tiny"))


@pytest.fixture(scope="module")
def data_dir():
    shared = shared_dir()
    if shared is None or not (shared / "datasets" / "ud-english-gum").is_dir():
        pytest.skip("the treebanks are not found: set PROBING_LAB_SHARED to the team's shared/ folder")
    return shared / "datasets"


# --- span datasets -------------------------------------------------------------------------------


def test_constituents_are_the_phrasal_nodes_without_traces():
    tree = "( (S (NP-SBJ (NNP Vinken)) (VP (VBZ is) (NP-PRD (DT a) (NN director)) (-NONE- *T*-1)) (. .)) )"
    (s,) = parse_mrg(tree)
    assert s.words == ["Vinken", "is", "a", "director", "."]
    assert [(e.span1, e.label) for e in s.spans] == [
        ((0, 1), "NP-SBJ"),
        ((0, 5), "S"),
        ((1, 4), "VP"),  # the trace adds no word
        ((2, 4), "NP-PRD"),
    ]
    unary = parse_mrg("( (S (VP (VB Go)) (. .)) )")[0]
    assert [(e.span1, e.label) for e in unary.spans] == [((0, 1), "VP"), ((0, 2), "S")]
    (labelled,) = constituents([s], seed=0)
    gold = [(e.span1, e.label) for e in labelled.spans if e.label != NONE]
    assert gold == [((0, 1), "NP"), ((0, 5), "S"), ((1, 4), "VP"), ((2, 4), "NP")]
    negatives = [e.span1 for e in labelled.spans if e.label == NONE]
    assert len(negatives) == 1 and negatives[0][1] - negatives[0][0] >= 2  # half of the 3 spans of 2+ words
    assert negatives[0] not in {e.span1 for e in s.spans}
    assert [category(x) for x in ("NP-SBJ-1", "S=2", "-NONE-", "PRP$")] == ["NP", "S", "-NONE-", "PRP$"]


def test_chunks_from_bio_tags():
    tags = ["B-NP", "I-NP", "B-VP", "O", "I-PP", "B-NP", "I-ADJP"]
    got = [(e.span1, e.label) for e in chunk_spans(tags)]
    assert got == [((0, 2), "NP"), ((2, 3), "VP"), ((4, 5), "PP"), ((5, 6), "NP"), ((6, 7), "ADJP")]


def _gum(misc: list[str], id="GUM_doc_a-1", heads=None) -> Sentence:
    tokens = [Token(form=f"w{i}", extra={"misc": m} if m != "_" else {}) for i, m in enumerate(misc)]
    for t, h in zip(tokens, heads or []):
        t.head, t.deprel = h, "dep"
    return Sentence(tokens, id, "gum")


def test_gum_mentions_follow_the_bracket_notation():
    s = _gum(
        [
            "Entity=(1-person-new-cf1-1-sgl)|SpaceAfter=No",  # one-token mention
            "Entity=(2-abstract-giv:act-cf2-1-coref",  # opens 2
            "_",
            "Entity=(7-place-new-x-coref(3-object-new-y-coref)",  # opens 7, a one-token 3
            "Entity=7)2)",  # closes 7 then 2
            "Entity=(4-time-new-z",  # never closed: dropped
        ]
    )
    assert mentions(s) == [(0, 1, "1", "person"), (1, 5, "2", "abstract"), (3, 4, "3", "object"), (3, 5, "7", "place")]


def test_coreference_pairs_are_balanced_and_span_two_sentences():
    first = _gum(["Entity=(1-person-a)", "_", "Entity=(2-place-b)"], "GUM_doc_a-1")
    second = _gum(["Entity=(1-person-a)", "Entity=(3-object-c)", "Entity=(2-place-b)"], "GUM_doc_a-2")
    other_doc = _gum(["Entity=(1-person-a)", "Entity=(1-person-a)"], "GUM_doc_b-1")
    out = coreference([first, second, other_doc], seed=0)
    labels = [e.label for s in out for e in s.spans]
    assert labels.count("same") == labels.count("different") == 3
    window = next(s for s in out if s.id == "GUM_doc_a-1+GUM_doc_a-2")
    assert window.words == first.words + second.words
    same = {(e.span1, e.span2) for e in window.spans if e.label == "same"}
    assert same == {((0, 1), (3, 4)), ((2, 3), (5, 6))}  # across the two sentences
    assert next(s for s in out if s.id == "GUM_doc_b-1").words == other_doc.words  # a new document: no window


def test_dependency_spans_and_span_heads():
    s = Sentence(
        [
            Token("the", head=2, deprel="det"),
            Token("cat", head=3, deprel="nsubj:pass"),
            Token("sat", head=0, deprel="root"),
        ],
        "1",
        "x",
    )
    (out,) = dependency_spans([s])
    assert [(e.span1, e.span2, e.label) for e in out.spans] == [((1, 2), (0, 1), "det"), ((2, 3), (1, 2), "nsubj")]
    assert T.span_head(s, (0, 2)) == 1  # "the cat": cat's head lies outside
    assert T.span_head(s, (0, 3)) == 2
    no_heads = Sentence([Token("the"), Token("big"), Token("cat")], "2", "x", spans=[LabelledSpan((0, 3), None, "NP")])
    assert T.span_head(no_heads, (0, 3)) == 2  # without heads: the last token
    pair = Sentence(no_heads.tokens, "3", "x", spans=[LabelledSpan((0, 1), (2, 3), "det")])
    assert T.span_head_words([no_heads, pair]) == ["cat", "the -> cat"]
    labels = T.span_control_labels([no_heads, pair, no_heads], ["A", "B"], seed=1)
    assert labels[0] == labels[2]  # the same head word type, the same control label


@pytest.mark.parametrize(
    "name", ["ptb-constituents", "conll2000-chunks", "gum-entities", "gum-coref", "ewt-deprel-spans"]
)
def test_span_datasets_load_with_labels(name, data_dir):
    sentences = load_dataset(name, "dev", data_dir)
    spans = [e for s in sentences for e in s.spans]
    assert len(spans) > 1000 and len({e.label for e in spans}) >= 2
    for s in sentences[:200]:
        for e in s.spans:
            for span in (e.span1, e.span2):
                assert span is None or 0 <= span[0] < span[1] <= len(s.tokens)
    pairs = {e.span2 is not None for e in spans}
    assert pairs == ({True} if name in ("gum-coref", "ewt-deprel-spans") else {False})


# --- the span probe -------------------------------------------------------------------------------


def _planted(n: int, seed: int, pairs: bool = False) -> tuple[SpanInputs, np.ndarray]:
    """Spans of 3 tokens whose label is a planted direction of the MIDDLE token (the endpoints are
    noise): only the attention pool can find it. For pairs the label is on the second span."""
    rng = np.random.default_rng(seed)
    tokens = rng.normal(size=(n * 6, 16)).astype(np.float32)
    labels = rng.integers(0, 2, n)
    starts = np.arange(n) * 6
    middle = starts + (3 if pairs else 1)
    tokens[middle, 0] = np.where(labels == 1, 4.0, -4.0)
    span1 = np.stack([starts, starts + 3], 1)
    span2 = np.stack([starts + 2, starts + 5], 1) if pairs else None
    return SpanInputs(tokens, span1, span2), labels


@pytest.mark.parametrize("pairs", [False, True])
def test_the_span_probe_finds_a_property_of_the_inner_tokens(pairs):
    X, y = _planted(600, 0, pairs)
    Xd, yd = _planted(200, 1, pairs)
    Xt, yt = _planted(200, 2, pairs)
    probe = fit_span_probe(X, y, Xd, yd, 2, ProbeConfig(lr=0.01, epochs=15))
    assert probe.accuracy(Xt, yt) > 0.95
    mix = SpanInputs(np.stack([X.tokens, X.tokens * 0], 1), X.span1, X.span2)
    mixed = fit_span_probe(mix, y, mix, y, 2, ProbeConfig(lr=0.01, epochs=10, mix=True))
    assert mixed.mix_weights()[0] > 0.5  # the layer that holds it
    config = ProbeConfig(lr=0.01, epochs=5)
    codes = online_codelength(X, y, Xd, yd, 2, config, fit=fit_span_probe)
    noise = online_codelength(X, np.random.default_rng(3).permutation(y), Xd, yd, 2, config, fit=fit_span_probe)
    assert codes["compression"] > 1.05 > noise["compression"]  # the planted labels compress, noise does not


@pytest.mark.parametrize("kind", ["linear", "rank"])
@pytest.mark.parametrize("mix", [False, True])
def test_span_probes_trained_together_are_the_probes_trained_alone(mix, kind):
    """A task and its control task share each minibatch's gathered rows, nothing else (the linear
    heads share products too, so they agree to rounding; modules, as the rank probe runs, exactly)."""
    X, y = _planted(300, 0, pairs=True)
    Xd, yd = _planted(100, 1, pairs=True)
    if mix:
        X = SpanInputs(np.stack([X.tokens, X.tokens[::-1]], 1), X.span1, X.span2)
        Xd = SpanInputs(np.stack([Xd.tokens, Xd.tokens[::-1]], 1), Xd.span1, Xd.span2)
    control = np.random.default_rng(5).integers(0, 2, len(y))
    control_dev = np.random.default_rng(6).integers(0, 2, len(yd))
    config = ProbeConfig(kind=kind, lr=0.01, epochs=6, patience=2, mix=mix)
    together = fit_span_probes(X, [y, control], Xd, [yd, control_dev], 2, config)
    alone = [fit_span_probe(X, y, Xd, yd, 2, config), fit_span_probe(X, control, Xd, control_dev, 2, config)]
    for a, b in zip(together, alone):
        assert (a.epochs_run, a.history) == (b.epochs_run, b.history)
        for (name, p), q in zip(a.module.state_dict().items(), b.module.state_dict().values()):
            assert torch.equal(p, q) if kind == "rank" else torch.allclose(p, q, atol=1e-5), name
        assert np.allclose(a.predict_proba(Xd), b.predict_proba(Xd), atol=0 if kind == "rank" else 1e-5)


@pytest.mark.parametrize("keys", [["0", "1", "2", "mix"], ["2", "0"], ["mix"]])
def test_span_probes_of_several_layers_trained_together_are_the_probes_trained_alone(keys):
    """fit_span_layers trains each layer entry's probes (task and control) side by side on the tokens of
    every layer: each is the probe fit_span_probes trains on that layer (or the mix) alone, to rounding."""
    from probing_lab.probing.span_probe import fit_span_layers

    X, y = _planted(300, 0, pairs=True)
    Xd, yd = _planted(100, 1, pairs=True)
    rng = np.random.default_rng(7)
    scale = [1.0, 0.5, 0.0]  # the planted direction: strong in layer 0, weaker in 1, none in 2

    def layers(S):
        stack = [S.tokens * s + rng.normal(size=S.tokens.shape).astype(np.float32) * (1 - s) for s in scale]
        return SpanInputs(np.stack(stack, 1), S.span1, S.span2)

    X3, Xd3 = layers(X), layers(Xd)
    control = np.random.default_rng(5).integers(0, 2, len(y))
    control_dev = np.random.default_rng(6).integers(0, 2, len(yd))
    config = ProbeConfig(lr=0.01, epochs=6, patience=1)
    together = fit_span_layers(X3, [y, control], Xd3, [yd, control_dev], 2, config, keys)
    assert list(together) == keys
    for key in keys:
        if key == "mix":
            cfg, Xk, Xdk = replace(config, mix=True), X3, Xd3
        else:
            cfg = config
            Xk, Xdk = (SpanInputs(S.tokens[:, int(key)], S.span1, S.span2) for S in (X3, Xd3))
        alone = fit_span_probes(Xk, [y, control], Xdk, [yd, control_dev], 2, cfg)
        for a, b in zip(together[key], alone):
            assert (a.epochs_run, a.history) == (b.epochs_run, b.history), key
            for (name, p), q in zip(a.module.state_dict().items(), b.module.state_dict().values()):
                assert torch.allclose(p, q, atol=1e-5), (key, name)
            assert np.allclose(a.predict_proba(Xdk), b.predict_proba(Xdk), atol=1e-5)
    if "0" in keys:
        assert together["0"][0].dev_accuracy > together["2"][0].dev_accuracy + 0.15  # each read its own layer


def test_span_probes_across_layers_refuse_what_they_cannot_train():
    from probing_lab.probing.span_probe import fit_span_layers

    X, y = _planted(40, 0)
    X3 = SpanInputs(np.stack([X.tokens, X.tokens], 1), X.span1)
    with pytest.raises(ValueError, match="not layers of these tokens"):
        fit_span_layers(X3, [y], X3, [y], 2, ProbeConfig(), ["0", "3"])
    with pytest.raises(ValueError, match="tokens of every layer"):
        fit_span_layers(X, [y], X, [y], 2, ProbeConfig(), ["0"])
    with pytest.raises(ValueError, match="only linear"):
        fit_span_layers(X3, [y], X3, [y], 2, ProbeConfig(kind="mlp"), ["0"])


@pytest.mark.parametrize("pairs", [False, True])
@pytest.mark.parametrize("mix", [False, True, "layers"])
@pytest.mark.parametrize("one_token", [None, "summed", "folded"])
@pytest.mark.parametrize("n_heads", [2, 1])
@pytest.mark.parametrize("pool", ["tokens", "pairs"])
def test_stacked_span_heads_step_as_torch_adamw_with_autograd(mix, pairs, one_token, n_heads, pool, monkeypatch):
    """The linear span probes' fast path (the gradient of the endpoints, the attention pool, the
    classifier and the mix, and AdamW, written out; a role of one-token spans with its three blocks
    summed, or folded into their mean for the whole fit; one head, or two of which one stops early;
    the pool as sums over tokens, or over (span, token) pairs where those would underflow; "layers":
    heads of tokens of every layer, each reading one layer or learning a mix) gives the numbers of the
    modules trained with autograd."""
    from probing_lab.probing import span_heads
    from probing_lab.probing.span_batches import StandardisedTokens, gather_spans, token_batch
    from probing_lab.probing.span_heads import StackedSpanLinear
    from probing_lab.probing.span_probe import SpanProbe

    if pool == "pairs":
        monkeypatch.setattr(span_heads, "TINY_POOL_WEIGHT", float("inf"))  # every span: from its pairs

    rng = np.random.default_rng(0)
    n_layers, dim, k = (3 if mix else 1), 8, 4
    tokens = torch.as_tensor(rng.normal(size=(200, n_layers, dim) if mix else (200, dim)), dtype=torch.float32)
    starts = rng.integers(0, 150, size=(6, 32, 2 if pairs else 1))
    lengths = rng.integers(1, 12, size=starts.shape)  # several lengths per minibatch, overlapping spans
    if one_token:
        lengths[..., 0] = 1  # the first role's spans all one token long
    labels = torch.as_tensor(rng.integers(0, k, size=(6, 32, 4)))
    source = StandardisedTokens(tokens.numpy(), torch.zeros(tokens.shape[1:]), torch.ones(tokens.shape[1:]))
    # "layers": layer 1 (stops early: then not projected), layer 2 twice (one product), a mix; or one mix
    reads = ([1, 2, 2, None] if n_heads == 2 else [None]) if mix == "layers" else [None if mix else -1] * n_heads
    n_heads = len(reads)
    cfg = ProbeConfig(lr=0.05, weight_decay=0.01, mix=bool(mix))
    modules = []
    for read in reads:
        torch.manual_seed(cfg.seed)
        modules.append(SpanProbe(dim, k, replace(cfg, mix=read is None), 2 if pairs else 1, n_layers))
    folded = [one_token == "folded", False][: 2 if pairs else 1]
    stacked = StackedSpanLinear(modules, cfg, folded, layers=reads if mix == "layers" else None)
    optimizers = [torch.optim.AdamW(m.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay) for m in modules]

    def inputs(gathered, read):  # a head that reads one layer: that layer of the gathered rows
        return gathered if read is None or read < 0 else [(h[..., read, :], *rest) for h, *rest in gathered]

    for step in range(6):
        spans = [torch.as_tensor(np.stack([s, s + n], 1)) for s, n in zip(starts[step].T, lengths[step].T)]
        gathered, batch = gather_spans(source, spans), token_batch(source, spans)
        active = list(range(n_heads)) if n_heads == 1 or step < 4 else list(range(1, n_heads))  # head 0 stops
        stacked.step(batch, labels[step, :, :n_heads], active)
        for h in active:
            optimizers[h].zero_grad()
            logits = modules[h](inputs(gathered, reads[h]))
            torch.nn.functional.cross_entropy(logits, labels[step][:, h]).backward()
            optimizers[h].step()
    for h, module in enumerate(modules):
        torch.manual_seed(1)
        mine = stacked.copy_head_into(
            h, SpanProbe(dim, k, replace(cfg, mix=reads[h] is None), 2 if pairs else 1, n_layers)
        )
        for (name, value), theirs in zip(mine.state_dict().items(), module.state_dict().values()):
            if name.startswith("attention") and name.endswith("bias"):
                # shifts every score of a softmax: its true gradient is 0 (written out as such); with
                # autograd it is rounding noise, which AdamW scales up to steps of the learning rate
                continue
            assert torch.allclose(value, theirs, atol=1e-6), name
        assert torch.allclose(stacked.logits(batch)[:, h], module(inputs(gathered, reads[h])), atol=1e-5)
    if mix:
        assert not torch.equal(stacked.mix[-1], torch.zeros(3))  # the mix did train


def test_a_token_batch_holds_each_covered_row_once_in_order_and_its_spans_as_rows_of_it():
    """token_batch finds the covered rows from the spans' intervals alone: checked against the rows of
    every (span, token) pair, sorted and made unique, on random overlapping, nested, touching and
    separate spans of one or two roles."""
    from probing_lab.probing.span_batches import token_batch

    class Rows:  # take() returns the rows asked for
        def take(self, rows):
            return rows

    rng = np.random.default_rng(3)
    for _ in range(300):
        n_roles, B = int(rng.integers(1, 3)), int(rng.integers(1, 40))
        spans = []
        for _ in range(n_roles):
            start = rng.integers(0, 120, B)
            spans.append(torch.as_tensor(np.stack([start, start + rng.integers(1, 15, B)], 1)))
        batch = token_batch(Rows(), spans)
        covered = np.unique(np.concatenate([np.arange(s, e) for span in spans for s, e in span.numpy()]))
        assert batch.tokens.tolist() == covered.tolist()
        runs = np.concatenate(([0], np.cumsum(covered[1:] != covered[:-1] + 1)))  # consecutive rows: one run
        assert batch.runs.tolist() == runs.tolist()
        for span, role in zip(spans, batch.roles):
            assert covered[role.first.numpy()].tolist() == span[:, 0].tolist()
            assert covered[role.last.numpy()].tolist() == (span[:, 1] - 1).tolist()
            rows, span_of = role.pairs()
            expected = [(r, i) for i, (s, e) in enumerate(span.numpy()) for r in range(s, e)]
            assert list(zip(covered[rows.numpy()].tolist(), span_of.tolist())) == expected
            assert role.one_token == bool((span[:, 1] - span[:, 0] == 1).all())
            if not role.one_token:  # the membership, and its transpose, as CSR
                member = np.zeros((len(span), len(covered)))
                member[span_of.numpy(), rows.numpy()] = 1
                for (pointers, columns), expected in [(role.members[:2], member), (role.members[2:], member.T)]:
                    A = torch.sparse_csr_tensor(
                        pointers, columns, torch.ones(len(columns)), expected.shape, check_invariants=True
                    )
                    assert np.array_equal(A.to_dense().numpy(), expected)


def test_a_span_far_below_its_sentences_attention_maximum_pools_as_the_module_does():
    """Pool weights shifted by their run's maximum underflow for a span whose tokens all score ~100
    below it: such a span is pooled from its pairs (each span shifted by its own maximum), finite and
    as the module computes it; the others from the sums over tokens."""
    from probing_lab.probing.span_batches import StandardisedTokens, gather_spans, token_batch
    from probing_lab.probing.span_heads import StackedSpanLinear
    from probing_lab.probing.span_probe import SpanProbe

    rng = np.random.default_rng(0)
    tokens = rng.normal(size=(40, 8)).astype(np.float32)
    tokens[:20, 0] = 0.0
    tokens[5:10, 0] = -30.0  # with the attention weight below: scores 120 under the sentence's others
    source = StandardisedTokens(tokens, torch.zeros(8), torch.ones(8))
    cfg = ProbeConfig()
    torch.manual_seed(0)
    module = SpanProbe(8, 3, cfg)
    with torch.no_grad():
        module.attention[0].weight.zero_()
        module.attention[0].weight[0, 0] = 4.0
    spans = [torch.tensor([[0, 20], [5, 10], [6, 8], [20, 30], [25, 40]])]
    stacked = StackedSpanLinear([module], cfg)
    mine = stacked.logits(token_batch(source, spans))[:, 0]
    assert torch.isfinite(mine).all()
    assert torch.allclose(mine, module(gather_spans(source, spans)), atol=1e-5)


def test_one_token_roles_train_folded_as_they_would_unfolded(monkeypatch):
    # arcs: a head and a dependent token, each a one-token span; the label is a direction of the head
    from probing_lab.probing import span_probe

    rng = np.random.default_rng(0)

    def arcs(n, seed):
        r = np.random.default_rng(seed)
        tokens = r.normal(size=(n * 4, 16)).astype(np.float32)
        labels = r.integers(0, 3, n)
        tokens[np.arange(n) * 4, labels] += 3.0
        span1 = np.stack([np.arange(n) * 4, np.arange(n) * 4 + 1], 1)
        return SpanInputs(tokens, span1, span1 + 2, np.arange(n) // 8), labels

    (X, y), (Xd, yd) = arcs(600, 1), arcs(200, 2)
    control = rng.integers(0, 3, len(y))
    assert span_probe._one_token_roles(X, Xd) == [True, True]
    assert span_probe._one_token_roles(X, SpanInputs(Xd.tokens, Xd.span1, Xd.span2 + [[0, 1]])) == [True, False]
    config = ProbeConfig(lr=0.01, weight_decay=0.01, epochs=6, patience=2)
    folded = fit_span_probes(X, [y, control], Xd, [yd, control[:200]], 3, config)
    monkeypatch.setattr(span_probe, "_one_token_roles", lambda *inputs: [False, False])
    unfolded = fit_span_probes(X, [y, control], Xd, [yd, control[:200]], 3, config)
    for a, b in zip(folded, unfolded):
        assert (a.epochs_run, a.history) == (b.epochs_run, b.history)
        for (name, p), q in zip(a.module.state_dict().items(), b.module.state_dict().values()):
            assert torch.allclose(p, q, atol=1e-5), name
    assert folded[0].accuracy(Xd, yd) > 0.9


def test_span_probe_bad_input():
    X, y = _planted(50, 0)
    with pytest.raises(ValueError, match="no training spans"):
        fit_span_probe(X[np.arange(0)], y[:0], X, y, 2)
    with pytest.raises(ValueError, match="trains with adamw"):
        fit_span_probe(X, y, X, y, 2, ProbeConfig(optimizer="lbfgs"))
    with pytest.raises(ValueError, match="mix=True needs tokens"):
        fit_span_probe(X, y, X, y, 2, ProbeConfig(mix=True))


# --- spans files end to end -----------------------------------------------------------------------


def spans_file(path, n: int = 120, seed: int = 0, pairs: bool = False):
    """Noun phrases "the/a ADJ NOUN" in short sentences, labelled by their article (single spans) or,
    for pairs, (phrase, verb) labelled by the verb's number."""
    r = random.Random(seed)
    rows = []
    for _ in range(n):
        det, adj, noun, verb = (
            r.choice(["the", "a"]),
            r.choice(["big", "red", "old"]),
            r.choice(["cat", "dog"]),
            r.choice(["runs", "run"]),
        )
        words = [det, adj, noun, verb, "."]
        if pairs:
            rows.append({"tokens": words, "span1": [0, 3], "span2": [3, 4], "label": "sg" if verb == "runs" else "pl"})
        else:
            rows.append({"tokens": words, "span1": [0, 3], "label": "def" if det == "the" else "indef"})
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("pairs", [False, True])
def test_a_spans_file_is_probed_from_the_shell_and_reported(tmp_path, tiny, capsys, pairs):
    data = spans_file(tmp_path / "phrases.jsonl", pairs=pairs)
    out = tmp_path / "run"
    args = ["probe", "--data", str(data), "--format", "spans", "--model", tiny, "--out", str(out), "--layers", "0,2"]
    assert main([*args, "--quiet"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["task"] == "span_label" and metrics["span_pairs"] is pairs
    assert sum(metrics["spans"].values()) == 120 and set(metrics["labels"]) == (
        {"sg", "pl"} if pairs else {"def", "indef"}
    )
    for entry in metrics["layers"].values():
        assert 0.0 <= entry["score"] <= 1.0 and entry["control_score"] is not None
    assert set(metrics["baselines"]["random_init"]) == {"0", "2"}
    assert metrics["files"][0]["sha256"] and (out / "split.json").exists()
    assert "| phrases (span_label) | " in report([out])


def test_bad_spans_files_get_clear_errors(tmp_path, tiny, capsys):
    mixed = tmp_path / "mixed.jsonl"
    rows = [{"tokens": ["a", str(i), "c"], "span1": [0, 1], "label": "X" if i % 2 else "Y"} for i in range(20)]
    rows += [{"tokens": ["d", str(i)], "span1": [0, 1], "span2": [1, 2], "label": "X"} for i in range(20)]
    mixed.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    one = tmp_path / "one.jsonl"
    one.write_text(
        "\n".join(json.dumps({"tokens": ["a", str(i)], "span1": [0, 1], "label": "X"}) for i in range(20)) + "\n"
    )
    outside = tmp_path / "outside.jsonl"
    outside.write_text(json.dumps({"tokens": ["a"], "span1": [0, 2], "label": "X"}) + "\n", encoding="utf-8")
    for path, message in [
        (mixed, "mixed.jsonl:1 has a single span (no span2), " + f"{mixed}:21 has a span pair (span2): a task probes"),
        (one, "every span has the label 'X'"),
        (outside, "outside.jsonl:1: span1 [0, 2] is outside its sentence of 1 tokens"),
    ]:
        code = main(
            [
                "probe",
                "--data",
                str(path),
                "--format",
                "spans",
                "--model",
                tiny,
                "--out",
                str(tmp_path / f"r-{path.stem}"),
                "--quiet",
            ]
        )
        err = capsys.readouterr().err
        assert code == 2 and message in err and "Traceback" not in err, err


# --- every format with the shipped model ----------------------------------------------------------


@pytest.mark.parametrize("fmt", ["conllu", "tokens", "wic", "sentences", "spans"])
def test_every_format_from_the_shell_with_the_shipped_model(tmp_path, capsys, fmt):
    """The one command a new user runs on their file, with the model the lab ships (no --model)."""
    from test_own_data import conllu_file, tokens_file, wic_file
    from test_sentence_probes import sentences_file

    make = {
        "conllu": lambda p: conllu_file(p, 30),
        "tokens": lambda p: tokens_file(p, 40),
        "wic": lambda p: wic_file(p, 40),
        "sentences": lambda p: sentences_file(p, 40),
        "spans": lambda p: spans_file(p, 60),
    }
    data = make[fmt](tmp_path / f"mine.{fmt}")
    out = tmp_path / "run"
    args = ["probe", "--data", str(data), "--format", fmt, "--layers", "0,2", "--out", str(out), "--quiet"]
    assert main(args) == 0, capsys.readouterr().err
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["model"].endswith("elmo-lab") and set(metrics["layers"]) == {"0", "2"}
    assert metrics["experiment"].startswith("mine")  # named after the file (and the label, where one is probed)
    assert all(0.0 <= e["score"] <= 1.0 for e in metrics["layers"].values())
    if fmt == "spans":  # span probes stay float32 on any CPU, whatever "auto" takes for token probes
        assert metrics["machine"]["bfloat16_products"] is False
    assert main(["report", str(out)]) == 0
    assert f"| {metrics['experiment']} ({metrics['task']}) | {metrics['model']} |" in capsys.readouterr().out
