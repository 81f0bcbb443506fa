"""Issue 28: the commands as a hostile user drives them. Nothing is overwritten without --force,
nothing is written outside its folder, no input is destroyed, and no wrong result comes with exit 0.
One test per case of the issue (the prose detector behind case 8 has its own tests in test_prose.py);
each checks the clear error or the correct behaviour and that the input file or device is untouched."""

from __future__ import annotations

import json
import logging
import os
import stat
import threading
from pathlib import Path

import h5py
import pytest
import torch
from conftest import TINY_MODEL

from probing_lab.cli import main
from probing_lab.corpus.build import build_corpus
from probing_lab.elmo import ElmoBiLM, ElmoOptions, save_checkpoint, save_hdf5_weights
from probing_lab.fileio import RUN_MARKER, OutputError, atomic_path, check_output
from probing_lab.lm.language_model import save_softmax
from probing_lab.training.config import TrainConfig
from probing_lab.training.trainer import train
from probing_lab.training.vocab import Vocabulary

TEXT = "the cat sat .\nthe dog ran .\n"
EMBED = ["embed", "--model", "random:cpu-tiny", "--quiet"]


def tiny_model() -> ElmoBiLM:
    model = ElmoBiLM(ElmoOptions.from_dict(TINY_MODEL))
    model.reset_parameters(torch.Generator().manual_seed(0))
    return model


def lm_dir(path: Path, n_words: int = 7) -> Path:
    """A tiny model with a softmax over ``n_words`` words (the `lm` commands' input)."""
    model = tiny_model()
    words = ["<S>", "</S>", "<UNK>", "the", "cat", "sat", "dogs"] + [f"w{i}" for i in range(n_words - 7)]
    g = torch.Generator().manual_seed(1)
    save_checkpoint(model, path)
    save_softmax(path, torch.randn(len(words), 8, generator=g), torch.zeros(len(words)), Vocabulary(words))
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A corpus and a training run of one step: (corpus folder, run folder)."""
    root = tmp_path_factory.mktemp("hostile")
    (root / "src.txt").write_text("".join(f"the cat sat on the mat number {i} .\n" for i in range(400)))
    build_corpus(root / "corpus", [root / "src.txt"], heldout_fraction=0.05, n_shards=2, progress=None)
    config = TrainConfig(model=TINY_MODEL, batch_size=4, unroll_steps=5, n_negative_samples=0, lr=0.2, max_steps=1,
                         checkpoint_every_steps=1, snapshot_fractions=(), threads=1)  # fmt: skip
    train(config, root / "corpus", root / "run", progress=False)
    return root / "corpus", root / "run"


# --- case 1: an output that is the input ---------------------------------------------------------


@pytest.mark.parametrize("how", ["same path", "symlink", "hard link"])
def test_1_embed_refuses_an_output_that_is_its_input(tmp_path, capsys, how):
    src = tmp_path / "in.txt"
    src.write_text(TEXT)
    out = {"same path": src, "symlink": tmp_path / "link.txt", "hard link": tmp_path / "hard.txt"}[how]
    if how == "symlink":
        out.symlink_to(src)
    elif how == "hard link":
        os.link(src, out)
    assert main([*EMBED, "--input", str(src), "--output", str(out), "--force"]) == 2  # not even with --force
    err = capsys.readouterr().err
    assert f"--output {out} is the input {src}" in err and "would destroy the input" in err
    assert src.read_text() == TEXT and out.read_text() == TEXT
    assert out.is_symlink() == (how == "symlink")


# --- case 2: devices, FIFOs and links are never renamed over ----------------------------------------


def test_2_a_device_fifo_or_link_is_written_in_place_never_replaced(tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text(TEXT)
    null = tmp_path / "null"  # a link to a character device
    null.symlink_to("/dev/null")
    assert main([*EMBED, "--input", str(src), "--output", str(null)]) == 0
    assert os.readlink(null) == "/dev/null" and stat.S_ISCHR(os.stat("/dev/null").st_mode)

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    assert main([*EMBED, "--input", str(src), "--output", str(fifo)]) == 0
    reader.join(30)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still a FIFO; the reader got the whole HDF5 file
    (tmp_path / "got.hdf5").write_bytes(received[0])
    with h5py.File(tmp_path / "got.hdf5") as f:
        assert f["1"].shape == (3, 4, 128)

    if os.path.exists("/dev/full"):  # a device that refuses the bytes: a clear error, the device stays
        assert main([*EMBED, "--input", str(src), "--output", "/dev/full"]) == 2
        assert "/dev/full: cannot be written (No space left on device)" in capsys.readouterr().err
        assert stat.S_ISCHR(os.stat("/dev/full").st_mode)

    target = tmp_path / "target.txt"  # a link to a regular file: the file is replaced, the link stays
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    with atomic_path(link) as tmp:
        tmp.write_text("new")
    assert link.is_symlink() and target.read_text() == "new"
    assert src.read_text() == TEXT


# --- case 3: an existing output needs --force, in every command ---------------------------------


def test_3_every_command_refuses_an_existing_output_without_force(tmp_path, capsys, run):
    corpus, run_dir = run
    src = tmp_path / "in.txt"
    src.write_text(TEXT)
    model = lm_dir(tmp_path / "lm")
    old = tmp_path / "old.txt"
    (tmp_path / "cmp").mkdir()
    (tmp_path / "cmp" / "cka.png").write_text("keep")
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / "mine.txt").write_text("keep")
    commands = {
        "embed": [*EMBED, "--input", str(src), "--output", str(old)],
        "lm score": ["lm", "score", "--input", str(src), "--output", str(old), "--model", str(model)],
        "lm agreement --json": ["lm", "agreement", "--json", str(old), "--model", str(model)],
        "lm agreement --write-pairs": ["lm", "agreement", "--write-pairs", str(old)],
        "compare": ["compare", "--model", "random:cpu-tiny", "--input", str(src), "--out", str(tmp_path / "cmp")],
        "curves --png": ["curves", str(run_dir), "--png", str(old)],
        "export": ["export", str(run_dir), "--out", str(tmp_path / "exp")],
        "export --warm-start": ["export", str(run_dir), "--warm-start", "--out", str(tmp_path / "exp")],
        "corpus build": ["corpus", "build", str(src), "--out", str(tmp_path / "exp"), "--no-default-exclusions"],
    }
    for name, argv in commands.items():
        old.write_text("keep")
        assert main(argv) == 2, name
        err = capsys.readouterr().err
        refused = ("already exists", "is not empty", "holds an earlier run")
        assert "pass --force to" in err and any(r in err for r in refused), (name, err)
        assert old.read_text() == "keep", name
    assert (tmp_path / "cmp" / "cka.png").read_text() == "keep" and (
        tmp_path / "exp" / "mine.txt"
    ).read_text() == "keep"
    # with --force the output is replaced
    assert main([*EMBED, "--input", str(src), "--output", str(old), "--force"]) == 0
    assert h5py.is_hdf5(old) and src.read_text() == TEXT
    with pytest.raises(OutputError, match="already exists; pass --force"):
        check_output(src)


# --- case 4: names that lead outside runs/probes/ ---------------------------------------------------


@pytest.mark.parametrize("name", ["../../evil", "a/b", "..", ".", "a\\b", "/abs"])
def test_4_experiment_names_cannot_lead_outside_the_runs_folder(tmp_path, monkeypatch, capsys, name):
    import dataclasses

    from probing_lab.probing.experiment import Experiment, ExperimentError, run_experiment

    with pytest.raises(ExperimentError, match="is not a valid name: use letters, digits"):
        Experiment.from_dict({"name": name, "task": "upos", "dataset": "ewt"})
    toml = tmp_path / "evil.toml"
    toml.write_text(f'name = {json.dumps(name)}\ntask = "upos"\ndataset = "ewt"\n')
    monkeypatch.chdir(tmp_path)
    assert main(["probe", str(toml), "--model", "random:cpu-tiny", "--quiet"]) == 2
    assert "is not a valid name" in capsys.readouterr().err
    # an Experiment made in code skips from_dict: the run directory is checked again before writing
    exp = dataclasses.replace(Experiment.from_dict({"name": "ok", "task": "upos", "dataset": "ewt"}), name=name)
    with pytest.raises(ExperimentError, match="is not a valid name"):  # before the model is even loaded
        run_experiment(exp, model="random:nope", log=lambda m: None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evil.toml"]  # nothing written anywhere
    assert Experiment.from_dict({"name": "pos_ewt-2.1", "task": "upos", "dataset": "ewt"}).name == "pos_ewt-2.1"


def test_4_several_experiments_get_folders_inside_out(tmp_path, capsys):
    (tmp_path / "...toml").write_text('name = "a"\ntask = "upos"\ndataset = "ewt"\n')  # its stem is ".."
    (tmp_path / "b.toml").write_text('name = "b"\ntask = "upos"\ndataset = "ewt"\n')
    out = tmp_path / "out"
    assert main(["probe", str(tmp_path / "...toml"), str(tmp_path / "b.toml"), "--out", str(out)]) == 2
    assert "experiment file name '..' is not a valid name" in capsys.readouterr().err
    assert not out.exists()


# --- case 5 and 11: count options ---------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, message",
    [
        (["compare", "--limit", "-1"], "argument --limit: must be a whole number >= 1, got -1"),
        (["compare", "--limit", "0"], "argument --limit: must be a whole number >= 1, got 0"),
        (["eval-lm", "RUN", "--corpus", "C", "--max-tokens", "0"], "argument --max-tokens: must be a whole number"),
        (["eval-lm", "RUN", "--corpus", "C", "--max-tokens", "-1"], "argument --max-tokens: must be a whole number"),
        (["lm", "agreement", "--per-construction", "-2"], "argument --per-construction: must be a whole number"),
        (["lm", "predict", "--text", "a", "-k", "0"], "argument -k: must be a whole number >= 1, got 0"),
        (["lm", "predict", "--text", "a", "-k", "x"], "argument -k: 'x' is not a whole number"),
        (["embed", "--input", "i", "--output", "o", "--batch-size", "0"], "argument --batch-size: must be"),
        (["corpus", "build", "s", "--out", "o", "--shards", "0"], "argument --shards: must be a whole number"),
        (["corpus", "build", "s", "--out", "o", "--gcide-definition-tokens", "-5"], ">= 0, got -5"),
    ],
)
def test_5_count_options_are_validated(capsys, argv, message):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_8_corpus_build_refuses_binary_input_and_skips_code_members(tmp_path, capsys):
    import random
    import zipfile

    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(random.Random(0).randbytes(3000))
    assert main(["corpus", "build", str(garbage), "--out", str(tmp_path / "out")]) != 0
    assert "garbage.bin: binary data, not text" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() and len(garbage.read_bytes()) == 3000
    package = tmp_path / "pkg.zip"  # prose, C code and a pickle in one archive: only the prose is read
    with zipfile.ZipFile(package, "w") as z:
        z.writestr("pkg/story.txt", "The ferryman waited by the river until the water fell again. " * 10)
        z.writestr("pkg/_inner.c", "static PyObject *__pyx_f(PyObject *self) { return NULL; }\n" * 20)
        z.writestr("pkg/model", b"\x80\x04\x95" + random.Random(1).randbytes(500))
    assert main(["corpus", "build", str(package), "--out", str(tmp_path / "out"), "--min-count", "1"]) == 0
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert {k: v["documents"] for k, v in stats["sources"]["pkg"]["dropped"].items()} == {"code-name": 1, "binary": 1}
    assert stats["train"]["tokens"] + stats["heldout"]["tokens"] == 12  # one distinct sentence of 12 tokens


@pytest.mark.parametrize("value", ["-3", "0", "two"])
def test_11_global_threads_is_validated(capsys, value):
    with pytest.raises(SystemExit) as e:
        main(["--threads", value, "info", "--model", "random:cpu-tiny"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "argument --threads:" in err and "Traceback" not in err


def test_5_compare_limit_keeps_the_first_n_sentences(tmp_path, capsys):
    src = tmp_path / "four.txt"
    src.write_text("a b c\nd e f\ng h i\nj k l\n")
    assert main(["compare", "--model", "random:cpu-tiny", "--input", str(src), "--limit", "2",
                 "--out", str(tmp_path / "o")]) == 0  # fmt: skip
    assert "on 6 tokens of 2 sentences" in capsys.readouterr().out
    assert src.read_text() == "a b c\nd e f\ng h i\nj k l\n"


# --- case 6: eval-lm --max-tokens --------------------------------------------------------------------


def test_6_eval_lm_max_tokens_evaluates_the_first_n_heldout_tokens(tmp_path, capsys, caplog, run):
    caplog.set_level(logging.INFO, logger="probing_lab")
    corpus, run_dir = run
    heldout = (corpus / "heldout.txt").read_text()
    words = heldout.split()
    assert len(words) > 50

    def evaluate(*extra):
        assert main(["eval-lm", str(run_dir), "--corpus", str(corpus), "--quiet", *extra]) == 0
        return json.loads(capsys.readouterr().out), caplog.text

    full, _ = evaluate()
    first, err = evaluate("--max-tokens", "50")
    assert first["heldout_tokens"] == 50 and first["heldout_tokens_total"] == len(words) and first["max_tokens"] == 50
    assert f"evaluated the first 50 of the {len(words)} tokens" in err
    assert first["tokens"] < full["tokens"] and first["perplexity"] != full["perplexity"]
    # the same as evaluating a file that holds exactly those 50 tokens
    lines, left = [], 50
    for line in heldout.splitlines():
        if left > 0:
            lines.append(" ".join(line.split()[:left]))
            left -= len(line.split()[:left])
    (tmp_path / "first50.txt").write_text("\n".join(lines) + "\n")
    cut, _ = evaluate("--file", str(tmp_path / "first50.txt"), "--max-tokens", "1000")
    assert cut["heldout_tokens"] == 50 and cut["perplexity"] == pytest.approx(first["perplexity"], rel=1e-9)
    more, _ = evaluate("--max-tokens", "100000")  # more than there is: all of it, and said so
    assert more["heldout_tokens"] == len(words) and more["perplexity"] == pytest.approx(full["perplexity"])
    assert (corpus / "heldout.txt").read_text() == heldout


# --- case 7: download checks the preset ------------------------------------------------------------


def _mirror(tmp_path: Path, model: ElmoBiLM) -> str:
    from probing_lab.download import model_urls

    base = (tmp_path / "mirror").as_uri() + "/"
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    model.options.save(src / "options.json")
    save_hdf5_weights(model, src / "weights.hdf5")
    for local, url in model_urls("small", base).items():
        path = Path(url.removeprefix("file://"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes((src / local).read_bytes())
    return base


def test_7_download_refuses_and_removes_a_model_that_is_not_the_preset(tmp_path, capsys, monkeypatch):
    import probing_lab.download as download

    base = _mirror(tmp_path, tiny_model())  # a 105k-parameter model where "small" (13.6M) is asked for
    target = tmp_path / "elmo"
    assert main(["download", "small", "--dir", str(target), "--base-url", base, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "is not the published ELMo 'small': lstm_dim 16 (expected 1024)" in err
    assert "Refused: removed" in err and "no manifest was written" in err
    assert not any(target.iterdir())
    # the published SHA-256, where known, is checked too
    monkeypatch.setattr(download, "expected_options", lambda name: ElmoOptions.from_dict(TINY_MODEL))
    monkeypatch.setitem(download.PUBLISHED_SHA256, "small", {"weights.hdf5": "0" * 64})
    assert main(["download", "small", "--dir", str(target), "--base-url", base, "--quiet"]) == 2
    assert "SHA-256 differs from the published weights.hdf5" in capsys.readouterr().err
    assert not any(target.iterdir())
    monkeypatch.setitem(download.PUBLISHED_SHA256, "small", {})
    assert main(["download", "small", "--dir", str(target), "--base-url", base, "--quiet"]) == 0
    assert (target / "manifest.json").is_file()


def test_7_download_keeps_a_file_it_did_not_fetch(tmp_path, capsys):
    base = _mirror(tmp_path, tiny_model())
    target = tmp_path / "mine"
    target.mkdir()
    (target / "options.json").write_text(json.dumps(TINY_MODEL))  # the user's own file, already there
    assert main(["download", "small", "--dir", str(target), "--base-url", base, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "kept" in err and "which was there before" in err
    assert json.loads((target / "options.json").read_text()) == TINY_MODEL
    assert not (target / "weights.hdf5").exists()


# --- case 9: agreement pairs that cannot be scored ---------------------------------------------------


@pytest.mark.parametrize(
    "change, message",
    [
        ({"verb_index": 99}, "verb_index 99 is outside the sentences (4 and 4 tokens"),
        ({"verb_index": -1}, "verb_index -1 is outside the sentences"),
        ({"grammatical": ""}, "the grammatical sentence is empty"),
        ({"ungrammatical": "  "}, "the ungrammatical sentence is empty"),
        ({"ungrammatical": "The author laughs ."}, "the grammatical and the ungrammatical sentence are the same"),
        ({"verb_index": 0}, "verb_index 0 points at 'The' in both sentences"),
    ],
)
def test_9_agreement_pairs_that_cannot_be_scored_are_refused_with_their_line(tmp_path, capsys, change, message):
    good = {"construction": "simple", "subject_number": "singular", "verb_index": 2,
            "grammatical": "The author laughs .", "ungrammatical": "The author laugh ."}  # fmt: skip
    path = tmp_path / "pairs.jsonl"
    text = json.dumps(good) + "\n\n" + json.dumps({**good, **change}) + "\n"
    path.write_text(text)
    model = lm_dir(tmp_path / "lm")
    assert main(["lm", "agreement", "--pairs", str(path), "--model", str(model)]) == 2
    err = capsys.readouterr().err
    assert f"{path}, line 3: not a minimal pair: {message}" in err
    assert path.read_text() == text


# --- case 10: export replaces the whole folder ------------------------------------------------------


def test_10_export_replaces_the_whole_folder_never_mixing_two_exports(tmp_path, capsys, run):
    corpus, run_dir = run
    out = tmp_path / "model"
    assert main(["export", str(run_dir), "--out", str(out), "--with-softmax", "--corpus", str(corpus)]) == 0
    assert (out / "softmax.safetensors").is_file() and (out / "vocab.txt").is_file()
    before = sorted(p.name for p in out.iterdir())
    assert main(["export", str(run_dir), "--out", str(out)]) == 2  # not empty: refused, untouched
    assert "holds an earlier run of `probing-lab export`; pass --force to replace it" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == before
    assert main(["export", str(run_dir), "--out", str(out), "--force"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [RUN_MARKER, "model.safetensors", "model_card.json", "options.json"]
    assert not list(tmp_path.glob(".model.*"))  # no temporary or old folder left
    # a folder that holds an input is refused even with --force
    assert main(["export", str(run_dir), "--out", str(run_dir.parent), "--force"]) == 2
    assert "holds the input" in capsys.readouterr().err
    assert (run_dir / "checkpoints").is_dir()


# --- the smaller cases --------------------------------------------------------------------------------


def test_outputs_are_checked_before_the_work(tmp_path, capsys, monkeypatch):
    import probing_lab.lm.language_model

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded before the output was checked")

    monkeypatch.setattr(probing_lab.lm.language_model, "load_language_model", no_model)
    assert main(["lm", "agreement", "--json", str(tmp_path), "--model", "x"]) == 2
    assert f"--json {tmp_path} is a folder; give a file name" in capsys.readouterr().err


def test_report_lists_a_run_given_twice_once(tmp_path, capsys, caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger="probing_lab")
    run_dir = tmp_path / "A"
    run_dir.mkdir()
    metrics = {"experiment": "x", "task": "upos", "dataset": "ewt", "model": "m", "layers": {"0": {"score": 0.5}}}
    (run_dir / "metrics.json").write_text(json.dumps(metrics))
    monkeypatch.chdir(tmp_path)
    assert main(["report", "A", "A", "./A/", str(run_dir)]) == 0
    assert capsys.readouterr().out.count("| x (upos) | m |") == 1 and "3 repeated run directories" in caplog.text


def test_lm_predict_k_is_capped_and_says_so(tmp_path, capsys, caplog):
    model = lm_dir(tmp_path / "lm", n_words=150)
    assert main(["lm", "predict", "--model", str(model), "--text", "the cat", "-k", "100000", "--position", "0"]) == 0
    forward = next(line for line in capsys.readouterr().out.splitlines() if "forward  (from the left)" in line)
    assert forward.count(",") == 99 and "-k 100000 capped at 100" in caplog.text


@pytest.mark.parametrize(
    "card, message",
    [
        ("this is not JSON", "model_card.json: the model card is not readable JSON"),
        ("[1, 2]", "model_card.json: the model card is not a JSON object"),
        ('{"weights_sha256": 7}', "model_card.json: weights_sha256 is 7, not a SHA-256 (64 hex digits): the card"),
    ],
)
def test_a_broken_model_card_is_refused_not_ignored(tmp_path, capsys, card, message):
    model = save_checkpoint(tiny_model(), tmp_path / "model")
    (model / "model_card.json").write_text(card)
    weights = (model / "model.safetensors").read_bytes()
    assert main(["info", "--model", str(model)]) == 2
    err = capsys.readouterr().err
    assert message in err and "SHA-256 differs" not in err
    assert (model / "model.safetensors").read_bytes() == weights


def test_files_that_are_not_utf8_are_named(tmp_path, capsys, run):
    corpus, run_dir = run
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b'name = "x"\n\xff\xfe\n')
    cases = {
        "probe": ["probe", str(bad), "--model", "random:cpu-tiny"],
        "train --config": ["train", "--config", str(bad), "--corpus", str(corpus), "--out", str(tmp_path / "r")],
        "export --card": ["export", str(run_dir), "--out", str(tmp_path / "e"), "--card", str(bad)],
        "curves": ["curves", str(bad)],
    }
    for name, argv in cases.items():
        assert main(argv) == 2, name
        err = capsys.readouterr().err
        assert f"{bad}, line 2: not UTF-8" in err, (name, err)
    assert bad.read_bytes() == b'name = "x"\n\xff\xfe\n'
    assert not (tmp_path / "r").exists() and not (tmp_path / "e").exists()
