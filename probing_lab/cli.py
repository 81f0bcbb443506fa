"""``probing-lab`` command line: ``app``, ``embed``, ``demo``, ``info``, ``corpus build|fetch-help``, ``train``,
``curves``, ``eval-lm``, ``export``, ``probe``, ``report``; ``probing-lab COMMAND --help`` for each."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

log = logging.getLogger("probing_lab")


def _add_model_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model (default: the shipped model)")
    g.add_argument("--model", help="checkpoint directory, or random:PRESET (e.g. random:small)")
    g.add_argument("--options", help="released ELMo options.json (with --weights)")
    g.add_argument("--weights", help="released ELMo weights.hdf5 (with --options)")
    g.add_argument("--seed", type=int, default=0, help="seed for random:PRESET models")


def _threads(n: int | None) -> None:
    if n:
        import torch

        torch.set_num_threads(n)


def cmd_embed(args: argparse.Namespace) -> int:
    import h5py

    from .elmo import Embedder
    from .fileio import atomic_path
    from .models import load_model

    src = Path(args.input)
    if not src.is_file():
        raise FileNotFoundError(f"input file not found: {src} (one whitespace-tokenized sentence per line)")
    lines = src.read_text(encoding="utf-8").splitlines()
    sentences = [line.split() for line in lines]
    empty = sum(1 for s in sentences if not s)
    if empty:
        log.warning("%d empty line(s): each gets a (layers, 0, dim) dataset so indices stay aligned", empty)
    out = Path(args.output)
    if out.is_dir():  # found now, not after all the work
        raise IsADirectoryError(f"--output {out} is a directory; give a file name, e.g. {out / 'embeddings.hdf5'}")
    loaded = load_model(args.model, args.options, args.weights, args.seed)
    elmo = Embedder(loaded.model, batch_size=args.batch_size, stateful=args.stateful, fused=args.fused)
    log.info("model %s: %d layers x %d dims; %d sentences", loaded.name, elmo.n_layers, elmo.dim, len(sentences))
    start = time.perf_counter()
    n_tokens = sum(len(s) for s in sentences)
    with atomic_path(out) as tmp:  # an interrupted run leaves no half-written file
        with h5py.File(tmp, "w") as f:
            # each batch is written as it comes: memory stays flat however long the input is
            for i, array in elmo.embed_iter(sentences, progress=not args.quiet):
                f.create_dataset(str(i), data=array)
            index = {line: str(i) for i, line in enumerate(lines)}
            f.create_dataset("sentence_to_index", data=[json.dumps(index)], dtype=h5py.string_dtype())
    seconds = time.perf_counter() - start
    log.info("wrote %s: %d tokens in %.1f s (%.0f tokens/s)", out, n_tokens, seconds, n_tokens / max(seconds, 1e-9))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    import numpy as np

    from .elmo import Embedder
    from .models import load_model, shipped_model_dir

    if args.model is None and args.options is None and shipped_model_dir() is None:
        args.model = "random:cpu-base"
        print(
            "No shipped model in this checkout yet: using a RANDOMLY INITIALISED cpu-base ELMo.\n"
            "Only the structure is meaningful (L0 is context-free, L1/L2 are not); pass\n"
            "--options/--weights for a released ELMo or --model DIR for a trained one.\n"
        )
    loaded = load_model(args.model, args.options, args.weights, args.seed)
    elmo = Embedder(loaded.model)
    sentences = [
        "I deposited the cheque at the bank this morning .".split(),
        "The bank raised its interest rates again .".split(),
        "We had a picnic on the bank of the river .".split(),
        "Reeds grow thick along the muddy bank .".split(),
    ]
    arrays = elmo.embed(sentences)
    vectors = np.stack([a[:, s.index("bank")] for a, s in zip(arrays, sentences)], axis=1)  # (layers, 4, dim)
    print(f"model: {loaded.name}")
    for i, s in enumerate(sentences):
        print(f"  [{i}] {' '.join(s)}")
    print("\ncosine similarity of 'bank' between the sentences, per layer")
    for layer, v in enumerate(vectors):
        v = v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)
        sim = v @ v.T
        money, river, across = sim[0, 1], sim[2, 3], sim[:2, 2:].mean()
        print(f"  L{layer}: money-money {money:.3f}  river-river {river:.3f}  money-river {across:.3f}")
    print("\nL0 is the same vector for every 'bank' (a type embedding); L1 and L2 depend on context.")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from .models import load_model

    loaded = load_model(args.model, args.options, args.weights, args.seed)
    print(
        json.dumps(
            {
                "model": loaded.name,
                "parameters": loaded.model.count_parameters(),
                "options": loaded.model.options.to_dict(),
            },
            indent=2,
        )
    )
    return 0


def cmd_corpus_build(args: argparse.Namespace) -> int:
    from .datasets.registry import resolve_data_dir
    from .training.corpus import build_corpus, default_exclusions

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
    stats = build_corpus(
        args.out,
        args.sources,
        exclude=exclude,
        heldout_fraction=args.heldout_fraction,
        n_shards=args.shards,
        min_count=args.min_count,
        seed=args.seed,
        progress=log.info,
        gcide_definition_tokens=args.gcide_definition_tokens,
    )
    t = stats["train"]
    log.info(
        "wrote %s: train %d sentences, %d tokens, %d types; heldout %d tokens; vocab %d; "
        "%d duplicates and %d evaluation sentences removed",
        args.out,
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
    from .training.corpus import FETCH_COMMANDS

    print(FETCH_COMMANDS, end="")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from .training.config import TrainConfig
    from .training.trainer import train

    config = TrainConfig.load(args.config)
    evaluate = None
    if config.eval_every_steps:  # load the probe data now: a missing dataset fails before any training
        from .probing.curves import QuickEval

        evaluate = QuickEval.load(args.data_dir)
    if args.resume_from:
        from .training.checkpoint import restore_warm_start

        restore_warm_start(args.resume_from, args.out)
    summary = train(
        config,
        args.corpus,
        args.out,
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
        args.out,
    )
    return 130 if summary["interrupted"] else 0


def cmd_eval_lm(args: argparse.Namespace) -> int:
    from .training.checkpoint import load_lm
    from .training.lm import evaluate_lm

    lm, info = load_lm(args.run)
    result = evaluate_lm(
        lm,
        args.corpus,
        info["config"].get("vocab_size"),
        file=Path(args.file) if args.file else None,
        max_tokens=args.max_tokens,
        progress=not args.quiet,
    )
    print(json.dumps(result, indent=2))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    import torch

    from .training.checkpoint import export_encoder, export_warm_start

    if args.warm_start:
        log.info(
            "wrote %s (warm-start state; continue with `probing-lab train --resume-from %s`)",
            export_warm_start(args.run, args.out),
            args.out,
        )
        return 0
    card = json.loads(Path(args.card).read_text(encoding="utf-8")) if args.card else None
    out = export_encoder(
        args.run, args.out, dtype=torch.float16 if args.dtype == "float16" else torch.float32, card=card
    )
    log.info("wrote %s", out)
    return 0


def cmd_curves(args: argparse.Namespace) -> int:
    from .probing.curves import curves_table, read_curves, save_curves_png

    runs = {Path(r).name: read_curves(r) for r in args.runs}
    print(curves_table(runs))
    if args.png:
        save_curves_png(runs, args.png)
        log.info("wrote %s", args.png)
    return 0


def cmd_probe(args: argparse.Namespace) -> int:
    from .probing.experiment import run_experiment

    for path in args.experiments:
        out = args.out if len(args.experiments) == 1 else (str(Path(args.out) / Path(path).stem) if args.out else None)
        run = run_experiment(
            path, model=args.model, out=out, data_dir=args.data_dir, progress=not args.quiet, log=log.info
        )
        print(run)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .probing.runs import report

    print(report(args.runs), end="")
    return 0


def cmd_app(args: argparse.Namespace) -> int:
    import importlib.util

    from .models import PACKAGE_ROOT

    launch = PACKAGE_ROOT / "app" / "launch.py"  # the app lives next to the library, not inside it
    if not launch.is_file():
        raise FileNotFoundError(f"{launch}: the Streamlit app is missing from this checkout")
    spec = importlib.util.spec_from_file_location("probing_lab_app_launch", launch)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.run_app(port=args.port, model=args.model)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="probing-lab", description="ELMo Probing Lab")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("embed", help="embed sentences to an hdf5 file (structural-probes layout)")
    p.add_argument("--input", required=True, help="text file, one whitespace-tokenized sentence per line")
    p.add_argument("--output", required=True, help="hdf5 file: datasets '0', '1', ... of (layers, tokens, dim)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument(
        "--stateful", action="store_true", help="carry LSTM state across batches, per batch row (original ELMo)"
    )
    p.add_argument("--fused", action="store_true", help="torch.lstm fused path (no clipping; see README)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_model_args(p)
    p.set_defaults(func=cmd_embed)

    p = sub.add_parser("demo", help="per-layer similarities of 'bank' in four sentences")
    _add_model_args(p)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("info", help="print a model's options and parameter count")
    _add_model_args(p)
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("corpus", help="language-model pretraining corpora")
    corpus = p.add_subparsers(dest="corpus_command", required=True)
    c = corpus.add_parser("build", help="normalise, split, tokenize, dedupe, hold out, write vocab + stats")
    c.add_argument("sources", nargs="+", help="text files, folders, .zip/.tgz/.whl/.deb archives")
    c.add_argument("--out", required=True, help="corpus folder to write")
    c.add_argument(
        "--exclude", action="append", default=[], help="extra evaluation file whose sentences must not be trained on"
    )
    c.add_argument("--data-dir", help="where the probe evaluation sets are (default $PROBING_LAB_DATA)")
    c.add_argument("--no-default-exclusions", action="store_true")
    c.add_argument("--heldout-fraction", type=float, default=0.01)
    c.add_argument("--shards", type=int, default=4, help="train shards (at least one per training process)")
    c.add_argument("--min-count", type=int, default=2, help="vocabulary: minimum count")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument(
        "--gcide-definition-tokens",
        type=int,
        default=1_000_000,
        help="at most this many tokens of GCIDE definitions (a seeded random sample)",
    )
    c.set_defaults(func=cmd_corpus_build)
    c = corpus.add_parser("fetch-help", help="print the commands that fetch the registry text packages")
    c.set_defaults(func=cmd_corpus_fetch_help)

    p = sub.add_parser("train", help="train the biLM (also under torchrun for DistributedDataParallel)")
    p.add_argument("--config", required=True, help="training config JSON (see configs/train/)")
    p.add_argument("--corpus", required=True, help="folder written by `probing-lab corpus build`")
    p.add_argument("--out", required=True, help="run directory")
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
    p.add_argument("--max-tokens", type=int)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_eval_lm)

    p = sub.add_parser("export", help="a training run -> a model directory (no softmax) the lab loads")
    p.add_argument("run", help="run directory (its latest checkpoint), checkpoint or snapshot")
    p.add_argument("--out", required=True)
    p.add_argument("--dtype", choices=["float16", "float32"], default="float16")
    p.add_argument("--card", help="JSON file merged into the model card")
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
    p.set_defaults(func=cmd_curves)

    p = sub.add_parser("probe", help="run probe experiments (probes/*.toml) into run directories")
    p.add_argument("experiments", nargs="+", help="experiment TOML file(s)")
    p.add_argument("--model", help="checkpoint directory or random:PRESET (default: the shipped model)")
    p.add_argument("--out", help="run directory (a parent folder when several experiments are given)")
    p.add_argument("--data-dir", help="datasets folder (default $PROBING_LAB_DATA)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_probe)

    p = sub.add_parser("app", help="start the Streamlit lab on 127.0.0.1")
    p.add_argument("--port", type=int, help="default: a free port")
    p.add_argument("--model", help="checkpoint directory or random:PRESET (default: the shipped model)")
    p.set_defaults(func=cmd_app)

    p = sub.add_parser("report", help="several probe runs -> one tasks x layers x models table (markdown)")
    p.add_argument("runs", nargs="+")
    p.set_defaults(func=cmd_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(message)s")
    _threads(args.threads)
    try:
        return args.func(args)
    except (FileNotFoundError, ValueError, KeyError) as e:
        if args.verbose:
            raise
        message = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"probing-lab {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"probing-lab {args.command}: interrupted; nothing was written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
