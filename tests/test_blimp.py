"""BLiMP and own minimal-pair files: pairs scored by hand on a tiny seeded model, batched totals
against the sentence scorer, the published numbers, bad files, and the command."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from test_lm import tiny_lm

from probing_lab.cli import main
from probing_lab.lm.blimp import BlimpError, evaluate_blimp, published, read_blimp, read_pairs_file, sentence_log_probs
from probing_lab.lm.score import score_sentences


def write_pairs(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_pair_scored_by_hand_with_a_softmax_that_ignores_the_context(tmp_path):
    # zero weights: every position gets softmax(bias) = p whatever the biLM says, so a sentence's
    # forward total is the product of p over its words and </S>, its backward one over <S> and its words
    lm = tiny_lm()
    p = {"<S>": 0.1, "</S>": 0.2, "<UNK>": 0.05, "the": 0.15, "cat": 0.3, "sat": 0.15, "dogs": 0.05}
    lm.weight.zero_()
    lm.bias.copy_(__import__("torch").tensor([math.log(p[w]) for w in lm.vocab.words]))
    pairs = read_pairs_file(
        write_pairs(tmp_path / "p.jsonl", [{"sentence_good": "the cat sat", "sentence_bad": "the dogs sat"}])
    )
    totals = sentence_log_probs(lm, [pairs[0].good, pairs[0].bad])
    good = math.log(p["the"] * p["cat"] * p["sat"])
    bad = math.log(p["the"] * p["dogs"] * p["sat"])
    assert totals[0] == pytest.approx([good + math.log(p["</S>"]), good + math.log(p["<S>"])], abs=1e-5)
    assert totals[1] == pytest.approx([bad + math.log(p["</S>"]), bad + math.log(p["<S>"])], abs=1e-5)
    metrics = evaluate_blimp(lm, pairs)
    assert metrics["overall"]["forward"] == metrics["overall"]["both"] == 1.0  # 0.3 > 0.05: the good one wins
    assert metrics["paradigms"]["p"]["pairs"] == 1 and metrics["kind"] == "blimp"


def test_batched_totals_are_the_sentence_scorer_totals():
    lm = tiny_lm(seed=3)
    sentences = [["the", "cat"], ["the", "cat", "sat", "the", "dogs"], ["dogs"], ["the", "zebra", "sat"]]
    totals = sentence_log_probs(lm, sentences, batch_size=3)  # two batches, sorted by length inside
    for row, s in zip(totals, score_sentences(lm, sentences)):
        assert row == pytest.approx([s.forward_total, s.backward_total], abs=1e-4)


def test_paradigms_phenomena_intervals_and_published_numbers(tmp_path):
    blimp = tmp_path / "blimp"
    (blimp / "data").mkdir(parents=True)
    for uid, term in (("a_par", "agr"), ("b_par", "agr"), ("c_par", "isl")):
        rows = [
            {"sentence_good": "the cat sat", "sentence_bad": "the dogs sat", "UID": uid, "linguistics_term": term},
            {"sentence_good": "the dogs sat", "sentence_bad": "the cat sat", "UID": uid, "linguistics_term": term},
        ] * 5
        write_pairs(blimp / "data" / f"{uid}.jsonl", rows)
    (blimp / "models_summary.jsonl").write_text(
        '{"UID":"a_par","linguistics_term":"agr","ngram":0.5,"lstm":0.6,"txl":0.7,"gpt2":0.8}\n'
        '{"UID":"overall","linguistics_term":"agr","ngram":0.5,"lstm":0.6,"txl":0.7,"gpt2":0.8}\n'
    )
    (blimp / "human_validation_summary.csv").write_text(
        '"Condition","accepted","total_mean","count"\n"a_par",5,0.9,100\n'
    )
    pairs = read_blimp(tmp_path)
    assert len(pairs) == 30 and {p.phenomenon for p in pairs} == {"agr", "isl"}
    m = evaluate_blimp(tiny_lm(), pairs, tmp_path)
    # a pair and its mirror: exactly one of the two is right in every direction
    for d in ("forward", "backward", "both"):
        assert m["paradigms"]["a_par"][d] == 0.5 and m["overall"][d] == 0.5
        lo, hi = m["overall"][f"{d}_ci95"]
        assert lo <= 0.5 <= hi
    assert m["paradigms"]["a_par"]["published"]["gpt2"] == 0.8 and m["paradigms"]["a_par"]["human"] == 0.9
    assert m["phenomena"]["agr"]["paradigms"] == 2 and "published" not in m["phenomena"]["agr"]  # b_par has none
    assert published(tmp_path)["phenomena"]["agr"]["lstm"] == 0.6
    assert read_blimp(tmp_path, ["c_par"])[0].paradigm == "c_par"
    with pytest.raises(BlimpError, match=r"unknown paradigm\(s\) \['nope'\]"):
        read_blimp(tmp_path, ["nope"])


def test_bad_files_are_refused_with_file_and_line(tmp_path):
    good = {"sentence_good": "the cat sat", "sentence_bad": "the dogs sat"}
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps(good) + "\n{not json\n")
    with pytest.raises(BlimpError, match=r"pairs.jsonl:2: not JSON"):
        read_pairs_file(path)
    write_pairs(path, [good, {"sentence_good": "the cat", "sentence_bad": "  "}])
    with pytest.raises(BlimpError, match=r"pairs.jsonl:2: sentence_bad is empty"):
        read_pairs_file(path)
    write_pairs(path, [{"sentence_good": "the cat"}])
    with pytest.raises(BlimpError, match=r"pairs.jsonl:1: no sentence_bad"):
        read_pairs_file(path)
    with pytest.raises(BlimpError, match="BLiMP not found"):
        read_blimp(tmp_path / "nowhere")
    with pytest.raises(BlimpError, match="no such minimal-pair file"):
        read_pairs_file(tmp_path / "missing.jsonl")


def test_the_command_writes_a_run_and_refuses_bad_input_before_scoring(tmp_path, capsys):
    pairs = write_pairs(
        tmp_path / "mine.jsonl",
        [{"sentence_good": "the cat sat", "sentence_bad": "the dogs sat", "UID": "mine"}] * 4,
    )
    out = tmp_path / "run"
    args = ["lm", "blimp", "--pairs", str(pairs), "--out", str(out), "--model", "random:cpu-tiny", "--quiet"]
    assert main(args) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["kind"] == "blimp" and set(metrics["overall"]) >= {"forward", "backward", "both"}
    assert metrics["pairs"] == 4 and metrics["oov"]["tokens"] >= 0 and "| **overall** |" in capsys.readouterr().out
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"sentence_good": "a"}\n')
    assert main(["lm", "blimp", "--pairs", str(bad), "--out", str(tmp_path / "r2"), "--quiet"]) == 2
    assert "bad.jsonl:1: no sentence_bad" in capsys.readouterr().err and not (tmp_path / "r2").exists()
    assert main(["lm", "blimp", "--data-dir", str(tmp_path / "none"), "--out", str(tmp_path / "r3")]) == 2
    assert "BLiMP not found" in capsys.readouterr().err and not np.any([(tmp_path / "r3").exists()])
