"""Quick probes for learning curves: how word sense and part of speech emerge while the biLM trains.

``QuickEval.load(data_dir)`` reads a fixed, seeded sample once; calling it on an ``ElmoBiLM``
gives, per layer (``"0"``, ``"1"``, ...):

- ``wsd``: nearest sense centroid on CoarseWSD-20's *train* split, centroids from one half of a
  per-word sample and scored on the other half (the test split stays for the final numbers),
  with the most-frequent-sense back-off of the same halves as ``wsd_mfs``;
- ``upos``: the lab's linear probe trained on a sample of EWT train, scored on EWT dev.

It takes about a minute for ``cpu-small`` on 2 threads, so that a training run can afford it at
every snapshot (``eval_every_steps`` in the training config). The model is copied, so the
caller's training mode, weights and random generators are untouched.
"""

from __future__ import annotations

import copy
import random
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from ..datasets import load_dataset
from ..datasets.records import Sentence
from ..fileio import atomic_path, read_utf8
from . import tasks as T
from .probes import ProbeConfig, fit_probe


@dataclass
class QuickEval:
    wsd_a: list[Sentence]  # centroids come from these
    wsd_b: list[Sentence]  # and are scored on these
    pos_train: list[Sentence]
    pos_dev: list[Sentence]
    probe: ProbeConfig = ProbeConfig(epochs=15, patience=3)

    @classmethod
    def load(
        cls,
        data_dir: Optional[str | Path] = None,
        wsd_per_word: int = 80,
        pos_train: int = 3000,
        pos_dev: int = 800,
        seed: int = 0,
    ) -> "QuickEval":
        """A fixed sample: ``wsd_per_word`` CoarseWSD-20 train sentences per word (split in
        halves, stratified by sense), ``pos_train`` EWT train and ``pos_dev`` EWT dev sentences."""
        from ..datasets.wsd import COARSEWSD_WORDS

        rng = random.Random(seed)
        wsd_a, wsd_b = [], []
        for word in COARSEWSD_WORDS:
            by_sense = defaultdict(list)
            for s in load_dataset("coarsewsd", f"{word}/train", data_dir):
                by_sense[next(t.sense for t in s.tokens if t.sense)].append(s)
            total = sum(map(len, by_sense.values()))
            for sense in sorted(by_sense):
                items = by_sense[sense]
                rng.shuffle(items)
                take = items[: max(2, round(wsd_per_word * len(items) / total))]
                half = len(take) // 2
                wsd_a += take[:half]
                wsd_b += take[half:]
        ewt_train = load_dataset("ewt", "train", data_dir)
        ewt_dev = load_dataset("ewt", "dev", data_dir)
        return cls(
            wsd_a,
            wsd_b,
            rng.sample(ewt_train, min(pos_train, len(ewt_train))),
            rng.sample(ewt_dev, min(pos_dev, len(ewt_dev))),
        )

    def __call__(self, bilm) -> dict:
        from ..elmo import Embedder

        start = time.perf_counter()
        with torch.random.fork_rng(devices=[]):  # the probes seed torch; the caller's generators stay as they were
            # on the model's own device: a GPU run evaluates on the GPU (a copy: eval() must not touch training)
            embedder = Embedder(copy.deepcopy(bilm), batch_size=64)
            wsd = self._wsd(embedder)
            upos = self._upos(embedder)
        return {**wsd, "upos": upos, "eval_seconds": round(time.perf_counter() - start, 1)}

    def _wsd(self, embedder) -> dict:
        def targets(sentences):
            vectors, lemmas, senses = [], [], []
            for s, arr in zip(sentences, embedder.embed([s.words for s in sentences])):
                for j, t in enumerate(s.tokens):
                    if t.sense:
                        vectors.append(arr[:, j])
                        lemmas.append(t.lemma or t.form.lower())
                        senses.append(t.sense)
            return np.stack(vectors, axis=1), lemmas, senses  # (layers, n, dim)

        Xa, la, sa = targets(self.wsd_a)
        Xb, lb, sb = targets(self.wsd_b)
        counts: dict = defaultdict(lambda: defaultdict(int))
        for lemma, sense in zip(la, sa):
            counts[lemma][sense] += 1
        mfs = {lemma: max(c, key=c.get) for lemma, c in counts.items()}
        scores = {
            str(k): T.accuracy(T.sense_centroid_predict(Xa[k], la, sa, Xb[k], lb, mfs), sb) for k in range(len(Xa))
        }
        return {"wsd": scores, "wsd_mfs": T.accuracy([mfs.get(lemma) for lemma in lb], sb), "wsd_instances": len(sb)}

    def _upos(self, embedder) -> dict:
        def arrays(sentences):
            X = np.concatenate(embedder.embed([s.words for s in sentences]), axis=1)  # (layers, tokens, dim)
            return X, T.token_labels(sentences, "upos")

        X_tr, y_tr = arrays(self.pos_train)
        X_dev, y_dev = arrays(self.pos_dev)
        index = T.LabelIndex(y_tr)
        y_tr, y_dev = index.encode(y_tr), index.encode(y_dev)
        return {
            str(k): fit_probe(X_tr[k], y_tr, X_dev[k], y_dev, len(index), self.probe).dev_accuracy
            for k in range(len(X_tr))
        }


def read_curves(path: str | Path) -> list[dict]:
    """The records of a run's ``curves.jsonl`` (a run directory or the file itself), by step."""
    import json

    path = Path(path)
    file = path / "curves.jsonl" if path.is_dir() else path
    if not file.is_file():
        raise FileNotFoundError(f"{file}: no learning curves; train with eval_every_steps > 0 in the config")
    records = []
    for n, line in enumerate(read_utf8(file).splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
                records[-1]["step"]
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise ValueError(f"{file}, line {n}: not a learning-curve record ({type(e).__name__}: {e})") from None
    return sorted(records, key=lambda r: r["step"])


def chain_stages(stages: list[list[dict]]) -> list[dict]:
    """The records of training stages run one after another (each stage's ``tokens_seen`` and
    ``step`` restart at 0) on one axis: each stage's counts are offset by the totals of the stages
    before it, and every record gets its ``stage`` (0, 1, ...). A stage's step-0 record is the
    previous stage's last model measured again, on that stage's own heldout text: kept, it shows
    how much of a jump at a boundary is the new heldout, not the model."""
    chained, tokens, steps = [], 0, 0
    for i, records in enumerate(stages):
        for r in records:
            chained.append({**r, "stage": i, "tokens_seen": r["tokens_seen"] + tokens, "step": r["step"] + steps})
        if records:
            tokens, steps = chained[-1]["tokens_seen"], chained[-1]["step"]
    return chained


def read_stages(path: str | Path) -> dict[str, list[dict]]:
    """A stages file (``{"name": ["stage0.jsonl", "stage1.jsonl", ...]}``, files relative to it):
    each name's stages chained by :func:`chain_stages`."""
    import json

    path = Path(path)
    try:
        named = json.loads(read_utf8(path))
        return {name: chain_stages([read_curves(path.parent / f) for f in files]) for name, files in named.items()}
    except (json.JSONDecodeError, AttributeError, TypeError) as e:
        raise ValueError(f"{path}: not a stages file ({{name: [curves files]}}): {e}") from None


def curves_table(runs: dict[str, list[dict]]) -> str:
    """One line per evaluation: tokens seen, heldout perplexity, quick WSD and UPOS per layer."""
    lines = ["run | step | tokens | heldout ppl (fwd/bwd) | WSD L0 / L1 / L2 (MFS) | UPOS L0 / L1 / L2"]
    for name, records in runs.items():
        for r in records:
            wsd, upos, held = r.get("wsd", {}), r.get("upos", {}), r["heldout"]
            lines.append(
                f"{name} | {r['step']} | {r['tokens_seen'] / 1e6:.2f}M | "
                f"{held['perplexity_forward']:.1f} / {held['perplexity_backward']:.1f} | "
                + (
                    " / ".join(f"{wsd[k]:.3f}" for k in sorted(wsd)) + f" ({r.get('wsd_mfs', float('nan')):.3f})"
                    if wsd
                    else "-"
                )
                + " | "
                + (" / ".join(f"{upos[k]:.3f}" for k in sorted(upos)) if upos else "-")
            )
    return "\n".join(lines)


def save_curves_png(runs: dict[str, list[dict]], path: str | Path) -> None:
    """Heldout perplexity, quick WSD and quick UPOS per layer against tokens seen, one line style per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), dpi=110)
    styles = ["-", "--", ":", "-."]
    colours = {"0": "tab:grey", "1": "tab:blue", "2": "tab:orange"}
    for (name, records), style in zip(runs.items(), styles):
        x = [r["tokens_seen"] / 1e6 for r in records]
        axes[0].plot(x, [r["heldout"]["perplexity"] for r in records], style, marker="o", ms=3, label=name)
        for ax, metric in ((axes[1], "wsd"), (axes[2], "upos")):
            for layer in sorted({k for r in records for k in r.get(metric, {})}):
                ax.plot(
                    x,
                    [r.get(metric, {}).get(layer, float("nan")) for r in records],
                    style,
                    marker="o",
                    ms=3,
                    color=colours.get(layer),
                    label=f"{name} L{layer}",
                )
        mfs = [r["wsd_mfs"] for r in records if "wsd_mfs" in r]
        if mfs:
            axes[1].axhline(
                mfs[0], color="black", lw=0.8, ls="-.", label="most frequent sense" if style == "-" else None
            )
    axes[0].set_yscale("log")
    axes[0].set_title("heldout perplexity (mean of directions)", fontsize=9)
    axes[1].set_title("word sense: nearest centroid, CoarseWSD-20 train halves", fontsize=9)
    axes[2].set_title("UPOS: linear probe, EWT train sample -> dev", fontsize=9)
    for ax in axes:
        ax.set_xlabel("training tokens (millions)")
        ax.legend(fontsize=6)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
