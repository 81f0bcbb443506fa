"""Before a run starts: whether ``--resume`` applies and which saved checkpoint is intact."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

from .checkpoint import Checkpointer, latest_checkpoint
from .config import TrainConfig, TrainingError


def check_resume(config: TrainConfig, run_dir: Path, resume: bool) -> Optional[Path]:
    """The checkpoint to continue from (None for a new run); refuses to overwrite a run or to
    continue it with different math."""
    if resume and not run_dir.is_dir():
        raise TrainingError(f"--resume: no run directory {run_dir}; check the path, or leave out --resume to start")
    try:
        latest = latest_checkpoint(run_dir) if run_dir.exists() else None
    except TrainingError as e:  # the pointer names a checkpoint that was never finished: use the newest whole one
        latest = next(iter(intact_checkpoints(run_dir)), None)
        if latest is None:
            raise
        print(f"{e}; using {latest.name}", file=sys.stderr)
    if resume and latest is None:
        print(f"--resume: {run_dir} has no checkpoint yet; starting the run", file=sys.stderr)
    if latest is not None and not resume:
        raise TrainingError(
            f"{run_dir} already holds a run (last checkpoint {latest.name}); "
            "pass --resume to continue it or choose another --out"
        )
    if resume and latest is not None:
        where = run_dir / "config.json"
        saved = TrainConfig.from_dict(json.loads(where.read_text())["training"], str(where))
        if not saved.same_math(config):
            given = config.to_dict()
            diff = sorted(k for k, v in saved.to_dict().items() if given[k] != v and k not in TrainConfig.BOOKKEEPING)
            raise TrainingError(f"{where} differs from the config given in {diff}; resume with the run's own config")
        # the schedule the checkpoint was trained with (its info.json) must hold for every step it has taken
        info = latest / "info.json"
        taken = TrainConfig.from_dict(json.loads(info.read_text())["config"], str(info))
        step = json.loads((latest / "trainer.json").read_text())["step"]
        changed = taken.lr_changed_before(config, step)
        if changed is not None:
            raise TrainingError(
                f"the learning-rate schedule given changes step {changed} ({taken.lr_at(changed):.3g} in {info}, "
                f"{config.lr_at(changed):.3g} now), which the run has taken (it is at step {step}); a schedule "
                "may change only for the steps to come"
            )
    return latest if resume else None


def intact_checkpoints(run_dir: Path) -> list[Path]:
    """The run's finished checkpoints (with trainer.json), newest first."""
    found = [d for d in (run_dir / "checkpoints").glob("step-*") if (d / "trainer.json").is_file()]
    return sorted(found, key=lambda d: d.name, reverse=True)


def restore_intact(checkpointer: Checkpointer, run_dir: Path, latest: Path) -> tuple[dict, tuple, Path]:
    """Restore ``latest``, or when it cannot be read, the newest older checkpoint that can (saying so)."""
    from safetensors import SafetensorError

    candidates = [latest] + [d for d in intact_checkpoints(run_dir) if d.name < latest.name]
    for i, checkpoint in enumerate(candidates):
        try:
            meta, state = checkpointer.restore(checkpoint)
            return meta, state, checkpoint
        except (SafetensorError, OSError, ValueError, KeyError, RuntimeError) as e:  # truncated, bad JSON, shapes
            following = candidates[i + 1].name if i + 1 < len(candidates) else None
            print(
                f"{checkpoint} cannot be read ({type(e).__name__}: {e}); "
                + (f"falling back to {following}" if following else "no older checkpoint is left"),
                file=sys.stderr,
            )
    raise TrainingError(f"{run_dir}: no checkpoint can be read; start a new run in another --out")
