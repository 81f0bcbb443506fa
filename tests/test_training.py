"""Language-model training: sampler, softmax, windows, trainer, resume, DDP, corpus building."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY_MODEL

from probing_lab.cli import main
from probing_lab.corpus.build import build_corpus
from probing_lab.corpus.markup import strip_tags, strip_wiki_markup
from probing_lab.elmo import ElmoOptions, Embedder, load_checkpoint
from probing_lab.training.checkpoint import (
    export_encoder,
    export_warm_start,
    latest_checkpoint,
    load_lm,
    restore_warm_start,
)
from probing_lab.training.config import TrainConfig, TrainingError
from probing_lab.training.data import TokenTable, WindowStream, read_sentences
from probing_lab.training.errors import CorpusError
from probing_lab.training.objective import BiLanguageModel, evaluate_lm
from probing_lab.training.softmax import LogUniformSampler, SoftmaxHead, log_uniform_table
from probing_lab.training.trainer import train
from probing_lab.training.vocab import Vocabulary

SENTENCES = [
    "The cat sat on the mat.",
    "A dog ran in the park.",
    "The bank raised its rates.",
    "We walked along the river bank.",
    "I don't know what she said.",
    "He can't swim very well.",
    "The children played outside all day.",
    "It rained in the morning and cleared up later.",
    "She reads a book every week.",
    "They bought bread, milk and eggs.",
]


def tiny_config(**kw) -> TrainConfig:
    base = dict(
        model=TINY_MODEL,
        batch_size=4,
        unroll_steps=5,
        n_negative_samples=0,
        lr=0.2,
        dropout=0.1,
        max_steps=6,
        log_every=1,
        checkpoint_every_steps=100,
        snapshot_fractions=(),
        threads=1,
    )
    base.update(kw)
    return TrainConfig(**base)


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    text = root / "src.txt"
    rng = np.random.default_rng(0)
    # 600 distinct sentences: the stock ones with a numbered suffix, so dedup keeps them
    lines = [f"{SENTENCES[i % len(SENTENCES)][:-1]} number {i} ." for i in range(600)]
    rng.shuffle(lines)
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    build_corpus(root / "corpus", [text], heldout_fraction=0.05, n_shards=2, progress=None)
    return root / "corpus"


# --- sampler and softmax -----------------------------------------------------------------


def test_log_uniform_probabilities_sum_to_one_and_follow_zipf():
    p = log_uniform_table(1000)
    assert abs(p.sum() - 1.0) < 1e-12
    assert np.all(np.diff(p) < 0)
    sampler = LogUniformSampler(1000)
    ids = torch.tensor([0, 1, 9, 999])
    expected = (np.log(ids.numpy() + 2) - np.log(ids.numpy() + 1)) / np.log(1001)
    assert np.allclose(sampler.probability(ids).numpy(), expected)


def test_sampler_draws_distinct_ids_with_log_uniform_frequencies():
    sampler = LogUniformSampler(50)
    g = torch.Generator().manual_seed(0)
    inclusion = torch.zeros(50, dtype=torch.float64)
    expected = torch.zeros(50, dtype=torch.float64)
    runs = 3000
    for _ in range(runs):
        ids, tries = sampler.sample(10, g)
        assert len(set(ids.tolist())) == 10 and tries >= 10
        inclusion[ids] += 1
        expected += sampler.expected_count(torch.arange(50), tries)
    # how often an id is among the negatives matches the expected count used in the loss
    assert torch.allclose(inclusion / runs, expected / runs, atol=0.03)
    assert inclusion[0] > inclusion[10] > inclusion[49]


def test_sampled_logits_subtract_log_expected_count_and_remove_hits():
    torch.manual_seed(0)
    head = SoftmaxHead(20, 4, n_negative=5)
    h = torch.randn(3, 4)
    targets = torch.tensor([2, 7, 3])
    sampled = torch.tensor([0, 3, 5, 7, 11])
    tries = 9
    logits = head.sampled_logits(h, targets, sampled, tries)

    def q(k):
        return 1 - (1 - (math.log(k + 2) - math.log(k + 1)) / math.log(21)) ** tries

    for row in range(3):
        t = targets[row].item()
        true = (h[row] @ head.weight[t] + head.bias[t]).item() - math.log(q(t))
        assert abs(logits[row, 0].item() - true) < 1e-5
        for j, s in enumerate(sampled.tolist()):
            if s == t:
                assert logits[row, 1 + j] == float("-inf")  # accidental hit removed
            else:
                want = (h[row] @ head.weight[s] + head.bias[s]).item() - math.log(q(s))
                assert abs(logits[row, 1 + j].item() - want) < 1e-5


def test_sampled_softmax_with_too_many_negatives_is_an_error():
    with pytest.raises(ValueError, match="full softmax"):
        SoftmaxHead(100, 4, n_negative=100)


def test_sampled_loss_is_used_in_training_full_in_eval():
    torch.manual_seed(0)
    head = SoftmaxHead(200, 8, n_negative=20)
    h, t = torch.randn(16, 8), torch.randint(0, 200, (16,))
    head.eval()
    assert torch.allclose(head.loss(h, t), head.full_loss(h, t))
    head.train()
    assert not torch.allclose(head.loss(h, t, torch.Generator().manual_seed(1)), head.full_loss(h, t))


# --- windows and state carry -----------------------------------------------------------------


def test_windows_are_contiguous_next_token_streams(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("a b c\nd e\nf g h i\n", encoding="utf-8")
    table = TokenTable(Vocabulary(["<S>", "</S>", "<UNK>", "a", "b"]))
    sents = read_sentences([f], table)
    stream = WindowStream(sents, batch_size=1, unroll_steps=3, seed=0)
    rows = stream._build(0)
    # forward row: whole sentences with boundaries; backward row: the same sentences reversed
    words = [table.types[i] for i in rows[0, 0]]
    back = [table.types[i] for i in rows[1, 0]]
    assert words.count("<S>") == 3 and words[0] == "<S>"
    assert back[0] == "</S>"
    assert sorted(words) == sorted(back)
    x0, y0 = stream.window(0, 0)
    x1, _ = stream.window(0, 1)
    assert torch.equal(x0[:, :, 1:], y0[:, :, :-1])  # targets are the next tokens
    assert torch.equal(y0[:, :, -1], x1[:, :, 0])  # the next window starts where this one ended
    # the softmax sees <UNK> for words outside the vocabulary, the char CNN sees their spelling
    assert table.vocab_ids()[table.index["h"]].item() == 2


def test_state_carried_across_windows_equals_one_long_window():
    from probing_lab.elmo.bilm import ElmoBiLM

    torch.manual_seed(0)
    lstm = ElmoBiLM(ElmoOptions.from_dict(TINY_MODEL)).lstm.eval()
    x = torch.randn(2, 3, 10, 8)
    whole, _ = lstm.forward_streams(x, lstm.zero_state(3))
    first, state = lstm.forward_streams(x[:, :, :4], lstm.zero_state(3))
    second, _ = lstm.forward_streams(x[:, :, 4:], state)
    assert torch.allclose(torch.cat([first, second], dim=2), whole, atol=1e-6)


def test_corpus_smaller_than_one_batch_is_a_clear_error(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("just two words\n", encoding="utf-8")
    sents = read_sentences([f], TokenTable(Vocabulary(["<S>", "</S>", "<UNK>"])))
    with pytest.raises(CorpusError, match="smaller than one batch"):
        WindowStream(sents, batch_size=8, unroll_steps=20, seed=0)


# --- the trainer ---------------------------------------------------------------------------------


def losses(run: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_resume_follows_the_uninterrupted_loss_curve(corpus_dir, tmp_path):
    config = tiny_config(n_negative_samples=8, max_steps=8)
    train(config, corpus_dir, tmp_path / "whole", progress=False)
    summary = train(config, corpus_dir, tmp_path / "split", progress=False, stop_after=3)
    assert summary["interrupted"] and summary["step"] == 3
    assert latest_checkpoint(tmp_path / "split").name == "step-00000003"
    train(config, corpus_dir, tmp_path / "split", resume=True, progress=False)
    whole, split = losses(tmp_path / "whole"), losses(tmp_path / "split")
    assert len(whole) == len(split) == 8
    assert np.allclose(whole, split, rtol=0, atol=1e-6), (whole, split)
    a, _ = load_lm(tmp_path / "whole")
    b, _ = load_lm(tmp_path / "split")
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.allclose(p, q, atol=1e-6), name


def test_run_directory_is_not_overwritten_and_resume_checks_the_config(corpus_dir, tmp_path):
    config = tiny_config(max_steps=2)
    train(config, corpus_dir, tmp_path / "run", progress=False)
    with pytest.raises(TrainingError, match="--resume"):
        train(config, corpus_dir, tmp_path / "run", progress=False)
    with pytest.raises(TrainingError, match=r"differs from the config given in \['lr'\]"):
        train(tiny_config(max_steps=2, lr=0.5), corpus_dir, tmp_path / "run", resume=True, progress=False)
    with pytest.raises(TrainingError, match=r"\['dropout'\]"):
        train(tiny_config(max_steps=3, dropout=0.3), corpus_dir, tmp_path / "run", resume=True, progress=False)
    # bookkeeping (threads, logging, checkpoint cadence) and the run's length may change on resume
    longer = tiny_config(max_steps=3, log_every=5, threads=2, checkpoint_every_steps=7, checkpoint_every_minutes=1.0)
    summary = train(longer, corpus_dir, tmp_path / "run", resume=True, progress=False)
    assert summary["step"] == 3


def test_warm_start_keeps_the_encoder_while_frozen_then_trains_it(corpus_dir, tmp_path):
    train(tiny_config(max_steps=3), corpus_dir, tmp_path / "first", progress=False)
    source = export_encoder(tmp_path / "first", tmp_path / "model", dtype=torch.float32)
    before = load_checkpoint(source).state_dict()
    warm = tiny_config(max_steps=4, init_from=str(source), freeze_encoder_steps=2, seed=1)
    train(warm, corpus_dir, tmp_path / "warm", progress=False, stop_after=2)
    frozen, _ = load_lm(tmp_path / "warm")
    for name, p in frozen.bilm.state_dict().items():
        assert torch.equal(p, before[name]), name  # two frozen steps: the encoder is untouched
    train(warm, corpus_dir, tmp_path / "warm", resume=True, progress=False)
    trained, _ = load_lm(tmp_path / "warm")
    assert any(not torch.equal(p, before[n]) for n, p in trained.bilm.state_dict().items())
    torch.manual_seed(warm.seed)  # the warm run's softmax before its first step
    initial = BiLanguageModel(ElmoOptions.from_dict(TINY_MODEL), trained.softmax.weight.shape[0]).softmax.weight
    assert not torch.equal(frozen.softmax.weight, initial)  # the softmax learned while the encoder waited

    other = dict(TINY_MODEL, lstm=dict(TINY_MODEL["lstm"], dim=32))
    with pytest.raises(TrainingError, match="options differ"):
        train(tiny_config(model=other, init_from=str(source)), corpus_dir, tmp_path / "bad", progress=False)
    with pytest.raises(TrainingError, match="freeze_encoder_steps needs init_from"):
        tiny_config(freeze_encoder_steps=2).check("config")


def test_a_half_written_checkpoint_never_replaces_the_last_good_one(corpus_dir, tmp_path):
    run = tmp_path / "run"
    train(tiny_config(max_steps=2), corpus_dir, run, progress=False)
    # what a kill during the next save leaves behind: a temporary folder, latest untouched
    broken = run / "checkpoints" / ".step-00000004.tmp"
    broken.mkdir()
    (broken / "lm.safetensors").write_bytes(b"\0" * 10)
    assert latest_checkpoint(run).name == "step-00000002"
    lm, info = load_lm(run)
    assert info["step"] == 2


def test_loss_falls_and_heldout_perplexity_is_reported(corpus_dir, tmp_path):
    config = tiny_config(max_steps=60, lr=0.3, dropout=0.0, log_every=10)
    train(config, corpus_dir, tmp_path / "run", progress=False)
    curve = losses(tmp_path / "run")
    assert curve[-1] < curve[0] - 0.5
    lm, info = load_lm(tmp_path / "run")
    result = evaluate_lm(lm, corpus_dir, info["config"]["vocab_size"], batch_size=2, unroll_steps=5, progress=False)
    vocab = len(Vocabulary.load(corpus_dir / "vocab.txt"))
    for key in ("perplexity_forward", "perplexity_backward"):
        assert 1.0 < result[key] < vocab
    assert result["perplexity"] == pytest.approx(0.5 * (result["perplexity_forward"] + result["perplexity_backward"]))


def test_unknown_config_key_and_bad_values_are_named():
    with pytest.raises(TrainingError, match="learning_rate"):
        TrainConfig.from_dict({"learning_rate": 0.1})
    with pytest.raises(TrainingError, match="optimizer"):
        TrainConfig.from_dict({"optimizer": "sgd"})


def test_missing_corpus_is_a_clear_error(tmp_path):
    with pytest.raises(CorpusError, match="corpus build"):
        train(tiny_config(), tmp_path / "nope", tmp_path / "run", progress=False)


def test_export_gives_a_model_the_lab_loads(corpus_dir, tmp_path):
    train(tiny_config(max_steps=2), corpus_dir, tmp_path / "run", progress=False)
    out = export_encoder(tmp_path / "run", tmp_path / "model", dtype=torch.float16, card={"name": "tiny"})
    card = json.loads((out / "model_card.json").read_text())
    assert card["name"] == "tiny" and card["training"]["step"] == 2 and card["dtype"] == "float16"
    model = load_checkpoint(out)
    lm, _ = load_lm(tmp_path / "run")
    for name, p in model.state_dict().items():  # float16 on disk, the same weights up to rounding
        assert torch.allclose(p, lm.bilm.state_dict()[name], atol=1e-2, rtol=1e-3), name
    arrays = Embedder(model).embed([["The", "cat", "sat"]])
    assert arrays[0].shape == (3, 3, 16)


def test_distributed_two_processes_on_gloo_stay_in_sync(corpus_dir, tmp_path):
    config = tiny_config(max_steps=30, lr=0.3, dropout=0.0, log_every=1, batch_size=2)
    # each rank records a checksum of every parameter at every step (a spy on the forward pass)
    check = tmp_path / "check.py"
    check.write_text(
        "import json, os, torch\n"
        "import torch.distributed as dist\n"
        "from probing_lab.training import config, objective, trainer\n"
        "orig = objective.BiLanguageModel.forward\n"
        "def spy(self, *a, **k):\n"
        "    out = orig(self, *a, **k)\n"
        "    sums = [float(p.detach().double().sum()) for p in self.parameters()]\n"
        f"    with open(os.path.join({str(tmp_path)!r}, 'sums-' + os.environ['RANK'] + '.jsonl'), 'a') as f:\n"
        "        f.write(json.dumps(sums) + '\\n')\n"
        "    return out\n"
        "objective.BiLanguageModel.forward = spy\n"
        f"cfg = config.TrainConfig.from_dict(json.loads({json.dumps(json.dumps(config.to_dict()))}))\n"
        f"trainer.train(cfg, {str(corpus_dir)!r}, {str(tmp_path / 'run')!r}, progress=False)\n"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(check)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    a = [json.loads(l) for l in (tmp_path / "sums-0.jsonl").read_text().splitlines()]
    b = [json.loads(l) for l in (tmp_path / "sums-1.jsonl").read_text().splitlines()]
    assert len(a) == len(b) == 30
    assert np.allclose(a, b, rtol=1e-6), "ranks' parameters diverged"
    assert not np.allclose(a[0], a[-1])  # and they did train
    info = json.loads((tmp_path / "run" / "config.json").read_text())
    assert info["world_size"] == 2
    curve = losses(tmp_path / "run")
    assert np.mean(curve[-5:]) < np.mean(curve[:5]) - 0.3


# --- corpus building ---------------------------------------------------------------------------


def test_strip_tags_brown_and_masc():
    assert strip_tags("The/at jury/nn said/vbd ./.") == "The jury said ."
    assert strip_tags("Good_JJ evening_NN ,_, from_IN Wake_NNP") == "Good evening , from Wake"
    assert strip_tags("An ordinary sentence here.") is None


def test_strip_wiki_markup():
    src = (
        "{{Infobox|name=x}}'''Anarchism''' is a [[political philosophy|philosophy]] that [[rejects]] rulers "
        "and hierarchy in all its forms.<ref>Some book</ref>\n== History ==\n* a list item\n"
        "{| class=wikitable\n| cell\n|}"
    )
    text = strip_wiki_markup(src)
    assert "Anarchism is a philosophy that rejects rulers and hierarchy in all its forms." in " ".join(text.split())
    for junk in ("{{", "[[", "'''", "History", "list item", "cell", "Some book"):
        assert junk not in text


def _fake_deb(path: Path, members: dict[str, bytes]) -> None:
    tar_bytes = io.BytesIO()
    with tarfile.open(fileobj=tar_bytes, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    body = tar_bytes.getvalue()
    header = f"{'data.tar.gz':<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(body):<10}`\n".encode()
    path.write_bytes(b"!<arch>\n" + header + body + (b"\n" if len(body) % 2 else b""))


def test_build_corpus_dedupes_excludes_and_writes_vocab_and_stats(tmp_path):
    (tmp_path / "a.txt").write_text(
        "I don't like rain. It's cold today.\nI don't like rain.\nThe held out sentence is here.\n", encoding="utf-8"
    )
    (tmp_path / "b.txt").write_text("The/at jury/nn said/vbd it/pps did/dod n't/* ./.\n", encoding="utf-8")
    wn = (
        b"  1 license line\n09213565 17 n 01 bank 0 000 | sloping land beside a body of water; "
        b'"they pulled the canoe up on the bank"\n'
    )
    _fake_deb(tmp_path / "wordnet-base_3.0_all.deb", {"./usr/share/wordnet/data.noun": wn})
    exclude = tmp_path / "dev.conllu"
    exclude.write_text(
        "# text = The held-out sentence is here.\n1\tThe\n2\theld-out\n3\tsentence\n4\tis\n5\there\n6\t.\n\n",
        encoding="utf-8",
    )
    stats = build_corpus(
        tmp_path / "out",
        [tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "wordnet-base_3.0_all.deb"],
        exclude=[exclude],
        heldout_fraction=0.2,
        n_shards=2,
        progress=None,
    )
    lines = []
    for f in sorted((tmp_path / "out" / "train").glob("*.txt")) + [tmp_path / "out" / "heldout.txt"]:
        lines += f.read_text().splitlines()
    assert "I do n't like rain ." in lines
    assert "The jury said it did n't ." in lines
    assert "They pulled the canoe up on the bank" in lines
    assert "Sloping land beside a body of water ." in lines
    assert not any("held" in l for l in lines)  # an evaluation sentence never reaches training
    assert stats["duplicates_removed"] == 1 and stats["evaluation_sentences_removed"] == 1
    assert set(stats["sources"]) == {"a", "b", "wordnet-base"}
    vocab = (tmp_path / "out" / "vocab.txt").read_text().split("\n")
    assert vocab[:3] == ["<S>", "</S>", "<UNK>"]
    counts = Counter(w for l in (tmp_path / "out" / "train").glob("*.txt") for w in l.read_text().split())
    ranked = [counts[w] for w in vocab[3:] if w]
    assert ranked == sorted(ranked, reverse=True)
    assert json.loads((tmp_path / "out" / "stats.json").read_text())["train"]["tokens"] == sum(counts.values())


def test_build_corpus_bad_input(tmp_path):
    with pytest.raises(CorpusError, match="no such file"):
        build_corpus(tmp_path / "out", [tmp_path / "missing.txt"], progress=None)
    (tmp_path / "empty.txt").write_text("\n\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="no sentences"):
        build_corpus(tmp_path / "out", [tmp_path / "empty.txt"], progress=None)
    (tmp_path / "broken.zip").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(CorpusError, match="cannot be read"):
        build_corpus(tmp_path / "out", [tmp_path / "broken.zip"], progress=None)


def test_cli_corpus_train_eval_export(tmp_path, capsys):
    src = tmp_path / "text.txt"
    src.write_text("\n".join(f"{s[:-1]} take {i} ." for i, s in enumerate(SENTENCES * 30)), encoding="utf-8")
    assert (
        main(["corpus", "build", str(src), "--out", str(tmp_path / "c"), "--no-default-exclusions", "--min-count", "1"])
        == 0
    )
    config = tmp_path / "train.json"
    config.write_text(json.dumps(tiny_config(max_steps=3).to_dict()))
    assert (
        main(
            ["train", "--config", str(config), "--corpus", str(tmp_path / "c"), "--out", str(tmp_path / "r"), "--quiet"]
        )
        == 0
    )
    assert main(["eval-lm", str(tmp_path / "r"), "--corpus", str(tmp_path / "c"), "--quiet"]) == 0
    assert "perplexity_forward" in capsys.readouterr().out
    assert main(["export", str(tmp_path / "r"), "--out", str(tmp_path / "m")]) == 0
    assert (
        main(
            [
                "embed",
                "--model",
                str(tmp_path / "m"),
                "--input",
                str(src),
                "--output",
                str(tmp_path / "e.h5"),
                "--quiet",
            ]
        )
        == 0
    )
    assert main(["train", "--config", str(tmp_path / "nope.json"), "--corpus", "x", "--out", "y"]) == 2


def test_shipped_training_configs_parse():
    root = Path(__file__).resolve().parents[1]
    configs = sorted((root / "configs" / "train").glob("*.json"))
    assert {c.stem for c in configs} >= {"elmo-lab", "original-1b"}
    for c in configs:
        TrainConfig.load(c).options()


def test_learning_curves_are_written_at_every_eval_step_and_leave_training_unchanged(corpus_dir, tmp_path):
    calls = []

    def evaluate(bilm):
        calls.append(bilm.training)
        torch.rand(100)  # an evaluation that draws random numbers must not shift the run's dropout masks
        return {"wsd": {"1": 0.5}}

    config = tiny_config(n_negative_samples=8, max_steps=7)
    train(config, corpus_dir, tmp_path / "plain", progress=False)
    train(
        dataclasses.replace(config, eval_every_steps=3, eval_heldout_tokens=40),
        corpus_dir,
        tmp_path / "curves",
        progress=False,
        evaluate=evaluate,
    )
    assert losses(tmp_path / "plain") == losses(tmp_path / "curves")
    records = [json.loads(line) for line in (tmp_path / "curves" / "curves.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [0, 3, 6, 7]  # step 0 (untrained), every 3, and the last
    assert calls == [False] * 4  # the model is evaluated in eval mode
    for r in records:
        assert math.isfinite(r["heldout"]["perplexity_forward"]) and r["heldout"]["tokens"] >= 40
        assert r["wsd"] == {"1": 0.5} and r["tokens_seen"] == r["step"] * 4 * 5
    assert records[0]["heldout"]["perplexity"] > records[-1]["heldout"]["perplexity"]


def test_resume_drops_log_records_written_after_the_checkpoint(corpus_dir, tmp_path):
    config = tiny_config(n_negative_samples=8, max_steps=8, eval_every_steps=2, eval_heldout_tokens=40)
    train(config, corpus_dir, tmp_path / "run", progress=False, stop_after=4)
    # what a kill between the checkpoint at step 4 and the next one leaves behind
    with open(tmp_path / "run" / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": 5, "loss": 9.0}) + "\n")
    with open(tmp_path / "run" / "curves.jsonl", "a") as f:
        f.write(json.dumps({"step": 6, "heldout": {}}) + "\n")
    train(config, corpus_dir, tmp_path / "run", resume=True, progress=False)
    steps = [json.loads(line)["step"] for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 9))
    curves = [json.loads(line)["step"] for line in (tmp_path / "run" / "curves.jsonl").read_text().splitlines()]
    assert curves == [0, 2, 4, 6, 8]


def test_warm_start_state_continues_the_run_at_its_step_with_a_fresh_optimizer(corpus_dir, tmp_path):
    config = tiny_config(n_negative_samples=8, max_steps=8, optimizer="adam", lr=0.01)
    train(config, corpus_dir, tmp_path / "whole", progress=False)
    train(config, corpus_dir, tmp_path / "first", progress=False, stop_after=4)
    state = export_warm_start(tmp_path / "first", tmp_path / "state")
    assert not (state / "optimizer.safetensors").exists()
    from safetensors.torch import load_file

    tensors = load_file(str(state / "lm.safetensors"))
    assert {t.dtype for t in tensors.values()} == {torch.float16} and "softmax.weight" in tensors
    restore_warm_start(state, tmp_path / "second")
    train(config, corpus_dir, tmp_path / "second", resume=True, progress=False)
    whole, second = losses(tmp_path / "whole"), losses(tmp_path / "second")
    assert len(second) == 8 and second[:4] == whole[:4]  # the logs travel with the state
    # step 5 reads the same window with float16-rounded weights: close, not equal
    assert abs(second[4] - whole[4]) < 0.05
    with pytest.raises(TrainingError, match="already holds a run"):
        restore_warm_start(state, tmp_path / "second")
    with pytest.raises(TrainingError, match="not a warm-start state"):
        restore_warm_start(tmp_path / "whole", tmp_path / "third")


def test_corpus_build_without_data_dir_excludes_the_probe_sets_load_dataset_finds(tmp_path, monkeypatch):
    data = tmp_path / "data" / "ud-english-ewt"
    data.mkdir(parents=True)
    (data / "en_ewt-ud-test.conllu").write_text(
        "# text = The committee met on Tuesday.\n"
        + "".join(
            f"{i}\t{w}\t_\t_\t_\t_\t0\t_\t_\t_\n" for i, w in enumerate("The committee met on Tuesday .".split(), 1)
        )
        + "\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("PROBING_LAB_DATA", str(tmp_path / "data"))  # what load_dataset reads; no --data-dir flag
    src = tmp_path / "src.txt"
    src.write_text("The committee met on Tuesday.\n" + "\n".join(SENTENCES) + "\n", encoding="utf-8")
    assert main(["corpus", "build", "--out", str(tmp_path / "c"), "--heldout-fraction", "0.01", str(src)]) == 0
    text = (
        "".join(p.read_text() for p in (tmp_path / "c" / "train").glob("*.txt"))
        + (tmp_path / "c" / "heldout.txt").read_text()
    )
    assert "committee" not in text and "river bank" in text
    assert json.loads((tmp_path / "c" / "stats.json").read_text())["evaluation_sentences_removed"] == 1
