"""Train the ELMo biLM as bilm-tf did, on one CPU, one GPU or many processes (torchrun + DDP).

``train(config, corpus_dir, run_dir)``: windows with LSTM state carried across them, dropout,
global grad-norm clipping, Adagrad (or Adam), one softmax shared by both directions (sampled or
full), loss = mean of the forward and backward losses. The run directory holds::

    config.json        the training config (copied)
    metrics.jsonl      one JSON object per logged step
    checkpoints/       step-NNNNNNNN/ (lm + optimizer + per-rank state) and ``latest``
    snapshots/         early snapshots kept for good (e.g. at 5% of training)

Checkpoints are written to a temporary folder and renamed into place, and ``latest`` is
replaced atomically, so a kill at any moment leaves the last good checkpoint readable.
Ctrl-C (or SIGTERM) saves one before stopping; ``resume=True`` continues exactly where it
stopped: same windows, same LSTM state, same random numbers, same loss curve.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..elmo import ElmoBiLM, ElmoOptions, get_preset
from ..elmo.modules import LstmState
from ..fileio import atomic_path
from .corpus import CorpusError
from .data import SentenceArray, TokenTable, WindowStream, read_sentences
from .softmax import SoftmaxHead
from .vocab import Vocabulary


class TrainingError(ValueError):
    """A config, corpus or run directory the trainer cannot use."""


@dataclass(frozen=True)
class TrainConfig:
    """Every setting of a run (JSON). ``model`` is a preset name or an options.json dict."""

    model: Any = "cpu-base"
    vocab_size: Optional[int] = None  # first N lines of the corpus vocab.txt; None = all
    batch_size: int = 128  # rows per process
    unroll_steps: int = 20
    n_negative_samples: int = 8192  # 0 = full softmax
    optimizer: str = "adagrad"  # or "adam"
    lr: float = 0.2
    adagrad_initial_accumulator: float = 1.0
    dropout: float = 0.1
    clip_norm: float = 10.0
    epochs: float = 1.0
    max_steps: Optional[int] = None
    seed: int = 0
    threads: Optional[int] = None
    log_every: int = 20
    checkpoint_every_steps: int = 500
    checkpoint_every_minutes: float = 10.0
    keep_checkpoints: int = 2
    snapshot_fractions: tuple = (0.05,)
    # Learning curves: every this many steps (and at step 0) the run's ``evaluate`` callback (the
    # CLI passes the quick sense and POS probes of probing_lab.probing.curves) and a heldout
    # perplexity on ``eval_heldout_tokens`` tokens are written to curves.jsonl. 0 = never.
    eval_every_steps: int = 0
    eval_heldout_tokens: int = 20480
    # Warm start: encoder weights from a checkpoint directory (e.g. data/models/elmo-lab); the
    # softmax starts fresh and, for the first ``freeze_encoder_steps`` steps, learns alone so that
    # its random gradients do not disturb the trained encoder.
    init_from: Optional[str] = None
    freeze_encoder_steps: int = 0

    # Settings that change neither the weights nor the data order: a resumed run may differ in these
    # (the length of the run too: no schedule depends on it, so a run can be extended).
    BOOKKEEPING = ("epochs", "max_steps", "snapshot_fractions", "threads", "log_every", "checkpoint_every_steps", "checkpoint_every_minutes", "keep_checkpoints",
                   "eval_every_steps", "eval_heldout_tokens")

    def same_math(self, other: "TrainConfig") -> bool:
        return dataclasses.replace(self, **{k: getattr(other, k) for k in self.BOOKKEEPING}) == other

    @classmethod
    def from_dict(cls, data: dict, where: str = "config") -> "TrainConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise TrainingError(f"{where}: unknown key(s) {unknown}; known keys: {sorted(names)}")
        data = dict(data)
        if "snapshot_fractions" in data:
            data["snapshot_fractions"] = tuple(data["snapshot_fractions"])
        config = cls(**data)
        config.check(where)
        return config

    @classmethod
    def load(cls, path: str | Path) -> "TrainConfig":
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise TrainingError(f"{path}: no such config file") from None
        except json.JSONDecodeError as e:
            raise TrainingError(f"{path}: not valid JSON ({e})") from None
        return cls.from_dict(data, str(path))

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["snapshot_fractions"] = list(self.snapshot_fractions)
        return d

    def check(self, where: str) -> None:
        problems = []
        for name in ("batch_size", "unroll_steps", "log_every", "checkpoint_every_steps", "keep_checkpoints"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                problems.append(f"{name} must be a positive integer")
        for name in ("eval_every_steps", "eval_heldout_tokens"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                problems.append(f"{name} must be an integer >= 0")
        if self.optimizer not in ("adagrad", "adam"):
            problems.append(f"optimizer must be 'adagrad' or 'adam', got {self.optimizer!r}")
        if not 0.0 <= self.dropout < 1.0:
            problems.append("dropout must be in [0, 1)")
        if self.n_negative_samples < 0:
            problems.append("n_negative_samples must be >= 0 (0 = full softmax)")
        if not isinstance(self.freeze_encoder_steps, int) or self.freeze_encoder_steps < 0:
            problems.append("freeze_encoder_steps must be an integer >= 0")
        if self.freeze_encoder_steps and not self.init_from:
            problems.append("freeze_encoder_steps needs init_from (a trained encoder to keep)")
        if self.epochs <= 0 and not self.max_steps:
            problems.append("epochs must be > 0 (or give max_steps)")
        if problems:
            raise TrainingError(f"{where}: " + "; ".join(problems))

    def options(self) -> ElmoOptions:
        if isinstance(self.model, str):
            return get_preset(self.model)
        return ElmoOptions.from_dict(self.model)


class BiLanguageModel(nn.Module):
    """The biLM plus the softmax both directions share."""

    def __init__(self, options: ElmoOptions, vocab_size: int, n_negative: int = 0, dropout: float = 0.0):
        super().__init__()
        self.bilm = ElmoBiLM(options)
        self.softmax = SoftmaxHead(vocab_size, options.projection_dim, n_negative)
        self.dropout = dropout

    def forward(
        self, char_ids: torch.Tensor, positions: torch.Tensor, targets: torch.Tensor, state: LstmState,
        generator: Optional[torch.Generator] = None,
    ) -> tuple[torch.Tensor, torch.Tensor, LstmState]:
        """``char_ids (U, 50)``: the distinct tokens of the window; ``positions (2, batch, T)``:
        which of them stands at each position (index 0 forward stream, 1 backward);
        ``targets (2, batch, T)`` softmax ids. The char CNN runs once per distinct token (both
        streams hold the same words). Returns the mean forward loss, the mean backward loss
        and the LSTM state after the window."""
        tokens = self.bilm.token_encoder(char_ids.unsqueeze(0))[0][positions]  # (2, batch, T, proj)
        top, state = self.bilm.lstm.forward_streams(tokens, state, self.dropout)
        if self.dropout:
            top = F.dropout(top, self.dropout, self.training)
        # Both directions in one softmax call (one set of sampled negatives, one gather).
        losses = self.softmax.loss(top.reshape(-1, top.shape[-1]), targets.reshape(-1), generator, reduction="none")
        loss_f, loss_b = losses.view(2, -1).mean(dim=1)
        return loss_f, loss_b, state


# --- corpus ----------------------------------------------------------------------------------


@dataclass
class Corpus:
    vocab: Vocabulary
    table: TokenTable
    sentences: SentenceArray
    char_table: torch.Tensor = field(init=False)
    vocab_ids: torch.Tensor = field(init=False)

    def __post_init__(self):
        self.char_table = self.table.char_table()
        self.vocab_ids = self.table.vocab_ids()

    def tensors(self, types: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Window type ids -> (distinct char ids (U, 50), positions into them, softmax targets)."""
        distinct, positions = torch.unique(types, return_inverse=True)
        return self.char_table[distinct].long(), positions, self.vocab_ids[targets]


def train_files(corpus_dir: Path) -> list[Path]:
    files = sorted(p for p in (corpus_dir / "train").glob("*") if p.is_file() and not p.name.startswith("."))
    if not files:
        raise CorpusError(
            f"{corpus_dir}: no files in train/; build a corpus with `probing-lab corpus build --out {corpus_dir} SOURCES...`"
        )
    return files


def load_corpus(corpus_dir: str | Path, vocab_size: Optional[int], files: Optional[list[Path]] = None) -> Corpus:
    corpus_dir = Path(corpus_dir)
    if not corpus_dir.is_dir():
        raise CorpusError(f"{corpus_dir}: no such corpus folder; `probing-lab corpus build --out {corpus_dir} ...` makes one")
    vocab = Vocabulary.load(corpus_dir / "vocab.txt", max_size=vocab_size)
    table = TokenTable(vocab)
    sentences = read_sentences(files if files is not None else train_files(corpus_dir), table)
    if len(sentences) == 0:
        raise CorpusError(f"{corpus_dir}: the training files hold no sentences")
    return Corpus(vocab, table, sentences)


# --- checkpoints ----------------------------------------------------------------------------


def _optimizer_tensors(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], list]:
    sd = optimizer.state_dict()
    tensors = {}
    for pid, st in sd["state"].items():
        for key, value in st.items():
            tensors[f"{pid}.{key}"] = value if torch.is_tensor(value) else torch.tensor(value)
    return tensors, sd["param_groups"]


def _load_optimizer(optimizer: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], groups: list) -> None:
    state: dict[int, dict] = {}
    for name, value in tensors.items():
        pid, key = name.split(".", 1)
        state.setdefault(int(pid), {})[key] = value
    optimizer.load_state_dict({"state": state, "param_groups": groups})


def _step_dir_name(step: int) -> str:
    return f"step-{step:08d}"


def latest_checkpoint(run_dir: Path) -> Optional[Path]:
    pointer = run_dir / "checkpoints" / "latest"
    if not pointer.is_file():
        return None
    path = run_dir / "checkpoints" / pointer.read_text().strip()
    if not (path / "trainer.json").is_file():
        raise TrainingError(f"{pointer} points to {path.name}, which is incomplete; the run directory was damaged")
    return path


def save_lm(directory: Path, model: BiLanguageModel, config: TrainConfig, extra: Optional[dict] = None) -> None:
    from safetensors.torch import save_file

    tensors = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    save_file(tensors, str(directory / "lm.safetensors"))
    model.bilm.options.save(directory / "options.json")
    info = {"config": config.to_dict(), "vocab_size": model.softmax.weight.shape[0], **(extra or {})}
    (directory / "info.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")


def load_lm(directory: str | Path) -> tuple[BiLanguageModel, dict]:
    """A training checkpoint or snapshot -> (model with its softmax, info)."""
    from safetensors.torch import load_file

    directory = Path(directory)
    if (directory / "checkpoints").is_dir():  # a run directory: its latest checkpoint
        latest = latest_checkpoint(directory)
        if latest is None:
            raise TrainingError(f"{directory}: the run has no checkpoint yet")
        directory = latest
    for name in ("lm.safetensors", "options.json", "info.json"):
        if not (directory / name).is_file():
            raise TrainingError(f"{directory}: no {name}; give a run directory, a checkpoint or a snapshot of `probing-lab train`")
    info = json.loads((directory / "info.json").read_text(encoding="utf-8"))
    model = BiLanguageModel(ElmoOptions.load(directory / "options.json"), info["vocab_size"])
    model.load_state_dict(load_file(str(directory / "lm.safetensors")))
    return model, info


# --- the loop ---------------------------------------------------------------------------------


class _Distributed:
    def __init__(self):
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.enabled = self.world > 1
        local = int(os.environ.get("LOCAL_RANK", "0"))
        self.device = torch.device(f"cuda:{local}") if torch.cuda.is_available() else torch.device("cpu")
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        if self.enabled and not torch.distributed.is_initialized():
            backend = "nccl" if torch.cuda.is_available() else "gloo"
            torch.distributed.init_process_group(backend)

    def gather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        if not self.enabled:
            return [tensor]
        out = [torch.empty_like(tensor) for _ in range(self.world)]
        torch.distributed.all_gather(out, tensor.contiguous())
        return out

    def min_int(self, value: int) -> int:
        if not self.enabled:
            return value
        t = torch.tensor([value], dtype=torch.long, device=self.device)
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MIN)
        return int(t.item())

    def any(self, flag: bool) -> bool:
        """True on every rank if it is true on one (keeps ranks in step on stop/save decisions)."""
        if not self.enabled:
            return flag
        t = torch.tensor([int(flag)], dtype=torch.long, device=self.device)
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
        return bool(t.item())

    def barrier(self) -> None:
        if self.enabled:
            torch.distributed.barrier()


def _warm_start(lm: BiLanguageModel, source: str) -> None:
    """Copy a trained encoder (a model directory of ``export`` or a ``train`` checkpoint) into ``lm``."""
    from ..elmo.weights import load_checkpoint

    path = Path(source)
    if (path / "lm.safetensors").is_file() or (path / "checkpoints").is_dir():
        encoder = load_lm(path)[0].bilm
    else:
        encoder = load_checkpoint(path)
    if encoder.options != lm.bilm.options:
        raise TrainingError(f"init_from {source}: its options differ from the config's model; use the same preset or options")
    lm.bilm.load_state_dict({k: v.float() for k, v in encoder.state_dict().items()})


def _rng_tensor(generator: torch.Generator) -> torch.Tensor:
    return torch.cat([torch.get_rng_state(), generator.get_state()])


def _set_rng(packed: torch.Tensor, generator: torch.Generator) -> None:
    n = len(torch.get_rng_state())
    torch.set_rng_state(packed[:n].clone())
    generator.set_state(packed[n:].clone())


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
    from safetensors.torch import load_file, save_file

    dist = _Distributed()
    run_dir, corpus_dir = Path(run_dir), Path(corpus_dir)
    if config.threads:
        torch.set_num_threads(config.threads)
    latest = latest_checkpoint(run_dir) if run_dir.exists() else None
    if latest is not None and not resume:
        raise TrainingError(f"{run_dir} already holds a run (last checkpoint {latest.name}); pass --resume to continue it or choose another --out")
    if resume and latest is not None:
        saved = TrainConfig.from_dict(json.loads((run_dir / "config.json").read_text())["training"], str(run_dir / "config.json"))
        if not saved.same_math(config):
            diff = sorted(k for k, v in saved.to_dict().items() if config.to_dict()[k] != v and k not in TrainConfig.BOOKKEEPING)
            raise TrainingError(f"{run_dir}/config.json differs from the config given in {diff}; resume with the run's own config")

    files = train_files(corpus_dir)
    if len(files) < dist.world:
        raise CorpusError(f"{corpus_dir}: {len(files)} train shard(s) for {dist.world} processes; rebuild with --shards {dist.world} or more")
    corpus = load_corpus(corpus_dir, config.vocab_size, files[dist.rank :: dist.world])
    stream = WindowStream(corpus.sentences, config.batch_size, config.unroll_steps, seed=config.seed * 1000 + dist.rank)
    windows_per_epoch = dist.min_int(stream.windows_per_epoch)
    total_steps = config.max_steps or max(1, math.ceil(config.epochs * windows_per_epoch))

    torch.manual_seed(config.seed)
    lm = BiLanguageModel(config.options(), len(corpus.vocab), config.n_negative_samples, config.dropout)
    if config.init_from and not (resume and latest is not None):
        _warm_start(lm, config.init_from)
    # fused: one kernel over all parameters, 5-7x faster than the per-tensor loop on CPU
    if config.optimizer == "adagrad":
        optimizer = torch.optim.Adagrad(lm.parameters(), lr=config.lr, initial_accumulator_value=config.adagrad_initial_accumulator, fused=True)
    else:
        optimizer = torch.optim.Adam(lm.parameters(), lr=config.lr, fused=True)
    lm.to(dist.device)
    model: nn.Module = lm
    if dist.enabled:
        model = nn.parallel.DistributedDataParallel(lm, device_ids=[dist.device] if dist.device.type == "cuda" else None)
    torch.manual_seed(config.seed * 1000 + dist.rank)  # dropout differs per rank, weights do not
    generator = torch.Generator().manual_seed(config.seed * 1000 + dist.rank + 1)
    state = lm.bilm.lstm.zero_state(config.batch_size, dist.device)
    step, tokens_seen, wall = 0, 0, 0.0

    if resume and latest is not None:
        tensors = load_file(str(latest / "lm.safetensors"))
        lm.load_state_dict({k: v.float() for k, v in tensors.items()})  # a warm-start state is float16
        meta = json.loads((latest / "trainer.json").read_text())
        if (latest / "optimizer.safetensors").is_file():
            _load_optimizer(optimizer, load_file(str(latest / "optimizer.safetensors")), meta["param_groups"])
        elif dist.rank == 0:
            print(f"{latest}: no optimizer state (a warm-start state): the optimizer starts afresh at step {meta['step']}",
                  file=sys.stderr)
        per_rank = load_file(str(latest / "state.safetensors"))
        state = (per_rank[f"rank{dist.rank}.h"].to(dist.device), per_rank[f"rank{dist.rank}.c"].to(dist.device))
        _set_rng(per_rank[f"rank{dist.rank}.rng"], generator)
        step, tokens_seen, wall = meta["step"], meta["tokens_seen"], meta["wall_time_s"]
        for name in ("metrics.jsonl", "curves.jsonl"):  # steps logged after the checkpoint will be logged again
            _truncate_jsonl(run_dir / name, step)
        if meta["windows_per_epoch"] != windows_per_epoch:
            raise TrainingError(f"{latest}: the corpus changed since this run started ({meta['windows_per_epoch']} windows per epoch then, {windows_per_epoch} now)")
    elif dist.rank == 0:
        run_dir.mkdir(parents=True, exist_ok=True)
        record = {"training": config.to_dict(), "corpus": str(corpus_dir), "world_size": dist.world,
                  "windows_per_epoch": windows_per_epoch, "total_steps": total_steps}
        (run_dir / "config.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")

    tokens_per_step = config.batch_size * config.unroll_steps * dist.world
    snapshot_steps = {max(1, round(f * total_steps)) for f in config.snapshot_fractions}

    def save(kind: str = "checkpoint") -> None:
        h, c = state
        gathered = {}
        rng = _rng_tensor(generator).to(dist.device)
        for r, (hr, cr, gr) in enumerate(zip(dist.gather(h), dist.gather(c), dist.gather(rng))):
            gathered.update({f"rank{r}.h": hr.cpu(), f"rank{r}.c": cr.cpu(), f"rank{r}.rng": gr.cpu()})
        if dist.rank == 0:
            extra = {"step": step, "tokens_seen": tokens_seen, "wall_time_s": wall, "epoch": step / windows_per_epoch,
                     "windows_per_epoch": windows_per_epoch, "total_steps": total_steps, "world_size": dist.world}
            if kind == "snapshot":
                final = run_dir / "snapshots" / _step_dir_name(step)
            else:
                final = run_dir / "checkpoints" / _step_dir_name(step)
            tmp = final.parent / f".{final.name}.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            save_lm(tmp, lm, config, extra)
            if kind == "checkpoint":
                tensors, groups = _optimizer_tensors(optimizer)
                save_file(tensors, str(tmp / "optimizer.safetensors"))
                save_file(gathered, str(tmp / "state.safetensors"))
                (tmp / "trainer.json").write_text(json.dumps({**extra, "param_groups": groups}) + "\n")
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
            if kind == "checkpoint":
                with atomic_path(run_dir / "checkpoints" / "latest") as p:
                    p.write_text(final.name + "\n")
                old = sorted(d for d in (run_dir / "checkpoints").glob("step-*") if d.is_dir())
                for d in old[: -config.keep_checkpoints]:
                    shutil.rmtree(d, ignore_errors=True)
        dist.barrier()

    bar = None
    if progress and dist.rank == 0:
        from tqdm import tqdm

        bar = tqdm(total=total_steps, initial=step, unit="step", dynamic_ncols=True, file=sys.stderr)
    # Ctrl-C and SIGTERM finish the current step, then save: a checkpoint is never mid-update.
    stop_requested: list[int] = []
    previous_handlers = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous_handlers[sig] = signal.signal(sig, lambda signum, frame: stop_requested.append(signum))
        except ValueError:  # not in the main thread: leave signals alone
            pass
    metrics_path = run_dir / "metrics.jsonl"

    def evaluate_curves() -> None:
        if dist.rank == 0:
            t0 = time.perf_counter()
            lm.eval()
            record = {"step": step, "epoch": round(step / windows_per_epoch, 4), "tokens_seen": tokens_seen,
                      "heldout": evaluate_lm(lm, corpus_dir, config.vocab_size, max_tokens=config.eval_heldout_tokens,
                                             progress=False, device=dist.device)}
            if evaluate:
                with torch.random.fork_rng(devices=[]):  # the run's dropout masks stay as without evaluation
                    record.update(evaluate(lm.bilm))
            lm.train()
            record["eval_seconds"] = round(time.perf_counter() - t0, 1)
            with open(run_dir / "curves.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
            if bar is not None:
                wsd = record.get("wsd", {})
                bar.write(f"step {step}: heldout ppl {record['heldout']['perplexity']:.1f}"
                          + (f", quick WSD {wsd}" if wsd else ""))
        dist.barrier()

    if config.eval_every_steps and step == 0:
        evaluate_curves()
    last_save = time.monotonic()
    start_step = step
    interrupted = False
    model.train()
    try:
        while step < total_steps:
            if dist.any(bool(stop_requested)) or (stop_after is not None and step - start_step >= stop_after):
                interrupted = True
                if bar is not None and stop_requested:
                    bar.write(f"interrupted at step {step}: saving a checkpoint; continue with --resume")
                break
            t0 = time.perf_counter()
            epoch, k = divmod(step, windows_per_epoch)
            if k == 0:
                state = lm.bilm.lstm.zero_state(config.batch_size, dist.device)
            types, targets = stream.window(epoch, k)
            char_ids, positions, target_ids = (t.to(dist.device) for t in corpus.tensors(types, targets))
            loss_f, loss_b, new_state = model(char_ids, positions, target_ids, state, generator)
            loss = 0.5 * (loss_f + loss_b)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if step < config.freeze_encoder_steps:
                for p in lm.bilm.parameters():
                    p.grad = None  # Adagrad and Adam skip parameters without a gradient
            grad_norm = nn.utils.clip_grad_norm_(lm.parameters(), config.clip_norm)
            optimizer.step()
            state = (new_state[0].detach(), new_state[1].detach())
            step += 1
            tokens_seen += tokens_per_step
            dt = time.perf_counter() - t0
            wall += dt
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{loss.item():.3f}", tok_s=f"{tokens_per_step / dt:,.0f}", epoch=f"{step / windows_per_epoch:.2f}")
            if dist.rank == 0 and (step % config.log_every == 0 or step == total_steps or step == 1):
                record = {"step": step, "epoch": round(step / windows_per_epoch, 4), "loss": loss.item(),
                          "loss_forward": loss_f.item(), "loss_backward": loss_b.item(), "grad_norm": float(grad_norm),
                          "tokens_seen": tokens_seen, "tokens_per_s": tokens_per_step / dt, "wall_time_s": round(wall, 2)}
                with open(metrics_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(record) + "\n")
            if step in snapshot_steps:
                save("snapshot")
            if config.eval_every_steps and (step % config.eval_every_steps == 0 or step == total_steps):
                evaluate_curves()
            due = time.monotonic() - last_save > 60 * config.checkpoint_every_minutes
            if step % config.checkpoint_every_steps == 0 or dist.any(due):
                save()
                last_save = time.monotonic()
    finally:
        if bar is not None:
            bar.close()
        for sig, handler in previous_handlers.items():
            signal.signal(sig, handler)
    save()
    return {"step": step, "total_steps": total_steps, "tokens_seen": tokens_seen, "wall_time_s": wall,
            "interrupted": interrupted, "windows_per_epoch": windows_per_epoch, "run_dir": str(run_dir)}


def _truncate_jsonl(path: Path, last_step: int) -> None:
    """Drop the records of steps after ``last_step`` (a resumed run logs them again)."""
    if not path.is_file():
        return
    lines = path.read_text(encoding="utf-8").splitlines()
    keep = [line for line in lines if line.strip() and json.loads(line).get("step", 0) <= last_step]
    if len(keep) != len(lines):
        with atomic_path(path) as tmp:
            tmp.write_text("".join(line + "\n" for line in keep), encoding="utf-8")


# --- evaluation -------------------------------------------------------------------------------


@torch.no_grad()
def evaluate_lm(lm: BiLanguageModel, corpus_dir: str | Path, vocab_size: Optional[int], file: Optional[Path] = None,
                batch_size: int = 32, unroll_steps: int = 20, max_tokens: Optional[int] = None, progress: bool = True,
                device=None) -> dict:
    """Heldout perplexity per direction (full softmax, state carried across windows)."""
    corpus_dir = Path(corpus_dir)
    path = file or corpus_dir / "heldout.txt"
    if not path.is_file():
        raise CorpusError(f"{path}: no heldout file")
    vocab = Vocabulary.load(corpus_dir / "vocab.txt", max_size=vocab_size)
    if len(vocab) != lm.softmax.weight.shape[0]:
        raise TrainingError(f"the model's softmax has {lm.softmax.weight.shape[0]} words, {corpus_dir}/vocab.txt gives {len(vocab)}")
    table = TokenTable(vocab)
    sentences = read_sentences([path], table)
    batch_size = max(1, min(batch_size, len(sentences.flat) // (unroll_steps + 1)))
    stream = WindowStream(sentences, batch_size, unroll_steps, seed=0)
    corpus = Corpus(vocab, table, sentences)
    n_windows = stream.windows_per_epoch
    if max_tokens:
        n_windows = max(1, min(n_windows, max_tokens // (batch_size * unroll_steps)))
    lm.eval()
    state = lm.bilm.lstm.zero_state(batch_size, device)
    nll = torch.zeros(2, dtype=torch.float64)
    count = 0
    iterator = range(n_windows)
    if progress:
        from tqdm import tqdm

        iterator = tqdm(iterator, desc="eval-lm", unit="window", file=sys.stderr)
    for k in iterator:
        types, targets = stream.window(0, k)
        char_ids, positions, target_ids = (t.to(device) for t in corpus.tensors(types, targets))
        batch, T = positions.shape[1:]
        tokens = lm.bilm.token_encoder(char_ids.unsqueeze(0))[0][positions]
        top, state = lm.bilm.lstm.forward_streams(tokens, state)
        for d in range(2):
            nll[d] += lm.softmax.full_loss(top[d].reshape(-1, top.shape[-1]), target_ids[d].reshape(-1), reduction="sum").double().cpu()
        count += batch * T
    ppl = torch.exp(nll / count).tolist()
    return {"perplexity_forward": ppl[0], "perplexity_backward": ppl[1], "perplexity": 0.5 * (ppl[0] + ppl[1]),
            "tokens": count, "file": str(path)}


# --- warm-start states: what survives a session --------------------------------------------------

WARM_START_FILES = ("lm.safetensors", "options.json", "info.json", "state.safetensors", "trainer.json")
RUN_LOGS = ("config.json", "metrics.jsonl", "curves.jsonl")


def export_warm_start(run_dir: str | Path, out: str | Path) -> Path:
    """A run's latest checkpoint, small enough to commit: the biLM *and* its softmax in float16,
    each rank's LSTM state and random generators, the step and data position, and the run's logs;
    not the optimizer's moments (they would double or triple the size). ``train --resume-from``
    continues the run from it: same step, same windows, a fresh optimizer."""
    from safetensors.torch import load_file, save_file

    run_dir, out = Path(run_dir), Path(out)
    latest = latest_checkpoint(run_dir) if (run_dir / "checkpoints").is_dir() else None
    if latest is None:
        raise TrainingError(f"{run_dir}: not a run directory with a checkpoint; give the --out of `probing-lab train`")
    tmp = out.parent / f".{out.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    lm = load_file(str(latest / "lm.safetensors"))
    save_file({k: v.half() if v.is_floating_point() else v for k, v in lm.items()}, str(tmp / "lm.safetensors"))
    for name in WARM_START_FILES[1:]:
        shutil.copy2(latest / name, tmp / name)
    for name in RUN_LOGS:
        if (run_dir / name).is_file():
            shutil.copy2(run_dir / name, tmp / name)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


def restore_warm_start(state_dir: str | Path, run_dir: str | Path) -> Path:
    """Make ``run_dir`` a run whose latest checkpoint is the warm-start state ``state_dir``
    (see :func:`export_warm_start`); ``train(..., resume=True)`` then continues it."""
    state_dir, run_dir = Path(state_dir), Path(run_dir)
    missing = [name for name in WARM_START_FILES + ("config.json",) if not (state_dir / name).is_file()]
    if missing:
        raise TrainingError(f"{state_dir}: not a warm-start state (missing {missing}); make one with `probing-lab export RUN --warm-start`")
    if latest_checkpoint(run_dir) if (run_dir / "checkpoints").is_dir() else None:
        raise TrainingError(f"{run_dir} already holds a run; --resume-from needs a new --out")
    step = json.loads((state_dir / "trainer.json").read_text())["step"]
    target = run_dir / "checkpoints" / _step_dir_name(step)
    target.mkdir(parents=True)
    for name in WARM_START_FILES:
        shutil.copy2(state_dir / name, target / name)
    for name in RUN_LOGS:
        if (state_dir / name).is_file():
            shutil.copy2(state_dir / name, run_dir / name)
    (run_dir / "checkpoints" / "latest").write_text(target.name + "\n")
    return run_dir


# --- export -------------------------------------------------------------------------------------


def export_encoder(source: str | Path, out: str | Path, dtype: torch.dtype = torch.float16, card: Optional[dict] = None) -> Path:
    """A training checkpoint/snapshot (or a run's latest) -> the lab's model directory: the biLM
    without its softmax, ``dtype`` on disk, and a model card with the training facts."""
    from ..elmo import save_checkpoint

    lm, info = load_lm(source)
    facts = {k: info.get(k) for k in ("step", "tokens_seen", "wall_time_s", "epoch", "total_steps", "world_size")}
    full_card = {"training": {**facts, "config": info["config"], "vocab_size": info["vocab_size"]}, "dtype": str(dtype).replace("torch.", "")}
    full_card.update(card or {})
    return save_checkpoint(lm.bilm, out, full_card, dtype=dtype)
