"""Weights: the released AllenNLP/bilm-tf ``weights.hdf5`` layout (read and write) and the
lab's own checkpoint directory (``model.safetensors`` + ``options.json`` + ``model_card.json``).

hdf5 conversion rules (bilm-tf -> this model):

- ``char_embed (261, d)``: stored as is; the zero "no token" row is prepended at run time.
- ``CNN/W_cnn_i (1, width, d, n)`` -> Conv1d weight ``(n, d, width)``; ``CNN/b_cnn_i (n,)``.
- ``CNN_high_k/W_carry, W_transform`` (x @ W) and biases: as is (same highway form).
- ``CNN_proj/W_proj (n_filters, proj)``, ``b_proj``: as is.
- ``RNN_d/RNN/MultiRNNCell/Cell{l}/LSTMCell/W_0 (in + proj, 4*cell)``: rows ``[:in]`` are the
  input kernel, ``[in:]`` the recurrent kernel; columns reorder from TF's i, j, f, o to
  i, f, j, o; ``B`` likewise, plus 1.0 on the forget gate (TF adds it at run time);
  ``W_P_0 (cell, proj)`` as is. d = 0 forward, 1 backward.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import torch

from ..fileio import atomic_path, file_sha256
from .bilm import ElmoBiLM
from .config import ElmoOptions

FORGET_BIAS = 1.0


class WeightsError(ValueError):
    """A weight file that cannot be read or does not fit the options."""


def _lstm_prefix(direction: int, layer: int) -> str:
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


def _tf_to_torch_gates(w: np.ndarray) -> np.ndarray:
    i, j, f, o = np.split(w, 4, axis=-1)
    return np.concatenate([i, f, j, o], axis=-1)


def _torch_to_tf_gates(w: np.ndarray) -> np.ndarray:
    i, f, j, o = np.split(w, 4, axis=-1)
    return np.concatenate([i, j, f, o], axis=-1)


def expected_hdf5_shapes(options: ElmoOptions) -> dict[str, tuple[int, ...]]:
    """Every dataset the released layout has for these options, with its shape."""
    o = options
    shapes: dict[str, tuple[int, ...]] = {"char_embed": (261, o.char_dim)}
    for i, (width, n) in enumerate(o.filters):
        shapes[f"CNN/W_cnn_{i}"] = (1, width, o.char_dim, n)
        shapes[f"CNN/b_cnn_{i}"] = (n,)
    for k in range(o.n_highway):
        for part in ("carry", "transform"):
            shapes[f"CNN_high_{k}/W_{part}"] = (o.n_filters, o.n_filters)
            shapes[f"CNN_high_{k}/b_{part}"] = (o.n_filters,)
    shapes["CNN_proj/W_proj"] = (o.n_filters, o.projection_dim)
    shapes["CNN_proj/b_proj"] = (o.projection_dim,)
    for d in range(2):
        for layer in range(o.n_layers):
            p = _lstm_prefix(d, layer)
            shapes[f"{p}/W_0"] = (2 * o.projection_dim, 4 * o.lstm_dim)
            shapes[f"{p}/B"] = (4 * o.lstm_dim,)
            shapes[f"{p}/W_P_0"] = (o.lstm_dim, o.projection_dim)
    return shapes


def _open_hdf5(path: Path, mode: str = "r"):
    import h5py

    if mode == "r":
        if not path.is_file():
            raise FileNotFoundError(f"weight file not found: {path}")
        try:
            return h5py.File(path, "r")
        except OSError as e:
            raise WeightsError(
                f"{path}: not a readable hdf5 file ({e}); expected an ELMo weights.hdf5 "
                "(AllenNLP/bilm-tf layout). Re-download or re-export it."
            ) from None
    return h5py.File(path, mode)


def read_hdf5_arrays(path: str | Path, options: ElmoOptions) -> dict[str, np.ndarray]:
    """Read and validate every dataset of a released-layout weight file against ``options``."""
    path = Path(path)
    expected = expected_hdf5_shapes(options)
    arrays: dict[str, np.ndarray] = {}
    with _open_hdf5(path) as f:
        # Structure first: a wrong layer count or filter list gives one clear message.
        extra_layer = _lstm_prefix(0, options.n_layers)
        if extra_layer in f:
            raise WeightsError(
                f"{path}: has LSTM layer {options.n_layers} ({extra_layer}) but the options say "
                f"lstm.n_layers = {options.n_layers}; use the options.json that came with these weights"
            )
        if f"CNN_high_{options.n_highway}" in f:
            raise WeightsError(
                f"{path}: has highway layer CNN_high_{options.n_highway} but the options say "
                f"char_cnn.n_highway = {options.n_highway}"
            )
        if f"CNN/W_cnn_{len(options.filters)}" in f:
            raise WeightsError(
                f"{path}: has more convolutions than the {len(options.filters)} filters in char_cnn.filters"
            )
        for name, shape in expected.items():
            if name not in f:
                raise WeightsError(
                    f"{path}: missing dataset '{name}' (expected shape {shape}); the file is not "
                    "an ELMo weights.hdf5 for these options"
                )
            dataset = f[name]
            if tuple(dataset.shape) != shape:
                raise WeightsError(
                    f"{path}: dataset '{name}' has shape {tuple(dataset.shape)}, expected {shape} "
                    "from the options; the options.json and weights.hdf5 do not belong together"
                )
            try:
                arrays[name] = np.asarray(dataset[...], dtype=np.float32)
            except OSError as e:
                raise WeightsError(
                    f"{path}: dataset '{name}' cannot be read ({e}); the file is truncated or corrupt"
                ) from None
            if not np.isfinite(arrays[name]).all():
                raise WeightsError(f"{path}: dataset '{name}' contains NaN or infinite values")
    return arrays


def load_hdf5_weights(model: ElmoBiLM, path: str | Path) -> None:
    """Load a released ``weights.hdf5`` into ``model`` (whose options must match the file)."""
    o = model.options
    a = read_hdf5_arrays(path, o)
    enc = model.token_encoder
    with torch.no_grad():
        enc.char_embed.copy_(torch.from_numpy(a["char_embed"]))
        for i, conv in enumerate(enc.convs):
            conv.weight.copy_(torch.from_numpy(a[f"CNN/W_cnn_{i}"][0].transpose(2, 1, 0)))
            conv.bias.copy_(torch.from_numpy(a[f"CNN/b_cnn_{i}"]))
        for k, hw in enumerate(enc.highways):
            for part in ("carry", "transform"):
                getattr(hw, f"w_{part}").copy_(torch.from_numpy(a[f"CNN_high_{k}/W_{part}"]))
                getattr(hw, f"b_{part}").copy_(torch.from_numpy(a[f"CNN_high_{k}/b_{part}"]))
        enc.w_proj.copy_(torch.from_numpy(a["CNN_proj/W_proj"]))
        enc.b_proj.copy_(torch.from_numpy(a["CNN_proj/b_proj"]))
        c, p = o.lstm_dim, o.projection_dim
        for l, layer in enumerate(model.lstm.layers):
            for d in range(2):
                pre = _lstm_prefix(d, l)
                w = _tf_to_torch_gates(a[f"{pre}/W_0"])
                b = _tf_to_torch_gates(a[f"{pre}/B"]).copy()
                b[c : 2 * c] += FORGET_BIAS
                layer.input_weight[d].copy_(torch.from_numpy(w[:p]))
                layer.hidden_weight[d].copy_(torch.from_numpy(w[p:]))
                layer.bias[d].copy_(torch.from_numpy(b))
                layer.proj_weight[d].copy_(torch.from_numpy(a[f"{pre}/W_P_0"]))


def hdf5_arrays(model: ElmoBiLM) -> dict[str, np.ndarray]:
    """The model's weights in the released layout (inverse of :func:`load_hdf5_weights`)."""
    o = model.options
    enc = model.token_encoder
    t = lambda x: x.detach().cpu().float().numpy()  # noqa: E731
    out: dict[str, np.ndarray] = {"char_embed": t(enc.char_embed)}
    for i, conv in enumerate(enc.convs):
        out[f"CNN/W_cnn_{i}"] = t(conv.weight).transpose(2, 1, 0)[None]
        out[f"CNN/b_cnn_{i}"] = t(conv.bias)
    for k, hw in enumerate(enc.highways):
        for part in ("carry", "transform"):
            out[f"CNN_high_{k}/W_{part}"] = t(getattr(hw, f"w_{part}"))
            out[f"CNN_high_{k}/b_{part}"] = t(getattr(hw, f"b_{part}"))
    out["CNN_proj/W_proj"] = t(enc.w_proj)
    out["CNN_proj/b_proj"] = t(enc.b_proj)
    c = o.lstm_dim
    for l, layer in enumerate(model.lstm.layers):
        for d in range(2):
            pre = _lstm_prefix(d, l)
            w = np.concatenate([t(layer.input_weight[d]), t(layer.hidden_weight[d])], axis=0)
            b = t(layer.bias[d]).copy()
            b[c : 2 * c] -= FORGET_BIAS
            out[f"{pre}/W_0"] = _torch_to_tf_gates(w)
            out[f"{pre}/B"] = _torch_to_tf_gates(b)
            out[f"{pre}/W_P_0"] = t(layer.proj_weight[d])
    return out


def save_hdf5_weights(model: ElmoBiLM, path: str | Path) -> None:
    """Write ``weights.hdf5`` in the released layout (loads in AllenNLP and bilm-tf)."""
    path = Path(path)
    with atomic_path(path) as tmp:
        with _open_hdf5(tmp, "w") as f:
            for name, array in hdf5_arrays(model).items():
                f.create_dataset(name, data=np.ascontiguousarray(array, dtype=np.float32))


# --- the lab's own checkpoint -----------------------------------------------------------

CHECKPOINT_WEIGHTS = "model.safetensors"
CHECKPOINT_OPTIONS = "options.json"
CHECKPOINT_CARD = "model_card.json"


def save_checkpoint(
    model: ElmoBiLM, directory: str | Path, card: dict | None = None, dtype: torch.dtype = torch.float32
) -> Path:
    """Save ``model.safetensors`` + ``options.json`` + ``model_card.json`` in ``directory``."""
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to(dtype).contiguous().cpu() for k, v in model.state_dict().items()}
    with atomic_path(directory / CHECKPOINT_WEIGHTS) as tmp:
        save_file(tensors, str(tmp), metadata={"format": "probing-lab-elmo", "dtype": str(dtype)})
    with atomic_path(directory / CHECKPOINT_OPTIONS) as tmp:
        model.options.save(tmp)
    card = dict(card or {})
    card.setdefault("parameters", model.count_parameters())
    card["weights_sha256"] = file_sha256(directory / CHECKPOINT_WEIGHTS)
    with atomic_path(directory / CHECKPOINT_CARD) as tmp:
        tmp.write_text(json.dumps(card, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return directory


_VERIFIED: dict[tuple, str] = {}  # (path, size, mtime) -> sha256: each file version is hashed once


def check_recorded_sha256(path: Path, card_path: Path, key: str) -> None:
    """Compare ``path`` with the SHA-256 its model card recorded under ``key`` at export (nothing to
    check when the card or the key is absent); a mismatch is a WeightsError naming the file. A card
    that is there but is not a JSON object, or records something that is not a SHA-256, is a
    WeightsError naming the card (a broken card must not switch the check off)."""
    if not card_path.is_file():
        return
    try:
        card = json.loads(card_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:  # ValueError: bad JSON or bytes that are not UTF-8
        raise WeightsError(
            f"{card_path}: the model card is not readable JSON ({e}), so the weights' integrity cannot be checked; "
            "restore it (git checkout, or export the model again)"
        ) from None
    if not isinstance(card, dict):
        raise WeightsError(f"{card_path}: the model card is not a JSON object; restore it (or export the model again)")
    expected = card.get(key)
    if expected is None or not path.is_file():
        return
    if not isinstance(expected, str) or not re.fullmatch(r"[0-9a-f]{64}", expected):
        raise WeightsError(
            f"{card_path}: {key} is {expected!r}, not a SHA-256 (64 hex digits): the card is broken, not "
            f"necessarily {path.name}; restore the card (git checkout, or export the model again)"
        )
    stat = path.stat()
    version = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if version not in _VERIFIED:
        _VERIFIED[version] = file_sha256(path)
    if _VERIFIED[version] != expected:
        raise WeightsError(
            f"{path}: its SHA-256 differs from the {key} recorded in {card_path.name} at export, so the file was "
            "changed or corrupted since; restore it (git checkout, or export the model again)"
        )


def load_checkpoint(directory: str | Path) -> ElmoBiLM:
    """Load a checkpoint directory written by :func:`save_checkpoint` (float32 in memory)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    directory = Path(directory)
    for name in (CHECKPOINT_OPTIONS, CHECKPOINT_WEIGHTS):
        if not (directory / name).is_file():
            raise FileNotFoundError(
                f"{directory}: no {name}; a model directory holds {CHECKPOINT_WEIGHTS}, "
                f"{CHECKPOINT_OPTIONS} and {CHECKPOINT_CARD}; a released ELMo's folder holds options.json and "
                "weights.hdf5 (`probing-lab download NAME` writes one)"
            )
    model = ElmoBiLM(ElmoOptions.load(directory / CHECKPOINT_OPTIONS))
    check_recorded_sha256(directory / CHECKPOINT_WEIGHTS, directory / CHECKPOINT_CARD, "weights_sha256")
    try:
        tensors = load_file(str(directory / CHECKPOINT_WEIGHTS))
    except (SafetensorError, OSError) as e:
        raise WeightsError(
            f"{directory / CHECKPOINT_WEIGHTS}: cannot be read ({e}); the file is truncated or corrupt"
        ) from None
    expected = model.state_dict()
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise WeightsError(
            f"{directory / CHECKPOINT_WEIGHTS} does not fit {CHECKPOINT_OPTIONS}: "
            f"missing {missing[:5]}, unexpected {unexpected[:5]}"
        )
    for name, value in expected.items():
        if tuple(tensors[name].shape) != tuple(value.shape):
            raise WeightsError(
                f"{directory / CHECKPOINT_WEIGHTS}: tensor '{name}' has shape {tuple(tensors[name].shape)}, "
                f"expected {tuple(value.shape)} from {CHECKPOINT_OPTIONS}"
            )
    model.load_state_dict({k: v.float() for k, v in tensors.items()})
    return model


def load_hdf5_model(options_path: str | Path, weights_path: str | Path) -> ElmoBiLM:
    """A model from a released ``options.json`` + ``weights.hdf5`` pair."""
    model = ElmoBiLM(ElmoOptions.load(options_path))
    load_hdf5_weights(model, weights_path)
    return model
