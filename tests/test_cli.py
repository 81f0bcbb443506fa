import json
import re

import h5py

from probing_lab.cli import main


def test_embed_random_model_layout(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("The bank closed .\n\nWe sat on the river bank .\n")
    out = tmp_path / "out.hdf5"
    assert main(["embed", "--model", "random:cpu-tiny", "--input", str(src), "--output", str(out), "--quiet"]) == 0
    with h5py.File(out) as f:
        assert f["0"].shape == (3, 4, 128) and f["1"].shape == (3, 0, 128) and f["2"].shape == (3, 7, 128)
        assert json.loads(f["sentence_to_index"][0])["We sat on the river bank ."] == "2"


def test_embed_errors_are_clear(tmp_path, capsys):
    out = tmp_path / "out.hdf5"
    assert (
        main(["embed", "--model", "random:cpu-tiny", "--input", str(tmp_path / "missing.txt"), "--output", str(out)])
        == 2
    )
    assert "input file not found" in capsys.readouterr().err
    src = tmp_path / "in.txt"
    src.write_text("a b\n")
    assert main(["embed", "--options", "o.json", "--input", str(src), "--output", str(out)]) == 2
    assert "give both --options and --weights" in capsys.readouterr().err
    assert main(["embed", "--model", "random:nope", "--input", str(src), "--output", str(out)]) == 2
    assert "unknown ELMo preset" in capsys.readouterr().err
    assert main(["embed", "--model", str(tmp_path), "--input", str(src), "--output", str(out)]) == 2
    assert "no options.json" in capsys.readouterr().err
    assert not out.exists()


def test_demo_runs(capsys):
    assert main(["demo", "--model", "random:cpu-tiny"]) == 0
    text = capsys.readouterr().out
    assert "L0: money-money 1.000  river-river 1.000  money-river 1.000" in text
    # the sixteen-sentence measure with its baselines: L0's word vector scores chance
    l0 = next(line.split() for line in text.splitlines() if re.match(r"\s+L0\s+\d", line))
    assert l0[1] == l0[4] == "0.467" and l0[3] != "n/a"  # random-init cpu-tiny of another seed beside it
    assert "(the higher of the upper layers): nearest-neighbour sense accuracy" in text


def test_the_program_runs_main_then_leaves_its_objects_out_of_the_exit_collection(monkeypatch):
    import gc
    import tomllib
    from pathlib import Path

    from probing_lab import cli

    calls = []
    monkeypatch.setattr(cli, "main", lambda: calls.append("main") or 3)
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))  # this test process is not frozen
    assert cli.command_line() == 3 and calls == ["main", "freeze"]
    scripts = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["probing-lab"] == "probing_lab.cli:command_line"
