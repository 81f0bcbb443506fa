"""A transfer experiment file (TOML) read and checked: its task, inputs, fractions, seeds and tagger."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..fileio import check_name
from ..settings import read_toml
from .data import METRIC
from .tagger import TaggerConfig

INPUTS = ("static", "elmo", "elmo_top", "elmo_l0", "elmo_random")


class TransferError(ValueError):
    """A transfer experiment file or run directory that cannot be used (the message says why)."""


@dataclass
class TransferExperiment:
    name: str
    task: str
    inputs: list = field(default_factory=lambda: list(INPUTS))
    fractions: list = field(default_factory=lambda: [0.01, 0.1, 1.0])
    seeds: list = field(default_factory=lambda: [0, 1, 2])
    tagger: dict = field(default_factory=dict)
    dataset: Optional[dict] = None  # own files (task token_label); paths made absolute by from_dict
    static_vectors: Optional[str] = None  # a static vectors folder initialising every input's word embedding
    description: str = ""

    @classmethod
    def from_dict(
        cls, data: dict, where: str = "transfer experiment", base_dir: Optional[Path] = None
    ) -> "TransferExperiment":
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise TransferError(f"{where}: unknown key(s) {unknown}; known keys: {sorted(known)}")
        for key in ("name", "task"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise TransferError(f"{where}: {key} must be a non-empty string, got {data.get(key)!r}")
        exp = cls(**data)
        if exp.task not in (*METRIC, "token_label"):
            raise TransferError(f"{where}: unknown task {exp.task!r}; choose one of {sorted(METRIC)} or token_label")
        if (exp.task == "token_label") != (exp.dataset is not None):
            raise TransferError(f"{where}: task token_label goes with a [dataset] table of your files, and only it")
        if exp.dataset is not None:
            table = dict(exp.dataset)
            for role in ("train", "dev", "test"):
                if isinstance(table.get(role), str) and not Path(table[role]).expanduser().is_absolute():
                    table[role] = str((base_dir or Path.cwd()) / table[role])
            exp.dataset = table
        if exp.static_vectors is not None:
            if not isinstance(exp.static_vectors, str) or not exp.static_vectors:
                raise TransferError(f"{where}: static_vectors must be a folder of static vectors (a path)")
            if not Path(exp.static_vectors).expanduser().is_absolute():
                exp.static_vectors = str(((base_dir or Path.cwd()) / exp.static_vectors).resolve())
        bad = [i for i in exp.inputs if i not in INPUTS] if isinstance(exp.inputs, list) else [exp.inputs]
        if bad or not exp.inputs:
            raise TransferError(f"{where}: inputs must be a non-empty list of {list(INPUTS)}, got {exp.inputs!r}")
        if (
            not isinstance(exp.fractions, list)
            or not exp.fractions
            or not all(isinstance(f, (int, float)) and not isinstance(f, bool) and 0 < f <= 1 for f in exp.fractions)
        ):
            raise TransferError(f"{where}: fractions must be a list of numbers in (0, 1], got {exp.fractions!r}")
        if not isinstance(exp.seeds, list) or not exp.seeds or not all(type(s) is int and s >= 0 for s in exp.seeds):
            raise TransferError(f"{where}: seeds must be a list of integers >= 0, got {exp.seeds!r}")
        try:
            check_name(exp.name, "name")
            exp.config()
        except ValueError as e:
            raise TransferError(f"{where}: {e}") from None
        return exp

    @classmethod
    def load(cls, path: str | Path) -> "TransferExperiment":
        path = Path(path)
        data = read_toml(path, "transfer experiment file (see transfer/*.toml)", TransferError)
        return cls.from_dict(data, str(path), path.resolve().parent)

    def config(self) -> TaggerConfig:
        return TaggerConfig.from_dict(self.tagger, f"{self.name} [tagger]")

    def grid(self) -> list[tuple[str, float, int]]:
        """The cells in the order they run: the cheap small fractions first."""
        return [(i, float(f), s) for f in sorted(self.fractions) for i in self.inputs for s in self.seeds]
