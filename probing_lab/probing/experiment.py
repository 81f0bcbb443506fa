"""Running a probe experiment (``probing.config.Experiment``, the experiment file) into a run directory
with metrics, intervals, tables and a plot.

``run_experiment(path_or_dict, model=None, out=None)`` runs it and returns a ``ProbeRun``; the CLI is
``probing-lab probe probes/NAME.toml [--model M] [--out DIR]``.
"""

from __future__ import annotations

import inspect
import json
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from ..features.activations import layer_number
from ..features.cache import ElmoEncoder
from ..fileio import OutputError, atomic_directory, check_inside, check_name, check_output_dir
from ..paths import WORD2VEC_DIR, probe_runs_dir
from ..settings import experiment_of
from ..static import StaticEncoder
from ..stats import SMALL_UNITS
from . import intervals
from .config import Experiment
from .errors import ExperimentError
from .layer_pool import run_runners
from .own_data import (
    FileDataset,
    describe,
    load_file_dataset,
    unseen_labels,
    write_split,
)
from .plots import write_plots
from .runners import RUNNERS
from .runs import RUN_FILES, ProbeRun, write_run
from .splits import extract_all, load_splits, read_sentences
from .tasks import SPAN_TASKS

# --- features per split ----------------------------------------------------------------------


@dataclass
class RunProgress:
    """How far a run is: ``stages`` layers to probe (per model); after each, the message is logged
    and ``on_progress(fraction done, message)`` is called (a progress bar, for instance)."""

    log: Callable[[str], None]
    on_progress: Optional[Callable[[float, str], None]]
    stages: int
    done: int = 0
    timing: dict = field(default_factory=dict)  # seconds per phase: "model extraction", "random_init probes", ...
    workers: int = 1  # layer entries probed at once (forked processes, each fit on one thread: layer_pool)

    def add_time(self, phase: str, seconds: float) -> None:
        self.timing[phase] = self.timing.get(phase, 0.0) + seconds

    def layer_done(self, message: str) -> None:
        self.done += 1
        self.log(message)
        if self.on_progress:
            self.on_progress(min(self.done / self.stages, 1.0), message.strip())


# --- running --------------------------------------------------------------------------------------


def experiment_sentences(exp: Experiment, data_dir) -> dict:
    """Each role's sentences of an experiment (the registry's, or the user's files')."""
    files = load_file_dataset(exp) if isinstance(exp.dataset, dict) else None
    return read_sentences(exp, data_dir, files.sentences if files else None)


def load_experiment_splits(exp: Experiment, encoder, data_dir, cache_dir, progress: bool = True) -> dict:
    """An experiment's splits with their features from ``encoder``, extracted into the feature cache
    when it does not have them yet."""
    return load_splits(experiment_sentences(exp, data_dir), encoder, cache_dir, progress)


def _check_layers(exp: Experiment, encoder) -> None:
    too_deep = [layer for layer in exp.layers if (layer_number(layer) or 0) >= encoder.n_layers]
    if too_deep:
        raise ExperimentError(
            f"{exp.source}: layer(s) {too_deep} do not exist; the model has layers 0-{encoder.n_layers - 1}"
        )


def _model_splits(encoder, cache_dir, progress, with_controls, report, sentences, phase: str) -> dict:
    """A model's splits, their features extracted into the cache if it lacks them."""
    start = time.perf_counter()
    splits = load_splits(sentences, encoder, cache_dir, progress)
    report.add_time(f"{phase} extraction", time.perf_counter() - start)
    if with_controls:  # before any fit: how much the test set can tell
        n = len(splits["test"].sentences)
        report.log(
            f"  test set: {n} sentences" + (f" (fewer than {SMALL_UNITS}: a small test set)" if n < SMALL_UNITS else "")
        )
    return splits


def _run_models(exp: Experiment, models: list[tuple], cache_dir, progress, report, sentences) -> list[tuple]:
    """``(layers, extra)`` of each ``(encoder, with_controls, phase)`` in ``models``: their layer entries
    probed in one pool (``layer_pool.run_runners``), so that with two workers a model's last entry does
    not run alone while its random-init baseline's wait. Log lines of the random-init model's entries
    read "random init layer K"."""
    splits = [
        _model_splits(enc, cache_dir, progress, controls, report, sentences, phase) for enc, controls, phase in models
    ]
    start = time.perf_counter()
    runners = []
    for split, (_, controls, phase) in zip(splits, models):
        run = RUNNERS[exp.task]
        if phase == "random_init" and not inspect.isgeneratorfunction(run):  # it probes (and logs) here and now
            report.log("  random-init model of the same shape:")
        runners.append(run(exp, split, controls, report))
    labels = ["random init" if phase == "random_init" else "" for _, _, phase in models]
    results = run_runners(runners, labels, report)
    report.add_time(" and ".join(phase for _, _, phase in models) + " probes", time.perf_counter() - start)
    for split, (_, extra) in zip(splits, results):
        extra["_test"]["items"] = _items(exp, split["test"])
    return results


def _run_one(exp: Experiment, encoder, cache_dir, progress, with_controls, report, sentences, phase="model"):
    return _run_models(exp, [(encoder, with_controls, phase)], cache_dir, progress, report, sentences)[0]


def _extract_both(sentences: dict, encoder, random_encoder, cache_dir, progress, report) -> None:
    """With two or more workers, the model's and the random-init model's missing features extracted side by
    side (``splits.extract_all``: forked processes, so not in the app, which probes with one worker: its
    sessions are threads of one process); otherwise each ``_run_one`` extracts its own."""
    if report.workers < 2:
        return
    start = time.perf_counter()
    if extract_all(sentences, [encoder, random_encoder], cache_dir, report.workers, progress):
        seconds = time.perf_counter() - start
        report.add_time("extraction side by side", seconds)
        report.log(f"  features of the model and its random-init baseline extracted side by side in {seconds:.0f} s")


def _items(exp: Experiment, test) -> str:
    """What a run's test items are, as a hash: the test words, the task and the label probed (two
    runs with the same one can be compared item by item)."""
    import hashlib

    h = hashlib.sha256(
        json.dumps([exp.task, exp.dataset.get("label") if isinstance(exp.dataset, dict) else None]).encode()
    )
    for word in test.words:
        h.update(word.encode("utf-8") + b"\x1f")
    return h.hexdigest()


def _other_seeds(exp, encoder, data_dir, cache_dir, progress, report, files, sentences, layers) -> Optional[dict]:
    """``seeds = [...]`` beyond the first: the probes refitted with each seed on the same cached
    features (an own file without dev/test is split again with it), without control, MDL or
    random init: per layer the scores, their mean and sd (the probe's variance, beside the
    bootstrap's test-set variance)."""
    if not exp.seeds or len(exp.seeds) < 2:
        return None
    scores = {k: [v["score"]] for k, v in layers.items()}
    for seed in exp.seeds[1:]:
        report.log(f"  seed {seed}:")
        other = replace(exp, seed=seed, control=False, mdl=False)
        if files is not None and files.split.get("carved_from"):  # split again with this seed
            sentences = read_sentences(other, data_dir, load_file_dataset(other).sentences)
        again_layers, _ = _run_one(other, encoder, cache_dir, progress, False, report, sentences, "seeds")
        for key, entry in again_layers.items():
            scores[key].append(entry["score"])
    return {
        "seeds": list(exp.seeds),
        "layers": {
            k: {"scores": v, "mean": float(np.mean(v)), "sd": float(np.std(v, ddof=1))} for k, v in scores.items()
        },
    }


def _file_metrics(exp: Experiment, files: FileDataset) -> dict:
    sentences = dict(files.sentences)
    if exp.max_train_sentences:
        sentences["train"] = sentences["train"][: exp.max_train_sentences]
    split = {k: v for k, v in files.split.items() if k != "first_lines"}
    split["sentences"] = {role: len(v) for role, v in files.split["first_lines"].items()}
    split["file"] = "split.json"
    return {"files": files.files, "split": split, "unseen_test_labels": unseen_labels(exp.task, sentences)}


def machine_facts(precision: Optional[str] = "auto") -> dict:
    """What a run's numbers depend on besides its files: torch, its threads, and whether a linear
    probe's products on a large training set ran in bfloat16 (the experiment's ``precision``:
    ``bfloat16``, or ``auto`` on a CPU with AMX or AVX-512 BF16, from ``heads.BFLOAT16_FROM_ROWS`` rows;
    None: its probes take no precision: the span and structural probes, the WSD centroids)."""
    import torch

    from .heads import products_dtype

    return {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "bfloat16_products": precision is not None and products_dtype(precision) == torch.bfloat16,
    }


def static_vectors_dir(model: Optional[str]) -> Optional[Path]:
    """The static vectors folder that ``--model`` names (``word2vec``: the lab's, ``word2vec:DIR``), or None."""
    if model == "word2vec":
        return WORD2VEC_DIR
    if model is not None and model.startswith("word2vec:"):
        return Path(model.split(":", 1)[1]).expanduser()
    return None


def run_experiment(
    experiment: str | Path | dict | Experiment,
    model: Optional[str] = None,
    model_seed: int = 0,
    out: Optional[str | Path] = None,
    data_dir: Optional[str | Path] = None,
    cache_dir: Optional[str | Path] = None,
    progress: bool = True,
    log: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
    on_progress: Optional[Callable[[float, str], None]] = None,
    force: bool = False,
    workers: int = 1,
) -> ProbeRun:
    """Run an experiment and write its run directory; returns the run (``.path`` is the directory).
    ``out``: the run directory (default ``$PROBING_LAB_RUNS`` or ``runs/probes``, then NAME-STAMP);
    an existing one follows ``fileio.check_output_dir`` (``force``: replace an earlier probe run
    there, or write into a new subfolder of a folder holding other files).
    ``on_progress(fraction, message)`` is called after each probed layer (of the model, then of the
    random-init baseline). ``workers``: token and sentence layer entries probed at once in forked
    processes, on one thread each (the command line passes its threads; with one, the fits run here
    on the caller's threads): ``layer_pool``."""
    from ..elmo import ElmoBiLM
    from ..model_loading import load_model
    from ..paths import data_dir as resolve_data_dir

    exp = experiment_of(experiment, Experiment)
    try:  # the run directory is named after the experiment (also one made in code, not by from_dict)
        check_name(exp.name, "name")
    except OutputError as e:
        raise ExperimentError(f"{exp.source or 'experiment'}: {e}") from None
    if out is not None:  # checked before minutes of work: never into the user's own files (fileio's rule)
        out = check_output_dir(out, command="probe", force=force, names=RUN_FILES, fresh=exp.name)
    files = None
    if isinstance(exp.dataset, dict):  # the user's files: read and checked before the model loads
        files = load_file_dataset(exp)
    static = static_vectors_dir(model)
    try:
        if static is not None:
            encoder, loaded = StaticEncoder(static, f"word2vec:{static.name}"), None
        else:
            loaded = load_model(model, seed=model_seed)  # the seed of a random:PRESET model
            encoder = ElmoEncoder(loaded.model, loaded.name)
    except (FileNotFoundError, ValueError) as e:  # the message names the model's path or preset
        raise ExperimentError(str(e)) from None
    if static is not None and (exp.layers != [0] or exp.random_init):
        log(f"{exp.name}: static vectors are one context-free layer: probing layer 0, no random-init baseline")
        exp = replace(exp, layers=[0], random_init=False)
    _check_layers(exp, encoder)  # before any data is read
    data_dir, _ = resolve_data_dir(data_dir)
    start = time.perf_counter()
    dataset = exp.dataset if files is None else describe(exp.dataset)
    log(f"{exp.name}: task {exp.task} on {dataset} with {encoder.name}")
    runs = (2 if exp.random_init else 1) + max(len(exp.seeds or []) - 1, 0)
    report = RunProgress(log, on_progress, len(exp.layer_keys) * runs, workers=workers)
    t = time.perf_counter()
    sentences = read_sentences(exp, data_dir, files.sentences if files else None)  # once, for every model
    report.add_time("data", time.perf_counter() - t)
    random_encoder = None
    if exp.random_init:
        import torch

        random_model = ElmoBiLM(loaded.model.options)
        random_model.reset_parameters(torch.Generator().manual_seed(exp.seed))
        random_encoder = ElmoEncoder(random_model, "random-init")
        _extract_both(sentences, encoder, random_encoder, cache_dir, progress, report)
    models = [(encoder, True, "model")] + ([(random_encoder, False, "random_init")] if random_encoder else [])
    (layers, extra), *random_run = _run_models(exp, models, cache_dir, progress, report, sentences)
    test = extra.pop("_test")
    baselines = {"majority": extra.pop("majority")}
    random_layers = random_run[0][0] if random_run else None
    if random_layers is not None:  # "random init layer K" in the log: the random-init model of the same shape
        baselines["random_init"] = {k: v["score"] for k, v in random_layers.items()}
    seed_scores = _other_seeds(exp, encoder, data_dir, cache_dir, progress, report, files, sentences, layers)
    for entry in layers.values():
        for k in ("control_score", "selectivity", "mdl_bits", "context_score"):
            entry.setdefault(k, None)
    metrics = {
        "task": exp.task,
        "experiment": exp.name,
        "dataset": dataset,
        "model": encoder.name,
        "splits": {"train": exp.train, "dev": exp.dev, "test": exp.test} if files is None else files.splits,
        "seed": exp.seed,
        "layers": layers,
        "baselines": baselines,
        **extra,
        **(_file_metrics(exp, files) if files else {}),
        **({"seeds": seed_scores} if seed_scores else {}),
    }
    t = time.perf_counter()
    predictions = intervals.attach(metrics, layers, random_layers, test, exp.seed)
    report.add_time("intervals", time.perf_counter() - t)
    metrics["seconds"] = round(time.perf_counter() - start, 1)
    metrics["timing"] = {k: round(v, 1) for k, v in report.timing.items()}  # where the seconds went
    # span probes stay float32 whatever the precision (their steps measured no faster in bfloat16)
    precision = None if exp.task in SPAN_TASKS else getattr(exp.probe_config(), "precision", None)
    metrics["machine"] = machine_facts(precision)
    for line in intervals.run_verdicts(metrics):
        log(f"{exp.name}: {line}")
    root = probe_runs_dir()  # a run named after the experiment stays under it (check_name, check_inside)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = Path(out) if out else check_inside(root / f"{exp.name}-{stamp}", root)
    with atomic_directory(run_dir, command="probe", keep=("data",)) as tmp:  # the whole run at once, or nothing
        written = write_run(tmp, exp, metrics)
        intervals.save_predictions(tmp / intervals.PREDICTIONS, predictions)
        write_plots(written, tmp)
        if files is not None:
            write_split(tmp / "split.json", files)
    log(f"{exp.name}: wrote {run_dir} in {metrics['seconds']:.0f} s")
    return replace(written, path=run_dir)
