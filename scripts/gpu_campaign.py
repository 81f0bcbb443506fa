"""One GPU session of the sense campaign (issue 26), prepared to run once within a short lease.

1. **CUDA smoke test** (about a minute): a tiny model on a tiny corpus trains on the GPU, its
   learning curve is evaluated, and a run interrupted halfway and resumed is compared with the
   same run uninterrupted (the trainer's CUDA path had never run).
2. **Pilots from the shipped model**, in parallel on the one GPU, on the clean corpus, same seed,
   same data, ``--pilot-steps`` steps each (batch 128 x 20, as on the CPU): constant lr, a linear
   cooldown to 0 over the pilot, dropout 0, and dropout 0 with the cooldown; heldout perplexity
   and the quick WSD/UPOS probes at the start, halfway and at the end.
3. **The 256-d projection shape** (``cpu-base``) from scratch on the same corpus, beside the
   pilots, until the deadline; interrupted cleanly (a checkpoint), then exported as a warm-start
   state with its vocabulary.

Everything that should come back goes to ``--out`` (the device's ``$OUT``, which returns at most 8
files): ``summary.json``, ``runs.tgz`` (every run's log, curves and metrics) and the 256-d state as
``base-state.tar.part-*`` (15 MiB pieces; ``cat base-state.tar.part-* | tar -x`` joins them).

    python3 scripts/gpu_campaign.py --corpus /tmp/clean --data-dir /tmp/data --out $OUT --seconds 470
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

WIDE = dict(
    model="cpu-small-wide",
    vocab_size=40000,
    batch_size=128,
    unroll_steps=20,
    n_negative_samples=2048,
    optimizer="adam",
    lr=0.002,
    dropout=0.1,
    clip_norm=10.0,
    epochs=3.0,
    seed=0,
    threads=2,
    log_every=50,
    checkpoint_every_steps=100000,
    checkpoint_every_minutes=1000.0,
    snapshot_fractions=[],
    eval_heldout_tokens=20480,
    warmup_steps=100,
)
TINY = {
    "lstm": {
        "dim": 64,
        "projection_dim": 32,
        "n_layers": 2,
        "cell_clip": 3,
        "proj_clip": 3,
        "use_skip_connections": True,
    },
    "char_cnn": {
        "embedding": {"dim": 8},
        "filters": [[1, 16], [2, 16], [3, 32]],
        "n_highway": 1,
        "n_characters": 262,
        "max_characters_per_token": 50,
        "activation": "relu",
    },
}


def one_run(spec: dict) -> None:
    """Child process: train one config (``spec``: config, corpus, out, data_dir, resume, stop_after)."""
    from probing_lab.probing.curves import QuickEval
    from probing_lab.training.config import TrainConfig
    from probing_lab.training.trainer import train

    config = TrainConfig.from_dict(spec["config"], spec["out"])
    evaluate = QuickEval.load(spec["data_dir"]) if config.eval_every_steps and spec.get("quick_eval", True) else None
    summary = train(
        config,
        spec["corpus"],
        spec["out"],
        resume=spec.get("resume", False),
        progress=False,
        stop_after=spec.get("stop_after"),
        evaluate=evaluate,
    )
    Path(spec["out"], "summary.json").write_text(json.dumps(summary) + "\n")


def launch(spec: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, __file__, "--one", json.dumps(spec)],
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def last_metrics(run: Path) -> dict:
    path = run / "metrics.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    return json.loads(lines[-1]) if lines else {}


def smoke_test(corpus: Path, data_dir: Path, work: Path, quick_eval: bool) -> dict:
    import torch

    from probing_lab.corpus.build import build_corpus
    from probing_lab.training.checkpoint import load_lm

    lines = (corpus / "heldout.txt").read_text(encoding="utf-8").splitlines()[:6000]
    (work / "tiny.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    build_corpus(work / "tiny-corpus", [work / "tiny.txt"], progress=None, n_shards=1)
    config = dict(WIDE, model=TINY, vocab_size=5000, batch_size=32, max_steps=40, eval_every_steps=20, warmup_steps=0)
    base = {"corpus": str(work / "tiny-corpus"), "data_dir": str(data_dir), "quick_eval": quick_eval}
    t0 = time.time()
    results = {}
    for name, extra in (("whole", {}), ("halves", {"stop_after": 20})):
        spec = {**base, "config": config, "out": str(work / f"smoke-{name}"), **extra}
        launch(spec, work / f"smoke-{name}.log").wait()
    spec = {**base, "config": config, "out": str(work / "smoke-halves"), "resume": True}
    code = launch(spec, work / "smoke-resume.log").wait()
    whole, halves = load_lm(work / "smoke-whole")[0], load_lm(work / "smoke-halves")[0]
    diff = max((a - b).abs().max().item() for a, b in zip(whole.state_dict().values(), halves.state_dict().values()))
    metrics = [json.loads(x) for x in (work / "smoke-whole" / "metrics.jsonl").read_text().splitlines()]
    curves = [json.loads(x) for x in (work / "smoke-whole" / "curves.jsonl").read_text().splitlines()]
    results = {
        "cuda": torch.cuda.is_available(),
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "torch": torch.__version__,
        "resume_exit_code": code,
        "loss_first_last": [metrics[0]["loss"], metrics[-1]["loss"]],
        "tokens_per_s_last": metrics[-1]["tokens_per_s"],
        "heldout_ppl_per_eval": [c["heldout"]["perplexity"] for c in curves],
        "quick_wsd_last": curves[-1].get("wsd"),
        "resume_vs_whole_max_abs_diff": diff,
        "seconds": round(time.time() - t0, 1),
    }
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--corpus", type=Path)
    p.add_argument("--data-dir", type=Path)
    p.add_argument("--init-from", default="data/models/elmo-lab")
    p.add_argument("--out", type=Path)
    p.add_argument("--work", type=Path, default=Path("/tmp/campaign"))
    p.add_argument("--seconds", type=float, default=470, help="wall-clock budget of the whole script")
    p.add_argument("--pilot-steps", type=int, default=1000)
    p.add_argument("--skip-smoke", action="store_true")
    p.add_argument("--no-quick-eval", action="store_true", help="heldout perplexity only (a dry run on a CPU)")
    args = p.parse_args()
    if args.one:
        return one_run(json.loads(args.one))

    start = time.time()
    deadline = start + args.seconds
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    summary: dict = {}

    def save() -> None:
        (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")

    if not args.skip_smoke:
        try:
            summary["smoke"] = smoke_test(args.corpus, args.data_dir, args.work, not args.no_quick_eval)
        except Exception as e:  # the rest still runs; the log says what broke
            summary["smoke"] = {"error": f"{type(e).__name__}: {e}"}
        print("smoke:", json.dumps(summary["smoke"]), flush=True)
        save()

    n = args.pilot_steps
    pilot_base = dict(WIDE, init_from=str(Path(args.init_from).resolve()), max_steps=n, eval_every_steps=n // 2)
    cooldown = dict(decay="linear", decay_start_step=0, decay_steps=n)
    pilots = {
        "constant": pilot_base,
        "cooldown": dict(pilot_base, **cooldown),
        "dropout0": dict(pilot_base, dropout=0.0),
        "dropout0-cooldown": dict(pilot_base, dropout=0.0, **cooldown),
    }
    base = dict(WIDE, model="cpu-base", batch_size=256, n_negative_samples=0, warmup_steps=200, eval_every_steps=1000)
    runs = {**{f"pilot-{k}": v for k, v in pilots.items()}, "base": base}
    procs = {}
    for name, config in runs.items():
        spec = {
            "config": config,
            "corpus": str(args.corpus),
            "out": str(args.work / name),
            "data_dir": str(args.data_dir),
            "quick_eval": not args.no_quick_eval,
        }
        procs[name] = launch(spec, args.work / f"{name}.log")
    stop_at = deadline - 110  # time left to finish an evaluation under way, export and pack the 256-d state
    while any(p.poll() is None for p in procs.values()) and time.time() < stop_at:
        time.sleep(15)
        status = {
            k: (last_metrics(args.work / k).get("step"), round(last_metrics(args.work / k).get("tokens_per_s", 0)))
            for k in procs
        }
        print(f"{time.time() - start:5.0f}s", json.dumps(status), flush=True)
    for p_ in procs.values():
        if p_.poll() is None:
            p_.send_signal(signal.SIGINT)  # the trainer finishes its step and saves a checkpoint
    for name, p_ in procs.items():
        try:
            p_.wait(timeout=max(30, deadline - 30 - time.time()))  # an evaluation under way finishes first
        except subprocess.TimeoutExpired:
            p_.kill()
            p_.wait()
        run = args.work / name
        curves = run / "curves.jsonl"
        summary[name] = {
            "exit_code": p_.returncode,
            "last": last_metrics(run),
            "curves": [json.loads(x) for x in curves.read_text().splitlines()] if curves.is_file() else [],
        }
    save()

    try:
        from probing_lab.training.checkpoint import export_warm_start

        state = export_warm_start(args.work / "base", args.work / "base-state", args.corpus / "vocab.txt")
        with tarfile.open(args.work / "base-state.tar", "w") as tar:
            tar.add(state, arcname="base-state")
        data = (args.work / "base-state.tar").read_bytes()
        piece = 15 * 2**20
        for i in range(0, len(data), piece):
            (args.out / f"base-state.tar.part-{i // piece}").write_bytes(data[i : i + piece])
        summary["base_state_bytes"] = len(data)
    except Exception as e:
        summary["base_state_error"] = f"{type(e).__name__}: {e}"
    # the device returns at most 8 files: the logs, curves and metrics travel as one archive
    with tarfile.open(args.out / "runs.tgz", "w:gz") as tar:
        for path in sorted(args.work.glob("*.log")) + sorted(args.work.glob("*/*.jsonl")):
            tar.add(path, arcname=str(path.relative_to(args.work)))
    summary["seconds"] = round(time.time() - start, 1)
    save()
    print("done in", summary["seconds"], "s", flush=True)


if __name__ == "__main__":
    main()
