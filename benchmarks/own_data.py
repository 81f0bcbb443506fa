"""Probing your own large file: extraction speed and peak memory, and how memory grows with the file.

    python benchmarks/own_data.py [--sentences 20000] [--scale 5] [--model shipped] [--threads 2]

Writes a ``tokens`` file of ``--sentences`` sentences (UD English-EWT train with its UPOS labels,
cycled, each pass reshuffled with a fixed seed) and one ``--scale`` times larger, then probes each in
a fresh process, as ``probing-lab probe`` does (layers 0-2, controls, MDL and the random-init
baseline off), with an empty feature cache. Prints, per file: tokens, extraction tokens/s, probe
seconds and the process's peak resident memory; then the ratio of the two peaks against the target
(memory within 1.2x for a file 5x larger: the file is streamed and the probe reads the cache a chunk
at a time). Needs ``$PROBING_LAB_DATA`` (or ``--data-dir``) with UD English-EWT.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

TARGET_RATIO = 1.2

CHILD = r"""
import json, resource, sys, time, torch
torch.set_num_threads(int(sys.argv[4]))
from probing_lab.probing.experiment import run_experiment
exp = {"dataset": {"format": "tokens", "train": sys.argv[1]}, "layers": [0, 1, 2],
       "control": False, "mdl": False, "random_init": False}
t0 = time.perf_counter()
run = run_experiment(exp, model=sys.argv[2] or None, out=sys.argv[3] + "/run", cache_dir=sys.argv[3] + "/cache",
                     progress=False, log=lambda m: None)
seconds = time.perf_counter() - t0
metas = [json.loads(m.read_text()) for m in __import__("pathlib").Path(sys.argv[3], "cache").glob("*/meta.json")]
extraction = {"seconds": sum(m["seconds"] for m in metas), "tokens": sum(m["tokens"] for m in metas)}
print(json.dumps({"seconds": seconds, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "extract_seconds": extraction["seconds"], "extract_tokens": extraction["tokens"],
                  "scores": {k: v["score"] for k, v in run.metrics["layers"].items()}}))
"""


def write_tokens_file(path: Path, sentences: list, n: int, seed: int = 0) -> int:
    """``n`` sentences cycled from ``sentences``, each pass shuffled; returns the token count."""
    rng = random.Random(seed)
    tokens = 0
    with open(path, "w", encoding="utf-8") as f:
        written = 0
        while written < n:
            order = list(range(len(sentences)))
            rng.shuffle(order)
            for i in order[: n - written]:
                f.write("".join(f"{t.form}\t{t.upos}\n" for t in sentences[i].tokens) + "\n")
                tokens += len(sentences[i].tokens)
            written += min(len(order), n - written)
    return tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=20000)
    parser.add_argument("--scale", type=int, default=5)
    parser.add_argument("--model", default="", help="default: the shipped model")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()

    from probing_lab.datasets import load_dataset
    from probing_lab.paths import data_dir

    ewt = [s for s in load_dataset("ewt", "train", data_dir(args.data_dir)[0]) if s.tokens]
    rows = []
    with tempfile.TemporaryDirectory(prefix="own-data-bench-") as tmp:
        for n in (args.sentences, args.sentences * args.scale):
            work = Path(tmp, str(n))
            work.mkdir()
            path = work / "big.tokens"
            tokens = write_tokens_file(path, ewt, n)
            size = path.stat().st_size / 2**20
            print(f"{n:,} sentences, {tokens:,} tokens, {size:.1f} MiB: probing ...", file=sys.stderr, flush=True)
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(path), args.model, str(work), str(args.threads)],
                check=True,
                capture_output=True,
                text=True,
            )
            result = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append((n, tokens, size, result))
            speed = result["extract_tokens"] / result["extract_seconds"]
            print(
                f"{n:>9,} sentences {tokens:>10,} tokens {size:7.1f} MiB | extraction "
                f"{speed:7.0f} tok/s | probe run {result['seconds']:7.0f} s | "
                f"peak memory {result['peak_mib']:7.0f} MiB | test accuracy "
                + " ".join(f"L{k} {v:.3f}" for k, v in result["scores"].items()),
                flush=True,
            )
    ratio = rows[1][3]["peak_mib"] / rows[0][3]["peak_mib"]
    verdict = "met" if ratio <= TARGET_RATIO else "MISSED"
    print(
        f"peak memory {args.scale}x file / 1x file: {ratio:.2f} (target <= {TARGET_RATIO}: {verdict}); "
        f"tokens {rows[1][1] / rows[0][1]:.2f}x"
    )


if __name__ == "__main__":
    main()
