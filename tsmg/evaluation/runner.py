"""Run an evaluation plan into a folder, resumably.

The folder holds ``config.json`` (what the run is), ``episodes.jsonl`` (append-only, one
finished episode per line, flushed as each finishes), ``failures.jsonl`` (episodes that could not
finish, with their error), ``summary.json``, ``report.md`` and plots. Rerunning the same command
plays only the planned episodes missing from ``episodes.jsonl``; after a ``kill -9`` a torn last
line is cut off first, so nothing is lost or duplicated.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import IO, Any

from tsmg.episode import Episode, read_episodes
from tsmg.evaluation.config import EvalConfig
from tsmg.evaluation.metrics import summarize_eval
from tsmg.evaluation.plan import PlannedEpisode, plan_evaluation
from tsmg.policies import FixedPolicy, OraclePolicy, Policy, RandomPolicy
from tsmg.rollout import EpisodePlan, rollout

logger = logging.getLogger(__name__)

PolicyFactory = Callable[[str, EvalConfig], Policy]


@dataclass
class EvalResult:
    """What a run achieved.

    Attributes:
        out_dir: The run folder.
        planned: Episodes in the plan.
        completed: Episodes in ``episodes.jsonl`` after the run.
        failures: Episodes that still failed after the retries (with their errors).
        summary: The content of ``summary.json``.
    """

    out_dir: Path
    planned: int
    completed: int
    failures: list[Episode] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether every planned episode completed."""
        return self.completed == self.planned


def build_policy(spec: str, config: EvalConfig) -> Policy:
    """A policy for a model spec: scripted (random, oracle, fixed:TEXT) or a LAP over a backend."""
    if spec == "random":
        return RandomPolicy(seed=config.seed)
    if spec == "oracle":
        return OraclePolicy()
    if spec.startswith("fixed:"):
        return FixedPolicy(spec.removeprefix("fixed:"))
    from backends import load_model  # heavy: imported only when a model is evaluated
    from tsmg.lap import LAP

    return LAP(load_model(spec, **config.model_options.get(spec, {})), config.lap, name=spec)


def repair_jsonl(path: Path) -> int:
    """Cut a torn last line (left by a killed writer) off ``path``; returns the bytes removed."""
    if not path.exists():
        return 0
    with open(path, "rb+") as handle:
        data = handle.read()
        if not data or data.endswith(b"\n"):
            return 0
        keep = data.rfind(b"\n") + 1
        handle.truncate(keep)
        return len(data) - keep


def run_eval(
    config: EvalConfig,
    out_dir: str | Path,
    *,
    concurrency: int = 64,
    retries: int = 1,
    progress: bool = False,
    policy_factory: PolicyFactory = build_policy,
    write_report: bool = True,
    token_ids: bool = True,
) -> EvalResult:
    """Play the missing episodes of the plan and write the summary and report.

    Args:
        config: What to evaluate.
        out_dir: The run folder (created; resumed if it holds the same configuration).
        concurrency: Most episodes live at once per game and matchup.
        retries: Extra attempts for episodes that fail (errors are recorded either way).
        progress: Show a progress bar with ETA and live success rate on stderr.
        policy_factory: Builds the policy of a model spec (built once per spec and run).
        write_report: Also write ``report.md`` and the plots.
        token_ids: Keep the token ids and logprobs in ``episodes.jsonl`` (False: a smaller file
            that training cannot use).

    Raises:
        ConfigMismatchError: the folder holds a run with another configuration.
    """
    folder = Path(out_dir)
    config.check_folder(folder)
    episodes_path = folder / "episodes.jsonl"
    if repair_jsonl(episodes_path):
        logger.warning("cut a torn last line off %s (an interrupted run)", episodes_path)
    plan = plan_evaluation(config)
    done = {episode.episode_id for episode in read_episodes(episodes_path)} if episodes_path.exists() else set()
    todo = [planned for planned in plan if planned.episode_id not in done]
    policies: dict[str, Policy] = {}
    failures: list[Episode] = []
    with open(episodes_path, "a", encoding="utf-8") as sink, _progress(progress, len(todo)) as advance:
        for _attempt in range(retries + 1):
            failures = []
            for (game_id, seats), group in groupby(todo, key=lambda p: (p.game_id, p.seats)):
                for _, spec in seats:
                    if spec not in policies:
                        policies[spec] = policy_factory(spec, config)
                _play(config, game_id, seats, list(group), policies, concurrency, sink, failures, advance, token_ids)
            if not failures:
                break
            failed_ids = {episode.episode_id for episode in failures}
            todo = [planned for planned in todo if planned.episode_id in failed_ids]
    if failures:
        with open(folder / "failures.jsonl", "a", encoding="utf-8") as handle:
            for episode in failures:
                handle.write(episode.to_json() + "\n")
    completed = _completed_in_plan_order(episodes_path, plan)
    by_game: dict[str, list[Episode]] = {}
    for episode in completed:
        by_game.setdefault(episode.game_id, []).append(episode)
    summary = summarize_eval(config, by_game)
    summary["planned"], summary["completed"], summary["failed"] = len(plan), len(completed), len(failures)
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if write_report:
        from tsmg.evaluation.report import write_report as write_markdown_and_plots

        write_markdown_and_plots(summary, folder)
    return EvalResult(folder, len(plan), len(completed), failures, summary)


def _play(
    config: EvalConfig,
    game_id: str,
    seats: tuple[tuple[str, str], ...],
    group: list[PlannedEpisode],
    policies: dict[str, Policy],
    concurrency: int,
    sink: IO[str],
    failures: list[Episode],
    advance: Callable[[Episode], None],
    token_ids: bool = True,
) -> None:
    by_agent = {agent: policies[spec] for agent, spec in seats}
    names = {agent: spec for agent, spec in seats}

    def on_episode(episode: Episode) -> None:
        # Name seats by model spec so summaries group by what the user asked for.
        episode.policies = dict(names)
        if episode.error is not None:
            failures.append(episode)
        else:
            sink.write(episode.to_json(token_ids=token_ids) + "\n")
            sink.flush()
        advance(episode)

    plans = [EpisodePlan(seed=p.seed, episode_id=p.episode_id) for p in group]
    rollout(
        game_id,
        by_agent,
        plans=plans,
        game_options=config.game_options.get(game_id, {}),
        max_concurrent=concurrency,
        on_episode=on_episode,
    )


def _completed_in_plan_order(path: Path, plan: list[PlannedEpisode]) -> list[Episode]:
    if not path.exists():
        return []
    latest = {episode.episode_id: episode for episode in read_episodes(path)}
    return [latest[planned.episode_id] for planned in plan if planned.episode_id in latest]


@contextmanager
def _progress(enabled: bool, total: int) -> Iterator[Callable[[Episode], None]]:
    """A rich progress bar with ETA and the live success rate (a no-op when disabled)."""
    if not enabled or total == 0:
        yield lambda episode: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    counts = {"done": 0, "success": 0, "failed": 0}
    columns = (
        TextColumn("[bold]eval"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.description}"),
    )
    with Progress(*columns, console=Console(file=sys.stderr)) as bar:
        task = bar.add_task("", total=total)

        def advance(episode: Episode) -> None:
            counts["done"] += 1
            counts["failed"] += episode.error is not None
            counts["success"] += any(value for value in episode.success.values())
            rate = counts["success"] / max(counts["done"] - counts["failed"], 1)
            bar.update(task, advance=1, description=f"success {100 * rate:5.1f}%  failed {counts['failed']}")

        yield advance
