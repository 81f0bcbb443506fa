"""Transfer experiments: one TOML file -> a run directory with every cell and ``metrics.json``.

Experiment file (see ``transfer/*.toml``)::

    name = "chunking_conll2000"
    task = "chunking"                 # chunking | entities | upos (transfer.data), or token_label with:
    [dataset]                         # your own files: format = "tokens" | "conllu", train, dev, test
                                      # (relative to this file), label (conllu), metric = "accuracy" | "f1"
    inputs = ["static", "elmo", "elmo_top", "elmo_l0", "elmo_random"]
    fractions = [0.01, 0.1, 1.0]      # of the training sentences (seeded per seed, the same for every input)
    seeds = [0, 1, 2]
    [tagger]                          # TaggerConfig: hidden, static_dim, dropout, lr, batch_size, ...

Inputs (each next to the static word embedding, except ``static`` which is that alone):
``elmo`` a learned scalar mix of all layers; ``elmo_top`` the top layer; ``elmo_l0`` the type layer
(context-free ELMo); ``elmo_random`` the scalar mix over a random-init model of the same shape.

``run_transfer(path_or_dict, model=None, out=None)`` extracts each split's layers once (the activation
cache), then trains one tagger per cell (input x fraction x seed), appending each finished cell to
``cells.jsonl``: an interrupted run resumes with the cells not done (same ``--out``), and gives the
same numbers as one run (each cell is seeded on its own). ``metrics.json``::

    {"task", "metric": "f1" | "accuracy", "experiment", "model",
     "cells": [{"input", "fraction", "seed", "dev", "test", "epochs", "updates", "seconds", "mix_weights"}],
     "mix_weights": {"<input>": [s0, s1, s2]},   # softmax(s), mean over the seeds at the largest fraction
     "summary": {"<input>": {"<fraction>": {"mean", "std", "n"}}},
     "error_reduction": {"<fraction>": relative error reduction of elmo over static (Peters et al.'s table)},
     "unseen_test_labels", "train_sentences": {"<fraction>": n}, "seconds"}
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch

from ..features.cache import ElmoEncoder, extract_features
from ..fileio import atomic_path, check_inside, check_output_dir
from ..settings import experiment_of
from .config import INPUTS, TransferError, TransferExperiment  # noqa: F401 (the public names)
from .data import METRIC, check_labels, load_files, load_task, subset  # noqa: F401 (load_files: E.load_files in tests)
from .report import error_reduction, summarize
from .tagger import ElmoBatch, predict, score, train_tagger

RUN_FILES = ("experiment.json", "cells.jsonl", "metrics.json")  # a transfer run directory's files


class TokenLayers:
    """A split's cached layers held in memory as ``(n_tokens, n_layers, dim)``, so that a batch is a
    few contiguous copies (gathering from the cache's memory map was a fifth of the training time)."""

    def __init__(self, features):
        self.rows = np.ascontiguousarray(np.moveaxis(np.asarray(features.layers), 0, 1))
        self.offsets = features.offsets

    def batches(self, layers: list[int], sentences: np.ndarray) -> ElmoBatch:
        """``idx -> (B, T, len(layers), dim)``: the rows of ``sentences[idx]``, padded with zeros."""
        rows, offsets = self.rows, self.offsets
        every = layers == list(range(rows.shape[1]))

        def batch(idx) -> torch.Tensor:
            chosen = sentences[np.asarray(idx)]
            lengths = offsets[chosen + 1] - offsets[chosen]
            out = np.zeros((len(chosen), int(lengths.max()), len(layers), rows.shape[2]), dtype=np.float32)
            for row, i in enumerate(chosen):
                span = rows[offsets[i] : offsets[i + 1]]
                out[row, : lengths[row]] = span if every else span[:, layers]
            return torch.from_numpy(out)

        return batch


def _layers(name: str, n_layers: int) -> list[int]:
    return {"elmo_top": [n_layers - 1], "elmo_l0": [0]}.get(name, list(range(n_layers)))


def _static_vectors(exp: TransferExperiment) -> Optional[Callable]:
    """``words -> (n, dim)`` rows of the experiment's static vectors (NaN: none), or None."""
    if exp.static_vectors is None:
        return None
    from ..static import StaticVectors

    try:
        vectors = StaticVectors.load(exp.static_vectors)
    except (FileNotFoundError, ValueError) as e:
        raise TransferError(f"{exp.name}: static_vectors: {e}") from None
    if vectors.dim != exp.config().static_dim:
        raise TransferError(
            f"{exp.name}: the static vectors in {exp.static_vectors} have {vectors.dim} dimensions but "
            f"[tagger] static_dim is {exp.config().static_dim}; set static_dim = {vectors.dim}"
        )
    return lambda words: vectors.table(list(words))


def _summary(cells: list[dict], exp: TransferExperiment) -> dict:
    """``{input: {fraction: {mean, std, n}}}`` of the test scores (``report.summarize``'s rows)."""
    out: dict = {}
    fractions = {float(f) for f in exp.fractions}
    for row in summarize(cells):
        if row["input"] in exp.inputs and row["fraction"] in fractions:
            out.setdefault(row["input"], {})[str(row["fraction"])] = {k: row[k] for k in ("mean", "std", "n")}
    return out


def _error_reduction(summary: dict, metric: str) -> dict:
    """Relative error reduction of ``elmo`` over ``static`` per fraction (``report.error_reduction``)."""
    out = {}
    for f, s in summary.get("static", {}).items():
        e = summary.get("elmo", {}).get(f)
        reduction = error_reduction(s["mean"], e["mean"]) if e else None
        if reduction is not None:
            out[f] = reduction
    return out


def _mix_weights(cells: list[dict], exp: TransferExperiment) -> dict:
    largest = float(max(exp.fractions))
    out = {}
    for name in exp.inputs:
        weights = [c["mix_weights"] for c in cells if c["input"] == name and c["fraction"] == largest]
        weights = [w for w in weights if w]
        if weights:
            out[name] = np.mean(weights, axis=0).tolist()
    return out


def _read_cells(path: Path) -> list[dict]:
    """The finished cells of an interrupted run (a line cut by the interruption is dropped)."""
    cells = []
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                cells.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return cells


def _prepare_run_dir(run_dir: Path, exp: TransferExperiment, model_name: str) -> list[dict]:
    """Create the run directory, or check that it holds a run of this experiment and model; the
    cells already done."""
    record = {"experiment": asdict(exp), "model": model_name}
    meta = run_dir / "experiment.json"
    if meta.is_file():
        old = json.loads(meta.read_text(encoding="utf-8"))
        if old != record:
            raise TransferError(
                f"{run_dir} holds a run of another experiment or model ({old.get('model')}); "
                "choose another --out, or delete it to start over"
            )
        if (run_dir / "metrics.json").is_file():
            raise TransferError(f"{run_dir} already holds a finished transfer run (metrics.json); choose another --out")
    run_dir.mkdir(parents=True, exist_ok=True)
    with atomic_path(meta) as tmp:
        tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return _read_cells(run_dir / "cells.jsonl")


@dataclass
class _Grid:
    """What every cell of a run shares: the sets, each split's layers (model and random-init), the
    tagger's settings; :meth:`cell` trains and scores one cell."""

    exp: TransferExperiment
    sets: dict
    metric: str
    features: dict
    n_layers: int
    dim: int
    vectors: Optional[Callable]
    log: Callable[[str], None]

    @classmethod
    def prepare(cls, exp, loaded, sets, metric, data_dir, cache_dir, progress, log) -> "_Grid":
        from ..elmo import ElmoBiLM

        encoders = {"model": ElmoEncoder(loaded.model, loaded.name)}
        if "elmo_random" in exp.inputs:
            random_model = ElmoBiLM(loaded.model.options)
            random_model.reset_parameters(torch.Generator().manual_seed(0))
            encoders["random"] = ElmoEncoder(random_model, "random-init")
        features = {
            (kind, role): TokenLayers(extract_features(enc, sets[role].words, cache_dir=cache_dir, progress=progress))
            for kind, enc in encoders.items()
            for role in ("train", "dev", "test")
        }
        n_layers, dim = encoders["model"].n_layers, encoders["model"].dim
        return cls(exp, sets, metric, features, n_layers, dim, _static_vectors(exp), log)

    def cell(self, name: str, fraction: float, seed: int) -> dict:
        t0 = time.perf_counter()
        sets = self.sets
        chosen = subset(sets["train"], fraction, seed)
        train = sets["train"].take(chosen)
        elmo = {}
        if name != "static":
            kind, layers = ("random" if name == "elmo_random" else "model"), _layers(name, self.n_layers)
            elmo = {
                "train": self.features[(kind, "train")].batches(layers, chosen),
                "dev": self.features[(kind, "dev")].batches(layers, np.arange(len(sets["dev"]))),
                "test": self.features[(kind, "test")].batches(layers, np.arange(len(sets["test"]))),
            }
        trained = train_tagger(
            train,
            sets["dev"],
            self.exp.config(),
            self.metric,
            seed,
            elmo.get("train"),
            elmo.get("dev"),
            (len(_layers(name, self.n_layers)), self.dim),
            self.vectors,
            log=self.log,
        )
        predicted = predict(trained.model, trained.vocabulary, sets["test"].words, elmo.get("test"))
        return {
            "input": name,
            "fraction": fraction,
            "seed": seed,
            "train_sentences": len(train),
            "dev": trained.dev_score,
            "test": score(self.metric, sets["test"].tags, predicted),
            "epochs": trained.epochs,
            "updates": trained.updates,
            "dev_history": trained.history,
            "mix_weights": trained.mix_weights(),
            "stopped": trained.stopped,
            "seconds": round(time.perf_counter() - t0, 1),
        }


def _load_sets(exp: TransferExperiment, data_dir) -> tuple[dict, str]:
    if exp.dataset is None:
        return load_task(exp.task, data_dir), METRIC[exp.task]
    try:
        return load_files(exp.dataset)
    except ValueError as e:
        raise TransferError(f"{exp.name}: {e}") from None


_WORKER_GRID: Optional[_Grid] = None  # a worker process's own copy, made once by _start_worker


def _start_worker(exp: dict, model: Optional[str], data_dir, cache_dir) -> None:
    """A worker (spawned, one thread): the same grid, its layers read from the feature cache that the
    parent has filled."""
    from ..model_loading import load_model

    global _WORKER_GRID
    torch.set_num_threads(1)
    experiment = TransferExperiment.from_dict(exp)
    sets, metric = _load_sets(experiment, data_dir)
    log = lambda m: print(m, file=sys.stderr)  # noqa: E731
    _WORKER_GRID = _Grid.prepare(experiment, load_model(model), sets, metric, data_dir, cache_dir, False, log)


def _worker_cell(key: tuple) -> dict:
    return _WORKER_GRID.cell(*key)


def run_transfer(
    experiment: str | Path | dict | TransferExperiment,
    model: Optional[str] = None,
    out: Optional[str | Path] = None,
    data_dir: Optional[str | Path] = None,
    cache_dir: Optional[str | Path] = None,
    progress: bool = True,
    log: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
    on_progress: Optional[Callable[[float, str], None]] = None,
    workers: int = 1,
    force: bool = False,
) -> Path:
    """Run (or resume) a transfer experiment; returns the run directory. ``workers`` > 1 trains
    that many cells at once, each in its own process with one thread (the same numbers: each cell
    is seeded on its own). ``force``: a folder ``out`` that holds other files gets the run in a new
    subfolder (``fileio.check_output_dir``)."""
    from ..model_loading import load_model

    exp = experiment_of(experiment, TransferExperiment)
    if not isinstance(workers, int) or workers < 1:
        raise TransferError(f"workers must be a whole number >= 1, got {workers!r}")
    if out is not None:  # an earlier run of it is continued; the user's own files are never written over
        out = check_output_dir(out, command="transfer", force=force, names=RUN_FILES, fresh=exp.name, resumable=True)
    start = time.perf_counter()
    sets, metric = _load_sets(exp, data_dir)
    unseen = check_labels(sets, exp.task)
    for f in exp.fractions:
        subset(sets["train"], float(f), 0)  # a fraction too small for a tagger fails before any work
    _static_vectors(exp)  # a bad vectors folder fails before any work
    loaded = load_model(model)
    root = Path("runs") / "transfer"
    run_dir = Path(out) if out else check_inside(root / f"{exp.name}-{time.strftime('%Y%m%d-%H%M%S')}", root)
    done = _prepare_run_dir(run_dir, exp, loaded.name)
    config = exp.config()
    log(f"{exp.name}: {exp.task} ({metric}) with {loaded.name}; {len(done)} of {len(exp.grid())} cells done")
    grid = _Grid.prepare(exp, loaded, sets, metric, data_dir, cache_dir, progress, log)
    finished = {(c["input"], c["fraction"], c["seed"]) for c in done}
    cells = list(done)
    todo = [key for key in exp.grid() if key not in finished]
    if workers > 1 and len(todo) > 1:
        import multiprocessing

        pool = multiprocessing.get_context("spawn").Pool(
            min(workers, len(todo)), _start_worker, (asdict(exp), model, data_dir, cache_dir)
        )
        results = pool.imap_unordered(_worker_cell, todo)
    else:
        pool, results = None, (grid.cell(*key) for key in todo)
    try:
        for cell in results:
            with open(run_dir / "cells.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps(cell) + "\n")
            cells.append(cell)
            ran = len(cells) - len(done)
            left = (time.perf_counter() - start) / ran * (len(exp.grid()) - len(cells))  # large fractions last: a floor
            message = (
                f"[{len(cells)}/{len(exp.grid())}] {cell['input']} {cell['fraction']:g} seed {cell['seed']}: "
                f"dev {cell['dev']:.4f} test {cell['test']:.4f} ({cell['seconds']:.0f} s; "
                f"at least {left / 60:.0f} min left)"
            )
            log("  " + message)
            if on_progress:
                on_progress(len(cells) / len(exp.grid()), message)
    finally:
        if pool is not None:
            pool.terminate()
    order = {key: i for i, key in enumerate(exp.grid())}
    cells.sort(key=lambda c: order.get((c["input"], c["fraction"], c["seed"]), len(order)))
    summary = _summary(cells, exp)
    metrics = {
        "task": exp.task,
        "metric": metric,
        "experiment": exp.name,
        "model": loaded.name,
        "cells": cells,
        "mix_weights": _mix_weights(cells, exp),
        "summary": summary,
        "error_reduction": _error_reduction(summary, metric),
        "unseen_test_labels": unseen,
        "train_sentences": {str(float(f)): int(len(subset(sets["train"], float(f), 0))) for f in exp.fractions},
        "tagger": config.to_dict(),
        "seconds": round(time.perf_counter() - start, 1),
    }
    with atomic_path(run_dir / "metrics.json") as tmp:
        tmp.write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    log(f"{exp.name}: wrote {run_dir} in {metrics['seconds']:.0f} s")
    return run_dir


def is_transfer_run(run_dir: str | Path) -> bool:
    """A run directory of ``run_transfer`` (its ``metrics.json`` has ``cells``)."""
    path = Path(run_dir) / "metrics.json"
    try:
        return path.is_file() and "cells" in json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False


def report(run_dirs: list[str | Path]) -> str:
    """Transfer runs -> one markdown table each: test score (mean +- std over seeds) by input and
    training fraction, elmo's relative error reduction over static, and the learned layer weights."""
    blocks = []
    for d in run_dirs:
        m = json.loads((Path(d) / "metrics.json").read_text(encoding="utf-8"))
        fractions = sorted({float(f) for s in m["summary"].values() for f in s})
        head = "| input | " + " | ".join(f"{f:g} of train ({m['train_sentences'].get(str(f), '?')})" for f in fractions)
        lines = [f"{m['experiment']} ({m['task']}, test {m['metric']}, {m['model']})", "", head + " | layer weights |"]
        lines.append("|---|" + "---|" * (len(fractions) + 1))
        for name, by_fraction in m["summary"].items():
            cells = [by_fraction.get(str(f)) for f in fractions]
            shown = [f"{c['mean']:.4f} +- {c['std']:.4f}" if c else "" for c in cells]
            weights = m["mix_weights"].get(name)
            lines.append(
                f"| {name} | " + " | ".join(shown) + f" | {' '.join(f'{w:.2f}' for w in weights) if weights else ''} |"
            )
        if m.get("error_reduction"):
            reduction = [f"{m['error_reduction'].get(str(f), float('nan')):.1%}" for f in fractions]
            lines.append("| error reduction elmo vs static | " + " | ".join(reduction) + " | |")
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)
