"""Intervals, paired comparisons and verdicts (probing_lab.stats, probing.intervals; issue 35):
coverage on synthetic test sets with a known accuracy, hand-computed cases, the claims a run makes,
the small-data warnings, seeds, and two runs compared on the same test set."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import TINY_MODEL
from test_own_data import tokens_file

from probing_lab.cli import main
from probing_lab.elmo import ElmoBiLM, ElmoOptions, save_checkpoint
from probing_lab.probing.experiment import ExperimentError, run_experiment
from probing_lab.probing.intervals import PREDICTIONS, load_outcomes, run_verdicts
from probing_lab.stats import Bootstrap, Outcomes, check_seeds, differs, plus_minus, unit_ids, verdict


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    model = ElmoBiLM(ElmoOptions.from_dict(TINY_MODEL))
    model.reset_parameters(torch.Generator().manual_seed(0))
    return str(save_checkpoint(model, tmp_path_factory.mktemp("model") / "tiny"))


def synthetic(rng, accuracy: float, n_units: int) -> Outcomes:
    """A test set of ``n_units`` sentences of 3-20 tokens whose accuracy varies by sentence (tokens of
    one sentence are correlated) around a known population accuracy."""
    sizes = rng.integers(3, 21, n_units)
    per_unit = np.clip(rng.normal(accuracy, 0.1, n_units), 0, 1)  # mean `accuracy`, independent of size
    value = np.concatenate([rng.random(n) < p for n, p in zip(sizes, per_unit)])
    return Outcomes(value.astype(float), np.repeat(np.arange(n_units), sizes))


def test_the_95_percent_interval_covers_a_known_accuracy_in_93_to_97_percent_of_400_test_sets():
    rng = np.random.default_rng(12345)
    covered = 0
    for draw in range(400):
        o = synthetic(rng, 0.8, 120)
        lo, hi = Bootstrap(120, resamples=1000, seed=draw).interval(o)
        covered += lo <= 0.8 <= hi
    assert 0.93 <= covered / 400 <= 0.97, covered / 400


def test_resampled_sums_are_the_gathered_sums_to_the_bit(monkeypatch):
    import probing_lab.stats as stats

    rng = np.random.default_rng(3)
    boot = Bootstrap(300, resamples=500, seed=1)
    counts = rng.integers(0, 40, 300).astype(np.float64)  # right answers per sentence: whole numbers
    fractions = rng.random(300)  # e.g. a weighted score's values: gathered and summed, as always
    for values in (counts, fractions, -counts):
        np.testing.assert_array_equal(boot._sums(values), values[boot.draws].sum(axis=1))
    assert boot._counts is not None and boot._counts.sum(axis=1).tolist() == [300.0] * 500
    monkeypatch.setattr(stats, "COUNTS_BYTES", 8)  # too many draws for the matrix: gathered
    big = Bootstrap(300, resamples=500, seed=1)
    np.testing.assert_array_equal(big._sums(counts), boot._sums(counts))
    assert big._counts is None
    right = Outcomes(value=(rng.random(900) < 0.7).astype(float), unit=rng.integers(0, 300, 900))
    assert boot.interval(right) == big.interval(right)


def test_two_identical_prediction_sets_differ_by_zero_with_p_one():
    o = synthetic(np.random.default_rng(0), 0.7, 50)
    c = Bootstrap(50).compare(o, o)
    assert c == {"diff": 0.0, "ci95": [0.0, 0.0], "p": 1.0} and not differs(c)


def test_a_hand_computed_case_and_unit_numbering():
    # three sentences: 2/2, 1/3 and 0/1 right -> 3 of 6
    o = Outcomes(np.array([1, 1, 1, 0, 0, 0.0]), np.array([0, 0, 1, 1, 1, 2]))
    assert o.score == 0.5
    num, den = o.per_unit(3)
    assert num.tolist() == [2, 1, 0] and den.tolist() == [2, 3, 1]
    one = Outcomes(np.array([1.0, 0.0]), np.array([0, 0]))
    assert Bootstrap(1).interval(one) == [0.5, 0.5]  # one unit: nothing to resample
    assert unit_ids(["b", "a", "b", "c"]).tolist() == [0, 1, 0, 2]
    # weights: per sentence 3 of 4 and 1 of 4 gold edges -> 0.5
    assert Outcomes(np.array([3.0, 1.0]), np.array([0, 1]), np.array([4.0, 4.0])).score == 0.5


def test_the_paired_test_finds_a_small_consistent_difference_that_the_intervals_overlap_on():
    rng = np.random.default_rng(1)
    a = synthetic(rng, 0.9, 400)
    better = a.value.copy()
    wrong = np.flatnonzero(better == 0)
    better[rng.choice(wrong, 40, replace=False)] = 1  # b is right on 40 more tokens, never worse
    b = Outcomes(better, a.unit)
    boot = Bootstrap(400)
    ia, ib = boot.interval(a), boot.interval(b)
    assert ib[0] < ia[1]  # the two intervals overlap ...
    c = boot.compare(b, a)
    assert differs(c) and c["ci95"][0] > 0 and c["p"] < 0.01  # ... the paired difference does not include 0


def test_verdicts_in_words():
    same = {"diff": 0.003, "ci95": [-0.002, 0.008], "p": 0.3}
    assert verdict("L1", 0.934, [0.931, 0.937], "L2", same) == (
        "L1 and L2 do not differ (difference +0.003 [-0.002, 0.008])"
    )
    beats = {"diff": 0.003, "ci95": [0.001, 0.005], "p": 0.01}
    assert (
        verdict("L1", 0.934, [0.931, 0.937], "L2", beats) == "L1 0.934 [0.931, 0.937] beats L2 by 0.003 [0.001, 0.005]"
    )
    below = {"diff": -0.17, "ci95": [-0.2, -0.14], "p": 0.0}
    assert "is below random init by 0.170 [0.140, 0.200]" in verdict("L1", 0.22, [0.2, 0.24], "random init", below)
    assert plus_minus(0.934, [0.931, 0.937]) == "0.934 ±0.003"


def test_a_score_is_called_best_only_when_it_beats_its_strongest_baseline():
    layers = {"0": {"score": 0.90, "ci95": [0.88, 0.92]}, "mix": {"score": 0.943, "ci95": [0.93, 0.955]}}
    tie = {"diff": 0.0005, "ci95": [-0.004, 0.005], "p": 0.8}
    metrics = {
        "task": "token_label",
        "layers": layers,
        "comparisons": [
            {"a": "mix", "b": "majority", "kind": "baseline", **tie},
            {"a": "mix", "b": "0", "kind": "best", "diff": 0.043, "ci95": [0.03, 0.05], "p": 0.0},
            {"a": "mix", "b": "random_init", "kind": "random_init", "diff": -0.17, "ci95": [-0.2, -0.14], "p": 0.0},
        ],
    }
    said = run_verdicts(metrics)
    assert said[0].startswith("no layer beats its strongest baseline: mix and majority per type do not differ")
    assert not any(line.startswith("best layer") for line in said)
    assert "the trained model does not beat its random-init model at mix (difference -0.170" in said[2]


def test_seeds_are_checked():
    assert check_seeds([0, 1, 2]) == [0, 1, 2]
    for bad, match in [([], "non-empty"), ([0, -1], "whole numbers >= 0"), ([0, 1, 0], r"\[0\] are repeated")]:
        with pytest.raises(ValueError, match=match):
            check_seeds(bad)


@pytest.mark.parametrize("given", ["", "-1", "0,1,1", "a,b"])
def test_bad_seeds_on_the_command_line_are_usage_errors(given, capsys):
    with pytest.raises(SystemExit):
        main(["probe", "--data", "x.tokens", "--format", "tokens", "--seeds", given])
    assert "--seeds" in capsys.readouterr().err


# --- a whole run ---------------------------------------------------------------------------------------


def _run(path, tiny, out, **more):
    exp = {"dataset": {"format": "tokens", "train": str(path)}, "mdl": False, "probe": {"epochs": 3}, **more}
    return run_experiment(exp, model=tiny, out=out, cache_dir=out.parent / "cache", progress=False, log=lambda m: None)


def test_a_run_stores_intervals_comparisons_predictions_and_the_small_file_warning(tmp_path, tiny):
    path = tokens_file(tmp_path / "tiny.tokens", 80)  # 80 sentences: 8 test sentences
    run = _run(path, tiny, tmp_path / "run", layers=[0, 1, 2])
    m = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert m["n_test_units"] == 8 and m["unit"] == "sentence"
    for entry in m["layers"].values():
        lo, hi = entry["ci95"]
        assert lo <= entry["score"] <= hi and entry["control_ci95"] is not None
        assert not any(k.startswith("_") for k in entry)  # the runners' arrays stay out of metrics.json
    assert set(m["baselines_ci95"]["random_init"]) == {"0", "1", "2"} and m["baselines_ci95"]["majority"]
    kinds = [(c["a"], c["b"], c["kind"]) for c in m["comparisons"]]
    assert ("1", "0", "adjacent") in kinds and ("2", "1", "adjacent") in kinds
    assert sum(k == "best" for *_, k in kinds) == 1 and sum(k == "random_init" for *_, k in kinds) == 3
    assert any("only 8 test sentences (fewer than 50)" in w for w in m["warnings"])
    # the interval of a score on 8 sentences is wide, and the warning says so in the verdicts too
    widest = max(hi - lo for lo, hi in (e["ci95"] for e in m["layers"].values()))
    assert widest > 0.03 or m["layers"]["0"]["score"] == 1.0
    assert any(line.startswith("warning: only 8 test sentences") for line in run_verdicts(m))
    # the stored predictions give back every score without refitting
    found, n_units = load_outcomes(tmp_path / "run")
    assert n_units == 8 and found["layer:1"].score == pytest.approx(run.layers["1"].score)
    assert found["majority"].score == pytest.approx(run.majority)
    with np.load(tmp_path / "run" / PREDICTIONS, allow_pickle=False) as data:
        assert data["pred/layer:1"].dtype == np.int16


def test_seeds_refit_on_the_same_features_and_report_mean_and_sd(tmp_path, tiny):
    path = tokens_file(tmp_path / "pos.tokens", 60)
    run = _run(path, tiny, tmp_path / "run", layers=[0, 1], seeds=[0, 1, 2], control=False, random_init=False)
    seeds = run.metrics["seeds"]
    assert seeds["seeds"] == [0, 1, 2]
    for key, entry in seeds["layers"].items():
        assert len(entry["scores"]) == 3 and entry["scores"][0] == run.layers[key].score
        assert entry["mean"] == pytest.approx(np.mean(entry["scores"])) and entry["sd"] >= 0
    with pytest.raises(ExperimentError, match="repeated"):
        _run(path, tiny, tmp_path / "bad", seeds=[1, 1])


def test_report_compares_two_runs_on_the_same_test_set_and_refuses_different_ones(tmp_path, tiny, capsys):
    path = tokens_file(tmp_path / "pos.tokens", 60)
    _run(path, tiny, tmp_path / "a", layers=[0, 1], random_init=False)
    _run(path, tiny, tmp_path / "b", layers=[0, 1], random_init=False, probe={"epochs": 1})
    other = tokens_file(tmp_path / "other.tokens", 60, seed=7)
    _run(other, tiny, tmp_path / "c", layers=[0, 1], random_init=False)
    assert main(["report", str(tmp_path / "a"), str(tmp_path / "b"), "--compare"]) == 0
    out = capsys.readouterr().out
    assert "paired on the same test items" in out and "L1 of A" in out and "(p = " in out
    assert "±" in out and "control task" in out  # intervals, and every baseline the runs have
    assert main(["report", str(tmp_path / "a"), str(tmp_path / "c"), "--compare"]) == 2
    assert "are not on the same test set" in capsys.readouterr().err
