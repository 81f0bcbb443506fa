"""One process or many (torchrun + DistributedDataParallel): rank, device and the few collectives
the trainer needs, each a no-op when there is one process."""

from __future__ import annotations

import os

import torch


class Distributed:
    """Reads torchrun's environment (``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``); gloo on CPU, NCCL on GPU."""

    def __init__(self):
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.enabled = self.world > 1
        local = int(os.environ.get("LOCAL_RANK", "0"))
        self.device = torch.device(f"cuda:{local}") if torch.cuda.is_available() else torch.device("cpu")
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        self.owns_group = self.enabled and not torch.distributed.is_initialized()
        if self.owns_group:
            backend = "nccl" if torch.cuda.is_available() else "gloo"
            torch.distributed.init_process_group(backend)

    @property
    def main(self) -> bool:
        """The process that writes files."""
        return self.rank == 0

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

    def close(self) -> None:
        """Tear down the process group this object started: gloo's threads left running at
        interpreter exit can abort a rank ("terminate called without an active exception")."""
        if self.owns_group and torch.distributed.is_initialized():
            torch.distributed.barrier()
            torch.distributed.destroy_process_group()
            self.owns_group = False
