"""``probing-lab probe``: experiment files, your own file (``--data``), a training run's snapshots
(``--snapshots``); the parser and what it runs (``probing_lab.cli`` registers it)."""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from ..argtypes import layer_list, positive_int, seed_list
from ..command_line import MODEL_HELP, add_model_options, add_output_folder, output_folder
from ..datasets.files import FORMATS, MAX_TOKENS

log = logging.getLogger("probing_lab")

QUICK_OPTIONS = ("format", "label", "task", "layers", "max_tokens")  # the options of `probe --data FILE`


def _workers() -> int:
    """Layer entries probed at once: one per torch thread the command was given (``--threads``)."""
    import torch

    return torch.get_num_threads()


def cmd_probe(args: argparse.Namespace) -> int:
    import dataclasses

    from .experiment import Experiment, run_experiment

    if args.snapshots:
        return _probe_snapshots(args)
    from ..fileio import check_inside, check_name

    if args.data:  # the quick form: one file, no experiment file
        from .own_data import quick_experiment

        if args.experiments:
            raise ValueError("--data takes no experiment files (the file and its options are the experiment)")
        if not args.format:
            raise ValueError(f"--data needs --format ({', '.join(FORMATS)})")
        exp = quick_experiment(args.data, args.format, args.label, args.task, args.layers, args.max_tokens)
        if args.seeds:
            exp["seeds"] = args.seeds
        run = run_experiment(
            exp,
            model=args.model,
            out=args.out,
            progress=not args.quiet,
            log=log.info,
            force=args.force,
            workers=_workers(),
        )
        print(run.path)
        return 0
    quick = [f"--{k.replace('_', '-')}" for k in QUICK_OPTIONS if getattr(args, k) is not None]
    if quick:
        raise ValueError(f"{', '.join(quick)} go with --data FILE (an experiment file sets them itself)")
    if not args.experiments:
        raise ValueError("give experiment file(s), e.g. probes/pos_ewt.toml, or --data FILE --format FMT")

    for path in args.experiments:
        out = args.out
        if len(args.experiments) > 1 and args.out:  # one folder per experiment, named after its file
            out = str(check_inside(Path(args.out) / check_name(Path(path).stem, "experiment file name"), args.out))
        exp = Experiment.load(path)
        if args.seeds:
            exp = dataclasses.replace(exp, seeds=args.seeds, seed=args.seeds[0])
        run = run_experiment(
            exp,
            model=args.model,
            out=out,
            data_dir=args.data_dir,
            progress=not args.quiet,
            log=log.info,
            force=args.force,
            workers=_workers(),
        )
        print(run.path)
    return 0


def _probe_snapshots(args: argparse.Namespace) -> int:
    """One experiment on every snapshot of a training run (and its latest checkpoint): how what it
    measures emerges over training. Writes one run directory per snapshot and ``emergence.md``."""
    import dataclasses

    from ..fileio import atomic_path
    from ..paths import probe_runs_dir
    from ..training.checkpoint import latest_checkpoint
    from .experiment import Experiment, run_experiment
    from .runs import layer_order

    if len(args.experiments) != 1 or args.model:
        raise ValueError("--snapshots takes one experiment and no --model (the snapshots are the models)")
    run_dir = Path(args.snapshots)
    snapshots = sorted(p for p in (run_dir / "snapshots").glob("step-*") if (p / "lm.safetensors").is_file())
    latest = latest_checkpoint(run_dir) if (run_dir / "checkpoints").is_dir() else None
    if latest is not None:
        snapshots.append(latest)
    if not snapshots:
        raise FileNotFoundError(f"{run_dir}: no snapshots/step-* or checkpoints of `probing-lab train` to probe")
    exp = Experiment.load(args.experiments[0])
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) if args.out else probe_runs_dir() / f"{exp.name}-snapshots-{stamp}"
    out = output_folder(args, "probe --snapshots", names=("step-*", "emergence.md"), fresh=exp.name, out=out)
    results = []
    for i, snapshot in enumerate(snapshots):
        info = json.loads((snapshot / "info.json").read_text(encoding="utf-8"))
        log.info("snapshot %d/%d: %s (%s tokens)", i + 1, len(snapshots), snapshot, f"{info.get('tokens_seen', 0):,}")
        this = exp if i == 0 else dataclasses.replace(exp, random_init=False)  # one random-init baseline is enough
        run = run_experiment(
            this,
            model=str(snapshot),
            out=out / snapshot.name,
            data_dir=args.data_dir,
            progress=not args.quiet,
            log=log.info,
            force=args.force,
            workers=_workers(),
        )
        results.append((info.get("tokens_seen", 0), snapshot.name, run))
    results.sort(key=lambda r: r[0])
    keys = layer_order({k for _, _, run in results for k in run.layers})
    lines = [f"{exp.name} over training ({run_dir})", "", "| snapshot | tokens | " + " | ".join(keys) + " |"]
    lines.append("|---|---|" + "---|" * len(keys))
    for tokens, name, run in results:
        cells = [f"{run.layers[k].score:.4f}" if k in run.layers else "" for k in keys]
        lines.append(f"| {name} | {tokens:,} | " + " | ".join(cells) + " |")
    with atomic_path(out / "emergence.md") as tmp:
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


def add_probe_command(sub) -> None:
    p = sub.add_parser("probe", help="run probe experiments (probes/*.toml) into run directories")
    p.add_argument("experiments", nargs="*", help="experiment TOML file(s)")
    add_model_options(p, MODEL_HELP + "; or word2vec[:DIR], static vectors: one context-free layer", seed=False)
    add_output_folder(
        p,
        "run directory (default $PROBING_LAB_RUNS or runs/probes, then NAME-STAMP; a parent folder when several "
        "experiments are given)",
        required=False,
    )
    p.add_argument("--data-dir", help="datasets folder (default $PROBING_LAB_DATA)")
    p.add_argument(
        "--seeds",
        type=seed_list,
        help="e.g. 0,1,2: refit the probes with each seed on the same features (mean and sd beside the intervals)",
    )
    p.add_argument(
        "--snapshots", metavar="RUN", help="run the experiment on every snapshot of this training run (emergence)"
    )
    p.add_argument("--quiet", action="store_true")
    g = p.add_argument_group("your own file, without an experiment file (probe --data FILE --format FMT)")
    g.add_argument("--data", metavar="FILE", help="a labelled file, split 80/10/10 by sentence (seed 0)")
    g.add_argument("--format", choices=FORMATS, help="the file's format")
    g.add_argument("--label", help="conllu: upos (default), xpos, deprel, feats:NAME or misc:NAME")
    g.add_argument(
        "--task",
        help="default: token_label (conllu, tokens), wsd_centroid (wic), sentence_label (sentences), "
        "span_label (spans)",
    )
    g.add_argument("--layers", type=layer_list, help="e.g. 0,1,2,mix (default: the task's)")
    g.add_argument("--max-tokens", type=positive_int, help=f"refuse sentences longer than this (default {MAX_TOKENS})")
    p.set_defaults(func=cmd_probe)
