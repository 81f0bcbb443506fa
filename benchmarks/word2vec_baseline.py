"""The static word2vec vectors as a probing baseline next to ELMo's layers (issue 24, item 2).

    OMP_NUM_THREADS=1 python benchmarks/word2vec_baseline.py [--vectors data/models/word2vec-lab]
        [--data-dir /work/shared/datasets] [--out benchmarks/results/word2vec_baseline.json]

Runs the lab's own experiments on the vectors as "a model with one context-free layer"
(:class:`probing_lab.static.StaticEncoder`), with exactly the settings of the shipped experiment files,
so the numbers sit next to the README's rows for L0-L2:

- ``probes/pos_ewt.toml``: UPOS on EWT, the linear probe (default ``ProbeConfig``) trained on train,
  early-stopped on dev, scored on test; its control task (selectivity) and online-code MDL;
- ``probes/wsd_coarse.toml``: CoarseWSD-20 by nearest sense centroid, on the target word's vector and
  on the "bag of context" (the mean of the sentence's other words' vectors);
- ``probes/wsd_coarse_linear.toml``: a linear probe per word, on the same two inputs.

A static vector gives every occurrence of a word form the same vector, so on the target word WSD can
only reach the most-frequent-sense level (or fall below it where the senses' centroids tie); what the
bag of context gets is what the topic words give. Prints a table and writes the numbers as JSON.

Measured with the shipped vectors (data/models/word2vec-lab, 40k words x 100) on this 2-core machine,
2 min 15 s for all three, peak RSS 1.6 GB:

| experiment | word2vec | bag of context | control (selectivity) | MDL kbits (control) | baseline |
|---|---|---|---|---|---|
| pos_ewt UPOS (dev 0.855) | 0.852 | | 0.577 (0.275) | 128 (442) | majority per type 0.862 |
| wsd_coarse centroid F1 | 0.586 | 0.847 | | | most frequent sense 0.734 |
| wsd_coarse_linear F1 | 0.731 | 0.935 | | | most frequent sense 0.734 |

(4.8% of EWT's tokens and 15.7% of CoarseWSD-20's are out of the 40k words and get a zero vector.)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from probing_lab.probing.experiment import Experiment, RunProgress  # noqa: E402
from probing_lab.probing.runners import RUNNERS  # noqa: E402
from probing_lab.probing.splits import load_splits, read_sentences  # noqa: E402
from probing_lab.static import StaticEncoder, StaticVectors  # noqa: E402

EXPERIMENTS = ("pos_ewt", "wsd_coarse", "wsd_coarse_linear")


def run(name: str, encoder: StaticEncoder, data_dir: str, cache_dir, log) -> dict:
    exp = Experiment.load(ROOT / "probes" / f"{name}.toml")
    exp = dataclasses.replace(exp, layers=[0], random_init=False)
    start = time.perf_counter()
    before_oov, before_lookups = encoder.vectors.oov, encoder.vectors.lookups
    splits = load_splits(read_sentences(exp, data_dir), encoder, cache_dir, progress=False)
    report = RunProgress(log, None, len(exp.layer_keys))
    layers, extra = RUNNERS[exp.task](exp, splits, True, report)
    lookups = encoder.vectors.lookups - before_lookups
    out = {
        "experiment": name,
        "task": exp.task,
        "layer": layers["0"],
        "majority": extra.get("majority"),
        "seconds": round(time.perf_counter() - start, 1),
    }
    if lookups:  # 0 when the features came from the cache
        out["oov_tokens"] = {"oov": encoder.vectors.oov - before_oov, "of": lookups}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vectors", default=str(ROOT / "data" / "models" / "word2vec-lab"))
    parser.add_argument("--data-dir", default="/work/shared/datasets")
    parser.add_argument("--cache-dir", help="feature cache (default: the lab's)")
    parser.add_argument("--only", nargs="+", choices=EXPERIMENTS, default=list(EXPERIMENTS))
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    vectors = StaticVectors.load(args.vectors)
    encoder = StaticEncoder(vectors, "word2vec-lab")
    log(f"vectors {args.vectors}: {len(vectors)} words x {vectors.dim}; card {vectors.card.get('training_seconds')} s")
    results = []
    for name in args.only:
        log(f"{name}:")
        results.append(run(name, encoder, args.data_dir, args.cache_dir, log))
        shown = {**results[-1], "layer": {k: v for k, v in results[-1]["layer"].items() if k != "confusion"}}
        log(json.dumps(shown))
    print("| experiment | word2vec (target word) | bag of context | control (selectivity) | MDL kbits | baseline |")
    print("|---|---|---|---|---|---|")
    for r in results:
        layer = r["layer"]
        ctl = layer.get("control_score")
        sel = f"{ctl:.3f} ({layer['score'] - ctl:.3f})" if ctl is not None else ""
        mdl = f"{layer['mdl_bits'] / 1000:.0f}" if layer.get("mdl_bits") is not None else ""
        ctx = f"{layer['context_score']:.3f}" if layer.get("context_score") is not None else ""
        base = f"{r['majority']:.3f}" if r["majority"] is not None else ""
        print(f"| {r['experiment']} | {layer['score']:.3f} | {ctx} | {sel} | {mdl} | {base} |")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"vectors": args.vectors, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
