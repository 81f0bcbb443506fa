"""Files as datasets: the ``[dataset]`` table of an experiment, its split, and the checks that keep
a probe on the user's own file from giving a silently wrong score.

``check_dataset_table`` validates the table (paths resolved against the experiment file's folder);
``load_file_dataset`` reads the files once (``probing_lab.datasets.files``; for ``token_label``
compactly, as a ``TokenTable``, so that memory does not grow with the file), splits a file without
dev/test 80/10/10 by sentence with the experiment's seed, refuses what cannot be probed (no
labels, one label, HEADs that are not a tree for a structural task) and returns the sentences per
role with what the run directory records: each file's path, size and SHA-256, and the split.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ..datasets.conllu import check_label
from ..datasets.files import FORMATS, MAX_TOKENS, TokenTable, file_record, read_labelled_file, read_token_table
from ..datasets.records import DatasetFormatError
from . import tasks as T

ROLES = ("train", "dev", "test")
TABLE_KEYS = ("format", "train", "dev", "test", "label", "max_tokens")
DEFAULT_TASK = {
    "conllu": "token_label",
    "tokens": "token_label",
    "wic": "wsd_centroid",
    "sentences": "sentence_label",
    "spans": "span_label",
}
STRUCTURAL = ("structural_distance", "structural_depth")
FORMAT_TASKS = {
    "conllu": ("token_label", "upos", "xpos", "deprel", "dep_arc", *STRUCTURAL),
    "tokens": ("token_label",),
    "wic": ("wsd_centroid", "wsd_linear"),
    "sentences": ("sentence_label",),
    "spans": ("span_label",),
}


def check_dataset_table(table: dict, task: Optional[str], where: str, base_dir: Optional[Path]) -> dict:
    """The ``[dataset]`` table, checked, with its paths made absolute (relative ones are taken from
    ``base_dir``, the experiment file's folder, else the working directory) and ``task`` defaulted
    from the format. Raises ValueError naming the key."""
    unknown = sorted(set(table) - set(TABLE_KEYS))
    if unknown:
        raise ValueError(f"{where} [dataset]: unknown key(s) {unknown}; known keys: {list(TABLE_KEYS)}")
    fmt = table.get("format")
    if fmt not in FORMATS:
        raise ValueError(f"{where} [dataset]: format must be one of {list(FORMATS)}, got {fmt!r}")
    out = {"format": fmt}
    for role in ROLES:
        value = table.get(role)
        if value is None and role != "train":
            continue
        if not isinstance(value, str) or not value:
            raise ValueError(f"{where} [dataset]: {role} must be a file path (a string), got {value!r}")
        path = Path(value).expanduser()
        out[role] = str(path if path.is_absolute() else (base_dir or Path.cwd()) / path)
    label = table.get("label")
    if label is not None:
        if fmt != "conllu":
            raise ValueError(f"{where} [dataset]: label is for conllu files only ({fmt} files have one label column)")
        if not isinstance(label, str):
            raise ValueError(f"{where} [dataset]: label must be a string, got {label!r}")
        try:
            check_label(label)
        except ValueError as e:
            raise ValueError(f"{where} [dataset]: {e}") from None
        out["label"] = label
    elif fmt == "conllu":
        out["label"] = "upos"
    max_tokens = table.get("max_tokens", MAX_TOKENS)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise ValueError(f"{where} [dataset]: max_tokens must be an integer >= 1, got {max_tokens!r}")
    out["max_tokens"] = max_tokens
    if task is not None and task not in FORMAT_TASKS[fmt]:
        choices = list(FORMAT_TASKS[fmt])
        raise ValueError(f"{where}: task {task!r} does not run on a {fmt} file; choose one of {choices}")
    return out


def describe(table: dict) -> str:
    """What ``metrics.json`` calls a file dataset: ``"<format> file <train file name>"``."""
    return f"{table['format']} file {Path(table['train']).name}"


@dataclass
class FileDataset:
    sentences: dict  # role -> list[Sentence]
    files: list  # {"role", "path", "bytes", "sha256"} per file
    split: dict  # how each role was made: {"how", "seed", role: [first line of each sentence]}

    @property
    def splits(self) -> dict:
        """metrics.json's ``splits``: each role's file, and its share when carved from the train file."""
        return {role: self.split["how"][role] for role in ROLES}


def _carve(n: int, missing: list[str], seed: int, path: str) -> dict[str, np.ndarray]:
    """Sentence indices per role: train keeps the rest after 10% per missing role (file order kept)."""
    need = 1 + len(missing)
    if n < need:
        raise DatasetFormatError(
            f"{path}: {n} sentence(s); splitting it into train/{'/'.join(missing)} needs at least {need}"
        )
    order = np.random.default_rng(seed).permutation(n)
    out, taken = {}, 0
    for role in missing:
        size = max(1, round(n * 0.1))
        out[role] = np.sort(order[taken : taken + size])
        taken += size
    out["train"] = np.sort(order[taken:])
    return out


def load_file_dataset(exp) -> FileDataset:
    """Read, split and check an experiment's file dataset (``exp.dataset`` is a checked table)."""
    table = exp.dataset
    fmt, label, max_tokens = table["format"], table.get("label"), table["max_tokens"]
    if exp.task == "token_label":  # one label column: read compactly, so memory does not grow with the file
        tables = {role: read_token_table(table[role], fmt, label, max_tokens) for role in ROLES if role in table}
        read = {role: (t, t.lines.tolist()) for role, t in tables.items()}
    else:
        read = {role: read_labelled_file(table[role], fmt, label, max_tokens) for role in ROLES if role in table}
    files = [{"role": role, **file_record(table[role])} for role in read]
    try:
        _check_labels(exp.task, read["train"][0], table["train"])
    except NoLabels:
        if fmt != "conllu" or exp.task != "token_label":
            raise
        raise DatasetFormatError(_label_not_in_file(table["train"], label, max_tokens)) from None
    if exp.task in T.SPAN_TASKS:
        _check_span_kinds(read, table)
    missing = [role for role in ("dev", "test") if role not in read]
    sentences, how, lines = {}, {}, {}
    if missing:
        train, train_lines = read.pop("train")
        parts = _carve(len(train), missing, exp.seed, table["train"])
        share = {"train": 100 - 10 * len(missing), "dev": 10, "test": 10}
        for role, idx in parts.items():
            part = train.select(idx) if isinstance(train, TokenTable) else [train[i] for i in idx]
            read[role] = (part, [train_lines[i] for i in idx])
            how[role] = f"{Path(table['train']).name}: {share[role]}% by seed {exp.seed}"
    for role in ROLES:
        sentences[role], lines[role] = read[role]
        if role not in how:
            how[role] = Path(table[role]).name
        if exp.task in STRUCTURAL:
            _check_trees(sentences[role], lines[role], table.get(role, table["train"]))
    if missing:
        _check_labels(exp.task, sentences["train"], f"the training part of {table['train']}")
    if exp.task == "dep_arc":
        for role in ROLES:
            if not any(t.head for s in sentences[role] for t in s.tokens if len(s.tokens) > 2):
                where = table[role] if role in table else f"the {role} part of {table['train']}"
                raise DatasetFormatError(
                    f"{where}: no token with a HEAD in a sentence of 3 or more tokens: dep_arc has nothing to probe"
                )
    split = {"how": {role: how[role] for role in ROLES}, "seed": exp.seed}
    split["carved_from"] = table["train"] if missing else None
    split["first_lines"] = lines
    return FileDataset(sentences, files, split)


def _labels(task: str, sentences) -> list:
    """The labels a task probes (None for unlabelled tokens); senses as (group, sense) for WSD."""
    if task.startswith("wsd_"):
        return [(t.lemma, t.sense) for s in sentences for t in s.tokens if t.sense is not None]
    if task in T.TOKEN_TASKS:
        return T.token_labels(sentences, task)  # a TokenTable too
    if task in T.SENTENCE_TASKS:
        return [s.label for s in sentences]
    if task in T.SPAN_TASKS:
        return [span.label for s in sentences for span in s.spans]
    return []  # dep_arc, structural: heads, checked elsewhere


def _labelled_task(task: str) -> bool:
    """A task with labels to count (the tree tasks have heads instead)."""
    return task in T.TOKEN_TASKS or task in T.SENTENCE_TASKS or task in T.SPAN_TASKS or task.startswith("wsd_")


class NoLabels(DatasetFormatError):
    """Not one example of the file has a label."""


def _label_not_in_file(path: str, label: str, max_tokens: int) -> str:
    """Why a CoNLL-U file gives no label for ``label``: the label columns it has, with their token
    counts, and the closest name (a feature's name is case-sensitive: ``feats:number`` is not ``feats:Number``)."""
    import difflib

    from ..datasets.summary import summarise_file

    columns = summarise_file(path, "conllu", max_tokens=max_tokens).columns
    have = ", ".join(f"{c} ({n:,} tokens)" for c, n in columns.items()) or "none"
    by_case = [c for c in columns if c.lower() == label.lower()]
    close = by_case or difflib.get_close_matches(label, list(columns), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{path}: no token has the label {label!r}: nothing to probe. The file's label columns: {have}{hint}"


def _check_labels(task: str, sentences, where: str) -> None:
    labels = [label for label in _labels(task, sentences) if label is not None]
    if not _labelled_task(task):
        return
    if not labels:
        raise NoLabels(f"{where}: no labelled token (every label is '_'): nothing to probe")
    if task.startswith("wsd_"):
        senses = Counter(label for _, label in labels)
        groups = {g for g, _ in labels}
        if len(senses) < 2 or all(len({s for g2, s in labels if g2 == g}) < 2 for g in groups):
            raise DatasetFormatError(
                f"{where}: every group has one label ({sorted(senses)[:5]}): nothing to disambiguate; "
                "a wic file needs groups with at least two labels"
            )
        return
    counts = Counter(labels)
    if len(counts) < 2:
        what = "sentence" if task in T.SENTENCE_TASKS else "span" if task in T.SPAN_TASKS else "labelled token"
        raise DatasetFormatError(
            f"{where}: every {what} has the label {next(iter(counts))!r}: nothing to probe "
            "(a probe needs at least two labels)"
        )


def _check_span_kinds(read: dict, table: dict) -> None:
    """Every example of a span task has one span, or every one has two: a probe reads one kind. A
    mix is refused naming the first two lines, in file order, that disagree."""
    found = (
        (table[role], line, e.span2 is not None)
        for role, (sentences, _) in read.items()
        for line, e in sorted(((e.line, e) for s in sentences for e in s.spans), key=lambda x: x[0])
    )
    first = next(found, None)
    other = next((f for f in found if f[2] != first[2]), None) if first else None
    if other is not None:
        kind = {True: "a span pair (span2)", False: "a single span (no span2)"}
        raise DatasetFormatError(
            f"{first[0]}:{first[1]} has {kind[first[2]]}, {other[0]}:{other[1]} has {kind[other[2]]}: a task "
            "probes single spans or span pairs, not both (put them in two files)"
        )


def tree_problem(heads: list) -> Optional[str]:
    """Why 1-based ``heads`` (0 = root) are not one tree, or None."""
    if any(h is None for h in heads):
        return "tokens without HEAD"
    roots = [i + 1 for i, h in enumerate(heads) if h == 0]
    if len(roots) != 1:
        return f"{len(roots)} roots (tokens {roots[:10]}), a tree has one"
    reaches_root = {0}
    for start in range(1, len(heads) + 1):
        path, seen, node = [], set(), start
        while node not in reaches_root:
            if node in seen:
                cycle = path[path.index(node) :] + [node]
                return f"HEAD forms a cycle ({' -> '.join(map(str, cycle))})"
            seen.add(node)
            path.append(node)
            node = heads[node - 1]
        reaches_root.update(path)
    return None


def _check_trees(sentences, lines, path: str) -> None:
    for sentence, line in zip(sentences, lines):
        problem = tree_problem([t.head for t in sentence.tokens])
        if problem:
            raise DatasetFormatError(
                f"{path}:{line}: sentence {sentence.id}: {problem}; the structural probes need a dependency tree"
            )


def unseen_labels(task: str, sentences: dict) -> Optional[dict]:
    """Test labels never seen in training (scored as wrong): their count, the test total and the
    most frequent ones. WSD counts a (group, label) pair the group never had in training."""
    if not _labelled_task(task):
        return None
    train = {label for label in _labels(task, sentences["train"]) if label is not None}
    test = [label for label in _labels(task, sentences["test"]) if label is not None]
    unseen = Counter(label for label in test if label not in train)
    shown = {("/".join(k) if isinstance(k, tuple) else k): v for k, v in unseen.most_common(20)}
    return {"count": sum(unseen.values()), "of": len(test), "labels": shown}


def default_name(path: str) -> str:
    """A run name from a file's stem: letters, digits, ``-``, ``_`` and ``.`` (the others become ``_``)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", Path(path).stem).strip(".")
    return name or "own_data"


def quick_experiment(
    path: str,
    fmt: str,
    label: Optional[str] = None,
    task: Optional[str] = None,
    layers: Optional[list] = None,
    max_tokens: Optional[int] = None,
) -> dict:
    """The experiment ``probing-lab probe --data FILE --format FMT ...`` runs (a dict for ``from_dict``)."""
    data: dict = {"dataset": {"format": fmt, "train": path}}
    if label is not None:
        data["dataset"]["label"] = label
    if max_tokens is not None:
        data["dataset"]["max_tokens"] = max_tokens
    if task is not None:
        data["task"] = task
    if layers is not None:
        data["layers"] = layers
    return data


def write_split(path: Path, files: FileDataset) -> None:
    """``split.json``: how each role was made and the first line of each of its sentences."""
    import json

    from ..fileio import atomic_path

    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(files.split) + "\n", encoding="utf-8")
