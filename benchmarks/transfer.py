"""One whole transfer experiment on this machine: wall time against the target, the tagger's training
speed, peak memory.

    python benchmarks/transfer.py [transfer/chunking_conll2000.toml] [--model shipped] [--workers 2]
                                  [--threads 1] [--out DIR]

Runs the experiment (ELMo extraction of every split for the model and the random-init model, then
every cell: inputs x fractions x seeds) in a fresh process with an empty feature cache, as
``probing-lab transfer`` does. Prints the wall time and its ratio to the target (45 minutes for
chunking on the 2-core machine), the extraction time, the training time, the tagger's training
tokens/s (tokens of the cell's training sentences x epochs run, over the cell's seconds; each cell
also scores dev and test, which is counted in its seconds) per input, and the process's peak resident
memory. ``--out`` keeps the run directory (to commit it as the experiment's result); without it the
run goes to a temporary folder. Needs ``$PROBING_LAB_DATA`` (or ``--data-dir``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_MINUTES = 45.0

CHILD = r"""
import json, resource, sys, time, torch
torch.set_num_threads(int(sys.argv[4]))
from probing_lab.transfer.experiment import run_transfer
t0 = time.perf_counter()
run_transfer(sys.argv[1], model=sys.argv[2] or None, out=sys.argv[3], cache_dir=sys.argv[5],
             data_dir=sys.argv[6] or None, progress=False, workers=int(sys.argv[7]))
peak = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
print(json.dumps({"seconds": time.perf_counter() - t0, "peak_mib": peak / 1024}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiment", nargs="?", default=str(ROOT / "transfer" / "chunking_conll2000.toml"))
    parser.add_argument("--model", default="", help="default: the shipped model")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the main process (extraction)")
    parser.add_argument("--workers", type=int, default=2, help="cells trained at once, one process each")
    parser.add_argument("--out", help="keep the run directory here")
    parser.add_argument("--data-dir", default="")
    args = parser.parse_args()

    from probing_lab.paths import data_dir
    from probing_lab.transfer.data import load_files, load_task, subset
    from probing_lab.transfer.experiment import TransferExperiment

    exp = TransferExperiment.load(args.experiment)
    with tempfile.TemporaryDirectory(prefix="transfer-bench-") as tmp:
        out = args.out or str(Path(tmp, "run"))
        child = [sys.executable, "-c", CHILD, args.experiment, args.model, out, str(args.threads)]
        child += [str(Path(tmp, "cache")), args.data_dir, str(args.workers)]
        done = subprocess.run(child, stdout=subprocess.PIPE, text=True)
        if done.returncode:
            sys.exit(f"the transfer run failed (exit {done.returncode}); its messages are above")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        extraction = sum(json.loads(m.read_text())["seconds"] for m in Path(tmp, "cache").glob("*/meta.json"))
        metrics = json.loads(Path(out, "metrics.json").read_text())

    if exp.dataset is None:
        train = load_task(exp.task, data_dir(args.data_dir or None)[0])["train"]
    else:
        train = load_files(exp.dataset)[0]["train"]
    speed: dict = defaultdict(lambda: [0.0, 0.0])  # input -> [tokens trained, seconds]
    for cell in metrics["cells"]:
        chosen = subset(train, cell["fraction"], cell["seed"])
        speed[cell["input"]][0] += sum(len(train.words[i]) for i in chosen) * cell["epochs"]
        speed[cell["input"]][1] += cell["seconds"]
    training = sum(c["seconds"] for c in metrics["cells"])
    minutes = result["seconds"] / 60
    print(
        f"{exp.name}: {len(metrics['cells'])} cells, model {metrics['model']}, {args.workers} worker processes "
        f"(1 thread each), {args.threads} thread(s) for extraction"
    )
    print(f"  wall time {minutes:.1f} min (target {TARGET_MINUTES:.0f} min: ratio {minutes / TARGET_MINUTES:.2f})")
    print(f"  extraction {extraction / 60:.1f} min, training and scoring the cells {training / 60:.1f} min")
    for name, (tokens, seconds) in speed.items():
        print(
            f"  tagger {name:12s} {seconds / 60:6.1f} min, {tokens / seconds:,.0f} tok/s in training "
            "(with dev and test scoring)"
        )
    print(f"  peak memory {result['peak_mib']:.0f} MiB (the largest process: the main one or a worker)")


if __name__ == "__main__":
    main()
