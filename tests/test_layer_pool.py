"""Layer entries probed side by side (probing.layer_pool): the numbers do not depend on how many
workers ran them, each fit runs on one thread, and a worker's error reaches the caller."""

from __future__ import annotations

import json

import pytest
import torch
from test_probing import _tiny_treebank

from probing_lab.probing.experiment import run_experiment
from probing_lab.probing.layer_pool import LayerJobs, probe_jobs, run_runners


class _Report:
    def __init__(self, workers: int):
        self.workers, self.said = workers, []

    def layer_done(self, message: str) -> None:
        self.said.append(message)


def _threads_and_double(key: str) -> dict:
    if key == "bad":
        raise ValueError("layer bad: no such rows")
    return {"threads": torch.get_num_threads(), "value": 2 * int(key)}


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_every_layer_is_fit_on_one_thread_and_returned_in_order(workers):
    report = _Report(workers)
    before = torch.get_num_threads()
    say = lambda k, e: f"layer {k}: {e['value']}"  # noqa: E731
    results = probe_jobs([LayerJobs(["3", "1", "2"], _threads_and_double, say)], report)[0]
    assert list(results) == ["3", "1", "2"] and [e["value"] for e in results.values()] == [6, 2, 4]
    assert {e["threads"] for e in results.values()} == {1 if workers > 1 else before}  # workers: one thread each
    said = ["layer 3: 6", "layer 1: 2", "layer 2: 4"]  # as each finishes: in order with one worker
    assert report.said == said if workers == 1 else sorted(report.said) == sorted(said)
    assert torch.get_num_threads() == before  # the caller's setting is untouched


@pytest.mark.parametrize("workers", [1, 2])
def test_an_error_in_a_layer_reaches_the_caller(workers):
    with pytest.raises(ValueError, match="layer bad: no such rows"):
        probe_jobs([LayerJobs(["1", "bad"], _threads_and_double, lambda k, e: "")], _Report(workers))


def _triple(key: str) -> dict:
    return {"threads": torch.get_num_threads(), "value": 3 * int(key)}


@pytest.mark.parametrize("workers", [1, 2])
def test_two_jobs_share_the_pool_and_each_gets_its_own_entries(workers):
    # a model's entries and its random-init baseline's: one pool, each job's results as if alone, labelled lines
    report = _Report(workers)
    say = lambda k, e: f"  layer {k}: {e['value']}"  # noqa: E731
    jobs = [LayerJobs(["2", "1"], _threads_and_double, say), LayerJobs(["1", "4"], _triple, say, "random init")]
    model, baseline = probe_jobs(jobs, report)
    assert model == probe_jobs([LayerJobs(["2", "1"], _threads_and_double, say)], _Report(workers))[0]
    assert [e["value"] for e in model.values()] == [4, 2] and list(baseline) == ["1", "4"]
    assert [e["value"] for e in baseline.values()] == [3, 12]
    said = ["  layer 2: 4", "  layer 1: 2", "  random init layer 1: 3", "  random init layer 4: 12"]
    assert report.said == said if workers == 1 else sorted(report.said) == sorted(said)


def _runner(keys):
    entries = yield LayerJobs(keys, _threads_and_double, lambda k, e: "")
    return {k: e["value"] for k, e in entries.items()}, {"extra": len(entries)}


def test_runners_yield_their_jobs_once_and_get_their_entries_back():
    done_already = ({"0": 0}, {"extra": "its own work"})  # a runner that fits no layer entries (arc, wsd)
    out = run_runners([_runner(["1", "2"]), done_already, _runner(["3"])], ["", "", "random init"], _Report(2))
    assert out == [({"1": 2, "2": 4}, {"extra": 2}), done_already, ({"3": 6}, {"extra": 1})]

    def greedy():
        yield LayerJobs(["1"], _threads_and_double, lambda k, e: "")
        yield LayerJobs(["2"], _threads_and_double, lambda k, e: "")

    with pytest.raises(RuntimeError, match="yields its layer jobs once"):
        run_runners([greedy()], [""], _Report(1))


def test_a_run_gives_the_same_numbers_with_one_worker_or_two(tmp_path):
    data = _tiny_treebank(tmp_path / "data")
    exp = {"name": "tiny", "task": "upos", "dataset": "ewt", "layers": [0, 1, "1f", "mix"], "probe": {"epochs": 3}}
    metrics, before = [], torch.get_num_threads()
    for workers in (1, 2):  # one worker on one thread (--threads 1), two workers (--threads 2)
        torch.set_num_threads(workers)
        run = run_experiment(
            exp,
            model="random:cpu-tiny",
            out=tmp_path / f"run{workers}",
            data_dir=data,
            cache_dir=tmp_path / "cache",
            progress=False,
            log=lambda m: None,
            workers=workers,
        )
        metrics.append(json.loads((run.path / "metrics.json").read_text()))
    torch.set_num_threads(before)
    one, two = metrics
    for key in one["layers"]:
        for field in ("score", "control_score", "mdl_bits", "dev_score", "epochs", "mix_weights"):
            assert one["layers"][key].get(field) == two["layers"][key].get(field), (key, field)
    assert one["baselines"] == two["baselines"]


def _cached_arrays(cache) -> dict:
    import numpy as np

    return {d.name: np.load(d / "layers.npy") for d in sorted(cache.iterdir()) if (d / "meta.json").is_file()}


def test_the_model_and_its_random_init_baseline_are_extracted_side_by_side_into_the_same_cache(tmp_path):
    """Two workers and nothing cached: both models' features extracted at once (a forked process for the
    random-init model), and the cache holds the same files, bit for bit, as one after the other."""
    import numpy as np

    data = _tiny_treebank(tmp_path / "data")
    exp = {"name": "tiny", "task": "upos", "dataset": "ewt", "layers": [0, 1], "probe": {"epochs": 2}, "mdl": False}
    runs, before = {}, torch.get_num_threads()
    try:
        for workers in (1, 2):
            torch.set_num_threads(workers)
            run = run_experiment(
                exp,
                model="random:cpu-tiny",
                model_seed=1,  # not the random-init baseline's seed (the experiment's, 0): two models
                out=tmp_path / f"run{workers}",
                data_dir=data,
                cache_dir=tmp_path / f"cache{workers}",
                progress=False,
                log=lambda m: None,
                workers=workers,
            )
            runs[workers] = json.loads((run.path / "metrics.json").read_text())
            assert torch.get_num_threads() == workers  # the extraction's one thread was given back
    finally:
        torch.set_num_threads(before)
    assert "extraction side by side" not in runs[1]["timing"]
    assert runs[2]["timing"]["extraction side by side"] > 0
    one, two = _cached_arrays(tmp_path / "cache1"), _cached_arrays(tmp_path / "cache2")
    # (train, dev = test: the tiny treebank's dev and test are the same sentences) x (model, random init)
    assert len(one) == 4 and one.keys() == two.keys()
    assert all(np.array_equal(one[k], two[k]) for k in one)
    assert runs[1]["baselines"] == runs[2]["baselines"]
    scores = [{k: v["score"] for k, v in run["layers"].items()} for run in (runs[1], runs[2])]
    assert scores[0] == scores[1]


def test_a_failed_side_extraction_is_done_again_by_the_run_itself(tmp_path, monkeypatch):
    """The forked extraction dies: its features are missing, so the run extracts them itself
    afterwards and finishes as usual."""
    import os

    from probing_lab.features import cache
    from probing_lab.features.cache import is_cached
    from probing_lab.probing import splits

    parent, extracted = os.getpid(), []
    side, later = cache.extract_features, splits.extract_features

    def failing_in_the_child(encoder, words, **kwargs):
        if os.getpid() != parent:
            raise RuntimeError("the side extraction died")
        return side(encoder, words, **kwargs)

    def recorded(encoder, words, cache_dir, progress):
        if not is_cached(encoder, words, cache_dir):
            extracted.append(encoder.name)
        return later(encoder, words, cache_dir=cache_dir, progress=progress)

    monkeypatch.setattr(cache, "extract_features", failing_in_the_child)
    monkeypatch.setattr(splits, "extract_features", recorded)
    data = _tiny_treebank(tmp_path / "data")
    exp = {"name": "tiny", "task": "upos", "dataset": "ewt", "layers": [0], "probe": {"epochs": 2}, "mdl": False}
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        run = run_experiment(
            exp,
            model="random:cpu-tiny",
            model_seed=1,
            out=tmp_path / "run",
            data_dir=data,
            cache_dir=tmp_path / "cache",
            progress=False,
            log=lambda m: None,
            workers=2,
        )
    finally:
        torch.set_num_threads(before)
    metrics = json.loads((run.path / "metrics.json").read_text())
    assert "extraction side by side" in metrics["timing"]
    assert len(extracted) == 2  # the second lane's two extractions, done by the run after its process died
    assert metrics["baselines"]["random_init"]["0"] is not None
    assert len(_cached_arrays(tmp_path / "cache")) == 4


def test_jobs_listed_twice_or_cached_already_are_extracted_once(tmp_path):
    from probing_lab.elmo import ElmoBiLM, get_preset
    from probing_lab.features.cache import ElmoEncoder, extract_side_by_side

    model = ElmoBiLM(get_preset("cpu-tiny"))
    words = [["a", "cat", "sat"], ["dogs", "run", "."]]
    jobs = [(ElmoEncoder(model), words), (ElmoEncoder(model), words), (ElmoEncoder(model), words[:1])]
    assert extract_side_by_side(jobs, tmp_path, workers=2, progress=False) == 2
    assert len(_cached_arrays(tmp_path)) == 2 and not list(tmp_path.glob("*.partial"))
    assert extract_side_by_side(jobs, tmp_path, workers=2, progress=False) == 0


def test_two_processes_extracting_the_same_features_at_once_write_them_once(tmp_path):
    """Two runs on one cache (two commands, two sweeps) wanting the same features: the second waits for
    the first's and reads them; no lock or partial files stay behind."""
    import multiprocessing

    import numpy as np

    from probing_lab.elmo import ElmoBiLM, get_preset
    from probing_lab.features.cache import ElmoEncoder, extract_features

    model = ElmoBiLM(get_preset("cpu-tiny"))
    words = [["a", "cat", "sat", "on", "the", "mat"] * 3, ["dogs", "run", "."]] * 40

    def extract() -> None:
        torch.set_num_threads(1)  # a forked process on the parent's OpenMP threads can hang
        extract_features(ElmoEncoder(model), words, cache_dir=tmp_path, progress=False, chunk_sentences=8)

    context = multiprocessing.get_context("fork")
    others = [context.Process(target=extract) for _ in range(2)]
    before = torch.get_num_threads()
    try:  # extract() sets this process's threads to one: given back even if an assertion fails
        for other in others:
            other.start()
        extract()
        for other in others:
            other.join()
            assert other.exitcode == 0
        (key,) = [p.name for p in tmp_path.iterdir()]  # one folder, nothing else
        alone = extract_features(
            ElmoEncoder(model), words, cache_dir=tmp_path / "alone", progress=False, chunk_sentences=8
        )
    finally:
        torch.set_num_threads(before)
    assert np.array_equal(np.load(tmp_path / key / "layers.npy"), np.asarray(alone.layers))
