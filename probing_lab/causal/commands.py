"""``probing-lab causal amnesic``: remove a property from the biLM's layers and measure the LM."""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from ..argtypes import positive_int

log = logging.getLogger("probing_lab")


def _sites(layers: str, directions: str) -> list[tuple[int, str]]:
    try:
        numbers = [int(k) for k in layers.split(",") if k.strip()]
    except ValueError:
        raise ValueError(f"--layers {layers!r}: expected layer numbers such as 0,1,2") from None
    chosen = [d.strip() for d in directions.split(",") if d.strip()]
    bad = [d for d in chosen if d not in ("forward", "backward")]
    if bad or not chosen or not numbers:
        raise ValueError(f"--directions {directions!r}: expected forward, backward or forward,backward")
    return [(k, d) for k in numbers for d in chosen]


def summary_table(runs: list[dict]) -> str:
    """Amnesic runs -> a markdown table, one row per site."""
    lines = [
        "| property | site | rank | probe before | probe after | majority | ppl before | ppl after | "
        "ppl random (mean of draws) | agreement before / after (overall) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for m in runs:
        random = sum(m["ppl_after_random"]) / max(len(m["ppl_after_random"]), 1)
        agreement = ""
        if "agreement" in m:
            agreement = f"{m['agreement']['before']['overall']:.3f} / {m['agreement']['after']['overall']:.3f}"
        lines.append(
            f"| {m['property']} | L{m['layer']} {m['direction']} | {m['rank']} | {m['probe_before']:.3f} | "
            f"{m['probe_after']:.3f} | {m['majority']:.3f} | {m['ppl_before']:.1f} | {m['ppl_after']:.1f} | "
            f"{random:.1f} | {agreement} |"
        )
    return "\n".join(lines) + "\n"


def cmd_causal_amnesic(args: argparse.Namespace) -> int:
    from ..fileio import atomic_directory, check_output_dir
    from ..lm.model import load_language_model
    from ..paths import data_dir
    from .amnesic import AmnesicConfig, AmnesicData, amnesic_site

    sites = _sites(args.layers, args.directions)
    check_output_dir(args.out, force=args.force)
    config = AmnesicConfig(
        property=args.property,
        train_sentences=args.train_sentences,
        dev_sentences=args.dev_sentences,
        eval_sentences=args.eval_sentences,
        iterations=args.iterations,
        random_draws=args.random_draws,
        agreement_pairs=args.agreement_pairs,
    )
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
    with atomic_directory(args.out) as tmp:
        for m in runs:
            site = Path(tmp) / f"{m['property']}-L{m['layer']}-{m['direction']}"
            site.mkdir()
            (site / "metrics.json").write_text(json.dumps(m, indent=2) + "\n", encoding="utf-8")
        (Path(tmp) / "summary.md").write_text(summary_table(runs), encoding="utf-8")
    print(summary_table(runs), end="")
    log.info("wrote %s", args.out)
    return 0


def add_causal_commands(sub) -> None:
    p = sub.add_parser("causal", help="causal analysis: amnesic probing (INLP inside the biLM)")
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
    a.add_argument("--model", help="model directory with a softmax (default: the shipped model)")
    a.add_argument("--data-dir", help="where UD English-EWT lives (default $PROBING_LAB_DATA)")
    a.add_argument("--out", required=True, help="run folder: one sub-folder with metrics.json per site")
    a.add_argument("--force", action="store_true", help="replace --out")
    a.add_argument("--quiet", action="store_true")
    a.set_defaults(func=cmd_causal_amnesic)
