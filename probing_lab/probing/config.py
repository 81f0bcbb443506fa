"""The experiment file: its schema, read and checked into an :class:`Experiment` (``Experiment.load``,
``Experiment.from_dict``); ``probing.experiment.run_experiment`` runs it.

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
the train file's stem and the label probed (``mine-upos``); the top-level ``train``/``dev``/``test``
keys are not used. The run directory
records each file's path, size and SHA-256 (``metrics.json`` ``files``), the split (``split.json``:
the first line of each role's sentences) and the test labels never seen in training
(``unseen_test_labels``: counted, scored as wrong). ``probing-lab probe --data FILE --format FMT``
is the same without an experiment file.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..features.activations import split_half
from ..features.pooling import POOLINGS
from ..fileio import OutputError, check_name
from ..settings import read_toml
from ..stats import check_seeds
from .errors import ExperimentError
from .own_data import DEFAULT_TASK, check_dataset_table, default_name
from .probes import ProbeConfig
from .runners import TASKS
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
    # named after the file and the label probed: two runs of one file on different labels differ by name
    label = checked.get("label")
    suffix = "-" + re.sub(r"[^A-Za-z0-9._-]", "_", str(label)) if label else ""
    data.setdefault("name", default_name(checked["train"]) + suffix)
    return data
