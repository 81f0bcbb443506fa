"""BLiMP (Warstadt et al. 2020): 67 paradigms of 1,000 minimal pairs over 12 phenomena, the field's
yardstick for what a language model knows of grammar, scored as the paper does: a pair is right
when the good sentence gets the higher total log-probability (the full-sentence method).

``read_blimp(data_dir, paradigms)`` reads ``blimp/data/<UID>.jsonl``; ``read_pairs_file(path)``
any minimal-pair file in the same JSONL shape (``sentence_good``, ``sentence_bad``, and optionally
``UID`` and ``linguistics_term``): own data runs the same way. Sentences are tokenized as the
training corpus is (``probing_lab.text.tokenize``). ``evaluate_blimp(lm, pairs)`` scores every pair
with the forward LM, the backward LM and both (their sum), in batches of sentences that share one
pass through the biLM and one softmax product, and returns a ``metrics.json`` record
(``"kind": "blimp"``): overall, per paradigm and per phenomenon, each with a 95% bootstrap interval
(pairs resampled within each paradigm; the overall and phenomenon scores are means of paradigm
accuracies, as published), out-of-vocabulary words counted, and the published 5-gram, LSTM,
Transformer-XL and GPT-2 accuracies and human agreement beside ours (``published(data_dir)``).
"""

from __future__ import annotations

import csv
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from ..text import tokenize
from ..training.vocab import BOS_ID, EOS_ID, UNK_ID

DIRECTIONS = ("forward", "backward", "both")
PUBLISHED_MODELS = {"ngram": "5-gram", "lstm": "LSTM", "txl": "Transformer-XL", "gpt2": "GPT-2"}
RESAMPLES = 1000


class BlimpError(ValueError):
    """A minimal-pair file or folder that cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class BlimpPair:
    good: list[str]
    bad: list[str]
    paradigm: str
    phenomenon: str


def _pair(record, where: str, default_paradigm: str) -> BlimpPair:
    if not isinstance(record, dict):
        raise BlimpError(f"{where}: a pair is a JSON object, got {type(record).__name__}")
    missing = [k for k in ("sentence_good", "sentence_bad") if not isinstance(record.get(k), str)]
    if missing:
        raise BlimpError(f"{where}: no {' or '.join(missing)} (a pair needs both sentences as text)")
    good, bad = tokenize(record["sentence_good"]), tokenize(record["sentence_bad"])
    empty = [k for k, tokens in (("sentence_good", good), ("sentence_bad", bad)) if not tokens]
    if empty:
        raise BlimpError(f"{where}: {' and '.join(empty)} is empty (no words to score)")
    paradigm = str(record.get("UID") or default_paradigm)
    return BlimpPair(good, bad, paradigm, str(record.get("linguistics_term") or paradigm))


def read_pairs_file(path: str | Path) -> list[BlimpPair]:
    """Every pair of a JSONL file (one object per line; blank lines skipped). A malformed line
    stops the reading with its file and line number: nothing is scored from a half-read file."""
    path = Path(path)
    if not path.is_file():
        raise BlimpError(f"{path}: no such minimal-pair file")
    pairs = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise BlimpError(f"{path}:{n}: not JSON ({e.msg}); each line is one pair object") from None
            pairs.append(_pair(record, f"{path}:{n}", path.stem))
    if not pairs:
        raise BlimpError(f"{path}: no pairs in the file")
    return pairs


def blimp_dir(data_dir: Optional[str | Path]) -> Path:
    """``<data_dir>/blimp``, checked: it must hold ``data/*.jsonl``."""
    from ..paths import data_dir as resolve

    root, how = resolve(data_dir)
    folder = None if root is None else (root if (root / "data").is_dir() and root.name == "blimp" else root / "blimp")
    if folder is None or not any((folder / "data").glob("*.jsonl")):
        where = "no data directory" if root is None else f"{folder} has no data/*.jsonl"
        raise BlimpError(
            f"BLiMP not found ({where}; data directory from {how}): give --data-dir with a blimp/ folder "
            "(data/<paradigm>.jsonl, as published by Warstadt et al.), or --pairs FILE for your own pairs"
        )
    return folder


def read_blimp(data_dir: Optional[str | Path] = None, paradigms: Optional[Sequence[str]] = None) -> list[BlimpPair]:
    """The pairs of every paradigm (or of ``paradigms``), in paradigm order."""
    folder = blimp_dir(data_dir)
    files = {p.stem: p for p in sorted((folder / "data").glob("*.jsonl"))}
    if paradigms:
        unknown = [p for p in paradigms if p not in files]
        if unknown:
            close = [f for f in files if any(u.lower() in f for u in unknown)][:5]
            raise BlimpError(
                f"unknown paradigm(s) {unknown}: {len(files)} in {folder / 'data'}"
                + (f", e.g. {close}" if close else f" ({', '.join(list(files)[:4])}, ...)")
            )
        files = {p: files[p] for p in paradigms}
    return [pair for path in files.values() for pair in read_pairs_file(path)]


def published(data_dir: Optional[str | Path] = None) -> dict:
    """The published accuracies (``models_summary.jsonl``: per paradigm, and per phenomenon with
    ``UID`` "overall") and the human agreement per paradigm; empty parts where a file is missing."""
    out: dict = {"paradigms": {}, "phenomena": {}, "human": {}}
    try:
        folder = blimp_dir(data_dir)
    except BlimpError:
        return out
    summary = folder / "models_summary.jsonl"
    if summary.is_file():
        for line in summary.read_text(encoding="utf-8").splitlines():
            if line.strip():
                r = json.loads(line)
                scores = {k: r[k] for k in PUBLISHED_MODELS if k in r}
                if r.get("UID") == "overall":
                    out["phenomena"][r["linguistics_term"]] = scores
                else:
                    out["paradigms"][r["UID"]] = scores
    human = folder / "human_validation_summary.csv"
    if human.is_file():
        with human.open(encoding="utf-8") as f:
            out["human"] = {r["Condition"]: float(r["total_mean"]) for r in csv.DictReader(f)}
    return out


@torch.no_grad()
def sentence_log_probs(lm, sentences: Sequence[Sequence[str]], batch_size: int = 128, embedder=None) -> np.ndarray:
    """``(n, 2)``: each sentence's total log-probability under the forward LM (its words and the
    end) and the backward LM (its words and the start), natural log, full softmax; the same numbers
    as ``lm.score.score_sentences``' totals, computed a batch at a time: one biLM pass for both
    directions and one softmax product for every position of the batch. Sentences are sorted by
    length so that a batch pads little. ``embedder``: an ``elmo.Embedder`` of ``lm.bilm`` (with a
    type-vector cache: the char CNN then runs once per distinct word, not once per token)."""
    from ..elmo import Embedder

    embedder = embedder or Embedder(lm.bilm, batch_size=batch_size)
    out = np.zeros((len(sentences), 2))
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        batch = [list(sentences[i]) for i in rows]
        top = embedder.run_batch(batch, keep_boundaries=True).layers[-1]  # (B, T + 2, 2 * proj) over <S> w </S>
        proj = top.shape[-1] // 2
        states, targets, owner = [], [], []
        for b, tokens in enumerate(batch):
            ids = torch.tensor([BOS_ID, *(lm.vocab.id(t) for t in tokens), EOS_ID])
            n = len(tokens) + 2
            states += [top[b, : n - 1, :proj], top[b, 1:n, proj:]]  # forward predicts x[1:], backward x[:-1]
            targets += [ids[1:], ids[:-1]]
            owner += [torch.full((n - 1,), 2 * b), torch.full((n - 1,), 2 * b + 1)]
        h, t, o = torch.cat(states), torch.cat(targets), torch.cat(owner)
        logits = torch.nn.functional.linear(h, lm.weight, lm.bias)
        picked = logits.gather(1, t[:, None]).squeeze(1) - torch.logsumexp(logits, dim=-1)
        totals = torch.zeros(2 * len(batch), dtype=torch.float64).index_add_(0, o, picked.double())
        out[rows] = totals.view(-1, 2).numpy()
    return out


def _interval(distribution: np.ndarray) -> list[float]:
    lo, hi = np.quantile(distribution, [0.025, 0.975])
    return [float(lo), float(hi)]


def evaluate_blimp(
    lm,
    pairs: Sequence[BlimpPair],
    data_dir: Optional[str | Path] = None,
    batch_size: int = 128,
    on_progress: Optional[Callable[[int, int], None]] = None,
    seed: int = 0,
) -> dict:
    """Score every pair (see the module docstring) -> the run's metrics."""
    if not pairs:
        raise BlimpError("no minimal pairs to score")
    start = time.perf_counter()
    from ..elmo import Embedder

    sentences = [s for p in pairs for s in (p.good, p.bad)]
    embedder = Embedder(lm.bilm, batch_size=batch_size)
    embedder.set_vocabulary(w for s in sentences for w in s)  # BLiMP's few thousand words: one CNN pass
    totals = np.zeros((len(sentences), 2))
    chunk = batch_size * 16  # progress every few batches
    for lo in range(0, len(sentences), chunk):
        totals[lo : lo + chunk] = sentence_log_probs(lm, sentences[lo : lo + chunk], batch_size, embedder)
        if on_progress:
            on_progress(min(lo + chunk, len(sentences)), len(sentences))
    good, bad = totals[0::2], totals[1::2]
    right = {
        "forward": good[:, 0] > bad[:, 0],
        "backward": good[:, 1] > bad[:, 1],
        "both": good.sum(1) > bad.sum(1),
    }
    seconds = time.perf_counter() - start
    unknown = [sum(lm.vocab.id(t) == UNK_ID for t in s) for s in sentences]  # per sentence, looked up once
    oov_tokens = sum(unknown)
    pairs_with_oov = sum(1 for good, bad in zip(unknown[0::2], unknown[1::2]) if good or bad)
    paradigm_of = np.array([p.paradigm for p in pairs])
    names = list(dict.fromkeys(paradigm_of.tolist()))
    phenomenon = {p.paradigm: p.phenomenon for p in pairs}
    rng = np.random.default_rng(seed)
    reference = published(data_dir)
    paradigms, draws = {}, {}
    for name in names:
        idx = np.flatnonzero(paradigm_of == name)
        resampled = rng.integers(0, len(idx), size=(RESAMPLES, len(idx)))
        entry = {"phenomenon": phenomenon[name], "pairs": int(len(idx))}
        for d in DIRECTIONS:
            values = right[d][idx].astype(np.float64)
            draws[name, d] = values[resampled].mean(axis=1)
            entry[d] = float(values.mean())
            entry[f"{d}_ci95"] = _interval(draws[name, d])
        if name in reference["paradigms"]:
            entry["published"] = reference["paradigms"][name]
        if name in reference["human"]:
            entry["human"] = reference["human"][name]
        paradigms[name] = entry

    def mean_of(members: list[str]) -> dict:
        """Mean of paradigm accuracies (as the paper reports), its interval from the paradigms'
        independent resamples, and the published models' means over the same paradigms."""
        out = {"paradigms": len(members)}
        for d in DIRECTIONS:
            out[d] = float(np.mean([paradigms[m][d] for m in members]))
            out[f"{d}_ci95"] = _interval(np.mean([draws[m, d] for m in members], axis=0))
        known = [reference["paradigms"][m] for m in members if m in reference["paradigms"]]
        if len(known) == len(members):
            out["published"] = {k: float(np.mean([r[k] for r in known])) for k in PUBLISHED_MODELS}
        humans = [paradigms[m]["human"] for m in members if "human" in paradigms[m]]
        if len(humans) == len(members):
            out["human"] = float(np.mean(humans))
        return out

    phenomena = {}
    for name in dict.fromkeys(phenomenon.values()):
        phenomena[name] = mean_of([m for m in names if phenomenon[m] == name])
    return {
        "kind": "blimp",
        "model": lm.name,
        "pairs": len(pairs),
        "overall": mean_of(names),
        "phenomena": phenomena,
        "paradigms": paradigms,
        "oov": {
            "tokens": int(oov_tokens),
            "share": oov_tokens / max(1, sum(len(s) for s in sentences)),
            "pairs_with_oov": int(pairs_with_oov),
        },
        "method": "full-sentence total log-probability (forward: words + </S>; backward: words + <S>; both: sum)",
        "seconds": round(seconds, 1),
        "pairs_per_second": round(len(pairs) / seconds, 1) if seconds else math.inf,
    }


def blimp_table(metrics: dict) -> str:
    """Per phenomenon and overall: ours per direction with intervals, the published models, humans."""
    from ..stats import plus_minus

    head = ["phenomenon", "paradigms", *DIRECTIONS, *PUBLISHED_MODELS.values(), "human"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    rows = [*metrics["phenomena"].items(), ("overall", metrics["overall"])]
    for name, r in rows:
        ours = [plus_minus(r[d], r[f"{d}_ci95"]) for d in DIRECTIONS]
        theirs = [f"{r['published'][k]:.3f}" if "published" in r else "" for k in PUBLISHED_MODELS]
        human = f"{r['human']:.3f}" if "human" in r else ""
        name = f"**{name}**" if name == "overall" else name
        lines.append("| " + " | ".join([name, str(r["paradigms"]), *ours, *theirs, human]) + " |")
    return "\n".join(lines) + "\n"
