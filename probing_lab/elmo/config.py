"""ELMo configuration in the AllenNLP / bilm-tf ``options.json`` schema, and the presets.

The schema is kept as-is so that files move freely between this lab, AllenNLP and bilm-tf:

    {"lstm": {"dim": 4096, "projection_dim": 512, "n_layers": 2, "cell_clip": 3,
              "proj_clip": 3, "use_skip_connections": true},
     "char_cnn": {"embedding": {"dim": 16}, "filters": [[1, 32], ...], "n_highway": 2,
                  "n_characters": 262, "max_characters_per_token": 50, "activation": "relu"}}

Keys this lab does not use (bilm-tf training keys such as ``n_tokens_vocab``) are kept and
written back unchanged.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from .chars import MAX_CHARS, N_CHARACTERS

ORIGINAL_FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]


class OptionsError(ValueError):
    """An options.json that is missing a field or has a value this model cannot use."""


@dataclass(frozen=True)
class ElmoOptions:
    lstm_dim: int
    projection_dim: int
    n_layers: int = 2
    cell_clip: float | None = 3.0
    proj_clip: float | None = 3.0
    use_skip_connections: bool = True
    char_dim: int = 16
    filters: tuple[tuple[int, int], ...] = tuple(map(tuple, ORIGINAL_FILTERS))
    n_highway: int = 2
    activation: str = "relu"
    n_characters: int = N_CHARACTERS
    max_characters_per_token: int = MAX_CHARS
    extra: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        problems = []
        for name in ("lstm_dim", "projection_dim", "n_layers", "char_dim"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                problems.append(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if self.n_highway < 0:
            problems.append(f"n_highway must be >= 0, got {self.n_highway}")
        if not self.filters:
            problems.append("char_cnn.filters is empty; give [[width, n_filters], ...]")
        for f in self.filters:
            if len(f) != 2 or f[0] < 1 or f[1] < 1 or f[0] > self.max_characters_per_token:
                problems.append(f"bad filter {list(f)}: expected [width, n_filters], width <= 50")
        if self.activation not in ("relu", "tanh"):
            problems.append(f"char_cnn.activation must be 'relu' or 'tanh', got {self.activation!r}")
        if self.n_characters not in (261, 262):
            problems.append(f"char_cnn.n_characters must be 262 (261 during bilm-tf training), got {self.n_characters}")
        if self.max_characters_per_token != MAX_CHARS:
            problems.append(
                f"char_cnn.max_characters_per_token must be {MAX_CHARS}, got {self.max_characters_per_token}"
            )
        if problems:
            raise OptionsError("invalid ELMo options: " + "; ".join(problems))

    @property
    def n_filters(self) -> int:
        return sum(n for _, n in self.filters)

    @property
    def output_dim(self) -> int:
        """Width of every layer's activations: forward | backward halves."""
        return 2 * self.projection_dim

    # --- options.json ---------------------------------------------------------------
    @classmethod
    def from_dict(cls, options: dict, source: str = "options") -> "ElmoOptions":
        def need(section: dict, key: str, where: str) -> Any:
            if not isinstance(section, dict) or key not in section:
                raise OptionsError(f"{source}: missing field '{where}{key}' (see the AllenNLP options.json schema)")
            return section[key]

        lstm = need(options, "lstm", "")
        cnn = need(options, "char_cnn", "")
        extra = copy.deepcopy(options)
        for key in ("dim", "projection_dim", "n_layers", "cell_clip", "proj_clip", "use_skip_connections"):
            extra["lstm"].pop(key, None)
        for key in ("filters", "n_highway", "activation", "n_characters", "max_characters_per_token", "embedding"):
            extra["char_cnn"].pop(key, None)
        try:
            return cls(
                lstm_dim=need(lstm, "dim", "lstm."),
                projection_dim=need(lstm, "projection_dim", "lstm."),
                n_layers=lstm.get("n_layers", 2),
                cell_clip=lstm.get("cell_clip"),
                proj_clip=lstm.get("proj_clip"),
                use_skip_connections=bool(lstm.get("use_skip_connections", False)),
                char_dim=need(need(cnn, "embedding", "char_cnn."), "dim", "char_cnn.embedding."),
                filters=tuple(tuple(f) for f in need(cnn, "filters", "char_cnn.")),
                n_highway=need(cnn, "n_highway", "char_cnn."),
                activation=cnn.get("activation", "relu"),
                n_characters=cnn.get("n_characters", N_CHARACTERS),
                max_characters_per_token=cnn.get("max_characters_per_token", MAX_CHARS),
                extra=extra,
            )
        except OptionsError as e:  # need() names the source already; the checks of __post_init__ do not
            message = str(e)
            raise OptionsError(message if message.startswith(f"{source}: ") else f"{source}: {message}") from None

    def to_dict(self) -> dict:
        out = copy.deepcopy(self.extra) if self.extra else {}
        out.setdefault("lstm", {}).update(
            dim=self.lstm_dim,
            projection_dim=self.projection_dim,
            n_layers=self.n_layers,
            cell_clip=self.cell_clip,
            proj_clip=self.proj_clip,
            use_skip_connections=self.use_skip_connections,
        )
        out.setdefault("char_cnn", {}).update(
            embedding={"dim": self.char_dim},
            filters=[list(f) for f in self.filters],
            n_highway=self.n_highway,
            activation=self.activation,
            n_characters=N_CHARACTERS,  # inference always uses the shifted 262-row table
            max_characters_per_token=self.max_characters_per_token,
        )
        return out

    @classmethod
    def load(cls, path: str | Path) -> "ElmoOptions":
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"options file not found: {path}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise OptionsError(f"{path}: not valid JSON ({e})") from None
        except UnicodeDecodeError as e:
            raise OptionsError(f"{path}: not UTF-8 ({e.reason} at byte {e.start}); is it an options.json?") from None
        return cls.from_dict(data, source=str(path))

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")


def _preset(lstm_dim: int, proj: int, n_highway: int, filters=ORIGINAL_FILTERS, char_dim: int = 16) -> ElmoOptions:
    return ElmoOptions(
        lstm_dim=lstm_dim,
        projection_dim=proj,
        n_highway=n_highway,
        filters=tuple(map(tuple, filters)),
        char_dim=char_dim,
    )


# The released models (AllenNLP names) and smaller sizes that train on a 2-core CPU.
PRESETS: dict[str, ElmoOptions] = {
    "original": _preset(4096, 512, 2),  # elmo_2x4096_512_2048cnn_2xhighway, 93.6M
    "medium": _preset(2048, 256, 1),  # elmo_2x2048_256_2048cnn_1xhighway, 28.0M
    "small": _preset(1024, 128, 1),  # elmo_2x1024_128_2048cnn_1xhighway, 13.6M
    # CPU training sizes: narrower char CNN, same structure.
    "cpu-base": _preset(1024, 256, 1, filters=[[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 256]]),
    "cpu-small": _preset(512, 128, 1, filters=[[1, 32], [2, 32], [3, 64], [4, 128], [5, 256]]),
    # cpu-small's LSTMs under a char CNN twice as wide: more room for word types' meaning, little
    # extra training cost (the CNN runs once per distinct word of a batch)
    "cpu-small-wide": _preset(512, 128, 1, filters=[[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512]]),
    "cpu-tiny": _preset(256, 64, 1, filters=[[1, 16], [2, 16], [3, 32], [4, 64], [5, 128]], char_dim=8),
}


def get_preset(name: str) -> ElmoOptions:
    if name not in PRESETS:
        raise KeyError(f"unknown ELMo preset {name!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[name]


def preset_of(options: ElmoOptions) -> Optional[str]:
    """The preset with exactly these options (the shape a random-init baseline must have), or None."""
    return next((name for name, preset in PRESETS.items() if preset == options), None)
