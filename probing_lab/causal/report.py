"""Causal run directories: reading them back, and their tables (``probing-lab report``, the Causal page).

A causal run is a folder with ``metrics.json`` whose ``kind`` is ``units`` or ``patch``, or an
amnesic run: a folder of sites, each a sub-folder with an ``amnesic`` ``metrics.json`` (and
``summary.md``).
"""

from __future__ import annotations

import json
from pathlib import Path

KINDS = ("amnesic", "units", "patch")


def _metrics(path: Path):
    try:
        m = json.loads((path / "metrics.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return m if isinstance(m, dict) and m.get("kind") in KINDS else None


def load_causal_run(run_dir: str | Path) -> list[dict]:
    """The metrics of a causal run: one dict (units, patch) or one per site (amnesic); [] if it is none."""
    run_dir = Path(run_dir)
    own = _metrics(run_dir)
    if own is not None:
        return [own]
    if not run_dir.is_dir():
        return []
    sites = [m for sub in sorted(run_dir.iterdir()) if sub.is_dir() for m in [_metrics(sub)] if m is not None]
    return [m for m in sites if m["kind"] == "amnesic"]


def is_causal_run(run_dir: str | Path) -> bool:
    return bool(load_causal_run(run_dir))


def summary_table(runs: list[dict]) -> str:
    """Amnesic runs -> a markdown table, one row per site."""
    lines = [
        "| property | site | rank | probe before | probe after | majority | ppl before | ppl after | "
        "ppl random (mean of draws) | agreement before / after (overall) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for m in runs:
        random = sum(m["ppl_after_random"]) / max(len(m["ppl_after_random"]), 1)
        agreement = ""
        if "agreement" in m:
            agreement = f"{m['agreement']['before']['overall']:.3f} / {m['agreement']['after']['overall']:.3f}"
        lines.append(
            f"| {m['property']} | L{m['layer']} {m['direction']} | {m['rank']} | {m['probe_before']:.3f} | "
            f"{m['probe_after']:.3f} | {m['majority']:.3f} | {m['ppl_before']:.1f} | {m['ppl_after']:.1f} | "
            f"{random:.1f} | {agreement} |"
        )
    return "\n".join(lines) + "\n"


def units_summary(m: dict, top: int = 10) -> str:
    """A units run -> markdown: the classifier, the top units against the random ones, joint ablations."""
    lines = []
    for direction in m["classifier"]:
        c, r, j = m["classifier"][direction], m["random_unit_effect"][direction], m["joint"][direction]
        lines += [
            f"**{direction} LM**: diagnostic classifier of subject number, CV accuracy {c['cv_accuracy']:.3f} "
            f"(majority {c['majority']:.3f}); agreement accuracy {m['before'][direction]['overall']['accuracy']:.3f} "
            f"on {m['pairs']} pairs.",
            "",
            "| unit | classifier weight | accuracy drop | margin drop | drop, one attractor |",
            "|---|---|---|---|---|",
        ]
        for u in [u for u in m["units"] if u["direction"] == direction][:top]:
            g = u["by_group"]
            lines.append(
                f"| L{u['layer']}:{u['unit']} | {u['score']:.3f} | {u['effect']:+.3f} | "
                f"{g['overall']['margin']:+.3f} | {g.get('one attractor', {}).get('accuracy', float('nan')):+.3f} |"
            )
        lines += [
            f"| mean of {sum(1 for u in m['random_units'] if u['direction'] == direction)} random units | | "
            f"{r['accuracy']:+.3f} | {r['margin']:+.3f} | |",
            "",
            f"Ablated together: the top {j['units']} units {j['top']['overall']['accuracy']:+.3f} accuracy "
            f"({j['top']['overall']['margin']:+.3f} margin), {j['units']} random units "
            f"{j['random']['overall']['accuracy']:+.3f} ({j['random']['overall']['margin']:+.3f}).",
            "",
        ]
    return "\n".join(lines)


def patch_summary(m: dict) -> str:
    """A patch run -> markdown: per construction and direction, where patching restores most
    besides the changed word (patching that restores the difference trivially)."""
    lines = [
        "| construction | LM | pairs | clean / corrupt logit difference | strongest patch besides the changed word |",
        "|---|---|---|---|---|",
    ]
    for construction, by_direction in m["constructions"].items():
        for direction, r in by_direction.items():
            changed = set(r.get("changed", []))
            best, where = -1.0, ""
            for layer, row in enumerate(r["effect"]):
                for position, value in enumerate(row):
                    if value is not None and position not in changed and value > best:
                        best, where = value, f"L{layer} at {r['tokens'][position]!r} ({value:.2f})"
            if best < 0.05:
                where = "none (no other cell restores 0.05 of the difference)"
            elif not changed:
                where += " (a run from before the changed word was recorded: it may be that word)"
            lines.append(
                f"| {construction} | {direction} | {r['pairs']} | {r['clean']:.2f} / {r['corrupt']:.2f} | {where} |"
            )
    return "\n".join(lines) + "\n"


def report(run_dirs: list[str | Path]) -> str:
    """Markdown for causal runs: each run's table under its folder's name."""
    parts = []
    for run_dir in run_dirs:
        runs = load_causal_run(run_dir)
        if not runs:
            continue
        kind = runs[0]["kind"]
        if kind == "amnesic":
            table = summary_table(runs)
        else:
            table = units_summary(runs[0]) if kind == "units" else patch_summary(runs[0])
        parts.append(f"### causal {kind}: {run_dir} ({runs[0].get('model', 'model not recorded')})\n\n{table}")
    return "\n".join(parts)
