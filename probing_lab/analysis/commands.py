"""``probing-lab compare``: linear CKA between the layers of one model, or of two models, on the
same tokens, plus each model's anisotropy and self-similarity per layer."""

from __future__ import annotations

import argparse
import csv
import logging
from pathlib import Path

from ..argtypes import positive_int
from ..command_line import add_output_folder, output_folder

log = logging.getLogger("probing_lab")

MAX_TOKENS = 4000  # the debiased estimator builds (tokens x tokens) Gram matrices
OUTPUTS = ("cka.csv", "cka.png", "geometry.csv")


def read_token_lists(args: argparse.Namespace) -> list[list[str]]:
    if bool(args.input) == bool(args.dataset):
        raise ValueError("give the tokens with either --input FILE or --dataset NAME:SPLIT (e.g. ewt:dev)")
    if args.input:
        from ..text import read_sentence_file

        sentences = read_sentence_file(args.input, allow_empty=True)
    else:
        from ..datasets import load_dataset

        name, _, split = args.dataset.partition(":")
        sentences = [s.words for s in load_dataset(name, split or None, args.data_dir)]
    sentences = [s for s in sentences if s][: args.limit]
    if not sentences:
        raise ValueError("no sentences to compare on")
    from ..text import first_sentences

    kept = first_sentences(sentences, MAX_TOKENS)
    total = sum(map(len, kept))
    if len(kept) < len(sentences):
        log.info("using the first %d sentences (%d tokens; at most %d)", len(kept), total, MAX_TOKENS)
    return kept


def representations(model_arg: str | None, sentences, keys: list[str], seed: int = 0):
    """A model's named representations of every token: ``(name, {key: (n, dim)})``."""
    from ..elmo import Embedder
    from ..features.activations import embed_activations, layer_number, split_half
    from ..model_loading import load_model

    loaded = load_model(None if model_arg in (None, "shipped") else model_arg, seed=seed)
    n_layers = loaded.model.n_layers
    for key in keys:
        k = layer_number(key)
        if k is None or k >= n_layers or (split_half(key) and k == 0):
            raise ValueError(
                f"--layers: {key!r} is not a layer of {loaded.name} (it has 0-{n_layers - 1}; halves 1f, 1b, ...)"
            )
    acts = embed_activations(Embedder(loaded.model, batch_size=32), sentences)
    return loaded.name, {key: acts.layer(key) for key in keys}


def save_cka_png(rows, cols, M, row_model: str, col_model: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..features.activations import layer_label
    from ..fileio import atomic_path

    fig, ax = plt.subplots(figsize=(1.2 * len(cols) + 2.5, 1.0 * len(rows) + 1.8), dpi=120)
    image = ax.imshow(M, vmin=0, vmax=1, cmap="viridis")
    ax.set_xticks(range(len(cols)), [layer_label(c) for c in cols], rotation=30, ha="right")
    ax.set_yticks(range(len(rows)), [layer_label(r) for r in rows])
    for i in range(len(rows)):
        for j in range(len(cols)):
            ax.text(j, i, f"{M[i, j]:.2f}", ha="center", va="center", color="white" if M[i, j] < 0.6 else "black")
    ax.set_xlabel(col_model, fontsize=8)
    ax.set_ylabel(row_model, fontsize=8)
    ax.set_title("linear CKA", fontsize=10)
    fig.colorbar(image, ax=ax, fraction=0.046)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)


def cmd_compare(args: argparse.Namespace) -> int:
    from ..fileio import atomic_directory
    from .similarity import cka_matrix, corpus_geometry

    models = args.model or ["shipped"]
    if len(models) > 2:
        raise ValueError("--model at most twice: CKA compares two models (or one model's layers with each other)")
    keys = [k.strip() for k in args.layers.split(",") if k.strip()]
    if not keys:
        raise ValueError("--layers is empty; e.g. --layers 0,1,2 or 1f,1b,2f,2b")
    sentences = read_token_lists(args)
    out = output_folder(args, "compare", args.input, names=OUTPUTS)  # before the models run
    first = representations(models[0], sentences, keys, args.seed)
    second = representations(models[1], sentences, keys, args.seed) if len(models) == 2 else first
    rows, cols, M = cka_matrix(first[1], second[1], debiased=args.debiased)
    n_tokens = sum(map(len, sentences))
    kind = "debiased linear CKA" if args.debiased else "linear CKA"
    print(f"{kind} on {n_tokens} tokens of {len(sentences)} sentences; rows {first[0]}, columns {second[0]}")
    print("       " + " ".join(f"{c:>7}" for c in cols))
    for r, values in zip(rows, M):
        print(f"{r:>6} " + " ".join(f"{v:7.3f}" for v in values))
    words = [w for s in sentences for w in s]
    sentence_of = [i for i, s in enumerate(sentences) for _ in s]
    with atomic_directory(out, command="compare") as tmp:
        with open(tmp / "cka.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow([f"{first[0]} \\ {second[0]}", *cols])
            for r, values in zip(rows, M):
                w.writerow([r, *(f"{v:.6f}" for v in values)])
        save_cka_png(rows, cols, M, first[0], second[0], tmp / "cka.png")
        with open(tmp / "geometry.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["model", "layer", "anisotropy", "self_similarity", "adjusted_self_similarity", "words"])
            for name, layers in {id(x): x for x in (first, second)}.values():
                for row in corpus_geometry(layers, words, sentence_of):
                    w.writerow([name, *row.values()])
    log.info("wrote %s, %s and %s", out / "cka.csv", out / "cka.png", out / "geometry.csv")
    return 0


def add_compare_command(sub) -> None:
    p = sub.add_parser("compare", help="linear CKA between layers of one or two models on the same tokens")
    p.add_argument(
        "--model",
        action="append",
        help="a model (checkpoint directory, random:PRESET, or 'shipped'); give it twice to compare two models",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of random:PRESET models")
    p.add_argument("--input", help="text file, one whitespace-tokenized sentence per line")
    p.add_argument("--dataset", help="NAME:SPLIT of probing_lab.datasets, e.g. ewt:dev")
    p.add_argument("--data-dir", help="datasets folder (default $PROBING_LAB_DATA)")
    p.add_argument(
        "--limit", type=positive_int, default=200, help="at most this many sentences (and %d tokens)" % MAX_TOKENS
    )
    p.add_argument("--layers", default="0,1,2", help="comma-separated: 0,1,2 and halves 1f,1b,2f,2b")
    p.add_argument("--debiased", action="store_true", help="debiased CKA (for few tokens)")
    add_output_folder(p, "folder for cka.csv, cka.png and geometry.csv")
    p.set_defaults(func=cmd_compare)
