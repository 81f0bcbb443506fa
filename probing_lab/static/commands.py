"""``probing-lab word2vec``: static vectors trained on the lab's LM corpus (see :mod:`.word2vec`)."""

from __future__ import annotations

import argparse
import json
import logging

from ..argtypes import non_negative_int, positive_int
from ..command_line import add_output_folder, from_args


def cmd_word2vec(args: argparse.Namespace) -> int:
    from .word2vec import train_word2vec

    if not args.verbose:  # gensim logs a line a second at INFO; our own progress line is enough
        logging.getLogger("gensim").setLevel(logging.WARNING)
    card = from_args(train_word2vec, args, corpus_dir=args.corpus, out_dir=args.out)
    print(json.dumps(card, indent=2))
    return 0


def add_word2vec_command(sub) -> None:
    p = sub.add_parser(
        "word2vec",
        help="train static word2vec vectors on an LM corpus folder (the probes' context-free baseline)",
        description="Skip-gram word2vec (gensim) on CORPUS/train/shard-*.txt, streamed; writes OUT/vectors.safetensors "
        "(float16, the TOP most frequent words), OUT/vocab.txt and OUT/card.json. Needs gensim (the word2vec extra).",
    )
    p.add_argument("--corpus", required=True, help="a folder written by `probing-lab corpus build`")
    add_output_folder(p, "output folder (written as a whole; e.g. data/models/word2vec-lab)")
    p.add_argument("--dim", type=positive_int, default=100, help="vector size (default 100)")
    p.add_argument("--top", type=positive_int, default=40000, help="keep the TOP most frequent words (default 40000)")
    p.add_argument("--epochs", type=positive_int, default=5, help="passes over the corpus (default 5)")
    p.add_argument("--window", type=positive_int, default=5, help="context window, each side (default 5)")
    p.add_argument("--min-count", type=positive_int, default=5, help="ignore rarer words (default 5)")
    p.add_argument("--seed", type=non_negative_int, default=0)
    p.add_argument(
        "--workers", type=positive_int, default=2, help="training threads (default 2; 1 gives reproducible vectors)"
    )
    p.set_defaults(func=cmd_word2vec)
