"""Checkpoints that a ``kill -9`` can never leave half-written, and resuming from the last one.

A checkpoint is a folder ``checkpoints/step-N/`` (N = updates done) holding:

* ``model/`` (full fine-tuning: ``save_pretrained`` weights and the tokenizer) or ``adapter/``
  (LoRA: the PEFT adapter only; the base model is named in the run's ``config.yaml``);
* ``optimizer.pt`` and ``scheduler.pt`` (their ``state_dict``); an FSDP run writes its trained
  weights and optimizer state instead as ``sharded/``, a torch distributed checkpoint (DCP) of
  one shard per process, which any number of processes (one included) reads back;
* ``rng.pt`` (torch CPU and CUDA generator states) and ``state.json`` (the step, the trainer's
  counters, Python's and NumPy's global generator states).

A checkpoint is also a model: :func:`checkpoint_weights` (:mod:`backends.checkpoints`, re-exported
here) finds the weights of a checkpoint folder (the base model of a LoRA checkpoint comes from the
run's ``config.yaml``), so that ``tsmg eval --model hf:RUN/checkpoints/step-N`` plays it and an
opponent pool can draw it.

Everything is written into a hidden temporary folder first and renamed to ``step-N`` at the end;
a rename is atomic, so a folder named ``step-N`` is always complete and a killed save leaves only
a temporary folder, which :func:`latest_checkpoint` ignores and the next save removes. Only the
newest ``keep_last`` checkpoints are kept.

Example:
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> for step in (1, 2, 3):
    ...     _ = save_checkpoint(folder, step, state={"note": step}, keep_last=2)
    >>> [step for step, _ in list_checkpoints(folder)], load_checkpoint(latest_checkpoint(folder)).state["note"]
    ([2, 3], 3)
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from backends.checkpoints import CheckpointWeights as CheckpointWeights  # re-exported: the trainer's name for it
from backends.checkpoints import checkpoint_weights
from tsmg.run_folder import (
    ADAPTER_DIR,
    CHECKPOINTS_DIR,
    FINAL_DIR,
    MODEL_DIR,
    SHARDED_DIR,
    STATE_FILE,
    checkpoint_name,
    checkpoint_step,
)

if TYPE_CHECKING:
    import torch

    from backends.base import TrainableModel

_TEMPORARY_PREFIX = ".tmp-"


@dataclass
class Checkpoint:
    """A loaded checkpoint.

    Attributes:
        path: Its folder.
        step: Updates done when it was saved.
        state: The trainer's counters and anything else it stored (``state.json``).
        optimizer: The optimizer's ``state_dict`` (None if none was saved).
        scheduler: The scheduler's ``state_dict`` (None if none was saved).
        rng: Generator states, for :func:`restore_rng_state`.
    """

    path: Path
    step: int
    state: dict[str, Any] = field(default_factory=dict)
    optimizer: dict[str, Any] | None = None
    scheduler: dict[str, Any] | None = None
    rng: dict[str, Any] = field(default_factory=dict)

    @property
    def model_dir(self) -> Path | None:
        """The full model folder (full fine-tuning), if the checkpoint has one."""
        folder = self.path / MODEL_DIR
        return folder if folder.is_dir() else None

    @property
    def adapter_dir(self) -> Path | None:
        """The LoRA adapter folder, if the checkpoint has one."""
        folder = self.path / ADAPTER_DIR
        return folder if folder.is_dir() else None

    @property
    def sharded_dir(self) -> Path | None:
        """The FSDP run's sharded state (DCP: trained parameters and optimizer), if the checkpoint has one."""
        folder = self.path / SHARDED_DIR
        return folder if folder.is_dir() else None


def list_checkpoints(directory: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints in ``directory`` as ``(step, path)``, oldest first."""
    folder = Path(directory)
    if not folder.is_dir():
        return []
    found = []
    for child in folder.iterdir():
        step = checkpoint_step(child.name)
        if step is not None and (child / STATE_FILE).is_file():
            found.append((step, child))
    return sorted(found)


def latest_checkpoint(directory: str | Path) -> Path | None:
    """The newest complete checkpoint in ``directory`` (None if there is none)."""
    found = list_checkpoints(directory)
    return found[-1][1] if found else None


def capture_rng_state() -> dict[str, Any]:
    """The global generators' states: Python's, NumPy's legacy one, torch's CPU (and CUDA) ones.

    The trainer itself draws from generators derived from (run seed, update), which need no
    saving; these are the global ones that libraries may still touch (dropout uses torch's).
    """
    import torch

    version, internal, gauss = random.getstate()
    kind, keys, position, has_gauss, cached = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "python": [version, list(internal), gauss],
        "numpy": [kind, np.asarray(keys).tolist(), int(position), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: Mapping[str, Any]) -> None:
    """Restore what :func:`capture_rng_state` captured (missing parts are left alone)."""
    import torch

    if "python" in state:
        version, internal, gauss = state["python"]
        random.setstate((version, tuple(internal), gauss))
    if "numpy" in state:
        kind, keys, position, has_gauss, cached = state["numpy"]
        np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), position, has_gauss, cached))
    if "torch" in state:
        torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    directory: str | Path,
    step: int,
    *,
    save_weights: Callable[[Path], None] | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    state: Mapping[str, Any] | None = None,
    keep_last: int | None = None,
    temporary: Path | None = None,
) -> Path:
    """Write ``directory/step-{step}`` atomically, then keep only the newest ``keep_last``.

    Args:
        directory: The checkpoints folder (created if missing).
        step: Updates done.
        save_weights: Writes the weights into the folder it is given (e.g. ``model/`` or
            ``adapter/`` inside it; see :func:`weights_saver`).
        optimizer: A torch optimizer (its ``state_dict`` is saved).
        scheduler: A torch LR scheduler (its ``state_dict`` is saved).
        state: JSON-ready counters of the trainer.
        keep_last: Checkpoints to keep (None: all).
        temporary: The folder :func:`start_checkpoint` made and others already wrote into (e.g.
            every process its shards); None: a new one.

    Returns:
        The checkpoint's folder.
    """
    import torch

    root = Path(directory)
    if temporary is None:
        temporary = start_checkpoint(root, step)
    if save_weights is not None:
        save_weights(temporary)
    if optimizer is not None:
        torch.save(optimizer.state_dict(), temporary / "optimizer.pt")
    if scheduler is not None:
        torch.save(scheduler.state_dict(), temporary / "scheduler.pt")
    rng = capture_rng_state()
    torch.save({key: rng[key] for key in ("torch", "cuda") if key in rng}, temporary / "rng.pt")
    document = {
        "step": step,
        "state": dict(state or {}),
        "rng": {"python": rng["python"], "numpy": rng["numpy"]},
    }
    # state.json is written last: list_checkpoints only counts folders that have it.
    _write_synced(temporary / STATE_FILE, json.dumps(document))
    final = root / checkpoint_name(step)
    if final.exists():  # re-saving a step (e.g. a finished run saved again): swap it out
        retired = root / f"{_TEMPORARY_PREFIX}retired-{step}-{os.getpid()}"
        os.replace(final, retired)
        shutil.rmtree(retired, ignore_errors=True)
    os.replace(temporary, final)
    if keep_last is not None:
        prune_checkpoints(root, keep_last)
    return final


def start_checkpoint(directory: str | Path, step: int) -> Path:
    """A new hidden temporary folder for checkpoint ``step`` (leftovers of killed saves removed first).

    :func:`save_checkpoint` completes it and renames it to ``step-N``.
    """
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    _remove_temporaries(root)
    temporary = root / f"{_TEMPORARY_PREFIX}step-{step}-{os.getpid()}"
    temporary.mkdir()
    return temporary


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Read a checkpoint folder written by :func:`save_checkpoint`.

    Raises:
        FileNotFoundError: The folder is not a complete checkpoint.
    """
    import torch

    folder = Path(path)
    state_file = folder / STATE_FILE
    if not state_file.is_file():
        raise FileNotFoundError(f"{folder} is not a complete checkpoint (no {STATE_FILE})")
    document = json.loads(state_file.read_text(encoding="utf-8"))
    rng: dict[str, Any] = dict(document.get("rng", {}))
    if (folder / "rng.pt").is_file():
        rng.update(torch.load(folder / "rng.pt", weights_only=True))

    def optional(name: str) -> dict[str, Any] | None:
        file = folder / name
        return torch.load(file, weights_only=True) if file.is_file() else None

    return Checkpoint(
        path=folder,
        step=int(document["step"]),
        state=dict(document.get("state", {})),
        optimizer=optional("optimizer.pt"),
        scheduler=optional("scheduler.pt"),
        rng=rng,
    )


def prune_checkpoints(directory: str | Path, keep_last: int) -> list[Path]:
    """Delete all but the newest ``keep_last`` checkpoints; returns the deleted folders."""
    if keep_last < 1:
        raise ValueError(f"keep_last must be at least 1, got {keep_last}")
    found = list_checkpoints(directory)
    doomed = [path for _, path in found[:-keep_last]]
    for path in doomed:
        shutil.rmtree(path, ignore_errors=True)
    return doomed


def weights_saver(backend: TrainableModel, finetune: str) -> Callable[[Path], None]:
    """A ``save_weights`` callback for an HF backend: ``adapter/`` for LoRA, ``model/`` (+ tokenizer) otherwise."""

    def save(folder: Path) -> None:
        if finetune == "lora":
            backend.save_adapter(folder / ADAPTER_DIR)
        else:
            backend.model.save_pretrained(folder / MODEL_DIR)
            backend.tokenizer.save_pretrained(folder / MODEL_DIR)

    return save


def save_final_model(backend: TrainableModel, lora: bool, run_dir: Path) -> tuple[Path, Path | None]:
    """Write ``run_dir/final``: a full model folder with its tokenizer, which ``HFBackend`` loads.

    A LoRA adapter is merged into it (``backend`` keeps the merged model afterwards) and also
    kept on its own in ``run_dir/adapter`` (for vLLM's ``--lora-modules``). Both are written to a
    temporary folder first and renamed.

    Returns:
        The model folder and the adapter folder (None without LoRA).
    """
    adapter = None
    if lora:
        adapter = run_dir / ADAPTER_DIR
        staging = run_dir / f".{ADAPTER_DIR}.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        backend.save_adapter(staging)
        shutil.rmtree(adapter, ignore_errors=True)
        staging.replace(adapter)
        backend.merge_adapter()  # the backend is not used for training after this
    final = run_dir / FINAL_DIR
    staging = run_dir / f".{FINAL_DIR}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    backend.model.save_pretrained(staging)
    backend.tokenizer.save_pretrained(staging)
    shutil.rmtree(final, ignore_errors=True)
    staging.replace(final)
    return final, adapter


def run_checkpoints(path: str | Path) -> list[Path]:
    """The checkpoints a folder stands for, oldest first: a run folder's or a ``checkpoints/`` folder's, or itself.

    A run folder without checkpoints stands for its ``final/`` model, if it has one; a model folder
    stands for itself. Empty when the folder holds no checkpoint (yet).
    """
    folder = Path(path)
    if (folder / "config.json").is_file() or checkpoint_weights(folder) is not None:
        return [folder]
    inner = folder / CHECKPOINTS_DIR
    found = [checkpoint for _, checkpoint in list_checkpoints(inner if inner.is_dir() else folder)]
    if not found and (folder / FINAL_DIR / "config.json").is_file():
        found.append(folder / FINAL_DIR)
    return found


def _remove_temporaries(root: Path) -> None:
    """Leftovers of saves that were killed half-way (never a complete checkpoint)."""
    for child in root.iterdir():
        if child.name.startswith(_TEMPORARY_PREFIX):
            shutil.rmtree(child, ignore_errors=True)


def _write_synced(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
