"""Run folders as the viewer sees them: what kind of run, its summary, metrics and episodes.

An evaluation folder (``tsmg eval``) holds ``config.json``, ``episodes.jsonl``,
``failures.jsonl`` and ``summary.json``; a training folder (``tsmg train``) holds
``config.yaml``, ``metrics.jsonl`` and, when ``run.episodes_every`` is set, ``episodes.jsonl``
of every k-th update; ``tsmg rollout --out`` leaves ``episodes.jsonl`` and a plain summary.
Whatever is missing or unreadable becomes a :class:`~tsmg.apps.view.records.ReadProblem`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tsmg.apps.view.records import ReadProblem, finite, lenient_episode, normalise_episode, read_jsonl, seat_results
from tsmg.episode import Episode
from tsmg.run_folder import (
    CONFIG_FILE,
    EPISODES_FILE,
    EVAL_CONFIG_FILE,
    FAILURES_FILE,
    METRICS_FILE,
    SUMMARY_FILE,
    is_training_run,
)
from tsmg.run_folder import update_of as update_of_id

RunKind = Literal["eval", "train", "episodes"]


class NotARunError(ValueError):
    """A path given to ``tsmg view`` is not a run folder."""


@dataclass
class RunFolder:
    """One run folder, read tolerantly.

    Attributes:
        path: The folder.
        name: A short name, unique within the report.
        kind: ``eval``, ``train`` or ``episodes`` (a folder with episodes only).
        problems: What could not be read so far (reading episodes adds to it).
        config: ``config.json`` or ``config.yaml`` content (None if missing or unreadable).
        summary: ``summary.json`` content when it is an evaluation summary.
        metrics: Rows of ``metrics.jsonl`` (training runs).
    """

    path: Path
    name: str
    kind: RunKind
    problems: list[ReadProblem] = field(default_factory=list)
    config: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    metrics: list[dict[str, Any]] = field(default_factory=list)

    def episode_files(self) -> list[Path]:
        """The JSONL files holding episodes (finished ones, then failed ones)."""
        return [self.path / name for name in (EPISODES_FILE, FAILURES_FILE) if (self.path / name).exists()]

    def episodes(self) -> Iterator[dict[str, Any]]:
        """The display record of every readable episode, streaming; problems are recorded."""
        for path in self.episode_files():
            for line, raw, problem in read_jsonl(path):
                if problem is not None:
                    self.problems.append(problem)
                if raw is None:
                    continue
                record = normalise_episode(raw, line)
                if path.name == FAILURES_FILE and record["error"] is None:
                    record["error"] = "listed in failures.jsonl"
                record["update"] = update_of(raw, record["episode_id"])
                record["outcomes"] = seat_results(raw)
                yield record

    def statistics_episodes(self) -> Iterator[Episode]:
        """Finished episodes as :class:`Episode` objects for the statistics (text dropped)."""
        path = self.path / EPISODES_FILE
        if not path.exists():
            return
        for _, raw, _ in read_jsonl(path):
            episode = lenient_episode(raw) if raw is not None else None
            if episode is not None and episode.error is None:
                yield episode


def update_of(raw: dict[str, Any], episode_id: str) -> int | None:
    """The training update an episode was played in (an ``update`` field, or its ``u{N}/`` id prefix)."""
    value = raw.get("update")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return update_of_id(episode_id)


def open_run(path: Path, taken_names: Sequence[str] = ()) -> RunFolder:
    """Inspect a run folder: its kind, config, summary and metrics.

    Raises:
        NotARunError: ``path`` is not a folder, or holds none of the files of a run.
    """
    if not path.is_dir():
        raise NotARunError(f"{path} is not a folder: give a run folder made by `tsmg eval` or `tsmg train`")
    has = {name for name in (EPISODES_FILE, FAILURES_FILE, SUMMARY_FILE, METRICS_FILE) if (path / name).exists()}
    if not has:
        raise NotARunError(
            f"{path} holds no episodes.jsonl, summary.json or metrics.jsonl: "
            "give a run folder made by `tsmg eval`, `tsmg train` or `tsmg rollout --out`"
        )
    kind: RunKind = (
        "train"
        if is_training_run(path)
        else "eval"
        if (path / EVAL_CONFIG_FILE).exists() or SUMMARY_FILE in has
        else "episodes"
    )
    run = RunFolder(path=path, name=_unique_name(path, taken_names), kind=kind)
    run.config = _read_config(run)
    if kind != "train":
        run.summary = _read_summary(run)
    if METRICS_FILE in has:
        run.metrics = _read_metrics(run)
    if EPISODES_FILE not in has and kind != "train":
        run.problems.append(ReadProblem(EPISODES_FILE, None, "missing: no transcripts to show"))
    return run


def _holds_records(path: Path) -> bool:
    """Whether ``path`` is a folder holding a run's records (episodes, a summary or training metrics)."""
    names = (EPISODES_FILE, FAILURES_FILE, SUMMARY_FILE, METRICS_FILE)
    return path.is_dir() and any((path / name).is_file() for name in names)


def expand_run_paths(paths: Sequence[Path]) -> list[Path]:
    """The run folders ``paths`` name: each run folder itself, and each folder of runs as its runs.

    A folder that is no run but holds run folders (``runs/``) stands for those of its
    sub-folders that hold records, in name order, as if each had been named (one level deep; a
    report folder inside is no run and is passed over). Anything else is kept as given, for
    :func:`open_run` to refuse with its reason.

    Raises:
        NotARunError: A folder holds neither a run's files nor a run folder.
    """
    expanded: list[Path] = []
    for path in paths:
        if not path.is_dir() or _holds_records(path):
            expanded.append(path)
            continue
        runs = sorted(child for child in path.iterdir() if _holds_records(child))
        if not runs:
            raise NotARunError(
                f"{path} holds no episodes.jsonl, summary.json or metrics.jsonl, nor a run folder that does: "
                "give a run folder made by `tsmg eval`, `tsmg train` or `tsmg rollout --out`, or a folder of them"
            )
        expanded.extend(runs)
    return expanded


def _unique_name(path: Path, taken: Sequence[str]) -> str:
    name = path.resolve().name or "run"
    parent = path.resolve().parent.name
    if name in taken and parent:
        name = f"{parent}/{name}"
    base, count = name, 2
    while name in taken:
        name, count = f"{base} ({count})", count + 1
    return name


def _read_config(run: RunFolder) -> dict[str, Any] | None:
    for name in (EVAL_CONFIG_FILE, CONFIG_FILE):
        path = run.path / name
        if not path.exists():
            continue
        try:
            if name.endswith(".json"):
                value = json.loads(path.read_text(encoding="utf-8", errors="replace"))
            else:
                import yaml

                value = yaml.safe_load(path.read_text(encoding="utf-8", errors="replace"))
        except ValueError as error:  # JSON and YAML errors are ValueErrors
            run.problems.append(ReadProblem(name, None, f"not readable ({error.__class__.__name__}): config not shown"))
            return None
        if isinstance(value, dict):
            return value
        run.problems.append(ReadProblem(name, None, "not a mapping: config not shown"))
        return None
    return None


def _read_summary(run: RunFolder) -> dict[str, Any] | None:
    """``summary.json`` if it is an evaluation summary; otherwise None, with the reason recorded."""
    path = run.path / SUMMARY_FILE
    if not path.exists():
        if (run.path / EPISODES_FILE).exists():
            run.problems.append(ReadProblem(SUMMARY_FILE, None, "missing: figures recomputed from episodes.jsonl"))
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except ValueError:
        run.problems.append(ReadProblem(SUMMARY_FILE, None, "not JSON: figures recomputed from episodes.jsonl"))
        return None
    if is_eval_summary(value):
        return value
    if isinstance(value, dict) and "success_rate" in value:  # tsmg rollout --out writes a flat summary
        return None
    run.problems.append(ReadProblem(SUMMARY_FILE, None, "not an evaluation summary: figures recomputed from episodes"))
    return None


def is_eval_summary(value: Any) -> bool:
    """Whether ``value`` has the shape of a ``tsmg eval`` summary (games with rows of figures)."""
    if not isinstance(value, dict) or not isinstance(value.get("games"), list):
        return False
    for game in value["games"]:
        if not isinstance(game, dict) or not isinstance(game.get("rows"), list):
            return False
        for row in game["rows"]:
            if (
                not isinstance(row, dict)
                or not isinstance(row.get("game"), str)
                or not isinstance(row.get("model"), str)
            ):
                return False
    return True


def _read_metrics(run: RunFolder) -> list[dict[str, Any]]:
    rows = []
    for _, row, problem in read_jsonl(run.path / METRICS_FILE):
        if problem is not None:
            run.problems.append(problem)
        if row is None:
            continue
        step = row.get("step")
        if not isinstance(step, int) or isinstance(step, bool):
            run.problems.append(ReadProblem(METRICS_FILE, None, "a row without an integer step: skipped"))
            continue
        rows.append(row)
    return rows


def recompute_summary(run: RunFolder) -> dict[str, Any] | None:
    """An evaluation summary computed from the run's readable episodes with the harness's own statistics.

    The run's ``config.json`` supplies games, models and prices when it is readable; otherwise
    they are taken from the episodes in the order they appear. None when no episode is readable.
    """
    from tsmg.apps.evaluation.config import EvalConfig
    from tsmg.apps.evaluation.metrics import summarize_eval

    by_game: dict[str, list[Episode]] = defaultdict(list)
    models: dict[str, None] = {}
    for episode in run.statistics_episodes():
        by_game[episode.game_id].append(episode)
        models.update(dict.fromkeys(episode.policies.values()))
    if not by_game:
        return None
    config = None
    if run.config is not None:
        try:
            config = EvalConfig.model_validate(run.config)
        except ValueError:
            config = None
    if config is None or not set(by_game) <= set(config.games) or not set(models) <= set(config.models):
        try:
            config = EvalConfig(games=list(by_game), models=list(models))
        except ValueError:  # policies named other than by a model spec (a script's own policy): tabulate anyway
            config = EvalConfig.model_construct(games=list(by_game), models=list(models))
    summary = summarize_eval(config, by_game)
    summary["completed"] = sum(len(episodes) for episodes in by_game.values())
    return summary


def update_rows(run: RunFolder, updates: set[int] | None) -> list[dict[str, Any]]:
    """Per stored update, game and policy: the harness's figures (Wilson interval included).

    These describe the sampled training episodes kept in ``episodes.jsonl`` (sampled with the
    training temperature, so they differ from the greedy ``eval/`` metrics).
    """
    from tsmg.apps.evaluation.metrics import model_row

    seats: dict[tuple[int, str, str], list[tuple[str, Episode]]] = defaultdict(list)
    for episode in run.statistics_episodes():
        update = update_of({}, episode.episode_id)
        if update is None or (updates is not None and update not in updates):
            continue
        for agent, model in episode.policies.items():
            seats[(update, episode.game_id, model)].append((agent, episode))
    rows = []
    for (update, game_id, model), agent_episodes in sorted(seats.items()):
        rows.append({"update": update, **model_row(game_id, model, agent_episodes, {})})
    return rows


def metric_value(row: dict[str, Any], key: str) -> float | None:
    """A metric of a ``metrics.jsonl`` row as a finite float, or None."""
    return finite(row.get(key))
