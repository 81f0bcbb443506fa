"""What a training run saves and restores, in one place.

A run directory holds::

    config.json        the training config (copied) and the run's shape
    metrics.jsonl      one JSON object per logged step
    curves.jsonl       learning curves (``eval_every_steps``)
    checkpoints/       step-NNNNNNNN/ and ``latest`` (the name of the newest complete one)
    snapshots/         kept for good (e.g. at 5% of training): the LM only

A checkpoint folder holds ``lm.safetensors`` (biLM + softmax), ``options.json``, ``info.json``
(config, vocabulary size, progress), ``optimizer.safetensors``, ``state.safetensors`` (each rank's
LSTM state and random generators) and ``trainer.json`` (progress + optimizer groups). It is written
to a temporary folder and renamed into place, and ``latest`` is replaced atomically, so a kill at
any moment leaves the last good checkpoint readable. A *warm-start state* is a checkpoint without
the optimizer moments and with the LM in float16: small enough to commit, so a run can continue
on another machine.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

import torch

from ..elmo import ElmoOptions
from ..elmo.weights import CHECKPOINT_CARD
from ..fileio import atomic_directory, atomic_path, file_sha256
from .config import TrainConfig, TrainingError
from .distributed import Distributed
from .objective import BiLanguageModel
from .vocab import Vocabulary

# a model directory's language-model softmax (read by probing_lab.lm.language_model): weight (V, proj), bias (V,)
SOFTMAX_WEIGHTS = "softmax.safetensors"
SOFTMAX_VOCAB = "vocab.txt"  # its V words


@dataclass
class Progress:
    """Where a run stands."""

    step: int
    tokens_seen: int
    wall_time_s: float
    windows_per_epoch: int
    total_steps: int
    world_size: int

    @property
    def epoch(self) -> float:
        return self.step / self.windows_per_epoch

    def record(self) -> dict:
        return {**asdict(self), "epoch": self.epoch}


class Checkpointer:
    """Saves a run's checkpoints and snapshots, and restores the newest checkpoint."""

    def __init__(
        self,
        run_dir: Path,
        lm: BiLanguageModel,
        optimizer: torch.optim.Optimizer,
        config: TrainConfig,
        dist: Distributed,
        generator: torch.Generator,
    ):
        self.run_dir, self.lm, self.optimizer, self.config = run_dir, lm, optimizer, config
        self.dist, self.generator = dist, generator

    def save(self, progress: Progress, lstm_state, kind: str = "checkpoint") -> None:
        """``kind``: "checkpoint" (everything to continue exactly) or "snapshot" (the LM, kept for good)."""
        from safetensors.torch import save_file

        dist = self.dist
        h, c = lstm_state
        per_rank = {}
        rng = _rng_tensor(self.generator).to(dist.device)
        for r, (hr, cr, gr) in enumerate(zip(dist.gather(h), dist.gather(c), dist.gather(rng))):
            per_rank.update({f"rank{r}.h": hr.cpu(), f"rank{r}.c": cr.cpu(), f"rank{r}.rng": gr.cpu()})
        if dist.main:
            folder = "snapshots" if kind == "snapshot" else "checkpoints"
            final = self.run_dir / folder / _step_dir_name(progress.step)
            tmp = final.parent / f".{final.name}.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            save_lm(tmp, self.lm, self.config, progress.record())
            if kind == "checkpoint":
                tensors, groups = _optimizer_tensors(self.optimizer)
                save_file(tensors, str(tmp / "optimizer.safetensors"))
                save_file(per_rank, str(tmp / "state.safetensors"))
                (tmp / "trainer.json").write_text(json.dumps({**progress.record(), "param_groups": groups}) + "\n")
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
            if kind == "checkpoint":
                with atomic_path(self.run_dir / "checkpoints" / "latest") as p:
                    p.write_text(final.name + "\n")
                old = sorted(d for d in (self.run_dir / "checkpoints").glob("step-*") if d.is_dir())
                for d in old[: -self.config.keep_checkpoints]:
                    shutil.rmtree(d, ignore_errors=True)
        dist.barrier()

    def restore(self, checkpoint: Path) -> tuple[dict, tuple[torch.Tensor, torch.Tensor]]:
        """Load ``checkpoint`` into the LM, the optimizer (when saved) and the generators;
        returns its progress record and this rank's LSTM state."""
        from safetensors.torch import load_file

        dist = self.dist
        tensors = load_file(str(checkpoint / "lm.safetensors"))
        self.lm.load_state_dict({k: v.float() for k, v in tensors.items()})  # a warm-start state is float16
        meta = json.loads((checkpoint / "trainer.json").read_text())
        if (checkpoint / "optimizer.safetensors").is_file():
            _load_optimizer(self.optimizer, load_file(str(checkpoint / "optimizer.safetensors")), meta["param_groups"])
        elif dist.main:
            print(
                f"{checkpoint}: no optimizer state (a warm-start state): the optimizer starts afresh at step "
                f"{meta['step']}",
                file=sys.stderr,
            )
        per_rank = load_file(str(checkpoint / "state.safetensors"))
        _set_rng(per_rank[f"rank{dist.rank}.rng"], self.generator)
        state = (per_rank[f"rank{dist.rank}.h"].to(dist.device), per_rank[f"rank{dist.rank}.c"].to(dist.device))
        return meta, state


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


def _rng_tensor(generator: torch.Generator) -> torch.Tensor:
    return torch.cat([torch.get_rng_state(), generator.get_state()])


def _set_rng(packed: torch.Tensor, generator: torch.Generator) -> None:
    n = len(torch.get_rng_state())
    torch.set_rng_state(packed[:n].clone())
    generator.set_state(packed[n:].clone())


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
            raise TrainingError(
                f"{directory}: no {name}; give a run directory, a checkpoint or a snapshot of `probing-lab train`"
            )
    info = json.loads((directory / "info.json").read_text(encoding="utf-8"))
    model = BiLanguageModel(ElmoOptions.load(directory / "options.json"), info["vocab_size"])
    model.load_state_dict(load_file(str(directory / "lm.safetensors")))
    return model, info


def save_softmax(
    directory: str | Path, weight: torch.Tensor, bias: torch.Tensor, vocab: Vocabulary, dtype=torch.float16
) -> None:
    from safetensors.torch import save_file

    directory = Path(directory)
    if weight.shape[0] != len(vocab) or bias.shape != (len(vocab),):
        raise ValueError(f"softmax of {weight.shape[0]} rows for a vocabulary of {len(vocab)} words")
    tensors = {"weight": weight.detach().to(dtype).contiguous().cpu(), "bias": bias.detach().to(dtype).contiguous()}
    with atomic_path(directory / SOFTMAX_WEIGHTS) as tmp:
        save_file(tensors, str(tmp), metadata={"format": "probing-lab-softmax"})
    vocab.save(directory / SOFTMAX_VOCAB)
    card_path = directory / CHECKPOINT_CARD
    if card_path.is_file():  # the card records the softmax's hash too, checked on load
        card = json.loads(card_path.read_text(encoding="utf-8"))
        card.update(softmax=True, softmax_sha256=file_sha256(directory / SOFTMAX_WEIGHTS), softmax_words=len(vocab))
        with atomic_path(card_path) as tmp:
            tmp.write_text(json.dumps(card, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def truncate_jsonl(path: Path, last_step: int) -> None:
    """Drop the records of steps after ``last_step`` (a resumed run logs them again)."""
    if not path.is_file():
        return
    lines = path.read_text(encoding="utf-8").splitlines()
    keep = [line for line in lines if line.strip() and json.loads(line).get("step", 0) <= last_step]
    if len(keep) != len(lines):
        with atomic_path(path) as tmp:
            tmp.write_text("".join(line + "\n" for line in keep), encoding="utf-8")


# --- warm-start states: what survives a session --------------------------------------------------

WARM_START_FILES = ("lm.safetensors", "options.json", "info.json", "state.safetensors", "trainer.json")
RUN_LOGS = ("config.json", "metrics.jsonl", "curves.jsonl")
# what `probing-lab export` writes (a model folder, or a warm-start state): how an export written before
# fileio's run marker is recognised
EXPORT_FILES = (*WARM_START_FILES, *RUN_LOGS, "model.safetensors", "model_card.json", SOFTMAX_WEIGHTS, SOFTMAX_VOCAB)
EXPORT_FILES += ("training_metrics.jsonl",)


def export_warm_start(run_dir: str | Path, out: str | Path, vocab: Optional[str | Path] = None) -> Path:
    """A run's latest checkpoint, small enough to commit: the biLM *and* its softmax in float16,
    each rank's LSTM state and random generators, the step and data position, and the run's logs;
    not the optimizer's moments (they would double or triple the size). ``train --resume-from``
    continues the run from it: same step, same windows, a fresh optimizer. With ``vocab`` (the
    corpus's vocab.txt) the softmax's words come along, so that the state also loads as a language
    model (``probing_lab.lm``, the app's Language model page)."""
    run_dir, out = Path(run_dir), Path(out)
    latest = latest_checkpoint(run_dir) if (run_dir / "checkpoints").is_dir() else None
    if latest is None:
        raise TrainingError(f"{run_dir}: not a run directory with a checkpoint; give the --out of `probing-lab train`")
    with atomic_directory(out, command="export") as tmp:  # the whole folder at once: nothing of an earlier state stays
        _write_warm_start(latest, run_dir, tmp, vocab)
    return out


def _write_warm_start(latest: Path, run_dir: Path, tmp: Path, vocab: Optional[str | Path]) -> None:
    from safetensors.torch import load_file, save_file

    lm = load_file(str(latest / "lm.safetensors"))
    save_file({k: v.half() if v.is_floating_point() else v for k, v in lm.items()}, str(tmp / "lm.safetensors"))
    for name in WARM_START_FILES[1:]:
        shutil.copy2(latest / name, tmp / name)
    for name in RUN_LOGS:
        if (run_dir / name).is_file():
            shutil.copy2(run_dir / name, tmp / name)
    if vocab is not None:
        from .vocab import Vocabulary

        size = json.loads((latest / "info.json").read_text())["vocab_size"]
        Vocabulary.load(vocab, max_size=size).save(tmp / "vocab.txt")


def restore_warm_start(state_dir: str | Path, run_dir: str | Path) -> Path:
    """Make ``run_dir`` a run whose latest checkpoint is the warm-start state ``state_dir``
    (see :func:`export_warm_start`); ``train(..., resume=True)`` then continues it."""
    state_dir, run_dir = Path(state_dir), Path(run_dir)
    missing = [name for name in WARM_START_FILES + ("config.json",) if not (state_dir / name).is_file()]
    if missing:
        raise TrainingError(
            f"{state_dir}: not a warm-start state (missing {missing}); "
            "make one with `probing-lab export RUN --warm-start`"
        )
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


def export_encoder(
    source: str | Path,
    out: str | Path,
    dtype: torch.dtype = torch.float16,
    card: Optional[dict] = None,
    softmax_vocab: Optional[str | Path] = None,
) -> Path:
    """A training checkpoint/snapshot (or a run's latest) -> the lab's model directory: the biLM,
    ``dtype`` on disk, and a model card with the training facts. With ``softmax_vocab`` (the
    corpus's ``vocab.txt``) the softmax and its words come along, for the LM features (``probing_lab.lm``)."""
    from ..elmo import save_checkpoint

    lm, info = load_lm(source)
    vocab = None
    if softmax_vocab is not None:
        vocab = Vocabulary.load(softmax_vocab, max_size=info["vocab_size"])
        if len(vocab) != info["vocab_size"]:
            raise TrainingError(
                f"{softmax_vocab} has {len(vocab)} words, the model's softmax {info['vocab_size']}: "
                "give the vocab.txt of the corpus the run was trained on"
            )
    facts = {k: info.get(k) for k in ("step", "tokens_seen", "wall_time_s", "epoch", "total_steps", "world_size")}
    full_card = {
        "training": {**facts, "config": info["config"], "vocab_size": info["vocab_size"]},
        "dtype": str(dtype).replace("torch.", ""),
        "softmax": vocab is not None,
    }
    full_card.update(card or {})
    out = save_checkpoint(lm.bilm, out, full_card, dtype=dtype)
    if vocab is not None:
        save_softmax(out, lm.softmax.weight, lm.softmax.bias, vocab, dtype=dtype)
    return out
