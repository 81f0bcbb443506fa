"""Large own files in bounded memory: the compact token table, layer rows read from the cache a
chunk at a time, and the probe trained on them giving what the in-memory probe gives."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from conftest import TINY_MODEL
from test_own_data import tokens_file

from probing_lab.datasets.files import read_labelled_file, read_token_table
from probing_lab.elmo import ElmoBiLM, ElmoOptions
from probing_lab.features.cache import ElmoEncoder, extract_features
from probing_lab.features.layer_rows import LayerRows
from probing_lab.probing import rows
from probing_lab.probing.experiment import run_experiment
from probing_lab.probing.probes import ProbeConfig, fit_probe
from probing_lab.probing.rows import _standardise, as_rows


@pytest.fixture(scope="module")
def features(tmp_path_factory):
    model = ElmoBiLM(ElmoOptions.from_dict(TINY_MODEL))
    model.reset_parameters(torch.Generator().manual_seed(0))
    sentences = [["the", "cat", "sat"], ["a", "dog", "slept", "here", "."], ["birds", "fly"]] * 5
    return extract_features(
        ElmoEncoder(model), sentences, cache_dir=tmp_path_factory.mktemp("cache"), chunk_sentences=4, progress=False
    )


def test_token_table_holds_what_the_sentence_reader_reads(tmp_path):
    path = tokens_file(tmp_path / "a.tokens", n=30)
    sentences, lines = read_labelled_file(path, "tokens")
    table = read_token_table(path, "tokens")
    assert len(table) == len(sentences) and table.lines.tolist() == lines
    assert [list(w) for w in table] == [s.words for s in sentences]
    assert table.words == [t.form for s in sentences for t in s.tokens]
    assert table.token_labels() == [t.extra.get("token_label") for s in sentences for t in s.tokens]
    assert None in table.token_labels()  # the full stops are "_": unlabelled
    part = table.select([4, 0, 2])
    assert [list(w) for w in part] == [sentences[i].words for i in (4, 0, 2)]
    assert part.lines.tolist() == [lines[i] for i in (4, 0, 2)]
    assert [list(w) for w in table[1:3]] == [s.words for s in sentences[1:3]]
    assert table.word_ids.itemsize + table.label_ids.itemsize == 8  # bytes a token, whatever the file's size


@pytest.mark.parametrize("key", ["0", "1", "2f", "2b", "mean", "mix"])
def test_layer_rows_read_in_chunks_what_the_whole_layer_holds(features, key):
    if key == "mix":
        whole = np.transpose(np.asarray(features.layers, dtype=np.float32), (1, 0, 2))
    else:
        whole = features.layer(key)
    rows = LayerRows(features, key)
    assert rows.shape == whole.shape
    np.testing.assert_array_equal(
        np.concatenate([rows.read(lo, min(lo + 7, len(rows))) for lo in range(0, len(rows), 7)]), whole
    )
    part = rows.read(2, 9)  # what every probe fit expects: float32 rows, one after the other in memory
    assert part.dtype == np.float32 and part.flags["C_CONTIGUOUS"] and part.shape == (7, *whole.shape[1:])
    picked = np.array([3, 4, 9, 30])
    view = rows[picked]
    assert len(view) == 4
    np.testing.assert_array_equal(view.read(0, 4), whole[picked])
    np.testing.assert_array_equal(view[1:3].read(0, 2), whole[picked[1:3]])
    # take: any rows, in any order, repeated, through the map it keeps open; not pickled with the rows
    some = np.array([9, 0, 9, 30, 2])
    np.testing.assert_array_equal(rows.take(some), whole[some])
    np.testing.assert_array_equal(view.take(np.array([3, 0, 0])), whole[picked[[3, 0, 0]]])
    assert rows._map is not None and pickle.loads(pickle.dumps(rows))._map is None


def test_the_streamed_mean_and_deviation_are_the_in_memory_ones(features, monkeypatch):
    monkeypatch.setattr(LayerRows, "CHUNK_BYTES", 10 * 4 * features.layers.shape[-1])  # 10 rows a chunk
    rows = LayerRows(features, "1")
    assert rows.chunk_rows == 1024  # the floor: a chunk is never tiny
    monkeypatch.setattr(rows, "chunk_rows", 10)
    mean, std = _standardise(rows)
    whole = torch.as_tensor(features.layer("1"))
    torch.testing.assert_close(mean, whole.mean(0), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(std, whole.std(0).clamp_min(1e-4), rtol=1e-4, atol=1e-5)


class _Chunked:
    """An array as rows on disk would be seen: ``chunk_rows`` at a time."""

    def __init__(self, X, chunk_rows):
        self.X, self.chunk_rows, self.shape = X, chunk_rows, X.shape

    def __len__(self):
        return len(self.X)

    def __getitem__(self, item):
        return _Chunked(self.X[item], self.chunk_rows)

    def read(self, lo, hi):
        assert hi - lo <= self.chunk_rows  # never more than a chunk in memory
        return self.X[lo:hi]


def test_a_probe_trained_chunk_by_chunk_learns_what_the_in_memory_probe_learns():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 16)).astype(np.float32)
    y = (X[:, 3] + 0.5 * X[:, 7] > 0).astype(np.int64)
    Xd, yd = X[2500:], y[2500:]
    config = ProbeConfig(epochs=8, batch_size=128)
    in_memory = fit_probe(X[:2500], y[:2500], Xd, yd, 2, config)
    chunked = fit_probe(_Chunked(X[:2500], 600), y[:2500], _Chunked(Xd, 200), yd, 2, config)
    assert in_memory.dev_accuracy > 0.95 and chunked.dev_accuracy > 0.95
    assert abs(chunked.accuracy(_Chunked(Xd, 200), yd) - in_memory.accuracy(Xd, yd)) < 0.03
    assert as_rows(X).chunk_rows == len(X)  # an array in memory is one chunk: the old behaviour exactly


def test_a_layer_is_read_into_memory_only_up_to_a_size(features, monkeypatch):
    # read once for all of a layer's fits when small; a larger one (a big own file) streams from disk
    layer = LayerRows(features, "1")
    assert isinstance(rows.in_memory(layer), np.ndarray) and np.array_equal(
        rows.in_memory(layer), layer.read(0, len(layer))
    )
    monkeypatch.setattr(rows, "IN_MEMORY_BYTES", 4 * int(np.prod(layer.shape)) - 1)
    assert rows.in_memory(layer) is layer


def test_a_tokens_file_probed_in_small_chunks_scores_as_in_one(tmp_path, monkeypatch):
    path = tokens_file(tmp_path / "a.tokens", n=300)
    exp = {
        "dataset": {"format": "tokens", "train": str(path)},
        "layers": [0, 1, "mix"],
        "control": True,
        "mdl": False,
        "random_init": False,
        "probe": {"epochs": 30},
    }
    model = ElmoBiLM(ElmoOptions.from_dict(TINY_MODEL))
    model.reset_parameters(torch.Generator().manual_seed(0))
    from probing_lab.elmo import save_checkpoint

    tiny = str(save_checkpoint(model, tmp_path / "tiny"))

    def run(name):
        return run_experiment(
            exp, model=tiny, out=tmp_path / name, cache_dir=tmp_path / "cache", progress=False, log=lambda m: None
        )

    whole = run("whole")
    monkeypatch.setattr(rows, "IN_MEMORY_BYTES", 0)  # every layer stays on disk, read a chunk at a time
    monkeypatch.setattr(LayerRows, "CHUNK_BYTES", 0)
    monkeypatch.setattr(LayerRows, "MIN_CHUNK_ROWS", 50)  # 50 rows a chunk: several per epoch and in dev
    chunked = run("chunked")
    assert whole.metrics["tokens"] == chunked.metrics["tokens"]
    assert chunked.metrics["tokens"]["train"] > 500 and chunked.metrics["tokens"]["dev"] > 50
    for key in ("0", "1", "mix"):
        # DET / NOUN / VERB from the words themselves, either way (the test set is 90 tokens)
        assert chunked.layers[key].score > 0.85 and whole.layers[key].score > 0.85
        assert chunked.layers[key].score == pytest.approx(whole.layers[key].score, abs=0.1)


@pytest.mark.parametrize("kind", ["linear", "rank"])
@pytest.mark.parametrize("key", ["1", "mix"])
def test_a_span_probe_reads_its_tokens_from_the_cache_as_from_memory(features, key, kind):
    """Span probes standardise each minibatch's rows as they read them (``StandardisedTokens``): from the
    cache's memory map they train the probe the whole layer in memory trains, bit for bit, and the rows
    read are the whole standardised layer's rows."""
    from probing_lab.probing.span_batches import StandardisedTokens
    from probing_lab.probing.span_probe import SpanInputs, _token_statistics, fit_span_probes

    on_disk = LayerRows(features, key)
    whole = on_disk.read(0, len(on_disk))
    rng = np.random.default_rng(0)
    starts = rng.integers(0, len(whole) - 4, 60)
    spans = np.stack([starts, starts + rng.integers(1, 4, 60)], 1)
    units = starts // 5
    labels = [rng.integers(0, 3, 60) for _ in range(2)]
    config = ProbeConfig(kind=kind, lr=0.01, epochs=3, batch_size=16, mix=key == "mix")
    fits = [
        fit_span_probes(
            SpanInputs(t, spans[:40], None, units[:40]),
            [y[:40] for y in labels],
            SpanInputs(t, spans[40:], None, units[40:]),
            [y[40:] for y in labels],
            3,
            config,
        )
        for t in (on_disk, whole)
    ]
    for a, b in zip(*fits):
        assert (a.epochs_run, a.history) == (b.epochs_run, b.history)
        for (name, p), q in zip(a.module.state_dict().items(), b.module.state_dict().values()):
            assert torch.equal(p, q), name
    mean, std = _token_statistics(SpanInputs(whole, spans))
    assert all(torch.equal(s, t) for s, t in zip((mean, std), _token_statistics(SpanInputs(on_disk, spans))))
    some = torch.tensor([5, 0, 5, 17])
    expected = rows.standardise(torch.from_numpy(whole.copy()), mean, std)[some]
    for tokens in (on_disk, whole, torch.from_numpy(whole)):  # a tensor is an array here (its take flattens)
        assert torch.equal(StandardisedTokens(tokens, mean, std).take(some), expected)
