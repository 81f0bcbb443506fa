"""``probing-lab`` command line: ``app``, ``embed``, ``demo``, ``info``, ``corpus build|fetch-help``, ``train``,
``curves``, ``eval-lm``, ``export``, ``probe``, ``sweep``, ``report``, ``lm score|predict|agreement``, ``compare``,
``download``; ``probing-lab COMMAND --help`` for each."""

from __future__ import annotations

import argparse
import gc
import json
import logging
import sys
import time
from pathlib import Path

from .analysis.commands import add_compare_command
from .argtypes import positive_int
from .causal.commands import add_causal_commands
from .command_line import add_model_options, add_output_folder, run_command
from .corpus.commands import add_corpus_commands
from .download import add_download_command
from .lm.commands import add_lm_commands
from .probing.commands import add_probe_command
from .training.commands import add_training_commands

log = logging.getLogger("probing_lab")


def _add_model_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model (default: the shipped model)")
    add_model_options(g)
    g.add_argument("--options", help="released ELMo options.json (with --weights)")
    g.add_argument("--weights", help="released ELMo weights.hdf5 (with --options)")


def _threads(n: int | None) -> None:
    if n:
        import torch

        torch.set_num_threads(n)


def cmd_embed(args: argparse.Namespace) -> int:
    import h5py
    import numpy as np

    from .elmo import Embedder
    from .fileio import atomic_path, check_output
    from .model_loading import load_model
    from .text import read_sentence_file

    out = Path(args.output)
    if out.is_dir():  # found now, not after all the work
        raise IsADirectoryError(f"--output {out} is a directory; give a file name, e.g. {out / 'embeddings.hdf5'}")
    check_output(out, args.input, force=args.force)  # not the input, not an existing file without --force
    sentences = read_sentence_file(args.input, allow_empty=True)  # empty lines keep their index
    lines = Path(args.input).read_text(encoding="utf-8").splitlines()  # the keys of sentence_to_index
    empty = sum(1 for s in sentences if not s)
    if empty:
        log.warning("%d empty line(s): each gets a (layers, 0, dim) dataset so indices stay aligned", empty)
    loaded = load_model(args.model, args.options, args.weights, args.seed)
    elmo = Embedder(loaded.model, batch_size=args.batch_size, stateful=args.stateful, fused=args.fused)
    log.info("model %s: %d layers x %d dims; %d sentences", loaded.name, elmo.n_layers, elmo.dim, len(sentences))
    start = time.perf_counter()
    n_tokens = sum(len(s) for s in sentences)
    with atomic_path(out) as tmp:  # an interrupted run leaves no half-written file
        # each word's char CNN once for the whole file (Embedder.vocabulary_of)
        with h5py.File(tmp, "w") as f, elmo.vocabulary_of(sentences):
            # each batch is written as it comes: memory stays flat however long the input is
            for i, array in elmo.embed_iter(sentences, progress=not args.quiet):
                if not np.isfinite(array).all():  # the temporary file is removed: no output at all
                    raise ValueError(
                        f"{loaded.name} gives non-finite vectors (NaN or inf) for line {i + 1}: its weights are "
                        "broken (a diverged training run?); nothing was written"
                    )
                f.create_dataset(str(i), data=array)
            index = {line: str(i) for i, line in enumerate(lines)}
            f.create_dataset("sentence_to_index", data=[json.dumps(index)], dtype=h5py.string_dtype())
    seconds = time.perf_counter() - start
    log.info("wrote %s: %d tokens in %.1f s (%.0f tokens/s)", out, n_tokens, seconds, n_tokens / max(seconds, 1e-9))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    import numpy as np

    from .elmo import Embedder
    from .model_loading import load_model, shipped_model_dir

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

    # the same question measured on 16 sentences, against what the context words and an untrained
    # model of the same shape give (the baselines every sense number needs)
    from .analysis import collect, sense_baselines, sense_verdict
    from .analysis.polysemy import BANK_SENTENCES
    from .elmo import preset_of

    text, labels = [s for s, _ in BANK_SENTENCES], [label for _, label in BANK_SENTENCES]
    occ = collect(elmo, text, target="bank", labels=labels)
    preset = preset_of(loaded.model.options)
    random_occ = None
    if preset is not None:
        untrained = Embedder(load_model(f"random:{preset}", None, None, args.seed + 1).model)
        random_occ = collect(untrained, text, target="bank", labels=labels)
    table = sense_baselines(occ, random_occ)
    print("\nnearest-neighbour sense accuracy on 16 'bank' sentences (8 money, 8 river), leave one out")
    print(f"  {'layer':7}{'word vector':>13}{'bag of context':>16}{'random init':>13}{'chance':>8}")
    for k in ("0", "1", "2"):
        row = table[k]
        rand = "n/a" if row["random_nn"] is None else f"{row['random_nn']:.3f}"
        print(f"  L{k:6}{row['token_nn']:>13.3f}{row['context_nn']:>16.3f}{rand:>13}{row['chance']:>8.3f}")
    print(sense_verdict(table))
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from .model_loading import load_model

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


def cmd_report(args: argparse.Namespace) -> int:
    from .causal.report import is_causal_run
    from .causal.report import report as causal_report
    from .probing.runs import compare_report, report
    from .sweeps import GRID_FILE, sweep_report
    from .transfer.experiment import is_transfer_run
    from .transfer.experiment import report as transfer_report

    repeated = len(args.runs) - len({Path(r).resolve() for r in args.runs})
    if repeated:
        log.info("%d repeated run director%s: each run is listed once", repeated, "y" if repeated == 1 else "ies")
    runs = list(dict.fromkeys(args.runs))
    sweeps = [r for r in runs if (Path(r) / GRID_FILE).is_file()]  # a sweep folder: its results table
    runs = [r for r in runs if r not in sweeps]
    transfer = [r for r in runs if is_transfer_run(r)]
    causal = [r for r in runs if r not in transfer and is_causal_run(r)]
    probes = [r for r in runs if r not in transfer and r not in causal]
    if args.compare and len(probes) != 2:
        raise ValueError(f"--compare takes two probe runs on the same test set, got {len(probes)}")
    parts = [report(probes)] if probes else []
    if args.compare:
        parts.append(compare_report(*probes))
    parts += [transfer_report(transfer)] if transfer else []
    parts += [causal_report(causal)] if causal else []
    parts += [sweep_report(Path(r)) for r in sweeps]
    print("\n".join(parts), end="")
    return 0


def cmd_transfer(args: argparse.Namespace) -> int:
    from .transfer.experiment import run_transfer

    out = run_transfer(
        args.experiment,
        model=args.model,
        out=args.out,
        data_dir=args.data_dir,
        progress=not args.quiet,
        log=log.info,
        workers=args.workers,
        force=args.force,
    )
    print(out)
    return 0


def cmd_app(args: argparse.Namespace) -> int:
    import importlib.util

    from .paths import APP_DIR

    launch = APP_DIR / "launch.py"  # app/ of the checkout, or the copy a built install carries (paths.py)
    if not launch.is_file():
        raise FileNotFoundError(f"{launch}: the Streamlit app is missing from this checkout")
    spec = importlib.util.spec_from_file_location("probing_lab_app_launch", launch)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.run_app(
        port=args.port,
        model=args.model,
        allowed_roots=args.allowed_root,
        no_runs=args.no_runs,
        address=args.address,
        allow_runs=args.allow_runs,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="probing-lab", description="ELMo Probing Lab")
    parser.add_argument("--threads", type=positive_int, help="torch threads (default: torch's choice)")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("embed", help="embed sentences to an hdf5 file (structural-probes layout)")
    p.add_argument("--input", required=True, help="text file, one whitespace-tokenized sentence per line")
    p.add_argument("--output", required=True, help="hdf5 file: datasets '0', '1', ... of (layers, tokens, dim)")
    p.add_argument("--batch-size", type=positive_int, default=64)
    p.add_argument("--force", action="store_true", help="replace --output when it already exists")
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

    add_corpus_commands(sub)
    add_training_commands(sub)
    add_lm_commands(sub)
    add_compare_command(sub)
    add_download_command(sub)
    add_causal_commands(sub)
    from .attribution.commands import add_attribute_commands
    from .static.commands import add_word2vec_command  # word2vec: static vectors on the LM corpus
    from .sweeps.commands import add_sweep_command

    add_word2vec_command(sub)
    add_sweep_command(sub)
    add_attribute_commands(sub)

    add_probe_command(sub)

    p = sub.add_parser("app", help="start the Streamlit lab (on 127.0.0.1, or --address for a class)")
    p.add_argument("--port", type=int, help="default: a free port")
    p.add_argument("--model", help="checkpoint directory or random:PRESET (default: the shipped model)")
    p.add_argument(
        "--allowed-root",
        action="append",
        metavar="DIR",
        help="confine the app's path fields to DIR and the checkout (repeatable; $PROBING_LAB_ALLOWED_ROOTS)",
    )
    p.add_argument("--no-runs", action="store_true", help="hide the form that starts probe runs ($PROBING_LAB_NO_RUNS)")
    p.add_argument(
        "--address",
        default="127.0.0.1",
        help="listen here, e.g. 0.0.0.0 for a class network (then: paths confined, uploads capped, probe runs off "
        "unless --allow-runs, XSRF protection on); default 127.0.0.1",
    )
    p.add_argument("--allow-runs", action="store_true", help="with --address: let students start probe runs")
    p.set_defaults(func=cmd_app)

    p = sub.add_parser(
        "transfer", help="train task models on ELMo's layers vs static embeddings (transfer/*.toml; resumable)"
    )
    p.add_argument("experiment", help="a transfer experiment file, e.g. transfer/chunking_conll2000.toml")
    add_model_options(p, seed=False)
    add_output_folder(
        p,
        "run directory (default runs/transfer/NAME-STAMP); an interrupted one resumes",
        required=False,
        resumable=True,
    )
    p.add_argument("--data-dir", help="where UD, PTB and GUM live (default $PROBING_LAB_DATA)")
    p.add_argument("--workers", type=positive_int, default=1, help="cells trained at once, a process each")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_transfer)

    p = sub.add_parser(
        "report", help="probe runs -> one tasks x layers x models table; transfer and causal runs -> their tables"
    )
    p.add_argument("runs", nargs="+")
    p.add_argument(
        "--compare",
        action="store_true",
        help="two probe runs on the same test set: run A against run B per layer (paired bootstrap)",
    )
    p.set_defaults(func=cmd_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(message)s")
    _threads(args.threads)
    return run_command(args)


def command_line() -> int:
    """The ``probing-lab`` program: :func:`main` on the process's arguments, then, the work done, every
    object left out of the collection the interpreter makes as it exits, which walks them all (a probe
    run's sentences and tokens: millions) to free nothing: pos_ewt's exit 0.7 -> 0.2 s."""
    code = main()
    gc.freeze()
    return code


if __name__ == "__main__":
    sys.exit(command_line())
