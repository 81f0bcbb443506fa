import dataclasses
import json

import h5py
import numpy as np
import pytest
import torch

from probing_lab.elmo import (
    ElmoBiLM,
    Embedder,
    WeightsError,
    get_preset,
    load_checkpoint,
    load_hdf5_model,
    save_checkpoint,
    save_hdf5_weights,
)

SENTENCES = [["The", "bank", "closed", "."], ["We", "sat", "on", "the", "river", "bank", "."]]


def tiny_model(seed=0, **overrides):
    model = ElmoBiLM(dataclasses.replace(get_preset("cpu-tiny"), **overrides))
    model.reset_parameters(torch.Generator().manual_seed(seed))
    with torch.no_grad():  # non-trivial biases everywhere so that conversions are exercised
        for p in model.parameters():
            p.add_(0.01 * torch.randn(p.shape, generator=torch.Generator().manual_seed(seed + p.numel())))
    return model


def outputs(model):
    return Embedder(model).embed(SENTENCES)


def write_pair(model, tmp_path):
    model.options.save(tmp_path / "options.json")
    save_hdf5_weights(model, tmp_path / "weights.hdf5")
    return tmp_path / "options.json", tmp_path / "weights.hdf5"


def test_hdf5_round_trip_identical(tmp_path):
    model = tiny_model()
    loaded = load_hdf5_model(*write_pair(model, tmp_path))
    for a, b in zip(outputs(model), outputs(loaded)):
        np.testing.assert_array_equal(a, b)


def test_hdf5_layout_is_the_released_one(golden, tmp_path):
    model = load_hdf5_model(golden / "options.json", golden / "lm_weights.hdf5")
    save_hdf5_weights(model, tmp_path / "w.hdf5")
    with h5py.File(golden / "lm_weights.hdf5") as ref, h5py.File(tmp_path / "w.hdf5") as mine:
        names = []
        ref.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        for n in names:
            np.testing.assert_allclose(mine[n][...], ref[n][...], atol=1e-7, err_msg=n)


def test_checkpoint_round_trip_identical(tmp_path):
    model = tiny_model()
    save_checkpoint(model, tmp_path / "ckpt", card={"note": "test"})
    card = json.loads((tmp_path / "ckpt" / "model_card.json").read_text())
    assert card["parameters"] == model.count_parameters() and len(card["weights_sha256"]) == 64
    for a, b in zip(outputs(model), outputs(load_checkpoint(tmp_path / "ckpt"))):
        np.testing.assert_array_equal(a, b)


def _edit(path, fn):
    with h5py.File(path, "a") as f:
        fn(f)


def test_missing_dataset_named(tmp_path):
    opts, w = write_pair(tiny_model(), tmp_path)
    _edit(w, lambda f: f.__delitem__("CNN_proj/W_proj"))
    with pytest.raises(WeightsError, match="missing dataset 'CNN_proj/W_proj'"):
        load_hdf5_model(opts, w)


def test_wrong_shape_named(tmp_path):
    opts, w = write_pair(tiny_model(), tmp_path)
    other = tiny_model(lstm_dim=128)
    save_hdf5_weights(other, w)
    with pytest.raises(
        WeightsError, match=r"RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0' has shape \(128, 512\), expected \(128, 1024\)"
    ):
        load_hdf5_model(opts, w)


def test_wrong_layer_count_named(tmp_path):
    opts, w = write_pair(tiny_model(n_layers=3), tmp_path)
    tiny_model().options.save(opts)
    with pytest.raises(WeightsError, match=r"has LSTM layer 2 \(.*\) but the options say lstm.n_layers = 2"):
        load_hdf5_model(opts, w)


def test_not_hdf5_and_truncated(tmp_path):
    opts, w = write_pair(tiny_model(), tmp_path)
    data = w.read_bytes()
    w.write_bytes(data[: len(data) // 2])
    with pytest.raises(WeightsError, match="truncated|not a readable hdf5"):
        load_hdf5_model(opts, w)
    w.write_text("definitely not hdf5")
    with pytest.raises(WeightsError, match="not a readable hdf5"):
        load_hdf5_model(opts, w)
    with pytest.raises(FileNotFoundError, match="weight file not found"):
        load_hdf5_model(opts, tmp_path / "nope.hdf5")


def test_checkpoint_errors(tmp_path):
    save_checkpoint(tiny_model(), tmp_path / "a")
    tiny_model(lstm_dim=128).options.save(tmp_path / "a" / "options.json")
    with pytest.raises(WeightsError, match="expected .* from options.json"):
        load_checkpoint(tmp_path / "a")
    save_checkpoint(tiny_model(), tmp_path / "b")
    (tmp_path / "b" / "model.safetensors").write_bytes(b"\x00" * 20)
    with pytest.raises(WeightsError, match="SHA-256 differs from the weights_sha256 recorded in model_card.json"):
        load_checkpoint(tmp_path / "b")
    (tmp_path / "b" / "model_card.json").unlink()  # no recorded hash: the reader's own error
    with pytest.raises(WeightsError, match="truncated or corrupt"):
        load_checkpoint(tmp_path / "b")
    with pytest.raises(FileNotFoundError, match="no options.json"):
        load_checkpoint(tmp_path / "empty")


def test_weights_changed_after_export_are_caught_with_the_header_intact(tmp_path):
    import os

    save_checkpoint(tiny_model(), tmp_path / "m")
    path = tmp_path / "m" / "model.safetensors"
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = os.urandom(64)  # the header still parses; the numbers do not
    path.write_bytes(bytes(data))
    with pytest.raises(WeightsError, match="model.safetensors: its SHA-256 differs"):
        load_checkpoint(tmp_path / "m")
