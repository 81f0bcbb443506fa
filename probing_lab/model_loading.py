"""Finding and loading a model by what a user types: a checkpoint directory, a released
``options.json`` + ``weights.hdf5`` pair, a random-init preset, or the shipped default."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from .download import FILES as RELEASED_FILES  # a released ELMo's folder: options.json, weights.hdf5
from .elmo import ElmoBiLM, get_preset, load_checkpoint, load_hdf5_model
from .elmo.weights import CHECKPOINT_WEIGHTS
from .paths import SHIPPED_MODEL_DIR


@dataclass
class LoadedModel:
    model: ElmoBiLM
    name: str  # human-readable origin, shown in logs and the app


def shipped_model_dir() -> Optional[Path]:
    """The lab's own pretrained model, if this checkout has one."""
    return SHIPPED_MODEL_DIR if (SHIPPED_MODEL_DIR / CHECKPOINT_WEIGHTS).is_file() else None


def load_model(
    model: Optional[str] = None,
    options: Optional[str] = None,
    weights: Optional[str] = None,
    seed: int = 0,
) -> LoadedModel:
    """Resolve ``--model`` / ``--options --weights`` into a model.

    ``model`` is a model directory, a released ELMo's folder (``options.json`` + ``weights.hdf5``,
    as ``probing-lab download`` writes them), a training run's checkpoint or snapshot (``lm.safetensors``),
    or ``random:PRESET`` (randomly initialised with ``seed``, the baseline every probe needs). With
    nothing given, the shipped model.
    """
    if (options is None) != (weights is None):
        raise ValueError("give both --options and --weights (a released ELMo comes as options.json + weights.hdf5)")
    if options is not None:
        if model is not None:
            raise ValueError("give either --model or --options/--weights, not both")
        return LoadedModel(load_hdf5_model(options, weights), f"hdf5:{weights}")
    if model is not None and model.startswith("random:"):
        generator = torch.Generator().manual_seed(seed)
        m = ElmoBiLM(get_preset(model.split(":", 1)[1]))
        m.reset_parameters(generator)
        return LoadedModel(m, f"{model} (seed {seed})")
    if model is None:
        shipped = shipped_model_dir()
        if shipped is None:
            raise FileNotFoundError(
                f"no model given and no shipped model at {SHIPPED_MODEL_DIR}; pass --model DIR "
                "(a checkpoint directory), --model random:PRESET, or --options O.json --weights W.hdf5"
            )
        return LoadedModel(load_checkpoint(shipped), f"shipped:{shipped.name}")
    folder = Path(model).expanduser()
    if not folder.is_dir():
        what = "a file" if folder.exists() else "no such folder"
        raise FileNotFoundError(
            f"--model {model}: {what}. --model takes a model folder (model.safetensors + options.json, e.g. "
            f"{SHIPPED_MODEL_DIR}), the folder of a released ELMo that `probing-lab download small` writes "
            "(options.json + weights.hdf5), a training run's checkpoint or snapshot, or random:PRESET"
        )
    if not (folder / CHECKPOINT_WEIGHTS).is_file() and all((folder / f).is_file() for f in RELEASED_FILES):
        return LoadedModel(load_hdf5_model(folder / RELEASED_FILES[0], folder / RELEASED_FILES[1]), f"hdf5:{folder}")
    if (folder / "lm.safetensors").is_file():  # a training checkpoint or snapshot: its biLM
        from .training.checkpoint import load_lm

        return LoadedModel(load_lm(model)[0].bilm, f"snapshot:{model}")
    return LoadedModel(load_checkpoint(model), f"checkpoint:{model}")
