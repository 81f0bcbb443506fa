"""``probing-lab sweep`` (issue 36): a grid of experiments x models x seeds, features extracted once,
resumed cell by cell, the same results on a local Ray cluster, and bad grids refused before any work."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import TINY_MODEL
from test_layer_pool import _cached_arrays
from test_own_data import tokens_file

from probing_lab.cli import main
from probing_lab.elmo import ElmoBiLM, ElmoOptions, save_checkpoint
from probing_lab.sweeps import SweepError, run_sweep


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """Two experiments on the same files (so they need the same activations) and two models."""
    root = tmp_path_factory.mktemp("grid")
    model = ElmoBiLM(ElmoOptions.from_dict(TINY_MODEL))
    model.reset_parameters(torch.Generator().manual_seed(0))
    tiny = str(save_checkpoint(model, root / "tiny"))
    files = {
        role: tokens_file(root / f"{role}.tokens", n, seed=i)
        for i, (role, n) in enumerate([("train", 40), ("dev", 10), ("test", 10)])
    }
    experiments = []
    for name, layers in (("first", "[0, 1]"), ("second", "[1, 2]")):
        path = root / f"{name}.toml"
        path.write_text(
            f'name = "{name}"\nlayers = {layers}\nmdl = false\ncontrol = false\n'
            f'[dataset]\nformat = "tokens"\ntrain = "{files["train"]}"\n'
            f'dev = "{files["dev"]}"\ntest = "{files["test"]}"\n'
            "[probe]\nepochs = 2\n",
            encoding="utf-8",
        )
        experiments.append(str(path))
    return root, experiments, [tiny, "random:cpu-tiny"]


def _sweep(grid, out, **more):
    root, experiments, models = grid
    return run_sweep(
        experiments, models, [0, 1], out, cache_dir=root / "cache", log=lambda m: None, progress=False, **more
    )


def test_a_sweep_runs_every_cell_extracts_each_models_tokens_once_and_resumes(grid, tmp_path, capsys):
    root, experiments, models = grid
    table = _sweep(grid, tmp_path / "sweep")
    cells = sorted(p.name for p in (tmp_path / "sweep").iterdir() if (p / "metrics.json").is_file())
    assert len(cells) == 2 * 2 * 2 and "first--tiny--seed0" in cells and "second--random_cpu-tiny--seed1" in cells
    # 2 models x 3 splits: the two experiments and two seeds share every model's activations
    assert len([p for p in (root / "cache").iterdir() if not p.name.endswith(".partial")]) == 2 * 3
    row = next(r for r in table["rows"] if r["experiment"] == "first" and r["model"] == models[0])
    assert set(row["layers"]) == {"0", "1"} and len(row["layers"]["1"]["scores"]) == 2
    assert row["layers"]["1"]["ci_half_width"] is not None
    assert "| first | " in (tmp_path / "sweep" / "results.md").read_text()
    assert main(["report", str(tmp_path / "sweep")]) == 0  # report reads the sweep's table
    assert "| second | random:cpu-tiny | " in capsys.readouterr().out
    # resumed: only the missing cell runs again
    import shutil

    before = {c: (tmp_path / "sweep" / c / "metrics.json").stat().st_mtime_ns for c in cells}
    shutil.rmtree(tmp_path / "sweep" / "first--tiny--seed1")
    again = _sweep(grid, tmp_path / "sweep")
    after = {c: (tmp_path / "sweep" / c / "metrics.json").stat().st_mtime_ns for c in cells}
    assert [c for c in cells if before[c] != after[c]] == ["first--tiny--seed1"]
    assert again["rows"] == table["rows"]  # the same numbers: every cell is seeded


def test_bad_grids_are_refused_before_any_work(grid, tmp_path, capsys):
    root, experiments, models = grid
    with pytest.raises(SweepError, match=r"experiment .*nothing\.toml: .*no such experiment file"):
        run_sweep([str(root / "nothing.toml")], models, [0], tmp_path / "a", log=lambda m: None)
    with pytest.raises(SweepError, match=r"model 'random:nope': unknown ELMo preset"):
        run_sweep(experiments, ["random:nope"], [0], tmp_path / "a", log=lambda m: None)
    assert not (tmp_path / "a").exists()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "sweep.json").write_text(json.dumps({"experiments": ["x"], "models": ["y"], "seeds": [0]}))
    with pytest.raises(SweepError, match="holds a sweep of another grid"):
        run_sweep(experiments, models, [0], tmp_path / "b", log=lambda m: None)
    with pytest.raises(SystemExit):  # a usage error, before anything runs
        main(["sweep", experiments[0], "--models", "shipped", "--seeds", "0,0", "--out", str(tmp_path / "c")])
    assert "--seeds: seeds [0] are repeated" in capsys.readouterr().err


def test_the_ray_path_gives_the_local_results_and_a_dead_address_is_named(grid, tmp_path):
    ray = pytest.importorskip("ray")
    local = _sweep(grid, tmp_path / "local")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote = _sweep(grid, tmp_path / "ray", ray_address="auto")
    finally:
        ray.shutdown()
    assert remote["rows"] == local["rows"]
    with pytest.raises(SweepError, match="--ray 127.0.0.1:9: no Ray cluster answers there"):
        _sweep(grid, tmp_path / "dead", ray_address="127.0.0.1:9")


def test_two_workers_extract_the_grids_models_side_by_side_into_the_same_cache(grid, tmp_path):
    import numpy as np

    from probing_lab.sweeps import Grid, extract_once

    root, experiments, models = grid
    said, cached = [], {}
    for workers in (1, 2):
        cache = tmp_path / f"cache{workers}"
        assert extract_once(Grid(experiments, models, [0]), None, cache, said.append, workers=workers) == 2 * 2
        cached[workers] = _cached_arrays(cache)
    # 2 models x 3 splits: the two experiments read the same files
    assert len(cached[1]) == 2 * 3 and cached[1].keys() == cached[2].keys()
    assert all(np.array_equal(cached[1][k], cached[2][k]) for k in cached[1])
    assert said[1].endswith("2 extraction(s) at once")
