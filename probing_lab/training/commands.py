"""The training half of the ``probing-lab`` command: ``train``, ``curves``, ``eval-lm``, ``export``
(their parsers and what they run; ``probing_lab.cli`` registers them)."""

from __future__ import annotations

import argparse
import json
import logging
import math
from pathlib import Path

from ..argtypes import positive_int
from ..command_line import add_output_folder, output_folder

log = logging.getLogger("probing_lab")


TRAIN_RUN_FILES = ("config.json", "metrics.jsonl", "curves.jsonl", "checkpoints", "snapshots")  # a training run's


def cmd_train(args: argparse.Namespace) -> int:
    from .config import TrainConfig
    from .trainer import train

    config = TrainConfig.load(args.config)
    out = output_folder(args, "train", args.corpus, names=TRAIN_RUN_FILES, resumable=True)  # not into your files
    evaluate = None
    if config.eval_every_steps:  # load the probe data now: a missing dataset fails before any training
        from ..probing.curves import QuickEval

        evaluate = QuickEval.load(args.data_dir)
    if args.resume_from:
        from .checkpoint import restore_warm_start

        restore_warm_start(args.resume_from, out)
    summary = train(
        config,
        args.corpus,
        out,
        resume=args.resume or bool(args.resume_from),
        progress=not args.quiet,
        evaluate=evaluate,
    )
    state = "interrupted" if summary["interrupted"] else "finished"
    log.info(
        "%s at step %d/%d (%d tokens, %.0f s of training); checkpoint in %s/checkpoints",
        state,
        summary["step"],
        summary["total_steps"],
        summary["tokens_seen"],
        summary["wall_time_s"],
        out,
    )
    return 130 if summary["interrupted"] else 0


def cmd_eval_lm(args: argparse.Namespace) -> int:
    from .checkpoint import load_lm
    from .config import TrainingError
    from .objective import evaluate_lm

    lm, info = load_lm(args.run)
    result = evaluate_lm(
        lm,
        args.corpus,
        info["config"].get("vocab_size"),
        file=Path(args.file) if args.file else None,
        first_tokens=args.max_tokens,
        progress=not args.quiet,
    )
    if args.max_tokens:
        result["max_tokens"] = args.max_tokens
        log.info(
            "evaluated the first %d of the %d tokens of %s (--max-tokens %d)",
            result["heldout_tokens"],
            result["heldout_tokens_total"],
            result["file"],
            args.max_tokens,
        )
    if not all(math.isfinite(result[k]) for k in ("perplexity_forward", "perplexity_backward")):
        raise TrainingError(
            f"{args.run}: the heldout perplexity is not finite ({result['perplexity_forward']}, "
            f"{result['perplexity_backward']}): the model's weights are broken (a diverged training run?)"
        )
    print(json.dumps(result, indent=2))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    import torch

    from ..fileio import atomic_directory
    from .checkpoint import EXPORT_FILES, export_encoder, export_warm_start

    out = output_folder(args, "export", args.run, args.card, args.corpus, names=EXPORT_FILES)
    if args.warm_start:
        log.info(
            "wrote %s (warm-start state; continue with `probing-lab train --resume-from %s`)",
            export_warm_start(args.run, out, Path(args.corpus) / "vocab.txt" if args.corpus else None),
            out,
        )
        return 0
    card = _read_card(args.card) if args.card else None
    if args.with_softmax and not args.corpus:
        raise ValueError("--with-softmax needs --corpus (the corpus the run was trained on: its vocab.txt)")
    with atomic_directory(out, command="export") as tmp:  # the whole folder at once: nothing of an earlier export stays
        export_encoder(
            args.run,
            tmp,
            dtype=torch.float16 if args.dtype == "float16" else torch.float32,
            card=card,
            softmax_vocab=Path(args.corpus) / "vocab.txt" if args.with_softmax else None,
        )
    log.info("wrote %s", out)
    return 0


def _read_card(path: str) -> dict:
    from ..fileio import read_utf8

    if not Path(path).is_file():
        raise FileNotFoundError(f"--card {path}: no such file")
    try:
        card = json.loads(read_utf8(path))
    except json.JSONDecodeError as e:
        raise ValueError(f"--card {path}: not valid JSON ({e})") from None
    if not isinstance(card, dict):
        raise ValueError(f"--card {path}: a JSON object is expected (its keys are merged into the model card)")
    return card


def cmd_curves(args: argparse.Namespace) -> int:
    from ..fileio import check_output
    from ..probing.curves import curves_table, read_curves, save_curves_png

    if args.png:
        check_output(args.png, *args.runs, force=args.force, option="--png")
    runs = {Path(r).name: read_curves(r) for r in args.runs}
    print(curves_table(runs))
    if args.png:
        save_curves_png(runs, args.png)
        log.info("wrote %s", args.png)
    return 0


def add_training_commands(sub) -> None:
    p = sub.add_parser("train", help="train the biLM (also under torchrun for DistributedDataParallel)")
    p.add_argument("--config", required=True, help="training config JSON (see configs/train/)")
    p.add_argument("--corpus", required=True, help="folder written by `probing-lab corpus build`")
    add_output_folder(p, "run directory", resumable=True)
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument(
        "--resume-from",
        metavar="STATE",
        help="continue a run from a warm-start state (`export --warm-start`) in a new --out",
    )
    p.add_argument(
        "--data-dir", help="probe datasets for the learning curves (eval_every_steps; default $PROBING_LAB_DATA)"
    )
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("eval-lm", help="heldout perplexity per direction (full softmax)")
    p.add_argument("run", help="run directory, checkpoint or snapshot")
    p.add_argument("--corpus", required=True)
    p.add_argument("--file", help="text file to evaluate instead of the corpus heldout.txt")
    p.add_argument(
        "--max-tokens", type=positive_int, help="evaluate only the first N tokens of the file (default: all)"
    )
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_eval_lm)

    p = sub.add_parser("export", help="a training run -> a model directory the lab loads")
    p.add_argument("run", help="run directory (its latest checkpoint), checkpoint or snapshot")
    add_output_folder(p, "the model folder to write")
    p.add_argument("--dtype", choices=["float16", "float32"], default="float16")
    p.add_argument("--card", help="JSON file merged into the model card")
    p.add_argument(
        "--with-softmax", action="store_true", help="keep the softmax and its words (for `probing-lab lm`, the LM page)"
    )
    p.add_argument(
        "--corpus", help="with --with-softmax or --warm-start: the corpus the run was trained on (its vocab.txt)"
    )
    p.add_argument(
        "--warm-start",
        action="store_true",
        help="instead: the run's latest checkpoint with its softmax in float16, without optimizer moments, "
        "small enough to commit (continue it with `train --resume-from`)",
    )
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "curves", help="a training run's learning curves: heldout perplexity, quick WSD and UPOS per layer"
    )
    p.add_argument("runs", nargs="+", help="run directories (or curves.jsonl files) of `probing-lab train`")
    p.add_argument("--png", help="also draw them into this PNG")
    p.add_argument("--force", action="store_true", help="replace --png when it already exists")
    p.set_defaults(func=cmd_curves)
