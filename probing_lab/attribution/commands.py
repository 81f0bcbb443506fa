"""``probing-lab attribute text|agreement``: which input words a prediction rests on."""

from __future__ import annotations

import argparse
import json
import logging

from ..argtypes import positive_int
from ..command_line import add_model_options, add_output_folder, output_folder

log = logging.getLogger("probing_lab")

RUN_FILES = ("metrics.json", "table.md")


def cmd_attribute_text(args: argparse.Namespace) -> int:
    from ..lm.language_model import load_language_model
    from ..text import tokenize
    from . import integrated_gradients, lm_score, lm_target, occlusion, type_layer

    tokens = tokenize(args.text)
    if not tokens:
        raise ValueError("--text is empty; give a sentence, e.g. --text 'The keys to the cabinet are here .'")
    if not 0 <= args.position < len(tokens):
        raise ValueError(f"--position {args.position} is outside the sentence's {len(tokens)} tokens (0-based)")
    lm = load_language_model(args.model, args.seed)
    good = tokens[args.position]
    target = lm_target(lm, tokens, args.position, good, args.contrast, args.direction)
    ig = integrated_gradients(target, type_layer(lm.bilm, tokens), tokens, args.steps)
    occ = occlusion(lm_score(lm, good, args.contrast, args.direction), tokens, args.position)
    print(
        f"{args.direction} LM at {args.position} ({good!r} against {args.contrast!r}): "
        f"log-prob difference {ig.value:.3f}"
    )
    print(f"{'word':>14}  integrated gradients  occlusion")
    for i, (word, a, o) in enumerate(zip(tokens, ig.scores, occ.scores)):
        mark = "  <- predicted" if i == args.position else ""
        print(f"{word:>14}  {a:+20.3f}  {o:+9.3f}{mark}")
    print(f"completeness error of integrated gradients: {ig.completeness_error:.4f}")
    return 0


def cmd_attribute_agreement(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..fileio import atomic_directory
    from ..lm.agreement import PAIRS_FILE, read_pairs
    from ..lm.language_model import load_language_model
    from .agreement import evaluate, table

    out = output_folder(args, "attribute agreement", names=RUN_FILES, fresh="attribution")
    pairs = read_pairs(args.pairs or PAIRS_FILE)
    constructions = [c.strip() for c in args.constructions.split(",") if c.strip()]
    lm = load_language_model(args.model, args.seed)
    bar = tqdm(total=len(constructions) * args.per_construction, unit="pair", disable=args.quiet, desc="attribute")
    metrics = evaluate(
        lm,
        pairs,
        constructions,
        args.per_construction,
        args.direction,
        steps=args.steps,
        on_progress=lambda done, total: bar.update(done - bar.n),
    )
    bar.close()
    with atomic_directory(out, command="attribute agreement") as tmp:
        (tmp / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n", encoding="utf-8")
        (tmp / "table.md").write_text(table(metrics), encoding="utf-8")
    print(table(metrics), end="")
    log.info("wrote %s", out)
    return 0


def add_attribute_commands(sub) -> None:
    p = sub.add_parser("attribute", help="which input words a prediction rests on (integrated gradients, occlusion)")
    cmds = p.add_subparsers(dest="attribute_command", required=True)

    c = cmds.add_parser("text", help="per-word attribution of one LM choice in a sentence")
    c.add_argument("--text", required=True, help="a sentence (tokenized as the app does)")
    c.add_argument("--position", type=int, required=True, help="the word the LM predicts (0-based)")
    c.add_argument("--contrast", required=True, help="the other word it could have chosen there, e.g. is for are")
    c.add_argument("--direction", choices=("forward", "backward"), default="forward")
    c.add_argument("--steps", type=positive_int, default=64, help="integrated-gradients steps")
    add_model_options(c, "model directory with a softmax, or random:PRESET (default: the shipped model)")
    c.set_defaults(func=cmd_attribute_text)

    c = cmds.add_parser("agreement", help="subject-top rate and deletion curves on the agreement set")
    c.add_argument("--pairs", help="minimal pairs JSON-lines (default: data/agreement/subject_verb.jsonl)")
    c.add_argument("--constructions", default="simple,prepositional_phrase")
    c.add_argument("--per-construction", type=positive_int, default=40)
    c.add_argument("--direction", choices=("forward", "backward"), default="forward")
    c.add_argument("--steps", type=positive_int, default=32, help="integrated-gradients steps")
    c.add_argument("--quiet", action="store_true")
    add_output_folder(c, "folder for metrics.json and table.md")
    add_model_options(c, "model directory with a softmax, or random:PRESET (default: the shipped model)")
    c.set_defaults(func=cmd_attribute_agreement)
