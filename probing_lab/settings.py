"""Typed settings tables: a config dataclass from a TOML table, every key and value checked.

Used by the probes' ``[probe]`` tables and the transfer experiments' ``[tagger]`` table;
:func:`read_toml` reads their experiment files.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import fields
from pathlib import Path

from .fileio import read_utf8


def read_toml(path: str | Path, what: str, error=ValueError) -> dict:
    """An experiment file's table; a missing file or bad TOML is ``error`` naming the file and
    ``what`` it should be (e.g. "experiment file (see probes/*.toml)")."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: no such {what}")
    try:
        return tomllib.loads(read_utf8(path))
    except tomllib.TOMLDecodeError as e:
        raise error(f"{path}: not valid TOML ({e})") from None


def config_from_dict(cls, data: dict, where: str):
    """A config dataclass from a dict: unknown keys and values of the wrong type are named."""
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(f"{where}: unknown option(s) {unknown}; known: {sorted(known)}")
    defaults = cls()
    for name, value in data.items():
        expected = type(getattr(defaults, name))
        ok = isinstance(value, expected) and not (expected is int and isinstance(value, bool))
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            ok = True
        if not ok:
            raise ValueError(f"{where}: {name} must be {expected.__name__}, got {value!r}")
        if expected in (int, float):
            positive = name in getattr(cls, "POSITIVE", ())
            if not math.isfinite(value) or value < 0 or (positive and value <= 0):
                raise ValueError(f"{where}: {name} must be {'> 0' if positive else '>= 0'}, got {value!r}")
            if name in getattr(cls, "AT_MOST_ONE", ()) and value > 1:
                raise ValueError(f"{where}: {name} must be at most 1, got {value!r}")
            if name in getattr(cls, "BELOW_ONE", ()) and value >= 1:
                raise ValueError(f"{where}: {name} must be below 1, got {value!r}")
    return cls(**data)


def experiment_of(value, cls):
    """``value`` as an experiment of ``cls`` (a class with ``from_dict`` and ``load``): itself, made
    from a dict, or read from its file."""
    if isinstance(value, cls):
        return value
    return cls.from_dict(value) if isinstance(value, dict) else cls.load(value)
