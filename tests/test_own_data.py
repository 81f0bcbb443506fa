"""Probing your own files: the conllu, tokens and wic readers, the [dataset] table, the quick CLI
form, the recorded files and split, and every bad input a clear error or a documented behaviour."""

from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path

import pytest
import torch
from conftest import TINY_MODEL

from probing_lab.cli import main
from probing_lab.datasets.files import iter_labelled_file, iter_sentence_file, read_labelled_file, read_span_file
from probing_lab.datasets.records import DatasetFormatError
from probing_lab.elmo import ElmoBiLM, ElmoOptions, save_checkpoint
from probing_lab.probing.experiment import Experiment, ExperimentError, run_experiment
from probing_lab.probing.own_data import tree_problem
from probing_lab.probing.runs import ProbeRun, report

NOUNS = ["cat", "dog", "bird", "child", "man", "tree"]
VERBS = ["sat", "slept", "stood", "jumped"]
FAST = {"control": False, "mdl": False, "random_init": False, "probe": {"epochs": 3}}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    model = ElmoBiLM(ElmoOptions.from_dict(TINY_MODEL))
    model.reset_parameters(torch.Generator().manual_seed(0))
    return str(save_checkpoint(model, tmp_path_factory.mktemp("model") / "tiny"))


def _run(exp, tiny, tmp_path, name="run"):
    return run_experiment(
        exp, model=tiny, out=tmp_path / name, cache_dir=tmp_path / "cache", progress=False, log=lambda m: None
    )


def tokens_file(path: Path, n: int = 40, seed: int = 0, extra_label: str | None = None) -> Path:
    """``n`` sentences "DET NOUN VERB ." with the full stop unlabelled (``_``), a comment on top."""
    r = random.Random(seed)
    lines = ["# made by the test"]
    for _ in range(n):
        lines += [f"{r.choice(['the', 'a'])}\tDET", f"{r.choice(NOUNS)}\tNOUN", f"{r.choice(VERBS)}\tVERB", ".\t_", ""]
    if extra_label:
        lines += [f"quickly\t{extra_label}", "ran\tVERB", ""]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


CONLLU = """# sent_id = s{n}
# text = The {noun} {verb} on the {noun2} .
1\tThe\tthe\tDET\tDT\tDefinite=Def\t2\tdet\t_\t_
2\t{noun}\t{noun}\tNOUN\tNN\tNumber={number}\t3\tnsubj\t_\t_
3-4\t{verb}on\t_\t_\t_\t_\t_\t_\t_\t_
3\t{verb}\t{verb}\tVERB\tVBD\tTense=Past\t0\troot\t_\tSpaceAfter=No
4\ton\ton\tADP\tIN\t_\t6\tcase\t_\t_
5\tthe\tthe\tDET\tDT\tDefinite=Def\t6\tdet\t_\t_
5.1\tgone\tgo\tVERB\tVBN\t_\t_\t_\t3:conj\t_
6\t{noun2}\t{noun2}\tNOUN\tNN\tNumber={number}\t3\tobl:on\t_\t_
7\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

"""


def conllu_file(path: Path, n: int = 30, heads: str | None = None) -> Path:
    text = "".join(
        CONLLU.format(
            n=i, noun=NOUNS[i % 6], verb=VERBS[i % 4], noun2=NOUNS[(i + 2) % 6], number=("Sing", "Plur")[i % 2]
        )
        for i in range(n)
    )
    if heads:  # the last sentence's HEAD column replaced
        cut = text.rindex("# sent_id")
        rows = text[cut:].split("\n")
        word_rows = [i for i, r in enumerate(rows) if r and r[0].isdigit() and "-" not in r.split("\t")[0]]
        word_rows = [i for i in word_rows if "." not in rows[i].split("\t")[0]]
        for i, h in zip(word_rows, heads.split()):
            cols = rows[i].split("\t")
            cols[6] = h
            rows[i] = "\t".join(cols)
        text = text[:cut] + "\n".join(rows)
    path.write_text(text, encoding="utf-8")
    return path


def wic_file(path: Path, n: int = 40, group: bool = False) -> Path:
    """``bank`` in money and river sentences (target index 1 or 3), and ``bat`` (animal / club)."""
    money = ["the bank raised its rates", "my bank account is empty", "the bank closed early today"]
    river = ["we sat on the bank", "the river bank was muddy", "reeds grow on the bank"]
    lines = ["# sentence\tindex\tlabel"]
    for i in range(n):
        s = (money if i % 2 == 0 else river)[i % 3]
        lines.append(f"{s}\t{s.split().index('bank')}\t{'money' if i % 2 == 0 else 'river'}" + ("\tBANK" * group))
        b = ["the bat flew at night", "he swung the bat hard"][i % 2]
        lines.append(f"{b}\t{b.split().index('bat')}\t{('animal', 'club')[i % 2]}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# --- readers ------------------------------------------------------------------------------------


def test_readers_put_each_label_where_the_tasks_read_it(tmp_path):
    sentences, lines = read_labelled_file(tokens_file(tmp_path / "a.tokens", 3), "tokens")
    assert len(sentences) == 3 and lines == [2, 7, 12]  # first line of each sentence, after the comment
    first = sentences[0].tokens
    assert [t.extra.get("token_label") for t in first] == ["DET", "NOUN", "VERB", None]  # "_" is unlabelled
    path = conllu_file(tmp_path / "a.conllu", 2)
    s, _ = read_labelled_file(path, "conllu", "feats:Number")
    assert s[0].words == ["The", "cat", "sat", "on", "the", "bird", "."]  # range 3-4 and node 5.1 skipped
    assert [t.extra.get("token_label") for t in s[0].tokens] == [None, "Sing", None, None, None, "Sing", None]
    assert s[0].tokens[2].head == 0 and s[0].id == "s0"
    assert [t.extra.get("token_label") for t in read_labelled_file(path, "conllu", "deprel")[0][0].tokens][-2:] == [
        "obl:on",  # as written: subtypes kept
        "punct",
    ]
    misc = read_labelled_file(path, "conllu", "misc:SpaceAfter")[0][0].tokens
    assert [t.extra.get("token_label") for t in misc] == [None, None, "No", None, None, None, None]
    wic, wic_lines = read_labelled_file(wic_file(tmp_path / "a.wic", 2), "wic")
    assert wic_lines == [2, 3, 4, 5]  # one example per line (bank, bat, bank, bat)
    target = wic[0].tokens[1]
    assert (target.form, target.sense, target.lemma) == ("bank", "money", "bank")
    assert [t.sense for t in wic[0].tokens].count(None) == 4
    grouped = read_labelled_file(wic_file(tmp_path / "b.wic", 2, group=True), "wic")[0]
    assert grouped[0].tokens[1].lemma == "BANK"  # the group column, as written


def test_readers_stream_one_sentence_at_a_time(tmp_path):
    path = tokens_file(tmp_path / "a.tokens", 5)
    with open(path, "a", encoding="utf-8") as f:
        f.write("\nbroken line without a tab\n")
    reader = iter_labelled_file(path, "tokens")
    assert next(reader)[1].words[-1] == "."  # the first sentence comes before the bad line is read
    with pytest.raises(DatasetFormatError, match=r"a\.tokens:27: expected token<TAB>label.*spaces where the tab"):
        list(reader)


# --- end to end -----------------------------------------------------------------------------------


def test_a_tokens_file_is_split_80_10_10_and_the_run_records_files_and_split(tmp_path, tiny):
    (tmp_path / "data").mkdir()
    data = tokens_file(tmp_path / "data" / "pos.tokens", 40)
    toml = tmp_path / "pos_own.toml"  # paths relative to the experiment file
    toml.write_text(
        'name = "pos_own"\nlayers = [0, 1]\ncontrol = false\nmdl = false\nrandom_init = false\nseed = 3\n'
        '[probe]\nepochs = 3\n[dataset]\nformat = "tokens"\ntrain = "data/pos.tokens"\n',
        encoding="utf-8",
    )
    exp = Experiment.load(toml)
    assert exp.task == "token_label" and exp.dataset["train"] == str(data.resolve())
    run = _run(toml, tiny, tmp_path)
    assert run == ProbeRun.load(run.path) and run.dataset == "tokens file pos.tokens"
    m = run.metrics
    [record] = m["files"]
    assert record["sha256"] == hashlib.sha256(data.read_bytes()).hexdigest()
    assert record["bytes"] == data.stat().st_size and record["path"] == str(data.resolve())
    assert m["split"]["sentences"] == {"train": 32, "dev": 4, "test": 4} and m["split"]["seed"] == 3
    assert m["splits"]["test"] == "pos.tokens: 10% by seed 3"
    split = json.loads((run.path / "split.json").read_text())
    firsts = split["first_lines"]
    all_lines = [line for role in ("train", "dev", "test") for line in firsts[role]]
    assert sorted(all_lines) == [2 + 5 * i for i in range(40)]  # every sentence in exactly one role
    assert m["tokens"] == {"train": 96, "dev": 12, "test": 12}  # "." is unlabelled: 3 labelled tokens a sentence
    assert set(run.labels) == {"DET", "NOUN", "VERB"} and m["unseen_test_labels"]["count"] == 0
    assert all(0 <= e.score <= 1 for e in run.layers.values())
    again = _run(toml, tiny, tmp_path, "again")  # the same seed: the same split
    assert json.loads((again.path / "split.json").read_text())["first_lines"] == firsts
    assert "| pos_own (token_label) | " in report([run.path])


def test_a_conllu_file_probes_a_feature_the_trees_and_the_arcs(tmp_path, tiny):
    files = {role: conllu_file(tmp_path / f"{role}.conllu", n) for role, n in (("train", 24), ("dev", 6), ("test", 6))}
    dataset = {"format": "conllu", **{role: str(p) for role, p in files.items()}, "label": "feats:Number"}
    run = _run({"name": "number", "dataset": dataset, "layers": [0, 1], **FAST}, tiny, tmp_path)
    assert run.task == "token_label" and set(run.labels) == {"Sing", "Plur"}
    assert run.metrics["tokens"]["test"] == 12  # the two nouns of each sentence carry Number
    assert [f["role"] for f in run.metrics["files"]] == ["train", "dev", "test"]
    assert run.metrics["splits"] == {"train": "train.conllu", "dev": "dev.conllu", "test": "test.conllu"}
    for task in ("structural_distance", "dep_arc", "upos"):
        exp = {"name": task, "task": task, "dataset": dataset, "layers": [1], **FAST}
        exp["probe"] = {"epochs": 2}
        done = _run(exp, tiny, tmp_path, task)
        assert done.task == task and 0 <= done.layers["1"].score <= 1


@pytest.mark.parametrize("task", ["wsd_centroid", "wsd_linear"])
def test_a_wic_file_runs_both_sense_probes(tmp_path, tiny, task):
    path = wic_file(tmp_path / "senses.wic", 40)
    exp = {"task": task, "dataset": {"format": "wic", "train": str(path)}, "layers": [0, 1], "random_init": False}
    if task == "wsd_linear":
        exp["probe"] = {"epochs": 3}
    run = _run(exp, tiny, tmp_path)
    assert run.experiment == "senses" and run.task == task  # the name defaults to the file's stem
    assert run.metrics["lemmas"] == 2 and run.metrics["instances"]["test"] == 8  # 10% of 80 lines
    assert run.majority is not None and all(0 <= e.score <= 1 for e in run.layers.values())
    assert sum(run.metrics["split"]["sentences"].values()) == 80
    assert run.metrics["unseen_test_labels"] == {"count": 0, "of": 8, "labels": {}}


@pytest.mark.parametrize("fmt", ["tokens", "conllu", "wic"])
def test_quick_form_from_the_shell_with_controls_and_random_init(tmp_path, tiny, fmt, capsys):
    path = {"tokens": tokens_file, "conllu": conllu_file, "wic": wic_file}[fmt](tmp_path / f"mine.{fmt}", 30)
    args = ["probe", "--data", str(path), "--format", fmt, "--layers", "0,1", "--model", tiny, "--quiet"]
    assert main([*args, "--out", str(tmp_path / "run")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "run")
    run = ProbeRun.load(tmp_path / "run")
    assert run.task == {"wic": "wsd_centroid"}.get(fmt, "token_label") and run.layer_keys == ["0", "1"]
    assert set(run.random_init) == {"0", "1"}  # the random-init baseline ran on the file too
    if fmt != "wic":
        assert all(e.control_score is not None and e.mdl_bits > 0 for e in run.layers.values())
    assert run.metrics["files"][0]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert (tmp_path / "run" / "split.json").is_file()


def test_static_vectors_are_a_model_with_one_context_free_layer(tmp_path):
    from conftest import write_vectors

    path = tokens_file(tmp_path / "pos.tokens", 200)
    write_vectors(tmp_path / "w2v", ["the", "a", *NOUNS, *VERBS], 32)
    exp = {**_exp(path), "layers": [0, 1, "mix"], "random_init": True, "probe": {}}
    run = run_experiment(
        exp,
        model=f"word2vec:{tmp_path / 'w2v'}",
        out=tmp_path / "run",
        progress=False,
        cache_dir=tmp_path / "cache",
        log=lambda m: None,
    )
    assert run.layer_keys == ["0"] and not run.random_init  # one layer, and no random-init model of vectors
    assert run.metrics["model"] == "word2vec:w2v" and run.layers["0"].score > 0.9  # the word decides its tag
    with pytest.raises(ExperimentError, match="no such folder of static vectors"):
        run_experiment(_exp(path), model=f"word2vec:{tmp_path / 'none'}", out=tmp_path / "none", progress=False)
    assert not (tmp_path / "none").exists()


# --- bad input ----------------------------------------------------------------------------------


def _exp(path, fmt="tokens", **more):
    fast = {k: v for k, v in FAST.items() if k != "probe" or fmt != "wic"}  # wsd_centroid trains no probe
    return {"name": "bad", "dataset": {"format": fmt, "train": str(path), **more.pop("dataset", {})}, **fast, **more}


def _refused(tmp_path, tiny, exp, match):
    """run_experiment refuses ``exp`` with a message matching ``match`` and writes no run."""
    with pytest.raises((DatasetFormatError, ExperimentError, ValueError, FileNotFoundError), match=match):
        _run(exp, tiny, tmp_path)
    assert not (tmp_path / "run").exists()


def test_empty_files_and_files_with_nothing_to_probe_are_refused(tmp_path, tiny):
    for fmt in ("tokens", "conllu", "wic"):
        empty = tmp_path / f"empty.{fmt}"
        empty.write_text("# only a comment\n\n", encoding="utf-8")
        _refused(tmp_path, tiny, _exp(empty, fmt), rf"empty\.{fmt}: no sentences \(the file is empty")
    one = tmp_path / "one.tokens"
    one.write_text("the\tDET\ncat\tDET\n\na\tDET\ndog\t_\n", encoding="utf-8")
    _refused(tmp_path, tiny, _exp(one), r"one\.tokens: every labelled token has the label 'DET': nothing to probe")
    none = tmp_path / "none.tokens"
    none.write_text("the\t_\ncat\t_\n", encoding="utf-8")
    _refused(tmp_path, tiny, _exp(none), r"none\.tokens: no labelled token \(every label is '_'\)")
    singles = tmp_path / "single.wic"  # each group has one label: nothing to disambiguate
    singles.write_text("the bank closed\t1\tmoney\nthe bat flew\t1\tanimal\n" * 5, encoding="utf-8")
    _refused(tmp_path, tiny, _exp(singles, "wic"), r"single\.wic: every group has one label")
    few = tokens_file(tmp_path / "few.tokens", 2)  # 2 sentences cannot make train, dev and test
    _refused(
        tmp_path, tiny, _exp(few), r"few\.tokens: 2 sentence\(s\); splitting it into train/dev/test needs at least 3"
    )


def test_test_labels_unseen_in_training_are_counted_and_scored_as_wrong(tmp_path, tiny):
    train, dev = tokens_file(tmp_path / "train.tokens", 30), tokens_file(tmp_path / "dev.tokens", 5, seed=1)
    test = tokens_file(tmp_path / "test.tokens", 5, seed=2, extra_label="ADV")  # "quickly" is an ADV
    run = _run(_exp(train, dataset={"dev": str(dev), "test": str(test)}, layers=[0]), tiny, tmp_path)
    unseen = run.metrics["unseen_test_labels"]
    assert unseen == {"count": 1, "of": 17, "labels": {"ADV": 1}}
    assert "ADV" not in run.labels
    assert run.layers["0"].score <= 16 / 17  # the ADV token can never be right
    assert sum(map(sum, run.layers["0"].confusion)) == 16  # and has no row in the confusion matrix


def test_malformed_lines_name_the_file_the_line_and_what_was_expected(tmp_path):
    cases = {
        ("tokens", "the\tDET\ncat NOUN\n"): r"x\.tokens:2: expected token<TAB>label .*got 1 \(spaces where the tab",
        ("tokens", "the\tDET\ncat\t NOUN\n"): r"x\.tokens:2: expected a label without spaces, got ' NOUN' \(tabs and",
        ("tokens", "the\tDET\tX\n"): r"x\.tokens:1: expected token<TAB>label \(2 tab-separated columns\), got 3",
        ("wic", "the bank closed 1\tmoney\n"): r"x\.wic:1: expected sentence<TAB>index<TAB>label.*got 2",
        ("wic", "the bank closed\t3\tmoney\n"): r"x\.wic:1: target index 3 is outside the sentence's 3 tokens \(0\.\.2",
        ("wic", "the bank closed\tone\tmoney\n"): r"x\.wic:1: expected the target's 0-based index .* got 'one'",
        ("conllu", "1 The the DET DT _ 0 root _ _\n"): r"x\.conllu:1: expected 10 tab-separated .*got 1 \(spaces where",
        ("conllu", "1\tA\ta\tDET\tDT\tDefinite\t0\troot\t_\t_\n"): r"x\.conllu:1: expected NAME=VALUE items",
    }
    for (fmt, text), match in cases.items():
        path = tmp_path / f"x.{fmt}"
        path.write_text(text, encoding="utf-8")
        label = "feats:Definite" if fmt == "conllu" else None
        with pytest.raises(DatasetFormatError, match=match):
            read_labelled_file(path, fmt, label)
    path = tmp_path / "latin1.tokens"
    path.write_bytes("the\tDET\ncaf\u00e9\tNOUN\n".encode("latin-1"))
    with pytest.raises(DatasetFormatError, match=r"latin1\.tokens:2: not UTF-8"):
        read_labelled_file(path, "tokens")


def test_a_sentence_of_5000_tokens_is_refused_with_its_line_unless_max_tokens_allows_it(tmp_path):
    path = tokens_file(tmp_path / "long.tokens", 3)
    with open(path, "a", encoding="utf-8") as f:  # a file whose blank lines went missing
        f.write("\n" + "".join(f"w{i}\tNOUN\n" for i in range(5000)))
    with pytest.raises(DatasetFormatError, match=r"long\.tokens:17: the sentence that starts here has more than 1000"):
        read_labelled_file(path, "tokens")
    sentences, _ = read_labelled_file(path, "tokens", max_tokens=5000)
    assert len(sentences[-1].tokens) == 5000
    wic = tmp_path / "long.wic"
    wic.write_text("# long\n" + " ".join(["bank"] * 5000) + "\t0\tmoney\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match=r"long\.wic:2: the sentence .* more than 1000 tokens"):
        read_labelled_file(wic, "wic")


def test_structural_probes_refuse_a_conllu_with_a_cycle_in_head_naming_the_sentence(tmp_path, tiny):
    assert tree_problem([2, 3, 0]) is None
    assert tree_problem([2, 1, 0]) == "HEAD forms a cycle (1 -> 2 -> 1)"
    assert tree_problem([0, 0]).startswith("2 roots")
    path = conllu_file(tmp_path / "cyclic.conllu", 12, heads="2 3 0 6 4 5 3")  # 4 -> 6 -> 5 -> 4
    dataset = {"format": "conllu", "train": str(path)}
    match = r"cyclic\.conllu:\d+: sentence s11: HEAD forms a cycle \(4 -> 6 -> 5 -> 4\); the structural probes need"
    for task in ("structural_distance", "structural_depth"):
        _refused(tmp_path, tiny, {"name": "t", "task": task, "dataset": dataset, **FAST}, match)
    assert _run({"name": "t", "dataset": dataset, "layers": [0], **FAST}, tiny, tmp_path).task == "token_label"
    from probing_lab.datasets.records import Sentence, Token
    from probing_lab.probing.structural import _targets

    loop = Sentence([Token("a", head=2), Token("b", head=1), Token("c", head=0)], "s7", "some/treebank")
    with pytest.raises(ValueError, match="some/treebank sentence s7: heads .* do not form one tree"):
        _targets("distance", loop)  # a registry dataset's cyclic sentence is named too


def test_dep_arc_refuses_a_conllu_without_heads(tmp_path, tiny):
    path = tmp_path / "noheads.conllu"  # every HEAD "_"
    lines = conllu_file(tmp_path / "x.conllu", 10).read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text(
        "".join(re.sub(r"^((?:[^\t]*\t){6})[^\t]*", r"\1_", line) if line[:1].isdigit() else line for line in lines),
        encoding="utf-8",
    )
    exp = {"name": "arcs", "task": "dep_arc", "dataset": {"format": "conllu", "train": str(path)}, **FAST}
    _refused(tmp_path, tiny, exp, r"noheads\.conllu: no token with a HEAD .* dep_arc has nothing to probe")


def test_dataset_table_errors_name_the_key(tmp_path):
    path = str(tokens_file(tmp_path / "a.tokens", 5))
    cases = [
        ({"format": "csv", "train": path}, None, "format must be one of"),
        ({"format": "spans", "train": path}, "token_label", "task 'token_label' does not run on a spans file"),
        ({"format": "tokens"}, None, "train must be a file path"),
        ({"format": "tokens", "train": path, "label": "upos"}, None, "label is for conllu files only"),
        ({"format": "conllu", "train": path, "label": "feats"}, None, "expected upos, xpos, deprel, feats:NAME"),
        ({"format": "tokens", "train": path, "colour": 1}, None, r"unknown key\(s\) \['colour'\]"),
        ({"format": "tokens", "train": path}, "wsd_centroid", "task 'wsd_centroid' does not run on a tokens file"),
        ({"format": "wic", "train": path}, "structural_depth", "does not run on a wic file"),
        ({"format": "tokens", "train": path, "max_tokens": 0}, None, "max_tokens must be an integer >= 1"),
    ]
    for table, task, match in cases:
        data = {"dataset": table, **({"task": task} if task else {})}
        with pytest.raises(ExperimentError, match=match):
            Experiment.from_dict(data)
    with pytest.raises(ExperimentError, match=r"\['test'\] belong inside the \[dataset\] table"):
        Experiment.from_dict({"dataset": {"format": "tokens", "train": path}, "test": "test"})


def test_the_quick_form_reports_bad_input_without_a_traceback(tmp_path, tiny, capsys):
    bad = tmp_path / "bad.tokens"
    bad.write_text("the\tDET\ncat NOUN\n", encoding="utf-8")
    out = tmp_path / "run"
    assert main(["probe", "--data", str(bad), "--format", "tokens", "--model", tiny, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "bad.tokens:2: expected token<TAB>label" in err and "Traceback" not in err and not out.exists()
    assert main(["probe", "--data", str(bad)]) == 2
    assert "--data needs --format" in capsys.readouterr().err
    assert main(["probe", "probes/pos_ewt.toml", "--format", "tokens"]) == 2
    assert "--format go with --data FILE" in capsys.readouterr().err
    assert main(["probe", "--data", str(tmp_path / "missing.wic"), "--format", "wic"]) == 2
    assert "missing.wic: no such wic file" in capsys.readouterr().err


# --- the sentences and spans readers ----------------------------------------------------------------


def test_sentences_reader_and_its_errors(tmp_path):
    path = tmp_path / "s.sentences"
    path.write_text("# sentence\tlabel\nthe cats sleep\tplural\n\nthe cat sleeps\tsingular\n", encoding="utf-8")
    got = list(iter_sentence_file(path))
    assert [(line, s.words, label) for line, s, label in got] == [
        (2, ["the", "cats", "sleep"], "plural"),
        (4, ["the", "cat", "sleeps"], "singular"),
    ]
    for text, match in [
        ("the cats sleep plural\n", r"s\.sentences:1: expected sentence<TAB>label .*got 1 \(spaces where tabs"),
        ("the cats\tsleep\tplural\n", r"s\.sentences:1: expected sentence<TAB>label .*got 3"),
        ("\tplural\n", r"s\.sentences:1: expected a sentence in the first column"),
        ("the cats sleep\tvery plural\n", r"s\.sentences:1: expected a label without spaces"),
    ]:
        path.write_text(text, encoding="utf-8")
        with pytest.raises(DatasetFormatError, match=match):
            list(iter_sentence_file(path))


def test_spans_reader_embeds_each_sentence_once_and_refuses_spans_outside_it(tmp_path):
    path = tmp_path / "e.jsonl"
    rows = [
        {"tokens": ["John", "met", "Mary", "in", "Paris"], "span1": [0, 1], "label": "PER"},
        {"tokens": ["John", "met", "Mary", "in", "Paris"], "span1": [4, 5], "label": "LOC", "info": {"x": 1}},
        {"tokens": ["She", "left"], "span1": [0, 1], "span2": [1, 2], "label": "nsubj"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    sentences, examples = read_span_file(path)
    assert [s.words for s in sentences] == [rows[0]["tokens"], rows[2]["tokens"]]  # the shared sentence once
    assert [(e.span1, e.span2, e.label, e.line) for e in examples] == [
        ((0, 1), None, "PER", 1),
        ((4, 5), None, "LOC", 2),
        ((0, 1), (1, 2), "nsubj", 3),
    ]
    assert [[e.label for e in s.spans] for s in sentences] == [["PER", "LOC"], ["nsubj"]]
    for row, match in [
        ({"tokens": ["a", "b"], "span1": [1, 3], "label": "X"}, r"span1 \[1, 3\] is outside its sentence of 2 tokens"),
        ({"tokens": ["a", "b"], "span1": [1, 1], "label": "X"}, r"span1 \[1, 1\] is outside"),
        ({"tokens": ["a", "b"], "span1": [0, 1], "span2": [-1, 1], "label": "X"}, r"span2 \[-1, 1\] is outside"),
        ({"tokens": ["a", "b"], "span1": "0-1", "label": "X"}, r"expected span1 as \[start, end\]"),
        ({"tokens": ["a", "b"], "span1": [0, 1]}, r"expected an object with tokens, span1 and label"),
        ({"tokens": [], "span1": [0, 1], "label": "X"}, r"expected tokens as a non-empty list"),
    ]:
        path.write_text(json.dumps(row) + "\n", encoding="utf-8")
        with pytest.raises(DatasetFormatError, match=r"e\.jsonl:1: .*" + match):
            read_span_file(path)
    path.write_text('{"tokens": ["a"], "span1": [0, 1], "label": "X"}\n{"tokens": [\n', encoding="utf-8")
    with pytest.raises(DatasetFormatError, match=r"e\.jsonl:2: expected one JSON object per line"):
        read_span_file(path)
    path.write_text("# nothing\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match=r"e\.jsonl: no examples"):
        read_span_file(path)


def test_runs_of_one_file_on_different_labels_are_named_apart(tmp_path):
    from probing_lab.probing.config import Experiment
    from probing_lab.probing.own_data import quick_experiment

    path = tmp_path / "mine.conllu"
    path.write_text("1\tcats\tcat\tNOUN\t_\tNumber=Plur\t0\troot\t_\t_\n\n", encoding="utf-8")
    a = Experiment.from_dict(quick_experiment(str(path), "conllu", label="upos"))
    b = Experiment.from_dict(quick_experiment(str(path), "conllu", label="feats:Number"))
    c = Experiment.from_dict(quick_experiment(str(path), "conllu"))
    assert (a.name, b.name, c.name) == ("mine-upos", "mine-feats_Number", "mine-upos")  # the default label, named
