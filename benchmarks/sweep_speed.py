"""A sweep's grid run three ways on one machine, measured in one run: one worker, two local worker
processes, and a local Ray (``ray.init(num_cpus=2)``), with the same results required of all three.

    python benchmarks/sweep_speed.py [--experiments A.toml,B.toml,C.toml]
        [--models shipped,data/models/elmo-lab-early,random:cpu-small-wide] [--seeds 0,1]

The feature cache (a temporary folder, or ``--cache-dir``) is filled once first (timed apart); the
three timed sweeps then only fit probes, so their times compare the workers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_EXPERIMENTS = "probes/subj_number_ewt.toml,probes/tense_ewt.toml,probes/sentence_length_ewt.toml"
DEFAULT_MODELS = "shipped,data/models/elmo-lab-early,random:cpu-small-wide"


def scores(out: Path) -> dict:
    """Every cell's per-layer test scores (what must agree between the three ways)."""
    table = {}
    for metrics in sorted(out.glob("*/metrics.json")):
        m = json.loads(metrics.read_text())
        table[metrics.parent.name] = {k: v["score"] for k, v in m["layers"].items()}
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--experiments", default=DEFAULT_EXPERIMENTS)
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument(
        "--cache-dir", help="the feature cache (default: a new, empty one); a warm one skips extraction"
    )
    args = parser.parse_args()
    import torch

    from probing_lab.sweeps import run_sweep

    torch.set_num_threads(2)
    experiments = args.experiments.split(",")
    models = args.models.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    quiet = {"log": lambda m: None, "progress": False}
    with tempfile.TemporaryDirectory(prefix="sweep-speed-") as tmp:
        tmp = Path(tmp)
        cache = Path(args.cache_dir).expanduser() if args.cache_dir else tmp / "cache"
        os.environ["PROBING_LAB_CACHE"] = str(cache)  # the worker processes read it too
        from probing_lab.sweeps import Grid, check_grid, extract_once

        grid = check_grid(experiments, models, seeds)
        start = time.perf_counter()
        extract_once(Grid(grid.experiments, grid.models, grid.seeds), None, cache, lambda m: None, workers=2)
        extraction = time.perf_counter() - start
        n_cells = len(grid.cells())
        print(f"{len(experiments)} experiments x {len(models)} models x {len(seeds)} seeds = {n_cells} cells")
        print(f"  extraction, once per model     {extraction:7.1f} s (two models side by side)")
        ways = [("1 worker", {"workers": 1}), ("2 local workers", {"workers": 2})]
        if not args.no_ray:
            ways.append(("local Ray, 2 CPUs", {"ray_address": "auto"}))
        results, times = {}, {}
        for name, how in ways:
            if "ray_address" in how:
                import ray

                ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            start = time.perf_counter()
            run_sweep(experiments, models, seeds, tmp / name.replace(" ", "_"), cache_dir=cache, **how, **quiet)
            times[name] = time.perf_counter() - start
            if "ray_address" in how:
                ray.shutdown()
            results[name] = scores(tmp / name.replace(" ", "_"))
            print(f"  {name:<30} {times[name]:7.1f} s   ({times[name] / n_cells:.1f} s per cell)")
            sys.stdout.flush()
        first = next(iter(results.values()))
        for name, table in results.items():
            same = table == first
            print(f"  {name}: {'the same scores as' if same else 'DIFFERENT scores from'} {ways[0][0]} in every cell")
        base = times[ways[0][0]]
        for name, t in list(times.items())[1:]:
            print(f"  speed-up of {name} over {ways[0][0]}: {base / t:.2f}x")


if __name__ == "__main__":
    main()
