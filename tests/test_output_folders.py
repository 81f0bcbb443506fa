"""Nothing lost in a folder the user owns, and messages that point the right way (issue 34).

Every command that writes a folder follows one rule (``probing_lab.fileio.check_output_dir``): a new
or empty folder is written; an earlier run of the same command is refused unless ``--force``, which
replaces it; a folder holding anything else is refused before any work unless ``--force``, which
puts the run in a new subfolder and leaves the user's files alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import ROOT, TINY_MODEL
from test_own_data import conllu_file, tokens_file

from probing_lab.cli import main
from probing_lab.datasets.files import FORMATS
from probing_lab.elmo import ElmoBiLM, ElmoOptions, save_checkpoint, save_hdf5_weights
from probing_lab.fileio import RUN_MARKER, OutputError, atomic_directory, check_output_dir
from probing_lab.probing.runs import ProbeRun

FAST = ["--layers", "0,1", "--quiet"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    model = ElmoBiLM(ElmoOptions.from_dict(TINY_MODEL))
    model.reset_parameters(torch.Generator().manual_seed(0))
    return str(save_checkpoint(model, tmp_path_factory.mktemp("model") / "tiny"))


def user_folder(path: Path) -> dict:
    """A folder of the user's own files (no run of any command), and what it holds."""
    path.mkdir(parents=True)
    (path / "table.md").write_text("| my | own | table |\n", encoding="utf-8")
    (path / "notes.txt").write_text("notes I keep\n", encoding="utf-8")
    return snapshot(path)


def snapshot(path: Path) -> dict:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


# --- the rule, in fileio -----------------------------------------------------------------------


def test_the_rule_new_empty_earlier_run_and_user_folder(tmp_path):
    assert check_output_dir(tmp_path / "new", command="x") == tmp_path / "new"
    (tmp_path / "empty").mkdir()
    assert check_output_dir(tmp_path / "empty", command="x") == tmp_path / "empty"
    with atomic_directory(tmp_path / "run", command="x") as tmp:
        (tmp / "a.txt").write_text("1")
    assert json.loads((tmp_path / "run" / RUN_MARKER).read_text()) == {"command": "x", "files": ["a.txt"]}
    with pytest.raises(OutputError, match="holds an earlier run of `probing-lab x`; pass --force to replace it"):
        check_output_dir(tmp_path / "run", command="x")
    assert check_output_dir(tmp_path / "run", command="x", force=True) == tmp_path / "run"
    # a run of another command, or a run the user added a file to, is the user's folder
    with pytest.raises(OutputError, match="is not a run of `probing-lab y`"):
        check_output_dir(tmp_path / "run", command="y")
    (tmp_path / "run" / "mine.txt").write_text("mine")
    with pytest.raises(OutputError, match=r"not a run of `probing-lab x` \(it holds \.probing-lab-run\.json, a\.txt"):
        check_output_dir(tmp_path / "run", command="x")
    sub = check_output_dir(tmp_path / "run", command="x", force=True, fresh="exp")
    assert sub.parent == tmp_path / "run" and sub.name.startswith("exp-") and not sub.exists()
    # a run written before the marker existed: recognised by its file names only when it holds nothing else
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "metrics.json").write_text("{}")
    assert check_output_dir(tmp_path / "old", command="x", force=True, names=("metrics.json",)) == tmp_path / "old"
    assert check_output_dir(tmp_path / "old", command="x", names=("metrics.json",), resumable=True) == tmp_path / "old"
    (tmp_path / "old" / "notes.txt").write_text("mine")
    assert check_output_dir(tmp_path / "old", command="x", force=True, names=("metrics.json",)) != tmp_path / "old"


# --- probe --data: the data loss of issue 34 -------------------------------------------------------


def test_probe_refuses_a_folder_of_the_users_files_and_force_writes_beside_them(tmp_path, tiny, capsys):
    data = tokens_file(tmp_path / "mine.tokens", 30)
    out = tmp_path / "mine"
    before = user_folder(out)
    args = ["probe", "--data", str(data), "--format", "tokens", "--model", tiny, *FAST, "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "is not empty and is not a run of `probing-lab probe` (it holds notes.txt, table.md)" in err
    assert "pass --force to write the run into a new subfolder" in err
    assert snapshot(out) == before  # nothing written, nothing replaced
    assert main([*args, "--force"]) == 0
    written = Path(capsys.readouterr().out.strip())
    assert written.parent == out and written.name.startswith("mine-")
    assert ProbeRun.load(written).layer_keys == ["0", "1"]
    assert {k: v for k, v in snapshot(out).items() if "/" not in k} == before  # the user's files untouched
    # the run folder itself: a second run is refused, --force replaces it as a whole
    assert main([*args[:-1], str(written)]) == 2
    assert "holds an earlier run of `probing-lab probe`" in capsys.readouterr().err
    (written / "plot.png").unlink()
    assert main([*args[:-1], str(written), "--force"]) == 0
    assert (written / "plot.png").is_file() and (written / RUN_MARKER).is_file()


def test_probe_without_out_writes_under_probing_lab_runs_as_the_app_does(tmp_path, tiny, monkeypatch, capsys):
    from probing_lab.paths import app_runs_dir

    monkeypatch.setenv("PROBING_LAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.chdir(tmp_path)
    data = tokens_file(tmp_path / "mine.tokens", 30)
    assert main(["probe", "--data", str(data), "--format", "tokens", "--model", tiny, *FAST]) == 0
    written = Path(capsys.readouterr().out.strip())
    assert written.parent == tmp_path / "runs" == app_runs_dir() and written.name.startswith("mine-")


def _released_elmo(folder: Path) -> Path:
    """The folder `probing-lab download` writes: options.json + weights.hdf5 of a (tiny) ELMo."""
    folder.mkdir()
    model = ElmoBiLM(ElmoOptions.from_dict(TINY_MODEL))
    model.reset_parameters(torch.Generator().manual_seed(1))
    (folder / "options.json").write_text(json.dumps(model.options.to_dict()))
    save_hdf5_weights(model, folder / "weights.hdf5")
    return folder


def test_a_missing_model_says_what_probe_takes_and_a_released_elmo_folder_loads(tmp_path, capsys):
    data = tokens_file(tmp_path / "mine.tokens", 30)
    args = ["probe", "--data", str(data), "--format", "tokens", *FAST, "--out", str(tmp_path / "run")]
    assert main([*args, "--model", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert "nowhere: no such folder" in err and "probing-lab download small" in err and "--options" not in err
    released = _released_elmo(tmp_path / "elmo-small")
    assert main([*args, "--model", str(released)]) == 0
    assert ProbeRun.load(tmp_path / "run").model == f"hdf5:{released}"


# --- every other command that writes a folder ---------------------------------------------------


def _commands(tmp_path: Path, out: Path) -> dict[str, list[str]]:
    """Each command that takes an output folder, with inputs that get it as far as its folder check."""
    text = tmp_path / "text.txt"
    text.write_text("the cat sat .\n", encoding="utf-8")
    return {
        "causal amnesic": ["causal", "amnesic", "--model", "random:cpu-tiny"],
        "causal units": ["causal", "units", "--model", "random:cpu-tiny"],
        "causal patch": ["causal", "patch", "--model", "random:cpu-tiny"],
        "corpus build": ["corpus", "build", str(text), "--no-default-exclusions"],
        "export": ["export", str(tmp_path / "no-run")],
        "word2vec": ["word2vec", "--corpus", str(tmp_path / "corpus")],
        "compare": ["compare", "--input", str(text), "--model", "random:cpu-tiny"],
        "train": ["train", "--config", str(ROOT / "configs" / "train" / "elmo-lab.json"), "--corpus", str(tmp_path)],
        "transfer": ["transfer", str(ROOT / "transfer" / "chunking_conll2000.toml"), "--model", "random:cpu-tiny"],
        "probe": ["probe", str(ROOT / "probes" / "pos_ewt.toml"), "--model", "random:cpu-tiny"],
    }


@pytest.mark.parametrize(
    "command",
    [
        "causal amnesic",
        "causal units",
        "causal patch",
        "corpus build",
        "export",
        "word2vec",
        "compare",
        "train",
        "transfer",
        "probe",
    ],
)
def test_every_command_refuses_a_folder_of_the_users_files_before_any_work(tmp_path, command, capsys):
    if command == "word2vec":  # it reads the corpus's shards first: a corpus of one shard
        (tmp_path / "corpus" / "train").mkdir(parents=True)
        (tmp_path / "corpus" / "train" / "shard-000.txt").write_text("the cat sat .\n", encoding="utf-8")
    out = tmp_path / "mine"
    before = user_folder(out)
    assert main([*_commands(tmp_path, out)[command], "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"is not a run of `probing-lab {command}`" in err and "--force" in err, err
    assert snapshot(out) == before


def test_corpus_build_with_force_writes_beside_the_users_files_and_replaces_its_own_run(tmp_path, capsys):
    text = tmp_path / "text.txt"
    text.write_text("".join(f"the cat number {i} sat on the mat .\n" for i in range(40)), encoding="utf-8")
    out = tmp_path / "mine"
    before = user_folder(out)
    args = ["corpus", "build", str(text), "--no-default-exclusions", "--out", str(out), "--force"]
    assert main(args) == 0
    (built,) = [p for p in out.iterdir() if p.is_dir()]
    assert built.name.startswith("corpus-build-") and (built / "vocab.txt").is_file()
    assert {k: v for k, v in snapshot(out).items() if "/" not in k} == before
    assert main([*args[:-3], "--out", str(built)]) == 2  # its own run: refused without --force
    assert "earlier run of `probing-lab corpus build`" in capsys.readouterr().err
    assert main([*args[:-3], "--out", str(built), "--force"]) == 0  # ... and replaced with it
    assert sorted(p.name for p in built.iterdir()) == sorted(
        [RUN_MARKER, "heldout.txt", "stats.json", "train", "vocab.txt"]
    )


# --- messages that point the right way -------------------------------------------------------------


def test_a_label_not_in_the_file_lists_the_files_label_columns_and_the_close_match(tmp_path, tiny, capsys):
    data = conllu_file(tmp_path / "mine.conllu", 30)
    args = ["probe", "--data", str(data), "--format", "conllu", "--model", tiny, *FAST, "--out", str(tmp_path / "r")]
    assert main([*args, "--label", "feats:number"]) == 2
    err = capsys.readouterr().err
    assert "no token has the label 'feats:number'" in err and "did you mean 'feats:Number'?" in err
    # the columns the file has, with their token counts, as the app's form shows them
    assert "upos (210 tokens)" in err and "feats:Number (60 tokens)" in err and "feats:Tense (30 tokens)" in err
    assert main([*args, "--label", "feats:Nonexistent"]) == 2
    err = capsys.readouterr().err
    assert "no token has the label 'feats:Nonexistent'" in err and "feats:Definite (60 tokens)" in err
    assert not (tmp_path / "r").exists()


def test_a_folder_given_as_data_is_called_a_folder(tmp_path, capsys):
    (tmp_path / "data").mkdir()
    tokens_file(tmp_path / "data" / "train.tokens", 3)
    assert main(["probe", "--data", str(tmp_path / "data"), "--format", "tokens"]) == 2
    err = capsys.readouterr().err
    assert "data is a folder (it holds train.tokens), not a tokens file: give the file itself" in err


def test_data_without_format_lists_every_format_of_the_registry(tmp_path, capsys):
    assert main(["probe", "--data", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert f"--data needs --format ({', '.join(FORMATS)})" in err and "spans" in err


def test_single_spans_and_pairs_mixed_name_the_file_and_the_first_two_lines_that_disagree(tmp_path, tiny, capsys):
    single = {"tokens": "the cat sat on the mat".split(), "span1": [0, 2], "label": "NP"}
    pair = {"tokens": "the cat sat".split(), "span1": [0, 2], "span2": [2, 3], "label": "nsubj"}
    lines = [single] * 3 + [{**single, "tokens": ["a", "dog", "ran"]}, pair, single, pair]
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    args = ["probe", "--data", str(path), "--format", "spans", "--model", tiny, *FAST, "--out", str(tmp_path / "r")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{path}:1 has a single span (no span2), {path}:5 has a span pair (span2)" in err


def test_an_over_long_sentence_points_to_max_tokens_which_probe_data_takes(tmp_path, tiny, capsys):
    data = tokens_file(tmp_path / "mine.tokens", 30)
    args = ["probe", "--data", str(data), "--format", "tokens", "--model", tiny, *FAST, "--out", str(tmp_path / "r")]
    assert main([*args, "--max-tokens", "3"]) == 2
    err = capsys.readouterr().err
    assert "more than 3 tokens" in err and "--max-tokens with probe --data" in err
    assert main([*args, "--max-tokens", "4"]) == 0
    assert main(["probe", str(ROOT / "probes" / "pos_ewt.toml"), "--max-tokens", "4"]) == 2
    assert "--max-tokens go with --data FILE" in capsys.readouterr().err
