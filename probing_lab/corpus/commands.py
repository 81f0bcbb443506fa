"""``probing-lab corpus build | fetch-help``: the parsers and what they run (``probing_lab.cli``
registers them)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from ..argtypes import non_negative_int, positive_int
from ..command_line import add_output_folder, from_args, output_folder

log = logging.getLogger("probing_lab")


def cmd_corpus_build(args: argparse.Namespace) -> int:
    from ..paths import data_dir as resolve_data_dir
    from .build import CORPUS_FILES, build_corpus
    from .exclusions import default_exclusions

    out = output_folder(args, "corpus build", *args.sources, *args.exclude, names=CORPUS_FILES)  # before any reading
    exclude = [Path(p) for p in args.exclude]
    if not args.no_default_exclusions:
        where, how = resolve_data_dir(args.data_dir)  # wherever load_dataset finds the probe datasets
        found = default_exclusions(where)
        if found:
            log.info("excluding the sentences of %d probe dataset files under %s (%s)", len(found), where, how)
        if not found:
            log.warning(
                "no probe datasets found under %s (UD EWT/GUM, PTB sample, WSD sets): nothing excluded "
                "from them; set --data-dir or PROBING_LAB_DATA",
                where or "(no data directory set)",
            )
        exclude += found
    stats = from_args(build_corpus, args, out=out, exclude=exclude, n_shards=args.shards, progress=log.info)
    t = stats["train"]
    log.info(
        "wrote %s: train %d sentences, %d tokens, %d types; heldout %d tokens; vocab %d; "
        "%d duplicates and %d evaluation sentences removed",
        out,
        t["sentences"],
        t["tokens"],
        t["types"],
        stats["heldout"]["tokens"],
        stats["vocab_size"],
        stats["duplicates_removed"],
        stats["evaluation_sentences_removed"],
    )
    return 0


def cmd_corpus_fetch_help(args: argparse.Namespace) -> int:
    from .build import FETCH_COMMANDS

    print(FETCH_COMMANDS, end="")
    return 0


def add_corpus_commands(sub) -> None:
    p = sub.add_parser("corpus", help="language-model pretraining corpora")
    corpus = p.add_subparsers(dest="corpus_command", required=True)
    c = corpus.add_parser("build", help="normalise, split, tokenize, dedupe, hold out, write vocab + stats")
    c.add_argument("sources", nargs="+", help="text files, folders, .zip/.tgz/.whl/.deb archives")
    add_output_folder(c, "corpus folder to write")
    c.add_argument(
        "--exclude", action="append", default=[], help="extra evaluation file whose sentences must not be trained on"
    )
    c.add_argument("--data-dir", help="where the probe evaluation sets are (default $PROBING_LAB_DATA)")
    c.add_argument("--no-default-exclusions", action="store_true")
    c.add_argument("--heldout-fraction", type=float, default=0.01)
    c.add_argument("--shards", type=positive_int, default=4, help="train shards (at least one per training process)")
    c.add_argument("--min-count", type=positive_int, default=2, help="vocabulary: minimum count")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument(
        "--gcide-definition-tokens",
        type=non_negative_int,
        default=1_000_000,
        help="at most this many tokens of GCIDE definitions (a seeded random sample)",
    )
    c.set_defaults(func=cmd_corpus_build)
    c = corpus.add_parser("fetch-help", help="print the commands that fetch the registry text packages")
    c.set_defaults(func=cmd_corpus_fetch_help)
