"""The run folder: the one place that names what ``tsmg train`` and ``tsmg eval`` write, and reads it back.

Training (``tsmg train``, ``run.out_dir``):

* ``config.yaml``: the whole configuration (a resumed run must match it);
* ``metrics.jsonl``: one row per update, ``{"step": N, ...}`` (step 0: the evaluation before
  training); ``tensorboard/`` the same as events;
* ``episodes.jsonl``: every ``run.episodes_every``-th update's episodes, the training records,
  their ids starting with the update that played them (``u{N}/...``, a dynamic-sampling refill
  ``u{N}r{K}/...``: :func:`update_of`);
* ``checkpoints/step-N/``: ``state.json`` (written last: a folder without it is incomplete),
  ``model/`` or ``adapter/``, or an FSDP run's ``sharded/``;
* ``base_model/``: a model built from scratch (``model.spec: tiny``);
* at the end ``final/`` (a full model folder), ``adapter/`` (LoRA) and ``learning_curve.png``.

Evaluation (``tsmg eval``): ``config.json``, ``episodes.jsonl`` (finished episodes),
``failures.jsonl`` (episodes that could not finish), ``game_errors.jsonl`` (a game's own code
raised), ``summary.json`` and ``report.md``. ``tsmg rollout --out`` leaves ``episodes.jsonl`` and
``summary.json``.

Writing is append-only, one JSON line at a time, flushed: a killed writer leaves at most a torn
last line, which readers skip (:func:`read_metrics`, :func:`tsmg.episode.read_episodes`) and a
resumed writer cuts off (:func:`repair_jsonl`). A resumed training run cuts ``metrics.jsonl``
and ``episodes.jsonl`` back to its checkpoint's update (:func:`truncate_metrics`,
:func:`truncate_episodes`), so it neither skips nor repeats one.

This module is part of the kernel: train, eval, view and export all read the folder through it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tsmg.episode import Episode, read_episodes, write_episodes

# Training.
CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"
CURVE_FILE = "learning_curve.png"
CHECKPOINTS_DIR = "checkpoints"
#: In a checkpoint: the trainer's counters, written last (a checkpoint without it is incomplete).
STATE_FILE = "state.json"
#: In a checkpoint: the full model (full fine-tuning).
MODEL_DIR = "model"
#: In a checkpoint: an FSDP run's trained parameters and optimizer state, one shard per process.
SHARDED_DIR = "sharded"
#: In a checkpoint and at the end of a LoRA run: the adapter.
ADAPTER_DIR = "adapter"
#: At the end of a run: the full trained model (``tsmg eval --model hf:RUN/final``).
FINAL_DIR = "final"
#: A model built from scratch (``model.spec: tiny``) before training.
BASE_MODEL_DIR = "base_model"

# Evaluation (and ``tsmg rollout --out``).
EVAL_CONFIG_FILE = "config.json"
FAILURES_FILE = "failures.jsonl"
GAME_ERRORS_FILE = "game_errors.jsonl"
SUMMARY_FILE = "summary.json"
REPORT_FILE = "report.md"

# Both.
EPISODES_FILE = "episodes.jsonl"

_STEP_DIR = re.compile(r"^step-(\d+)$")
#: A training episode id starts with its update, ``u{N}/``, or ``u{N}r{K}/`` for a refill round.
_UPDATE_PREFIX = re.compile(r"^u(\d+)(?:r\d+)?/")


def checkpoint_name(step: int) -> str:
    """The folder name of the checkpoint after ``step`` updates (``step-N``)."""
    return f"step-{step}"


def checkpoint_step(name: str) -> int | None:
    """The update a checkpoint folder name stands for (None: not a checkpoint's name)."""
    match = _STEP_DIR.match(name)
    return int(match.group(1)) if match else None


def update_of(episode_id: str) -> int | None:
    """The training update that played an episode, from its id (None: not a training episode's id).

    Example:
        >>> update_of("u3/s17/g0"), update_of("u3r1/s17/g0"), update_of("FrozenLake-v0|random|0")
        (3, 3, None)
    """
    match = _UPDATE_PREFIX.match(episode_id)
    return int(match.group(1)) if match else None


def training_run_of(model_folder: str | Path) -> Path | None:
    """The training run a model folder belongs to (``RUN/checkpoints/step-N``, ``RUN/final``, ``RUN/base_model``).

    ``base_model`` is the model a run built before training (the tiny model from its seed): the
    run's "before". None: not a training run's model folder.
    """
    folder = Path(model_folder).expanduser()
    if folder.parent.name == CHECKPOINTS_DIR and checkpoint_step(folder.name) is not None:
        run = folder.parent.parent
    elif folder.name in (FINAL_DIR, BASE_MODEL_DIR):
        run = folder.parent
    else:
        return None
    return run if (run / CONFIG_FILE).is_file() else None


def is_training_run(folder: str | Path) -> bool:
    """Whether ``folder`` holds a training run (its ``config.yaml`` or ``metrics.jsonl``)."""
    path = Path(folder)
    return (path / CONFIG_FILE).is_file() or (path / METRICS_FILE).is_file()


def append_episodes(folder: str | Path, episodes: Iterable[Episode], *, token_ids: bool = True) -> int:
    """Append episodes to the folder's ``episodes.jsonl`` (created); returns how many were written."""
    return write_episodes(Path(folder) / EPISODES_FILE, episodes, token_ids=token_ids)


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Every complete line of a ``metrics.jsonl`` file (a torn last line is skipped; none: [])."""
    rows: list[dict[str, Any]] = []
    file = Path(path)
    if not file.exists():
        return rows
    for line in file.read_text(encoding="utf-8").splitlines(keepends=True):
        if not line.endswith("\n"):
            break  # torn write of a killed run: never completed
        if line.strip():
            rows.append(json.loads(line))
    return rows


def truncate_metrics(path: str | Path, last_step: int) -> int:
    """Keep only the lines with ``step <= last_step`` (atomically); returns how many were dropped."""
    file = Path(path)
    if not file.exists():
        return 0
    rows = read_metrics(file)
    kept = [row for row in rows if int(row["step"]) <= last_step]
    original = file.read_text(encoding="utf-8")
    text = "".join(json.dumps(row) + "\n" for row in kept)
    if text != original:
        _replace(file, text)
    return len(rows) - len(kept)


def truncate_episodes(path: str | Path, last_step: int) -> int:
    """Drop the episodes of updates past ``last_step`` (atomically); returns how many were dropped.

    An episode's update is read from its id (:func:`update_of`); one without an update keeps its place.
    """
    file = Path(path)
    if not file.exists():
        return 0
    episodes = list(read_episodes(file))
    kept = [episode for episode in episodes if (update_of(episode.episode_id) or 0) <= last_step]
    _replace(file, "".join(episode.to_json() + "\n" for episode in kept))
    return len(episodes) - len(kept)


def repair_jsonl(path: str | Path) -> int:
    """Cut a torn last line (left by a killed writer) off ``path``; returns the bytes removed."""
    file = Path(path)
    if not file.exists():
        return 0
    with open(file, "rb+") as handle:
        data = handle.read()
        if not data or data.endswith(b"\n"):
            return 0
        keep = data.rfind(b"\n") + 1
        handle.truncate(keep)
        return len(data) - keep


def _replace(file: Path, text: str) -> None:
    """Write ``text`` to a sibling and rename it over ``file``: a reader never sees half of it."""
    temporary = file.with_suffix(file.suffix + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, file)
