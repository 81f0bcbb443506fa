"""Scripted probe experiments: one TOML file -> a run directory with metrics, tables and a plot.

Experiment file (see ``probes/*.toml``)::

    name = "pos_ewt"
    task = "upos"              # upos | xpos | deprel | const_depth | structural_distance |
                               # structural_depth | wsd_centroid | wsd_linear
    dataset = "ewt"            # a name known to probing_lab.datasets.load_dataset
    train = "train"            # splits (for WSD sets: e.g. "bank/train")
    dev = "dev"
    test = "test"
    train_dataset = "..."      # optional: train (dev, test) from another dataset
    layers = [0, 1, 2, "mix"]
    seed = 0
    max_train_sentences = 0    # 0 = all
    control = true             # Hewitt & Liang control task + selectivity (token tasks)
    mdl = true                 # online-code MDL in bits (token tasks)
    random_init = true         # the same probe on a randomly initialised model of the same shape
    [probe]                    # ProbeConfig: kind, lr, weight_decay, epochs, rank, hidden, ...

``run_experiment(path_or_dict, model=None, out=None)`` runs it; the CLI is
``probing-lab probe probes/NAME.toml [--model M] [--out DIR]``.
"""

from __future__ import annotations

import csv
import json
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from ..features.cache import ElmoEncoder, Features, extract_features
from . import tasks as T
from .probes import ProbeConfig, fit_probe, online_codelength
from .structural import fit_structural_probe

TASKS = (
    "upos",
    "xpos",
    "deprel",
    "const_depth",
    "dep_arc",
    "structural_distance",
    "structural_depth",
    "wsd_centroid",
    "wsd_linear",
)
LAYER_KEYS = ("0", "1", "2", "mix")


class ExperimentError(ValueError):
    """An experiment file with an unknown key, task, layer or model."""


@dataclass
class Experiment:
    name: str
    task: str
    dataset: str
    train: str = "train"
    dev: str = "dev"
    test: str = "test"
    layers: list = field(default_factory=lambda: [0, 1, 2, "mix"])
    seed: int = 0
    max_train_sentences: int = 0
    control: bool = True
    mdl: bool = True
    random_init: bool = True
    probe: dict = field(default_factory=dict)
    description: str = ""
    train_dataset: Optional[str] = None  # when training data comes from another dataset (WSD: WordNet examples)
    dev_dataset: Optional[str] = None
    test_dataset: Optional[str] = None
    source: Optional[str] = None

    @classmethod
    def from_dict(cls, data: dict, where: str = "experiment") -> "Experiment":
        known = {f for f in cls.__dataclass_fields__ if f != "source"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ExperimentError(f"{where}: unknown key(s) {unknown}; known keys: {sorted(known)}")
        missing = [k for k in ("name", "task", "dataset") if k not in data]
        if missing:
            raise ExperimentError(f"{where}: missing {missing}")
        exp = cls(**data, source=where)
        if exp.task not in TASKS:
            raise ExperimentError(f"{where}: unknown task {exp.task!r}; choose one of {list(TASKS)}")
        for layer in exp.layers:
            if str(layer) not in LAYER_KEYS:
                raise ExperimentError(f'{where}: unknown layer {layer!r}; layers are 0, 1, 2 and "mix"')
        if exp.task != "dep_arc":
            exp.probe_config()  # validates
        return exp

    @classmethod
    def load(cls, path: str | Path) -> "Experiment":
        path = Path(path)
        if not path.is_file():
            raise ExperimentError(f"{path}: no such experiment file (see probes/*.toml)")
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as e:
            raise ExperimentError(f"{path}: not valid TOML ({e})") from None
        return cls.from_dict(data, str(path))

    def probe_config(self, **override) -> ProbeConfig:
        return ProbeConfig.from_dict(
            {"seed": self.seed, **self.probe, **override}, f"{self.source or self.name} [probe]"
        )

    @property
    def layer_keys(self) -> list[str]:
        return [str(l) for l in self.layers]


# --- features per split ----------------------------------------------------------------------


@dataclass
class Split:
    sentences: list
    features: Features

    @property
    def words(self) -> list[str]:
        return [t.form for s in self.sentences for t in s.tokens]

    def layer(self, key: str) -> np.ndarray:
        """``(N, dim)`` for a layer, ``(N, n_layers, dim)`` for "mix" (float32 in memory)."""
        if key == "mix":
            return np.ascontiguousarray(np.transpose(self.features.layers, (1, 0, 2)), dtype=np.float32)
        return np.asarray(self.features.layers[int(key)], dtype=np.float32)


def _load_splits(exp: Experiment, encoder, data_dir, cache_dir, progress: bool) -> dict[str, Split]:
    from ..datasets import load_dataset

    out = {}
    for role in ("train", "dev", "test"):
        dataset = getattr(exp, f"{role}_dataset") or exp.dataset
        sentences = [s for s in load_dataset(dataset, getattr(exp, role) or None, data_dir) if s.tokens]
        if role == "train" and exp.max_train_sentences:
            sentences = sentences[: exp.max_train_sentences]
        feats = extract_features(encoder, [s.words for s in sentences], cache_dir=cache_dir, progress=progress)
        out[role] = Split(sentences, feats)
    return out


# --- runners per kind of task ------------------------------------------------------------------


def _token_task(exp: Experiment, splits: dict[str, Split], with_controls: bool, log) -> tuple[dict, dict]:
    train, dev, test = splits["train"], splits["dev"], splits["test"]
    labels = {r: T.token_labels(s.sentences, exp.task) for r, s in splits.items()}
    index = T.LabelIndex(labels["train"])
    y = {r: index.encode(l) for r, l in labels.items()}
    control = {}
    if with_controls and exp.control:
        control = {r: index.encode(T.control_labels(s.words, labels["train"], exp.seed)) for r, s in splits.items()}
    results = {}
    rng = np.random.default_rng(exp.seed)
    order = rng.permutation(len(y["train"]))
    for key in exp.layer_keys:
        config = exp.probe_config(mix=key == "mix")
        X_tr, X_dev, X_te = train.layer(key), dev.layer(key), test.layer(key)
        t0 = time.perf_counter()
        probe = fit_probe(X_tr, y["train"], X_dev, y["dev"], len(index), config)
        predicted = probe.predict(X_te)
        entry = {
            "score": float((predicted == y["test"]).mean()),
            "dev_score": probe.dev_accuracy,
            "epochs": probe.epochs_run,
            "confusion": T.confusion_matrix(y["test"], predicted, len(index)),
        }
        if probe.mix_weights() is not None:
            entry["mix_weights"] = probe.mix_weights()
        if control:
            cprobe = fit_probe(X_tr, control["train"], X_dev, control["dev"], len(index), config)
            entry["control_score"] = cprobe.accuracy(X_te, control["test"])
            entry["selectivity"] = entry["score"] - entry["control_score"]
        if with_controls and exp.mdl:
            entry.update(online_codelength(X_tr[order], y["train"][order], X_dev, y["dev"], len(index), config))
            if control:
                entry["control_mdl_bits"] = online_codelength(
                    X_tr[order], control["train"][order], X_dev, control["dev"], len(index), config
                )["mdl_bits"]
        entry["seconds"] = round(time.perf_counter() - t0, 2)
        log(
            f"  layer {key}: score {entry['score']:.4f}"
            + (f", control {entry['control_score']:.4f}" if "control_score" in entry else "")
        )
        results[key] = entry
        del X_tr
    majority = T.accuracy(T.majority_per_type(train.words, labels["train"], test.words), labels["test"])
    extra = {
        "majority": majority,
        "n_labels": len(index),
        "labels": index.labels,
        "tokens": {r: int(len(v)) for r, v in y.items()},
    }
    return results, extra


def _structural_task(exp: Experiment, splits: dict[str, Split], log) -> tuple[dict, dict]:
    kind = "distance" if exp.task == "structural_distance" else "depth"
    results = {}
    for key in exp.layer_keys:
        t0 = time.perf_counter()
        metrics = fit_structural_probe(kind, splits, key, exp.probe, exp.seed)
        metrics["seconds"] = round(time.perf_counter() - t0, 2)
        log(f"  layer {key}: score {metrics['score']:.4f} spearman {metrics['spearman']:.3f}")
        results[key] = metrics
    return results, {"majority": None}


def _wsd_arrays(split: Split, key: str, backoff: Optional[dict] = None):
    """Vectors, lemmas and senses of the sense-annotated tokens; ``backoff`` collects a
    per-lemma fallback sense the dataset provides (WordNet's first sense)."""
    idx, lemmas, senses = [], [], []
    offset = 0
    for s in split.sentences:
        for j, t in enumerate(s.tokens):
            if t.sense is not None:
                idx.append(offset + j)
                lemmas.append(t.lemma or t.form.lower())
                senses.append(t.sense)
                if backoff is not None and t.extra.get("first_sense"):
                    backoff.setdefault(lemmas[-1], t.extra["first_sense"])
        offset += len(s.tokens)
    X = split.layer(key)[np.array(idx, dtype=np.int64)] if idx else np.zeros((0, split.features.layers.shape[-1]))
    return X, lemmas, senses


def _wsd_task(exp: Experiment, splits: dict[str, Split], log) -> tuple[dict, dict]:
    from collections import Counter, defaultdict

    results = {}
    _, tr_lemmas, tr_senses = _wsd_arrays(splits["train"], "0")
    by_lemma = defaultdict(Counter)
    for l, s in zip(tr_lemmas, tr_senses):
        by_lemma[l][s] += 1
    single = sorted(l for l, c in by_lemma.items() if len(c) < 2)
    if single and len(single) == len(by_lemma):
        raise ExperimentError(
            f"{exp.source}: every lemma in the training data has one sense ({single[:5]}); nothing to disambiguate"
        )
    mfs: dict = {}
    _wsd_arrays(splits["test"], "0", backoff=mfs)  # lemmas never seen in training: WordNet's first sense
    mfs.update({l: c.most_common(1)[0][0] for l, c in by_lemma.items()})
    for key in exp.layer_keys:

        def get(split, key=key):
            if key == "mix":  # the centroid method has no trained weights to mix: use the mean of the layers
                return _wsd_arrays(split, "mix")[0].mean(1)
            return _wsd_arrays(split, key)[0]

        X_tr, X_te = get(splits["train"]), get(splits["test"])
        _, te_lemmas, te_senses = _wsd_arrays(splits["test"], "0")
        if exp.task == "wsd_centroid":
            pred = T.sense_centroid_predict(X_tr, tr_lemmas, tr_senses, X_te, te_lemmas, mfs)
        else:
            pred = _per_lemma_linear(exp, X_tr, tr_lemmas, tr_senses, X_te, te_lemmas, mfs, splits)
        score = T.accuracy(pred, te_senses)  # every instance gets an answer: P = R = F1
        results[key] = {"score": score}
        log(f"  layer {key}: F1 {score:.4f}")
    _, te_lemmas, te_senses = _wsd_arrays(splits["test"], "0")
    majority = T.accuracy([mfs.get(l) for l in te_lemmas], te_senses)
    # a count and a few examples: the whole list (22k lemmas for WordNet) would swamp metrics.json
    return results, {
        "majority": majority,
        "lemmas": len(by_lemma),
        "single_sense_lemmas": len(single),
        "single_sense_examples": single[:20],
        "instances": {"train": len(tr_senses), "test": len(te_senses)},
    }


def _per_lemma_linear(exp, X_tr, tr_lemmas, tr_senses, X_te, te_lemmas, mfs, splits):
    pred = [None] * len(te_lemmas)
    tr_lemmas, te_lemmas = np.array(tr_lemmas), np.array(te_lemmas)
    for lemma in sorted(set(te_lemmas)):
        te_idx = np.flatnonzero(te_lemmas == lemma)
        tr_idx = np.flatnonzero(tr_lemmas == lemma)
        senses = sorted({tr_senses[i] for i in tr_idx})
        if len(senses) < 2:
            for i in te_idx:
                pred[i] = mfs.get(lemma)
            continue
        index = {s: k for k, s in enumerate(senses)}
        y = np.array([index[tr_senses[i]] for i in tr_idx])
        order = np.random.default_rng(exp.seed).permutation(len(tr_idx))
        n_dev = max(1, len(order) // 10)
        dev, fit = tr_idx[order[:n_dev]], tr_idx[order[n_dev:]]
        y_dev, y_fit = y[order[:n_dev]], y[order[n_dev:]]
        probe = fit_probe(
            X_tr[fit], y_fit, X_tr[dev], y_dev, len(senses), exp.probe_config(batch_size=64, epochs=50, patience=5)
        )
        for i, p in zip(te_idx, probe.predict(X_te[te_idx])):
            pred[i] = senses[p]
    return pred


def _arc_pairs(split: Split, key: str, n_negative: int, rng, max_dependents: Optional[int] = None):
    """Pairs (dependent, candidate head): the gold head and ``n_negative`` other tokens of the
    sentence. Features ``[x_dep, x_cand, x_dep * x_cand]``; returns features, labels (1 = head),
    the group of each pair (one per dependent) and each candidate's distance to the dependent."""
    layer = split.layer(key)
    rows, labels, groups, distances = [], [], [], []
    deps = []
    offset = 0
    for s in split.sentences:
        n = len(s.tokens)
        for i, t in enumerate(s.tokens):
            if t.head and n > 2:
                deps.append((offset, n, i, t.head - 1))
        offset += n
    if max_dependents and len(deps) > max_dependents:
        deps = [deps[k] for k in sorted(rng.choice(len(deps), max_dependents, replace=False))]
    for g, (off, n, i, h) in enumerate(deps):
        others = [j for j in range(n) if j not in (i, h)]
        negatives = rng.choice(others, min(n_negative, len(others)), replace=False).tolist()
        for j, label in [(h, 1)] + [(j, 0) for j in negatives]:
            rows.append((off + i, off + j))
            labels.append(label)
            groups.append(g)
            distances.append(abs(i - j))
    rows = np.array(rows)
    a, b = layer[rows[:, 0]], layer[rows[:, 1]]
    return np.concatenate([a, b, a * b], axis=1), np.array(labels), np.array(groups), np.array(distances)


def _group_accuracy(scores: np.ndarray, labels: np.ndarray, groups: np.ndarray) -> float:
    """Fraction of dependents whose gold head scores highest among their candidates."""
    order = np.lexsort((-scores, groups))
    first = np.r_[True, groups[order][1:] != groups[order][:-1]]
    return float(labels[order][first].mean())


def _arc_task(exp: Experiment, splits: dict[str, Split], log) -> tuple[dict, dict]:
    """Dependency arc prediction: a binary linear probe on (dependent, candidate) pairs with
    sampled negatives; scored as head selection among each dependent's candidates."""
    if "mix" in exp.layer_keys:
        raise ExperimentError(
            f"{exp.source}: dep_arc runs on single layers (pair features of a mix would not fit in memory)"
        )
    n_negative = int(exp.probe.get("negatives", 3))
    options = {k: v for k, v in exp.probe.items() if k != "negatives"}
    config = ProbeConfig.from_dict({"seed": exp.seed, **options}, f"{exp.source} [probe]")
    results, nearest = {}, None
    for key in exp.layer_keys:
        data = {}
        for role, split in splits.items():
            rng = np.random.default_rng([exp.seed, ("train", "dev", "test").index(role)])
            data[role] = _arc_pairs(split, key, n_negative, rng, 60_000 if role == "train" else None)
        (X, y, _, _), (Xd, yd, _, _), (Xt, yt, gt, dt) = data["train"], data["dev"], data["test"]
        probe = fit_probe(X, y, Xd, yd, 2, config)
        score = _group_accuracy(probe.predict_proba(Xt)[:, 1], yt, gt)
        nearest = _group_accuracy(-dt.astype(float), yt, gt)
        results[key] = {"score": score, "pair_accuracy": probe.accuracy(Xt, yt), "candidates": n_negative + 1}
        log(f"  layer {key}: head selection {score:.4f}")
    return results, {"majority": nearest, "majority_is": "the candidate nearest to the dependent in the sentence"}


# --- running and writing -------------------------------------------------------------------------


def _run_one(exp: Experiment, encoder, data_dir, cache_dir, progress, with_controls, log) -> tuple[dict, dict]:
    splits = _load_splits(exp, encoder, data_dir, cache_dir, progress)
    if exp.task in T.TOKEN_TASKS:
        return _token_task(exp, splits, with_controls, log)
    if exp.task == "dep_arc":
        return _arc_task(exp, splits, log)
    if exp.task.startswith("structural"):
        return _structural_task(exp, splits, log)
    return _wsd_task(exp, splits, log)


def run_experiment(
    experiment: str | Path | dict | Experiment,
    model: Optional[str] = None,
    out: Optional[str | Path] = None,
    data_dir: Optional[str | Path] = None,
    cache_dir: Optional[str | Path] = None,
    progress: bool = True,
    log=lambda m: print(m, file=sys.stderr),
) -> Path:
    """Run an experiment and write its run directory; returns the directory."""
    from ..datadir import data_dir as resolve_data_dir
    from ..elmo import ElmoBiLM
    from ..models import load_model

    if isinstance(experiment, Experiment):
        exp = experiment
    elif isinstance(experiment, dict):
        exp = Experiment.from_dict(experiment)
    else:
        exp = Experiment.load(experiment)
    try:
        loaded = load_model(model)
    except (FileNotFoundError, ValueError) as e:
        raise ExperimentError(f"model {model!r}: {e}") from None
    data_dir = resolve_data_dir(data_dir)
    start = time.perf_counter()
    log(f"{exp.name}: task {exp.task} on {exp.dataset} with {loaded.name}")
    encoder = ElmoEncoder(loaded.model, loaded.name)
    layers, extra = _run_one(exp, encoder, data_dir, cache_dir, progress, True, log)
    baselines = {"majority": extra.pop("majority")}
    if exp.random_init:
        log("  random-init model of the same shape:")
        import torch

        random_model = ElmoBiLM(loaded.model.options)
        random_model.reset_parameters(torch.Generator().manual_seed(exp.seed))
        random_layers, _ = _run_one(
            exp, ElmoEncoder(random_model, "random-init"), data_dir, cache_dir, progress, False, log
        )
        baselines["random_init"] = {k: v["score"] for k, v in random_layers.items()}
    for entry in layers.values():
        for k in ("control_score", "selectivity", "mdl_bits"):
            entry.setdefault(k, None)
    metrics = {
        "task": exp.task,
        "experiment": exp.name,
        "dataset": exp.dataset,
        "model": loaded.name,
        "splits": {"train": exp.train, "dev": exp.dev, "test": exp.test},
        "seed": exp.seed,
        "layers": layers,
        "baselines": baselines,
        **extra,
        "seconds": round(time.perf_counter() - start, 1),
    }
    run_dir = Path(out) if out else Path("runs") / "probes" / f"{exp.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    write_run(run_dir, exp, metrics)
    log(f"{exp.name}: wrote {run_dir} in {metrics['seconds']:.0f} s")
    return run_dir


def _fmt(v) -> str:
    return "" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v)


def metrics_rows(metrics: dict) -> list[dict]:
    rows = []
    for key, entry in metrics["layers"].items():
        rows.append(
            {
                "model": metrics["model"],
                "task": metrics["task"],
                "layer": key,
                "score": entry["score"],
                "control_score": entry.get("control_score"),
                "selectivity": entry.get("selectivity"),
                "mdl_bits": entry.get("mdl_bits"),
                "random_init": (metrics["baselines"].get("random_init") or {}).get(key),
                "majority": metrics["baselines"].get("majority"),
            }
        )
    return rows


def per_label_rows(metrics: dict, layer: str) -> list[dict]:
    """A token task's test confusion at one layer -> per gold label: support, accuracy (recall),
    precision and the label it is most often mistaken for. Empty for runs without a confusion matrix."""
    confusion = metrics["layers"].get(layer, {}).get("confusion")
    if not confusion:
        return []
    C = np.asarray(confusion)
    labels = metrics["labels"]
    rows = []
    for i, label in enumerate(labels):
        support, predicted_as = int(C[i].sum()), int(C[:, i].sum())
        wrong = C[i].copy()
        wrong[i] = 0
        rows.append(
            {
                "label": label,
                "support": support,
                "accuracy": float(C[i, i] / support) if support else None,
                "precision": float(C[i, i] / predicted_as) if predicted_as else None,
                "most confused with": labels[int(wrong.argmax())] if wrong.any() else "",
            }
        )
    return sorted(rows, key=lambda r: -r["support"])


def write_run(run_dir: Path, exp: Experiment, metrics: dict) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    if exp.source and Path(exp.source).is_file():
        (run_dir / "experiment.toml").write_text(Path(exp.source).read_text(encoding="utf-8"), encoding="utf-8")
    else:
        (run_dir / "experiment.json").write_text(
            json.dumps({k: v for k, v in exp.__dict__.items() if k != "source"}, indent=2)
        )
    (run_dir / "seed.txt").write_text(f"{exp.seed}\n")
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    rows = metrics_rows(metrics)
    columns = list(rows[0])
    with open(run_dir / "table.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, columns)
        w.writeheader()
        w.writerows(rows)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_fmt(r[c]) for c in columns) + " |" for r in rows]
    (run_dir / "table.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    from .plots import layer_curve_figure, save_png

    fig = layer_curve_figure([metrics])
    fig.write_html(str(run_dir / "plot.html"), include_plotlyjs="cdn")
    save_png([metrics], run_dir / "plot.png")


def load_metrics(run_dir: str | Path) -> dict:
    path = Path(run_dir) / "metrics.json"
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir}: no metrics.json (is it a run directory of `probing-lab probe`?)")
    return json.loads(path.read_text(encoding="utf-8"))


def report(run_dirs: list[str | Path]) -> str:
    """Several runs -> one markdown table: rows task x model, columns the layers."""
    all_metrics = [load_metrics(d) for d in run_dirs]
    keys = [k for k in LAYER_KEYS if any(k in m["layers"] for m in all_metrics)]
    header = (
        "| task | model | "
        + " | ".join(f"L{k}" if k != "mix" else "mix" for k in keys)
        + " | majority | control (best layer) |"
    )
    lines = [header, "|" + "---|" * (len(keys) + 4)]
    for m in all_metrics:
        cells = [_fmt(m["layers"].get(k, {}).get("score")) for k in keys]
        best = max(m["layers"], key=lambda k: m["layers"][k]["score"])
        lines.append(
            f"| {m['task']} | {m['model']} | "
            + " | ".join(cells)
            + f" | {_fmt(m['baselines'].get('majority'))} | {_fmt(m['layers'][best].get('control_score'))} |"
        )
        if m["baselines"].get("random_init"):
            ri = m["baselines"]["random_init"]
            lines.append(f"| {m['task']} | random init | " + " | ".join(_fmt(ri.get(k)) for k in keys) + " | | |")
    return "\n".join(lines) + "\n"
