"""``probing-lab sweep``: a grid of probe experiments x models x seeds (see :mod:`probing_lab.sweeps`)."""

from __future__ import annotations

import argparse
import logging

from ..argtypes import positive_int, seed_list
from ..command_line import add_output_folder, from_args

log = logging.getLogger("probing_lab")


def cmd_sweep(args: argparse.Namespace) -> int:
    from . import results_markdown, run_sweep

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    table = from_args(run_sweep, args, models=models, ray_address=args.ray, log=log.info, progress=not args.quiet)
    print(results_markdown(table), end="")
    return 0


def add_sweep_command(sub) -> None:
    p = sub.add_parser(
        "sweep",
        help="a grid of probe experiments x models x seeds as one job (resumable; local processes or Ray)",
        description="Every cell is a probe run in OUT/EXPERIMENT--MODEL--seedS; OUT/results.md holds the table. "
        "Features are extracted once per model before the cells run; a rerun skips finished cells.",
    )
    p.add_argument("experiments", nargs="+", help="experiment files, e.g. probes/pos_ewt.toml")
    p.add_argument(
        "--models",
        default="shipped",
        help="comma-separated: shipped, model folders, random:PRESET (the shipped model's shape: "
        "random:cpu-small-wide); default shipped",
    )
    p.add_argument("--seeds", type=seed_list, default=[0], help="e.g. 0,1,2 (default 0)")
    add_output_folder(p, "the sweep folder (a rerun with the same grid resumes it)")
    p.add_argument("--workers", type=positive_int, default=1, help="cells run at once, a process each (one thread)")
    p.add_argument("--ray", metavar="ADDRESS", help="run the cells on this Ray cluster (e.g. ray://head:10001)")
    p.add_argument("--data-dir", help="datasets folder (default $PROBING_LAB_DATA)")
    p.add_argument("--cache-dir", help="the shared feature cache (default $PROBING_LAB_CACHE or ~/.cache)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_sweep)
