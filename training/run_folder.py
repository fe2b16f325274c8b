"""The training loop's run folder: what a training run writes, how a resumed run picks it up, and how it ends.

The folder's names, layout, truncation and readers have their home in :mod:`tsmg.run_folder`
(the kernel, which eval, view and export read it through); this module is what the training loop
does with it, and keeps the names importable from here. Layout of ``run.out_dir``:

* ``config.yaml``: the whole configuration (a resumed run must match it, except how long and
  how fast it runs: :data:`RESUMABLE_CHANGES`);
* ``metrics.jsonl`` and ``tensorboard/``: one row per update (:mod:`training.run_log`);
* ``episodes.jsonl``: every ``run.episodes_every``-th update's episodes, the training records;
* ``checkpoints/step-N``: weights or adapter, optimizer, schedule and generator states
  (:mod:`training.checkpoint`; written atomically, the newest ``run.keep_last`` kept); an FSDP
  run's weights and optimizer state as sharded state (``sharded/``, torch distributed checkpoint);
* ``base_model/``: a model built from scratch (``model.spec: tiny``);
* at the end ``final/`` (a full model folder: ``tsmg eval --model hf:RUN/final``), ``adapter/``
  (LoRA) and ``learning_curve.png``.

Resuming cuts ``metrics.jsonl`` and ``episodes.jsonl`` back to the checkpoint's update, so the
resumed run neither skips nor repeats one. Only rank 0 writes; every rank reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import BaseModel

from training.checkpoint import (
    Checkpoint,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
    save_final_model,
    start_checkpoint,
)
from training.distributed import ParallelModel, World
from training.run_log import RunLog, plot_learning_curve
from tsmg.episode import Episode
from tsmg.run_folder import (
    CHECKPOINTS_DIR,
    CONFIG_FILE,
    CURVE_FILE,
    EPISODES_FILE,
    SHARDED_DIR,
    append_episodes,
    checkpoint_name,
    read_metrics,
    truncate_episodes,
)

if TYPE_CHECKING:
    import torch

    from backends.base import TrainableModel
    from training.config_sections import RunConfig

#: Fields that may change between a run and its resumption (how long and how fast, not what).
RESUMABLE_CHANGES = frozenset(
    {
        ("run", "updates"),
        ("run", "episodes"),
        ("run", "max_seconds"),
        ("run", "max_cpu_seconds"),
        ("run", "threads"),
        ("run", "wandb"),  # where the metrics are also logged, not what is trained
        ("distributed", "timeout_s"),
    }
)


@dataclass
class RunFolder:
    """One run's folder, as the training loop uses it.

    Attributes:
        path: The folder.
        world: This process's place among the training processes (rank 0 writes).
        keep_last: Checkpoints kept.
    """

    path: Path
    world: World
    keep_last: int

    @property
    def checkpoints(self) -> Path:
        """The checkpoints folder."""
        return self.path / CHECKPOINTS_DIR

    def open(self, config: BaseModel, resume: bool, prepare: Callable[[], object]) -> Checkpoint | None:
        """Check the folder, write the config, and load the checkpoint to resume from (if any).

        Args:
            config: The run's configuration (a :class:`~training.config.TrainConfig`): the folder
                stores it and compares it on resume, whole, without reading any section of it.
            resume: Continue from the newest complete checkpoint (a fresh start when there is none).
            prepare: Rank 0 runs it once the folder exists, before the other ranks go on (e.g.
                building a model from scratch that every rank then loads).

        Returns:
            The checkpoint to resume from (None: a fresh start).

        Raises:
            FileExistsError: A fresh run in a folder that already holds one.
            ValueError: A resumed run whose configuration changed.
        """
        check_run_folder(config, self.path, resume)  # every rank checks before rank 0 writes
        self.world.barrier()
        if self.world.is_main:
            self.path.mkdir(parents=True, exist_ok=True)
            # TrainConfig.to_yaml's text: every field, defaults included, in the schema's order.
            text = yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False, allow_unicode=True)
            (self.path / CONFIG_FILE).write_text(text, encoding="utf-8")
            prepare()
        self.world.barrier()
        found = latest_checkpoint(self.checkpoints) if resume else None
        checkpoint = load_checkpoint(found) if found is not None else None
        if resume and self.world.is_main:
            truncate_episodes(self.path / EPISODES_FILE, checkpoint.step if checkpoint else -1)
        return checkpoint

    def metrics_log(
        self, resume: bool, checkpoint: Checkpoint | None, run: RunConfig, settings: Mapping[str, Any]
    ) -> RunLog | None:
        """Rank 0's metrics log (cut back to the checkpoint when resuming); None on the other ranks.

        It writes TensorBoard events and W&B rows as ``run`` asks; W&B also records ``settings``,
        the whole run's configuration as JSON values.
        """
        if not self.world.is_main:
            return None
        resume_step = (checkpoint.step if checkpoint else -1) if resume else None
        return RunLog(
            self.path,
            resume_step=resume_step,
            tensorboard=run.tensorboard,
            wandb=run.wandb,
            config=settings,
        )

    def write_episodes(self, episodes: Iterable[Episode]) -> None:
        """Append training episodes to ``episodes.jsonl`` (rank 0)."""
        if self.world.is_main:
            append_episodes(self.path, episodes)

    def save_checkpoint(
        self,
        step: int,
        *,
        save_weights: Callable[[Path], None],
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        state: dict[str, Any],
        parallel: ParallelModel | None = None,
        save_extra: Callable[[Path], None] | None = None,
    ) -> Path:
        """Write ``checkpoints/step-{step}`` (rank 0; under FSDP every rank writes its shards first); every rank waits.

        An FSDP run's trained weights and optimizer state go to ``sharded/`` (torch distributed
        checkpoint, each rank its shards) in the checkpoint's temporary folder; rank 0 then adds the
        rest and renames it, so a ``kill -9`` of any rank still never leaves a half checkpoint.
        ``save_extra`` writes what else a resumed run needs into the folder (rank 0, any strategy).
        """
        folder = self.checkpoints / checkpoint_name(step)
        temporary = None
        if parallel is not None and parallel.sharded:
            temporary = self.world.broadcast(start_checkpoint(self.checkpoints, step) if self.world.is_main else None)
            assert temporary is not None
            parallel.save_sharded(temporary / SHARDED_DIR, optimizer)
            self.world.barrier()
        if self.world.is_main:
            sharded = temporary is not None

            def write(target: Path) -> None:
                if not sharded:
                    save_weights(target)
                if save_extra is not None:
                    save_extra(target)

            folder = save_checkpoint(
                self.checkpoints,
                step,
                save_weights=write,
                optimizer=optimizer if temporary is None else None,
                scheduler=scheduler,
                state=state,
                keep_last=self.keep_last,
                temporary=temporary,
            )
        self.world.barrier()  # no rank runs ahead of a checkpoint it could be resumed from
        return folder

    def finish(
        self, backend: TrainableModel | None, lora: bool, log: RunLog | None, title: str
    ) -> tuple[Path | None, Path | None, Path | None, list[dict[str, Any]]]:
        """Write the final model and the learning curve (rank 0).

        Returns:
            The final model folder, the LoRA adapter folder, the learning-curve PNG (each None
            where not written) and every metrics row.
        """
        final_model = adapter = curve = None
        rows: list[dict[str, Any]] = []
        if log is not None and backend is not None:
            final_model, adapter = save_final_model(backend, lora, self.path)
            rows = read_metrics(log.path)
            curve = plot_learning_curve(rows, self.path / CURVE_FILE, title=title)
        self.world.barrier()
        return final_model, adapter, curve, rows


def check_run_folder(
    config: BaseModel,
    run_dir: Path,
    resume: bool,
    *,
    resumable: frozenset[tuple[str, str]] = RESUMABLE_CHANGES,
    holds: str = "a training run",
) -> None:
    """Refuse to mix runs: a fresh run in a used folder, or a resumed run whose config changed.

    Args:
        config: The run's configuration (a :class:`~training.config.TrainConfig`, or ``tsmg sft``'s).
        run_dir: The run folder.
        resume: Whether the run continues the folder's.
        resumable: ``(section, field)`` pairs that may change on resume.
        holds: What a used folder holds, for the message.

    Raises:
        FileExistsError: A fresh run in a folder that already holds one.
        ValueError: A resumed run whose configuration changed (the message names the fields).
    """
    stored = run_dir / CONFIG_FILE
    if not stored.exists():
        return
    if not resume:
        raise FileExistsError(f"{run_dir} already holds {holds}: pass --resume, or choose another --out")
    before = type(config).model_validate(yaml.safe_load(stored.read_text(encoding="utf-8"))).model_dump(mode="json")
    now = config.model_dump(mode="json")
    changed = [
        f"{section}.{name}" if name else section
        for section, fields in now.items()
        for name, value in (fields.items() if isinstance(fields, dict) else [("", fields)])
        if _field(before, section, name) != value and (section, name) not in resumable
    ]
    if changed:
        raise ValueError(f"{run_dir} holds a run with another configuration (changed: {', '.join(changed)})")


def _field(config: dict[str, Any], section: str, name: str) -> Any:  # Any: any YAML value
    """A field of a dumped configuration: ``section.name``, or a top-level field when ``name`` is empty."""
    value = config.get(section)
    return value if not name else (value or {}).get(name)
