"""``tsmg sft``'s checkpoints and ``--resume``, built on the HF Trainer's own checkpointing.

The Trainer writes ``checkpoints/checkpoint-N`` every ``run.checkpoint_every`` optimizer steps
(weights or the LoRA adapter, optimizer, scheduler, RNG states, ``trainer_state.json``) and keeps
only the newest (``save_total_limit=1``); ``trainer.train(resume_from_checkpoint=...)`` restores
all of it, the position in the data included. What tsmg adds:

* **Complete checkpoints only.** The Trainer writes ``trainer_state.json`` last, so a folder
  without it is a save that a ``kill -9`` cut short: :func:`latest_checkpoint` skips it and
  :func:`remove_incomplete` deletes it.
* **The run's cost.** :class:`RunCost` counts the CPU-seconds (every thread, user + system) and
  the training wall time of every session, and stores them in each checkpoint's
  ``trainer_state.json`` (an HF ``ExportableState``), so a resumed run's ``run.max_cpu_seconds``
  and its final ``time/cpu_s`` count the sessions before (up to their last checkpoint).
* **No checkpoint at the session's last step**: the final model follows at once, and the rows the
  Trainer logs when training ends (its summary, the cost) are then always past the newest
  checkpoint's step, so cutting ``metrics.jsonl`` back to that step
  (:func:`~tsmg.run_folder.truncate_metrics`) drops exactly what a resumed run writes again.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_callback import ExportableState
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

#: What the Trainer writes last into a checkpoint: a folder without it is incomplete.
TRAINER_STATE_FILE = "trainer_state.json"

#: Fields that may change between a fine-tune and its resumption (how long and how fast, not what).
RESUMABLE_CHANGES = frozenset({("run", "max_cpu_seconds"), ("run", "threads"), ("run", "checkpoint_every")})


def _checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """The ``checkpoint-N`` folders under ``folder``, oldest first."""
    found = []
    for path in folder.glob(f"{PREFIX_CHECKPOINT_DIR}-*") if folder.is_dir() else ():
        step = path.name.removeprefix(f"{PREFIX_CHECKPOINT_DIR}-")
        if path.is_dir() and step.isdigit():
            found.append((int(step), path))
    return sorted(found)


def latest_checkpoint(folder: Path) -> Path | None:
    """The newest complete checkpoint under ``folder`` (None: none)."""
    complete = [path for _, path in _checkpoints(folder) if (path / TRAINER_STATE_FILE).is_file()]
    return complete[-1] if complete else None


def remove_incomplete(folder: Path) -> None:
    """Delete the checkpoints a killed save left half-written."""
    for _, path in _checkpoints(folder):
        if not (path / TRAINER_STATE_FILE).is_file():
            shutil.rmtree(path, ignore_errors=True)


def checkpoint_step(checkpoint: Path) -> int:
    """The optimizer steps done when ``checkpoint`` was saved."""
    return int(TrainerState.load_from_json(str(checkpoint / TRAINER_STATE_FILE)).global_step)


class RunCost(TrainerCallback, ExportableState):
    """The run's CPU time and training wall time over every session; stops training at the CPU budget.

    Stored in each checkpoint by the Trainer (:meth:`state`); read back by :meth:`carried`.

    Args:
        cpu_started: ``time.process_time()`` when this session began (its set-up counts too).
        budget: ``run.max_cpu_seconds`` (None: no limit).
        cpu_before: CPU-seconds of the sessions before, up to the checkpoint this one resumes from.
        elapsed_before: Their training wall time, likewise.
    """

    def __init__(
        self,
        cpu_started: float = 0.0,
        budget: float | None = None,
        cpu_before: float = 0.0,
        elapsed_before: float = 0.0,
    ) -> None:
        self.cpu_started, self.budget = cpu_started, budget
        self.cpu_before, self.elapsed_before = cpu_before, elapsed_before
        self.train_started: float | None = None

    @classmethod
    def carried(cls, checkpoint: Path | None) -> tuple[float, float]:
        """The CPU-seconds and training wall time a checkpoint stored (zeros for a fresh start)."""
        if checkpoint is None:
            return 0.0, 0.0
        state = TrainerState.load_from_json(str(checkpoint / TRAINER_STATE_FILE))
        stored = state.stateful_callbacks.get(cls.__name__, {}).get("attributes", {})
        return float(stored.get("cpu_s", 0.0)), float(stored.get("elapsed_s", 0.0))

    def cpu_seconds(self) -> float:
        """CPU-seconds of the whole run so far (every thread, user + system)."""
        return self.cpu_before + time.process_time() - self.cpu_started

    def elapsed_seconds(self) -> float:
        """Wall time of the training so far, every session's (loading excluded)."""
        started = self.train_started
        return self.elapsed_before + (time.perf_counter() - started if started is not None else 0.0)

    def state(self) -> dict[str, Any]:
        """What a checkpoint stores (the Trainer calls it while saving one)."""
        return {"args": {}, "attributes": {"cpu_s": self.cpu_seconds(), "elapsed_s": self.elapsed_seconds()}}

    def on_train_begin(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **_: Any,  # Any: extra arguments
    ) -> None:
        """Start the training clock."""
        self.train_started = time.perf_counter()

    def on_step_end(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **_: Any,  # Any: extra arguments
    ) -> None:
        """Stop once the budget is spent; never checkpoint the session's last step (the final model follows)."""
        if self.budget is not None and self.cpu_seconds() >= self.budget:
            control.should_training_stop = True
        if control.should_training_stop:
            control.should_save = False
