"""The learning-rate schedule (warmup, decay, resume with a schedule changed for the steps to come)
and a warm start onto a corpus with another vocabulary (softmax rows carried over by word)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from test_training import corpus_dir, tiny_config  # noqa: F401  (the fixture is used by name)

from probing_lab.corpus.build import build_corpus
from probing_lab.training.checkpoint import export_encoder, load_lm
from probing_lab.training.config import TrainConfig, TrainingError
from probing_lab.training.trainer import train
from probing_lab.training.vocab import Vocabulary


def test_lr_at_follows_warmup_then_decay_by_hand():
    c = TrainConfig(lr=1.0, warmup_steps=4, decay="linear", decay_start_step=10, decay_steps=4)
    assert [c.lr_at(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert [c.lr_at(s) for s in (9, 10, 11, 12, 13, 14, 99)] == [1.0, 1.0, 0.75, 0.5, 0.25, 0.0, 0.0]
    cosine = TrainConfig(lr=2.0, decay="cosine", decay_start_step=0, decay_steps=10, min_lr_ratio=0.1)
    assert cosine.lr_at(0) == 2.0
    assert math.isclose(cosine.lr_at(5), 2.0 * (0.1 + 0.9 * 0.5))
    assert math.isclose(cosine.lr_at(10), 0.2) and math.isclose(cosine.lr_at(1000), 0.2)
    assert TrainConfig(lr=0.3).lr_at(12345) == 0.3  # no schedule: constant


@pytest.mark.parametrize(
    "bad, message",
    [
        (dict(decay="exponential"), "decay must be 'none', 'linear' or 'cosine'"),
        (dict(decay="linear"), "needs decay_steps >= 1"),
        (dict(min_lr_ratio=1.5), "min_lr_ratio must be at most 1"),
        (dict(warmup_steps=-1), "warmup_steps must be >= 0"),
        (dict(decay_start_step=1.5), "decay_start_step must be an integer"),
    ],
)
def test_a_bad_schedule_is_named(bad, message):
    with pytest.raises(TrainingError, match=message):
        TrainConfig.from_dict(bad, "my.json")


def _logged_lr(run: Path) -> dict[int, float]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return {r["step"]: r["lr"] for r in map(json.loads, lines)}


def test_the_trainer_steps_with_the_schedule_and_resumes_it_exactly(corpus_dir, tmp_path):  # noqa: F811
    config = tiny_config(max_steps=6, warmup_steps=2, decay="linear", decay_start_step=3, decay_steps=3)
    whole = train(config, corpus_dir, tmp_path / "whole", progress=False)
    assert _logged_lr(tmp_path / "whole") == {s + 1: pytest.approx(config.lr_at(s)) for s in range(6)}
    train(config, corpus_dir, tmp_path / "halves", progress=False, stop_after=3)
    train(config, corpus_dir, tmp_path / "halves", resume=True, progress=False)
    a, b = load_lm(tmp_path / "whole")[0], load_lm(tmp_path / "halves")[0]
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.allclose(p, q, atol=1e-6), name
    assert whole["step"] == 6


def test_a_resumed_run_may_change_only_the_schedule_to_come(corpus_dir, tmp_path):  # noqa: F811
    run = tmp_path / "run"
    constant = tiny_config(max_steps=8)
    train(constant, corpus_dir, run, progress=False, stop_after=4)
    past = tiny_config(max_steps=8, decay="linear", decay_start_step=2, decay_steps=4)
    with pytest.raises(TrainingError, match=r"changes step 3 .*it is at step 4"):
        train(past, corpus_dir, run, resume=True, progress=False)
    cooldown = tiny_config(max_steps=8, decay="linear", decay_start_step=4, decay_steps=4)
    train(cooldown, corpus_dir, run, resume=True, progress=False)  # a cooldown from here on: allowed
    lr = _logged_lr(run)
    assert lr[4] == constant.lr and lr[5] == constant.lr and lr[6] == pytest.approx(0.75 * constant.lr)
    # the run's config is now the one with the cooldown: resuming with it again is the same math
    assert json.loads((run / "config.json").read_text())["training"]["decay"] == "linear"


def test_a_warm_start_on_a_new_vocabulary_keeps_the_rows_of_shared_words(corpus_dir, tmp_path):  # noqa: F811
    train(tiny_config(max_steps=3), corpus_dir, tmp_path / "first", progress=False)
    source = export_encoder(
        tmp_path / "first", tmp_path / "model", dtype=torch.float32, softmax_vocab=corpus_dir / "vocab.txt"
    )
    old_vocab = Vocabulary.load(source / "vocab.txt")
    trained, _ = load_lm(tmp_path / "first")
    # a corpus with some words of the first and some new ones
    text = tmp_path / "new.txt"
    text.write_text("\n".join(f"The heron waded along the bank number {i} ." for i in range(300)) + "\n")
    new_corpus = tmp_path / "corpus2"
    build_corpus(new_corpus, [text], progress=None)
    vocab = Vocabulary.load(new_corpus / "vocab.txt")
    shared = [w for w in vocab.words if w in old_vocab.index]
    fresh = [w for w in vocab.words if w not in old_vocab.index]
    assert "bank" in shared and "heron" in fresh

    config = tiny_config(max_steps=1, init_from=str(source), freeze_encoder_steps=1, lr=1e-9)
    train(config, new_corpus, tmp_path / "warm", progress=False)
    warm, _ = load_lm(tmp_path / "warm")
    for word in shared:
        old, new = old_vocab.index[word], vocab.index[word]
        assert torch.allclose(warm.softmax.weight[new], trained.softmax.weight[old], atol=1e-6), word
    heron_row = warm.softmax.weight[vocab.index["heron"]]
    assert not any(torch.allclose(heron_row, row) for row in trained.softmax.weight)
