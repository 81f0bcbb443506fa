"""The torch linear probe against scikit-learn's LogisticRegression on the same EWT UPOS
features (one layer), measured in one run. Targets: accuracy within 0.5 points, >= 3x faster.
The torch probe runs three times: with its default AdamW (minibatches, early stopping on dev; its
products in bfloat16 where the CPU has them, ``precision = "auto"``), the same in float32 (the ratio
of the two is printed), and with full-batch L-BFGS (the optimiser LogisticRegression uses).

    python benchmarks/probe_speed.py [--model DIR] [--layer 1] [--data-dir D]

Features come from the activation cache (extracted first if needed; not timed).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="default: the shipped model")
    parser.add_argument("--layer", type=int, default=1)
    parser.add_argument("--data-dir")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from sklearn.linear_model import LogisticRegression

    from probing_lab.datasets import load_dataset
    from probing_lab.features.cache import ElmoEncoder, extract_features
    from probing_lab.model_loading import load_model
    from probing_lab.paths import data_dir
    from probing_lab.probing import tasks as T
    from probing_lab.probing.heads import products_dtype
    from probing_lab.probing.probes import ProbeConfig, fit_probe

    loaded = load_model(args.model)
    encoder = ElmoEncoder(loaded.model, loaded.name)
    split = {}
    for role in ("train", "dev", "test"):
        sentences = [s for s in load_dataset("ewt", role, data_dir(args.data_dir)[0]) if s.tokens]
        feats = extract_features(encoder, [s.words for s in sentences])
        split[role] = (np.asarray(feats.layers[args.layer], dtype=np.float32), T.token_labels(sentences, "upos"))
    index = T.LabelIndex(split["train"][1])
    X, y = split["train"][0], index.encode(split["train"][1])
    Xd, yd = split["dev"][0], index.encode(split["dev"][1])
    Xt, yt = split["test"][0], index.encode(split["test"][1])
    print(
        f"model {loaded.name}, layer {args.layer}: train {X.shape}, test {Xt.shape}, "
        f"{len(index)} labels, {args.threads} threads"
    )

    t = time.perf_counter()
    probe = fit_probe(X, y, Xd, yd, len(index), ProbeConfig())
    t_torch = time.perf_counter() - t
    acc_torch = probe.accuracy(Xt, yt)
    t = time.perf_counter()
    exact = fit_probe(X, y, Xd, yd, len(index), ProbeConfig(precision="float32"))
    t_exact = time.perf_counter() - t
    acc_exact = exact.accuracy(Xt, yt)
    t = time.perf_counter()
    lbfgs = fit_probe(X, y, Xd, yd, len(index), ProbeConfig(optimizer="lbfgs"))
    t_lbfgs = time.perf_counter() - t
    acc_lbfgs = lbfgs.accuracy(Xt, yt)

    mean, std = X.mean(0), X.std(0) + 1e-4  # the same standardisation the torch probe uses
    t = time.perf_counter()
    sk = LogisticRegression(max_iter=300).fit((X - mean) / std, y)
    t_sk = time.perf_counter() - t
    acc_sk = float((sk.predict((Xt - mean) / std) == yt).mean())

    print(
        f"  torch probe, AdamW       acc {acc_torch:.4f}   {t_torch:7.1f} s   "
        f"({probe.epochs_run} epochs, early stopping on dev; the default)"
    )
    print(
        f"  torch probe, AdamW float32 acc {acc_exact:.4f}   {t_exact:7.1f} s   ({exact.epochs_run} epochs); "
        f"the default ran in {str(products_dtype('auto')).removeprefix('torch.')}: "
        f"{t_exact / t_torch:.2f}x its time, accuracy {acc_torch - acc_exact:+.4f}"
    )
    print(
        f"  torch probe, L-BFGS    acc {acc_lbfgs:.4f}   {t_lbfgs:7.1f} s   "
        f"({lbfgs.epochs_run} x 25 full-batch iterations)"
    )
    print(
        f"  sklearn LogisticRegr.  acc {acc_sk:.4f}   {t_sk:7.1f} s   "
        f"(lbfgs, max_iter=300, n_iter={int(sk.n_iter_[0])})"
    )
    for name, acc, secs in (("Adam", acc_torch, t_torch), ("L-BFGS", acc_lbfgs, t_lbfgs)):
        print(
            f"  {name:6s}: accuracy difference {100 * (acc - acc_sk):+.2f} points (target within 0.5); "
            f"speed-up {t_sk / secs:.1f}x (target >= 3x)"
        )


if __name__ == "__main__":
    main()
