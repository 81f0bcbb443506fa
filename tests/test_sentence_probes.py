"""Sentence probes (issue 23 item 3): pooling (mean, max, the biLM's summary), the length-bucket
control, the sentence_label task on a sentences file, from the shell, on the EWT-derived datasets,
and the bad input."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY_MODEL

from probing_lab.cli import main
from probing_lab.datasets import load_dataset
from probing_lab.datasets.records import DatasetFormatError
from probing_lab.datasets.sentence_tasks import LENGTH_BINS, bigram_shift, length_bin, punctuation_only
from probing_lab.elmo import ElmoBiLM, ElmoOptions, save_checkpoint
from probing_lab.features.pooling import pool, pool_layers, pooled_layer
from probing_lab.probing.experiment import Experiment, ExperimentError, run_experiment
from probing_lab.probing.runs import ProbeRun
from probing_lab.probing.tasks import length_control_labels

FAST = {"control": False, "mdl": False, "random_init": False, "probe": {"epochs": 3}}
NOUNS = {"singular": ["cat", "dog", "bird", "child"], "plural": ["cats", "dogs", "birds", "children"]}
VERBS = {"singular": ["sleeps", "sits", "runs"], "plural": ["sleep", "sit", "run"]}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    model = ElmoBiLM(ElmoOptions.from_dict(TINY_MODEL))
    model.reset_parameters(torch.Generator().manual_seed(0))
    return str(save_checkpoint(model, tmp_path_factory.mktemp("model") / "tiny"))


def _run(exp, tiny, tmp_path, name="run", **kw):
    return run_experiment(
        exp, model=tiny, out=tmp_path / name, cache_dir=tmp_path / "cache", progress=False, log=lambda m: None, **kw
    )


def sentences_file(path: Path, n: int = 40, seed: int = 0, labels=("singular", "plural")) -> Path:
    """``n`` lines "the NOUN VERB [adverbs] .<TAB>number", lengths 4 to 9 tokens."""
    r = random.Random(seed)
    lines = ["# sentence\tlabel"]
    for i in range(n):
        label = labels[i % len(labels)]
        number = label if label in NOUNS else "singular"
        words = ["the", r.choice(NOUNS[number]), r.choice(VERBS[number])] + ["very"] * r.randint(0, 5) + ["."]
        lines.append(f"{' '.join(words)}\t{label}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# --- pooling --------------------------------------------------------------------------------------


def test_pooling_by_hand_mean_max_and_the_bilm_summary():
    # two sentences (2 tokens, then 3), layer 1 = [forward (2 dims); backward (2 dims)]
    tokens = np.array(
        [[1, 2, 10, 20], [3, 0, 30, 40], [5, 1, 50, 60], [7, 9, 70, 80], [-1, 2, 90, 0]],
        dtype=np.float32,
    )
    offsets = np.array([0, 2, 5])
    assert np.allclose(pool(tokens, offsets, "mean"), [[2, 1, 20, 30], [11 / 3, 4, 70, 140 / 3]])
    assert pool(tokens, offsets, "max").tolist() == [[3, 2, 30, 40], [7, 9, 90, 80]]
    # summary: the forward half of the LAST token next to the backward half of the FIRST token
    assert pool(tokens, offsets, "summary").tolist() == [[3, 0, 10, 20], [-1, 2, 50, 60]]
    assert pool(tokens, offsets, "summary", directional=False).tolist() == pool(tokens, offsets, "mean").tolist()

    layers = np.stack([tokens * 0 + 1, tokens, tokens * 2])  # (3 layers, 5 tokens, 4 dims)
    pooled = pool_layers(layers, offsets, "summary")
    assert pooled.shape == (3, 2, 4)
    assert pooled[0].tolist() == [[1, 1, 1, 1]] * 2  # layer 0 has no direction: the mean
    assert pooled[2].tolist() == [[6, 0, 20, 40], [-2, 4, 100, 120]]
    assert pooled_layer(pooled, "1f").tolist() == [[3, 0], [-1, 2]]  # the forward LM's last state
    assert pooled_layer(pooled, "1b").tolist() == [[10, 20], [50, 60]]  # the backward LM's first state
    assert np.allclose(pooled_layer(pooled, "mean"), pooled.mean(0))
    assert pooled_layer(pooled, "mix").shape == (2, 3, 4)
    assert np.allclose(pooled_layer(pool_layers(layers, offsets, "max"), "2f"), pool(tokens * 2, offsets, "max")[:, :2])
    for how in ("mean", "max"):  # read a few rows at a time: the same vectors
        assert np.allclose(pool(tokens, offsets, how, chunk=1), pool(tokens, offsets, how))
        assert np.allclose(pool(tokens.astype(np.float16), offsets, how, chunk=3), pool(tokens, offsets, how))
    with pytest.raises(ValueError, match="pooling must be one of"):
        pool(tokens, offsets, "median")
    with pytest.raises(ValueError, match="sentence 1 has no tokens"):
        pool(tokens, np.array([0, 2, 2]), "mean")


def test_the_control_gives_one_fixed_label_per_length_bucket():
    assert [length_bin(n) for n in (1, 4, 5, 8, 9, 25, 26, 28, 29, 32, 33, 200)] == [
        "1-4", "1-4", "5-8", "5-8", "9-12", "21-25", "26-28", "26-28", "29-32", "29-32", "33+", "33+",
    ]  # fmt: skip
    assert len(LENGTH_BINS) == 8
    lengths = list(range(1, 60))
    train = ["a"] * 50 + ["b"] * 30 + ["c"] * 20
    control = length_control_labels(lengths, train, seed=3)
    by_bucket = {}
    for n, label in zip(lengths, control):
        by_bucket.setdefault(length_bin(n), set()).add(label)
    assert all(len(v) == 1 for v in by_bucket.values())  # fixed per bucket
    assert set(control) <= {"a", "b", "c"}
    assert length_control_labels(lengths, train, seed=3) == control  # seeded: the same in every run
    many = [length_control_labels([5], train, seed=s)[0] for s in range(300)]
    assert Counter(many)["a"] > Counter(many)["c"]  # drawn from the label distribution


# --- end to end -----------------------------------------------------------------------------------


def test_a_sentences_file_end_to_end_with_summary_pooling_control_and_random_init(tmp_path, tiny):
    path = sentences_file(tmp_path / "number.sentences", 60)
    exp = {
        "name": "number",
        "dataset": {"format": "sentences", "train": str(path)},
        "layers": [0, 1, "1f", "1b", "mean", "mix"],
        "mdl": False,
        "probe": {"pooling": "summary", "epochs": 5, "kind": "mlp", "hidden": 16},
    }
    run = _run(exp, tiny, tmp_path)
    assert run.task == "sentence_label" and run.metrics["pooling"] == "summary"
    assert run.layer_keys == ["0", "1", "1f", "1b", "mean", "mix"]
    assert run.metrics["sentences"] == {"train": 48, "dev": 6, "test": 6}
    assert sorted(run.labels) == ["plural", "singular"]
    for entry in run.layers.values():
        assert 0 <= entry.score <= 1 and 0 <= entry.control_score <= 1
        assert entry.selectivity == pytest.approx(entry.score - entry.control_score)
        assert sum(map(sum, entry.confusion)) == 6
    assert set(run.random_init) == set(run.layer_keys)
    # the majority baseline: the test share of the most frequent training label (row 0 of the confusion)
    assert run.majority == pytest.approx(sum(run.layers["0"].confusion[0]) / 6)
    assert "most frequent training label" in run.metrics["majority_is"]
    assert run.metrics["unseen_test_labels"] == {"count": 0, "of": 6, "labels": {}}
    assert (tmp_path / "run" / "split.json").is_file()


@pytest.mark.parametrize("how", ["mean", "max"])
def test_mean_and_max_pooling_run_with_mdl(tmp_path, tiny, how):
    path = sentences_file(tmp_path / "s.sentences", 40)
    exp = {**FAST, "mdl": True, "name": "s", "dataset": {"format": "sentences", "train": str(path)}}
    run = _run({**exp, "layers": [2], "probe": {"pooling": how, "epochs": 2}}, tiny, tmp_path)
    assert run.metrics["pooling"] == how and run.layers["2"].mdl_bits > 0


def test_quick_form_from_the_shell(tmp_path, tiny, capsys):
    path = sentences_file(tmp_path / "mine.sentences", 30)
    args = ["probe", "--data", str(path), "--format", "sentences", "--layers", "0,2", "--model", tiny, "--quiet"]
    assert main([*args, "--out", str(tmp_path / "run")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "run")
    run = ProbeRun.load(tmp_path / "run")
    assert run.task == "sentence_label" and run.metrics["pooling"] == "mean" and run.layer_keys == ["0", "2"]
    assert set(run.random_init) == {"0", "2"} and all(e.control_score is not None for e in run.layers.values())


# --- derived EWT datasets -------------------------------------------------------------------------

ROW = "{i}\t{form}\t{form}\t{upos}\t_\t_\t{head}\t{rel}\t_\t_"


def tiny_ewt(root: Path, n: int = 24) -> Path:
    """``root/ud-english-ewt/en_ewt-ud-{train,dev,test}.conllu``: sentences of 3 to 40 tokens."""
    folder = root / "ud-english-ewt"
    folder.mkdir(parents=True)
    for split, count in (("train", n), ("dev", n // 2), ("test", n // 2)):
        blocks = []
        for k in range(count):
            length = 3 + (k * 7 + len(split)) % 38
            forms = ["the", "cat"] + [f"w{(k + j) % 9}" for j in range(length - 3)] + ["."]
            rows = [
                ROW.format(i=j + 1, form=f, upos="PUNCT" if f == "." else "X", head=0 if j == 0 else 1, rel="dep")
                for j, f in enumerate(forms)
            ]
            blocks.append(f"# sent_id = {split}-{k}\n" + "\n".join(rows) + "\n")
        (folder / f"en_ewt-ud-{split}.conllu").write_text("\n".join(blocks) + "\n", encoding="utf-8")
    return root


def test_sentence_length_and_bigram_shift_from_a_tiny_ewt(tmp_path):
    data = tiny_ewt(tmp_path / "data")
    base = load_dataset("ewt", "train", data)
    lengths = load_dataset("ewt-sentence-length", "train", data)
    assert [s.id for s in lengths] == [s.id for s in base if len(s.tokens) >= 5]
    assert all(s.label == length_bin(len(s.tokens)) and s.label != "1-4" for s in lengths)
    assert all(base_s.label is None for base_s in base)  # the base sentences are not touched

    shifted = load_dataset("ewt-bigram-shift", "train", data)
    assert shifted == load_dataset("ewt-bigram-shift", "train", data)  # seeded per split
    counts = Counter(s.label for s in shifted)
    assert set(counts) == {"I", "O"} and abs(counts["I"] - counts["O"]) <= 1  # balanced
    originals = {s.id: s.words for s in base}
    for s in shifted:
        words, original = s.words, originals[s.id.split("~")[0]]
        differ = [i for i, (a, b) in enumerate(zip(words, original)) if a != b]
        if s.label == "O":
            assert not differ and "~" not in s.id
            continue
        i = int(s.id.rsplit("~swap", 1)[1])
        assert differ == [i, i + 1] and words[i : i + 2] == original[i : i + 2][::-1]
        assert not punctuation_only(words[i]) and not punctuation_only(words[i + 1])
    dev = load_dataset("ewt-bigram-shift", "dev", data)
    assert {s.id for s in dev} & {s.id for s in shifted} == set()  # each split from its own EWT file


def test_bigram_shift_never_swaps_punctuation_and_skips_sentences_without_a_pair():
    from probing_lab.datasets.records import Sentence, Token

    def sentence(text, k):
        return Sentence([Token(form=w) for w in text.split()], str(k), "t")

    plenty = [sentence("a b , c . d e", k) for k in range(40)]
    none = [sentence("x , x , x", 99), sentence("a b c", 98)]  # no pair / under 5 tokens
    out = bigram_shift(plenty + none, seed=1)
    assert len(out) == 40 and {s.id.split("~")[0] for s in out} == {str(k) for k in range(40)}
    for s in out:
        if s.label == "I":
            i = int(s.id.rsplit("~swap", 1)[1])
            assert i in (0, 5)  # "a b" or "d e": never next to "," or "."


def _conllu(rows: str) -> str:
    """``form/upos/feats/head/deprel`` words separated by spaces -> one CoNLL-U sentence."""
    out = []
    for i, word in enumerate(rows.split(), 1):
        form, upos, feats, head, rel = word.split("/")
        out.append(f"{i}\t{form}\t{form}\t{upos}\t_\t{feats}\t{head}\t{rel}\t_\t_")
    return "\n".join(out) + "\n\n"


def test_tense_and_subject_number_from_ud_features(tmp_path):
    past = "the/DET/_/2/det cat/NOUN/Number=Sing/3/nsubj slept/VERB/Tense=Past/0/root on/ADP/_/5/case "
    past += "mats/NOUN/Number=Plur/3/obl ./PUNCT/_/3/punct"
    cop = "the/DET/_/2/det cats/NOUN/Number=Plur/5/nsubj are/AUX/Mood=Ind|Tense=Pres/5/cop very/ADV/_/5/advmod "
    cop += "happy/ADJ/Degree=Pos/0/root ./PUNCT/_/5/punct"
    imperative = "go/VERB/Mood=Imp/0/root to/ADP/_/4/case the/DET/_/4/det shop/NOUN/Number=Sing/1/obl ./PUNCT/_/1/punct"
    short = "cats/NOUN/Number=Plur/2/nsubj slept/VERB/Tense=Past/0/root ./PUNCT/_/2/punct"
    folder = tmp_path / "ud-english-ewt"
    folder.mkdir()
    for split in ("train", "dev", "test"):
        text = "".join(_conllu(r) for r in (past, cop, imperative, short))
        (folder / f"en_ewt-ud-{split}.conllu").write_text(text, encoding="utf-8")
    tense = load_dataset("ewt-tense", "dev", tmp_path)
    assert [(s.words[1], s.label) for s in tense] == [("cat", "Past"), ("cats", "Pres")]  # the copula's tense
    number = load_dataset("ewt-subj-number", "test", tmp_path)
    assert [(s.words[2], s.label) for s in number] == [("slept", "Sing"), ("are", "Plur")]  # no subject: left out


def test_a_builtin_experiment_on_the_derived_dataset(tmp_path, tiny):
    data = tiny_ewt(tmp_path / "data", 40)
    exp = Experiment.load(Path(__file__).resolve().parents[1] / "probes" / "bigram_shift_ewt.toml")
    small = {**exp.__dict__, "layers": [0, "1b"], "mdl": False, "random_init": False, "probe": {"epochs": 2}}
    small.pop("source")
    run = _run(small, tiny, tmp_path, data_dir=data)
    assert run.task == "sentence_label" and run.dataset == "ewt-bigram-shift"
    assert sorted(run.labels) == ["I", "O"] and run.layers["1b"].control_score is not None


# --- bad input ------------------------------------------------------------------------------------


def _refused(tmp_path, tiny, exp, match):
    with pytest.raises((DatasetFormatError, ExperimentError, ValueError), match=match):
        _run(exp, tiny, tmp_path)
    assert not (tmp_path / "run").exists()


def _exp(path, **more):
    return {
        **FAST,
        "name": "bad",
        "dataset": {"format": "sentences", "train": str(path), **more.pop("dataset", {})},
        **more,
    }


def test_bad_sentence_files_are_refused_or_counted(tmp_path, tiny):
    one = sentences_file(tmp_path / "one.sentences", 20, labels=("singular",))
    _refused(tmp_path, tiny, _exp(one), r"one\.sentences: every sentence has the label 'singular': nothing to probe")
    empty = tmp_path / "empty.sentences"
    empty.write_text("the cat sleeps\tsingular\n\tplural\n", encoding="utf-8")
    _refused(tmp_path, tiny, _exp(empty), r"empty\.sentences:2: expected a sentence in the first column")
    blank = tmp_path / "blank.sentences"
    blank.write_text("# only a comment\n\n", encoding="utf-8")
    _refused(tmp_path, tiny, _exp(blank), r"blank\.sentences: no sentences")
    _refused(tmp_path, tiny, _exp(one, dataset={"label": "upos"}), r"label is for conllu files only")
    _refused(tmp_path, tiny, _exp(one, task="token_label"), r"task 'token_label' does not run on a sentences file")
    good = sentences_file(tmp_path / "good.sentences", 20)
    _refused(tmp_path, tiny, _exp(good, probe={"pooling": "median"}), r"pooling must be one of \['mean', 'max'")
    tokens = {"name": "t", "task": "upos", "dataset": "ewt", "probe": {"pooling": "mean"}}
    with pytest.raises(ExperimentError, match="pooling is a setting of the sentence tasks"):
        Experiment.from_dict(tokens)


def test_test_labels_unseen_in_training_are_counted_and_scored_as_wrong(tmp_path, tiny):
    train, dev = sentences_file(tmp_path / "train.sentences", 30), sentences_file(tmp_path / "dev.sentences", 6, 1)
    test = sentences_file(tmp_path / "test.sentences", 6, 2, labels=("singular", "plural", "dual"))
    run = _run(_exp(train, dataset={"dev": str(dev), "test": str(test)}, layers=[0]), tiny, tmp_path)
    assert run.metrics["unseen_test_labels"] == {"count": 2, "of": 6, "labels": {"dual": 2}}
    assert "dual" not in run.labels and run.layers["0"].score <= 4 / 6
    assert sum(map(sum, run.layers["0"].confusion)) == 4


def test_sentence_label_on_a_token_dataset_names_the_sentence(tmp_path, tiny):
    data = tiny_ewt(tmp_path / "data", 12)
    exp = {**FAST, "name": "x", "task": "sentence_label", "dataset": "ewt", "layers": [0]}
    with pytest.raises(ValueError, match=r"sentence train-0: no sentence label"):
        _run(exp, tiny, tmp_path, data_dir=data)
