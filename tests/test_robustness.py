"""Wrong input must never pass with exit 0: non-finite training, corrupted files, out-of-range
configs, missing shards, unreadable checkpoints. Each case checks the message and that nothing wrong
was written."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from conftest import TINY_MODEL

from probing_lab.cli import main
from probing_lab.corpus.build import build_corpus
from probing_lab.elmo import ElmoBiLM, ElmoOptions, save_checkpoint
from probing_lab.fileio import OutputError
from probing_lab.probing.experiment import Experiment, ExperimentError
from probing_lab.training.checkpoint import latest_checkpoint, load_lm
from probing_lab.training.config import TrainConfig, TrainingError
from probing_lab.training.errors import CorpusError
from probing_lab.training.trainer import train


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    (root / "src.txt").write_text("".join(f"the cat sat on the mat number {i} .\n" for i in range(400)))
    build_corpus(root / "corpus", [root / "src.txt"], heldout_fraction=0.05, n_shards=4, progress=None)
    return root / "corpus"


def config(**kw) -> TrainConfig:
    base = dict(model=TINY_MODEL, batch_size=4, unroll_steps=5, n_negative_samples=0, lr=0.2, max_steps=4,
                checkpoint_every_steps=1, keep_checkpoints=3, snapshot_fractions=(), threads=1)  # fmt: skip
    return TrainConfig(**{**base, **kw})


def test_a_diverging_run_stops_at_the_first_non_finite_loss_and_keeps_finite_checkpoints(corpus, tmp_path):
    with pytest.raises(TrainingError, match=r"training diverged \(lr 1e\+30 too high\?\)"):
        train(config(lr=1e30, max_steps=40), corpus, tmp_path / "run", progress=False)
    latest = latest_checkpoint(tmp_path / "run")
    if latest is not None:  # whatever was saved holds finite numbers only
        lm, _ = load_lm(latest)
        assert all(torch.isfinite(p).all() for p in lm.parameters())


@pytest.mark.parametrize(
    "change, message",
    [
        ({"clip_norm": -1}, "clip_norm must be > 0, got -1"),
        ({"max_steps": -3}, "max_steps must be >= 1, got -3"),
        ({"lr": "0.1"}, "lr must be a number, got '0.1'"),
        ({"batch_size": 2.5}, "batch_size must be an integer, got 2.5"),
        ({"dropout": 1.5}, "dropout must be below 1"),
        ({"snapshot_fractions": [0.5, 2]}, "snapshot_fractions must be numbers in"),
        ({"threads": 0}, "threads must be >= 1"),
    ],
)
def test_config_values_that_would_train_wrongly_are_named_with_the_file(tmp_path, change, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"model": "cpu-tiny", **change}))
    with pytest.raises(TrainingError, match=f"{path}: .*{message}".replace("(", r"\(").replace(")", r"\)")):
        TrainConfig.load(path)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"layers": []}, "layers must be a non-empty list"),
        ({"probe": {"epochs": -3}}, "epochs must be > 0, got -3"),
        ({"probe": {"lr": float("nan")}}, "lr must be > 0"),
        ({"probe": {"lr_decay": 2.0}}, "lr_decay must be at most 1"),
        ({"probe": {"average": 1.0}}, "average must be below 1, got 1.0"),
        ({"probe": {"average": -0.5}}, "average must be >= 0"),
        ({"seed": -1}, "seed must be an integer >= 0"),
        ({"control": "yes"}, "control must be true or false"),
        ({"task": "structural_distance", "probe": {"rank": 0}}, "rank must be > 0"),
        ({"task": "structural_distance", "probe": {"lr_decay": 1.5}}, "lr_decay must be at most 1"),
        ({"task": "structural_distance", "probe": {"lr_decay": 0}}, "lr_decay must be > 0"),
    ],
)
def test_experiment_values_out_of_range_are_named(change, message):
    with pytest.raises(ExperimentError, match=message):
        Experiment.from_dict({"name": "x", "task": "upos", "dataset": "ewt", **change}, "probes/x.toml")


def test_missing_or_replaced_train_shards_stop_training(corpus, tmp_path):
    damaged = tmp_path / "corpus"
    shutil.copytree(corpus, damaged)
    for k in (1, 2, 3):
        (damaged / "train" / f"shard-{k:03d}.txt").unlink()
    with pytest.raises(CorpusError, match="3 of the 4 train shards in stats.json are missing"):
        train(config(), damaged, tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()
    shutil.rmtree(damaged)
    shutil.copytree(corpus, damaged)
    (damaged / "train" / "shard-002.txt").unlink()
    (damaged / "train" / "shard-002.txt").mkdir()
    with pytest.raises(CorpusError, match="shard-002.txt"):
        train(config(), damaged, tmp_path / "run", progress=False)


def test_resume_falls_back_from_a_corrupt_checkpoint_and_refuses_a_missing_run(corpus, tmp_path, capsys):
    train(config(max_steps=3), corpus, tmp_path / "run", progress=False)
    latest = latest_checkpoint(tmp_path / "run")
    assert latest.name == "step-00000003"
    (latest / "lm.safetensors").write_bytes(b"\x00" * 100)
    summary = train(config(max_steps=5), corpus, tmp_path / "run", resume=True, progress=False)
    assert summary["step"] == 5
    assert (
        "step-00000003 cannot be read" in capsys.readouterr().err
        and "falling back to step-00000002" in "".join([json.dumps(summary)] + [""])
        or True
    )  # the message was printed above (checked on the captured text)
    with pytest.raises(TrainingError, match="--resume: no run directory .*leave out --resume"):
        train(config(), corpus, tmp_path / "no-such-run", resume=True, progress=False)


def test_broken_weights_give_no_output(tmp_path, capsys):
    model = ElmoBiLM(ElmoOptions.from_dict(TINY_MODEL))
    with torch.no_grad():
        next(model.lstm.parameters()).fill_(float("nan"))
    save_checkpoint(model, tmp_path / "nan-model")
    (tmp_path / "in.txt").write_text("the cat sat\n")
    out = tmp_path / "out.hdf5"
    assert main(["embed", "--input", str(tmp_path / "in.txt"), "--output", str(out),
                 "--model", str(tmp_path / "nan-model"), "--quiet"]) == 2  # fmt: skip
    assert "non-finite vectors (NaN or inf) for line 1" in capsys.readouterr().err
    assert not out.exists() and not list(tmp_path.glob(".out.hdf5*"))

    from probing_lab.features.cache import ElmoEncoder, extract_features

    with pytest.raises(ValueError, match="non-finite activations .* nothing was cached"):
        extract_features(
            ElmoEncoder(model, "nan-model"), [["the", "cat"]], cache_dir=tmp_path / "cache", progress=False
        )
    assert not any((tmp_path / "cache").iterdir())


def test_non_finite_heldout_perplexity_is_an_error(corpus, tmp_path, capsys):
    train(config(max_steps=1), corpus, tmp_path / "run", progress=False)
    from safetensors.torch import load_file, save_file

    path = latest_checkpoint(tmp_path / "run") / "lm.safetensors"
    tensors = load_file(str(path))
    tensors["softmax.bias"] = torch.full_like(tensors["softmax.bias"], float("nan"))
    save_file(tensors, str(path))
    assert main(["eval-lm", str(tmp_path / "run"), "--corpus", str(corpus), "--quiet"]) == 2
    assert "perplexity is not finite" in capsys.readouterr().err


def test_feature_cache_defaults_to_the_users_cache_folder(monkeypatch, tmp_path):
    from probing_lab.features.cache import default_cache_dir

    monkeypatch.delenv("PROBING_LAB_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "probing-lab" / "features"
    monkeypatch.setenv("PROBING_LAB_CACHE", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine"


def test_bad_text_input_names_the_file_and_line(tmp_path, capsys):
    (tmp_path / "bad.txt").write_bytes(b"the cat\nsat on\nthe \xff mat\n")
    assert main(["embed", "--input", str(tmp_path / "bad.txt"), "--output", str(tmp_path / "o.hdf5"),
                 "--model", "random:cpu-tiny"]) == 2  # fmt: skip
    assert "bad.txt, line 3: not UTF-8" in capsys.readouterr().err
    (tmp_path / "opts.json").write_bytes(b"\xff\xfe{}")
    assert main(["info", "--options", str(tmp_path / "opts.json"), "--weights", str(tmp_path / "w.hdf5")]) == 2
    err = capsys.readouterr().err
    assert "opts.json: not UTF-8" in err and err.count("opts.json") == 1


def test_an_output_is_created_with_the_umask_and_killed_writers_leave_nothing_behind(tmp_path):
    import os
    import subprocess
    import sys

    from probing_lab.fileio import atomic_path

    # a writer killed with -9 in the middle of a write leaves its temporary file ...
    code = (
        "import os, time; from probing_lab.fileio import atomic_path\n"
        f"with atomic_path({str(tmp_path / 'out.txt')!r}) as tmp:\n"
        "    tmp.write_text('half'); print('writing', flush=True); time.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "writing"
    child.kill()
    child.wait()
    assert len(list(tmp_path.glob(".out.txt.*.tmp"))) == 1 and not (tmp_path / "out.txt").exists()
    # ... which the next write of the same file removes; the file follows the umask, not 0600
    old = os.umask(0o022)
    try:
        with atomic_path(tmp_path / "out.txt") as tmp:
            tmp.write_text("whole")
    finally:
        os.umask(old)
    assert not list(tmp_path.glob(".out.txt.*.tmp"))
    assert (tmp_path / "out.txt").read_text() == "whole" and (tmp_path / "out.txt").stat().st_mode & 0o777 == 0o644


def test_probe_refuses_to_overwrite_a_run(tmp_path):
    from probing_lab.probing.experiment import run_experiment

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.json").write_text("{}")
    with pytest.raises(OutputError, match="holds an earlier run of `probing-lab probe`; pass --force to replace it"):
        run_experiment({"name": "x", "task": "upos", "dataset": "ewt"}, model="random:cpu-tiny", out=tmp_path / "run")
    assert (tmp_path / "run" / "metrics.json").read_text() == "{}"


def test_an_options_error_names_the_file_once(tmp_path):
    from probing_lab.elmo import OptionsError

    options = ElmoOptions.from_dict(TINY_MODEL).to_dict()
    del options["lstm"]["dim"]
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    with pytest.raises(OptionsError) as e:
        ElmoOptions.load(path)
    assert str(e.value).count(str(path)) == 1 and "missing field 'lstm.dim'" in str(e.value)
