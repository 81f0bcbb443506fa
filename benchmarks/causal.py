"""What causal analysis costs on this machine: INLP, one unit ablation, and the sweeps built on them.

    OMP_NUM_THREADS=1 python benchmarks/causal.py [--model DIR] [--tokens 20000] [--ablations 10]
        [--data-dir ../shared/datasets]

1. **INLP, k = 20 iterations** on ``--tokens`` EWT train tokens (UPOS, layer 1 forward half of the
   shipped model; 20% of them held out as INLP's dev set): the extraction and INLP's own time.
2. **Unit ablation**: the agreement score of the fixed pair sample that ``probing-lab causal units``
   uses (40 pairs per construction), once without and ``--ablations`` times with one random unit
   ablated; the time per ablation, and from it the ranked sweep (100 units per direction, top 50 +
   50 random, both directions: 200 ablations) and every unit one by one (2 directions x LSTM layers x
   units), the sweep the ranking avoids.

Prints seconds and the ratio all-units / ranked sweep. Run it with nothing else on the cores.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a model with a softmax (default: the shipped model)")
    parser.add_argument("--tokens", type=int, default=20000)
    parser.add_argument("--ablations", type=int, default=10)
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "datasets"))
    args = parser.parse_args(argv)

    from probing_lab.causal.inlp import inlp
    from probing_lab.causal.units import agreement, sample_pairs
    from probing_lab.datasets import load_dataset
    from probing_lab.elmo.interventions import ablate_units
    from probing_lab.features.cache import ElmoEncoder, extract_features
    from probing_lab.lm.agreement import read_pairs
    from probing_lab.lm.language_model import load_language_model

    lm = load_language_model(args.model)
    print(f"model {lm.name}; torch threads {torch.get_num_threads()}")

    sentences, n = [], 0
    for s in load_dataset("ewt", "train", args.data_dir):
        if s.tokens:
            sentences.append(s)
            n += len(s.tokens)
            if n >= args.tokens:
                break
    t0 = time.perf_counter()
    features = extract_features(ElmoEncoder(lm.bilm, lm.name), [s.words for s in sentences], None, progress=False)
    extraction = time.perf_counter() - t0
    labels = sorted({t.upos for s in sentences for t in s.tokens})
    y = np.array([labels.index(t.upos) for s in sentences for t in s.tokens])
    half = features.layers.shape[-1] // 2
    X = np.asarray(features.layers[1][:, :half], dtype=np.float32)
    cut = int(0.8 * len(y))
    t0 = time.perf_counter()
    result = inlp(X[:cut], y[:cut], X[cut:], y[cut:], len(labels), iterations=20)
    inlp_s = time.perf_counter() - t0
    print(
        f"INLP k=20 on {len(y):,} tokens (L1 forward, {len(labels)} UPOS): {inlp_s:.1f} s "
        f"(extraction {extraction:.1f} s, cached on a second run); rank {result.rank}, "
        f"accuracy {result.accuracy[0]:.3f} -> {result.accuracy[-1]:.3f} (majority {result.majority:.3f})"
    )

    pairs = sample_pairs(read_pairs(), 40, 0)
    t0 = time.perf_counter()
    agreement(lm, pairs)
    plain = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    cell, layers = lm.bilm.options.lstm_dim, lm.bilm.n_layers - 1
    t0 = time.perf_counter()
    for _ in range(args.ablations):
        layer, unit = int(rng.integers(1, layers + 1)), int(rng.integers(cell))
        agreement(lm, pairs, [ablate_units(layer, "forward", cell_units=[unit])])
    per = (time.perf_counter() - t0) / args.ablations
    ranked, every = 200 * per, 2 * layers * cell * per
    print(f"agreement on {len(pairs)} pairs: {plain:.1f} s plain, {per:.1f} s with one unit ablated")
    print(
        f"ranked sweep (2 x 100 ablations): {ranked / 60:.1f} min; every unit one by one "
        f"(2 x {layers} x {cell} = {2 * layers * cell:,}): {every / 3600:.1f} h; ratio {every / ranked:.1f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
