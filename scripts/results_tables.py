"""Write the probe results tables of docs/results.md from the committed runs (probes/results/*/metrics.json).

Each table sits between ``<!-- results:NAME -->`` and ``<!-- /results:NAME -->`` in the page and is
made here, never by hand: every score with its 95% interval over test sentences (``0.934 ±0.003``)
where the run stored its predictions, and under the table what the intervals support, in the words
of ``probing_lab.probing.intervals.run_verdicts``. ``--check`` exits 1 when the page is out of step
(the test suite runs it).

    python scripts/results_tables.py          # rewrite the tables in docs/results.md
    python scripts/results_tables.py --check  # is the page in step with the runs?
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from probing_lab.features.activations import layer_label
from probing_lab.probing import intervals
from probing_lab.probing.runs import ProbeRun
from probing_lab.stats import plus_minus

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "results.md"
RUNS = ROOT / "probes" / "results"
MAIN = ("0", "1", "2", "mix", "mean")
HALVES = ("1", "1f", "1b", "2", "2f", "2b")


def _name(run: ProbeRun) -> str:
    """A run's row: its folder's name (``pos_ewt-early`` is the pos_ewt experiment on the early snapshot)."""
    return f"`{run.path.name}`"


def _cell(run: ProbeRun, key: str) -> str:
    entry = run.layers.get(key)
    return "" if entry is None else plus_minus(entry.score, entry.ci95)


def _random(run: ProbeRun) -> str:
    cis = (run.metrics.get("baselines_ci95") or {}).get("random_init") or {}
    return " / ".join(plus_minus(run.random_init[k], cis.get(k)) for k in ("0", "1", "2") if k in run.random_init)


def _baseline(run: ProbeRun) -> str:
    if run.majority is None:
        return ""
    ci = (run.metrics.get("baselines_ci95") or {}).get("majority")
    return f"{intervals.baseline_label(run.metrics, 'majority')} {plus_minus(run.majority, ci)}"


def main_table(runs: list[ProbeRun]) -> str:
    lines = [
        "| experiment | score | L0 | L1 | L2 | mix (WSD: mean) | random-init L0 / L1 / L2 | baseline | test units |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        mixed = _cell(run, "mix") or _cell(run, "mean")
        units = (
            f"{run.metrics['n_test_units']:,} {run.metrics['unit']}s"
            if "n_test_units" in run.metrics
            else "(no interval)"
        )
        cells = [_name(run), run.metric_name, *(_cell(run, k) for k in ("0", "1", "2")), mixed]
        lines.append("| " + " | ".join([*cells, _random(run), _baseline(run), units]) + " |")
    return "\n".join(lines)


def halves_table(runs: list[ProbeRun]) -> str:
    lines = ["| experiment | " + " | ".join(layer_label(k) for k in HALVES) + " |", "|---|" + "---|" * len(HALVES)]
    for run in runs:
        if any(k in run.layers for k in ("1f", "2f")):
            lines.append(f"| {_name(run)} ({run.metric_name}) | " + " | ".join(_cell(run, k) for k in HALVES) + " |")
    return "\n".join(lines)


def verdicts(runs: list[ProbeRun]) -> str:
    out = []
    for run in runs:
        said = [line for line in intervals.run_verdicts(run.metrics) if not line.startswith("the trained model")]
        if said:
            out.append(f"- {_name(run)}: " + "; ".join(said) + ".")
    stale = [_name(r) for r in runs if "comparisons" not in r.metrics]
    if stale:
        out.append(f"- No interval yet (run before predictions were stored; rerun to get them): {', '.join(stale)}.")
    return "\n".join(out)


def tables() -> dict[str, str]:
    runs = [ProbeRun.load(d) for d in sorted(RUNS.iterdir()) if (d / "metrics.json").is_file()]
    runs = [r for r in runs if any(k in r.layers for k in MAIN)]
    return {"main": main_table(runs), "halves": halves_table(runs), "verdicts": verdicts(runs)}


def render(page: str) -> str:
    for name, body in tables().items():
        pattern = re.compile(rf"(<!-- results:{name} -->).*?(<!-- /results:{name} -->)", re.S)
        if not pattern.search(page):
            raise SystemExit(f"{PAGE}: no <!-- results:{name} --> ... <!-- /results:{name} --> block")
        page = pattern.sub(lambda m, body=body: f"{m.group(1)}\n{body}\n{m.group(2)}", page)
    return page


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/results.md is out of step")
    args = parser.parse_args(argv)
    page = PAGE.read_text(encoding="utf-8")
    new = render(page)
    if args.check:
        if new != page:
            print(f"{PAGE} is out of step with probes/results: run python scripts/results_tables.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(new, encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
