"""Sweeps: a grid of probe experiments x models x seeds run as one job (``probing-lab sweep``).

Every cell is an ordinary probe run (``probing.experiment.run_experiment``) in its own folder
``OUT/EXPERIMENT--MODEL--seedS``, so ``probing-lab report`` and the app's Probes page read the cells
like any run; ``OUT/sweep.json`` records the grid, and ``OUT/results.md`` / ``results.json`` hold one
table: per experiment, model and layer the mean over seeds, their sd, and the mean 95% bootstrap
half-width of the cells (the test set's uncertainty beside the probe's).

- **Once per token**: before any cell runs, the activations of every (model, dataset split) the grid
  needs are extracted into the shared feature cache, one model at a time (``--cache-dir``, default
  the lab's feature cache); the cells then only read it, so a model's tokens are extracted once
  whatever the number of experiments and seeds that use them.
- **Resumable**: a cell whose folder holds a finished run is skipped; a sweep folder of another grid
  is refused.
- **Where cells run**: in this process (``workers=1``), in local processes (``workers > 1``, one
  torch thread each), or on a Ray cluster (``ray_address``; ``pip install 'probing-lab[cluster]'``)
  whose nodes all see ``OUT`` and the cache folder (a shared file system).

Each cell's experiment runs with ``random_init = false``: the random-init model is a model of the
grid (``random:PRESET``; the shipped model's shape is ``random:cpu-small-wide``), not a baseline
recomputed in every cell.
"""

from __future__ import annotations

import dataclasses
import json
import re
import socket
import sys
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from ..errors import MissingExtra
from ..fileio import atomic_path, check_output_dir
from ..probing.errors import ExperimentError
from ..probing.experiment import Experiment, run_experiment
from ..probing.runs import ProbeRun, layer_order
from ..stats import check_seeds, half_width

GRID_FILE = "sweep.json"
SHIPPED = "shipped"  # the model name of the lab's shipped model in a grid


class SweepError(ValueError):
    """A grid that cannot run, or a sweep folder of another grid."""


@dataclasses.dataclass(frozen=True)
class Cell:
    experiment: str  # the experiment file
    model: str
    seed: int

    @property
    def name(self) -> str:
        model = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(self.model).name if "/" in self.model else self.model)
        return f"{Path(self.experiment).stem}--{model}--seed{self.seed}"


@dataclasses.dataclass(frozen=True)
class Grid:
    experiments: list[str]
    models: list[str]
    seeds: list[int]

    def cells(self) -> list[Cell]:
        return [Cell(e, m, s) for e in self.experiments for m in self.models for s in self.seeds]

    def record(self) -> dict:
        return {"experiments": self.experiments, "models": self.models, "seeds": self.seeds}


def _model_arg(model: str) -> Optional[str]:
    return None if model == SHIPPED else model


def _experiment(cell: Cell) -> Experiment:
    exp = Experiment.load(cell.experiment)
    return dataclasses.replace(exp, seed=cell.seed, seeds=None, random_init=False)


def check_grid(experiments: list[str], models: list[str], seeds: list[int]) -> Grid:
    """The grid, every experiment file read and every model loaded once: an unknown one is refused
    here, before any work."""
    from ..model_loading import load_model

    if not experiments or not models:
        raise SweepError("a sweep needs at least one experiment and one model")
    try:
        seeds = check_seeds(list(seeds))
    except ValueError as e:
        raise SweepError(f"--seeds: {e}") from None
    resolved = []
    for path in experiments:
        try:
            Experiment.load(path)
        except ExperimentError as e:
            raise SweepError(f"experiment {path}: {e}") from None
        resolved.append(str(Path(path).resolve()))
    for model in models:
        try:
            load_model(_model_arg(model))
        except (FileNotFoundError, ValueError, KeyError) as e:
            raise SweepError(f"model {model!r}: {e.args[0] if e.args else e}") from None
    if len(set(models)) < len(models) or len(set(resolved)) < len(resolved):
        raise SweepError("a model or experiment is given twice; give each once")
    return Grid(resolved, list(models), seeds)


def _prepare_folder(out: Path, grid: Grid, force: bool) -> Path:
    """``out`` for this grid: new, or holding a sweep of the same grid (resumed); another grid's sweep
    and a folder of the user's own files are refused (with ``force``: a new subfolder for the latter)."""
    recorded = out / GRID_FILE
    if recorded.is_file():
        old = json.loads(recorded.read_text(encoding="utf-8"))
        if old != grid.record():
            raise SweepError(
                f"{out} holds a sweep of another grid ({len(old.get('experiments', []))} experiments x "
                f"{old.get('models')} x seeds {old.get('seeds')}); give another --out, or the same grid to resume it"
            )
        return out
    out = check_output_dir(out, command="sweep", force=force, fresh="sweep")
    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(recorded) as tmp:
        tmp.write_text(json.dumps(grid.record(), indent=2) + "\n", encoding="utf-8")
    return out


def extract_once(grid: Grid, data_dir, cache_dir, log: Callable[[str], None], workers: int = 1) -> int:
    """Every (model, split) the grid needs, extracted into the feature cache before the cells run,
    ``workers`` extractions at a time (``cache.extract_side_by_side``; the cache skips what it has);
    returns how many model x experiment pairs were prepared."""
    from ..features.cache import ElmoEncoder, extract_side_by_side
    from ..model_loading import load_model
    from ..paths import data_dir as resolve_data_dir
    from ..probing.experiment import experiment_sentences
    from ..probing.splits import extraction_jobs

    data_dir = resolve_data_dir(data_dir)[0]
    encoders = []
    for model in grid.models:
        loaded = load_model(_model_arg(model))
        encoders.append(ElmoEncoder(loaded.model, loaded.name))
    sentences = [experiment_sentences(Experiment.load(path), data_dir) for path in grid.experiments]
    log(f"features: {len(grid.experiments)} experiments x {len(encoders)} models, {workers} extraction(s) at once")
    jobs = [job for one in sentences for job in extraction_jobs(one, encoders)]
    extract_side_by_side(jobs, cache_dir, workers)
    return len(grid.experiments) * len(grid.models)


def run_cell(cell: Cell, out: Path, data_dir, cache_dir) -> dict:
    """One cell: its probe run in ``out/CELL`` (the features come from the cache); returns its scores."""
    run = run_experiment(
        _experiment(cell),
        model=_model_arg(cell.model),
        out=out / cell.name,
        data_dir=data_dir,
        cache_dir=cache_dir,
        progress=False,
        log=lambda m: None,
    )
    return {"cell": cell.name, "seconds": run.seconds}


def _local_worker(args) -> dict:
    import torch

    torch.set_num_threads(1)  # one core per worker: the workers fill the machine
    cell, out, data_dir, cache_dir = args
    return run_cell(cell, out, data_dir, cache_dir)


def _dead_address(address: str, why: str) -> SweepError:
    return SweepError(
        f"--ray {address}: no Ray cluster answers there ({why}); start one with `ray start --head` and give "
        "its address (HOST:6379, or ray://HOST:10001 for a Ray client), or leave out --ray to run on this machine"
    )


def _check_reachable(address: str) -> None:
    """A TCP connection to HOST:PORT within 5 s (Ray itself retries a dead address for minutes)."""
    if address == "auto":
        return
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=5).close()
    except (OSError, ValueError) as e:
        raise _dead_address(address, f"{type(e).__name__}: {e}") from None


def _ray_results(todo: list[Cell], out: Path, data_dir, cache_dir, address: str):
    try:
        import ray
    except ImportError:
        raise MissingExtra("--ray needs Ray: pip install 'probing-lab[cluster]'") from None
    if not ray.is_initialized():
        _check_reachable(address)
    try:
        if not ray.is_initialized():
            ray.init(address=address, log_to_driver=False)
    except Exception as e:  # noqa: BLE001 - Ray raises several kinds for an address that does not answer
        raise _dead_address(address, f"{type(e).__name__}: {e}") from None
    remote = ray.remote(num_cpus=1)(_local_worker)
    pending = [remote.remote((cell, out, data_dir, cache_dir)) for cell in todo]
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        yield ray.get(done[0])


def run_sweep(
    experiments: list[str],
    models: list[str],
    seeds: list[int],
    out: str | Path,
    workers: int = 1,
    ray_address: Optional[str] = None,
    data_dir=None,
    cache_dir=None,
    force: bool = False,
    log: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
    progress: bool = True,
) -> dict:
    """Run (or resume) the grid into ``out``; returns the results table (also ``results.json``)."""
    grid = check_grid(experiments, models, seeds)
    out = _prepare_folder(Path(out), grid, force)
    cells = grid.cells()
    todo = [c for c in cells if not (out / c.name / "metrics.json").is_file()]
    log(f"sweep: {len(cells)} cells ({len(cells) - len(todo)} done), {len(grid.models)} models")
    if todo:
        needed = Grid(sorted({c.experiment for c in todo}), grid.models, grid.seeds)
        extract_once(needed, data_dir, cache_dir, log, workers=workers)
    start = time.perf_counter()
    if ray_address:
        results = _ray_results(todo, out, data_dir, cache_dir, ray_address)
    elif workers > 1 and len(todo) > 1:
        import multiprocessing

        pool = multiprocessing.get_context("spawn").Pool(min(workers, len(todo)))
        results = pool.imap_unordered(_local_worker, [(c, out, data_dir, cache_dir) for c in todo])
    else:
        results = (run_cell(c, out, data_dir, cache_dir) for c in todo)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), desc="sweep cells", unit="cell")
    for i, result in enumerate(results, 1):
        left = (time.perf_counter() - start) / i * (len(todo) - i) / 60
        log(f"  [{i}/{len(todo)}] {result['cell']} ({result['seconds']:.0f} s; about {left:.0f} min left)")
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    table = results_table(out, grid)
    with atomic_path(out / "results.json") as tmp:
        tmp.write_text(json.dumps(table, indent=2) + "\n", encoding="utf-8")
    with atomic_path(out / "results.md") as tmp:
        tmp.write_text(results_markdown(table), encoding="utf-8")
    return table


def results_table(out: Path, grid: Grid) -> dict:
    """Per experiment, model and layer: the scores over seeds, their mean and sd, and the mean
    bootstrap half-width of the cells."""
    rows = []
    for experiment in grid.experiments:
        for model in grid.models:
            runs = [ProbeRun.load(out / Cell(experiment, model, s).name) for s in grid.seeds]
            layers = {}
            for key in layer_order(runs[0].layers):
                scores = [r.layers[key].score for r in runs]
                halves = [half_width(r.layers[key].ci95) for r in runs if r.layers[key].ci95]
                layers[key] = {
                    "scores": scores,
                    "mean": float(np.mean(scores)),
                    "sd": float(np.std(scores, ddof=1)) if len(scores) > 1 else 0.0,
                    "ci_half_width": float(np.mean(halves)) if halves else None,
                }
            rows.append({"experiment": runs[0].experiment, "model": model, "task": runs[0].task, "layers": layers})
    return {"grid": grid.record(), "rows": rows}


def results_markdown(table: dict) -> str:
    """The results as a markdown table: ``mean ±sd (±ci)`` per layer."""
    keys = layer_order({k for row in table["rows"] for k in row["layers"]})
    n = len(table["grid"]["seeds"])
    lines = [
        f"Mean over {n} seed(s) ±sd of the seeds (±half-width of the cells' 95% bootstrap interval):",
        "",
        "| experiment | model | " + " | ".join(keys) + " |",
        "|---|---|" + "---|" * len(keys),
    ]
    for row in table["rows"]:
        cells = []
        for k in keys:
            e = row["layers"].get(k)
            ci = "" if e is None or e["ci_half_width"] is None else f" (±{e['ci_half_width']:.3f})"
            cells.append("" if e is None else f"{e['mean']:.3f} ±{e['sd']:.3f}{ci}")
        lines.append(f"| {row['experiment']} | {row['model']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def sweep_report(out: Path) -> str:
    """A sweep folder's results table (``probing-lab report OUT``), recomputed from its finished cells."""
    record = json.loads((out / GRID_FILE).read_text(encoding="utf-8"))
    grid = Grid(record["experiments"], record["models"], record["seeds"])
    missing = [c.name for c in grid.cells() if not (out / c.name / "metrics.json").is_file()]
    if missing:
        raise SweepError(f"{out}: {len(missing)} cell(s) not finished yet ({missing[0]}, ...); rerun the sweep")
    return f"sweep {out}\n\n" + results_markdown(results_table(out, grid))
