"""Label makers and the controls that make a probe's score mean something.

Token tasks turn sentences into one label per token (``upos``, ``xpos``, ``deprel``,
``const_depth``; ``token_label``: the label column of the user's own file, ``Token.extra["token_label"]``). Controls:

* :func:`control_labels` (Hewitt & Liang 2019): every word type gets one fixed random label,
  drawn from the task's label distribution on the training set, the same for a given seed
  in every process;
* :func:`majority_per_type`: each word type's most frequent training label, the global
  majority for unseen types;
* selectivity = task accuracy - control accuracy.

Sentence tasks (``sentence_label``: ``Sentence.label``, from a ``sentences`` file or a derived EWT
dataset) have their own control, :func:`length_control_labels`: one fixed random label per
sentence-length bucket (``datasets.sentence_tasks.length_bin``), drawn the same way.

Span tasks (``span_label``, edge probing: ``Sentence.spans``, from a ``spans`` file or a span
dataset) have :func:`span_control_labels`: one fixed random label per span's head word type (per
pair of head word types for span pairs), the head being :func:`span_head`.

Tree tasks (Hewitt & Manning 2019) work from heads: :func:`tree_distances`, :func:`tree_depths`,
:func:`uuas` (minimum spanning tree of predicted distances against gold edges, punctuation
excluded), :func:`spearman_by_length` (averaged per sentence, then over lengths 5-50).
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from typing import Iterable, Optional, Sequence

import numpy as np

from ..datasets.files import TokenTable
from ..datasets.sentence_tasks import length_bin

TOKEN_TASKS = ("upos", "xpos", "deprel", "const_depth", "subject_number", "token_label")
SENTENCE_TASKS = ("sentence_label",)
SPAN_TASKS = ("span_label",)
# only some tokens are labelled (the verb; a file's tokens labelled "_" or without the feature); the others are skipped
SPARSE_TASKS = ("subject_number", "token_label")


def token_labels(sentences, task: str) -> list[Optional[str]]:
    """One label per token, all sentences concatenated (None for the unlabelled tokens of a sparse task)."""
    if task not in TOKEN_TASKS:
        raise ValueError(f"unknown token task {task!r}; choose one of {list(TOKEN_TASKS)}")
    if isinstance(sentences, TokenTable):  # a token-labelled file, read compactly
        if task != "token_label":
            raise ValueError(f"{sentences.source} holds one label column, for token_label, not {task}")
        return sentences.token_labels()
    labels = []
    for s in sentences:
        for t in s.tokens:
            value = t.extra.get(task) if task in ("const_depth", *SPARSE_TASKS) else getattr(t, task)
            if value is None and task in SPARSE_TASKS:
                labels.append(None)
                continue
            if value is None:
                raise ValueError(f"{s.source} sentence {s.id}: token {t.form!r} has no {task} label")
            if task == "deprel":
                value = value.split(":")[0]  # universal relation without subtype (nsubj:pass -> nsubj)
            labels.append(str(value))
    return labels


class LabelIndex:
    """Label strings <-> ids, fitted on training labels; unseen labels map to ``n`` (never predicted)."""

    def __init__(self, train_labels: Iterable[str]):
        counts = Counter(train_labels)
        self.labels = sorted(counts, key=lambda l: (-counts[l], l))
        self.index = {l: i for i, l in enumerate(self.labels)}
        self.counts = counts

    def __len__(self) -> int:
        return len(self.labels)

    def encode(self, labels: Sequence[str]) -> np.ndarray:
        return np.array([self.index.get(l, len(self.labels)) for l in labels], dtype=np.int64)


def confusion_matrix(gold: np.ndarray, predicted: np.ndarray, n_labels: int) -> list[list[int]]:
    """``C[g][p]``: how many tokens of gold label ``g`` were predicted ``p`` (gold labels unseen in
    training, encoded as ``n_labels``, are left out)."""
    gold, predicted = np.asarray(gold), np.asarray(predicted)
    keep = gold < n_labels
    counts = np.bincount(gold[keep] * n_labels + predicted[keep], minlength=n_labels * n_labels)
    return counts.reshape(n_labels, n_labels).tolist()


def _unit_hash(seed: int, word: str) -> float:
    digest = hashlib.sha256(f"{seed}\x1f{word}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def control_labels(words: Sequence[str], train_labels: Sequence[str], seed: int = 0) -> list[str]:
    """Hewitt & Liang's control task: ``words`` -> a label per word TYPE, random but fixed for
    (type, seed), with probabilities equal to the training label distribution."""
    counts = Counter(train_labels)
    labels = sorted(counts)
    cdf = np.cumsum([counts[l] for l in labels], dtype=np.float64)
    cdf /= cdf[-1]
    cache: dict[str, str] = {}
    out = []
    for w in words:
        if w not in cache:
            cache[w] = labels[min(int(np.searchsorted(cdf, _unit_hash(seed, w), side="right")), len(labels) - 1)]
        out.append(cache[w])
    return out


def sentence_labels(sentences, task: str = "sentence_label") -> list[str]:
    """One label per sentence (``Sentence.label``); a sentence without one is an error naming it."""
    if task not in SENTENCE_TASKS:
        raise ValueError(f"unknown sentence task {task!r}; choose one of {list(SENTENCE_TASKS)}")
    for s in sentences:
        if s.label is None:
            raise ValueError(
                f"{s.source} sentence {s.id}: no sentence label ({task} needs a sentences file or a sentence dataset)"
            )
    return [s.label for s in sentences]


def length_control_labels(lengths: Sequence[int], train_labels: Sequence[str], seed: int = 0) -> list[str]:
    """The sentence tasks' control: every sentence-length bucket gets one fixed random label, drawn
    from the training label distribution (:func:`control_labels` on the buckets' names)."""
    return control_labels([f"length {length_bin(n)}" for n in lengths], train_labels, seed)


def span_head(sentence, span: tuple[int, int]) -> int:
    """The head token of a span (0-based): with dependency heads, the first token whose head lies
    outside the span (its syntactic head); without them (PTB trees, chunks, a spans file), the
    span's last token, which is the head of most English noun phrases."""
    start, end = span
    for i in range(start, end):
        head = sentence.tokens[i].head
        if head is None:
            break
        if not start < head <= end:  # 1-based head outside the span (or the root)
            return i
    return end - 1


def span_head_words(sentences) -> list[str]:
    """Per labelled span (all sentences, in order), its head word lowercased; ``"a -> b"`` for a pair."""
    out = []
    for s in sentences:
        for example in s.spans:
            words = [s.tokens[span_head(s, span)].form.lower() for span in (example.span1, example.span2) if span]
            out.append(" -> ".join(words))
    return out


def span_control_labels(sentences, train_labels: Sequence[str], seed: int = 0) -> list[str]:
    """The span tasks' control: every head word type (pair of types) gets one fixed random label
    from the training label distribution (:func:`control_labels` on :func:`span_head_words`)."""
    return control_labels(span_head_words(sentences), train_labels, seed)


def majority_per_type(train_words: Sequence[str], train_labels: Sequence[str], words: Sequence[str]) -> list[str]:
    by_type: dict[str, Counter] = defaultdict(Counter)
    for w, l in zip(train_words, train_labels):
        by_type[w][l] += 1
    overall = Counter(train_labels).most_common(1)[0][0]
    best = {w: c.most_common(1)[0][0] for w, c in by_type.items()}
    return [best.get(w, overall) for w in words]


def accuracy(predicted: Sequence, gold: Sequence) -> float:
    predicted, gold = np.asarray(predicted), np.asarray(gold)
    return float((predicted == gold).mean()) if len(gold) else float("nan")


# --- trees --------------------------------------------------------------------------------


def tree_distances(heads: Sequence[int]) -> np.ndarray:
    """``heads[i]`` = 1-based head of token i+1 (0 = root) -> ``(n, n)`` path lengths. The path
    between two tokens climbs to their lowest common ancestor, so with ``A[i, j] = 1`` when ``j`` is
    ``i`` or one of its ancestors, ``d(i, j) = |anc(i)| + |anc(j)| - 2 |anc(i) & anc(j)|``: one walk
    up the tree and one small product per sentence (scipy's breadth-first search from every token
    cost ~0.2 ms a sentence, a few seconds per pass over EWT)."""
    n = len(heads)
    parent = np.asarray(heads, dtype=np.int64).reshape(n) - 1  # -1: the root
    if n and ((parent == -1).sum() != 1 or parent.min() < -1 or parent.max() >= n):
        raise ValueError(f"heads {list(heads)} do not form one tree")
    ancestors = np.zeros((n, n))
    rows, node = np.arange(n), np.arange(n)
    for _ in range(n):  # a tree of n tokens is at most n deep
        ancestors[rows, node] = 1.0
        up = parent[node]
        rows, node = rows[up >= 0], up[up >= 0]
        if not len(rows):
            break
    else:
        if len(rows):  # a cycle never reaches the root
            raise ValueError(f"heads {list(heads)} do not form one tree")
    size = ancestors.sum(1)
    return (size[:, None] + size[None, :] - 2 * (ancestors @ ancestors.T)).round().astype(np.int64)


def tree_depths(heads: Sequence[int]) -> np.ndarray:
    """Edges from each token to the root (the root itself has depth 0)."""
    root = [i for i, h in enumerate(heads) if h == 0]
    if len(root) != 1:
        raise ValueError(f"heads {list(heads)} need exactly one root, found {len(root)}")
    return tree_distances(heads)[root[0]]


def minimum_spanning_edges(distances: np.ndarray) -> set[tuple[int, int]]:
    """Prim's algorithm on a dense symmetric matrix -> undirected edges (i < j)."""
    n = len(distances)
    if n < 2:
        return set()
    in_tree = np.zeros(n, dtype=bool)
    in_tree[0] = True
    best = distances[0].astype(np.float64).copy()
    parent = np.zeros(n, dtype=np.int64)
    edges = set()
    for _ in range(n - 1):
        candidates = np.where(in_tree, np.inf, best)
        v = int(np.argmin(candidates))
        edges.add((min(v, int(parent[v])), max(v, int(parent[v]))))
        in_tree[v] = True
        closer = distances[v] < best
        parent[closer & ~in_tree] = v
        best = np.minimum(best, distances[v])
    return edges


def gold_edges(heads: Sequence[int], keep: np.ndarray) -> set[tuple[int, int]]:
    """Undirected gold edges among kept (non-punctuation) tokens, indices into the kept list."""
    position = {int(i): k for k, i in enumerate(np.flatnonzero(keep))}
    edges = set()
    for i, h in enumerate(heads):
        if h and i in position and (h - 1) in position:
            a, b = position[i], position[h - 1]
            edges.add((min(a, b), max(a, b)))
    return edges


def uuas_per_sentence(
    predicted: Sequence[np.ndarray], heads: Sequence[Sequence[int]], keep: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Per sentence: the gold edges the predicted minimum spanning tree has, and the gold edges."""
    right, total = np.zeros(len(heads)), np.zeros(len(heads))
    for i, (dist, h, k) in enumerate(zip(predicted, heads, keep)):
        gold = gold_edges(h, k)
        if gold:
            right[i] = len(minimum_spanning_edges(dist[np.ix_(k, k)]) & gold)
            total[i] = len(gold)
    return right, total


def uuas(predicted: Sequence[np.ndarray], heads: Sequence[Sequence[int]], keep: Sequence[np.ndarray]) -> float:
    """Undirected unlabelled attachment score, micro-averaged over sentences."""
    right, total = uuas_per_sentence(predicted, heads, keep)
    return float(right.sum() / total.sum()) if total.sum() else float("nan")


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    if len(a) < 2 or np.all(a == a[0]) or np.all(b == b[0]):
        return float("nan")
    return float(spearmanr(a, b).statistic)


def _row_spearman(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """:func:`_spearman` of every row pair of two ``(n, n)`` matrices at once (Pearson of average
    ranks, as scipy's ``spearmanr``); NaN where a row is constant."""
    from scipy.stats import rankdata

    ra, rb = rankdata(a, axis=1), rankdata(b, axis=1)
    ra -= ra.mean(1, keepdims=True)
    rb -= rb.mean(1, keepdims=True)
    denominator = np.sqrt((ra * ra).sum(1) * (rb * rb).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        values = (ra * rb).sum(1) / denominator
    constant = (a == a[:, :1]).all(1) | (b == b[:, :1]).all(1)
    values[constant | (a.shape[1] < 2)] = np.nan
    return values


def spearman_by_length(predicted: Sequence[np.ndarray], gold: Sequence[np.ndarray], lengths=(5, 50)) -> float:
    """Hewitt & Manning's Spearman: per sentence the mean over words (rows of a distance
    matrix) or one value (a depth vector), averaged per sentence length, then over lengths in
    ``lengths`` (inclusive)."""
    chosen = [i for i, g in enumerate(gold) if lengths[0] <= len(g) <= lengths[1]]
    value = {i: _spearman(predicted[i], gold[i]) for i in chosen if gold[i].ndim == 1}
    same_length = defaultdict(list)  # distance matrices: the rows of every sentence of one length at once
    for i in chosen:
        if gold[i].ndim == 2:
            same_length[len(gold[i])].append(i)
    for n, group in same_length.items():
        rows = _row_spearman(*(np.concatenate([m[i] for i in group]) for m in (predicted, gold))).reshape(-1, n)
        for i, values in zip(group, rows):
            value[i] = float(np.nanmean(values)) if not np.all(np.isnan(values)) else float("nan")
    per_length: dict[int, list[float]] = defaultdict(list)
    for i in chosen:  # in the sentences' order, as the lengths' means are summed
        if not np.isnan(value[i]):
            per_length[len(gold[i])].append(value[i])
    means = [np.mean(v) for v in per_length.values()]
    return float(np.mean(means)) if means else float("nan")


def root_per_sentence(
    predicted_depths: Sequence[np.ndarray], heads: Sequence[Sequence[int]], keep: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Per sentence: 1 when the shallowest predicted non-punctuation token is the gold root, and
    whether the sentence counts (its root is not punctuation)."""
    hits, total = np.zeros(len(heads)), np.zeros(len(heads))
    for i, (d, h, k) in enumerate(zip(predicted_depths, heads, keep)):
        root = [j for j, x in enumerate(h) if x == 0][0]
        if k[root]:
            candidates = np.flatnonzero(k)
            hits[i] = int(candidates[np.argmin(d[candidates])] == root)
            total[i] = 1
    return hits, total


def root_accuracy(
    predicted_depths: Sequence[np.ndarray], heads: Sequence[Sequence[int]], keep: Sequence[np.ndarray]
) -> float:
    """How often the shallowest predicted non-punctuation token is the gold root."""
    hits, total = root_per_sentence(predicted_depths, heads, keep)
    return float(hits.sum() / total.sum()) if total.sum() else float("nan")


# --- word sense ------------------------------------------------------------------------------


TIE = 1e-6  # cosines closer than this are the same to float32 rounding (~1e-7 for unit vectors)


def sense_centroid_predict(
    train_vectors: np.ndarray,
    train_lemmas: Sequence[str],
    train_senses: Sequence[str],
    vectors: np.ndarray,
    lemmas: Sequence[str],
    mfs: Optional[dict] = None,
) -> list[str]:
    """Peters et al.'s nearest-sense-centroid WSD: per (lemma, sense) the mean training vector;
    a test occurrence takes the sense whose centroid is closest in cosine among its lemma's
    senses; a lemma never seen in training backs off to ``mfs[lemma]`` (most frequent sense)
    or None. Centroids that tie (within ``TIE``) go to the sense seen most in training: a
    context-free layer gives every occurrence of a word one vector, so its senses' centroids are
    that same vector, apart from the rounding of their means, which would otherwise decide."""

    def unit(x):
        return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)

    groups: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for i, (l, s) in enumerate(zip(train_lemmas, train_senses)):
        groups[l][s].append(i)
    centroids = {}
    train_unit = unit(np.asarray(train_vectors, dtype=np.float32))
    for lemma, senses in groups.items():
        names = sorted(senses)
        counts = np.array([len(senses[n]) for n in names])
        centroids[lemma] = (names, unit(np.stack([train_unit[senses[n]].mean(0) for n in names])), counts)
    out = []
    test_unit = unit(np.asarray(vectors, dtype=np.float32))
    for v, lemma in zip(test_unit, lemmas):
        if lemma in centroids:
            names, c, counts = centroids[lemma]
            cosine = c @ v
            tied = cosine >= cosine.max() - TIE
            out.append(names[int(np.argmax(np.where(tied, counts, -1)))])
        else:
            out.append((mfs or {}).get(lemma))
    return out
