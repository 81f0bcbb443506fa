"""Number units (Lakretz et al. 2019): which LSTM units carry the subject's number to the verb?

Ablating every unit of every layer and direction one by one on the agreement pairs is too slow on
two cores (``benchmarks/causal.py`` estimates it), so the units of each direction are ranked by a
cheap score first and only the top ones are ablated, next to as many random ones:

1. **Diagnostic classifier** (Giulianelli et al. 2018): the LSTM cell states of every layer where
   the direction's LM decides (forward: after the word before the verb, about to predict the verb;
   backward: after the word after the subject, about to predict the subject, having read the verb),
   on the grammatical sentence of each pair; a logistic regression of the subject's number on the
   standardised states. A unit's score is the size of its weight; the classifier's accuracy is
   cross-validated.
2. **Ablation**: a unit's cell state zeroed at every time step (``interventions.ablate_units``)
   while the LM scores a fixed sample of minimal pairs; the effect is the drop of that direction's
   agreement accuracy (overall and per construction) and of its mean log-probability margin
   (grammatical minus ungrammatical sentence). Also the top ``joint`` units together, against as
   many random units together: is number carried by a few units, or spread out?
3. **Trajectories**: the top units' cell state at every position, mean over sentences with a
   singular and with a plural subject.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from ..elmo import batch_to_ids
from ..elmo.interventions import ablate_units
from ..lm.agreement import MinimalPair
from ..lm.score import score_sentences

NO_ATTRACTOR = ("simple", "adverb")  # the other constructions put one noun of the other number before the verb


@dataclass(frozen=True)
class UnitsConfig:
    pairs_per_construction: int = 40  # the fixed sample the ablations are scored on
    rank_pairs_per_construction: int = 0  # pairs the classifier is fitted on (0: all the others)
    top: int = 50  # units ablated one by one, per direction
    random_units: int = 50  # the control: random units of the same direction, not among the top
    joint: int = 10  # the top units ablated together, against as many random units together
    trajectory_units: int = 4
    seed: int = 0

    def check(self, lstm_dim: int, n_layers: int) -> None:
        units = lstm_dim * n_layers
        for name in ("pairs_per_construction", "top", "joint", "trajectory_units"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.top + self.random_units > units:
            raise ValueError(f"top + random units = {self.top + self.random_units}, but a direction has {units} units")
        if self.joint > self.top:
            raise ValueError(f"joint ({self.joint}) must not exceed top ({self.top})")


def sample_pairs(pairs: Sequence[MinimalPair], per_construction: int, seed: int) -> list[MinimalPair]:
    """At most ``per_construction`` pairs of each construction, drawn with ``seed``, in file order."""
    rng = np.random.default_rng(seed)
    chosen = []
    for name in sorted({p.construction for p in pairs}):
        idx = [i for i, p in enumerate(pairs) if p.construction == name]
        chosen += rng.choice(idx, size=min(per_construction, len(idx)), replace=False).tolist()
    return [pairs[i] for i in sorted(chosen)]


def _final_cells(bilm, rows: list[torch.Tensor], interventions=()) -> torch.Tensor:
    """Char-id rows ``(T_i, 50)`` of any length -> the final cell state ``(n_layers, 2, rows, cell)``
    (forward: after each row's last token; backward: after its first token)."""
    batch = torch.zeros(len(rows), max(len(r) for r in rows), rows[0].shape[-1], dtype=rows[0].dtype)
    for i, r in enumerate(rows):
        batch[i, : len(r)] = r
    with torch.no_grad():
        return bilm(batch, interventions=interventions).state[1]


def _decision_rows(pair: MinimalPair, direction: str) -> torch.Tensor:
    """The grammatical sentence's char ids cut where ``direction``'s LM decides (module docstring)."""
    ids = batch_to_ids([list(pair.grammatical)])[0]  # <S> w0 .. w_n </S>
    if direction == "forward":
        return ids[: pair.verb_index + 1]  # <S> .. the word before the verb
    return ids[3:]  # the word after the subject (w2) .. </S>


def decision_states(bilm, pairs: Sequence[MinimalPair], direction: str, batch_size: int = 128) -> np.ndarray:
    """``(pairs, n_lstm_layers * cell)``: every LSTM layer's cell state of ``direction`` where it decides."""
    side = 0 if direction == "forward" else 1
    out = []
    for start in range(0, len(pairs), batch_size):
        cells = _final_cells(bilm, [_decision_rows(p, direction) for p in pairs[start : start + batch_size]])
        out.append(cells[:, side].permute(1, 0, 2).reshape(cells.shape[2], -1).numpy())
    return np.concatenate(out)


def rank_units(states: np.ndarray, numbers: Sequence[str], cell: int, seed: int = 0) -> tuple[list, float]:
    """Units ``[(layer, unit, score)]`` best first by the diagnostic classifier's standardised
    weight size, and its 5-fold cross-validated accuracy. Layers count from 1 (the LSTM layers)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    y = np.array([n == "plural" for n in numbers])
    if y.all() or not y.any():
        raise ValueError("the pairs have subjects of one number only: the classifier needs both")
    model = make_pipeline(StandardScaler(), LogisticRegression(C=0.1, max_iter=2000, random_state=seed))
    accuracy = float(cross_val_score(model, states, y, cv=5).mean())
    weights = np.abs(model.fit(states, y)[-1].coef_[0])
    order = np.argsort(-weights, kind="stable")
    return [(int(i // cell) + 1, int(i % cell), float(weights[i])) for i in order], accuracy


def agreement(lm, pairs: Sequence[MinimalPair], interventions=()) -> dict:
    """``{direction: {construction | "overall" | "no attractor" | "one attractor": {"accuracy",
    "margin"}}}``: the share of pairs whose grammatical sentence the direction's LM finds more
    probable, and the mean log-probability margin."""
    scores = score_sentences(lm, [s for p in pairs for s in (p.grammatical, p.ungrammatical)], 64, interventions)
    margins = {
        "forward": np.array([g.forward_total - b.forward_total for g, b in zip(scores[0::2], scores[1::2])]),
        "backward": np.array([g.backward_total - b.backward_total for g, b in zip(scores[0::2], scores[1::2])]),
    }
    groups = {"overall": lambda p: True}
    groups.update({name: (lambda p, n=name: p.construction == n) for name in sorted({p.construction for p in pairs})})
    groups["no attractor"] = lambda p: p.construction in NO_ATTRACTOR
    groups["one attractor"] = lambda p: p.construction not in NO_ATTRACTOR
    out = {}
    for direction, m in margins.items():
        out[direction] = {}
        for name, keep in groups.items():
            chosen = np.array([keep(p) for p in pairs])
            if chosen.any():
                out[direction][name] = {"accuracy": float((m[chosen] > 0).mean()), "margin": float(m[chosen].mean())}
    return out


def _effect(before: dict, after: dict) -> dict:
    """Accuracy and margin drops per group of one direction."""
    return {
        name: {k: round(before[name][k] - after[name][k], 5) for k in ("accuracy", "margin")}
        for name in before
        if name in after
    }


def trajectories(bilm, sentences: Sequence[Sequence[str]], direction: str, units: Sequence[tuple]) -> np.ndarray:
    """``(sentences, T + 2, len(units))``: the cell state of ``(layer, unit)`` at every position
    (boundaries included) of sentences of one length, in sentence order."""
    side = 0 if direction == "forward" else 1
    out = []
    for tokens in sentences:
        ids = batch_to_ids([list(tokens)])[0]
        T = len(ids)
        # forward: the prefixes ending at each position; backward: the suffixes starting there
        rows = [ids[: t + 1] for t in range(T)] if side == 0 else [ids[t:] for t in range(T)]
        cells = _final_cells(bilm, rows)  # (layers, 2, T, cell)
        out.append(np.stack([cells[layer - 1, side, :, unit].numpy() for layer, unit in units], axis=-1))
    return np.stack(out)


def number_units(
    lm,
    pairs: Sequence[MinimalPair],
    config: UnitsConfig = UnitsConfig(),
    directions: Sequence[str] = ("forward", "backward"),
    log: Callable[[str], None] = lambda m: None,
    on_progress: Optional[Callable[[float], None]] = None,
) -> dict:
    """The three steps of the module docstring for each direction; the ``metrics.json`` of a units run."""
    bilm = lm.bilm
    cell, n_layers = bilm.options.lstm_dim, bilm.n_layers - 1
    config.check(cell, n_layers)
    rng = np.random.default_rng(config.seed)
    test = sample_pairs(pairs, config.pairs_per_construction, config.seed)
    held = set(map(id, test))
    rest = [p for p in pairs if id(p) not in held]
    if config.rank_pairs_per_construction:
        rest = sample_pairs(rest, config.rank_pairs_per_construction, config.seed)
    before = agreement(lm, test)
    steps = len(directions) * (config.top + config.random_units + 2)
    done = 0
    metrics = {"kind": "units", "model": lm.name, "config": config.__dict__, "pairs": len(test)}
    metrics.update({"rank_pairs": len(rest), "before": before, "units": [], "random_units": [], "classifier": {}})
    metrics["random_unit_effect"], metrics["joint"], metrics["trajectories"] = {}, {}, {}
    for direction in directions:
        ranking, accuracy = rank_units(
            decision_states(bilm, rest, direction), [p.subject_number for p in rest], cell, config.seed
        )
        metrics["classifier"][direction] = {"cv_accuracy": round(accuracy, 4), "majority": _majority(rest)}
        log(f"  {direction}: diagnostic classifier of subject number, CV accuracy {accuracy:.3f}")
        top = ranking[: config.top]
        others = ranking[config.top :]
        random = [others[i] for i in sorted(rng.choice(len(others), config.random_units, replace=False))]
        for kind, units in (("units", top), ("random_units", random)):
            for layer, unit, score in units:
                after = agreement(lm, test, [ablate_units(layer, direction, cell_units=[unit])])
                effect = _effect(before[direction], after[direction])
                row = {"direction": direction, "layer": layer, "unit": unit, "score": round(score, 5)}
                metrics[kind].append({**row, "effect": effect["overall"]["accuracy"], "by_group": effect})
                done += 1
                if on_progress:
                    on_progress(done / steps)
            log(f"  {direction}: {len(units)} {kind.replace('_', ' ')} ablated one by one")
        mean = lambda rows, key: float(np.mean([r["by_group"]["overall"][key] for r in rows]))  # noqa: E731
        metrics["random_unit_effect"][direction] = {
            "accuracy": mean(metrics["random_units"][-len(random) :], "accuracy"),
            "margin": mean(metrics["random_units"][-len(random) :], "margin"),
        }
        joint = {}
        for kind, units in (("top", top[: config.joint]), ("random", random[: config.joint])):
            by_layer: dict = {}
            for layer, unit, _ in units:
                by_layer.setdefault(layer, []).append(unit)
            ivs = [ablate_units(layer, direction, cell_units=u) for layer, u in by_layer.items()]
            joint[kind] = _effect(before[direction], agreement(lm, test, ivs)[direction])
            done += 1
            if on_progress:
                on_progress(done / steps)
        metrics["joint"][direction] = {"units": config.joint, **joint}
        units = top[: config.trajectory_units]
        metrics["trajectories"][direction] = _trajectory_summary(bilm, pairs, direction, units, config.seed)
    return metrics


def _majority(pairs: Sequence[MinimalPair]) -> float:
    plural = sum(p.subject_number == "plural" for p in pairs)
    return round(max(plural, len(pairs) - plural) / len(pairs), 4)


def _trajectory_summary(
    bilm, pairs: Sequence[MinimalPair], direction: str, units: Sequence[tuple], seed: int, per_number: int = 20
) -> dict:
    """Mean trajectories of the top units over one construction's most common sentence shape
    (prepositional phrase: the attractor sits between subject and verb), by subject number
    (at most ``per_number`` sentences each)."""
    chosen = [p for p in pairs if p.construction == "prepositional_phrase"] or list(pairs)
    shapes = [len(p.grammatical) for p in chosen]
    common = max(set(shapes), key=shapes.count)
    chosen = [p for p in chosen if len(p.grammatical) == common]
    rng = np.random.default_rng(seed)
    out = {"construction": chosen[0].construction, "tokens": ["<S>", *chosen[0].grammatical, "</S>"]}
    out["units"] = [{"layer": layer, "unit": unit} for layer, unit, _ in units]
    for number in ("singular", "plural"):
        group = [p.grammatical for p in chosen if p.subject_number == number]
        if not group:
            out[number] = None
            continue
        group = [group[i] for i in sorted(rng.choice(len(group), min(per_number, len(group)), replace=False))]
        values = trajectories(bilm, group, direction, [(layer, unit) for layer, unit, _ in units])
        out[number] = {"sentences": len(group), "mean": np.round(values.mean(axis=0), 4).T.tolist()}
    return out


def save_units_figure(metrics: dict, path, top: int = 10) -> None:
    """A PNG per direction: the ``top`` units' ablation effects against the random units' mean, and
    the top units' trajectories (solid: singular subject, dashed: plural)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directions = list(metrics["trajectories"])
    fig, axes = plt.subplots(len(directions), 2, figsize=(11, 3.4 * len(directions)), squeeze=False)
    for row, direction in zip(axes, directions):
        units = [u for u in metrics["units"] if u["direction"] == direction][:top]
        labels = [f"L{u['layer']}:{u['unit']}" for u in units]
        row[0].bar(labels, [u["effect"] for u in units], color="#4c72b0")
        random = metrics["random_unit_effect"][direction]["accuracy"]
        row[0].axhline(random, color="#c44e52", linestyle="--", label=f"mean of random units ({random:+.3f})")
        row[0].axhline(0, color="black", linewidth=0.6)
        row[0].set_ylabel("agreement accuracy drop")
        row[0].set_title(f"{direction} LM: top units by the diagnostic classifier, ablated one by one", fontsize=9)
        row[0].tick_params(axis="x", rotation=45, labelsize=8)
        row[0].legend(fontsize=8)
        t = metrics["trajectories"][direction]
        for k, unit in enumerate(t["units"]):
            colour = f"C{k}"
            for number, style in (("singular", "-"), ("plural", "--")):
                if t[number] is not None:
                    row[1].plot(t[number]["mean"][k], style, color=colour,
                                label=f"L{unit['layer']}:{unit['unit']} {number}")  # fmt: skip
        row[1].set_xticks(range(len(t["tokens"])), t["tokens"], rotation=45, ha="right", fontsize=8)
        row[1].set_ylabel("cell state")
        row[1].set_title(f"{direction} LM: trajectories ({t['construction'].replace('_', ' ')})", fontsize=9)
        row[1].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=110)
    plt.close(fig)
