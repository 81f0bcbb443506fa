"""ELMo in PyTorch: the model, its configuration and the released weight format."""

from .bilm import BiLMOutput, ElmoBiLM
from .chars import batch_to_ids, token_to_char_ids
from .config import PRESETS, ElmoOptions, OptionsError, get_preset, preset_of
from .embedder import Embedder
from .modules import ScalarMix
from .weights import (
    WeightsError,
    load_checkpoint,
    load_hdf5_model,
    load_hdf5_weights,
    save_checkpoint,
    save_hdf5_weights,
)

__all__ = [
    "BiLMOutput",
    "ElmoBiLM",
    "ElmoOptions",
    "Embedder",
    "OptionsError",
    "PRESETS",
    "ScalarMix",
    "WeightsError",
    "batch_to_ids",
    "get_preset",
    "preset_of",
    "load_checkpoint",
    "load_hdf5_model",
    "load_hdf5_weights",
    "save_checkpoint",
    "save_hdf5_weights",
    "token_to_char_ids",
]
