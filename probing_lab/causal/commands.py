"""``probing-lab causal amnesic | units | patch``: remove a property from the biLM's layers and
measure the LM; find the units that carry subject number; patch activations between minimal pairs."""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from ..argtypes import positive_int
from ..command_line import add_model_options, add_output_folder, from_args, output_folder
from .report import summary_table, units_summary

log = logging.getLogger("probing_lab")


def _directions(value: str) -> list[str]:
    chosen = [d.strip() for d in value.split(",") if d.strip()]
    if not chosen or any(d not in ("forward", "backward") for d in chosen):
        raise ValueError(f"--directions {value!r}: expected forward, backward or forward,backward")
    return chosen


def _sites(layers: str, directions: str) -> list[tuple[int, str]]:
    try:
        numbers = [int(k) for k in layers.split(",") if k.strip()]
    except ValueError:
        numbers = []
    if not numbers:
        raise ValueError(f"--layers {layers!r}: expected layer numbers such as 0,1,2")
    return [(k, d) for k in numbers for d in _directions(directions)]


# the files of each command's run folder (how a run written before fileio's run marker is recognised)
RUN_FILES = {
    "amnesic": ("*-L*-forward", "*-L*-backward", "summary.md"),
    "units": ("metrics.json", "summary.md", "units.png"),
    "patch": ("metrics.json", "*.png"),
}


def cmd_causal_amnesic(args: argparse.Namespace) -> int:
    from ..fileio import atomic_directory
    from ..lm.language_model import load_language_model
    from ..paths import data_dir
    from .amnesic import AmnesicConfig, AmnesicData, amnesic_site

    sites = _sites(args.layers, args.directions)
    out = output_folder(args, "causal amnesic", names=RUN_FILES["amnesic"])
    config = from_args(AmnesicConfig, args)
    lm = load_language_model(args.model)
    bad = [k for k, _ in sites if not 0 <= k < lm.bilm.n_layers]
    if bad:
        raise ValueError(f"--layers: {bad} do not exist; the model has layers 0-{lm.bilm.n_layers - 1}")
    start = time.perf_counter()
    data = AmnesicData(lm, config, data_dir(args.data_dir)[0], progress=not args.quiet)
    runs = []
    for i, (layer, direction) in enumerate(sites):
        runs.append({**amnesic_site(data, layer, direction, log=log.info), "model": lm.name})
        spent = time.perf_counter() - start
        log.info(
            "site %d of %d done; about %.0f min left", i + 1, len(sites), spent / (i + 1) * (len(sites) - i - 1) / 60
        )
    with atomic_directory(out, command="causal amnesic") as tmp:
        for m in runs:
            site = Path(tmp) / f"{m['property']}-L{m['layer']}-{m['direction']}"
            site.mkdir()
            (site / "metrics.json").write_text(json.dumps(m, indent=2) + "\n", encoding="utf-8")
        (Path(tmp) / "summary.md").write_text(summary_table(runs), encoding="utf-8")
    print(summary_table(runs), end="")
    log.info("wrote %s", out)
    return 0


def cmd_causal_units(args: argparse.Namespace) -> int:
    from ..fileio import atomic_directory
    from ..lm.language_model import load_language_model
    from .units import UnitsConfig, number_units, save_units_figure

    directions = _directions(args.directions)
    out = output_folder(args, "causal units", names=RUN_FILES["units"])
    config = from_args(
        UnitsConfig, args, pairs_per_construction=args.pairs, rank_pairs_per_construction=args.rank_pairs
    )
    lm = load_language_model(args.model)
    config.check(lm.bilm.options.lstm_dim, lm.bilm.n_layers - 1)
    bar = _progress_bar(args.quiet, "units")
    start = time.perf_counter()
    metrics = number_units(lm, _read_pairs(args.pairs_file), config, directions, log=log.info, on_progress=bar)
    metrics["seconds"] = round(time.perf_counter() - start, 1)
    with atomic_directory(out, command="causal units") as tmp:
        (Path(tmp) / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
        (Path(tmp) / "summary.md").write_text(units_summary(metrics), encoding="utf-8")
        save_units_figure(metrics, Path(tmp) / "units.png")
    print(units_summary(metrics), end="")
    log.info("wrote %s in %.0f s", out, metrics["seconds"])
    return 0


def cmd_causal_patch(args: argparse.Namespace) -> int:
    from ..fileio import atomic_directory
    from ..lm.language_model import load_language_model
    from .patching import patch_construction, save_heatmap

    directions = _directions(args.directions)
    constructions = [c.strip() for c in args.constructions.split(",") if c.strip()]
    pairs = _read_pairs(args.pairs_file)
    known = sorted({p.construction for p in pairs})
    bad = [c for c in constructions if c not in known]
    if bad or not constructions:
        raise ValueError(f"--constructions: unknown {bad or constructions}; the pairs have {known}")
    out = output_folder(args, "causal patch", names=RUN_FILES["patch"])
    lm = load_language_model(args.model)
    start = time.perf_counter()
    results, metrics = {}, {"kind": "patch", "model": lm.name, "constructions": {}}
    for construction in constructions:
        for direction in directions:
            bar = _progress_bar(args.quiet, f"{construction} {direction}")
            r = patch_construction(lm, pairs, construction, direction, args.pairs, on_progress=bar)
            results[(construction, direction)] = r
            metrics["constructions"].setdefault(construction, {})[direction] = {
                "pairs": r.pairs,
                "tokens": r.tokens,
                "clean": r.clean,
                "changed": list(r.changed),
                "corrupt": r.corrupt,
                "effect": [[None if v != v else round(float(v), 4) for v in row] for row in r.effect],
            }
    metrics["seconds"] = round(time.perf_counter() - start, 1)
    with atomic_directory(out, command="causal patch") as tmp:
        (Path(tmp) / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
        for construction in constructions:
            save_heatmap(
                [results[(construction, d)] for d in directions],
                f"Activation patching, {construction.replace('_', ' ')}: {lm.name}",
                Path(tmp) / f"{construction}.png",
            )
    log.info("wrote %s in %.0f s", out, metrics["seconds"])
    print(out)
    return 0


def _read_pairs(path):
    """The minimal pairs of ``--pairs-file`` (JSON lines as data/agreement/subject_verb.jsonl), or the lab's."""
    from ..lm.agreement import read_pairs

    return read_pairs(path) if path else read_pairs()


def _progress_bar(quiet: bool, what: str):
    """``on_progress(fraction)`` drawing a tqdm bar (None when quiet)."""
    if quiet:
        return None
    from tqdm import tqdm

    bar = tqdm(total=1000, desc=what, unit="‰")

    def update(fraction: float) -> None:
        bar.update(int(fraction * 1000) - bar.n)
        if fraction >= 1:
            bar.close()

    return update


LM_HELP = "model directory with a softmax (default: the shipped model)"


def add_causal_commands(sub) -> None:
    p = sub.add_parser("causal", help="causal analysis: amnesic probing, number units, activation patching")
    causal = p.add_subparsers(dest="causal_command", required=True)
    a = causal.add_parser("amnesic", help="remove a property (INLP) from layers of the biLM and measure the LM")
    a.add_argument("--property", choices=("upos", "number"), default="upos")
    a.add_argument("--layers", default="0,1,2", help="e.g. 0,1,2")
    a.add_argument("--directions", default="forward,backward")
    a.add_argument("--train-sentences", type=positive_int, default=2000, help="EWT train sentences for INLP")
    a.add_argument("--dev-sentences", type=positive_int, default=500)
    a.add_argument("--eval-sentences", type=positive_int, default=300, help="EWT test sentences the LM is scored on")
    a.add_argument("--iterations", type=positive_int, default=20, help="INLP iterations at most")
    a.add_argument("--random-draws", type=positive_int, default=5, help="random subspaces of the same rank")
    a.add_argument("--agreement-pairs", type=int, default=0, help="number: pairs per construction (0: all)")
    add_model_options(a, LM_HELP, seed=False)
    a.add_argument("--data-dir", help="where UD English-EWT lives (default $PROBING_LAB_DATA)")
    add_output_folder(a, "run folder: one sub-folder with metrics.json per site")
    a.add_argument("--quiet", action="store_true")
    a.set_defaults(func=cmd_causal_amnesic)

    u = causal.add_parser("units", help="rank LSTM units by a diagnostic classifier of subject number, ablate the top")
    u.add_argument("--pairs", type=positive_int, default=40, help="pairs per construction scored per ablation")
    u.add_argument("--rank-pairs", type=int, default=0, help="pairs per construction for the classifier (0: the rest)")
    u.add_argument("--top", type=positive_int, default=50, help="top units ablated one by one, per direction")
    u.add_argument("--random-units", type=positive_int, default=50, help="random units ablated as the control")
    u.add_argument("--joint", type=positive_int, default=10, help="top units ablated together (and as many random)")
    u.add_argument("--directions", default="forward,backward")
    u.add_argument("--pairs-file", help="minimal pairs as JSON lines (default: data/agreement/subject_verb.jsonl)")
    u.add_argument("--seed", type=int, default=0)
    add_model_options(u, LM_HELP, seed=False)
    add_output_folder(u, "run folder: metrics.json, summary.md, units.png")
    u.add_argument("--quiet", action="store_true")
    u.set_defaults(func=cmd_causal_units)

    c = causal.add_parser("patch", help="activation patching between minimal pairs: a layer x position heatmap")
    c.add_argument("--constructions", default="simple,prepositional_phrase")
    c.add_argument("--directions", default="forward,backward")
    c.add_argument("--pairs", type=positive_int, default=40, help="pairs per construction at most")
    c.add_argument("--pairs-file", help="minimal pairs as JSON lines (default: data/agreement/subject_verb.jsonl)")
    add_model_options(c, LM_HELP, seed=False)
    add_output_folder(c, "run folder: metrics.json and one heatmap PNG per construction")
    c.add_argument("--quiet", action="store_true")
    c.set_defaults(func=cmd_causal_patch)
