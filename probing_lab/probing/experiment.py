"""Scripted probe experiments: one TOML file -> a run directory with metrics, tables and a plot.

Experiment file (see ``probes/*.toml``)::

    name = "pos_ewt"
    task = "upos"              # upos | xpos | deprel | const_depth | subject_number | dep_arc |
                               # structural_distance | structural_depth | wsd_centroid | wsd_linear |
                               # sentence_label (ewt-sentence-length, ewt-bigram-shift, ewt-tense,
                               # ewt-subj-number, or a sentences file) | span_label (ptb-constituents,
                               # conll2000-chunks, gum-entities, gum-coref, ewt-deprel-spans, or a spans file)
    dataset = "ewt"            # a name known to probing_lab.datasets.load_dataset, or a table (below)
    train = "train"            # splits (for WSD sets: e.g. "bank/train")
    dev = "dev"
    test = "test"
    train_dataset = "..."      # optional: train (dev, test) from another dataset
    layers = [0, 1, 2, "mix"]  # "mix": a scalar mix learned with the probe; "mean": the layers' average;
                               # "1f", "1b", "2f", "2b": the forward / backward half of L1, L2
    seed = 0
    max_train_sentences = 0    # 0 = all
    control = true             # Hewitt & Liang control task + selectivity (token tasks)
    mdl = true                 # online-code MDL in bits (token tasks)
    random_init = true         # the same probe on a randomly initialised model of the same shape
    negatives = 3              # dep_arc: sampled candidate heads per dependent besides the gold one
    [probe]                    # the probe family's settings: ProbeConfig (token tasks, dep_arc,
                               # wsd_linear) or StructuralProbeConfig (structural_*); none for wsd_centroid
    pooling = "mean"           # sentence_label only: mean | max | summary (features.pooling), with ProbeConfig

Your own files (``probing_lab.probing.own_data``, readers in ``probing_lab.datasets.files``)::

    [dataset]
    format = "conllu"          # conllu | tokens | wic | sentences | spans
    train = "data/train.conllu" # relative to the experiment file's folder, or absolute
    dev = "data/dev.conllu"    # optional; a missing dev/test is carved from train (10% each, by
    test = "data/test.conllu"  #   sentence, with the experiment's seed; the split goes to split.json)
    label = "feats:Number"     # conllu only: upos (default) | xpos | deprel | feats:NAME | misc:NAME
    max_tokens = 1000          # a longer sentence is refused with its line

With a table, ``task`` defaults to ``token_label`` (conllu, tokens: the file's label, tokens without
one skipped) or ``wsd_centroid`` (wic; ``wsd_linear`` too: the group is the lemma) or ``sentence_label``
(sentences: ``sentence<TAB>label``) or ``span_label`` (spans: JSON Lines); a conllu file
also runs ``upos``, ``xpos``, ``deprel``, ``dep_arc`` and the structural probes; ``name`` defaults to
the train file's stem; the top-level ``train``/``dev``/``test`` keys are not used. The run directory
records each file's path, size and SHA-256 (``metrics.json`` ``files``), the split (``split.json``:
the first line of each role's sentences) and the test labels never seen in training
(``unseen_test_labels``: counted, scored as wrong). ``probing-lab probe --data FILE --format FMT``
is the same without an experiment file.

``run_experiment(path_or_dict, model=None, out=None)`` runs it and returns a ``ProbeRun``; the CLI is
``probing-lab probe probes/NAME.toml [--model M] [--out DIR]``.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from ..features.activations import layer_number, split_half
from ..features.cache import ElmoEncoder
from ..features.pooling import POOLINGS
from ..fileio import OutputError, atomic_directory, check_inside, check_name, check_output_dir
from ..paths import WORD2VEC_DIR, probe_runs_dir
from ..settings import experiment_of, read_toml
from ..static import StaticEncoder
from ..stats import SMALL_UNITS, check_seeds
from . import intervals
from .errors import ExperimentError
from .own_data import (
    DEFAULT_TASK,
    FileDataset,
    check_dataset_table,
    default_name,
    describe,
    load_file_dataset,
    unseen_labels,
    write_split,
)
from .plots import write_plots
from .probes import ProbeConfig
from .runners import RUNNERS, TASKS
from .runs import RUN_FILES, ProbeRun, write_run
from .splits import load_splits
from .structural import StructuralProbeConfig
from .tasks import SENTENCE_TASKS


@dataclass
class Experiment:
    name: str
    task: str
    dataset: str | dict  # a registry name, or the checked [dataset] table of own files (own_data)
    train: str = "train"
    dev: str = "dev"
    test: str = "test"
    layers: Optional[list] = None  # default: 0, 1, 2 and what the task can combine them with (see from_dict)
    seed: int = 0
    max_train_sentences: int = 0
    control: bool = True
    mdl: bool = True
    random_init: bool = True
    negatives: int = 3  # dep_arc only
    seeds: Optional[list] = None  # [0, 1, 2]: the probes refitted with each seed (the first is `seed`)
    probe: dict = field(default_factory=dict)
    description: str = ""
    train_dataset: Optional[str] = None  # when training data comes from another dataset (WSD: WordNet examples)
    dev_dataset: Optional[str] = None
    test_dataset: Optional[str] = None
    source: Optional[str] = None

    @classmethod
    def from_dict(cls, data: dict, where: str = "experiment", base_dir: Optional[Path] = None) -> "Experiment":
        """``base_dir``: the folder relative paths of a ``[dataset]`` table start from (the experiment
        file's; default the working directory)."""
        if isinstance(data.get("dataset"), dict):
            data = _with_file_dataset(data, where, base_dir)
        known = {f for f in cls.__dataclass_fields__ if f != "source"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ExperimentError(f"{where}: unknown key(s) {unknown}; known keys: {sorted(known)}")
        missing = [k for k in ("name", "task", "dataset") if k not in data]
        if missing:
            raise ExperimentError(f"{where}: missing {missing}")
        probe = dict(data.get("probe", {}))
        if "negatives" in probe:  # its old place: a setting of the experiment, not of the probe
            warnings.warn(f"{where}: [probe] negatives is now a top-level key of the experiment", stacklevel=2)
            data = {**data, "negatives": probe.pop("negatives"), "probe": probe}
        exp = cls(**data, source=where)
        if exp.layers is None:  # wsd: nothing is learned, so the layers' mean; dep_arc: single layers only
            last = {"wsd_centroid": ["mean"], "wsd_linear": ["mean"], "dep_arc": []}.get(exp.task, ["mix"])
            exp.layers = [0, 1, 2, *last]
        if not isinstance(exp.layers, list) or not exp.layers:
            raise ExperimentError(f"{where}: layers must be a non-empty list, e.g. [0, 1, 2], got {exp.layers!r}")
        if exp.task not in TASKS:
            raise ExperimentError(f"{where}: unknown task {exp.task!r}; choose one of {list(TASKS)}")
        if exp.task.startswith("wsd_") and "mix" in exp.layers:  # its old name there: nothing is learned to mix
            warnings.warn(
                f'{where}: for {exp.task} "mix" is the average of the layers, now called "mean"', stacklevel=2
            )
            exp.layers = ["mean" if layer == "mix" else layer for layer in exp.layers]
        for layer in exp.layers:  # the model's layer count is checked when it is loaded
            named = layer in ("mix", "mean") or (isinstance(layer, str) and (split_half(layer) or (0,))[0] > 0)
            if not (named or (isinstance(layer, int) and not isinstance(layer, bool) and layer >= 0)):
                raise ExperimentError(
                    f'{where}: unknown layer {layer!r}; layers are 0, 1, 2, ..., their direction halves "1f", '
                    '"1b", "2f", "2b", ..., "mix" and "mean"'
                )
        if exp.task == "dep_arc" and "mix" in exp.layers:
            raise ExperimentError(
                f"{where}: dep_arc runs on single layers (pair features of a mix would not fit in memory)"
            )
        if not isinstance(exp.negatives, int) or isinstance(exp.negatives, bool) or exp.negatives < 1:
            raise ExperimentError(f"{where}: negatives must be an integer >= 1, got {exp.negatives!r}")
        if exp.seeds is not None:
            try:
                exp.seeds = check_seeds(exp.seeds)
            except ValueError as e:
                raise ExperimentError(f"{where}: {e}") from None
            exp.seed = exp.seeds[0]
        for name in ("seed", "max_train_sentences"):
            value = getattr(exp, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ExperimentError(f"{where}: {name} must be an integer >= 0, got {value!r}")
        for name in ("control", "mdl", "random_init"):
            if not isinstance(getattr(exp, name), bool):
                raise ExperimentError(f"{where}: {name} must be true or false, got {getattr(exp, name)!r}")
        for name in ("name", "task", "dataset"):
            if name == "dataset" and isinstance(exp.dataset, dict):
                continue
            if not isinstance(getattr(exp, name), str) or not getattr(exp, name):
                raise ExperimentError(f"{where}: {name} must be a non-empty string, got {getattr(exp, name)!r}")
        try:  # the name becomes the run directory's name: nothing that leads outside runs/probes/
            check_name(exp.name, "name")
        except OutputError as e:
            raise ExperimentError(f"{where}: {e}") from None
        for name in ("train", "dev", "test"):  # "" names the whole of a dataset without splits
            if not isinstance(getattr(exp, name), str):
                raise ExperimentError(f"{where}: {name} must be a split name (a string), got {getattr(exp, name)!r}")
        try:
            exp.probe_config()  # validates the [probe] table for the task's probe family
        except ValueError as e:
            raise ExperimentError(str(e)) from None
        return exp

    @classmethod
    def load(cls, path: str | Path) -> "Experiment":
        path = Path(path)
        data = read_toml(path, "experiment file (see probes/*.toml)", ExperimentError)
        return cls.from_dict(data, str(path), base_dir=path.resolve().parent)

    def probe_config(self, **override) -> ProbeConfig | StructuralProbeConfig | None:
        """The typed ``[probe]`` settings of this task's probe family (None: the nearest-centroid
        WSD has no trained probe, and takes no settings)."""
        where = f"{self.source or self.name} [probe]"
        if self.task == "wsd_centroid":
            if self.probe:
                raise ValueError(f"{where}: wsd_centroid trains no probe; remove the [probe] table")
            return None
        probe = dict(self.probe)
        if self.task in SENTENCE_TASKS:  # how a sentence vector is made: a setting of the probe, not of ProbeConfig
            pooling = probe.pop("pooling", "mean")
            if pooling not in POOLINGS:
                raise ValueError(f"{where}: pooling must be one of {list(POOLINGS)}, got {pooling!r}")
        elif "pooling" in probe:
            raise ValueError(f"{where}: pooling is a setting of the sentence tasks ({list(SENTENCE_TASKS)})")
        family = StructuralProbeConfig if self.task.startswith("structural_") else ProbeConfig
        return family.from_dict({"seed": self.seed, **probe, **override}, where)

    @property
    def pooling(self) -> str:
        """A sentence task's pooling (``[probe] pooling``, default mean)."""
        return self.probe.get("pooling", "mean")

    @property
    def layer_keys(self) -> list[str]:
        return [str(l) for l in self.layers]


def _with_file_dataset(data: dict, where: str, base_dir: Optional[Path]) -> dict:
    """``data`` with its ``[dataset]`` table checked, ``task`` and ``name`` defaulted from it."""
    stray = sorted(k for k in ("train", "dev", "test", "train_dataset", "dev_dataset", "test_dataset") if k in data)
    if stray:
        raise ExperimentError(f"{where}: {stray} belong inside the [dataset] table (file paths) when it is a table")
    table = data["dataset"]
    try:
        checked = check_dataset_table(table, data.get("task"), where, base_dir)
    except ValueError as e:
        raise ExperimentError(str(e)) from None
    data = {**data, "dataset": checked}
    data.setdefault("task", DEFAULT_TASK[checked["format"]])
    data.setdefault("name", default_name(checked["train"]))
    return data


# --- features per split ----------------------------------------------------------------------


@dataclass
class RunProgress:
    """How far a run is: ``stages`` layers to probe (per model); after each, the message is logged
    and ``on_progress(fraction done, message)`` is called (a progress bar, for instance)."""

    log: Callable[[str], None]
    on_progress: Optional[Callable[[float, str], None]]
    stages: int
    done: int = 0

    def layer_done(self, message: str) -> None:
        self.done += 1
        self.log(message)
        if self.on_progress:
            self.on_progress(min(self.done / self.stages, 1.0), message.strip())


# --- running --------------------------------------------------------------------------------------


def load_experiment_splits(exp: Experiment, encoder, data_dir, cache_dir, progress: bool = True) -> dict:
    """An experiment's splits with their features from ``encoder``, extracted into the feature cache
    when it does not have them yet (what a sweep does once per model before its cells run)."""
    files = load_file_dataset(exp) if isinstance(exp.dataset, dict) else None
    return load_splits(exp, encoder, data_dir, cache_dir, progress, files.sentences if files else None)


def _run_one(exp: Experiment, encoder, data_dir, cache_dir, progress, with_controls, report, files=None):
    too_deep = [layer for layer in exp.layers if (layer_number(layer) or 0) >= encoder.n_layers]
    if too_deep:
        raise ExperimentError(
            f"{exp.source}: layer(s) {too_deep} do not exist; the model has layers 0-{encoder.n_layers - 1}"
        )
    splits = load_splits(exp, encoder, data_dir, cache_dir, progress, files.sentences if files else None)
    if with_controls:  # before any fit: how much the test set can tell
        n = len(splits["test"].sentences)
        report.log(
            f"  test set: {n} sentences" + (f" (fewer than {SMALL_UNITS}: a small test set)" if n < SMALL_UNITS else "")
        )
    layers, extra = RUNNERS[exp.task](exp, splits, with_controls, report)
    extra["_test"]["items"] = _items(exp, splits["test"])
    return layers, extra


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


def _other_seeds(exp, encoder, data_dir, cache_dir, progress, report, files, layers) -> Optional[dict]:
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
        again = load_file_dataset(other) if files is not None and files.split.get("carved_from") else files
        for key, entry in _run_one(other, encoder, data_dir, cache_dir, progress, False, report, again)[0].items():
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
) -> ProbeRun:
    """Run an experiment and write its run directory; returns the run (``.path`` is the directory).
    ``out``: the run directory (default ``$PROBING_LAB_RUNS`` or ``runs/probes``, then NAME-STAMP);
    an existing one follows ``fileio.check_output_dir`` (``force``: replace an earlier probe run
    there, or write into a new subfolder of a folder holding other files).
    ``on_progress(fraction, message)`` is called after each probed layer (of the model, then of the
    random-init baseline)."""
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
    data_dir, _ = resolve_data_dir(data_dir)
    start = time.perf_counter()
    dataset = exp.dataset if files is None else describe(exp.dataset)
    log(f"{exp.name}: task {exp.task} on {dataset} with {encoder.name}")
    runs = (2 if exp.random_init else 1) + max(len(exp.seeds or []) - 1, 0)
    report = RunProgress(log, on_progress, len(exp.layer_keys) * runs)
    layers, extra = _run_one(exp, encoder, data_dir, cache_dir, progress, True, report, files)
    test = extra.pop("_test")
    baselines = {"majority": extra.pop("majority")}
    random_layers = None
    if exp.random_init:
        log("  random-init model of the same shape:")
        import torch

        random_model = ElmoBiLM(loaded.model.options)
        random_model.reset_parameters(torch.Generator().manual_seed(exp.seed))
        random_layers, _ = _run_one(
            exp, ElmoEncoder(random_model, "random-init"), data_dir, cache_dir, progress, False, report, files
        )
        baselines["random_init"] = {k: v["score"] for k, v in random_layers.items()}
    seed_scores = _other_seeds(exp, encoder, data_dir, cache_dir, progress, report, files, layers)
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
    predictions = intervals.attach(metrics, layers, random_layers, test, exp.seed)
    metrics["seconds"] = round(time.perf_counter() - start, 1)
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
