"""Train the ELMo biLM as bilm-tf did, on one CPU, one GPU or many processes (torchrun + DDP).

``train(config, corpus_dir, run_dir)``: windows with LSTM state carried across them, dropout,
global grad-norm clipping, Adagrad (or Adam), one softmax shared by both directions (sampled or
full), loss = mean of the forward and backward losses. What the run directory holds and how a
checkpoint is written is in :mod:`probing_lab.training.checkpoint`. Ctrl-C (or SIGTERM) saves a
checkpoint before stopping; ``resume=True`` continues exactly where it stopped: same windows,
same LSTM state, same random numbers, same loss curve.
"""

from __future__ import annotations

import gc
import json
import math
import signal
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import torch
from torch import nn

from ..fileio import atomic_path
from .checkpoint import Checkpointer, Progress, load_lm, truncate_jsonl
from .config import TrainConfig, TrainingError
from .data import WindowStream, load_corpus, train_files
from .distributed import Distributed
from .errors import CorpusError
from .objective import BiLanguageModel, evaluate_lm
from .resume import check_resume, restore_intact
from .vocab import Vocabulary


def _optimizer(config: TrainConfig, lm: nn.Module) -> torch.optim.Optimizer:
    # fused: one kernel over all parameters, 5-7x faster than the per-tensor loop on CPU
    if config.optimizer == "adagrad":
        return torch.optim.Adagrad(
            lm.parameters(), lr=config.lr, initial_accumulator_value=config.adagrad_initial_accumulator, fused=True
        )
    return torch.optim.Adam(lm.parameters(), lr=config.lr, fused=True)


def _warm_start(lm: BiLanguageModel, source: str, vocab: Vocabulary) -> None:
    """Copy a trained encoder (a model directory of ``export`` or a ``train`` checkpoint) into ``lm``,
    and, where the source has a softmax and its ``vocab.txt``, the softmax rows of the words both
    vocabularies share: a corpus rebuilt with a new vocabulary keeps what the model knows of its
    old words, and only the new words start from random rows."""
    from ..elmo.weights import load_checkpoint

    path = Path(source)
    softmax = None  # (weight (V, proj), bias (V,)) of the source
    if (path / "lm.safetensors").is_file() or (path / "checkpoints").is_dir():
        trained = load_lm(path)[0]
        encoder, softmax = trained.bilm, (trained.softmax.weight, trained.softmax.bias)
    else:
        encoder = load_checkpoint(path)
        if (path / "softmax.safetensors").is_file():
            from safetensors.torch import load_file

            tensors = load_file(str(path / "softmax.safetensors"))
            softmax = (tensors["weight"], tensors["bias"])
    if encoder.options != lm.bilm.options:
        raise TrainingError(
            f"init_from {source}: its options differ from the config's model; use the same preset or options"
        )
    lm.bilm.load_state_dict({k: v.float() for k, v in encoder.state_dict().items()})
    shared = 0
    if softmax is not None and (path / "vocab.txt").is_file():
        words = Vocabulary.load(path / "vocab.txt", max_size=softmax[0].shape[0])
        pairs = [(i, words.index[w]) for i, w in enumerate(vocab.words) if w in words.index]
        if pairs:
            new_rows, old_rows = (torch.tensor(ids) for ids in zip(*pairs))
            with torch.no_grad():
                lm.softmax.weight[new_rows] = softmax[0][old_rows].float()
                lm.softmax.bias[new_rows] = softmax[1][old_rows].float()
        shared = len(pairs)
    print(
        f"init_from {source}: encoder copied; softmax rows of {shared:,} of the {len(vocab):,} words copied, "
        f"{len(vocab) - shared:,} start afresh",
        file=sys.stderr,
    )


def _append_jsonl(path: Path, record: dict) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


@dataclass
class _Session:
    """What one call of :func:`train` works with: the data, the model and its optimizer, the random
    generator of the softmax's samples, the LSTM state carried across windows, where the run stands."""

    config: TrainConfig
    dist: Distributed
    run_dir: Path
    corpus_dir: Path
    corpus: object  # data.Corpus
    stream: WindowStream
    lm: BiLanguageModel
    model: nn.Module  # lm, or its DistributedDataParallel wrapper
    optimizer: torch.optim.Optimizer
    generator: torch.Generator
    checkpointer: Checkpointer
    state: tuple
    run: Progress

    @property
    def tokens_per_step(self) -> int:
        return self.config.batch_size * self.config.unroll_steps * self.dist.world


def _set_up(config: TrainConfig, corpus_dir: Path, run_dir: Path, latest: Optional[Path], dist) -> _Session:
    """The corpus shards of this process, the model (warm-started for a new run), the optimizer;
    the seeds are drawn in a fixed order, so that a run and its resumption agree."""
    files = train_files(corpus_dir)
    if len(files) < dist.world:
        raise CorpusError(
            f"{corpus_dir}: {len(files)} train shard(s) for {dist.world} processes; "
            f"rebuild with --shards {dist.world} or more"
        )
    corpus = load_corpus(corpus_dir, config.vocab_size, files[dist.rank :: dist.world])
    stream = WindowStream(corpus.sentences, config.batch_size, config.unroll_steps, seed=config.seed * 1000 + dist.rank)
    windows_per_epoch = dist.min_int(stream.windows_per_epoch)
    total_steps = config.max_steps or max(1, math.ceil(config.epochs * windows_per_epoch))

    torch.manual_seed(config.seed)
    lm = BiLanguageModel(config.options(), len(corpus.vocab), config.n_negative_samples, config.dropout)
    if config.init_from and latest is None:
        _warm_start(lm, config.init_from, corpus.vocab)
    optimizer = _optimizer(config, lm)
    lm.to(dist.device)
    model: nn.Module = lm
    if dist.enabled:
        model = nn.parallel.DistributedDataParallel(
            lm, device_ids=[dist.device] if dist.device.type == "cuda" else None
        )
    torch.manual_seed(config.seed * 1000 + dist.rank)  # dropout differs per rank, weights do not
    generator = torch.Generator().manual_seed(config.seed * 1000 + dist.rank + 1)
    checkpointer = Checkpointer(run_dir, lm, optimizer, config, dist, generator)
    state = lm.bilm.lstm.zero_state(config.batch_size, dist.device)
    run = Progress(0, 0, 0.0, windows_per_epoch, total_steps, dist.world)
    return _Session(
        config, dist, run_dir, corpus_dir, corpus, stream, lm, model, optimizer, generator, checkpointer, state, run
    )


def _resume_or_record(s: _Session, latest: Optional[Path]) -> None:
    """Resume from ``latest`` (the logs cut back to its step, the config given recorded as the
    run's), or write a new run's ``config.json``."""
    dist, run = s.dist, s.run
    if latest is not None:
        meta, s.state, latest = restore_intact(s.checkpointer, s.run_dir, latest)
        run.step, run.tokens_seen, run.wall_time_s = meta["step"], meta["tokens_seen"], meta["wall_time_s"]
        for name in ("metrics.jsonl", "curves.jsonl"):  # steps logged after the checkpoint will be logged again
            if dist.main:  # the one process that writes them
                truncate_jsonl(s.run_dir / name, run.step)
        if dist.main:  # the config given (a run extended, a schedule changed for the steps to come) is the run's now
            record = json.loads((s.run_dir / "config.json").read_text(encoding="utf-8"))
            record["training"] = s.config.to_dict()
            with atomic_path(s.run_dir / "config.json") as tmp:
                tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        if meta["windows_per_epoch"] != run.windows_per_epoch:
            raise TrainingError(
                f"{latest}: the corpus changed since this run started "
                f"({meta['windows_per_epoch']} windows per epoch then, {run.windows_per_epoch} now)"
            )
    elif dist.main:
        s.run_dir.mkdir(parents=True, exist_ok=True)
        record = {
            "training": s.config.to_dict(),
            "corpus": str(s.corpus_dir),
            "world_size": dist.world,
            "windows_per_epoch": run.windows_per_epoch,
            "total_steps": run.total_steps,
        }
        (s.run_dir / "config.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def _evaluate_curves(s: _Session, evaluate: Optional[Callable[[nn.Module], dict]], bar) -> None:
    """One point of the learning curve (heldout perplexity, and ``evaluate``'s metrics) in curves.jsonl."""
    if s.dist.main:
        t0 = time.perf_counter()
        s.lm.eval()
        heldout = evaluate_lm(
            s.lm,
            s.corpus_dir,
            s.config.vocab_size,
            max_tokens=s.config.eval_heldout_tokens,
            progress=False,
            device=s.dist.device,
        )
        record = {"step": s.run.step, "epoch": round(s.run.epoch, 4), "tokens_seen": s.run.tokens_seen}
        record["heldout"] = heldout
        if evaluate:
            with torch.random.fork_rng(devices=[]):  # the run's dropout masks stay as without evaluation
                record.update(evaluate(s.lm.bilm))
        s.lm.train()
        record["eval_seconds"] = round(time.perf_counter() - t0, 1)
        _append_jsonl(s.run_dir / "curves.jsonl", record)
        if bar is not None:
            wsd = record.get("wsd", {})
            line = f"step {s.run.step}: heldout ppl {heldout['perplexity']:.1f}"
            bar.write(line + (f", quick WSD {wsd}" if wsd else ""))
    s.dist.barrier()


@contextmanager
def _stop_requests():
    """Ctrl-C and SIGTERM are noted in the list this yields (the loop finishes its step, then saves:
    a checkpoint is never mid-update); the previous handlers come back afterwards."""
    requested: list[int] = []
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[sig] = signal.signal(sig, lambda signum, frame: requested.append(signum))
        except ValueError:  # not in the main thread: leave signals alone
            pass
    try:
        yield requested
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _train_step(s: _Session) -> dict:
    """One window of both directions: forward, backward, clipping, the update; the LSTM state moves on."""
    config, run, lm = s.config, s.run, s.lm
    t0 = time.perf_counter()
    epoch, k = divmod(run.step, run.windows_per_epoch)
    if k == 0:
        s.state = lm.bilm.lstm.zero_state(config.batch_size, s.dist.device)
    for group in s.optimizer.param_groups:
        group["lr"] = config.lr_at(run.step)
    types, targets = s.stream.window(epoch, k)
    char_ids, positions, target_ids = (t.to(s.dist.device) for t in s.corpus.tensors(types, targets))
    loss_f, loss_b, new_state = s.model(char_ids, positions, target_ids, s.state, s.generator)
    loss = 0.5 * (loss_f + loss_b)
    s.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if run.step < config.freeze_encoder_steps:
        for p in lm.bilm.parameters():
            p.grad = None  # Adagrad and Adam skip parameters without a gradient
    grad_norm = nn.utils.clip_grad_norm_(lm.parameters(), config.clip_norm)
    if s.dist.any(not (bool(torch.isfinite(loss)) and bool(torch.isfinite(grad_norm)))):
        raise TrainingError(  # before the update: the weights and the last checkpoint stay finite
            f"step {run.step + 1}: the loss is {loss.item():.4g} and the gradient norm {float(grad_norm):.4g}; "
            f"training diverged (lr {config.lr} too high?). Nothing of this step was saved and the last "
            f"checkpoint in {s.run_dir / 'checkpoints'} is intact; train again with a lower lr"
        )
    s.optimizer.step()
    s.state = (new_state[0].detach(), new_state[1].detach())
    dt = time.perf_counter() - t0
    run.step += 1
    run.tokens_seen += s.tokens_per_step
    run.wall_time_s += dt
    return {"loss": loss.item(), "loss_forward": loss_f.item(), "loss_backward": loss_b.item(),
            "grad_norm": float(grad_norm), "seconds": dt}  # fmt: skip


def _log_step(s: _Session, step: dict, bar) -> None:
    """The progress bar, and every ``log_every`` steps a line of metrics.jsonl."""
    run, config = s.run, s.config
    if bar is not None:
        bar.update(1)
        bar.set_postfix(
            loss=f"{step['loss']:.3f}", tok_s=f"{s.tokens_per_step / step['seconds']:,.0f}", epoch=f"{run.epoch:.2f}"
        )
    if s.dist.main and (run.step % config.log_every == 0 or run.step == run.total_steps or run.step == 1):
        _append_jsonl(
            s.run_dir / "metrics.jsonl",
            {
                "step": run.step,
                "epoch": round(run.epoch, 4),
                **{k: step[k] for k in ("loss", "loss_forward", "loss_backward", "grad_norm")},
                "lr": config.lr_at(run.step - 1),
                "tokens_seen": run.tokens_seen,
                "tokens_per_s": s.tokens_per_step / step["seconds"],
                "wall_time_s": round(run.wall_time_s, 2),
            },
        )


def train(
    config: TrainConfig,
    corpus_dir: str | Path,
    run_dir: str | Path,
    resume: bool = False,
    progress: bool = True,
    stop_after: Optional[int] = None,
    evaluate: Optional[Callable[[nn.Module], dict]] = None,
) -> dict:
    """Run (or resume) training; returns a summary. ``stop_after``: stop cleanly after that
    many steps of this call, with a checkpoint (what an interruption does). ``evaluate(bilm)``:
    extra learning-curve metrics at every ``eval_every_steps`` (it must not change the model or
    the random generators)."""
    dist = Distributed()
    summary = _train(config, Path(corpus_dir), Path(run_dir), resume, progress, stop_after, evaluate, dist)
    # the DDP wrapper holds the process group: collect it before tearing the group down
    gc.collect()
    dist.close()
    return summary


def _train(config, corpus_dir, run_dir, resume, progress, stop_after, evaluate, dist: Distributed) -> dict:
    if config.threads:
        torch.set_num_threads(config.threads)
    latest = check_resume(config, run_dir, resume)
    s = _set_up(config, corpus_dir, run_dir, latest, dist)
    _resume_or_record(s, latest)
    run, total_steps = s.run, s.run.total_steps
    snapshot_steps = {max(1, round(f * total_steps)) for f in config.snapshot_fractions}
    bar = None
    if progress and dist.main:
        from tqdm import tqdm

        bar = tqdm(total=total_steps, initial=run.step, unit="step", dynamic_ncols=True, file=sys.stderr)
    start_step, interrupted = run.step, False
    try:
        with _stop_requests() as stop_requested:
            if config.eval_every_steps and run.step == 0:
                _evaluate_curves(s, evaluate, bar)
            last_save = time.monotonic()
            s.model.train()
            while run.step < total_steps:
                if dist.any(bool(stop_requested)) or (stop_after is not None and run.step - start_step >= stop_after):
                    interrupted = True
                    if bar is not None and stop_requested:
                        bar.write(f"interrupted at step {run.step}: saving a checkpoint; continue with --resume")
                    break
                _log_step(s, _train_step(s), bar)
                if run.step in snapshot_steps:
                    s.checkpointer.save(run, s.state, "snapshot")
                if config.eval_every_steps and (run.step % config.eval_every_steps == 0 or run.step == total_steps):
                    _evaluate_curves(s, evaluate, bar)
                due = time.monotonic() - last_save > 60 * config.checkpoint_every_minutes
                if run.step % config.checkpoint_every_steps == 0 or dist.any(due):
                    s.checkpointer.save(run, s.state)
                    last_save = time.monotonic()
    finally:
        if bar is not None:
            bar.close()
    s.checkpointer.save(run, s.state)
    return {
        "step": run.step,
        "total_steps": total_steps,
        "tokens_seen": run.tokens_seen,
        "wall_time_s": run.wall_time_s,
        "interrupted": interrupted,
        "windows_per_epoch": run.windows_per_epoch,
        "run_dir": str(run_dir),
    }
