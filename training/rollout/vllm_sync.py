"""Keeping a vLLM rollout engine on the trainer's weights: engine options, weight names, adapter folders.

The trainer learns in a Hugging Face copy of the model (:class:`backends.hf.HFBackend`) while a
:class:`backends.vllm_engine.VLLMBackend` started from the same folder plays the rollouts. After
every update the engine gets the new policy:

* **full fine-tuning**: the trained model's weights, under the names of a Hugging Face checkpoint
  (what vLLM's loaders read; :func:`checkpoint_state_dict`), through
  :meth:`~backends.vllm_engine.VLLMBackend.load_weights`;
* **LoRA**: the adapter, saved into a new folder ``run_dir/vllm_adapter/step-N``
  (:class:`AdapterFolders`) and served with :meth:`~backends.vllm_engine.VLLMBackend.set_adapter`.

The engine-side code is :class:`training.rollout.engines.VLLMRolloutEngine`.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from training.config import ModelConfig

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from backends.base import TrainableModel

#: Where LoRA adapters for the engine are written, under the run folder.
ADAPTER_ROOT = "vllm_adapter"
#: The weights file of a PEFT adapter folder.
ADAPTER_FILE = "adapter_model.safetensors"
#: Share of GPU memory the engine may take by default: the trained model, its gradients and
#: optimizer state share the GPU with it (vLLM's own default, 0.9, leaves them nothing).
DEFAULT_GPU_MEMORY_UTILIZATION = 0.3
#: The adapter ranks vLLM can be started for (its ``max_lora_rank`` takes only these values).
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)

_STEP_FOLDER = re.compile(r"step-(\d+)")


class EngineSyncError(RuntimeError):
    """The new weights or adapter could not be pushed into the rollout engine (it would sample stale ones)."""


def require_vllm() -> None:
    """Raise unless ``vllm`` can be imported, saying how to get it.

    Raises:
        ImportError: vLLM is not installed in this environment.
    """
    if importlib.util.find_spec("vllm") is None:
        raise ImportError(
            "model.spec 'vllm:PATH' plays rollouts on vLLM, which is not installed in this environment: install "
            "the `vllm` extra on a CUDA machine (pip install 'tsmg[vllm]'), or on a CPU-only machine build the "
            "test environment with `bash scripts/setup_vllm_cpu_env.sh` and run with .venv-vllm/bin/python"
        )


def lora_rank_slot(rank: int) -> int:
    """The smallest ``max_lora_rank`` vLLM accepts that serves an adapter of rank ``rank``.

    Example:
        >>> lora_rank_slot(4), lora_rank_slot(8), lora_rank_slot(24)
        (8, 8, 32)
    """
    for slot in VLLM_LORA_RANKS:
        if slot >= rank:
            return slot
    raise ValueError(f"vLLM serves LoRA adapters up to rank {VLLM_LORA_RANKS[-1]}; model.lora_r is {rank}")


def engine_options(
    model: ModelConfig,
    trained: TrainableModel,
    overrides: Mapping[str, Any] | None = None,
    *,
    seed: int,
    processes: int = 1,
) -> dict[str, Any]:
    """Keyword arguments of :class:`~backends.vllm_engine.VLLMBackend` for the rollout engine of the ``model`` section.

    The engine computes in the trained model's dtype (the trainer recomputes pi_old under its own
    weights, but the closer the two policies the fewer clipped ratios), reports the
    log-probabilities it sampled from (``logprobs_mode: processed_logprobs``: after temperature and
    the allowed tokens, what ``loss.tis_cap`` divides by), is seeded with the run's seed, serves
    LoRA adapters up to ``model.lora_r`` when the run trains one, and takes
    :data:`DEFAULT_GPU_MEMORY_UTILIZATION` of the GPU. With several processes each holding an
    engine on its own GPU (``distributed.vllm_engine: per-process``), vLLM runs inside the
    launcher's process (``distributed_executor_backend: external_launcher``, as TRL's colocated
    mode does), on that process's GPU. ``overrides`` (any ``VLLMBackend`` argument, or ``vllm.LLM``
    engine argument such as ``enforce_eager``) win.

    Args:
        model: The run's ``model`` section (whether it trains a LoRA adapter, of which rank).
        trained: The HF backend being trained (its ``dtype``).
        overrides: Options to set or replace.
        seed: The run's seed (``run.seed``).
        processes: Training processes with an engine each.
    """
    options: dict[str, Any] = {
        "dtype": str(trained.dtype).removeprefix("torch."),
        "gpu_memory_utilization": DEFAULT_GPU_MEMORY_UTILIZATION,
        "seed": seed,
        # The log-probabilities of the distribution actually sampled (after temperature and the
        # constrained answer's allowed tokens): truncated importance sampling divides by them.
        "logprobs_mode": "processed_logprobs",
    }
    if model.finetune == "lora":
        options["enable_lora"] = True
        options["max_lora_rank"] = lora_rank_slot(model.lora_r)
    if processes > 1 and _on_gpus():  # each engine in its own launcher process, on that process's GPU
        options["distributed_executor_backend"] = "external_launcher"
    options.update(overrides or {})
    return options


def _on_gpus() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def checkpoint_state_dict(
    model: PreTrainedModel,
    state: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The weights of a plain transformers model under the names of its Hugging Face checkpoint.

    Those are the names vLLM's model loaders read. A tied output embedding is left out (it is the
    input embedding, which vLLM ties the same way), and so are rotary-embedding caches; a model
    whose transformers class renames weights when loading (transformers 5 conversion mappings)
    gets the checkpoint names back, as ``save_pretrained`` would write them.

    Args:
        model: The trained model.
        state: Its weights gathered as plain tensors (an FSDP run's
            :meth:`~training.distributed.ParallelModel.full_state_dict`); None: the model's own.

    Raises:
        ValueError: ``model`` carries a PEFT adapter (its names are not a checkpoint's; a LoRA run
            syncs the adapter instead).
    """
    if hasattr(model, "peft_config"):
        raise ValueError(
            "the trained model carries a PEFT adapter, whose weight names no vLLM loader reads: a LoRA run "
            "(model.finetune: lora) pushes the adapter, not the weights"
        )
    if state is None:
        # keep_vars: the parameters themselves, so that a tied (shared) one is recognised by identity;
        # named_parameters() names a shared parameter once, by its first name (the input embedding).
        whole = dict(model.state_dict(keep_vars=True))
        first_name = {id(parameter): name for name, parameter in model.named_parameters()}
    else:  # gathered tensors: a tied weight is one tensor under two names
        whole = dict(state)
        first_name = {}
        for name, tensor in whole.items():
            first_name.setdefault(id(tensor), name)
    state = {
        name: tensor.detach()
        for name, tensor in whole.items()
        if first_name.get(id(tensor), name) == name and not name.endswith("rotary_emb.inv_freq")
    }
    try:  # transformers >= 5: undo the renamings applied when the model was loaded
        from transformers.core_model_loading import revert_weight_conversion
    except ImportError:
        return state
    return dict(revert_weight_conversion(model, state))


class AdapterFolders:
    """Folders ``ROOT/step-N`` for the adapters pushed to the engine: a new one per sync, the latest kept.

    A new folder each time (not one rewritten in place) because the engine may read an adapter
    after ``set_adapter`` returns, and so that an adapter file is never half-written while read.

    Args:
        root: The parent folder (created on first use). Older ``step-N`` folders found there, left
            by an earlier session of the run, are removed.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.count = 0
        self._prune(keep=None)

    def save(self, trained: TrainableModel, state: Mapping[str, Any] | None = None) -> Path:
        """Save the adapter of ``trained`` (an HF backend with a PEFT adapter) into the next folder.

        ``state``: its trainable weights gathered as plain tensors (an FSDP run's), PEFT names.
        """
        self.count += 1
        folder = self.root / f"step-{self.count}"
        staging = self.root / f".step-{self.count}.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)
        staging.parent.mkdir(parents=True, exist_ok=True)
        if state is None:
            trained.save_adapter(staging)
        else:
            save_adapter_state(trained.model, state, staging)
        staging.replace(folder)
        return folder

    def prune(self) -> None:
        """Delete every adapter folder but the latest (call once the engine serves the latest)."""
        self._prune(keep=self.root / f"step-{self.count}")

    def _prune(self, keep: Path | None) -> None:
        if not self.root.is_dir():
            return
        for child in self.root.iterdir():
            name = child.name.removeprefix(".").removesuffix(".tmp")
            if child != keep and child.is_dir() and _STEP_FOLDER.fullmatch(name):
                shutil.rmtree(child, ignore_errors=True)


def save_adapter_state(model: Any, state: Mapping[str, Any], folder: Path) -> None:  # Any: a (lazy) PEFT model
    """Write a PEFT adapter folder (what ``save_pretrained`` writes) from gathered adapter weights.

    An FSDP-sharded PEFT model cannot save itself (its weights are shards); its adapter weights,
    gathered by :meth:`training.distributed.ParallelModel.full_state_dict`, are written here under
    the names PEFT loads.
    """
    from peft import get_peft_model_state_dict
    from safetensors.torch import save_file

    adapter = get_peft_model_state_dict(model, state_dict=dict(state))
    folder.mkdir(parents=True, exist_ok=True)
    save_file({name: tensor.detach().cpu().contiguous() for name, tensor in adapter.items()}, folder / ADAPTER_FILE)
    model.peft_config["default"].save_pretrained(folder)


def adapter_root(run_dir: Path) -> Path:
    """The engine's adapter folder of this process: ``run_dir/vllm_adapter`` (``vllm_adapter-rankR`` on rank R > 0).

    Every data-parallel rank has an engine of its own, and must not delete the folder another
    rank's engine is about to read.
    """
    rank = int(os.environ.get("RANK", "0"))
    return run_dir / (ADAPTER_ROOT if rank == 0 else f"{ADAPTER_ROOT}-rank{rank}")
