"""Setting a run up: the model to train, its LoRA adapter, the reference policy, the optimizer and schedule.

:meth:`TrainingSetup.from_config` is the whole stage: it loads the HF backend of ``model.spec`` (building a tiny
model from scratch for ``tiny``, once per run folder), restores a checkpoint's weights or adapter,
adds a fresh adapter for LoRA, builds the reference policy the KL term needs, and the AdamW
optimizer and learning-rate schedule (restored from the checkpoint too). Every process of a
data-parallel run starts from rank 0's weights.

The reference policy: with LoRA, the same model with its adapter switched off (nothing to
build); with full fine-tuning, a frozen copy of the initial weights (only when ``loss.kl_beta``
is above 0).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch

from backends.base import TrainableModel

# The base model's names stay importable from here, where they were before they got their own module.
from training.base_model import BASE_MODEL_DIR as BASE_MODEL_DIR
from training.base_model import base_model_source
from training.base_model import tiny_corpus as tiny_corpus
from training.checkpoint import Checkpoint
from training.config import ModelConfig, RunConfig, TrainConfig
from training.distributed import DistributedSetupError, ParallelModel, World, fsdp_settings, resolve_strategy
from training.schedule import lr_multiplier


@dataclass
class TrainingSetup:
    """What a run trains and with what.

    Attributes:
        backend: The :class:`backends.hf.HFBackend` whose model is trained (it also plays the
            rollouts unless they run on vLLM).
        lora: Whether a LoRA adapter is trained (else every weight).
        reference: The frozen reference model of full fine-tuning with a KL term (None: no KL,
            or LoRA, whose reference is the model with the adapter switched off).
        parameters: The trained parameters (this process's shards under FSDP).
        optimizer: AdamW over them.
        scheduler: The learning-rate schedule (one step per update).
        parallel: How the processes share the trained model (one process: nothing shared).
        reference_parallel: The same for the frozen reference (None without one).
    """

    backend: TrainableModel
    lora: bool
    reference: Any
    parameters: list[torch.nn.Parameter]
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    parallel: ParallelModel
    reference_parallel: ParallelModel | None = None

    @classmethod
    def from_config(
        cls,
        config: TrainConfig,
        run_dir: Path,
        checkpoint: Checkpoint | None,
        world: World,
        episodes_played: Callable[[], int] | None = None,
    ) -> TrainingSetup:
        """Load the model (or restore it from ``checkpoint``), add LoRA, share it among processes, make the optimizer.

        The whole set-up stage; it reads the model, optim, run, distributed, loss and rollout sections.

        ``episodes_played`` (the training episodes played so far, read at each schedule step) is the
        clock of a schedule over an episode budget (``run.episodes``); without it that clock stays at 0.

        Raises:
            training.distributed.DistributedSetupError: A launch that cannot work as configured (the
                message names the setting and the fix).
        """
        lora = config.model.finetune == "lora"
        max_concurrent = config.rollout.max_concurrent
        strategy = resolve_strategy(config.distributed.strategy, world)
        fsdp = fsdp_settings(config.distributed, lora=lora) if strategy == "fsdp" else None
        sharded = checkpoint is not None and checkpoint.sharded_dir is not None
        if checkpoint is not None and not sharded and strategy == "fsdp":
            raise DistributedSetupError(
                f"{checkpoint.path} was written without FSDP (whole weights and optimizer state), and this launch "
                "shards them with FSDP: resume it with the strategy it was written with (distributed.strategy: ddp, "
                "or one process)"
            )
        restored = checkpoint.model_dir if checkpoint and not lora and not sharded else None
        backend = load_backend(config.model, config.run, run_dir, max_concurrent=max_concurrent, weights=restored)
        if lora and checkpoint is not None and checkpoint.adapter_dir is not None:
            backend.load_adapter(checkpoint.adapter_dir, trainable=True)
        elif lora:
            add_lora(
                backend, config.model, seed=config.run.seed
            )  # a sharded checkpoint's adapter weights are loaded below
        own_storage(backend.model)
        reference, reference_parallel = None, None
        if config.loss.kl_beta > 0 and not lora:  # full fine-tuning: a frozen copy of the initial weights
            if checkpoint is None:
                reference = copy.deepcopy(backend.model)
            else:
                base = Path(base_model_source(config.model, run_dir, seed=config.run.seed))
                reference = load_backend(
                    config.model, config.run, run_dir, max_concurrent=max_concurrent, weights=base
                ).model
            reference.eval().requires_grad_(False)
            reference_parallel = ParallelModel(reference, world, strategy, fsdp, trainable=False)
        parallel = ParallelModel(backend.model, world, strategy, fsdp)
        parameters = parallel.trainable_parameters()
        optim, run = config.optim, config.run
        optimizer = torch.optim.AdamW(parameters, lr=optim.lr, weight_decay=optim.weight_decay)
        played = episodes_played or (lambda: 0)

        def multiplier(update: int) -> float:
            # With an episode budget the decay follows the episodes played, whatever each update played.
            progress = None if run.episodes is None else played() / run.episodes
            return lr_multiplier(
                update, run.updates, optim.schedule, optim.warmup_steps, optim.min_lr_ratio, progress=progress
            )

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, multiplier)
        if checkpoint is not None:
            if checkpoint.sharded_dir is not None:  # FSDP's shards, read into whatever this launch holds
                parallel.load_sharded(checkpoint.sharded_dir, optimizer)
            elif checkpoint.optimizer is not None:
                optimizer.load_state_dict(checkpoint.optimizer)
            if checkpoint.scheduler is not None:
                scheduler.load_state_dict(checkpoint.scheduler)
        return cls(backend, lora, reference, parameters, optimizer, scheduler, parallel, reference_parallel)


#: The set-up stage under the name the trainer, tests and bench scripts call (a public name of this module).
set_up = TrainingSetup.from_config


def unsharded_backend(
    setup: TrainingSetup, model: ModelConfig, run_dir: Path, world: World, *, seed: int
) -> TrainableModel | None:
    """The trained model as one process holds it, on rank 0 (None on the others); every rank must call it.

    Without FSDP that is the trained backend itself. Under FSDP the weights are gathered to rank 0
    and loaded into a fresh CPU copy of the model (with the run's LoRA adapter), which
    :meth:`training.run_folder.RunFolder.finish` saves as a plain model folder.
    """
    if not setup.parallel.sharded:
        return setup.backend
    state = setup.parallel.full_state_dict()
    if not world.is_main:
        return None
    from backends.hf import DType, HFBackend

    dtype = cast(DType, str(setup.backend.dtype).removeprefix("torch."))  # the trained weights' own, not the CPU's
    plain = HFBackend(base_model_source(model, run_dir, seed=seed), dtype=dtype, device="cpu")
    if setup.lora:
        add_lora(plain, model, seed=seed)
    plain.model.load_state_dict(state)
    return plain


def own_storage(model: torch.nn.Module) -> None:
    """Give every CPU parameter storage of its own, allocated like any tensor.

    Why: weights loaded from a file may sit at any offset of one shared buffer, and the CPU
    kernels' results depend on a tensor's memory alignment in the last bit (a copy of the same
    model computed some log-probabilities 1 ulp apart). With its own storage, the trained model and
    every copy of it (the asynchronous rollout worker's, a frozen reference) compute alike.
    """
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.device.type == "cpu":
                parameter.data = parameter.data.clone()


def load_backend(
    model: ModelConfig, run: RunConfig, run_dir: Path, *, max_concurrent: int, weights: Path | None = None
) -> TrainableModel:
    """The HF backend of the model to train (built, loaded, or restored from a checkpoint's ``model/``).

    ``tiny`` builds a model from scratch into ``run_dir/base_model`` (once; a resumed run reuses
    it). ``vllm:PATH`` trains the HF copy of PATH (rollouts run on vLLM). ``max_concurrent``
    (``rollout.max_concurrent``) raises the backend's batch size to the rollout's concurrency.
    """
    from backends.hf import HFBackend

    source = weights if weights is not None else base_model_source(model, run_dir, seed=run.seed)
    return HFBackend(source, dtype=model.dtype, threads=run.threads, max_batch_size=max(64, max_concurrent))


def add_lora(backend: TrainableModel, model: ModelConfig, *, seed: int) -> None:
    """A fresh adapter of ``model``'s LoRA settings, initialised from ``seed`` without touching the global generator."""
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        backend.add_lora(
            r=model.lora_r, alpha=model.lora_alpha, target_modules=model.lora_target_modules, dropout=model.lora_dropout
        )
