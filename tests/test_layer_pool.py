"""Layer entries probed side by side (probing.layer_pool): the numbers do not depend on how many
workers ran them, each fit runs on one thread, and a worker's error reaches the caller."""

from __future__ import annotations

import json

import pytest
import torch
from test_probing import _tiny_treebank

from probing_lab.probing.experiment import run_experiment
from probing_lab.probing.layer_pool import probe_layers


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
    results = probe_layers(["3", "1", "2"], _threads_and_double, report, lambda k, e: f"layer {k}: {e['value']}")
    assert list(results) == ["3", "1", "2"] and [e["value"] for e in results.values()] == [6, 2, 4]
    assert {e["threads"] for e in results.values()} == {1 if workers > 1 else before}  # workers: one thread each
    said = ["layer 3: 6", "layer 1: 2", "layer 2: 4"]  # as each finishes: in order with one worker
    assert report.said == said if workers == 1 else sorted(report.said) == sorted(said)
    assert torch.get_num_threads() == before  # the caller's setting is untouched


@pytest.mark.parametrize("workers", [1, 2])
def test_an_error_in_a_layer_reaches_the_caller(workers):
    with pytest.raises(ValueError, match="layer bad: no such rows"):
        probe_layers(["1", "bad"], _threads_and_double, _Report(workers), lambda k, e: "")


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
