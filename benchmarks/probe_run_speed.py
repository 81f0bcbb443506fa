"""A whole probe experiment against its extraction floor, measured in one run.

    python benchmarks/probe_run_speed.py [probes/pos_ewt.toml ...] [--model DIR] [--threads 2] [--repeats 3]

For each experiment, from an empty feature cache (a temporary folder):
1. the floor: one ``probing-lab embed`` of the experiment's text (train + dev + test sentences, one
   file) with the same model, as a command;
2. ``probing-lab probe EXPERIMENT`` as a command, and where its seconds went (``metrics["timing"]``
   and the per-layer ``timing``): extraction, probe fits, control task, MDL, random init (its
   extraction and its fits), further seeds, intervals.

Prints the ratio run / embed (``--embed-only``: the floors alone); with ``--repeats N`` each experiment's
embed and run N times, one after the other, and the median ratio with its range. A run with a random-init
baseline extracts two models, so its floor is 2x; with two or more threads it extracts them side by
side, one thread each (``extraction side by side`` in the split). Run it on quiet cores (no training or other
benchmark beside it): both timings share the machine's state, the ratio is what to compare between
machines.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def experiment_text(path: Path, data_dir) -> list[list[str]]:
    """The sentences the experiment extracts (train, dev, test), as the probe command reads them."""
    from probing_lab.datasets import load_dataset
    from probing_lab.paths import data_dir as resolve
    from probing_lab.probing.config import Experiment
    from probing_lab.probing.experiment import load_file_dataset

    exp = Experiment.load(path)
    files = load_file_dataset(exp) if isinstance(exp.dataset, dict) else None
    out, seen = [], set()
    for role in ("train", "dev", "test"):
        split = (getattr(exp, f"{role}_dataset") or exp.dataset, getattr(exp, role)) if files is None else role
        if split in seen:  # e.g. dev = the training split (wsd_coarse): the run extracts it once
            continue
        seen.add(split)
        if files is not None:
            chosen = files.sentences[role]  # a TokenTable is a sequence of word lists already
            words = [list(s) if isinstance(s, list) else s.words for s in chosen]
        else:
            dataset = getattr(exp, f"{role}_dataset") or exp.dataset
            words = [
                s.words for s in load_dataset(dataset, getattr(exp, role) or None, resolve(data_dir)[0]) if s.tokens
            ]
        if role == "train" and exp.max_train_sentences:
            words = words[: exp.max_train_sentences]
        out.extend(w for w in words if w)
    return out


def command(args: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "probing_lab.cli", *args], check=True, env=env, cwd=ROOT)
    return time.perf_counter() - start


def phases(metrics: dict) -> dict:
    """Seconds per phase: the run's timing, with the model's probe seconds split per layer part."""
    timing = dict(metrics.get("timing", {}))
    parts: dict = {}
    for entry in metrics.get("layers", {}).values():
        for k, v in (entry.get("timing") or {}).items():
            parts[k] = parts.get(k, 0.0) + v
    return {"timing": timing, "model layers": parts}


def measure(path: Path, sentences: list[list[str]], args, model: list) -> dict:
    """One embed of the experiment's text (``sentences``) and one run of it, each from an empty feature cache."""
    with tempfile.TemporaryDirectory(prefix="probe-speed-") as tmp:
        tmp = Path(tmp)
        env = {**os.environ, "PROBING_LAB_CACHE": str(tmp / "cache")}
        text = tmp / "text.txt"
        text.write_text("\n".join(" ".join(s) for s in sentences) + "\n", encoding="utf-8")
        tokens = sum(len(s) for s in sentences)
        threads = ["--threads", str(args.threads)]
        output = ["--output", str(tmp / "e.h5")]
        embed = command([*threads, "embed", "--input", str(text), *output, "--quiet", *model], env)
        if args.embed_only:
            print(f"{path.stem}: {tokens} tokens, embed {embed:.1f} s ({args.threads} threads)", flush=True)
            return {"experiment": path.stem, "tokens": tokens, "embed_s": round(embed, 1)}
        data = ["--data-dir", args.data_dir] if args.data_dir else []
        run_dir = Path(args.keep) / path.stem if args.keep else tmp / "run"
        run = command([*threads, "probe", str(path), "--out", str(run_dir), "--quiet", "--force", *model, *data], env)
        metrics = json.loads((run_dir / "metrics.json").read_text())
    split = phases(metrics)
    row = {
        "experiment": path.stem,
        "tokens": tokens,
        "embed_s": round(embed, 1),
        "run_s": round(run, 1),
        "ratio": round(run / embed, 2),
        **split,
        "scores": {k: round(v["score"], 4) for k, v in metrics["layers"].items() if v.get("score") is not None},
    }
    print(f"{path.stem}: {tokens} tokens, {args.threads} threads")
    print(f"  embed (the floor)      {embed:8.1f} s")
    print(f"  probe run              {run:8.1f} s   = {run / embed:.2f} x embed")
    for k, v in split["timing"].items():
        print(f"    {k:<22} {v:8.1f} s")
    for k, v in split["model layers"].items():
        print(f"      model layers: {k:<9} {v:8.1f} s")
    print("  scores " + ", ".join(f"{k} {v:.4f}" for k, v in row["scores"].items()))
    sys.stdout.flush()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiments", nargs="*", default=["probes/pos_ewt.toml"])
    parser.add_argument("--model", help="default: the shipped model")
    parser.add_argument("--data-dir")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="embed and run each experiment this many times, one after the other, and print the median ratio "
        "(this VM's embed of the same text varied by a quarter within an hour)",
    )
    parser.add_argument("--json", help="write the measurements here")
    parser.add_argument("--keep", help="keep each run folder here (FOLDER/EXPERIMENT), e.g. to commit it")
    parser.add_argument(
        "--embed-only",
        action="store_true",
        help="measure the floors only (one embed per experiment), e.g. for runs made together with a shared cache",
    )
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    model = ["--model", args.model] if args.model else []
    rows = []
    for name in args.experiments:
        path = Path(name)
        sentences = experiment_text(path, args.data_dir)  # read once for every repeat
        measured = [measure(path, sentences, args, model) for _ in range(args.repeats)]
        rows.extend(measured)
        ratios = sorted(row["ratio"] for row in measured if "ratio" in row)
        if len(ratios) > 1:
            print(
                f"{path.stem}: run / embed median {statistics.median(ratios):.2f} x "
                f"({ratios[0]:.2f}-{ratios[-1]:.2f} over {len(ratios)} pairs)",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
