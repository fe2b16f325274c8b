"""Several training processes: who does what, and the little that torch's DDP and FSDP2 leave to us.

The trainer runs the same loop in every process (one per GPU, or several CPU processes over
gloo) and stays exact: the world size changes the speed and the memory, not the update.

* **Rollouts are sharded by group**: each rank plays a contiguous share of the update's groups
  (a group never straddles ranks, so group-relative credit sees whole groups), then the episodes
  are gathered so that every rank computes the same credit and draws the same samples.
* **The model is shared by torch**: ``distributed.strategy: ddp`` wraps it in
  :class:`~torch.nn.parallel.DistributedDataParallel` (every rank holds the whole model and
  optimizer; gradients are all-reduced in DDP's buckets), ``fsdp`` applies FSDP2's
  :func:`~torch.distributed.fsdp.fully_shard` to every decoder layer and the root (parameters,
  gradients and optimizer state sharded over the ranks; a layer's weights are all-gathered just
  for its forward and backward). :class:`ParallelModel` is that choice, behind one interface.
* **What AAW's uneven shares need, and nothing else**: each optimizer step's samples are split
  across ranks, and absolute-advantage-weighted sampling makes the split uneven, so a rank may
  have fewer micro-batches than another, or none. DDP and FSDP both run collectives inside
  backward (FSDP in forward too) and hang when ranks run different numbers of passes, so
  :meth:`ParallelModel.micro_batch_slots` pads every rank to the same count with passes whose
  loss is multiplied by 0. Each rank's loss is divided by the *step's* global aggregation
  denominator (every rank's tokens), so the gradient is the **sum** over ranks, not DDP's and
  FSDP's default mean: both are told to sum.
* **Only rank 0 writes** the run folder (config, metrics, episodes, the final model), except the
  shards of an FSDP checkpoint, which every rank writes (torch distributed checkpoint, DCP);
  decisions that end the loop (time budget, early-stop hook) are taken on rank 0 and broadcast.
* **No hang**: the process group is created with ``distributed.timeout_s``; a collective that
  waits longer (a rank died or hung) raises, and the CLI names the fix (:func:`collective_failure`).

Launch with ``torchrun --nproc_per_node N -m tsmg.apps.cli train ...`` or ``accelerate launch
--num_processes N [--use_fsdp --fsdp_version 2 ...] -m tsmg.apps.cli train ...``: accelerate's FSDP
plugin (its flags or config file) is read by :func:`fsdp_settings`. A plain ``python`` or
``tsmg train`` is a world of one, where every collective is the identity and nothing is wrapped.
"""

from __future__ import annotations

import contextlib
import datetime
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import torch

if TYPE_CHECKING:
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    from training.config import DistributedConfig

T = TypeVar("T")


class DistributedSetupError(ValueError):
    """A multi-process launch that cannot work as configured; the message names the setting and the fix."""


@dataclass(frozen=True)
class World:
    """This process's place among the training processes.

    Attributes:
        rank: Global rank (0 writes the run folder).
        size: Number of processes.
        local_rank: Rank on this machine (selects the GPU).
        timeout_s: How long a collective waits for the other ranks before it raises.
    """

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    timeout_s: float = 600.0

    @property
    def is_main(self) -> bool:
        """Whether this process writes the run folder and decides when to stop."""
        return self.rank == 0

    def shard_bounds(self, count: int, rank: int | None = None) -> tuple[int, int]:
        """The contiguous range ``[first, last)`` of ``count`` items a rank (this one) takes; sizes differ by 1 at most.

        Example:
            >>> [World(rank, 3).shard_bounds(8) for rank in range(3)]
            [(0, 3), (3, 6), (6, 8)]
        """
        rank = self.rank if rank is None else rank
        base, extra = divmod(count, self.size)
        first = rank * base + min(rank, extra)
        return first, first + base + (1 if rank < extra else 0)

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
        return all(self.gather(bool(flag)))

    def barrier(self) -> None:
        """Wait until every rank gets here."""
        if self.size > 1:
            torch.distributed.barrier()


def current_world(timeout_s: float = 600.0, *, group_of_one: bool = False) -> World:
    """The world this process was launched in; initialises the process group through accelerate when N > 1.

    A launcher (``accelerate launch``, ``torchrun``) sets ``WORLD_SIZE``/``RANK``/``LOCAL_RANK``.
    With several GPUs each process takes the GPU of its local rank (NCCL); without GPUs the
    processes talk over gloo. Every collective waits at most ``timeout_s``.

    Args:
        timeout_s: How long a collective waits for the other ranks.
        group_of_one: A launcher's single process also gets a process group (FSDP over one
            device: the sharded code paths, checked on a machine with one GPU).
    """
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size < 1 or (size == 1 and not (group_of_one and "MASTER_ADDR" in os.environ)):
        return World(timeout_s=timeout_s)
    from accelerate import PartialState

    state = PartialState(cpu=not torch.cuda.is_available(), timeout=datetime.timedelta(seconds=timeout_s))
    if torch.cuda.is_available():
        torch.cuda.set_device(state.local_process_index)
    return World(
        rank=state.process_index,
        size=state.num_processes,
        local_rank=state.local_process_index,
        timeout_s=timeout_s,
    )


def release_world() -> None:
    """Close the process group (if any) before the process exits.

    Without it, a process can abort at exit ("terminate called without an active exception")
    while the collective backend's threads are still running. Every rank first waits for the
    others at a barrier: rank 0 finishes later than the rest (it gathers and saves the final
    model), and a rank that tore its connections down meanwhile aborted now and then on a busy
    machine (1 launch in 2 of ``test_fsdp_lora_with_kl_and_rollout_entropy_trains_as_one_process``
    beside two busy processes).
    """
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


def check_world_divides_groups(world: World, groups_per_update: int) -> None:
    """Refuse a world whose ranks would not all play the same number of groups.

    Raises:
        DistributedSetupError: ``groups_per_update`` is not a multiple of the number of processes.
    """
    if groups_per_update % world.size == 0:
        return
    below = groups_per_update - groups_per_update % world.size
    above = below + world.size
    options = f"{below} or {above}" if below else f"{above}"
    raise DistributedSetupError(
        f"rollout.groups_per_update ({groups_per_update}) is not a multiple of the {world.size} training processes, "
        f"so some would play more groups than others and the rest would wait: set rollout.groups_per_update to "
        f"{options}, or launch a number of processes that divides {groups_per_update}"
    )


def collective_failure(error: BaseException, world_size: int) -> str | None:
    """The one-sentence message for an error raised by a collective (a rank died or hung); None for other errors."""
    if world_size <= 1:
        return None
    text = f"{type(error).__name__}: {error}".lower()
    distributed_error = getattr(torch.distributed, "DistError", ())
    markers = ("gloo", "nccl", "processgroup", "connection closed by peer")
    if not isinstance(error, distributed_error) and not any(marker in text for marker in markers):
        return None
    first_line = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
    return (
        f"a training process stopped answering ({first_line}): one rank died or hung, so the others stopped "
        "instead of waiting; fix what stopped it (its own error is above), then relaunch the same command with "
        "--resume to continue from the last checkpoint (raise distributed.timeout_s if a step legitimately takes "
        "longer)"
    )


# --------------------------------------------------------------------------- FSDP settings
@dataclass(frozen=True)
class FSDPSettings:
    """How FSDP2 shards the model.

    Attributes:
        reshard_after_forward: Free a layer's gathered weights after its forward (ZeRO-3; least
            memory) rather than keeping them until its backward (ZeRO-2; fewer all-gathers).
        cpu_offload: Keep the sharded parameters, gradients and optimizer state in CPU memory.
        layer_classes: Class names of the modules that each become one FSDP unit (None: the
            model's ``_no_split_modules``, its decoder layers).
        mixed_precision: dtype the gathered weights compute in (None: their own).
        source: Where the settings came from (for messages).
    """

    reshard_after_forward: bool = True
    cpu_offload: bool = False
    layer_classes: tuple[str, ...] | None = None
    mixed_precision: str | None = None
    source: str = "the training config"


def accelerate_fsdp_requested() -> bool:
    """Whether ``accelerate launch`` was asked for FSDP (``--use_fsdp`` or ``distributed_type: FSDP``)."""
    return os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"


def resolve_strategy(requested: str, world: World) -> str:
    """The strategy of this launch: ``single`` for one process, else ``ddp`` or ``fsdp``.

    ``auto`` is ``fsdp`` when accelerate was launched with FSDP, else ``ddp``.

    Raises:
        DistributedSetupError: accelerate was launched with FSDP but the config asks for DDP.
    """
    if world.size == 1:  # FSDP over one device only where a launcher made a group of one
        grouped = torch.distributed.is_available() and torch.distributed.is_initialized()
        return "fsdp" if requested == "fsdp" and grouped else "single"
    if requested == "auto":
        return "fsdp" if accelerate_fsdp_requested() else "ddp"
    if requested == "ddp" and accelerate_fsdp_requested():
        raise DistributedSetupError(
            "accelerate was launched with FSDP (--use_fsdp, or distributed_type: FSDP in its config file) but "
            "distributed.strategy is 'ddp': set distributed.strategy to 'fsdp' (or 'auto'), or launch without FSDP"
        )
    return requested


def fsdp_settings(config: DistributedConfig, *, lora: bool) -> FSDPSettings:
    """The FSDP2 settings of the run: accelerate's FSDP plugin when accelerate launched with FSDP, else ``config``.

    Args:
        config: The run's ``distributed`` section.
        lora: Whether the run trains a LoRA adapter.

    Raises:
        DistributedSetupError: A setting that cannot be honoured here (FSDP version 1, activation
            checkpointing, CPU offload without GPUs); the message names it and the fix.
    """
    if accelerate_fsdp_requested():
        from accelerate.utils import FullyShardedDataParallelPlugin

        plugin = FullyShardedDataParallelPlugin()
        if plugin.fsdp_version != 2:
            why = (
                " (FSDP1 flattens each unit into one tensor, which cannot hold a LoRA adapter's trainable weights "
                "beside frozen base weights without use_orig_params)"
                if lora
                else ""
            )
            raise DistributedSetupError(
                f"accelerate's FSDP config asks for FSDP version {plugin.fsdp_version} (fsdp_version){why}; tsmg "
                "trains with FSDP2 (fully_shard): set fsdp_version: 2 in the accelerate config, or pass "
                "--fsdp_version 2"
            )
        if plugin.activation_checkpointing:
            raise DistributedSetupError(
                "accelerate's FSDP config turns on activation checkpointing (fsdp_activation_checkpointing), which "
                "the trainer does not apply: set it to false (lower optim.micro_batch_size to save memory instead)"
            )
        offload = type(plugin.cpu_offload).__name__ == "CPUOffloadPolicy"
        policy = plugin.mixed_precision_policy
        settings = FSDPSettings(
            reshard_after_forward=bool(plugin.reshard_after_forward),
            cpu_offload=offload,
            layer_classes=tuple(plugin.transformer_cls_names_to_wrap or ()) or None,
            mixed_precision=None if policy is None else str(getattr(policy, "param_dtype", None) or "") or None,
            source="accelerate's FSDP config",
        )
    else:
        settings = FSDPSettings(
            reshard_after_forward=config.fsdp_reshard_after_forward, cpu_offload=config.fsdp_cpu_offload
        )
    if settings.cpu_offload and not torch.cuda.is_available():
        setting = "distributed.fsdp_cpu_offload" if settings.source == "the training config" else "fsdp_offload_params"
        raise DistributedSetupError(
            f"{settings.source} offloads FSDP's shards to the CPU ({setting}), which moves them between GPU and CPU "
            f"memory and needs GPUs: set {setting} to false on a CPU-only run"
        )
    return settings


# --------------------------------------------------------------------------- the shared model
class ParallelModel:
    """The trained model as the processes share it: one process, DDP replicas, or FSDP2 shards.

    Args:
        model: The HF model (a PEFT model under LoRA); FSDP shards it in place.
        world: This process's place among the training processes.
        strategy: ``single``, ``ddp`` or ``fsdp`` (:func:`resolve_strategy`).
        fsdp: FSDP2's settings (``fsdp`` only).
        trainable: Whether gradients flow (False for a frozen reference copy).

    Attributes:
        module: The model itself (its parameters are DTensor shards under FSDP).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        world: World,
        strategy: str = "single",
        fsdp: FSDPSettings | None = None,
        *,
        trainable: bool = True,
    ) -> None:
        self.module = model
        self.world = world
        self.strategy = strategy
        self.fsdp = fsdp or FSDPSettings()
        self._ddp: torch.nn.parallel.DistributedDataParallel | None = None
        self._units: list[Any] = []
        if strategy == "fsdp":
            self._units = _fully_shard(model, self.fsdp)
        elif strategy == "ddp" and trainable:  # a frozen DDP copy (the KL reference) needs nothing shared
            # DDP broadcasts rank 0's weights at construction: every rank starts from the same model.
            self._ddp = torch.nn.parallel.DistributedDataParallel(
                model,
                device_ids=[world.local_rank] if torch.cuda.is_available() else None,
                broadcast_buffers=False,  # rotary caches only; no forward-time collective
            )
            self._ddp.register_comm_hook(None, _sum_hook)

    @property
    def sharded(self) -> bool:
        """Whether the parameters are FSDP shards (each rank holds 1/N)."""
        return self.strategy == "fsdp"

    @property
    def forward_model(self) -> torch.nn.Module:
        """What the gradient pass calls: the DDP wrapper (its backward all-reduces), else the model."""
        return self._ddp if self._ddp is not None else self.module

    @property
    def shares_prefix_in_backward(self) -> bool:
        """Whether the gradient pass may run a shared prompt prefix as a forward of its own.

        Under FSDP2 a layer's weights are freed after each forward and after each backward, and a
        second forward before the backward leaves the first one's saved tensors pointing at freed
        memory; so the sharded gradient pass runs each row whole (the no-gradient passes share).
        """
        return not self.sharded

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        """The parameters the optimizer steps (FSDP's sharded ones under FSDP)."""
        return [parameter for parameter in self.module.parameters() if parameter.requires_grad]

    @contextlib.contextmanager
    def accumulating(self, last: bool) -> Iterator[None]:
        """Context of one micro-batch's backward: DDP all-reduces only on the step's ``last`` one.

        FSDP reduce-scatters after every backward (each rank keeps only its shard of the summed
        gradient, so there is nothing to hold back).
        """
        if self._ddp is not None and not last:
            with self._ddp.no_sync():
                yield
        else:
            yield

    @contextlib.contextmanager
    def gathered(self) -> Iterator[None]:
        """Every rank holds the whole weights inside (FSDP: all-gathered once, freed at the end).

        Rollouts and the no-gradient scoring passes run inside: each rank then runs as many forward
        passes as its own share needs, without a collective per pass. Every rank must enter together.
        """
        if not self._units:
            yield
            return
        for unit in self._units:
            unit.set_reshard_after_forward(False, recurse=False)
        for unit in self._units:
            unit.unshard()
        try:
            yield
        finally:
            for unit in self._units:
                unit.reshard()
                unit.set_reshard_after_forward(_unit_reshards(unit, self), recurse=False)

    def clip_grad_norm(self, max_norm: float | None) -> float:
        """Clip the global gradient norm (over every rank's shards) to ``max_norm``; returns the norm before."""
        import math

        norm = torch.nn.utils.clip_grad_norm_(self.trainable_parameters(), max_norm or math.inf)
        if hasattr(norm, "full_tensor"):  # FSDP: a DTensor holding the global norm
            norm = norm.full_tensor()
        return float(norm)

    def full_state_dict(self, *, everywhere: bool = False, trainable_only: bool = False) -> dict[str, torch.Tensor]:
        """The whole weights as plain tensors: on rank 0 (CPU), or on every rank with ``everywhere``; {} elsewhere.

        Every rank must call it (FSDP all-gathers). Names are the model's own (PEFT names under LoRA).
        """
        if not self.sharded:
            whole = self.module.state_dict()
            if trainable_only:
                names = {name for name, parameter in self.module.named_parameters() if parameter.requires_grad}
                whole = {name: tensor for name, tensor in whole.items() if name in names}
            return {name: tensor.detach() for name, tensor in whole.items()}
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        options = StateDictOptions(
            full_state_dict=True, cpu_offload=not everywhere, ignore_frozen_params=trainable_only
        )
        state: dict[str, Any] = dict(get_model_state_dict(self.module, options=options))
        return state

    # ------------------------------------------------------------------ sharded checkpoints (DCP)
    def save_sharded(self, folder: Path, optimizer: torch.optim.Optimizer) -> None:
        """Write the trained parameters and the optimizer state as a DCP checkpoint (every rank writes its shards)."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict

        model_state, optimizer_state = get_state_dict(self.module, optimizer, options=_sharded_options())
        dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=str(folder))

    def load_sharded(self, folder: Path, optimizer: torch.optim.Optimizer) -> None:
        """Read what :meth:`save_sharded` wrote, whatever the number of processes then and now."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

        model_state, optimizer_state = get_state_dict(self.module, optimizer, options=_sharded_options())
        dcp.load({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=str(folder))  # fills them in
        set_state_dict(
            self.module,
            optimizer,
            model_state_dict=model_state,
            optim_state_dict=optimizer_state,
            options=_sharded_options(),
        )

    def micro_batch_slots(self, counts: Sequence[int]) -> int:
        """How many micro-batch passes every rank runs in one optimizer step, given each rank's own count.

        The largest count (at least 1): a rank with fewer fills in with passes whose loss is
        multiplied by 0, because DDP's and FSDP's collectives pair up one pass per rank.
        One process runs just its own.

        Example:
            >>> ParallelModel(torch.nn.Linear(1, 1), World()).micro_batch_slots([3])
            3
        """
        if self.world.size == 1:
            return counts[0]
        return max(max(counts), 1)


def _sharded_options() -> StateDictOptions:
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    # Frozen weights (a LoRA run's base model) are the base model's, named in config.yaml: not saved.
    return StateDictOptions(ignore_frozen_params=True)


def _sum_hook(state: Any, bucket: Any) -> Any:  # Any: DDP's comm-hook types, by signature
    """DDP communication hook: sum the bucket's gradients over ranks (DDP's own hook averages)."""
    future = torch.distributed.all_reduce(bucket.buffer(), async_op=True).get_future()
    return future.then(lambda done: done.value()[0])


# DDP checks the hook's annotations against the real classes (this module's are strings).
_sum_hook.__annotations__ = {
    "state": object,
    "bucket": torch.distributed.GradBucket,
    "return": torch.futures.Future[torch.Tensor],
}


def _fully_shard(model: torch.nn.Module, settings: FSDPSettings) -> list[Any]:
    """Apply FSDP2 to every decoder layer (or ``settings.layer_classes``) and to the root; returns the units.

    The root unit holds what is left: embeddings, final norm and output layer (tied or not, they
    stay in one unit, as FSDP2 requires of a shared parameter).
    """
    from torch.distributed.fsdp import CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, OffloadPolicy, fully_shard

    root: Any = model
    base = root.get_base_model() if hasattr(root, "get_base_model") else root
    names = set(settings.layer_classes or getattr(base, "_no_split_modules", None) or ())
    if not names:
        raise DistributedSetupError(
            f"cannot tell which modules of {type(base).__name__} are its layers (it lists no _no_split_modules): "
            "launch with accelerate and name them (--fsdp_transformer_layer_cls_to_wrap), or train with "
            "distributed.strategy: ddp"
        )
    layers = [module for module in model.modules() if type(module).__name__ in names]
    if not layers:
        raise DistributedSetupError(
            f"{settings.source} names layer classes {sorted(names)}, none of which {type(base).__name__} has: "
            "name its decoder layer class (fsdp_transformer_layer_cls_to_wrap), or leave it unset"
        )
    options: dict[str, Any] = {"offload_policy": CPUOffloadPolicy() if settings.cpu_offload else OffloadPolicy()}
    if settings.mixed_precision:
        dtype = getattr(torch, settings.mixed_precision.removeprefix("torch."))
        options["mp_policy"] = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)
    for layer in layers:
        fully_shard(layer, reshard_after_forward=settings.reshard_after_forward, **options)
    fully_shard(model, **options)  # the root keeps its weights gathered between forward and backward
    units = [module for module in model.modules() if isinstance(module, FSDPModule)]
    for unit in units:
        # The loss carries the step's global denominator: gradients are summed over ranks, not averaged.
        unit.set_gradient_divide_factor(1.0)
        unit.set_force_sum_reduction_for_comms(True)  # a plain sum (gloo has no pre-multiplied sum)
    return units


def _unit_reshards(unit: Any, parallel: ParallelModel) -> bool:  # Any: an FSDP2 module (torch's private class)
    """The reshard-after-forward setting a unit had before :meth:`ParallelModel.gathered` (the root: False)."""
    return parallel.fsdp.reshard_after_forward and unit is not parallel.module
