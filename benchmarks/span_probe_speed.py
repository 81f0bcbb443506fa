"""The linear span probe's training step: written out (``StackedSpanLinear``, what ``fit_span_probes``
runs for ``kind = "linear"``: each minibatch's tokens projected once, ``span_batches.token_batch``)
against the same probes as torch modules with autograd and one ``torch.optim.AdamW`` each (an MLP or
rank probe's path: every span's rows copied out, ``span_batches.gather_spans``), measured in one run on
the same minibatches (whole sentences' spans) of a real experiment (a task head and its control head),
reading the minibatch included.

    python benchmarks/span_probe_speed.py [probes/constituents_ptb.toml] [--layer 0] [--steps 150]

Features come from the activation cache (extracted first if needed; not timed). Prints ms per
minibatch for each path (best of three passes, the two paths alternating) and their ratio, and
checks that after the timed steps both give the same logits.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiment", nargs="?", default=str(ROOT / "probes" / "constituents_ptb.toml"))
    parser.add_argument("--layer", default="0", help="a layer key of the experiment: 0, 1, 2, mix")
    parser.add_argument("--steps", type=int, default=150, help="minibatches per pass")
    parser.add_argument("--model", help="default: the shipped model")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from probing_lab.features.cache import ElmoEncoder
    from probing_lab.model_loading import load_model
    from probing_lab.paths import data_dir
    from probing_lab.probing import tasks as T
    from probing_lab.probing.config import Experiment
    from probing_lab.probing.experiment import load_experiment_splits
    from probing_lab.probing.runners.span import span_rows, span_sentences
    from probing_lab.probing.span_batches import StandardisedTokens, gather_spans, sentence_batches, token_batch
    from probing_lab.probing.span_heads import StackedSpanLinear
    from probing_lab.probing.span_probe import (
        SpanInputs,
        SpanProbe,
        _one_token_roles,
        _spans,
        _token_statistics,
    )

    exp = Experiment.load(args.experiment)
    loaded = load_model(args.model)
    split = load_experiment_splits(exp, ElmoEncoder(loaded.model, loaded.name), data_dir(None)[0], None)["train"]
    span1, span2, labels = span_rows(split)
    index = T.LabelIndex(labels)
    control = index.encode(T.span_control_labels(split.sentences, labels, exp.seed))
    Y = torch.as_tensor(np.stack([index.encode(labels), control], 1))
    units = span_sentences(split, span1)
    X = SpanInputs(split.rows(args.layer), span1, span2, units)
    config = exp.probe_config(mix=args.layer == "mix")
    n_layers = X.tokens.shape[1] if config.mix else 1

    def probes() -> list:
        out = []
        for _ in range(2):
            torch.manual_seed(config.seed)
            out.append(SpanProbe(X.tokens.shape[-1], len(index), config, X.n_spans, n_layers))
        return out

    stacked = StackedSpanLinear(probes(), config, _one_token_roles(X))  # one-token roles folded, as a fit does
    modules = probes()
    optimizers = [
        torch.optim.AdamW(m.parameters(), lr=config.lr, weight_decay=config.weight_decay, foreach=True) for m in modules
    ]
    mean, std = _token_statistics(X)
    source = StandardisedTokens(X.tokens, mean, std)
    batches = sentence_batches(units, config.batch_size, torch.Generator().manual_seed(config.seed))[: args.steps]

    def autograd_step(i: int) -> None:
        gathered = gather_spans(source, _spans(X, batches[i]))
        loss = sum(torch.nn.functional.cross_entropy(m(gathered), Y[batches[i], h]) for h, m in enumerate(modules))
        for optimizer in optimizers:
            optimizer.zero_grad()
        loss.backward()
        for optimizer in optimizers:
            optimizer.step()

    def written_out_step(i: int) -> None:
        stacked.step(token_batch(source, _spans(X, batches[i])), Y[batches[i]], [0, 1])

    paths = {"autograd modules": autograd_step, "written out": written_out_step}
    best = {name: float("inf") for name in paths}
    for _ in range(3):
        for name, step in paths.items():
            t = time.perf_counter()
            for i in range(len(batches)):
                step(i)
            best[name] = min(best[name], (time.perf_counter() - t) / len(batches))
    lengths = np.concatenate([X.lengths[idx] for idx in batches])
    print(
        f"{exp.name} layer {args.layer}: {len(X)} spans, {len(index)} labels, {len(batches)} minibatches of "
        f"{config.batch_size} (mean span length {lengths.mean():.1f}), dim {X.tokens.shape[-1]}, {args.threads} threads"
    )
    for name, seconds in best.items():
        print(f"  {name:18s} {seconds * 1e3:6.2f} ms a minibatch")
    print(f"  ratio              {best['autograd modules'] / best['written out']:.2f}x")
    spans = _spans(X, batches[0])
    with torch.no_grad():
        logits = stacked.logits(token_batch(source, spans))
        differ = max(float((logits[:, h] - m(gather_spans(source, spans))).abs().max()) for h, m in enumerate(modules))
    print(f"  largest logit difference after {3 * len(batches)} steps: {differ:.2e}")


if __name__ == "__main__":
    main()
