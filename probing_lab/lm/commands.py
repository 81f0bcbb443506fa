"""``probing-lab lm score|predict|agreement|blimp``: the biLM as a language model from the command line."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from ..argtypes import positive_int
from ..command_line import add_model_options, add_output_folder, output_folder

log = logging.getLogger("probing_lab")

MAX_K = 100  # `lm predict -k`: more words per position is not a prediction any more, it is the vocabulary


def cmd_lm_score(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..fileio import atomic_path, check_output
    from ..text import read_sentence_file
    from .language_model import load_language_model
    from .score import score_sentences

    out = Path(args.output)
    if out.is_dir():
        raise IsADirectoryError(f"--output {out} is a directory; give a file name, e.g. {out / 'scores.jsonl'}")
    check_output(out, args.input, force=args.force)
    sentences = read_sentence_file(args.input)
    lm = load_language_model(args.model, args.seed)
    log.info("scoring %d sentences with %s", len(sentences), lm.name)
    step = 64
    with atomic_path(out) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for start in tqdm(range(0, len(sentences), step), unit="batch", disable=args.quiet):
            for score in score_sentences(lm, sentences[start : start + step]):
                f.write(json.dumps(score.to_json()) + "\n")
    log.info("wrote %s", out)
    return 0


def cmd_lm_predict(args: argparse.Namespace) -> int:
    from ..text import tokenize
    from .language_model import load_language_model
    from .score import predict, score_sentences

    tokens = tokenize(args.text)
    if not tokens:
        raise ValueError("--text is empty; give a sentence, e.g. --text 'The bank raised its rates .'")
    if args.position is not None and not 0 <= args.position < len(tokens):
        raise ValueError(f"--position {args.position} is outside the sentence's {len(tokens)} tokens (0-based)")
    k = min(args.k, MAX_K)
    if k < args.k:
        log.warning("-k %d capped at %d words per position and direction", args.k, MAX_K)
    lm = load_language_model(args.model, args.seed)
    positions = range(len(tokens)) if args.position is None else [args.position]
    predictions = predict(lm, tokens, k)
    (score,) = score_sentences(lm, [tokens])
    for i in positions:
        p = predictions[i]
        forward = ", ".join(f"{w} {q:.2f}" for w, q in p.forward)
        backward = ", ".join(f"{w} {q:.2f}" for w, q in p.backward)
        unk = " (unknown word: scored as <UNK>)" if i in score.unk else ""
        print(f"{i:>3} {p.token}{unk}")
        print(f"    forward  (from the left):  {forward}\n    backward (from the right): {backward}")
    print(f"perplexity: forward {score.perplexity('forward'):.1f}, backward {score.perplexity('backward'):.1f}")
    return 0


def cmd_lm_agreement(args: argparse.Namespace) -> int:
    from ..fileio import atomic_path, check_output
    from .agreement import PAIRS_FILE, evaluate_agreement, generate_pairs, read_pairs, write_pairs
    from .language_model import load_language_model

    if args.write_pairs:
        check_output(args.write_pairs, args.pairs, force=args.force, option="--write-pairs")
        pairs = generate_pairs(args.per_construction, args.pair_seed)
        write_pairs(pairs, args.write_pairs)
        log.info("wrote %d pairs to %s", len(pairs), args.write_pairs)
        return 0
    pairs_file = args.pairs or PAIRS_FILE
    if args.json:  # checked now, not after the whole evaluation
        check_output(args.json, pairs_file, force=args.force, option="--json")
    pairs = read_pairs(pairs_file)
    lm = load_language_model(args.model, args.seed)
    log.info("%d minimal pairs, model %s", len(pairs), lm.name)
    result = evaluate_agreement(lm, pairs)
    print(f"subject-verb agreement, {lm.name}: share of pairs where the grammatical sentence is more probable")
    print(result.table(), end="")
    if args.json:
        with atomic_path(args.json) as tmp:
            tmp.write_text(json.dumps({"model": result.model, "accuracy": result.accuracy}, indent=2) + "\n")
    return 0


BLIMP_FILES = ("metrics.json", "table.md")


def cmd_lm_blimp(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..fileio import atomic_directory
    from .blimp import blimp_table, evaluate_blimp, read_blimp, read_pairs_file
    from .language_model import load_language_model

    out = output_folder(args, "lm blimp", *([args.pairs] if args.pairs else []), names=BLIMP_FILES, fresh="blimp")
    if args.pairs:
        pairs = read_pairs_file(args.pairs)
    else:
        paradigms = [p.strip() for p in args.paradigms.split(",") if p.strip()] if args.paradigms else None
        pairs = read_blimp(args.data_dir, paradigms)  # read and checked before the model loads
    lm = load_language_model(args.model, args.seed)
    log.info("%d minimal pairs, model %s", len(pairs), lm.name)
    bar = tqdm(total=2 * len(pairs), unit="sentence", disable=args.quiet, desc="blimp")
    metrics = evaluate_blimp(
        lm, pairs, args.data_dir, args.batch_size, on_progress=lambda done, total: bar.update(done - bar.n)
    )
    bar.close()
    if args.pairs:
        metrics["pairs_file"] = str(Path(args.pairs).resolve())
    table = blimp_table(metrics)
    with atomic_directory(out, command="lm blimp") as tmp:
        (tmp / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n", encoding="utf-8")
        (tmp / "table.md").write_text(table, encoding="utf-8")
    print(table, end="")
    log.info(
        "%d pairs in %.0f s (%.0f pairs/s); wrote %s", len(pairs), metrics["seconds"], metrics["pairs_per_second"], out
    )
    return 0


def add_lm_commands(sub) -> None:
    p = sub.add_parser("lm", help="the biLM as a language model: score, predict, agreement, blimp")
    lm = p.add_subparsers(dest="lm_command", required=True)

    def model_args(c):
        add_model_options(c, "model directory with a softmax, or random:PRESET (default: the shipped model)")

    c = lm.add_parser("score", help="log P of every token from each direction, one JSON line per input line")
    c.add_argument("--input", required=True, help="text file, one whitespace-tokenized sentence per line")
    c.add_argument("--output", required=True, help="JSON-lines file to write")
    c.add_argument("--force", action="store_true", help="replace --output when it already exists")
    c.add_argument("--quiet", action="store_true")
    model_args(c)
    c.set_defaults(func=cmd_lm_score)

    c = lm.add_parser("predict", help="the top-k words each direction expects at each position")
    c.add_argument("--text", required=True, help="a sentence (tokenized like the app does)")
    c.add_argument("--position", type=int, help="only this token position (0-based)")
    c.add_argument("-k", type=positive_int, default=5, help=f"words per position and direction (at most {MAX_K})")
    model_args(c)
    c.set_defaults(func=cmd_lm_predict)

    c = lm.add_parser("agreement", help="subject-verb agreement accuracy per construction and direction")
    c.add_argument("--pairs", help="minimal pairs JSON-lines (default: data/agreement/subject_verb.jsonl)")
    c.add_argument("--json", help="also write the accuracies to this JSON file")
    c.add_argument("--write-pairs", metavar="FILE", help="instead: generate the minimal pairs into FILE")
    c.add_argument(
        "--per-construction", type=positive_int, default=240, help="pairs per construction (with --write-pairs)"
    )
    c.add_argument("--force", action="store_true", help="replace the --json or --write-pairs file when it exists")
    c.add_argument("--pair-seed", type=int, default=0, help="generator seed (with --write-pairs)")
    model_args(c)
    c.set_defaults(func=cmd_lm_agreement)

    c = lm.add_parser(
        "blimp",
        help="BLiMP (67 paradigms of minimal pairs) or your own pairs: accuracy per paradigm and phenomenon",
        description="A pair is right when the good sentence has the higher total log-probability (forward, "
        "backward, and both summed); beside ours the published 5-gram, LSTM, Transformer-XL, GPT-2 and humans.",
    )
    c.add_argument(
        "--data-dir", help="datasets folder holding blimp/ (default $PROBING_LAB_DATA or ../shared/datasets)"
    )
    c.add_argument("--paradigms", help="comma-separated paradigm names (default: all 67)")
    c.add_argument("--pairs", help="instead: your own JSON-lines file of pairs (sentence_good, sentence_bad[, UID])")
    c.add_argument("--batch-size", type=positive_int, default=128, help="sentences per biLM pass")
    add_output_folder(c, "folder for metrics.json and table.md")
    c.add_argument("--quiet", action="store_true")
    model_args(c)
    c.set_defaults(func=cmd_lm_blimp)
