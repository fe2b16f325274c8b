"""Episode statistics, in one place: success, return, invalid answers, turns, tokens and latency.

:func:`summarize_seats` is the one computation, over ``(agent, episode)`` pairs (a *seat*: one
agent's play in one episode). Its views: :func:`summarize` (one agent over a list of episodes,
for ``tsmg rollout`` and the demo), :meth:`EpisodeSummary.as_metrics` (the trainer's
``rollout/...`` and ``eval/...`` metrics) and the evaluation harness's per-model rows
(:func:`tsmg.evaluation.metrics.model_row`, which adds confidence intervals and cost).

Example:
    >>> from tsmg.policies import OraclePolicy
    >>> from tsmg.rollout import rollout
    >>> summary = summarize(rollout("FrozenLake-v0", OraclePolicy(), seeds=[0, 1]))
    >>> summary.success_rate, summary.mean_turns
    (1.0, 6.0)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

from tsmg.episode import Episode


@dataclass(frozen=True)
class EpisodeSummary:
    """Aggregate figures of a set of seats (one agent's play in one episode each).

    Attributes:
        episodes: Distinct finished episodes counted (failed ones excluded, see ``failed``).
        failed: Episodes that ended with an error.
        seats: ``(agent, episode)`` pairs counted (``episodes`` x seats per episode).
        success_rate: Fraction of seats that succeeded (None if the game defines no success).
        successes: Seats that succeeded.
        success_trials: Seats whose success is defined.
        mean_return: Mean return per seat.
        return_stderr: Standard error of that mean (sample standard deviation; 0 for one seat).
        mean_rounds: Mean number of game rounds per episode.
        invalid_rate: Invalid answers per decision.
        decisions: Decisions taken in the seats.
        mean_turns: Decisions per seat.
        prompt_tokens: Prompt tokens over every decision.
        completion_tokens: Completion tokens over every decision.
        reasoning_tokens: Of those, tokens spent thinking, where the backend reported them (None
            when no decision reported any).
        mean_latency_s: Mean wall time per decision.
        mean_episode_latency_s: Mean wall time per seat's episode.
        returns: The return of each seat, in order.
    """

    episodes: int
    failed: int
    seats: int
    success_rate: float | None
    successes: int
    success_trials: int
    mean_return: float
    return_stderr: float
    mean_rounds: float
    invalid_rate: float
    decisions: int
    mean_turns: float
    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int | None
    mean_latency_s: float
    mean_episode_latency_s: float
    returns: tuple[float, ...] = field(default=(), repr=False)

    def as_dict(self) -> dict[str, float | int | None]:
        """The figures as a JSON-ready dict (without the per-seat returns)."""
        figures = asdict(self)
        figures.pop("returns")
        return figures

    def as_metrics(self, prefix: str = "rollout/") -> dict[str, float]:
        """The training loop's namespaced metrics (``success_rate`` only where success is defined)."""
        metrics = {
            f"{prefix}episodes": float(self.episodes),
            f"{prefix}failed_episodes": float(self.failed),
            f"{prefix}mean_return": 0.0 if math.isnan(self.mean_return) else self.mean_return,
            f"{prefix}invalid_rate": self.invalid_rate,
            f"{prefix}mean_steps": 0.0 if math.isnan(self.mean_turns) else self.mean_turns,
            f"{prefix}completion_tokens": float(self.completion_tokens),
        }
        if self.success_rate is not None:
            metrics[f"{prefix}success_rate"] = self.success_rate
        return metrics


def summarize_seats(seats: Sequence[tuple[str, Episode]], failed: int = 0) -> EpisodeSummary:
    """The figures of ``seats``: ``(agent, episode)`` pairs of finished episodes.

    Args:
        seats: The seats to count (an episode may appear once per agent counted).
        failed: Episodes that failed and are left out of ``seats`` (reported as they are).
    """
    returns = [episode.returns.get(agent, 0.0) for agent, episode in seats]
    defined = [bool(value) for agent, episode in seats if (value := episode.success.get(agent)) is not None]
    steps = [step for agent, episode in seats for step in episode.steps_of(agent)]
    thinking = [step.reasoning_tokens for step in steps if step.reasoning_tokens is not None]
    episodes = list({id(episode): episode for _, episode in seats}.values())
    count = len(seats)
    if count:
        mean = sum(returns) / count
        variance = sum((value - mean) ** 2 for value in returns) / (count - 1) if count > 1 else 0.0
        stderr = math.sqrt(variance / count)
    else:
        mean = stderr = math.nan
    return EpisodeSummary(
        episodes=len(episodes),
        failed=failed,
        seats=count,
        success_rate=sum(defined) / len(defined) if defined else None,
        successes=sum(defined),
        success_trials=len(defined),
        mean_return=mean,
        return_stderr=stderr,
        mean_rounds=sum(episode.num_rounds for episode in episodes) / len(episodes) if episodes else math.nan,
        invalid_rate=sum(not step.valid for step in steps) / len(steps) if steps else 0.0,
        decisions=len(steps),
        mean_turns=len(steps) / count if count else math.nan,
        prompt_tokens=sum(step.prompt_tokens or 0 for step in steps),
        completion_tokens=sum(step.completion_tokens or 0 for step in steps),
        reasoning_tokens=sum(thinking) if thinking else None,
        mean_latency_s=sum(step.latency_s for step in steps) / len(steps) if steps else 0.0,
        mean_episode_latency_s=sum(episode.latency_s for _, episode in seats) / count if count else 0.0,
        returns=tuple(returns),
    )


def summarize(episodes: Sequence[Episode], agent: str | Iterable[str] | None = None) -> EpisodeSummary:
    """Summarise ``episodes`` from the point of view of ``agent`` (default: the first agent).

    Args:
        episodes: Episodes, failed ones included (they are counted in ``failed`` only).
        agent: One agent, several (each episode then counts once per agent that plays in it),
            or None for the first agent of the first finished episode.
    """
    completed = [episode for episode in episodes if episode.error is None]
    if agent is None:
        agents = [completed[0].agents[0]] if completed else []
        seats = [(agents[0], episode) for episode in completed] if agents else []
    elif isinstance(agent, str):
        seats = [(agent, episode) for episode in completed]
    else:
        wanted = list(agent)
        seats = [(name, episode) for episode in completed for name in wanted if name in episode.agents]
    return summarize_seats(seats, failed=len(episodes) - len(completed))


def summary_line(game_id: str, policy: str, summary: EpisodeSummary) -> str:
    """One line of figures for the terminal (``tsmg rollout``, ``tsmg demo --no-train``)."""
    success = "n/a" if summary.success_rate is None else f"{100 * summary.success_rate:5.1f}%"
    return (
        f"{game_id:<24} {policy:<8} episodes {summary.episodes:>5}  success {success}  "
        f"return {summary.mean_return:+.3f} ± {summary.return_stderr:.3f}  "
        f"rounds {summary.mean_rounds:.2f}  invalid {100 * summary.invalid_rate:.1f}%"
    )
