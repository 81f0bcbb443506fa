"""A training run's settings: one frozen dataclass, read from and written to JSON, checked on load."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ..elmo import ElmoOptions, get_preset
from ..fileio import read_utf8


class TrainingError(ValueError):
    """A config, corpus or run directory the trainer cannot use."""


@dataclass(frozen=True)
class TrainConfig:
    """Every setting of a run (JSON). ``model`` is a preset name or an options.json dict."""

    model: Any = "cpu-base"
    vocab_size: Optional[int] = None  # first N lines of the corpus vocab.txt; None = all
    batch_size: int = 128  # rows per process
    unroll_steps: int = 20
    n_negative_samples: int = 8192  # 0 = full softmax
    optimizer: str = "adagrad"  # or "adam"
    lr: float = 0.2
    adagrad_initial_accumulator: float = 1.0
    dropout: float = 0.1
    clip_norm: float = 10.0
    epochs: float = 1.0
    max_steps: Optional[int] = None
    seed: int = 0
    threads: Optional[int] = None
    log_every: int = 20
    checkpoint_every_steps: int = 500
    checkpoint_every_minutes: float = 10.0
    keep_checkpoints: int = 2
    snapshot_fractions: tuple = (0.05,)
    # Learning curves: every this many steps (and at step 0) the run's ``evaluate`` callback (the
    # CLI passes the quick sense and POS probes of probing_lab.probing.curves) and a heldout
    # perplexity on ``eval_heldout_tokens`` tokens are written to curves.jsonl. 0 = never.
    eval_every_steps: int = 0
    eval_heldout_tokens: int = 20480
    # Warm start: encoder weights from a checkpoint directory (e.g. data/models/elmo-lab); the
    # softmax starts fresh and, for the first ``freeze_encoder_steps`` steps, learns alone so that
    # its random gradients do not disturb the trained encoder.
    init_from: Optional[str] = None
    freeze_encoder_steps: int = 0
    # Learning-rate schedule, a function of the step alone (so a resumed run follows it exactly):
    # linear warmup over ``warmup_steps``, then ``lr``; from ``decay_start_step`` a ``decay``
    # ("linear" or "cosine") over ``decay_steps`` down to ``lr * min_lr_ratio``, which then stays.
    # A resumed run may change the schedule of the steps it has not taken yet (see lr_changed_before):
    # that is how a run is extended, or a cooldown started from a checkpoint taken before it.
    warmup_steps: int = 0
    decay: str = "none"
    decay_start_step: int = 0
    decay_steps: int = 0
    min_lr_ratio: float = 0.0

    # Settings that change neither the weights nor the data order: a resumed run may differ in these
    # (the length of the run too: no schedule depends on it, so a run can be extended).
    BOOKKEEPING = (
        "epochs",
        "max_steps",
        "snapshot_fractions",
        "threads",
        "log_every",
        "checkpoint_every_steps",
        "checkpoint_every_minutes",
        "keep_checkpoints",
        "eval_every_steps",
        "eval_heldout_tokens",
    )

    SCHEDULE = ("warmup_steps", "decay", "decay_start_step", "decay_steps", "min_lr_ratio")

    def same_math(self, other: "TrainConfig") -> bool:
        """Equal but for bookkeeping and the schedule (whose past :meth:`lr_changed_before` checks)."""
        return dataclasses.replace(self, **{k: getattr(other, k) for k in self.BOOKKEEPING + self.SCHEDULE}) == other

    def lr_at(self, step: int) -> float:
        """The learning rate of the update that takes the run from ``step`` to ``step + 1``."""
        factor = min(1.0, (step + 1) / self.warmup_steps) if self.warmup_steps else 1.0
        if self.decay != "none" and step >= self.decay_start_step:
            t = min(1.0, (step - self.decay_start_step) / self.decay_steps)
            left = 1.0 - t if self.decay == "linear" else 0.5 * (1.0 + math.cos(math.pi * t))
            factor *= self.min_lr_ratio + (1.0 - self.min_lr_ratio) * left
        return self.lr * factor

    def lr_changed_before(self, other: "TrainConfig", step: int) -> Optional[int]:
        """The first step below ``step`` whose learning rate differs between the two configs, or None."""
        return next((s for s in range(step) if self.lr_at(s) != other.lr_at(s)), None)

    @classmethod
    def from_dict(cls, data: dict, where: str = "config") -> "TrainConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise TrainingError(f"{where}: unknown key(s) {unknown}; known keys: {sorted(names)}")
        data = dict(data)
        if "snapshot_fractions" in data:
            data["snapshot_fractions"] = tuple(data["snapshot_fractions"])
        config = cls(**data)
        config.check(where)
        return config

    @classmethod
    def load(cls, path: str | Path) -> "TrainConfig":
        path = Path(path)
        try:
            data = json.loads(read_utf8(path))
        except FileNotFoundError:
            raise TrainingError(f"{path}: no such config file") from None
        except json.JSONDecodeError as e:
            raise TrainingError(f"{path}: not valid JSON ({e})") from None
        return cls.from_dict(data, str(path))

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["snapshot_fractions"] = list(self.snapshot_fractions)
        return d

    # (field, type, smallest allowed, whether the smallest is excluded, None allowed)
    NUMBERS = (
        ("vocab_size", int, 4, False, True),
        ("batch_size", int, 1, False, False),
        ("unroll_steps", int, 1, False, False),
        ("n_negative_samples", int, 0, False, False),
        ("lr", float, 0, True, False),
        ("adagrad_initial_accumulator", float, 0, False, False),
        ("dropout", float, 0, False, False),
        ("clip_norm", float, 0, True, False),
        ("epochs", float, 0, False, False),
        ("max_steps", int, 1, False, True),
        ("seed", int, 0, False, False),
        ("threads", int, 1, False, True),
        ("log_every", int, 1, False, False),
        ("checkpoint_every_steps", int, 1, False, False),
        ("checkpoint_every_minutes", float, 0, True, False),
        ("keep_checkpoints", int, 1, False, False),
        ("eval_every_steps", int, 0, False, False),
        ("eval_heldout_tokens", int, 0, False, False),
        ("freeze_encoder_steps", int, 0, False, False),
        ("warmup_steps", int, 0, False, False),
        ("decay_start_step", int, 0, False, False),
        ("decay_steps", int, 0, False, False),
        ("min_lr_ratio", float, 0, False, False),
    )

    def check(self, where: str) -> None:
        """Every field's type and range; all problems at once, each naming its key."""
        problems = []
        for name, kind, low, exclusive, optional in self.NUMBERS:
            value = getattr(self, name)
            if value is None and optional:
                continue
            is_int = isinstance(value, int) and not isinstance(value, bool)
            if not (is_int or (kind is float and isinstance(value, float))):
                problems.append(f"{name} must be {'an integer' if kind is int else 'a number'}, got {value!r}")
            elif not math.isfinite(value) or value < low or (exclusive and value == low):
                problems.append(f"{name} must be {'>' if exclusive else '>='} {low}, got {value!r}")
        if self.optimizer not in ("adagrad", "adam"):
            problems.append(f"optimizer must be 'adagrad' or 'adam', got {self.optimizer!r}")
        if self.decay not in ("none", "linear", "cosine"):
            problems.append(f"decay must be 'none', 'linear' or 'cosine', got {self.decay!r}")
        elif self.decay != "none" and self.decay_steps == 0:
            problems.append(f"decay {self.decay!r} needs decay_steps >= 1 (the length of the decay)")
        if isinstance(self.min_lr_ratio, (int, float)) and self.min_lr_ratio > 1.0:
            problems.append(f"min_lr_ratio must be at most 1, got {self.min_lr_ratio!r}")
        if isinstance(self.dropout, (int, float)) and self.dropout >= 1.0:
            problems.append(f"dropout must be below 1, got {self.dropout!r}")
        if not all(isinstance(f, (int, float)) and 0 < f <= 1 for f in self.snapshot_fractions):
            problems.append(f"snapshot_fractions must be numbers in (0, 1], got {list(self.snapshot_fractions)}")
        if self.freeze_encoder_steps and not self.init_from:
            problems.append("freeze_encoder_steps needs init_from (a trained encoder to keep)")
        if isinstance(self.epochs, (int, float)) and self.epochs <= 0 and not self.max_steps:
            problems.append("epochs must be > 0 (or give max_steps)")
        if problems:
            raise TrainingError(f"{where}: " + "; ".join(problems))

    def options(self) -> ElmoOptions:
        if isinstance(self.model, str):
            return get_preset(self.model)
        return ElmoOptions.from_dict(self.model)
