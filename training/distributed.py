"""Data-parallel training over several processes: who does what, and the few collectives it needs.

The trainer runs the same loop in every process (one per GPU, or several CPU processes) and
stays exact: the world size changes the speed, not the update.

* **Rollouts are sharded by group**: each rank plays a contiguous share of the update's groups
  (a group never straddles ranks, so group-relative credit sees whole groups), then the episodes
  are gathered so that every rank computes the same credit and draws the same samples from the
  same generator.
* **Each optimizer step's samples are split across ranks**; gradients are summed over ranks
  (one flat all-reduce per optimizer step) after each rank backpropagated its share with the
  step's global aggregation denominator. That is what DistributedDataParallel does, done
  explicitly: a rank may have no sample in a step (absolute-advantage-weighted sampling makes
  shares uneven), where DDP's hooks would wait forever.
* **Only rank 0 writes** the run folder (config, metrics, episodes, checkpoints, final model);
  decisions that end the loop (time budget, early-stop hook) are taken on rank 0 and broadcast.

Launch with ``accelerate launch --multi_gpu --num_processes N -m tsmg.cli train ...`` or
``torchrun --nproc_per_node N -m tsmg.cli train ...`` (on CPU too, over gloo). A plain
``python`` or ``tsmg train`` is a world of one, where every collective is the identity.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

T = TypeVar("T")


@dataclass(frozen=True)
class World:
    """This process's place among the training processes.

    Attributes:
        rank: Global rank (0 writes the run folder).
        size: Number of processes.
        local_rank: Rank on this machine (selects the GPU).
    """

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """Whether this process writes the run folder and decides when to stop."""
        return self.rank == 0

    def shard_bounds(self, count: int) -> tuple[int, int]:
        """The contiguous range ``[first, last)`` of ``count`` items this rank takes (sizes differ by at most 1).

        Example:
            >>> [World(rank, 3).shard_bounds(8) for rank in range(3)]
            [(0, 3), (3, 6), (6, 8)]
        """
        base, extra = divmod(count, self.size)
        first = self.rank * base + min(self.rank, extra)
        return first, first + base + (1 if self.rank < extra else 0)

    def shard(self, items: Sequence[T]) -> list[T]:
        """This rank's contiguous share of ``items``."""
        first, last = self.shard_bounds(len(items))
        return list(items[first:last])

    def gather(self, value: T) -> list[T]:
        """Every rank's ``value``, in rank order (any picklable object)."""
        if self.size == 1:
            return [value]
        gathered: list[Any] = [None] * self.size
        torch.distributed.all_gather_object(gathered, value)
        return gathered

    def broadcast(self, value: T) -> T:
        """Rank 0's ``value`` on every rank."""
        if self.size == 1:
            return value
        box = [value]
        torch.distributed.broadcast_object_list(box, src=0)
        return box[0]

    def all_true(self, flag: bool) -> bool:
        """Whether ``flag`` holds on every rank."""
        if self.size == 1:
            return flag
        value = torch.tensor([1.0 if flag else 0.0], device=self._device())
        torch.distributed.all_reduce(value, op=torch.distributed.ReduceOp.MIN)
        return bool(value.item() > 0.5)

    def sum_gradients(self, parameters: Sequence[torch.nn.Parameter]) -> None:
        """Replace each parameter's gradient by its sum over ranks (missing gradients count as zeros)."""
        if self.size == 1:
            return
        by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
        for parameter in parameters:
            if parameter.grad is None:  # no sample of this rank reached it
                parameter.grad = torch.zeros_like(parameter)
            by_dtype.setdefault(parameter.grad.dtype, []).append(parameter.grad)
        for grads in by_dtype.values():  # one flat buffer per dtype: one collective, not one per tensor
            flat = torch.cat([grad.reshape(-1) for grad in grads])
            torch.distributed.all_reduce(flat)
            for grad, summed in zip(grads, flat.split([grad.numel() for grad in grads]), strict=True):
                grad.copy_(summed.view_as(grad))

    def sync_parameters(self, parameters: Sequence[torch.nn.Parameter]) -> None:
        """Copy rank 0's values of ``parameters`` to every rank (all ranks start from the same weights)."""
        if self.size == 1:
            return
        with torch.no_grad():
            for parameter in parameters:
                torch.distributed.broadcast(parameter.data, src=0)

    def barrier(self) -> None:
        """Wait until every rank gets here."""
        if self.size > 1:
            torch.distributed.barrier()

    def _device(self) -> torch.device:
        backend = torch.distributed.get_backend()
        return torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")


def current_world() -> World:
    """The world this process was launched in; initialises the process group through accelerate when N > 1.

    A launcher (``accelerate launch``, ``torchrun``) sets ``WORLD_SIZE``/``RANK``/``LOCAL_RANK``.
    With several GPUs each process takes the GPU of its local rank (NCCL); without GPUs the
    processes talk over gloo.
    """
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return World()
    from accelerate import PartialState

    state = PartialState(cpu=not torch.cuda.is_available())
    if torch.cuda.is_available():
        torch.cuda.set_device(state.local_process_index)
    return World(rank=state.process_index, size=state.num_processes, local_rank=state.local_process_index)
