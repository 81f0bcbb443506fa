"""The biLM as a language model: scoring, predictions, agreement pairs, the `lm` commands."""

from __future__ import annotations

import json
import math

import pytest
import torch
from conftest import TINY_MODEL

from probing_lab.cli import main
from probing_lab.corpus.build import build_corpus
from probing_lab.elmo import ElmoBiLM, ElmoOptions, batch_to_ids, save_checkpoint
from probing_lab.lm.agreement import (
    CONSTRUCTIONS,
    PAIRS_FILE,
    VERBS,
    evaluate_agreement,
    generate_pairs,
    read_pairs,
)
from probing_lab.lm.language_model import LanguageModel, NoSoftmaxError, load_language_model, save_softmax
from probing_lab.lm.score import predict, score_sentences
from probing_lab.training.checkpoint import export_encoder, load_lm
from probing_lab.training.config import TrainConfig
from probing_lab.training.trainer import train
from probing_lab.training.vocab import Vocabulary

WORDS = ["<S>", "</S>", "<UNK>", "the", "cat", "sat", "dogs"]


def tiny_lm(seed: int = 0, weight_scale: float = 1.0) -> LanguageModel:
    generator = torch.Generator().manual_seed(seed)
    bilm = ElmoBiLM(ElmoOptions.from_dict(TINY_MODEL))
    bilm.reset_parameters(generator)
    weight = torch.randn(len(WORDS), 8, generator=generator) * weight_scale
    bias = torch.randn(len(WORDS), generator=generator)
    return LanguageModel(bilm.eval(), weight, bias, Vocabulary(WORDS), "tiny")


def test_scores_by_hand_with_a_softmax_that_ignores_the_context():
    # zero weights: every position gets the distribution softmax(bias) = p, whatever the biLM says
    lm = tiny_lm()
    p = torch.tensor([0.1, 0.2, 0.3, 0.15, 0.25, 0.0, 0.0]) + 1e-30
    lm.weight.zero_()
    lm.bias.copy_(p.log())
    (s,) = score_sentences(lm, [["the", "zebra", "cat"]])
    assert s.forward_logprob == pytest.approx([math.log(0.15), math.log(0.3), math.log(0.25)], abs=1e-6)
    assert s.backward_logprob == pytest.approx(s.forward_logprob, abs=1e-6)
    assert s.forward_eos == pytest.approx(math.log(0.2), abs=1e-6)
    assert s.backward_bos == pytest.approx(math.log(0.1), abs=1e-6)
    assert s.unk == [1]  # "zebra" is scored as <UNK> and flagged
    assert s.forward_total == pytest.approx(math.log(0.15 * 0.3 * 0.25 * 0.2), abs=1e-6)
    assert s.perplexity("forward") == pytest.approx((0.15 * 0.3 * 0.25 * 0.2) ** -0.25, rel=1e-5)


def test_each_direction_sees_only_its_side():
    lm = tiny_lm()
    a, b = score_sentences(lm, [["the", "cat", "sat", "the", "dogs"], ["the", "cat", "dogs", "the", "dogs"]])
    # token 2 differs: forward scores of tokens 0-1 and backward scores of tokens 3-4 cannot change
    assert a.forward_logprob[:2] == pytest.approx(b.forward_logprob[:2], abs=1e-6)
    assert a.backward_logprob[3:] == pytest.approx(b.backward_logprob[3:], abs=1e-6)
    assert a.forward_logprob[3] != pytest.approx(b.forward_logprob[3], abs=1e-6)  # later ones do see it
    assert a.backward_logprob[1] != pytest.approx(b.backward_logprob[1], abs=1e-6)
    # batching and padding change nothing
    (alone,) = score_sentences(lm, [["the", "cat", "sat", "the", "dogs"]])
    assert alone.forward_logprob == pytest.approx(a.forward_logprob, abs=1e-5)


def test_predictions_are_distributions_and_agree_with_the_scores():
    lm = tiny_lm(weight_scale=3.0)
    tokens = ["the", "cat", "sat"]
    predictions = predict(lm, tokens, k=len(WORDS))
    (score,) = score_sentences(lm, [tokens])
    for i, p in enumerate(predictions):
        for direction, logprob in (("forward", score.forward_logprob[i]), ("backward", score.backward_logprob[i])):
            dist = dict(getattr(p, direction))
            assert sum(dist.values()) == pytest.approx(1.0, abs=1e-5)
            assert math.log(dist[tokens[i]]) == pytest.approx(logprob, abs=1e-5)
    with pytest.raises(ValueError, match="k must be"):
        predict(lm, tokens, k=0)


def test_exported_softmax_scores_what_the_training_forward_path_computes(tmp_path):
    (tmp_path / "src.txt").write_text("".join(f"the cat sat on mat number {i} .\n" for i in range(300)))
    build_corpus(tmp_path / "corpus", [tmp_path / "src.txt"], heldout_fraction=0.05, n_shards=1, progress=None)
    config = TrainConfig(model=TINY_MODEL, batch_size=4, unroll_steps=5, n_negative_samples=0, lr=0.2, max_steps=3,
                         checkpoint_every_steps=100, snapshot_fractions=(), threads=1)  # fmt: skip
    train(config, tmp_path / "corpus", tmp_path / "run", progress=False)
    out = export_encoder(
        tmp_path / "run", tmp_path / "model", dtype=torch.float32, softmax_vocab=tmp_path / "corpus" / "vocab.txt"
    )
    lm = load_language_model(str(out))
    train_lm, _ = load_lm(tmp_path / "run")
    tokens = ["the", "cat", "sat", "unheard-of", "."]
    (score,) = score_sentences(lm, [tokens])
    # the training path: each direction reads its own stream from a zero state
    ids = [0, *(lm.vocab.id(t) for t in tokens), 1]
    chars = batch_to_ids([tokens])[0]  # (n + 2, 50), boundaries included
    n = len(ids)
    positions = torch.stack([torch.arange(n - 1), torch.arange(n - 1, 0, -1)]).unsqueeze(1)
    train_lm.eval()
    with torch.no_grad():
        top, _ = train_lm.top_layer(chars, positions, train_lm.bilm.lstm.zero_state(1))
        targets = torch.tensor([ids[1:], ids[:-1][::-1]])
        logp = [
            torch.log_softmax(train_lm.softmax.weight @ top[d, 0].T + train_lm.softmax.bias[:, None], 0) for d in (0, 1)
        ]
        forward = logp[0].gather(0, targets[0][None]).squeeze(0).tolist()
        backward = logp[1].gather(0, targets[1][None]).squeeze(0).tolist()[::-1]
    assert score.forward_logprob + [score.forward_eos] == pytest.approx(forward, abs=1e-4)
    assert [score.backward_bos] + score.backward_logprob == pytest.approx(backward, abs=1e-4)
    assert score.unk == [3]
    # a warm-start state with its vocab.txt is a language model too (float16 on disk)
    from probing_lab.training.checkpoint import export_warm_start

    state = export_warm_start(tmp_path / "run", tmp_path / "state", tmp_path / "corpus" / "vocab.txt")
    (from_state,) = score_sentences(load_language_model(str(state)), [tokens])
    assert from_state.forward_logprob == pytest.approx(score.forward_logprob, abs=2e-2)
    (state / "vocab.txt").unlink()
    with pytest.raises(NoSoftmaxError, match="holds a softmax but not its words"):
        load_language_model(str(state))


def test_models_without_a_softmax_say_so(tmp_path, capsys):
    model = ElmoBiLM(ElmoOptions.from_dict(TINY_MODEL))
    save_checkpoint(model, tmp_path / "model")
    with pytest.raises(NoSoftmaxError, match="no language-model softmax.*--with-softmax"):
        load_language_model(str(tmp_path / "model"))
    (tmp_path / "in.txt").write_text("the cat\n")
    assert main(["lm", "score", "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "o.jsonl"),
                 "--model", str(tmp_path / "model")]) == 2  # fmt: skip
    assert "no language-model softmax" in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()


def test_a_softmax_that_does_not_fit_is_named(tmp_path):
    model = ElmoBiLM(ElmoOptions.from_dict(TINY_MODEL))
    save_checkpoint(model, tmp_path / "model")
    save_softmax(tmp_path / "model", torch.zeros(len(WORDS), 5), torch.zeros(len(WORDS)), Vocabulary(WORDS))
    with pytest.raises(ValueError, match="does not fit"):
        load_language_model(str(tmp_path / "model"))
    (tmp_path / "model" / "softmax.safetensors").write_bytes(b"garbage")  # the card recorded another hash
    with pytest.raises(ValueError, match="softmax.safetensors: its SHA-256 differs from the softmax_sha256"):
        load_language_model(str(tmp_path / "model"))
    (tmp_path / "model" / "model_card.json").unlink()  # without a recorded hash: the reader's own error
    with pytest.raises(ValueError, match="truncated or corrupt"):
        load_language_model(str(tmp_path / "model"))


def _lm_dir(tmp_path):
    lm = tiny_lm()
    save_checkpoint(lm.bilm, tmp_path / "model")
    save_softmax(tmp_path / "model", lm.weight, lm.bias, lm.vocab, dtype=torch.float32)
    return tmp_path / "model"


def test_cli_score_writes_one_json_line_per_input_line(tmp_path, capsys):
    model = _lm_dir(tmp_path)
    (tmp_path / "in.txt").write_text("the cat sat\nthe zebra\n", encoding="utf-8")
    out = tmp_path / "scores.jsonl"
    assert main(["lm", "score", "--input", str(tmp_path / "in.txt"), "--output", str(out),
                 "--model", str(model), "--quiet"]) == 0  # fmt: skip
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["tokens"] for r in rows] == [["the", "cat", "sat"], ["the", "zebra"]]
    for r in rows:
        assert {"tokens", "forward_logprob", "backward_logprob", "forward_eos", "backward_bos", "unk"} <= set(r)
        assert len(r["forward_logprob"]) == len(r["backward_logprob"]) == len(r["tokens"])
        assert all(x <= 0 for x in r["forward_logprob"] + r["backward_logprob"])
        assert r["forward_perplexity"] >= 1
    assert rows[1]["unk"] == [1]
    # bad input: an empty line, a directory as output, invalid UTF-8; nothing is written
    (tmp_path / "gap.txt").write_text("the cat\n\nsat\n")
    assert main(["lm", "score", "--input", str(tmp_path / "gap.txt"), "--output", str(tmp_path / "g.jsonl"),
                 "--model", str(model)]) == 2  # fmt: skip
    assert "[2] are empty" in capsys.readouterr().err
    (tmp_path / "bad.txt").write_bytes(b"the cat\nthe \xff\n")
    assert main(["lm", "score", "--input", str(tmp_path / "bad.txt"), "--output", str(tmp_path / "b.jsonl"),
                 "--model", str(model)]) == 2  # fmt: skip
    assert "line 2: not UTF-8" in capsys.readouterr().err
    assert main(["lm", "score", "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path),
                 "--model", str(model)]) == 2  # fmt: skip
    assert "is a directory" in capsys.readouterr().err
    assert not (tmp_path / "g.jsonl").exists() and not (tmp_path / "b.jsonl").exists()


def test_cli_predict(tmp_path, capsys):
    model = _lm_dir(tmp_path)
    assert main(["lm", "predict", "--model", str(model), "--text", "the cat sat", "-k", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count("forward  (from the left)") == 3 and "perplexity: forward" in out
    assert main(["lm", "predict", "--model", str(model), "--text", "the cat", "--position", "7"]) == 2
    assert "outside the sentence" in capsys.readouterr().err


def test_agreement_pairs_differ_only_in_the_verbs_number():
    pairs = generate_pairs()
    forms = {(s, p) for s, p, _ in VERBS} | {(p, s) for s, p, _ in VERBS}
    for construction in CONSTRUCTIONS:
        assert sum(p.construction == construction for p in pairs) >= 200
    for p in pairs:
        diff = [i for i, (a, b) in enumerate(zip(p.grammatical, p.ungrammatical)) if a != b]
        assert len(p.grammatical) == len(p.ungrammatical) and diff == [p.verb_index], p
        good, bad = p.grammatical[p.verb_index], p.ungrammatical[p.verb_index]
        assert (good, bad) in forms
        singular = {s for s, _, _ in VERBS}
        assert (good in singular) == (p.subject_number == "singular"), p
    assert len({p.grammatical for p in pairs}) == len(pairs)
    assert generate_pairs() == pairs and generate_pairs(seed=1) != pairs  # seeded
    assert read_pairs(PAIRS_FILE) == pairs  # the shipped file is what the generator makes


def test_agreement_accuracy_is_counted_per_construction_and_direction():
    lm = tiny_lm()
    pairs = [p for p in generate_pairs(per_construction=20)]
    result = evaluate_agreement(lm, pairs)
    assert set(result.accuracy) == {*CONSTRUCTIONS, "overall"}
    assert result.accuracy["overall"]["pairs"] == 100
    # by hand for one construction
    simple = [p for p in pairs if p.construction == "simple"]
    scores = score_sentences(lm, [s for p in simple for s in (p.grammatical, p.ungrammatical)])
    wins = sum(g.forward_total > b.forward_total for g, b in zip(scores[0::2], scores[1::2]))
    assert result.accuracy["simple"]["forward"] == wins / len(simple)
    assert "| simple | 20 |" in result.table()
    with pytest.raises(ValueError, match="no minimal pairs"):
        evaluate_agreement(lm, [])


def test_a_broken_pairs_file_names_the_line(tmp_path):
    (tmp_path / "p.jsonl").write_text('{"construction": "simple"}\n')
    with pytest.raises(ValueError, match="line 1: not a minimal pair"):
        read_pairs(tmp_path / "p.jsonl")


def test_the_shipped_model_is_a_language_model_that_learned_local_agreement():
    from probing_lab.model_loading import shipped_model_dir

    if shipped_model_dir() is None:
        pytest.skip("the shipped model is not in this checkout")
    lm = load_language_model()  # the shipped model carries its softmax and vocab.txt
    (scored,) = score_sentences(lm, [["The", "keys", "to", "the", "cabinet", "are", "on", "the", "table", "."]])
    assert scored.unk == [] and all(1 < scored.perplexity(d) < 1000 for d in ("forward", "backward"))
    pairs = [p for p in read_pairs() if p.construction in ("simple", "adverb")][::6]  # 80 pairs
    accuracy = evaluate_agreement(lm, pairs).accuracy
    # measured on all 480 of these pairs: forward 0.842 / 0.958, backward 0.950 / 0.979; a random init ~0.5
    assert accuracy["simple"]["forward"] > 0.7 and accuracy["adverb"]["forward"] > 0.8, accuracy
