"""Tagging tasks for the transfer experiments: words and one tag per word, per split.

* ``chunking``: CoNLL-2000 BIO chunk tags (train less its last tenth, dev that tenth, test), span F1;
* ``entities``: GUM's outermost entity mentions as BIO tags typed person, place, abstract, ...
  (train/dev from GUM dev by document, test GUM test), span F1;
* ``upos``: UD English-EWT UPOS, accuracy;
* ``token_label``: the user's own ``tokens`` or ``conllu`` files (:func:`load_files`: train, dev and
  test, the label column as in the probes' ``[dataset]`` table), accuracy or, for BIO tags, span F1.

The splits are the span datasets' (``datasets.span_tasks.base_split``), so the transfer and the
edge-probing numbers of a task are on the same sentences. :func:`subset` draws a seeded fraction of
the training sentences, the same for every input of an experiment (paired comparisons).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ..datasets import load_dataset
from ..datasets.files import read_labelled_file
from ..datasets.span_tasks import base_split, outermost_bio

ROLES = ("train", "dev", "test")
METRIC = {"chunking": "f1", "entities": "f1", "upos": "accuracy"}
MIN_TRAIN_SENTENCES = 10


@dataclass
class TaggingSet:
    """Sentences as words and tags (a tag None: an unlabelled token, left out of loss and score)."""

    words: list[list[str]]
    tags: list[list[Optional[str]]]

    def __len__(self) -> int:
        return len(self.words)

    def take(self, index) -> "TaggingSet":
        return TaggingSet([self.words[i] for i in index], [self.tags[i] for i in index])

    @property
    def labels(self) -> set[str]:
        return {t for tags in self.tags for t in tags if t is not None}


def _from(sentences, tag) -> TaggingSet:
    sentences = [s for s in sentences if s.tokens]
    return TaggingSet([s.words for s in sentences], [tag(s) for s in sentences])


def load_task(task: str, data_dir=None) -> dict[str, TaggingSet]:
    """The train, dev and test sets of a built-in task (:data:`METRIC` names them)."""
    load = lambda name, split: load_dataset(name, split, data_dir)  # noqa: E731
    if task == "chunking":
        split = lambda role: base_split("conll2000-chunks", role, load)  # noqa: E731
        return {r: _from(split(r), lambda s: [t.extra.get("chunk", "O") for t in s.tokens]) for r in ROLES}
    if task == "entities":
        return {r: _from(base_split("gum-entities", r, load), outermost_bio) for r in ROLES}
    if task == "upos":
        return {r: _from(load("ewt", r), lambda s: [t.upos for t in s.tokens]) for r in ROLES}
    raise ValueError(f"unknown transfer task {task!r}; choose one of {sorted(METRIC)}")


FILE_KEYS = ("format", "train", "dev", "test", "label", "metric")


def load_files(table: dict, base_dir: Optional[Path] = None) -> tuple[dict[str, TaggingSet], str]:
    """The train, dev and test sets of a ``[dataset]`` table of own files, and the metric
    (``metric = "f1"`` for BIO tags, default ``"accuracy"``). Paths are relative to ``base_dir``."""
    unknown = sorted(set(table) - set(FILE_KEYS))
    if unknown:
        raise ValueError(f"[dataset]: unknown key(s) {unknown}; known keys: {list(FILE_KEYS)}")
    if table.get("format") not in ("tokens", "conllu"):
        raise ValueError(
            f"[dataset]: a transfer task tags tokens: format must be tokens or conllu, got {table.get('format')!r}"
        )
    metric = table.get("metric", "accuracy")
    if metric not in ("accuracy", "f1"):
        raise ValueError(f"[dataset]: metric must be accuracy or f1 (BIO tags), got {metric!r}")
    sets = {}
    for role in ROLES:
        if not isinstance(table.get(role), str):
            raise ValueError(f"[dataset]: {role} must be a file path (a transfer task needs train, dev and test files)")
        path = Path(table[role]).expanduser()
        path = path if path.is_absolute() else (base_dir or Path.cwd()) / path
        label = table.get("label") if table["format"] == "conllu" else None
        sentences, _ = read_labelled_file(path, table["format"], label)
        sets[role] = _from(sentences, lambda s: [t.extra.get("token_label") for t in s.tokens])
    return sets, metric


def subset(train: TaggingSet, fraction: float, seed: int) -> np.ndarray:
    """Indices of a seeded ``fraction`` of the training sentences (in file order; all of them for
    1.0); fewer than :data:`MIN_TRAIN_SENTENCES` is an error naming the fraction."""
    if not 0 < fraction <= 1:
        raise ValueError(f"a training fraction must be in (0, 1], got {fraction}")
    n = math.ceil(len(train) * fraction) if fraction < 1 else len(train)
    if n < MIN_TRAIN_SENTENCES:
        raise ValueError(
            f"fraction {fraction} of {len(train)} training sentences leaves {n}; a tagger needs at least "
            f"{MIN_TRAIN_SENTENCES} (use a larger fraction or more data)"
        )
    if n == len(train):
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).permutation(len(train))[:n])


def check_labels(sets: dict[str, TaggingSet], task: str) -> dict:
    """Refuse a task with fewer than two labels; count the test tags never seen in training
    (they are scored as wrong)."""
    labels = sets["train"].labels
    if len(labels) < 2:
        raise ValueError(f"{task}: the training set has {len(labels)} label(s) {sorted(labels)}: nothing to learn")
    test = [t for tags in sets["test"].tags for t in tags if t is not None]
    unseen = [t for t in test if t not in labels]
    return {"count": len(unseen), "of": len(test), "labels": sorted(set(unseen))[:20]}
