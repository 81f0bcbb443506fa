"""Learning curves: the quick sense and POS probes a training run evaluates at its snapshots,
their table and plot, and the CLI that shows them."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import shared_dir

from probing_lab.cli import main
from probing_lab.elmo import ElmoBiLM, get_preset
from probing_lab.probing.curves import QuickEval, curves_table, read_curves, save_curves_png


@pytest.fixture(scope="module")
def quick() -> QuickEval:
    shared = shared_dir()
    if shared is None or not (shared / "datasets" / "wsd" / "CoarseWSD-20").is_dir():
        pytest.skip("CoarseWSD-20 and UD EWT not found: set PROBING_LAB_SHARED to the team's shared/ folder")
    return QuickEval.load(shared / "datasets", wsd_per_word=8, pos_train=60, pos_dev=30)


def test_quick_eval_sample_is_fixed_split_in_halves_and_never_the_test_split(quick):
    again = QuickEval.load(shared_dir() / "datasets", wsd_per_word=8, pos_train=60, pos_dev=30)
    assert [s.id for s in quick.wsd_a] == [s.id for s in again.wsd_a]  # seeded: every snapshot sees the same sample
    assert not {s.id for s in quick.wsd_a} & {s.id for s in quick.wsd_b}
    assert all(s.source.endswith("train") for s in quick.wsd_a + quick.wsd_b), {s.source for s in quick.wsd_a}
    assert len(quick.pos_train) == 60 and len(quick.pos_dev) == 30
    for half in (quick.wsd_a, quick.wsd_b):  # both senses of a word in both halves (stratified)
        senses = {(s.tokens[0].form, t.sense) for s in half for t in s.tokens if t.sense}
        assert len({t.sense for s in half for t in s.tokens if t.sense}) >= 40, senses


def test_quick_eval_scores_every_layer_and_leaves_model_and_generators_alone(quick):
    model = ElmoBiLM(get_preset("cpu-tiny")).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    result = quick(model)
    assert torch.equal(rng, torch.get_rng_state()) and model.training
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    assert set(result["wsd"]) == set(result["upos"]) == {"0", "1", "2"}
    assert all(0 <= v <= 1 for v in [*result["wsd"].values(), *result["upos"].values(), result["wsd_mfs"]])
    assert result["wsd_instances"] == sum(1 for s in quick.wsd_b for t in s.tokens if t.sense)
    assert result["upos"]["0"] > 0.2  # even random char-CNN type vectors carry some POS


RECORDS = [
    {
        "step": 0,
        "epoch": 0,
        "tokens_seen": 0,
        "heldout": {"perplexity": 900.0, "perplexity_forward": 910.0, "perplexity_backward": 890.0},
        "wsd": {"0": 0.4, "1": 0.55, "2": 0.56},
        "wsd_mfs": 0.64,
        "upos": {"0": 0.7, "1": 0.68, "2": 0.67},
    },
    {
        "step": 300,
        "epoch": 0.1,
        "tokens_seen": 768000,
        "heldout": {"perplexity": 300.0, "perplexity_forward": 305.0, "perplexity_backward": 295.0},
        "wsd": {"0": 0.4, "1": 0.6, "2": 0.62},
        "wsd_mfs": 0.64,
        "upos": {"0": 0.8, "1": 0.85, "2": 0.84},
    },
]


def test_curves_table_png_and_cli(tmp_path, capsys):
    run = tmp_path / "run-a"
    run.mkdir()
    (run / "curves.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reversed(RECORDS)))
    records = read_curves(run)
    assert [r["step"] for r in records] == [0, 300]
    table = curves_table({"run-a": records})
    assert "run-a | 300 | 0.77M | 305.0 / 295.0 | 0.400 / 0.600 / 0.620 (0.640) | 0.800 / 0.850 / 0.840" in table
    save_curves_png({"run-a": records}, tmp_path / "c.png")
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    assert main(["curves", str(run), "--png", str(tmp_path / "d.png")]) == 0
    assert "run-a | 0 | 0.00M" in capsys.readouterr().out and (tmp_path / "d.png").is_file()
    with pytest.raises(FileNotFoundError, match="eval_every_steps"):
        read_curves(tmp_path)
