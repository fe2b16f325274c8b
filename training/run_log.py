"""The run's metrics: an append-only ``metrics.jsonl``, TensorBoard events, and a learning-curve PNG.

``metrics.jsonl`` holds one JSON object per line, each with an integer ``step`` (the update
number; step 0 is the evaluation before training) and namespaced float metrics
(``rollout/...``, ``credit/...``, ``sampler/...``, ``loss/...``, ``optim/...``, ``time/...``,
``eval/...``). Lines are flushed as they are written, so a killed run loses at most a torn last
line. On resume, :class:`RunLog` first cuts the file back to the checkpoint's step (dropping
later lines and a torn one), so the resumed run neither skips nor repeats a step; TensorBoard
events past that step are purged the same way (``purge_step``).

TensorBoard and matplotlib are optional: without them the log still works, it only skips the
events or the plot (and says so in the log). Weights & Biases is opt-in (``run.wandb.enabled``,
the ``wandb`` extra): each row goes to W&B with the same keys at the same step, and the run's
configuration as the W&B config; wandb is imported only then, and its files stay under
``RUN/wandb`` (offline by default: ``wandb sync`` uploads them later). A resumed run logs to the
same W&B run (its id is kept in ``RUN/wandb/run-id``); W&B takes steps in increasing order only,
so there the updates a killed session logged past its checkpoint keep their first values
(``metrics.jsonl`` holds the redone ones).

Example:
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> with RunLog(folder, tensorboard=False) as log:
    ...     log.write(1, {"rollout/success_rate": 0.5})
    ...     log.write(2, {"rollout/success_rate": 0.75})
    >>> with RunLog(folder, resume_step=1, tensorboard=False) as log:
    ...     [row["step"] for row in read_metrics(folder / METRICS_FILE)]
    [1]
"""

from __future__ import annotations

import json
import logging
import math
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

# The run folder's names and readers live in the kernel; they stay importable from here.
from tsmg.run_folder import CURVE_FILE as CURVE_FILE
from tsmg.run_folder import METRICS_FILE as METRICS_FILE
from tsmg.run_folder import TENSORBOARD_DIR as TENSORBOARD_DIR
from tsmg.run_folder import read_metrics as read_metrics
from tsmg.run_folder import truncate_metrics as truncate_metrics

if TYPE_CHECKING:
    from training.config_sections import WandbConfig

logger = logging.getLogger(__name__)

#: The folder under the run folder that holds Weights & Biases' files (``wandb.init(dir=RUN)`` makes it).
WANDB_DIR = "wandb"
#: The file in :data:`WANDB_DIR` holding the W&B run id, so that a resumed run logs to the same W&B run.
WANDB_RUN_ID_FILE = "run-id"

#: Legend text of the metrics a learning curve usually shows.
CURVE_LABELS = {
    "rollout/success_rate": "training rollouts (sampled)",
    "eval/success_rate": "held-out evaluation",
}


def _json_value(value: Any) -> Any:  # Any: any JSON value a metrics row holds
    """Floats as JSON allows them: NaN and infinities become None (a skipped update's loss, say)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class RunLog:
    """Writes metrics to ``metrics.jsonl`` (and TensorBoard, and W&B), one object per step.

    Args:
        run_dir: The run folder.
        resume_step: When resuming, the checkpoint's step: later lines are dropped first.
            None: a fresh run (an existing file is appended to as is).
        tensorboard: Also write TensorBoard events under ``run_dir/tensorboard`` if installed.
        wandb: Also log to Weights & Biases when it is ``enabled`` (wandb must be installed).
        config: The run's configuration (a JSON-able mapping), W&B's config of the run.

    Raises:
        ImportError: W&B logging is enabled and wandb is not installed (the message says what to install).
    """

    def __init__(
        self,
        run_dir: str | Path,
        *,
        resume_step: int | None = None,
        tensorboard: bool = True,
        wandb: WandbConfig | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / METRICS_FILE
        if resume_step is not None:
            dropped = truncate_metrics(self.path, resume_step)
            if dropped:
                logger.info("dropped %d metrics lines past the checkpoint at step %d", dropped, resume_step)
        self._wandb: Any = None
        if wandb is not None and wandb.enabled:  # first: a missing wandb fails before any file is opened
            self._wandb = _wandb_run(self.run_dir, wandb, config or {}, resumed=resume_step is not None)
        self._handle: IO[str] = open(self.path, "a", encoding="utf-8")
        self._writer: Any = None
        if tensorboard:
            self._writer = _tensorboard_writer(self.run_dir / TENSORBOARD_DIR, resume_step)

    def write(self, step: int, metrics: Mapping[str, float | int | None]) -> None:
        """Append one line ``{"step": step, **metrics}`` and the scalars to TensorBoard and W&B."""
        row = {"step": int(step), **{key: _json_value(value) for key, value in metrics.items()}}
        self._handle.write(json.dumps(row) + "\n")
        self._handle.flush()
        # The sinks take the finite numbers; a NaN (a skipped update's loss) is null in the file.
        scalars = {
            key: value for key, value in metrics.items() if isinstance(value, int | float) and math.isfinite(value)
        }
        if self._writer is not None:
            for key, value in scalars.items():
                self._writer.add_scalar(key, value, step)
            self._writer.flush()
        if self._wandb is not None:
            self._wandb.log(scalars, step=int(step))

    def close(self) -> None:
        """Close the file, the TensorBoard writer and the W&B run."""
        self._handle.close()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None

    def __enter__(self) -> RunLog:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


def _tensorboard_writer(folder: Path, resume_step: int | None) -> Any:  # Any: SummaryWriter, imported only here
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboard is optional (the 'train' extra)
        logger.info("tensorboard is not installed: metrics go to metrics.jsonl only")
        return None
    # purge_step hides events a killed run wrote past the checkpoint, as truncate_metrics does.
    purge = None if resume_step is None else resume_step + 1
    return SummaryWriter(log_dir=str(folder), purge_step=purge)


def wandb_missing() -> str | None:
    """Why W&B logging cannot run here (one sentence naming the extra), or None when wandb is installed.

    Cheap (no import of wandb): the CLI asks before it builds the model.
    """
    import importlib.util

    if importlib.util.find_spec("wandb") is None:
        return (
            "run.wandb.enabled is set but wandb is not installed: pip install 'tsmg[wandb]' "
            "(or set run.wandb.enabled to false)"
        )
    return None


def _wandb_run(
    run_dir: Path, settings: WandbConfig, config: Mapping[str, Any], *, resumed: bool
) -> Any:  # Any: a wandb Run, imported only here (wandb is an optional extra)
    """A started W&B run whose files live under ``run_dir/wandb`` (the id kept there for a resume)."""
    missing = wandb_missing()
    if missing is not None:
        raise ImportError(missing)
    import wandb

    folder = run_dir / WANDB_DIR
    folder.mkdir(parents=True, exist_ok=True)
    id_file = folder / WANDB_RUN_ID_FILE
    if id_file.is_file():
        run_id = id_file.read_text(encoding="utf-8").strip()
    else:
        run_id = uuid.uuid4().hex[:8]  # W&B's own ids are 8 lowercase letters and digits too
        id_file.write_text(run_id + "\n", encoding="utf-8")
    return wandb.init(
        dir=str(run_dir),  # wandb makes run_dir/wandb: every file of the run stays in the run folder
        project=settings.project,
        entity=settings.entity,
        name=settings.name or run_dir.resolve().name,
        group=settings.group,
        tags=list(settings.tags) or None,
        mode=settings.mode,
        id=run_id,
        resume="allow" if resumed else None,
        config=dict(config),
        # The trainer prints its own progress; W&B capturing the console would only copy it.
        settings=wandb.Settings(console="off"),
    )


def plot_learning_curve(
    rows: Sequence[Mapping[str, Any]],
    path: str | Path,
    *,
    title: str = "",
    keys: Sequence[str] = ("rollout/success_rate", "eval/success_rate"),
) -> Path | None:
    """Plot success (or any ``keys``) against the update step into a PNG; None without matplotlib.

    Args:
        rows: Metrics rows (as read by :func:`read_metrics`).
        path: Where to write the PNG.
        title: The plot's title.
        keys: Metrics to draw, one line each (those absent from every row are left out).

    Returns:
        The PNG's path, or None when matplotlib is missing or there is nothing to draw.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.info("matplotlib is not installed: no learning-curve plot")
        return None
    series = {
        key: [(int(row["step"]), float(row[key])) for row in rows if isinstance(row.get(key), int | float)]
        for key in keys
    }
    series = {key: points for key, points in series.items() if points}
    if not series:
        return None
    figure, axes = plt.subplots(figsize=(7, 4))
    for key, points in series.items():
        steps, values = zip(*points, strict=True)
        label = CURVE_LABELS.get(key, key)
        axes.plot(steps, values, marker="o" if len(points) < 40 else None, markersize=3, label=label)
    axes.set_xlabel("update")
    axes.set_ylabel("success rate" if all("success" in key for key in series) else "value")
    if all("rate" in key for key in series):
        axes.set_ylim(-0.02, 1.02)
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right")
    if title:
        axes.set_title(title)
    figure.tight_layout()
    out = Path(path)
    figure.savefig(out, dpi=110)
    plt.close(figure)
    return out


def quiet_library_progress() -> None:
    """Hide the progress bars transformers draws while loading and saving models (runs print their own progress)."""
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
